"""Process-wide settings with torch's names that change no code path: set_printoptions (how a tensor's repr prints
its values, through NumPy's array2string) and set_float32_matmul_precision (kept and answered; minigrad's float32
products are float32 whatever it says, as PyTorch's are off the GPU). The default dtype is dtypes.py's.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["get_float32_matmul_precision", "print_options", "set_float32_matmul_precision", "set_printoptions"]

_PROFILES = {"default": {}, "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
             "full": {"threshold": sys.maxsize}}  # "default": NumPy's own, what a repr here prints untouched
print_options: dict[str, Any] = {}  # keyword arguments of numpy.array2string, for Tensor.__repr__


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print, as torch.set_printoptions: digits after the point, how many elements before eliding,
    how many at each edge, the line width; profile "default", "short" or "full" first, then the others on top;
    sci_mode True (always scientific), False (never), None (as NumPy picks)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile {profile!r} is not one of {sorted(_PROFILES)}")
        print_options.clear()
        print_options.update(_PROFILES[profile])
    given = {"precision": precision, "threshold": threshold, "edgeitems": edgeitems, "linewidth": linewidth}
    print_options.update({k: v for k, v in given.items() if v is not None})
    if sci_mode is not None:
        digits = print_options.get("precision", 8)
        print_options.pop("suppress_small", None)
        print_options.pop("formatter", None)
        if sci_mode:
            print_options["formatter"] = {"float_kind": lambda v: f"{v:.{digits}e}"}
        else:
            print_options["suppress_small"] = True


_MATMUL_PRECISION = ["highest"]


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION[0]


def set_float32_matmul_precision(precision: str) -> None:
    """"highest", "high" or "medium", as torch's: kept, and read back by get_float32_matmul_precision; float32
    products stay float32 here (no TF32 or bfloat16 passes), as PyTorch's do on the CPU."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: {precision!r} is not one of 'highest', 'high' or 'medium'")
    _MATMUL_PRECISION[0] = precision

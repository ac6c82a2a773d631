"""torch.backends' switches a training script sets: cuda.matmul.allow_tf32 and cudnn.allow_tf32. They are settable and,
as PyTorch's off the GPU, change nothing: minigrad's matrix products run in the dtype of their inputs (no TF32).
"""

from __future__ import annotations

import types
from typing import Any

__all__ = ["Flags", "cuda", "cudnn"]


class Flags:
    """A set of named switches: each may be read and set; a name that is not one of them is an AttributeError."""

    def __init__(self, **flags: Any) -> None:
        object.__setattr__(self, "flags", dict(flags))

    def __getattr__(self, name: str) -> Any:
        try:
            return self.flags[name]
        except KeyError:
            raise AttributeError(f"no flag {name!r}: the flags here are {sorted(self.flags)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self.flags:
            raise AttributeError(f"no flag {name!r}: the flags here are {sorted(self.flags)}")
        self.flags[name] = value

    def __repr__(self) -> str:
        return f"Flags({', '.join(f'{k}={v!r}' for k, v in self.flags.items())})"


cuda = types.SimpleNamespace(matmul=Flags(allow_tf32=False))  # PyTorch's defaults
cudnn = Flags(allow_tf32=True, benchmark=False, deterministic=False, enabled=True)

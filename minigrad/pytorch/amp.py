"""torch.amp's names, which a training script uses around its step: autocast and GradScaler. minigrad has no mixed
precision (every op runs in its inputs' dtype), so both pass through, as PyTorch's do where CUDA is missing: disabled,
with a warning where they were asked to be enabled. torch.cuda.amp's names are these (minigrad/pytorch/cuda.py).
"""

from __future__ import annotations

import warnings
from typing import Any

from minigrad.array.backend import DEVICES
from minigrad.tensor import Tensor

__all__ = ["GradScaler", "autocast"]


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True): a context manager (or decorator) that changes nothing
    here: ops run in their inputs' dtypes. enabled=True warns once per use and disables itself, as PyTorch's does for
    'cuda' without a GPU; enabled=False is silent, as there. An unknown device type is refused, as there."""

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True, cache_enabled: bool | None = None) \
            -> None:
        if str(device_type) not in DEVICES:
            raise RuntimeError(f"autocast: expected a device type in {DEVICES}, got {device_type!r}")
        self.device_type, self.fast_dtype = str(device_type), dtype
        if enabled:
            warnings.warn(f"autocast({device_type!r}): minigrad has no mixed precision; ops run in their inputs' "
                          "dtypes. Disabling autocast.", UserWarning, stacklevel=2)
        self.enabled = False

    def __enter__(self) -> autocast:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, fn: Any) -> Any:  # @autocast(...) on a function: the function itself, as nothing changes
        return fn


class GradScaler:
    """torch.cuda.amp.GradScaler as PyTorch runs it without CUDA (or with enabled=False): disabled, so that scale(loss)
    is loss itself, step(optimizer) is optimizer.step(), and unscale_ and update do nothing. minigrad has no float16
    autocast, so enabled=True warns and disables itself, as PyTorch's does where CUDA is missing."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if enabled:
            warnings.warn("GradScaler is enabled, but minigrad has no float16 autocast to scale for. Disabling.",
                          UserWarning, stacklevel=2)
        self.enabled = False

    def is_enabled(self) -> bool:
        return self.enabled

    def scale(self, outputs: Tensor | Any) -> Tensor | Any:
        """The loss (or losses) unchanged: a disabled scaler multiplies by nothing."""
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        """Nothing to divide out when disabled."""

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """optimizer.step(*args, **kwargs), and its return value."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | None = None) -> None:
        """Nothing to update when disabled."""

    def get_scale(self) -> float:
        """1.0, PyTorch's answer for a disabled scaler."""
        return 1.0

    def state_dict(self) -> dict[str, Any]:
        """{} when disabled, as PyTorch's."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to restore when disabled."""

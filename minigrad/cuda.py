"""torch.cuda's names a training script reaches for: is_available (CuPy sees a GPU), manual_seed_all, is_bf16_supported
(never: NumPy and CuPy have no bfloat16) and amp.GradScaler, which passes through as PyTorch's does without CUDA
(there is no float16 autocast here, so there is nothing to scale).
"""

from __future__ import annotations

import types
import warnings
from typing import Any

from minigrad import backend
from minigrad.tensor import Tensor

__all__ = ["GradScaler", "amp", "device_count", "is_available", "is_bf16_supported", "manual_seed", "manual_seed_all"]


def is_available() -> bool:
    """True where CuPy is installed and finds a GPU, as torch.cuda.is_available."""
    return backend.cuda_available()


def device_count() -> int:
    """1 where a GPU is usable (minigrad runs on one), else 0."""
    return int(backend.cuda_available())


def manual_seed_all(seed: int) -> None:
    """Seed the GPU's generator (the CPU's is mg.manual_seed's); silently nothing without a GPU, as in PyTorch."""
    if backend.cuda_available():
        backend.manual_seed_device("cuda", seed)


manual_seed = manual_seed_all  # one GPU: "all" and "the current one" are the same


def is_bf16_supported() -> bool:
    """False: neither NumPy nor CuPy has a bfloat16 dtype (mg.bfloat16 refuses; mg.float16 is IEEE half)."""
    return False


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


amp = types.SimpleNamespace(GradScaler=GradScaler)  # torch.cuda.amp.GradScaler

"""torch.cuda's names a training script reaches for: is_available (CuPy sees a GPU), manual_seed_all, is_bf16_supported
(never: NumPy and CuPy have no bfloat16) and amp.GradScaler and amp.autocast, which pass through as PyTorch's do
without CUDA (minigrad/pytorch/amp.py).
"""

from __future__ import annotations

import functools
import types

from minigrad.array import backend
from minigrad.pytorch.amp import GradScaler, autocast

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


# torch.cuda.amp's names (minigrad/pytorch/amp.py); its autocast is torch.autocast('cuda', ...), as there
amp = types.SimpleNamespace(GradScaler=GradScaler, autocast=functools.partial(autocast, "cuda"))

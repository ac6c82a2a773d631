"""torch.accelerator's names, answered as PyTorch answers them: the accelerator is CUDA where CuPy finds a GPU;
without one, is_available() is False, current_accelerator() None, device_count() 0, and asking for the device
refuses in one line, as there.
"""

from __future__ import annotations

from minigrad.array import backend

__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available", "set_device_index",
           "synchronize"]


def is_available() -> bool:
    return backend.cuda_available()


def current_accelerator(check_available: bool = False) -> backend.device | None:
    """mg.device("cuda") where a GPU is usable, else None."""
    return backend.device("cuda") if backend.cuda_available() else None


def device_count() -> int:
    return int(backend.cuda_available())


def _check(op: str) -> None:
    if not backend.cuda_available():
        raise RuntimeError(f"accelerator.{op}: Cannot access accelerator device when none is available.")


def current_device_index() -> int:
    _check("current_device_index")
    return 0


def set_device_index(device: int) -> None:
    _check("set_device_index")
    if device not in (0, -1):
        raise RuntimeError(f"accelerator.set_device_index: device {device} does not exist; minigrad runs on GPU 0")


def synchronize(device: int | None = None) -> None:
    """Wait for the GPU's work to finish."""
    _check("synchronize")
    backend.synchronize("cuda")

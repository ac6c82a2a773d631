"""The one module that knows NumPy (device "cpu") and CuPy (device "cuda") apart.

Everything else asks `get_array_module(array)` for the array module of its inputs, so one code path
serves both devices. The one operation the two spell differently, scatter-add, is `scatter_add` here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # CuPy is an optional extra: pip install 'minigrad[cuda12]' or 'minigrad[cuda13]'
    import cupy
    import cupyx
except ImportError:
    cupy = None
    cupyx = None

DEVICES = ("cpu", "cuda")
Array = Any  # numpy.ndarray or cupy.ndarray


def cuda_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    if cupy is None:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError:
        return False


def check_device(device: str) -> str:
    """Return `device` if this machine can use it, else raise a clear error saying why not."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected one of {DEVICES}")
    if device == "cuda" and not cuda_available():
        why = "CuPy is not installed" if cupy is None else "CuPy finds no GPU"
        raise RuntimeError(
            f"device 'cuda' requested but {why}; "
            "install the extra matching your CUDA (pip install 'minigrad[cuda12]' or '[cuda13]')"
        )
    return device


def get_array_module(array: Array):
    """numpy or cupy, whichever owns `array` (as DeZero's cuda.get_array_module)."""
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return np


def device_of(array: Array) -> str:
    return "cuda" if get_array_module(array) is not np else "cpu"


def module_for(device: str):
    """The array module that allocates on `device`."""
    return cupy if check_device(device) == "cuda" else np


def to_device(array: Array, device: str) -> Array:
    """`array` on `device`, copied only when it lives elsewhere."""
    if device_of(array) == device:
        return array
    return cupy.asarray(array) if check_device(device) == "cuda" else cupy.asnumpy(array)


def synchronize(device: str) -> None:
    """Wait until the device has finished the work queued so far (for timings); a no-op on the CPU."""
    if device == "cuda":
        cupy.cuda.Device().synchronize()


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that broadcasting gives (ValueError if none): arithmetic on shapes, the same on every
    device, so NumPy's serves CuPy arrays too."""
    return np.broadcast_shapes(*shapes)


def to_numpy(array: Array) -> np.ndarray:
    """A NumPy array, copied from the GPU where needed."""
    return cupy.asnumpy(array) if device_of(array) == "cuda" else np.asarray(array)


def scatter_add(target: Array, indices: Any, values: Array) -> None:
    """target[indices] += values, with repeated indices accumulating (unlike plain `+=`)."""
    if device_of(target) == "cuda":
        cupyx.scatter_add(target, indices, values)
    elif getattr(indices, "ndim", None) == 1 and indices.size:
        # speed: rows of an embedding. np.add.at goes row by row, so sort the indices instead and sum
        # each run of equal ones with a single reduceat
        order = np.argsort(indices, kind="stable")
        rows = indices[order]
        starts = np.flatnonzero(np.diff(rows, prepend=rows[0] - 1))
        target[rows[starts]] += np.add.reduceat(values[order], starts, axis=0)
    else:
        np.add.at(target, indices, values)


# ---- random numbers: one seeded generator per device ----

_generators: dict[str, Any] = {}


def manual_seed(seed: int) -> None:
    """Seed the generators behind randn, dropout and parameter initialisation on every device."""
    _generators["cpu"] = np.random.default_rng(seed)
    if cuda_available():
        _generators["cuda"] = cupy.random.default_rng(seed)


def generator(device: str):
    if device not in _generators:
        _generators[device] = module_for(device).random.default_rng()
    return _generators[device]

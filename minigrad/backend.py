"""The one module that knows NumPy (device "cpu") and CuPy (device "cuda") apart.

Everything else asks `get_array_module(array)` for the array module of its inputs, so one code path
serves both devices. The one operation the two spell differently, scatter-add, is `scatter_add` here.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
        # rows of an embedding: np.add.at goes row by row, so sort the indices instead and sum each
        # run of equal ones with a single reduceat
        order = np.argsort(indices, kind="stable")
        rows = indices[order]
        starts = np.flatnonzero(np.diff(rows, prepend=rows[0] - 1))
        target[rows[starts]] += np.add.reduceat(values[order], starts, axis=0)
    else:
        np.add.at(target, indices, values)


# ---- using every CPU core for long elementwise passes ----

_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_pool: ThreadPoolExecutor | None = None
_MIN_PARALLEL = 1 << 23  # elements; below, threads cost more than they save (AdamW, measured: 3M slower, 200M faster)


def run_parallel(fn: Callable[[Any], None], items: list[Any], device: str, elements: int) -> None:
    """fn(item) for every item, spread over the CPU's cores.

    NumPy releases the GIL inside each ufunc, so elementwise passes over separate chunks of an array
    run in parallel, as PyTorch splits its CPU kernels between threads. The optimizer uses it: its
    update is pure memory traffic over the whole model. (Softmax, layer norm and GELU gained nothing
    from it inside a training step, measured, so they stay single-threaded and simple.) A single
    item, GPU work, or little work in all (`elements` in all items) runs here, one item after another.
    """
    global _pool
    if len(items) == 1 or device == "cuda" or _threads == 1 or elements < _MIN_PARALLEL:
        for item in items:
            fn(item)
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(_threads, thread_name_prefix="minigrad")
    for _ in _pool.map(fn, items):  # consuming the results re-raises any exception here
        pass


def chunk_size(device: str) -> int:
    """Elements per chunk for long elementwise passes (the optimizer's). On the CPU, the several
    passes of an update then run over arrays that stay in cache (2^17 float32 = 512 KiB each; measured
    best on a 2-core EPYC, see benchmarks/); on the GPU one kernel over everything is best."""
    return 1 << 17 if device == "cpu" else 1 << 62


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


# ---- allocator: keep large training temporaries in the heap ----

def _keep_large_blocks_in_heap() -> None:
    """Ask glibc to serve big arrays from the heap and keep freed memory for reuse.

    By default glibc maps every large block (over 128 KiB, adaptively up to 32 MiB) straight from
    the OS and unmaps it on free, so a training step that makes the same large temporaries every
    time pays the page faults of touching new memory again and again. With mmap off and heap
    trimming off, a freed block is reused by the next step. Set MINIGRAD_GLIBC_DEFAULTS=1
    to keep glibc's defaults. The effect is measured in benchmarks/README.md.
    """
    if not sys.platform.startswith("linux") or os.environ.get("MINIGRAD_GLIBC_DEFAULTS") == "1":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, ...): nothing to tune
        return
    m_trim_threshold, m_mmap_max = -1, -4
    libc.mallopt(m_mmap_max, 0)  # no block is mmap'd: all come from the heap
    libc.mallopt(m_trim_threshold, -1)  # -1: never give freed heap memory back; the next step reuses it


_keep_large_blocks_in_heap()

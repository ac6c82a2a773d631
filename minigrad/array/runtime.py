"""Process-wide runtime settings, none of them a code path: glibc's heap setting for whole training runs, the
thread pool that long elementwise passes share (the fused AdamW), each process's share of the cores when
several train on one machine, and the memory a process may still take. Importing minigrad calls none of them.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from minigrad.array import backend

# ---- allocator ----

HUGE_HEAP = 256 << 20  # bytes of heap asked to be backed by 2 MiB pages


def keep_large_blocks_in_heap() -> None:
    """Ask glibc to serve big arrays from the heap and keep freed memory for reuse, so that a training step,
    which makes the same large temporaries every time, stops paying the page faults of fresh memory; and ask Linux
    for 2 MiB pages under the heap's first HUGE_HEAP bytes, which spare the CPU's address cache most of its misses
    over a step's arrays (docs/performance.md measures both). MINIGRAD_GLIBC_DEFAULTS=1 keeps glibc's defaults."""
    if not sys.platform.startswith("linux") or os.environ.get("MINIGRAD_GLIBC_DEFAULTS") == "1":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, ...): nothing to tune
        return
    m_trim_threshold, m_mmap_max = -1, -4
    libc.mallopt(m_mmap_max, 0)  # no block is mmap'd: all come from the heap
    libc.mallopt(m_trim_threshold, -1)  # -1: never give freed heap memory back; the next step reuses it
    # the heap grown by HUGE_HEAP at once (address space only: a page takes memory once written), then marked for
    # huge pages: Linux's usual setting gives them only where madvise asks (a later growth is a region of its own),
    # and NumPy asks for arrays of 4 MiB and more only
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.free(libc.malloc(HUGE_HEAP))
    madv_hugepage = 14
    with open("/proc/self/maps") as regions:
        for line in regions:
            if line.rstrip().endswith("[heap]"):
                start, end = (int(address, 16) for address in line.split()[0].split("-"))
                libc.madvise(start, end - start, madv_hugepage)


# ---- threads ----

def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_threads = usable_cores()
_pool: ThreadPoolExecutor | None = None
MIN_PARALLEL = 1 << 23  # elements; below, threads cost more than they save (docs/performance.md)


def _forget_pool() -> None:
    """After fork the child has the parent's pool object but none of its threads: start a new one on use."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def threads() -> int:
    """How many threads run_parallel spreads its work over."""
    return _threads


def run_parallel(fn: Callable[[Any], None], items: list[Any], device: str, elements: int) -> None:
    """fn(item) for every item, spread over the CPU's cores (NumPy releases the GIL inside each ufunc). A
    single item, GPU work, or fewer than MIN_PARALLEL `elements` in all run here, one after another."""
    global _pool
    if len(items) == 1 or device == "cuda" or _threads == 1 or elements < MIN_PARALLEL:
        for item in items:
            fn(item)
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(_threads, thread_name_prefix="minigrad")
    for _ in _pool.map(fn, items):  # consuming the results re-raises any exception here
        pass


def share_cores(processes: int) -> None:
    """This process's share of the cores when `processes` train on one machine (mpiexec's ranks on one host):
    NumPy's BLAS (through threadpoolctl, in the mpi extra) and run_parallel use cores / processes threads.
    Without it each BLAS starts a thread per core, and the waiting threads spin against the others' work."""
    global _threads
    _threads = max(1, _threads // processes)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(_threads, user_api="blas")


# ---- memory ----

def available_memory(device: str) -> int:
    """Bytes this run may use: the GPU's free memory, or Linux's MemAvailable (elsewhere, all of the RAM)."""
    if device == "cuda":
        return backend.module_for("cuda").cuda.runtime.memGetInfo()[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

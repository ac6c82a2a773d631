"""Opt-in speed machinery, all of it in one place; a first-time reader can skip this file.

- `keep_large_blocks_in_heap()`: a glibc allocator setting, for whole training runs (train.py and
  benchmarks/bench.py call it; importing minigrad does not).
- `fused_adamw_step(opt)`: what `AdamW(..., fused=True).step()` runs: the rule of `AdamW.update`,
  computed in place, chunk by chunk, on every CPU core, with one scratch buffer per thread.
- `run_parallel` and `chunk_size`: the thread pool and the chunking behind it.
- `share_cores(n)`: for n processes training side by side on one machine (mpiexec), a share each.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from minigrad import backend

# ---- allocator: keep large training temporaries in the heap ----

def keep_large_blocks_in_heap() -> None:
    """Ask glibc to serve big arrays from the heap and keep freed memory for reuse (process-wide).

    By default glibc maps every large block (over 128 KiB, adaptively up to 32 MiB) straight from
    the OS and unmaps it on free, so a training step that makes the same large temporaries every
    time pays the page faults of touching new memory again and again. With mmap off and heap
    trimming off, a freed block is reused by the next step; the process keeps its peak memory.
    MINIGRAD_GLIBC_DEFAULTS=1 keeps glibc's defaults (to measure the difference). The effect is
    measured in docs/performance.md.
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


# ---- using every CPU core for long elementwise passes ----

_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_pool: ThreadPoolExecutor | None = None
_MIN_PARALLEL = 1 << 23  # elements; below, threads cost more than they save (AdamW, measured: 3M slower, 200M faster)


def run_parallel(fn: Callable[[Any], None], items: list[Any], device: str, elements: int) -> None:
    """fn(item) for every item, spread over the CPU's cores.

    NumPy releases the GIL inside each ufunc, so elementwise passes over separate chunks of an array
    run in parallel, as PyTorch splits its CPU kernels between threads. The fused optimizer uses it:
    its update is pure memory traffic over the whole model. (Softmax, layer norm and GELU gained
    nothing from it inside a training step, measured, so they stay single-threaded and simple.) A
    single item, GPU work, or little work in all (`elements` in all items) runs here, one item after
    another. The pool starts on first use.
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


def share_cores(processes: int) -> None:
    """Give this process its share of the cores when `processes` of them train on one machine (the ranks
    of mpiexec on one host): NumPy's BLAS and run_parallel then use cores / processes threads each.
    Otherwise each BLAS starts a thread per core, and the threads that wait spin against the others'
    work: 2 ranks on 2 cores trained over ten times slower here. Limiting the BLAS needs threadpoolctl
    (the mpi extra installs it); without it, only run_parallel is limited.
    """
    global _threads
    _threads = max(1, _threads // processes)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(_threads, user_api="blas")


def chunk_size(device: str) -> int:
    """Elements per chunk for long elementwise passes (the optimizer's). On the CPU, the several
    passes of an update then run over arrays that stay in cache (2^17 float32 = 512 KiB each; measured
    best on a 2-core EPYC); on the GPU one kernel over everything is best."""
    return 1 << 17 if device == "cpu" else 1 << 62


def _pieces(p: Any, g: Any, state: dict[str, Any], size: int) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Views of at most `size` elements of a parameter array, its gradient and its state buffers.

    An array that is not C-contiguous (nn.Parameter(W.T)) would be copied by reshape(-1), and an
    update written into the copy lost: such a parameter is one piece, in its own shape.
    """
    if not all(a.flags.c_contiguous for a in (p, *state.values())):
        yield p, g, state
        return
    flat_p, flat_g = p.reshape(-1), g.reshape(-1)
    flat_state = {k: v.reshape(-1) for k, v in state.items()}
    for start in range(0, p.size, size):
        chunk = slice(start, start + size)
        yield flat_p[chunk], flat_g[chunk], {k: v[chunk] for k, v in flat_state.items()}


def _scratch_for(scratch: threading.local, piece: Any) -> Any:
    """A scratch array shaped like `piece`, one buffer per thread, reused from piece to piece."""
    key = (backend.device_of(piece), piece.dtype)
    buffers = scratch.__dict__
    if key not in buffers or buffers[key].size < piece.size:
        buffers[key] = backend.get_array_module(piece).empty(piece.size, dtype=piece.dtype)
    return buffers[key][: piece.size].reshape(piece.shape)


# ---- the fused AdamW update ----

def fused_adamw_step(opt: Any) -> None:
    """AdamW(..., fused=True).step() after counting the step: every parameter with a gradient
    updated in place, in cache-sized pieces spread over the cores, with no temporary the size of
    the model. The same rule as AdamW.update, in the order torch.optim.AdamW computes it."""
    jobs = [(group, *piece) for group, p, state in opt.with_state() if p.grad is not None
            for piece in _pieces(p.data, p.grad, state, chunk_size(p.device))]
    if not jobs:
        return
    scratch = threading.local()  # this step's scratch buffers, one per thread

    def update(job: tuple) -> None:
        group, p, g, state = job
        _adamw_in_place(p, g, state["m"], state["v"], _scratch_for(scratch, p), group, opt.step_count)

    run_parallel(update, jobs, backend.device_of(jobs[0][1]), sum(job[1].size for job in jobs))


def _adamw_in_place(p: Any, g: Any, m: Any, v: Any, tmp: Any, group: dict[str, Any], t: int) -> None:
    """p -= lr * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), with every result written in place."""
    xp = backend.get_array_module(p)
    lr, (b1, b2) = group["lr"], group["betas"]
    if group["weight_decay"]:
        p *= 1 - lr * group["weight_decay"]
    m *= b1
    xp.multiply(g, 1 - b1, out=tmp)
    m += tmp
    v *= b2
    xp.multiply(g, g, out=tmp)
    tmp *= 1 - b2
    v += tmp
    xp.sqrt(v, out=tmp)  # the denominator, sqrt(v / (1 - b2^t)) + eps, built in tmp
    tmp *= 1 / math.sqrt(1 - b2**t)
    tmp += group["eps"]
    xp.divide(m, tmp, out=tmp)
    tmp *= lr / (1 - b1**t)
    p -= tmp

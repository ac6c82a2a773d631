"""minigrad/array/runtime.py: importing minigrad changes nothing process-wide (the allocator setting is opt-in), the
CPU thread-parallel path (runtime.run_parallel, used by AdamW(fused=True)) gives the same numbers as one thread,
and the thread pool is made anew in a forked child.

Small test sizes normally stay below the size where work is split between threads, so these tests
lower that threshold to one element and compare against the sequential result, bit for bit.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad.array import runtime
from minigrad.optim import AdamW

REPO = Path(__file__).resolve().parents[1]

# Records every function looked up in a C library loaded through ctypes: libc.mallopt goes through here.
IMPORT_THEN_OPT_IN = """
import ctypes
import threading
used = []
class SpyCDLL(ctypes.CDLL):
    def __getitem__(self, name):
        used.append(name)
        return super().__getitem__(name)
ctypes.CDLL = SpyCDLL
import minigrad, minigrad.array.runtime, minigrad.optim, minigrad.check.gradcheck_cases, models
assert "mallopt" not in used, used
assert threading.active_count() == 1, threading.enumerate()  # no thread pool either
minigrad.array.runtime.keep_large_blocks_in_heap()
assert "mallopt" in used, used  # the spy sees the explicit call
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="the allocator setting exists for glibc only")
def test_importing_minigrad_leaves_the_allocator_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_GLIBC_DEFAULTS"}
    done = subprocess.run([sys.executable, "-c", IMPORT_THEN_OPT_IN], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


HEAP_IN_HUGE_PAGES = """
import minigrad.array.runtime, numpy as np
minigrad.array.runtime.keep_large_blocks_in_heap()
a = np.ones(1 << 20 >> 3)  # 1 MiB: NumPy asks for huge pages itself only from 4 MiB on
inside = False
for line in open("/proc/self/smaps").read().splitlines():  # each region's first line, then its fields
    fields = line.split()
    if "-" in fields[0] and len(fields) >= 5:
        start, end = (int(x, 16) for x in fields[0].split("-"))
        inside = start <= a.ctypes.data < end
    elif inside and line.startswith("VmFlags:"):
        print("hg" in fields)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="the allocator setting exists for glibc on Linux only")
def test_the_heap_setting_asks_for_huge_pages_over_the_heap() -> None:
    """After keep_large_blocks_in_heap a 1 MiB array lies in a region marked for huge pages (`hg` in smaps),
    whatever the kernel then grants (its setting may be `never`)."""
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_GLIBC_DEFAULTS"}
    done = subprocess.run([sys.executable, "-c", HEAP_IN_HUGE_PAGES], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"], done.stdout


@pytest.fixture
def threads_always(monkeypatch):
    if runtime.threads() == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    monkeypatch.setattr(runtime, "MIN_PARALLEL", 1)


def test_parallel_adamw_matches_one_thread(monkeypatch):
    calls = []
    def train(parallel: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        params = [mg.nn.Parameter(rng.standard_normal(s)) for s in ((33, 5), (7,), (64,))]
        opt = AdamW(params, lr=0.1, weight_decay=0.1, fused=True)
        with monkeypatch.context() as m:
            m.setattr(AdamW, "piece", {"cpu": 16, "cuda": 16})
            if parallel:
                m.setattr(runtime, "MIN_PARALLEL", 1)
                m.setattr(runtime, "run_parallel", _spy(runtime.run_parallel, calls))
            for _ in range(3):
                for p in params:
                    p.grad = mg.tensor(rng.standard_normal(p.shape))
                opt.step()
        return [p.numpy().copy() for p in params]

    if runtime.threads() == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    for a, b in zip(train(True), train(False), strict=True):
        np.testing.assert_array_equal(a, b)
    assert calls and all(n > 2 for n in calls), "the update must have been split into several jobs"


def _spy(fn, calls):
    def wrapped(f, items, *args, **kwargs):
        calls.append(len(items))
        return fn(f, items, *args, **kwargs)

    return wrapped


def test_an_exception_in_a_worker_reaches_the_caller(threads_always):
    def fail(item):
        if item == 1:
            raise ValueError("block 1 failed")

    with pytest.raises(ValueError, match="block 1 failed"):
        runtime.run_parallel(fail, [0, 1, 2], "cpu", elements=10**6)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork exists on POSIX only")
def test_a_forked_child_starts_its_own_thread_pool(monkeypatch):
    """A fused AdamW step large enough for the pool, then fork, then another step in the child: the child's copy of
    the pool has no threads, so without a new pool it would hang."""
    if runtime.threads() == 1:
        pytest.skip("one CPU core: no thread pool")
    monkeypatch.setattr(runtime, "MIN_PARALLEL", 1)
    p = mg.nn.Parameter(np.ones(1000))
    p.grad = mg.tensor(np.ones(1000))
    opt = AdamW([p], lr=0.1, fused=True)
    monkeypatch.setattr(AdamW, "piece", {"cpu": 100, "cuda": 100})
    opt.step()
    pid = os.fork()
    if pid == 0:  # the child: one more step, then report by exit status
        try:
            opt.step()
            os._exit(0 if np.isfinite(p.numpy()).all() else 1)
        finally:
            os._exit(2)
    for _ in range(200):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        import time
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child's optimizer step hung: the thread pool did not survive the fork")
    assert os.waitstatus_to_exitcode(status) == 0

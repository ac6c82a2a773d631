"""minigrad/fast.py: importing minigrad changes nothing process-wide (the allocator setting is opt-in),
and the CPU thread-parallel path (fast.run_parallel, used by AdamW(fused=True)) gives the same numbers
as one thread.

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
from minigrad import fast
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
import minigrad, minigrad.fast, minigrad.optim, minigrad.gradcheck_cases, models
assert "mallopt" not in used, used
assert threading.active_count() == 1, threading.enumerate()  # no thread pool either
minigrad.fast.keep_large_blocks_in_heap()
assert "mallopt" in used, used  # the spy sees the explicit call
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="the allocator setting exists for glibc only")
def test_importing_minigrad_leaves_the_allocator_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_GLIBC_DEFAULTS"}
    done = subprocess.run([sys.executable, "-c", IMPORT_THEN_OPT_IN], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture
def threads_always(monkeypatch):
    if fast._threads == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    monkeypatch.setattr(fast, "_MIN_PARALLEL", 1)


def test_parallel_adamw_matches_one_thread(monkeypatch):
    calls = []
    def train(parallel: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        params = [mg.nn.Parameter(rng.standard_normal(s)) for s in ((33, 5), (7,), (64,))]
        opt = AdamW(params, lr=0.1, weight_decay=0.1, fused=True)
        with monkeypatch.context() as m:
            m.setattr(fast, "chunk_size", lambda device: 16)
            if parallel:
                m.setattr(fast, "_MIN_PARALLEL", 1)
                m.setattr(fast, "run_parallel", _spy(fast.run_parallel, calls))
            for _ in range(3):
                for p in params:
                    p.grad = rng.standard_normal(p.shape)
                opt.step()
        return [p.data.copy() for p in params]

    if fast._threads == 1:
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
        fast.run_parallel(fail, [0, 1, 2], "cpu", elements=10**6)

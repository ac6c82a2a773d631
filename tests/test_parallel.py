"""The CPU thread-parallel path (backend.run_parallel, used by the optimizers) gives the same numbers
as one thread.

Small test sizes normally stay below the size where work is split between threads, so these tests
lower that threshold to one element and compare against the sequential result, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend
from minigrad.optim import AdamW


@pytest.fixture
def threads_always(monkeypatch):
    if backend._threads == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    monkeypatch.setattr(backend, "_MIN_PARALLEL", 1)


def test_parallel_adamw_matches_one_thread(monkeypatch):
    calls = []
    def train(parallel: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        params = [mg.nn.Parameter(rng.standard_normal(s)) for s in ((33, 5), (7,), (64,))]
        opt = AdamW(params, lr=0.1, weight_decay=0.1)
        with monkeypatch.context() as m:
            m.setattr(backend, "chunk_size", lambda device: 16)
            if parallel:
                m.setattr(backend, "_MIN_PARALLEL", 1)
                m.setattr(backend, "run_parallel", _spy(backend.run_parallel, calls))
            for _ in range(3):
                for p in params:
                    p.grad = rng.standard_normal(p.shape)
                opt.step()
        return [p.data.copy() for p in params]

    if backend._threads == 1:
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
        backend.run_parallel(fail, [0, 1, 2], "cpu", elements=10**6)

"""The CPU thread-parallel paths (backend.run_parallel) give the same numbers as one thread.

Small test shapes normally stay below the size where work is split between threads, so these tests
lower that threshold to one element and compare against the sequential result, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend
from minigrad.gradcheck import CASES
from minigrad.optim import AdamW

SPLIT_OPS = ("softmax", "layer_norm", "gelu", "composite")  # the primitives that split their work in blocks


def run_case(case, device):
    inputs = case.inputs(device)
    out = case.fn(*inputs)
    out.backward(backend.to_device(np.random.default_rng(1).standard_normal(out.shape), device))
    return out.numpy(), [t.grad.copy() for t in inputs]


@pytest.fixture
def threads_always(monkeypatch):
    if backend._threads == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    monkeypatch.setattr(backend, "_MIN_PARALLEL", 1)


@pytest.mark.parametrize("case", [c for c in CASES if c.name.startswith(SPLIT_OPS)], ids=lambda c: c.name)
def test_split_primitives_match_one_thread(case, monkeypatch):
    sequential = run_case(case, "cpu")
    if backend._threads == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    monkeypatch.setattr(backend, "_MIN_PARALLEL", 1)
    assert len(backend.blocks(4, "cpu")) > 1, "the threshold patch must make the work split"
    parallel = run_case(case, "cpu")
    np.testing.assert_array_equal(parallel[0], sequential[0])
    for p, s in zip(parallel[1], sequential[1], strict=True):
        np.testing.assert_array_equal(p, s)
    mg.gradcheck(case.fn, *case.inputs("cpu"))  # and the parallel backward is right on its own


def test_parallel_adamw_matches_one_thread(monkeypatch):
    def train(parallel: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        params = [mg.nn.Parameter(rng.standard_normal(s)) for s in ((33, 5), (7,), (64,))]
        opt = AdamW(params, lr=0.1, weight_decay=0.1)
        with monkeypatch.context() as m:
            m.setattr(backend, "chunk_size", lambda device: 16)
            if parallel:
                m.setattr(backend, "_MIN_PARALLEL", 1)
            for _ in range(3):
                for p in params:
                    p.grad = rng.standard_normal(p.shape)
                opt.step()
        return [p.data.copy() for p in params]

    if backend._threads == 1:
        pytest.skip("one CPU core: nothing runs in parallel")
    for a, b in zip(train(True), train(False), strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_exception_in_a_worker_reaches_the_caller(threads_always):
    def fail(item):
        if item == 1:
            raise ValueError("block 1 failed")

    with pytest.raises(ValueError, match="block 1 failed"):
        backend.run_parallel(fail, [0, 1, 2], "cpu", elements=10**6)

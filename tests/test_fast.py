"""fast.enable(): the fused forward and backward passes of GELU (tanh), softmax and layer norm, and the
fused forward of cross-entropy, give the plain passes' values and gradients to float rounding, in
float32 and float64 (GELU's rows split over several blocks: the block size is lowered so that small
shapes cross block boundaries, with a last block that is not full; rows short and long, masked,
ignored targets, empty inputs), and disable() puts the plain passes back.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend, fast
from minigrad import functional as F
from minigrad.functional import GeluFunction, SoftmaxFunction
from minigrad.losses import CrossEntropyFunction
from minigrad.normalization import LayerNormFunction

TARGETS = np.array([[0, 3, -1, 9], [9, 9, 1, -1], [2, -1, 5, 4]])  # (3, 4); -1: ignored

CASES = {
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), [(3, 7, 10)]),
    "softmax": (lambda x: F.softmax(x), [(2, 3, 5, 9)]),
    "softmax, axis 1": (lambda x: F.softmax(x, axis=1), [(4, 6, 3)]),
    "softmax, masked rows": (lambda x: F.softmax(F.masked_fill(x, F.causal_mask(6), float("-inf"))), [(2, 6, 6)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, 12, w, b), [(5, 7, 12), (12,), (12,)]),
    "layer_norm, weight only": (lambda x, w: F.layer_norm(x, 12, w), [(9, 12), (12,)]),
    "layer_norm, no affine": (lambda x: F.layer_norm(x, 12), [(3, 4, 12)]),
    "softmax, short rows": (lambda x: F.softmax(x), [(5, 70)]),
    "softmax, long rows": (lambda x: F.softmax(x), [(5, 3, 130)]),
    "gelu, empty": (lambda x: F.gelu(x, approximate="tanh"), [(0, 5)]),
    "layer_norm, no rows": (lambda x, w, b: F.layer_norm(x, 12, w, b), [(0, 12), (12,), (12,)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1), [(3, 4, 10)]),
    "cross_entropy, smoothing, sum": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1, reduction="sum",
                                                                label_smoothing=0.1), [(3, 4, 10)]),
    "cross_entropy, none": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1, reduction="none"), [(3, 4, 10)]),
    "cross_entropy, every target ignored": (lambda x: F.cross_entropy(x, np.full((3, 4), -1), ignore_index=-1),
                                            [(3, 4, 10)]),
    "cross_entropy, long rows": (lambda x: F.cross_entropy(x, TARGETS % 9, label_smoothing=0.2), [(3, 4, 100)]),
}


def _run(fn, shapes, dtype, device, seed=0):
    """fn's output and every input's gradient, for a random upstream gradient."""
    rng = np.random.default_rng(seed)
    xs = [mg.tensor(rng.standard_normal(s), dtype=dtype, device=device, requires_grad=True) for s in shapes]
    out = fn(*xs)
    out.backward(rng.standard_normal(out.shape))
    return [backend.to_numpy(a) for a in [out.data] + [x.grad for x in xs]]


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(fast, "_BLOCK", 20)  # GELU's rows of 10: two rows a block, a partial last one
    yield
    fast.disable()


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_pass_equals_plain(case, dtype, device, small_blocks):
    fn, shapes = CASES[case]
    plain = _run(fn, shapes, dtype, device)
    fast.enable()
    fused = _run(fn, shapes, dtype, device)
    tol = 2e-6 if dtype == mg.float32 else 1e-13
    for name, p, f in zip(["output"] + [f"grad {i}" for i in range(len(shapes))], plain, fused, strict=True):
        assert f.dtype == p.dtype and f.shape == p.shape, name
        np.testing.assert_allclose(f, p, rtol=tol, atol=tol * np.abs(p).max(initial=0), err_msg=f"{case}: {name}")


def test_enable_installs_and_disable_restores():
    plain = {cls: (vars(cls)["forward"], vars(cls)["backward"])
             for cls in (GeluFunction, SoftmaxFunction, LayerNormFunction, CrossEntropyFunction)}
    fast.enable()
    fast.enable()  # twice: still one set of plain passes to go back to
    try:
        assert all(vars(cls)["forward"] is not f for cls, (f, _) in plain.items())
    finally:
        fast.disable()
    assert {cls: (vars(cls)["forward"], vars(cls)["backward"]) for cls in plain} == plain


def test_fused_gelu_saves_nothing_without_grad():
    x = mg.randn(4, 8)
    fast.enable()
    try:
        y = F.gelu(x, approximate="tanh")
    finally:
        fast.disable()
    np.testing.assert_allclose(y.numpy(), F.gelu(x, approximate="tanh").numpy(), rtol=2e-6, atol=1e-7)
    assert y._ctx is None


def test_gpt_step_with_fast_enable_matches_plain():
    from models import GPT, GPTConfig

    def step():
        mg.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16))
        rng = np.random.default_rng(0)
        _, loss = model(rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8)))
        loss.backward()
        return loss.item(), {n: p.grad for n, p in model.named_parameters()}

    loss, grads = step()
    fast.enable()
    try:
        fused_loss, fused_grads = step()
    finally:
        fast.disable()
    assert fused_loss == pytest.approx(loss, rel=1e-6)
    for name, g in grads.items():
        np.testing.assert_allclose(fused_grads[name], g, rtol=1e-4, atol=1e-6 * np.abs(g).max(), err_msg=name)

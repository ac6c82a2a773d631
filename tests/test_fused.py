"""Under mg.fused(), softmax, layer norm and GELU's tanh form run their fused kernels, and cross-entropy its fused
forward: the same values and gradients as the plain Functions, to float rounding, in float32 and float64 (GELU's
rows split over several blocks, rows short and long, masked rows, ignored targets, empty inputs); the switch is
scoped and per thread, and the kernels' own gradients pass the finite-difference check.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend
from minigrad import functional as F
from minigrad.activations import FusedGeluFunction
from minigrad.tensor import intercept

TARGETS = np.array([[0, 3, -1, 9], [9, 9, 1, -1], [2, -1, 5, 4]])  # (3, 4); -1: ignored

CASES = {
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), [(3, 7, 10)]),
    "softmax": (lambda x: F.softmax(x), [(2, 3, 5, 9)]),
    "softmax, axis 1": (lambda x: F.softmax(x, axis=1), [(4, 6, 3)]),
    "softmax, masked rows": (lambda x: F.softmax(x + F.causal_mask(6, dtype=x.dtype, device=x.device)), [(2, 6, 6)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, 12, w, b), [(5, 7, 12), (12,), (12,)]),
    "layer_norm, weight only": (lambda x, w: F.layer_norm(x, 12, w), [(9, 12), (12,)]),
    "layer_norm, no affine": (lambda x: F.layer_norm(x, 12), [(3, 4, 12)]),
    "softmax, short rows": (lambda x: F.softmax(x), [(5, 70)]),
    "softmax, long rows": (lambda x: F.softmax(x), [(5, 3, 130)]),
    "gelu, empty": (lambda x: F.gelu(x, approximate="tanh"), [(0, 5)]),
    "gelu, 0-d": (lambda x: F.gelu(x, approximate="tanh"), [()]),
    "layer_norm, no rows": (lambda x, w, b: F.layer_norm(x, 12, w, b), [(0, 12), (12,), (12,)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1), [(3, 4, 10)]),
    "cross_entropy, smoothing, sum": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1, reduction="sum",
                                                                label_smoothing=0.1), [(3, 4, 10)]),
    "cross_entropy, none": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1, reduction="none"), [(3, 4, 10)]),
    "cross_entropy, every target ignored": (lambda x: F.cross_entropy(x, np.full((3, 4), -1), ignore_index=-1),
                                            [(3, 4, 10)]),
    "cross_entropy, long rows": (lambda x: F.cross_entropy(x, TARGETS % 9, label_smoothing=0.2), [(3, 4, 100)]),
}
FUSED_KERNEL = {"gelu": "FusedGeluFunction", "softmax": "FusedSoftmaxFunction", "layer_norm": "FusedLayerNormFunction",
                "cross_entropy": "FusedCrossEntropyFunction"}


def _run(fn, shapes, dtype, device, seed=0):
    """fn's output and every input's gradient, for a random upstream gradient."""
    rng = np.random.default_rng(seed)
    xs = [mg.tensor(rng.standard_normal(s), dtype=dtype, device=device, requires_grad=True) for s in shapes]
    out = fn(*xs)
    out.backward(rng.standard_normal(out.shape))
    return [backend.to_numpy(a) for a in [out.data] + [x.grad for x in xs]]


def _nodes(fn, shapes, dtype=mg.float64, device="cpu"):
    """The Function classes that fn's forward ran, as the engine's hook sees them."""
    seen = []

    def record(node, method, run):
        seen.append(type(node).__name__)
        return run()

    xs = [mg.tensor(np.ones(s), dtype=dtype, device=device, requires_grad=True) for s in shapes]
    with intercept(record):
        fn(*xs)
    return seen


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(FusedGeluFunction, "BLOCK", 20)  # GELU's rows of 10: two rows a block, a partial last one


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_kernel_equals_plain(case, dtype, device, small_blocks):
    fn, shapes = CASES[case]
    plain = _run(fn, shapes, dtype, device)
    with mg.fused():
        fused = _run(fn, shapes, dtype, device)
    tol = 2e-6 if dtype == mg.float32 else 1e-13
    for name, p, f in zip(["output"] + [f"grad {i}" for i in range(len(shapes))], plain, fused, strict=True):
        assert f.dtype == p.dtype and f.shape == p.shape, name
        np.testing.assert_allclose(f, p, rtol=tol, atol=tol * np.abs(p).max(initial=0), err_msg=f"{case}: {name}")


@pytest.mark.parametrize("case", ["gelu", "softmax", "layer_norm", "layer_norm, weight only", "cross_entropy"])
def test_the_fused_kernel_is_the_one_that_runs_and_only_under_the_switch(case, small_blocks):
    fn, shapes = CASES[case]
    kernel = FUSED_KERNEL[case.split(",")[0]]
    assert kernel not in _nodes(fn, shapes)
    with mg.fused():
        assert kernel in _nodes(fn, shapes)
        with mg.fused(False):
            assert kernel not in _nodes(fn, shapes)
        assert mg.is_fused_enabled()
    assert not mg.is_fused_enabled()


@pytest.mark.parametrize("case", ["gelu", "softmax", "softmax, masked rows", "layer_norm", "layer_norm, weight only",
                                  "cross_entropy, smoothing, sum"])
def test_fused_kernels_pass_the_gradient_check(case, small_blocks):
    fn, shapes = CASES[case]
    rng = np.random.default_rng(1)
    xs = [mg.tensor(rng.standard_normal(s), dtype=mg.float64, requires_grad=True) for s in shapes]
    with mg.fused():
        assert mg.gradcheck(fn, *xs)


def test_the_switch_is_per_thread():
    seen = {}

    def other_thread():
        seen["fused"] = mg.is_fused_enabled()

    with mg.fused():
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen == {"fused": False}


def test_fused_gelu_saves_nothing_without_grad():
    x = mg.randn(4, 8)
    with mg.fused():
        y = F.gelu(x, approximate="tanh")
    np.testing.assert_allclose(y.numpy(), F.gelu(x, approximate="tanh").numpy(), rtol=2e-6, atol=1e-7)
    assert y._ctx is None


def test_gpt_step_under_fused_matches_plain():
    from models import GPT, GPTConfig

    def step():
        mg.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16))
        rng = np.random.default_rng(0)
        _, loss = model(rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8)))
        loss.backward()
        return loss.item(), {n: p.grad for n, p in model.named_parameters()}

    loss, grads = step()
    with mg.fused():
        fused_loss, fused_grads = step()
    assert fused_loss == pytest.approx(loss, rel=1e-6)
    largest = max(np.abs(g).max() for g in grads.values())
    for name, g in grads.items():
        if name.endswith("attn.k_proj.bias"):  # 0 but rounding: a query's scores all shift alike; softmax ignores it
            assert max(np.abs(g).max(), np.abs(fused_grads[name]).max()) < 1e-6 * largest
            continue
        np.testing.assert_allclose(fused_grads[name], g, rtol=1e-4, atol=1e-6 * np.abs(g).max(), err_msg=name)

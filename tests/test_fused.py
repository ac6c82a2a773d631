"""The fast paths: softmax, layer norm, GELU and cross-entropy compute in place (one Function each, no second
kernel on the plain path), so their float32 results must match float64's to float32 rounding and their gradients
pass the finite-difference check, on rows short and long, masked rows, ignored targets, empty inputs, GELU in blocks.
Under mg.fused() the models' attention runs as one node, F.scaled_dot_product_attention: the same values and
gradients as its four steps written out, with and without dropout and grouped key/value heads; the switch is
scoped and per thread.
"""

from __future__ import annotations

import importlib.util
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad.array import arrays
from minigrad.nn import functional as F
from minigrad.tensor import intercept
from models.attention import MultiHeadSelfAttention

TARGETS = np.array([[0, 3, -1, 9], [9, 9, 1, -1], [2, -1, 5, 4]])  # (3, 4); -1: ignored

CASES = {
    "gelu, tanh": (lambda x: F.gelu(x, approximate="tanh"), [(3, 7, 10)]),
    "gelu, exact": (lambda x: F.gelu(x * 3.0), [(3, 7, 10)]),
    "softmax": (lambda x: F.softmax(x), [(2, 3, 5, 9)]),
    "softmax, axis 1": (lambda x: F.softmax(x, axis=1), [(4, 6, 3)]),
    "log_softmax, axis 0": (lambda x: F.log_softmax(x, dim=0), [(4, 6, 3)]),
    "softmax, masked rows": (lambda x: F.softmax(mg.where(F.causal_mask(6, device=x.device), x, -np.inf)), [(2, 6, 6)]),
    "softmax, a transposed input": (lambda x: F.softmax(x.transpose(0, 1)), [(5, 3, 4)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, 12, w, b), [(5, 7, 12), (12,), (12,)]),
    "layer_norm, weight only": (lambda x, w: F.layer_norm(x, 12, w), [(9, 12), (12,)]),
    "layer_norm, no affine": (lambda x: F.layer_norm(x, 12), [(3, 4, 12)]),
    "layer_norm, a transposed input": (lambda x, w, b: F.layer_norm(x.transpose(0, 1), 5, w, b), [(5, 4), (5,), (5,)]),
    "softmax, short rows": (lambda x: F.softmax(x), [(5, 70)]),
    "softmax, long rows": (lambda x: F.softmax(x), [(5, 3, 130)]),
    "gelu, empty": (lambda x: F.gelu(x, approximate="tanh"), [(0, 5)]),
    "gelu, 0-d": (lambda x: F.gelu(x, approximate="tanh"), [()]),
    "gelu, exact, 0-d": (lambda x: F.gelu(x), [()]),
    "gelu, exact, empty": (lambda x: F.gelu(x), [(2, 0, 3)]),
    "layer_norm, no channels": (lambda x, w, b: F.layer_norm(x, 0, w, b), [(3, 0), (0,), (0,)]),
    "layer_norm, no rows": (lambda x, w, b: F.layer_norm(x, 12, w, b), [(0, 12), (12,), (12,)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1), [(3, 10, 4)]),  # (N, C, d1)
    "cross_entropy, smoothing, sum": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1, reduction="sum",
                                                                label_smoothing=0.1), [(3, 10, 4)]),
    "cross_entropy, none": (lambda x: F.cross_entropy(x, TARGETS, ignore_index=-1, reduction="none"), [(3, 10, 4)]),
    "cross_entropy, every target ignored": (lambda x: F.cross_entropy(x, np.full((3, 4), -1), ignore_index=-1),
                                            [(3, 10, 4)]),
    "cross_entropy, long rows": (lambda x: F.cross_entropy(x, TARGETS % 9, label_smoothing=0.2), [(3, 100, 4)]),
}


def _run(fn, shapes, dtype, device, seed=0):
    """fn's output and every input's gradient, for a random upstream gradient (the same values in every dtype)."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s) for s in shapes]
    xs = [mg.tensor(v, dtype=dtype, device=device, requires_grad=True) for v in values]
    out = fn(*xs)
    out.backward(rng.standard_normal(out.shape))
    return [a.numpy() for a in [out] + [x.grad for x in xs]]


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(arrays, "BLOCK", 25)  # 210 elements: 8 whole blocks of the GELUs' and a partial last one


@pytest.mark.parametrize("case", list(CASES))
def test_in_place_float32_matches_float64(case, device, small_blocks):
    fn, shapes = CASES[case]
    wide, narrow = _run(fn, shapes, mg.float64, device), _run(fn, shapes, mg.float32, device)
    for name, w, n in zip(["output"] + [f"grad {i}" for i in range(len(shapes))], wide, narrow, strict=True):
        assert n.dtype == np.float32 and n.shape == w.shape, name
        np.testing.assert_allclose(n, w, rtol=1e-5, atol=1e-6 * np.abs(w).max(initial=0), err_msg=f"{case}: {name}")


NOTHING_TO_CHECK = ("empty", "no rows", "no channels", "every target")  # no element, or a loss of 0 / 0


@pytest.mark.parametrize("case", [c for c in CASES if not any(w in c for w in NOTHING_TO_CHECK)])
def test_in_place_kernels_pass_the_gradient_check(case, small_blocks):
    fn, shapes = CASES[case]
    rng = np.random.default_rng(1)
    xs = [mg.tensor(rng.standard_normal(s), dtype=mg.float64, requires_grad=True) for s in shapes]
    assert mg.gradcheck(fn, *xs)


def test_gelu_saves_nothing_without_grad():
    x = mg.randn(4, 8)
    y = F.gelu(x, approximate="tanh")
    assert y.grad_fn is None
    with mg.no_grad():
        y = F.gelu(mg.randn(4, 8, requires_grad=True), approximate="tanh")
    assert y.grad_fn is None


def _nodes(module, x):
    """The Function classes that module(x) ran, as the engine's hook sees them."""
    seen = []

    def record(node, method, run):
        seen.append(type(node).__name__)
        return run()

    with intercept(record):
        module(x)
    return seen


@pytest.mark.parametrize("n_kv_head, dropout, bias", [(None, 0.0, True), (2, 0.0, True), (None, 0.3, True),
                                                       (2, 0.0, False)],
                         ids=["heads", "grouped key/value heads", "dropout", "grouped heads, no biases"])
@pytest.mark.parametrize("compiled", [False, True], ids=["fused", "compiled"])
def test_attention_as_one_node_equals_the_steps_written_out(n_kv_head, dropout, bias, compiled, device):
    """The one SDPA node of mg.fused(), and with mg.compiled() Q, K and V from one product too (qkv_heads)."""
    if compiled and (device != "cpu" or importlib.util.find_spec("numba") is None):
        pytest.skip("mg.compiled() needs Numba (pip install -e '.[compiled]') and runs on the CPU")
    mg.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4, dropout=dropout, bias=bias, n_kv_head=n_kv_head).to(mg.float64).to(device)
    x = mg.tensor(np.random.default_rng(0).standard_normal((3, 7, 16)), dtype=mg.float64, device=device,
                  requires_grad=True)
    dout = np.random.default_rng(1).standard_normal((3, 7, 16))

    def run(fused):
        mg.manual_seed(5)  # the same dropout masks: both paths draw one (B, nh, T, T) mask from the generator
        attn.zero_grad()
        x.grad = None
        with mg.fused(fused), mg.compiled(compiled and fused):
            out = attn(x)
        out.backward(dout)
        return [a.numpy() for a in (out, x.grad, *(p.grad for p in attn.parameters()))]

    written, one_node = run(False), run(True)
    if compiled:  # the joined product ran
        with mg.fused(), mg.compiled():
            assert {"Cat", "Split", "CompiledAttention"} <= set(_nodes(attn, x))
    largest = max(np.abs(w).max() for w in written)  # k_proj's bias gets 0 but rounding: softmax ignores a shift
    for w, o in zip(written, one_node, strict=True):
        np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-13 * largest)


def test_attention_node_runs_only_under_the_switch_and_never_with_a_trace():
    attn = MultiHeadSelfAttention(8, 2)
    x = mg.randn(2, 5, 8)
    assert "ScaledDotProductAttentionFunction" not in _nodes(attn, x)
    with mg.fused():
        assert "FastAttention" in _nodes(attn, x)  # attention's twin that reuses its buffers (minigrad/speed/twins.py)
        trace = []
        attn(x, trace=trace)  # a trace asks for the steps: they run written out
        assert set(trace[0]) == {"q", "k", "v", "scores", "weights", "out"}
        with mg.fused(False):
            assert not {"ScaledDotProductAttentionFunction", "FastAttention"} & set(_nodes(attn, x))
        assert mg.is_fused_enabled()
    assert not mg.is_fused_enabled()


def test_the_switch_is_per_thread():
    seen = {}

    def other_thread():
        seen["fused"] = mg.is_fused_enabled()

    with mg.fused():
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen == {"fused": False}


def test_gpt_step_under_fused_matches_plain():
    from models import GPT, GPTConfig

    def step():
        mg.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16))
        rng = np.random.default_rng(0)
        _, loss = model(rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8)))
        loss.backward()
        return loss.item(), {n: p.grad.numpy() for n, p in model.named_parameters()}

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

"""The twins of minigrad/speed/twins.py (the in-place bodies that mg.fused() and mg.compiled() run) against their
teaching Functions: the same forward and every gradient, on odd shapes, broadcast batch axes, empty inputs and masked
rows, in float64, the error measured against the size of all the gradients together (some true gradients are exactly 0);
the same second derivatives where a twin keeps what its teaching backward needs, and a refusal in one line where it
does not (the GELUs keep dy/dx, not x).
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as F
from minigrad.speed.twins import FUSED


def _values(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * 3 for s in shapes]


def _run(fn, values, fused, seed=0):
    """fn's output and its inputs' gradients for a random upstream gradient, with the teaching Functions or their
    twins; also the classes of the nodes that ran."""
    mg.manual_seed(seed)  # the same dropout masks on both paths
    xs = [mg.tensor(v, requires_grad=True) for v in values]
    with mg.fused(fused):
        out = fn(*xs)
    ran = {type(node) for node in mg.autograd.graph_order(out.grad_fn) if isinstance(node, mg.Function)}
    out.backward(np.random.default_rng(seed + 1).standard_normal(out.shape))
    return [out.numpy(), *(np.zeros(x.shape) if x.grad is None else x.grad.numpy() for x in xs)], ran


def _masked(L, S, hidden_rows=()):
    allowed = np.tril(np.ones((L, S), bool), S - L)
    for row in hidden_rows:
        allowed[row] = False  # a query that sees no key: its output and gradients are 0
    return allowed


CASES = {  # name: (fn, input shapes)
    "gelu": (F.gelu, [(3, 7, 31)]),
    "gelu, tanh": (lambda x: F.gelu(x, approximate="tanh"), [(3, 7, 31)]),
    "gelu, 0-d": (F.gelu, [()]),
    "gelu, empty": (lambda x: F.gelu(x, approximate="tanh"), [(0, 3)]),
    "attention, causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                          [(2, 3, 7, 5)] * 3),
    "attention, no mask, odd sizes": (F.scaled_dot_product_attention, [(2, 3, 7, 5), (2, 3, 9, 5), (2, 3, 9, 3)]),
    "attention, broadcast batch axes": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                        [(2, 3, 6, 4), (1, 3, 6, 4), (2, 1, 6, 4)]),
    "attention, masked rows": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=_masked(6, 8, hidden_rows=(0, 3))),
        [(2, 6, 4), (2, 8, 4), (2, 8, 3)]),
    "attention, a float mask, dropout": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=0.3),
        [(2, 3, 5, 4)] * 3 + [(5, 5)]),
    "attention, no keys": (F.scaled_dot_product_attention, [(2, 3, 4), (2, 0, 4), (2, 0, 4)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_twin_equals_its_teaching_function(case):
    fn, shapes = CASES[case]
    values = _values(shapes, seed=len(case))
    teaching, ran_teaching = _run(fn, values, fused=False)
    twin, ran_twin = _run(fn, values, fused=True)
    assert ran_twin == {FUSED.get(cls, cls) for cls in ran_teaching}
    assert ran_twin & set(FUSED.values()), "a twin ran"
    out, *grads = teaching
    np.testing.assert_array_equal(np.isnan(twin[0]), np.isnan(out))
    finite = ~np.isnan(out)
    largest = np.abs(out[finite]).max(initial=1)
    np.testing.assert_allclose(twin[0][finite], out[finite], rtol=1e-12, atol=1e-13 * largest)
    size = max((np.abs(g).max(initial=0) for g in grads), default=0) or 1.0  # all the gradients together
    for i, (g, t) in enumerate(zip(grads, twin[1:], strict=True)):
        assert t.shape == g.shape, f"{case}: input {i}"
        error = np.abs(t - g).max(initial=0) / size
        assert error < 1e-12, f"{case}: input {i}: error {error:.2e} of the gradients' size {size:.2e}"


@pytest.mark.parametrize("case", ["attention, causal", "attention, masked rows", "attention, a float mask, dropout"])
def test_a_twin_that_keeps_what_its_teaching_backward_needs_gives_its_second_derivatives(case):
    fn, shapes = CASES[case]
    values = _values(shapes, seed=len(case))

    def second(fused):
        mg.manual_seed(0)
        xs = [mg.tensor(v, requires_grad=True) for v in values]
        with mg.fused(fused):
            out = fn(*xs)
        upstream = mg.tensor(np.random.default_rng(1).standard_normal(out.shape))
        grads = mg.autograd.grad(out, xs, upstream, create_graph=True, allow_unused=True)
        penalty = sum((g * g).sum() for g in grads if g is not None)
        return [g.numpy() for g in mg.autograd.grad(penalty, xs, allow_unused=True, materialize_grads=True)]

    plain, twin = second(False), second(True)
    size = max(np.abs(g).max(initial=0) for g in plain) or 1.0
    for i, (p, t) in enumerate(zip(plain, twin, strict=True)):
        assert np.abs(t - p).max(initial=0) / size < 1e-10, f"{case}: input {i}"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_a_gelu_twin_refuses_create_graph_in_one_line(approximate):
    x = mg.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    with mg.fused():
        y = F.gelu(x, approximate=approximate).sum()
    with pytest.raises(NotImplementedError, match=r"^create_graph=True: FastGelu(Erf)?\.backward computes on arrays"):
        mg.autograd.grad(y, x, create_graph=True)
    (dx,) = mg.autograd.grad(y, x)  # first order: its saved dy/dx
    assert dx.shape == (3,)


def test_fused_and_compiled_add_their_own_entries_and_take_out_only_those():
    """mg.compiled(False) inside mg.fused() leaves the twins on; mg.fused(False) takes out only the twins."""
    from minigrad.core import modes

    with mg.fused():
        assert modes.implementations == FUSED
        with mg.compiled(False):
            assert modes.implementations == FUSED
            with mg.fused(False):
                assert modes.implementations == {}
        assert modes.implementations == FUSED
    assert modes.implementations == {}

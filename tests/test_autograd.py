"""How backward() behaves: accumulation, non-scalar outputs, deep graphs, no_grad, retain_graph, freeing
saved arrays, gradients that never alias; dtype discipline (float32 stays float32); creating and
converting tensors. Expected gradients come from calculus by hand, not from the implementation.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.array import backend
from minigrad.check.gradcheck_cases import CASES, Case
from minigrad.nn import functional as F


def grad(t: mg.Tensor) -> np.ndarray:
    assert t.grad is not None, f"tensor of shape {t.shape} got no gradient"
    return t.grad.numpy()


# ---- accumulation ----

def test_tensor_used_several_times_accumulates(rand) -> None:
    x = rand(2, 3)
    y = x * x + x * 3.0 + x  # dy/dx = 2x + 4
    y.backward(np.ones(y.shape))
    np.testing.assert_allclose(grad(x), 2 * x.numpy() + 4, rtol=1e-12)


def test_diamond_graph(rand) -> None:
    x = rand(3)
    e = x.exp()
    y = (e * e + e).sum()  # dy/dx = (2 e + 1) e
    y.backward()
    ex = np.exp(x.numpy())
    np.testing.assert_allclose(grad(x), (2 * ex + 1) * ex, rtol=1e-12)


def test_grad_accumulates_across_backward_calls(rand) -> None:
    x = rand(2, 3)
    (x * 3.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(grad(x), 3 + 2 * x.numpy(), rtol=1e-12)
    x.zero_grad()
    assert x.grad is None


def test_backward_of_non_scalar_with_given_gradient(rand) -> None:
    x, w = rand(2, 3), rand(2, 3)
    dy = np.random.default_rng(0).standard_normal((2, 3))
    (x * w).backward(dy)
    np.testing.assert_allclose(grad(x), dy * w.numpy(), rtol=1e-12)
    np.testing.assert_allclose(grad(w), dy * x.numpy(), rtol=1e-12)


def test_backward_gradient_may_be_a_tensor_or_list(rand, device) -> None:
    x = rand(2)
    (x * 2.0).backward(mg.tensor([1.0, -1.0], dtype=mg.float64, device=device))
    (x * 2.0).backward([0.5, 0.5])
    np.testing.assert_allclose(grad(x), [3.0, -1.0])


def test_broadcast_input_gets_summed_gradient(rand) -> None:
    a, b = rand(3, 1), rand(1, 4)
    (a * b).backward(np.ones((3, 4)))
    np.testing.assert_allclose(grad(a), np.full((3, 1), b.numpy().sum()), rtol=1e-12)
    np.testing.assert_allclose(grad(b), np.full((1, 4), a.numpy().sum()), rtol=1e-12)


def test_amax_and_max_share_gradient_between_ties(device) -> None:
    x = mg.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], requires_grad=True, dtype=mg.float64, device=device)
    x.amax(axis=1).backward([6.0, 6.0])
    np.testing.assert_allclose(grad(x), [[0.0, 3.0, 3.0], [2.0, 2.0, 2.0]], rtol=1e-15)
    x.zero_grad()
    x.max().backward()  # the maximum 3 appears twice in the whole tensor
    np.testing.assert_allclose(grad(x), [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]], rtol=1e-15)


def test_deep_chain_has_no_recursion_limit(device) -> None:
    x = mg.tensor(0.5, requires_grad=True, dtype=mg.float64, device=device)
    y = x
    for _ in range(20000):
        y = y * 1.0001 + 0.0  # 40000 nodes
    y.backward()
    assert grad(x) == pytest.approx(1.0001**20000, rel=1e-9)
    z = x
    for _ in range(20000):
        z = z * 1.0001
    del z  # a deep graph that backward never freed is torn down without overflowing the stack


# ---- grad mode ----

def test_no_grad_records_nothing(rand) -> None:
    x = rand(2, 3)
    with mg.no_grad():
        assert not mg.is_grad_enabled()
        y = x * 2.0 + x.exp()
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_no_grad_as_decorator_and_restores_after_error(rand) -> None:
    x = rand(2, 3)

    @mg.no_grad()
    def step(t: mg.Tensor) -> mg.Tensor:
        return (t * t).sum()

    assert not step(x).requires_grad
    assert (x * x).sum().requires_grad
    with pytest.raises(KeyError), mg.no_grad():
        raise KeyError("an error inside no_grad")
    assert mg.is_grad_enabled()


def test_nested_no_grad(rand) -> None:
    x = rand(2)
    with mg.no_grad():
        with mg.no_grad():
            pass
        assert not (x * 2.0).requires_grad  # leaving the inner block keeps the outer one's mode
    assert (x * 2.0).requires_grad


# ---- the graph after backward ----

def test_second_backward_needs_retain_graph(rand) -> None:
    x = rand(2, 3)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(grad(x), 4 * x.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_backward_without_retain_graph_cannot_run_twice(rand) -> None:
    x = rand(2, 3)
    y = (x.exp() * 2.0).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="already used by a backward"):
        y.backward()


def test_backward_frees_saved_arrays(rand) -> None:
    x, w = rand(2, 3), rand(3, 4)
    h = x @ w
    s = F.softmax(h)
    y = s.sum()
    nodes = [h.grad_fn, s.grad_fn]
    for fn in nodes:
        assert fn.mg_parents is not None
    assert vars(h.grad_fn)  # matmul saved its inputs for backward
    y.backward()
    for fn in nodes:
        assert fn.mg_freed and fn.mg_parents  # freed, its edges kept (as PyTorch's next_functions), for a picture
        assert not [k for k, v in vars(fn).items() if isinstance(v, np.ndarray)]  # no saved array is left behind
    assert not y.grad_fn.mg_freed  # sum saved only a shape: whole, so that a second backward() may pass


def test_a_graph_that_saved_no_array_can_be_gone_through_twice(rand) -> None:
    """As in PyTorch (test_autograd's backward twice without saved values): c = b + 1 keeps nothing."""
    b = rand(3)
    c = b + 1
    c.sum().backward()
    c.sum().backward()
    np.testing.assert_array_equal(grad(b), np.full(3, 2.0))
    d = (b.reshape(3, 1) + 2.0)[1:].sum()  # reshape, add, the slice and sum save shapes and an index, no array
    d.backward()
    d.backward()
    np.testing.assert_array_equal(grad(b), [2.0, 4.0, 4.0])
    e = (b * b).sum()  # mul saved b: the second pass is refused
    e.backward()
    with pytest.raises(RuntimeError, match="already used by a backward"):
        e.backward()


def test_retain_graph_keeps_saved_arrays(rand) -> None:
    x = rand(2, 3)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    assert y.grad_fn.mg_parents is not None


# ---- gradients never alias each other or the caller's arrays ----

def test_leaf_grads_do_not_alias(rand) -> None:
    a, b = rand(2, 3), rand(2, 3)
    z = a + b  # Add passes dout through to both inputs
    g = np.random.default_rng(0).standard_normal((2, 3))
    z.backward(g)
    assert a.grad is not b.grad
    b_before = grad(b).copy()
    a.grad += 1.0
    np.testing.assert_array_equal(grad(b), b_before)
    g[:] = 0.0  # the caller's gradient array is not kept either
    np.testing.assert_array_equal(grad(b), b_before)


class _SameArrayTwice(mg.Function):
    """y = a + b, whose backward hands one new array to both inputs (or, view=True, the array and a view of it)."""

    def forward(self, a, b, view=False):
        self.view_of_it = view
        return a + b

    def backward(self, dout):
        g = dout * 1.0
        return g, (g[...] if self.view_of_it else g)


@pytest.mark.parametrize("view", [False, True], ids=["one array", "an array and its view"])
@pytest.mark.parametrize("order", range(4))
def test_a_gradient_handed_to_two_inputs_is_added_into_by_neither(order, view, device) -> None:
    """The engine adds a later gradient into an array a backward gave it only where no other input got it too."""
    a, b = (mg.tensor(np.ones(3), requires_grad=True, device=device) for _ in range(2))
    both = _SameArrayTwice.apply(a, b, view=view)
    z = [both + a * 3, a * 3 + both, both + b * 3 + a * 5, (a * 5 + b * 3) + both][order]
    z.backward(np.ones(3))
    np.testing.assert_array_equal(grad(a), np.full(3, [4, 4, 6, 6][order]))
    np.testing.assert_array_equal(grad(b), np.full(3, [1, 1, 4, 4][order]))


def test_leaf_grad_is_not_the_root_gradient(rand, device) -> None:
    x = rand(2, 3)
    g = mg.tensor(np.ones((2, 3)), dtype=mg.float64, device=device)
    x.backward(g)  # a leaf as its own root
    x.grad += 1.0
    np.testing.assert_array_equal(g.numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_leaf_grads_own_their_memory(case: Case, device: str) -> None:
    """Every gradient the engine leaves in .grad is a fresh array: no view of dout, of another grad,
    of saved forward arrays or of the upstream gradient, so updating it in place is safe."""
    inputs = case.inputs(device, seed=1)
    out = case.fn(*inputs)
    upstream = backend.to_device(np.random.default_rng(2).standard_normal(out.shape), device)
    out.backward(upstream)
    xp = backend.get_array_module(upstream)
    grads = [x.grad.array for x in inputs]  # the arrays themselves
    for i, g in enumerate(grads):
        assert g is not None and g.base is None, f"input {i}: .grad is a view"
        assert not xp.shares_memory(g, upstream)
        for j in range(i):
            assert not xp.shares_memory(g, grads[j]), f"inputs {j} and {i} share a gradient array"


# ---- dtype discipline ----

@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_float32_stays_float32(case: Case, device: str) -> None:
    inputs = [x.detach().to(mg.float32).requires_grad_() for x in case.inputs(device)]  # float32 leaves
    assert all(x.dtype == mg.float32 and x.requires_grad for x in inputs)
    out = case.fn(*inputs)
    assert out.dtype == mg.float32
    out.backward(np.ones(out.shape))
    for i, x in enumerate(inputs):
        assert x.grad is not None and x.grad.dtype == mg.float32, f"input {i}: gradient dtype"


@pytest.mark.parametrize("op", [
    lambda x: x * 0.5, lambda x: 0.5 * x, lambda x: x + 2.0, lambda x: 2.0 - x, lambda x: x / 3.0,
    lambda x: 3.0 / x, lambda x: x**2.0, lambda x: 2.0**x, lambda x: x * np.float64(0.5),
    lambda x: np.float64(0.5) * x, lambda x: np.float64(2.0) + x, lambda x: np.float64(2.0) - x,
    lambda x: np.float64(3.0) / x, lambda x: x - np.float64(1.0), lambda x: x.mean(), lambda x: F.gelu(x),
], ids=["x*f", "f*x", "x+f", "f-x", "x/f", "f/x", "x**f", "f**x", "x*np64", "np64*x", "np64+x", "np64-x",
        "np64/x", "x-np64", "mean", "gelu"])
def test_python_and_numpy_floats_keep_float32(rand, op) -> None:
    x = rand(2, 3, positive=True, dtype=mg.float32)
    y = op(x)
    assert isinstance(y, mg.Tensor) and y.dtype == mg.float32
    y.backward(np.ones(y.shape))
    assert x.grad.dtype == mg.float32


def test_float64_stays_float64(rand) -> None:
    x = rand(2, 3)
    y = F.softmax(x * 0.5 + 1.0)
    assert y.dtype == mg.float64
    y.backward(np.ones(y.shape, dtype=np.float32))
    assert x.grad.dtype == mg.float64


# ---- creating tensors ----

def test_tensor_default_dtypes(device) -> None:
    assert mg.tensor([1.0, 2.0], device=device).dtype == mg.float32
    assert mg.tensor(1.5, device=device).dtype == mg.float32
    assert mg.tensor([[1, 2]], device=device).dtype == mg.int64
    assert mg.tensor([True, False], device=device).dtype == mg.bool_
    assert mg.tensor(np.array([1.0, 2.0]), device=device).dtype == mg.float64
    assert mg.tensor(np.array([1.0], dtype=np.float32), device=device).dtype == mg.float32
    assert mg.tensor([1, 2], dtype=mg.float64, device=device).dtype == mg.float64
    t = mg.tensor([[1.0, 2.0, 3.0]], device=device)
    assert t.shape == (1, 3) and t.ndim == 2 and t.device == device
    assert isinstance(t.array, backend.module_for(device).ndarray)
    np.testing.assert_array_equal(t.numpy(), [[1.0, 2.0, 3.0]])


@pytest.mark.parametrize("make", [mg.zeros, mg.ones], ids=["zeros", "ones"])
def test_zeros_ones(make, device) -> None:
    value = 0.0 if make is mg.zeros else 1.0
    t = make(2, 3, device=device)
    assert t.shape == (2, 3) and t.dtype == mg.float32 and t.device == device and not t.requires_grad
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), value))
    assert make((4,), dtype=mg.float64, device=device).shape == (4,)
    assert make(4, dtype=mg.float64, device=device).dtype == mg.float64
    assert make(2, requires_grad=True, device=device).requires_grad


def test_randn(device) -> None:
    t = mg.randn(200, 50, device=device)
    assert t.shape == (200, 50) and t.dtype == mg.float32 and t.device == device
    values = t.numpy()
    assert abs(values.mean()) < 0.05 and abs(values.std() - 1) < 0.05  # 10000 samples: ~5 sigma margins
    assert mg.randn(3, dtype=mg.float64, device=device).dtype == mg.float64
    mg.manual_seed(42)
    first = mg.randn(5, device=device).numpy()
    mg.manual_seed(42)
    np.testing.assert_array_equal(mg.randn(5, device=device).numpy(), first)
    with pytest.raises(TypeError, match="floating point"):
        mg.randn(3, dtype=mg.int64, device=device)


def test_arange(device) -> None:
    t = mg.arange(5, device=device)
    assert t.dtype == mg.int64 and t.device == device
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(mg.arange(2, 8, 3, device=device).numpy(), [2, 5])
    f = mg.arange(0.0, 1.0, 0.25, device=device)
    assert f.dtype == mg.float32
    np.testing.assert_array_equal(f.numpy(), [0.0, 0.25, 0.5, 0.75])
    assert mg.arange(3, dtype=mg.float64, device=device).dtype == mg.float64


# ---- converting tensors ----

def test_numpy_and_item(device) -> None:
    t = mg.tensor([[1.5, -2.0]], device=device)
    n = t.numpy()
    assert type(n) is np.ndarray and n.dtype == np.float32
    np.testing.assert_array_equal(n, [[1.5, -2.0]])
    assert t[0, 1].item() == -2.0 and isinstance(t[0, 1].item(), float)
    assert mg.tensor([7], device=device).item() == 7
    with pytest.raises(RuntimeError, match=r"shape \(1, 2\)"):  # as PyTorch's
        t.item()


def test_to_device_and_dtype(rand, device) -> None:
    x = rand(2, 3)
    assert x.to(device) is x  # nothing changes: no copy
    assert x.to(mg.float64) is x
    c = x.to("cpu")
    assert c.device == "cpu" and isinstance(c.array, np.ndarray)
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    f = x.to(mg.float32)
    assert f.dtype == mg.float32 and f.device == device and f.requires_grad and not f.is_leaf
    np.testing.assert_allclose(f.numpy(), x.numpy(), rtol=1e-7)
    (f * 2.0).sum().backward()  # a dtype conversion is an op: the gradient flows back, cast to x's dtype
    assert x.grad.dtype == mg.float64
    np.testing.assert_array_equal(grad(x), np.full((2, 3), 2.0))


def test_detach(rand) -> None:
    x = rand(2, 3)
    y = x * 2.0
    d = y.detach()
    assert not d.requires_grad and d.is_leaf
    assert d.array is y.array  # same values, no copy
    (d * x).sum().backward()
    np.testing.assert_allclose(grad(x), d.numpy(), rtol=1e-12)  # d is a constant


def test_comparisons_are_bool_without_grad(rand, device) -> None:
    x, y = rand(2, 3), rand(2, 3)
    xn, yn = x.numpy(), y.numpy()
    for result, expected in [(x < y, xn < yn), (x <= y, xn <= yn), (x > 0.0, xn > 0), (x >= y, xn >= yn),
                             (x == x, np.ones((2, 3), bool)), (x != y, xn != yn), (0.0 < x, xn > 0)]:
        assert result.dtype == mg.bool_ and not result.requires_grad and result.is_leaf
        np.testing.assert_array_equal(result.numpy(), expected)


def test_tensors_hash_by_identity(rand) -> None:
    a, b = rand(2), rand(2)
    assert len({a, b, a}) == 2


# ---- dropout: the one primitive the torch oracle cannot check ----

def test_dropout_mask_scale_and_gradient(rand) -> None:
    x = rand(40, 50)
    mg.manual_seed(0)
    y = F.dropout(x, p=0.3, training=True)
    xn, yn = x.numpy(), y.numpy()
    kept = yn != 0
    assert abs(1 - kept.mean() - 0.3) < 0.05  # 2000 draws
    np.testing.assert_allclose(yn[kept], xn[kept] / 0.7, rtol=1e-12)
    g = np.random.default_rng(0).standard_normal(x.shape)
    y.backward(g)
    np.testing.assert_allclose(grad(x), np.where(kept, g / 0.7, 0.0), rtol=1e-12)


def test_dropout_off_and_full(rand) -> None:
    x = rand(3, 4)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros((3, 4)))

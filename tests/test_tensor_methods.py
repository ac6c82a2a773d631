"""Tensor methods a PyTorch user reaches for, each compared with torch where it is installed: tolist, view (and what it
refuses), contiguous, the dtype conversions float/double/long/int/bool, size()/size(dim)/numel()/dim() and t().
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: the comparison with it is skipped")


def pair(shape, requires_grad=False, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape)
    return mg.tensor(values, requires_grad=requires_grad), torch.tensor(values, requires_grad=requires_grad)


# ---- tolist ----

@needs_torch
@pytest.mark.parametrize("values", [3.5, [1.0, 2.0], [[1, 2], [3, 4]], [[True, False]], np.zeros((2, 0, 3))],
                         ids=["0-d", "1-d", "int 2-d", "bool", "empty"])
def test_tolist_is_torchs(values):
    mine, theirs = mg.tensor(values).tolist(), torch.tensor(np.asarray(values)).tolist()
    assert mine == theirs and type(mine) is type(theirs)


# ---- view ----

@needs_torch
@pytest.mark.parametrize("shape, new", [((2, 3), (3, 2)), ((2, 3), (-1,)), ((2, 3, 4), (6, 4)), ((4,), (2, 1, 2)),
                                        ((2, 0), (0, 5))])
def test_view_reads_the_same_memory_in_another_shape(shape, new):
    x, tx = pair(shape)
    v, tv = x.view(*new), tx.view(*new)
    assert v.shape == tuple(tv.shape) and x.view(new).shape == v.shape
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    if v.numel():
        v[(0,) * v.ndim] = 100.0  # a write through the view is a write into x, as in torch
        assert x.numpy().flat[0] == 100.0 and x._version == v._version == 1


@needs_torch
def test_view_refuses_what_needs_a_copy_as_torch_does():
    x, tx = pair((2, 3))
    with pytest.raises(RuntimeError, match=r"view: a tensor of shape \(3, 2\) .* cannot be read as shape \(6,\)"):
        x.t().view(-1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        tx.t().view(-1)
    np.testing.assert_array_equal(x.t().contiguous().view(-1).numpy(), tx.t().contiguous().view(-1).numpy())
    np.testing.assert_array_equal(x.t().reshape(-1).numpy(), tx.t().reshape(-1).numpy())  # reshape copies instead
    assert x.is_contiguous() and not x.t().is_contiguous() and x.contiguous() is x
    with pytest.raises(TypeError, match=r"view\(dtype\), .* is not supported: x.to\(dtype\)"):
        x.view(mg.float32)
    with pytest.raises(ValueError, match="cannot reshape"):
        x.view(4, 2)
    with pytest.raises(TypeError, match="view: expected a shape, got none"):
        x.view()
    with pytest.raises(TypeError):
        tx.view()


@needs_torch
def test_the_gradient_flows_through_view_contiguous_and_t():
    x, tx = pair((2, 3), requires_grad=True)
    dy = np.random.default_rng(1).standard_normal(6)
    for t in (x, tx):
        y = (t * 2).t().contiguous().view(-1)
        y.backward(dy if t is x else torch.tensor(dy))
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-15)


# ---- dtype conversions ----

@needs_torch
@pytest.mark.parametrize("method", ["float", "double", "long", "int", "bool"])
@pytest.mark.parametrize("source", ["float32", "float64", "int64", "bool"])
def test_the_dtype_conversions_are_torchs(method, source):
    values = np.array([[-1.5, 0.0], [2.7, 3.0]]).astype(source)
    x, tx = mg.tensor(values), torch.tensor(values)
    y, ty = getattr(x, method)(), getattr(tx, method)()
    assert y.dtype == np.dtype(str(ty.dtype).removeprefix("torch."))
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert (y is x) == (ty is tx)  # the same tensor where nothing changes, as in torch


@needs_torch
def test_a_float_conversion_stays_in_the_graph_and_an_integer_one_leaves_it():
    x, tx = pair(3, requires_grad=True)
    (x.float().double() * 3).sum().backward()
    (tx.float().double() * 3).sum().backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy())
    assert not x.long().requires_grad and not tx.long().requires_grad


# ---- size, numel, dim ----

@needs_torch
@pytest.mark.parametrize("shape", [(), (4,), (2, 3, 5), (2, 0)])
def test_size_is_the_shape_and_numel_the_count(shape):
    x, tx = pair(shape)
    assert x.size() == tuple(tx.size()) == x.shape
    assert x.numel() == tx.numel() and x.dim() == tx.dim() == x.ndim
    for d in range(-len(shape), len(shape)):
        assert x.size(d) == tx.size(d) == shape[d]
    with pytest.raises(ValueError, match=f"size: dim {len(shape) + 1} is out of range"):
        x.size(len(shape) + 1)
    with pytest.raises(IndexError):  # torch says IndexError; minigrad's dim errors are ValueErrors throughout
        tx.size(len(shape) + 1)


# ---- t ----

@needs_torch
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_t_transposes_up_to_two_dimensions(shape):
    x, tx = pair(shape)
    np.testing.assert_array_equal(x.t().numpy(), tx.t().numpy())
    np.testing.assert_array_equal(mg.t(x).numpy(), torch.t(tx).numpy())


@needs_torch
def test_t_refuses_three_dimensions_as_torch_does():
    x, tx = pair((2, 3, 4))
    with pytest.raises(ValueError, match=r"t: expects a tensor of at most 2 dimensions, got shape \(2, 3, 4\)"):
        x.t()
    with pytest.raises(RuntimeError, match="<= 2 dimensions"):
        tx.t()

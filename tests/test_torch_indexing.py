"""Issue 50, indexing by index tensors (minigrad/ops/indexing.py): scatter, scatter_add, index_select/add/copy/fill,
masked_scatter, take_along_dim, narrow, unfold, nonzero, argwhere and count_nonzero, as functions, methods and in
place, each compared with torch (values, float64 gradients of every input, dtypes, errors)."""

from __future__ import annotations

import numpy as np
import pytest
from torch_pairs import On, same_as_torch

import minigrad as mg

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")

rng = np.random.default_rng(0)
X, SRC = rng.standard_normal((3, 4)), rng.standard_normal((2, 5))
PLACES = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])  # along dim 0 of X, a repeat in column 0 (scatter_add sums it)
ROWS = np.array([2, 0, 2])
MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])


CASES = {
    "scatter_add": lambda m, x, s: m.scatter_add(x, 0, m.tensor(PLACES), s[:, :4]),
    "scatter_add method dim 1": lambda m, x, s: x.scatter_add(1, m.tensor([[0, 0], [1, 3], [2, 2]]), s.T[:3]),
    "scatter value": lambda m, x, s: m.scatter(x, 1, m.tensor([[1], [3], [0]]), value=2.5) * s.sum(),
    "scatter src, distinct places": lambda m, x, s: x.scatter(0, m.tensor([[0, 1, 2, 0]]), s[:1, :4]),
    "index_select": lambda m, x, s: m.index_select(x, 0, m.tensor(ROWS)) * s[0, 0],
    "index_select dim 1": lambda m, x, s: x.index_select(-1, m.tensor([3, 3, 1])),
    "index_add": lambda m, x, s: m.index_add(x, 0, m.tensor(ROWS), s[:, :4].repeat(2, 1)[:3], alpha=2.0),
    "index_copy": lambda m, x, s: x.index_copy(1, m.tensor([3, 0]), s.T[:3]),
    "index_fill": lambda m, x, s: x.index_fill(1, m.tensor([0, 2]), -1.5) + s.sum(),
    "masked_scatter": lambda m, x, s: x.masked_scatter(m.tensor(MASK), s),
    "take_along_dim": lambda m, x, s: m.take_along_dim(x, m.tensor([[0, 3], [1, 1], [2, 0]]), dim=1),
    "take_along_dim broadcast": lambda m, x, s: m.take_along_dim(x, m.tensor([[2, 0, 1, 1]]), dim=0),
    "take_along_dim flat": lambda m, x, s: m.take_along_dim(x, m.tensor([11, 0, 5])),
    "narrow": lambda m, x, s: m.narrow(x, 1, 1, 2),
    "narrow negative start": lambda m, x, s: x.narrow(0, -2, 2),
    "unfold": lambda m, x, s: x.unfold(1, 2, 1),
    "unfold step 2 dim 0": lambda m, x, s: x.unfold(0, 2, 2),
}


@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_are_torchs(name, device):
    same_as_torch(lambda x, s: CASES[name](On(device), x, s), lambda x, s: CASES[name](torch, x, s), [X, SRC], device)


@pytest.mark.parametrize("name, call", [
    ("scatter_", lambda m, y, s: y.scatter_(1, m.tensor([[1], [3], [0]]), s.T[:3, :1])),
    ("scatter_ value", lambda m, y, s: y.scatter_(0, m.tensor([[2, 0]]), 4.0)),
    ("scatter_add_", lambda m, y, s: y.scatter_add_(0, m.tensor(PLACES), s[:, :4])),
    ("index_add_", lambda m, y, s: y.index_add_(1, m.tensor([0, 0]), s[:, :2].repeat(2, 1)[:3], alpha=-1)),
    ("index_copy_", lambda m, y, s: y.index_copy_(0, m.tensor([1]), s[:1, :4])),
    ("index_fill_", lambda m, y, s: y.index_fill_(0, m.tensor([0, 2]), 3.0)),
    ("masked_scatter_", lambda m, y, s: y.masked_scatter_(m.tensor(MASK), s)),
])
def test_in_place_forms_write_into_the_tensor_as_torchs(name, call, device):
    def run(m, x, s):
        y = x * 1.0  # not a leaf: written in place, in the graph
        assert call(m, y, s) is y
        return y
    same_as_torch(lambda x, s: run(On(device), x, s), lambda x, s: run(torch, x, s), [X, SRC], device)


def test_nonzero_argwhere_and_count_nonzero_are_torchs(device):
    for values in ([[0, 1.5], [2, 0]], [0, 3, 0, 4], 5, 0, [[True, False]]):
        mine, theirs = mg.tensor(values, device=device), torch.tensor(values)
        for name in ("nonzero", "argwhere", "count_nonzero"):
            got, expected = getattr(mg, name)(mine), getattr(torch, name)(theirs)
            assert got.dtype == mg.int64 and got.shape == tuple(expected.shape), (name, values)
            np.testing.assert_array_equal(got.numpy(), expected.numpy())
        for got, expected in zip(mine.nonzero(as_tuple=True), theirs.nonzero(as_tuple=True), strict=True):
            np.testing.assert_array_equal(got.numpy(), expected.numpy())
    x = mg.tensor([[0, 1, 2], [0, 0, 3]], device=device)
    np.testing.assert_array_equal(x.count_nonzero(dim=1).numpy(), [2, 1])
    np.testing.assert_array_equal(mg.count_nonzero(x, dim=(0, 1)).numpy(), 3)


@pytest.mark.parametrize("call, error, match", [
    (lambda m: m.zeros(3, 4).scatter_add(0, m.tensor([[3]]), m.ones(1, 1)), (RuntimeError, IndexError),
     r"index 3 .* out of range \[0, 3\)"),
    (lambda m: m.zeros(3, 4).scatter(0, m.tensor([0, 1]), m.ones(2)), RuntimeError, r"index of shape \(2,\)"),
    (lambda m: m.zeros(3, 4).scatter_add(0, m.tensor([[0, 1, 2]]), m.ones(1, 2)), RuntimeError,
     r"larger than src of shape \(1, 2\)"),
    (lambda m: m.zeros(3, 4).index_add(0, m.tensor([0, 1]), m.ones(3, 4)), RuntimeError,
     r"source of shape \(3, 4\)"),
    (lambda m: m.zeros(3, 4).index_select(1, m.tensor([4])), (RuntimeError, IndexError), r"out of range \[0, 4\)"),
    (lambda m: m.zeros(3, 4).masked_scatter(m.ones(3, 4).bool(), m.ones(5)), RuntimeError, "selects 12 elements"),
    (lambda m: m.zeros(3, 4).narrow(1, 3, 2), (RuntimeError, IndexError), r"start \(3\) \+ length \(2\) exceeds"),
    (lambda m: m.zeros(3, 4).unfold(1, 5, 1), RuntimeError, r"size \(5\)"),
])
def test_bad_indices_are_refused_in_one_line_as_torch_refuses_them(call, error, match):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error, match=match):
        call(mg)


def test_an_index_written_after_use_is_refused_in_backward():
    x = mg.randn(3, 4, requires_grad=True)
    index = mg.tensor(ROWS)
    y = mg.index_select(x, 0, index)
    index[0] = 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        y.sum().backward()


def test_second_derivatives_of_index_add_are_torchs():
    def fn(m, x, s):
        y = m.scatter_add(x * x, 0, m.tensor(PLACES), s * s)
        (g,) = (m.autograd.grad(y.pow(3).sum(), s, create_graph=True))
        return g
    same_as_torch(lambda x, s: fn(mg, x, s), lambda x, s: fn(torch, x, s), [X, SRC[:, :4]], gradcheck=False)

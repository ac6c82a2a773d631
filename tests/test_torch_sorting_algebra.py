"""Issue 50: ordering and counting (minigrad/ops/sorting.py), torch.linalg's norms (minigrad/ops/linalg.py) and einsum,
diag, norm and cdist (minigrad/ops/algebra.py), each compared with torch: values, float64 gradients of every input (0
where a norm is 0, as PyTorch's), dtypes, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from torch_pairs import On, same_as_torch

import minigrad as mg

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")

rng = np.random.default_rng(0)
A, B = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
ZEROS = np.zeros((2, 3, 4))
ZEROS[0, 1] = rng.standard_normal(4)  # rows of zeros beside one that is not: the norm's gradient there is 0

CASES = {
    "sort": lambda m, a, b: m.sort(a, dim=1).values * a.sum(),
    "sort descending method": lambda m, a, b: a.sort(dim=-1, descending=True)[0],
    "repeat_interleave int": lambda m, a, b: m.repeat_interleave(a, 2, dim=1),
    "repeat_interleave counts": lambda m, a, b: a.repeat_interleave(m.tensor([1, 0, 3, 2]), dim=-1),
    "repeat_interleave flat": lambda m, a, b: a.repeat_interleave(2),
    "einsum matmul": lambda m, a, b: m.einsum("bij,bkj->bik", a, b),
    "einsum list, no arrow": lambda m, a, b: m.einsum("ij,kj", [a[0], b[1]]),
    "einsum diagonal": lambda m, a, b: m.einsum("bii->bi", a[:, :3, :3]),
    "einsum trace": lambda m, a, b: m.einsum("ii", a[0, :3, :3]),
    "einsum ellipsis": lambda m, a, b: m.einsum("...ij,...ij->...i", a, a),
    "einsum outer": lambda m, a, b: m.einsum("i,j->ij", a[0, 0], b[0, 0]),
    "diag of a vector": lambda m, a, b: m.diag(a[0, 0], 1),
    "diag of a matrix": lambda m, a, b: a[0].diag(-1),
    "diag of a matrix, above": lambda m, a, b: m.diag(a[1], 2),
    "cdist": lambda m, a, b: m.cdist(a, b),
    "cdist p=1": lambda m, a, b: m.cdist(a, b, p=1.0),
    "cdist p=3 with itself": lambda m, a, b: m.cdist(a, a, p=3.0),
    "norm": lambda m, a, b: m.norm(a),
    "norm p=1 dim": lambda m, a, b: a.norm(1, dim=2),
    "norm fro two dims keepdim": lambda m, a, b: m.norm(a, "fro", dim=(1, 2), keepdim=True),
    "vector_norm inf": lambda m, a, b: m.linalg.vector_norm(a, math.inf, dim=(0, 2)),
    "vector_norm -inf": lambda m, a, b: m.linalg.vector_norm(a, -math.inf, dim=1),
    "vector_norm 3": lambda m, a, b: m.linalg.vector_norm(a, 3, dim=-1),
    "vector_norm 0": lambda m, a, b: m.linalg.vector_norm(a, 0),
    "linalg.norm": lambda m, a, b: m.linalg.norm(a),
    "linalg.norm dim": lambda m, a, b: m.linalg.norm(a, dim=1),
    "linalg.norm matrix 1": lambda m, a, b: m.linalg.norm(a[0], 1),
    "linalg.norm matrix -inf dims": lambda m, a, b: m.linalg.norm(a, -math.inf, dim=(2, 1)),
    "linalg.norm matrix fro": lambda m, a, b: m.linalg.norm(a[1], "fro"),
    "linalg.matrix_norm inf": lambda m, a, b: m.linalg.matrix_norm(a, math.inf),
    "linalg.norm vector ord": lambda m, a, b: m.linalg.norm(a[0, 0], 3),
}


@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_are_torchs(name, device):
    same_as_torch(lambda a, b: CASES[name](On(device), a, b), lambda a, b: CASES[name](torch, a, b), [A, B], device)


@pytest.mark.parametrize("name", ["norm", "vector_norm 3", "linalg.norm dim", "cdist", "cdist p=3 with itself",
                                  "norm fro two dims keepdim"])
def test_norms_have_torchs_gradient_of_zero_at_zero(name, device):
    same_as_torch(lambda a, b: CASES[name](mg, a, b), lambda a, b: CASES[name](torch, a, b), [ZEROS, ZEROS], device,
                  gradcheck=False)  # a norm has no derivative at 0: the 0 is a convention, finite differences differ


def test_sort_argsort_unique_searchsorted_are_torchs(device):
    values = [[3, 1, 2, 1], [0, 5, 5, -1]]
    mine, theirs = mg.tensor(values, device=device), torch.tensor(values)
    for kwargs in ({}, {"dim": 0}, {"descending": True, "stable": True}):
        got, expected = mine.sort(**kwargs), theirs.sort(**kwargs)
        np.testing.assert_array_equal(got.values.numpy(), expected.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), expected.indices.numpy())
        assert got.indices.dtype == mg.int64
        np.testing.assert_array_equal(mg.argsort(mine, **kwargs).numpy(), torch.argsort(theirs, **kwargs).numpy())
    for kwargs in ({}, {"return_inverse": True, "return_counts": True}, {"dim": 1, "return_inverse": True}):
        got, expected = mg.unique(mine, **kwargs), torch.unique(theirs, **kwargs)
        for g, e in zip(got if isinstance(got, tuple) else [got], expected if isinstance(expected, tuple)
                        else [expected], strict=True):
            np.testing.assert_array_equal(g.numpy(), e.numpy())
    sequence, at = [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]], [[3.0, 0.0], [6.0, 4.5]]
    for kwargs in ({}, {"right": True}, {"side": "right"}, {"out_int32": True}):
        got = mg.searchsorted(mg.tensor(sequence, device=device), mg.tensor(at, device=device), **kwargs)
        expected = torch.searchsorted(torch.tensor(sequence), torch.tensor(at), **kwargs)
        assert str(got.dtype) == str(expected.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    got = mg.searchsorted(mg.tensor([1.0, 3.0, 5.0], device=device), mg.tensor([[4.0, 5.0]], device=device))
    np.testing.assert_array_equal(got.numpy(), torch.searchsorted(torch.tensor([1.0, 3.0, 5.0]),
                                                                  torch.tensor([[4.0, 5.0]])).numpy())
    np.testing.assert_array_equal(mg.repeat_interleave(mg.tensor([2, 0, 1], device=device)).numpy(),
                                  torch.repeat_interleave(torch.tensor([2, 0, 1])).numpy())


def test_bincount_histc_histogram_are_torchs(device):
    ints, weights = [0, 3, 3, 1, 7], [0.5, 1.0, 2.0, -1.0, 0.25]
    for mine, theirs in ((mg.bincount(mg.tensor(ints, device=device)), torch.bincount(torch.tensor(ints))),
                         (mg.tensor(ints, device=device).bincount(minlength=10),
                          torch.tensor(ints).bincount(minlength=10)),
                         (mg.bincount(mg.tensor(ints, device=device), mg.tensor(weights, device=device)),
                          torch.bincount(torch.tensor(ints), torch.tensor(weights)))):
        assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    x = rng.standard_normal(200)
    for kwargs in ({}, {"bins": 7}, {"bins": 5, "min": -1.0, "max": 1.0}):
        for dtype in ("float32", "float64"):
            mine = mg.histc(mg.tensor(x, dtype=dtype, device=device), **kwargs)
            theirs = torch.histc(torch.tensor(x, dtype=getattr(torch, dtype)), **kwargs)
            assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    np.testing.assert_array_equal(mg.histc(mg.full((3,), 2.0)).numpy(), torch.histc(torch.full((3,), 2.0)).numpy())
    for kwargs in ({"bins": 6}, {"bins": 4, "range": (-1.0, 2.0), "density": True},
                   {"bins": 3, "weight": "w"}):
        w = rng.uniform(0, 1, 200)
        mine = mg.histogram(mg.tensor(x, device=device), **{k: mg.tensor(w, device=device) if v == "w" else v
                                                            for k, v in kwargs.items()})
        theirs = torch.histogram(torch.tensor(x), **{k: torch.tensor(w) if v == "w" else v for k, v in kwargs.items()})
        for m, t in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(m.numpy(), t.numpy(), rtol=1e-12)
    edges = [-1.0, 0.0, 0.5, 3.0]
    mine = mg.tensor(x, device=device).histogram(mg.tensor(edges, dtype=mg.float64, device=device))
    theirs = torch.tensor(x).histogram(torch.tensor(edges, dtype=torch.float64))
    np.testing.assert_array_equal(mine[0].numpy(), theirs[0].numpy())


@pytest.mark.parametrize("call, error, match", [
    (lambda m: m.einsum("ij,jk->ik", m.ones(2, 3), m.ones(4, 2)), RuntimeError, "label 'j'"),
    (lambda m: m.einsum("ijk->i", m.ones(2, 3)), RuntimeError, r"do not fit an operand of shape \(2, 3\)"),
    (lambda m: m.cdist(m.ones(2, 3), m.ones(2, 4)), RuntimeError, r"shapes \(2, 3\) and \(2, 4\)"),
    (lambda m: m.linalg.vector_norm(m.ones(2, dtype=m.int64)), RuntimeError, "floating point"),
    (lambda m: m.linalg.norm(m.ones(2, 2, 2), 1), RuntimeError, "1-D or 2-D"),
    (lambda m: m.diag(m.ones(2, 2, 2)), RuntimeError, "1-D or 2-D"),
    (lambda m: m.bincount(m.tensor([1, -1])), RuntimeError, "non-negative"),
    (lambda m: m.histc(m.tensor([1, 2])), RuntimeError, "floating-point|float"),
    (lambda m: m.repeat_interleave(m.ones(3), m.tensor([1, 2])), RuntimeError, "repeats must be"),
])
def test_bad_arguments_are_refused_in_one_line_as_torch_refuses_them(call, error, match):
    with pytest.raises(error):
        call(torch)
    with pytest.raises((error, TypeError), match=match):
        call(mg)


def test_singular_value_norms_refuse_in_one_line():
    for call in (lambda: mg.linalg.norm(mg.ones(2, 2), 2), lambda: mg.norm(mg.ones(2, 2), "nuc"),
                 lambda: mg.linalg.matrix_norm(mg.ones(2, 2), -2)):
        with pytest.raises(NotImplementedError, match="singular values"):
            call()

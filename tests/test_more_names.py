"""More of torch's top-level names (allclose, isclose, equal, is_tensor, numel, rand, rand_like, randn_like, empty,
empty_like, bmm, dot, outer), each compared with torch: values, dtypes, shapes, errors, and for the products their
gradients in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")

CLOSE_CASES = [
    ([1.0, 2.0, float("nan"), float("inf"), 1e-9], [1.0 + 1e-6, 2.1, float("nan"), float("inf"), 0.0]),
    ([1.0, -float("inf"), 100.0], [1.00001, float("inf"), 100.001]),
]


@pytest.mark.parametrize("a, b", CLOSE_CASES)
@pytest.mark.parametrize("kwargs", [{}, {"equal_nan": True}, {"rtol": 0.1, "atol": 0.0}, {"rtol": 0.0, "atol": 1e-3}])
def test_isclose_and_allclose_are_torchs(a, b, kwargs):
    mine = mg.isclose(mg.tensor(a), mg.tensor(b), **kwargs)
    theirs = torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs)
    assert mine.dtype == mg.bool and mine.shape == tuple(theirs.shape)
    assert mine.tolist() == theirs.tolist()
    result = mg.allclose(mg.tensor(a), mg.tensor(b), **kwargs)
    assert type(result) is bool and result == torch.allclose(torch.tensor(a), torch.tensor(b), **kwargs)


def test_isclose_broadcasts_takes_integers_and_refuses_as_torch_does():
    assert mg.isclose(mg.ones(2, 3), mg.ones(3)).shape == tuple(torch.isclose(torch.ones(2, 3), torch.ones(3)).shape)
    assert mg.isclose(mg.tensor([1, 2]), mg.tensor([1, 3])).tolist() == \
        torch.isclose(torch.tensor([1, 2]), torch.tensor([1, 3])).tolist()
    assert mg.allclose(mg.tensor([1.0, 2.0]), mg.tensor([1.0, 2.0 + 1e-7]))
    for make in (lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1.0, 2.0])),
                 lambda m: m.allclose(m.tensor([1.0]), m.tensor([1.0], dtype=m.float64)),
                 lambda m: m.isclose(m.ones(2), m.ones(2), rtol=-1.0)):
        with pytest.raises(RuntimeError):
            make(torch)
        with pytest.raises(RuntimeError):
            make(mg)


@pytest.mark.parametrize("a, b", [([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 3.0]), ([1.0, 2.0], [1.0]),
                                  ([[1.0, 2.0]], [1.0, 2.0]), ([1, 2], [1.0, 2.0]), ([float("nan")], [float("nan")])])
def test_equal_is_a_python_bool_as_torchs(a, b):
    result = mg.equal(mg.tensor(a), mg.tensor(b))
    assert type(result) is bool and result == torch.equal(torch.tensor(a), torch.tensor(b))


def test_is_tensor_and_numel():
    for value in (mg.ones(2), mg.tensor(3.0), np.ones(2), [1.0], 1.0):
        theirs = torch.as_tensor(value.numpy()) if isinstance(value, mg.Tensor) else value
        assert mg.is_tensor(value) is torch.is_tensor(theirs)
    for shape in ((), (0,), (2, 3), (2, 0, 4)):
        assert mg.numel(mg.zeros(shape)) == torch.numel(torch.zeros(shape))
    with pytest.raises(TypeError):
        torch.numel([1.0])
    with pytest.raises(TypeError, match="numel"):
        mg.numel([1.0])


@pytest.mark.parametrize("name", ["rand", "empty"])
@pytest.mark.parametrize("args", [(2, 3), ((2, 3),), ([4],), ((),), (0,)])
def test_rand_and_empty_shapes_dtypes_and_flags_are_torchs(name, args):
    mine, theirs = getattr(mg, name)(*args), getattr(torch, name)(*args)
    assert mine.shape == tuple(theirs.shape) and str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
    made = getattr(mg, name)(*args, dtype=mg.float64, device="cpu", requires_grad=True)
    assert made.dtype == mg.float64 and made.requires_grad and made.is_leaf and made.device == "cpu"


def test_rand_is_uniform_seeded_and_takes_a_generator():
    mg.manual_seed(0)
    x = mg.rand(10_000)
    assert 0.0 <= x.min().item() and x.max().item() < 1.0 and abs(x.mean().item() - 0.5) < 0.02
    mg.manual_seed(0)
    np.testing.assert_array_equal(mg.rand(10_000).numpy(), x.numpy())
    first = mg.rand(4, generator=mg.Generator().manual_seed(7)).numpy()
    np.testing.assert_array_equal(mg.rand(4, generator=mg.Generator().manual_seed(7)).numpy(), first)
    for m in (torch, mg):
        with pytest.raises((TypeError, NotImplementedError)):
            m.rand(2, dtype=m.long)


def test_empty_is_zero_filled_of_any_dtype():
    assert mg.empty(2, 3).tolist() == [[0.0] * 3] * 2
    assert mg.empty(3, dtype=mg.long).dtype == mg.int64 == mg.empty_like(mg.tensor([1, 2])).dtype


@pytest.mark.parametrize("name", ["rand_like", "randn_like", "empty_like"])
def test_like_forms_take_the_shape_dtype_and_device(name):
    for dtype in ("float32", "float64"):
        mine = getattr(mg, name)(mg.zeros(2, 3, dtype=getattr(mg, dtype)))
        theirs = getattr(torch, name)(torch.zeros(2, 3, dtype=getattr(torch, dtype)))
        assert mine.shape == tuple(theirs.shape) and str(mine.dtype) == str(theirs.dtype).removeprefix("torch.")
        assert mine.device == "cpu" and not mine.requires_grad
    made = getattr(mg, name)(mg.zeros(4), dtype=mg.float64, requires_grad=True)
    assert made.dtype == mg.float64 and made.requires_grad and made.shape == (4,)
    if name != "empty_like":
        for m in (torch, mg):
            with pytest.raises((TypeError, NotImplementedError)):
                getattr(m, name)(m.zeros(2, dtype=m.long))


def test_randn_like_is_normal():
    mg.manual_seed(0)
    x = mg.randn_like(mg.zeros(20_000))
    assert abs(x.mean().item()) < 0.03 and abs(x.std().item() - 1.0) < 0.03


def _pair(shape_a, shape_b, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape_a), rng.standard_normal(shape_b)


@pytest.mark.parametrize("name, shape_a, shape_b", [("bmm", (2, 3, 4), (2, 4, 5)), ("bmm", (1, 1, 1), (1, 1, 2)),
                                                    ("dot", (5,), (5,)), ("outer", (3,), (4,)),
                                                    ("outer", (1,), (2,))])
def test_products_values_and_gradients_are_torchs(name, shape_a, shape_b):
    a, b = _pair(shape_a, shape_b)
    ma, mb = mg.tensor(a, requires_grad=True), mg.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    mine, theirs = getattr(mg, name)(ma, mb), getattr(torch, name)(ta, tb)
    assert mine.shape == tuple(theirs.shape) and mine.dtype == mg.float64
    np.testing.assert_allclose(mine.numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    weights = np.random.default_rng(1).standard_normal(mine.shape)
    (mine * mg.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ma.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mb.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert mg.gradcheck(getattr(mg, name), ma, mb)


def test_products_in_float32_are_float32():
    for name, a, b in (("bmm", (2, 2, 3), (2, 3, 2)), ("dot", (3,), (3,)), ("outer", (2,), (3,))):
        assert getattr(mg, name)(mg.ones(*a), mg.ones(*b)).dtype == mg.float32


@pytest.mark.parametrize("name, shape_a, shape_b, message", [
    ("bmm", (2, 3), (2, 3), r"bmm: expected 3-D tensors, got shapes \(2, 3\) and \(2, 3\)"),
    ("bmm", (2, 3, 4), (4, 5), r"bmm: expected 3-D"),
    ("bmm", (2, 3, 4), (3, 4, 5), r"bmm: shapes \(2, 3, 4\) and \(3, 4, 5\) do not fit"),
    ("bmm", (2, 3, 4), (2, 5, 5), r"bmm: shapes \(2, 3, 4\) and \(2, 5, 5\) do not fit"),
    ("dot", (2, 3), (3,), r"dot: 1-D tensors expected, got shapes \(2, 3\) and \(3,\)"),
    ("dot", (), (), r"dot: 1-D"),
    ("dot", (3,), (4,), r"dot: tensors of shapes \(3,\) and \(4,\) differ"),
    ("outer", (2, 3), (3,), r"outer: 1-D tensors expected, got shapes \(2, 3\) and \(3,\)"),
])
def test_products_refuse_what_torch_refuses_naming_the_shapes(name, shape_a, shape_b, message):
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.ones(shape_a), torch.ones(shape_b))
    with pytest.raises(RuntimeError, match=message):
        getattr(mg, name)(mg.ones(*shape_a), mg.ones(*shape_b))


def test_the_names_are_exported():
    names = ["allclose", "isclose", "equal", "is_tensor", "numel", "rand", "rand_like", "randn_like", "empty",
             "empty_like", "bmm", "dot", "outer"]
    assert set(names) <= set(mg.__all__)
    assert all(hasattr(torch, name) for name in names)


def test_the_new_functions_are_tensor_methods_too() -> None:
    a = mg.tensor(np.arange(6.0).reshape(1, 2, 3))
    b = mg.tensor(np.arange(6.0).reshape(1, 3, 2))
    np.testing.assert_array_equal(a.bmm(b).numpy(), mg.bmm(a, b).numpy())
    u, v = mg.tensor([1.0, 2.0]), mg.tensor([3.0, 4.0])
    assert u.dot(v).item() == 11.0 and u.outer(v).shape == (2, 2)
    assert u.allclose(u + 1e-9) and not u.allclose(v) and u.equal(u.clone()) and not u.equal(v)
    assert u.isclose(v).tolist() == [False, False]

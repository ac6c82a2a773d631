"""minigrad's API as PyTorch's: every op that takes a dim accepts NumPy's spelling too (dim= / axis=,
keepdim= / keepdims=, as PyTorch's own reductions do), with the same result, and refuses both at once;
and every op minigrad implements is found where PyTorch puts it: mg.X for torch.X, Tensor.X for
torch.Tensor.X, F.X for torch.nn.functional.X.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the tests that need it skip and say why
    torch = TF = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install 'minigrad[torch]' "
                                                       "to compare with its namespaces and values")

NUMPY_NAME = {"dim": "axis", "dims": "axis", "keepdim": "keepdims"}
_INDEX = np.array([[[0, 2, 1, 0]], [[1, 1, 0, 2]]])  # for gather along dim 1 of a (2, 3, 4) tensor


def _pair(x):
    return [x, x * 2.0]


# name -> (minigrad's function, the Tensor method or None, positional arguments after x, other options,
#          the dim options in PyTorch's spelling, PyTorch's function of the same meaning)
DIM_OPS = {
    "sum": (mg.sum, "sum", (), {}, {"dim": 1, "keepdim": True}, "sum"),
    "sum over two dims": (mg.sum, "sum", (), {}, {"dim": (0, 2)}, "sum"),
    "mean": (mg.mean, "mean", (), {}, {"dim": (0, 2), "keepdim": True}, "mean"),
    "max": (mg.max, "max", (), {}, {"dim": 2, "keepdim": True}, "max"),
    "min": (mg.min, "min", (), {}, {"dim": 0}, "min"),
    "amax": (mg.amax, "amax", (), {}, {"dim": (0, 2), "keepdim": True}, "amax"),
    "amin": (mg.amin, "amin", (), {}, {"dim": 1}, "amin"),
    "argmax": (mg.argmax, "argmax", (), {}, {"dim": 2, "keepdim": True}, "argmax"),
    "argmin": (mg.argmin, "argmin", (), {}, {"dim": -1}, "argmin"),
    "var": (mg.var, "var", (), {"correction": 0}, {"dim": 1, "keepdim": True}, "var"),
    "std": (mg.std, "std", (), {}, {"dim": (1, 2), "keepdim": False}, "std"),
    "prod": (mg.prod, "prod", (), {}, {"dim": 0, "keepdim": True}, "prod"),
    "logsumexp": (mg.logsumexp, "logsumexp", (), {}, {"dim": -1, "keepdim": True}, "logsumexp"),
    "cumsum": (mg.cumsum, "cumsum", (), {}, {"dim": 1}, "cumsum"),
    "any": (mg.any, "any", (), {}, {"dim": 1, "keepdim": True}, "any"),
    "all": (mg.all, "all", (), {}, {"dim": 2}, "all"),
    "softmax": (F.softmax, "softmax", (), {}, {"dim": 0}, "softmax"),
    "log_softmax": (F.log_softmax, "log_softmax", (), {}, {"dim": 1}, "log_softmax"),
    "cat": (lambda x, **kw: mg.cat(_pair(x), **kw), None, (), {}, {"dim": 1}, "cat"),
    "concatenate": (lambda x, **kw: mg.concatenate(_pair(x), **kw), None, (), {}, {"dim": -1}, "concatenate"),
    "stack": (lambda x, **kw: mg.stack(_pair(x), **kw), None, (), {}, {"dim": 3}, "stack"),
    "split": (mg.split, "split", (2,), {}, {"dim": 2}, "split"),
    "chunk": (mg.chunk, "chunk", (2,), {}, {"dim": 1}, "chunk"),
    "squeeze": (lambda x, **kw: mg.squeeze(x[:, :1], **kw), None, (), {}, {"dim": 1}, "squeeze"),
    "unsqueeze": (mg.unsqueeze, "unsqueeze", (), {}, {"dim": 1}, "unsqueeze"),
    "unflatten": (mg.unflatten, "unflatten", (), {"sizes": (2, 2)}, {"dim": 2}, "unflatten"),
    "gather": (mg.gather, "gather", (), {"index": _INDEX}, {"dim": 1}, "gather"),
    "flip": (mg.flip, None, (), {}, {"dims": (0, 2)}, "flip"),
}


def _numpy_spelling(options: dict) -> dict:
    return {NUMPY_NAME[k]: v for k, v in options.items()}


def _arrays(result) -> list[np.ndarray]:
    return [t.numpy() for t in (result if isinstance(result, tuple) else (result,))]


def _calls(name: str):
    """The op called as mg.X (or F.X) and, where there is one, as the Tensor method."""
    fn, method, args, options, _, _ = DIM_OPS[name]
    yield lambda x, **dims: fn(x, *args, **options, **dims)
    if method is not None:
        yield lambda x, **dims: getattr(x, method)(*args, **options, **dims)


@pytest.mark.parametrize("name", DIM_OPS)
def test_numpy_spelling_gives_the_same_result(name, rand) -> None:
    dims = DIM_OPS[name][4]
    x = rand(2, 3, 4)
    for call in _calls(name):
        torch_spelling, numpy_spelling = _arrays(call(x, **dims)), _arrays(call(x, **_numpy_spelling(dims)))
        assert len(torch_spelling) == len(numpy_spelling)
        for a, b in zip(torch_spelling, numpy_spelling, strict=True):
            assert a.shape == b.shape
            np.testing.assert_array_equal(a, b)
        if "keepdim" in dims:  # the other spelling of keepdim must be read too, not dropped
            dropped = _arrays(call(x, **{k: v for k, v in dims.items() if k != "keepdim"}))
            assert dims["keepdim"] is False or dropped[0].ndim < torch_spelling[0].ndim


@pytest.mark.parametrize("name", DIM_OPS)
def test_both_spellings_at_once_are_refused(name, rand) -> None:
    dims = DIM_OPS[name][4]
    torch_name, value = next(iter(dims.items()))
    for call in _calls(name):
        with pytest.raises(TypeError, match=rf"got both {torch_name} and {NUMPY_NAME[torch_name]}"):
            call(rand(2, 3, 4), **dims, **{NUMPY_NAME[torch_name]: value})


def test_a_positional_dim_with_its_alias_is_refused(rand) -> None:
    with pytest.raises(TypeError, match="sum: got both dim and axis"):
        mg.sum(rand(2, 3), 0, axis=1)
    with pytest.raises(TypeError, match="got both keepdim and keepdims"):
        rand(2, 3).mean(1, True, keepdims=True)


@needs_torch
@pytest.mark.parametrize("name", DIM_OPS)
def test_dim_ops_match_torch(name) -> None:
    """Values as PyTorch gives them, for its spelling."""
    fn, _, args, options, dims, torch_name = DIM_OPS[name]
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    theirs = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in options.items()}
    if name in ("cat", "concatenate", "stack"):
        expected = getattr(torch, torch_name)(_pair(torch.from_numpy(x)), **dims)
    elif name == "squeeze":
        expected = torch.squeeze(torch.from_numpy(x)[:, :1], **dims)
    else:
        expected = getattr(torch, torch_name)(torch.from_numpy(x), *args, **theirs, **dims)
    expected = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    for call in _calls(name):
        mine = _arrays(call(mg.tensor(x, dtype=mg.float64), **_numpy_spelling(dims)))
        assert [a.shape for a in mine] == [e.shape for e in expected]
        for a, e in zip(mine, expected, strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)


# ---- where each op is found ----

# by module name: the package attribute mg.matmul is the function, which the module of that name defines
OP_MODULES = [importlib.import_module(f"minigrad.ops.{name}") for name in (
    "elementwise", "reductions", "shapes", "matmul", "creation", "activations", "normalization", "losses", "sdpa")]


def _ops() -> dict[str, object]:
    """Every public function the op modules define (aliases such as concatenate = cat included)."""
    found = {}
    for module in OP_MODULES:
        for name, value in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(value) and value.__module__ == module.__name__:
                found[name] = value
    return found


def test_the_op_list_is_complete() -> None:
    """The list the namespace tests walk holds the ops they are about (a broken _ops would pass them)."""
    assert {"sum", "exp", "cat", "concatenate", "matmul", "zeros", "softmax", "layer_norm", "cross_entropy",
            "scaled_dot_product_attention", "gather", "var"} <= set(_ops())


@needs_torch
def test_every_op_torch_has_as_torch_x_is_mg_x() -> None:
    missing = [name for name, fn in _ops().items()
               if inspect.getattr_static(torch, name, None) is not None and getattr(torch, name).__doc__
               and getattr(mg, name, None) is not fn]
    assert not missing, f"torch.X exists (documented) but mg.X is missing or another function: {missing}"
    exported = [name for name, fn in _ops().items() if getattr(mg, name, None) is fn]
    assert set(exported) <= set(mg.__all__), f"mg.X not in mg.__all__: {set(exported) - set(mg.__all__)}"


@needs_torch
def test_every_op_torch_has_as_a_tensor_method_is_one() -> None:
    missing = [name for name in _ops() if hasattr(torch.Tensor, name) and not hasattr(mg.Tensor, name)]
    assert not missing, f"torch.Tensor.X exists but mg.Tensor.X does not: {missing}"


@needs_torch
def test_every_op_torch_has_in_functional_is_in_f() -> None:
    missing = [name for name in _ops() if hasattr(TF, name) and not hasattr(F, name)]
    assert not missing, f"torch.nn.functional.X exists but F.X does not: {missing}"
    for name in F.__all__:
        assert hasattr(F, name)


@pytest.mark.parametrize("method, call", [
    ("add", lambda x: x.add(x)), ("sub", lambda x: x.sub(2.0)), ("mul", lambda x: x.mul(x)),
    ("div", lambda x: x.div(2.0)), ("pow", lambda x: x.pow(2)), ("neg", lambda x: x.neg()),
    ("matmul", lambda x: x.matmul(x.T)), ("relu", lambda x: x.relu()),
    ("masked_fill", lambda x: x.masked_fill(x > 0, 0.0)), ("softmax", lambda x: x.softmax(-1)),
])
def test_tensor_methods_are_the_ops(method, call, rand) -> None:
    x = rand(2, 3)
    expected = {"add": x.numpy() * 2, "sub": x.numpy() - 2, "mul": x.numpy() ** 2, "div": x.numpy() / 2,
                "pow": x.numpy() ** 2, "neg": -x.numpy(), "matmul": x.numpy() @ x.numpy().T,
                "relu": np.maximum(x.numpy(), 0), "masked_fill": np.minimum(x.numpy(), 0),
                "softmax": F.softmax(x, -1).numpy()}[method]
    np.testing.assert_allclose(call(x).numpy(), expected, rtol=1e-12)


def test_embedding_takes_the_indices_first(rand) -> None:
    """F.embedding(input, weight), as torch.nn.functional.embedding; it took (weight, indices)."""
    w = rand(5, 3)
    np.testing.assert_array_equal(F.embedding([[4, 0]], w).numpy(), w.numpy()[[[4, 0]]])
    with pytest.raises(TypeError, match=r"embedding: weight must be a tensor, got list; the indices come first"):
        F.embedding(w, [4, 0])


# ---- indexing: PyTorch's rule where ints and arrays mix ----

_A, _A0 = np.array([1, 2]), np.array([1, 0])
_MASK = np.array([True, False, True])
_ALL = slice(None)
INDEXES = {  # into a (2, 3, 4, 5) tensor; arrays given as NumPy arrays, lists and tensors
    "int, slice, array, slice": (0, _ALL, _A, _ALL),  # PyTorch (3, 2, 5), NumPy (2, 3, 5)
    "slice, int, slice, array": (_ALL, 0, _ALL, _A),
    "array, int, array": (_A0, 0, _A),
    "array, slice, int": (_A0, _ALL, 0),
    "int, array": (0, _A),
    "int, slice, 2-d array": (1, _ALL, np.array([[0, 1], [2, 0]])),
    "int, ellipsis, array": (0, Ellipsis, _A),
    "ellipsis, int, array": (Ellipsis, 1, _A),
    "int, None, slice, array": (0, None, _ALL, _A),
    "None, int, array, int": (None, 0, _A, 1),
    "int, mask": (0, _MASK),
    "int, mask, int": (1, _MASK, 2),
    "array, int, slice, array": (_A0, 1, _ALL, _A),
    "int, list, slice": (0, [1, 2], slice(1, 3)),
    "int, slice, column, row": (0, _ALL, np.array([[1], [2]]), np.array([0, 3])),
    "negative int, slice, array": (-1, _ALL, np.array([3, 0])),
    "two ints, array": (0, 2, _A),
    "ints only": (1, 2),
    "slices only": (slice(1, None), _ALL, slice(None, None, 2)),
    "arrays only": (_A0, _A),
    "mask only": (np.array([True, False]),),
    "None and ellipsis": (None, Ellipsis, 0),
}


@needs_torch
@pytest.mark.parametrize("as_", ["numpy", "tensor"])
@pytest.mark.parametrize("name", INDEXES)
def test_indexing_matches_torch_forward_backward_and_setitem(name, as_):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    index = INDEXES[name]
    theirs = tuple(torch.from_numpy(i) if isinstance(i, np.ndarray) else i for i in index)
    ours = tuple(mg.tensor(i) if isinstance(i, np.ndarray) and as_ == "tensor" else i for i in index)
    mx, tx = mg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, expected = mx[ours], tx[theirs]
    assert y.shape == tuple(expected.shape)
    np.testing.assert_array_equal(y.numpy(), expected.detach().numpy())
    dout = np.random.default_rng(1).standard_normal(y.shape)
    y.backward(dout)
    expected.backward(torch.from_numpy(dout))
    np.testing.assert_array_equal(mx.grad.numpy(), tx.grad.numpy())
    mw, tw = mg.tensor(x), torch.tensor(x)
    value = np.arange(dout.size, dtype=float).reshape(dout.shape)
    mw[ours] = value
    tw[theirs] = torch.from_numpy(value)
    np.testing.assert_array_equal(mw.numpy(), tw.numpy())


def test_setitem_with_ints_and_arrays_records_its_gradient_as_torch():
    """The write lands in PyTorch's order, and the gradient of what was written and of what was kept follows it."""
    x = mg.zeros(2, 3, 4, dtype=mg.float64, requires_grad=True)
    v = mg.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    y = x * 1.0
    y[0, :, [1, 2]] = v  # (3, 2): PyTorch's shape for y[0, :, [1, 2]]
    (y * mg.tensor(np.arange(24.0).reshape(2, 3, 4))).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), np.arange(24.0).reshape(2, 3, 4)[0][:, [1, 2]])
    assert x.grad.numpy()[0, :, [1, 2]].sum() == 0 and x.grad.numpy()[1].sum() == np.arange(12.0, 24.0).sum()


def test_an_index_tensor_written_after_a_mixed_index_is_refused_in_backward():
    """x[0, :, idx] keeps idx for its backward, as any array index does: writing into idx before backward is
    refused (the gradient would go where idx points now), as PyTorch refuses."""
    x = mg.randn(2, 3, 4, requires_grad=True)
    idx = mg.tensor([1, 2])
    y = x[0, :, idx].sum()
    idx[0] = 3
    with pytest.raises(RuntimeError, match="index or mask tensor"):
        y.backward()

"""The math ops where a random-input gradient check cannot look: erf's accuracy against
math.erf, the points where a derivative has a kink or a tie (abs and leaky_relu at 0, maximum on ties,
clamp on its bounds, prod with zeros), extreme inputs (sigmoid, logsumexp), the ops without a gradient
(argmax, argmin, any, all), the creation functions, and the errors. The table cases themselves are
gradchecked in test_gradcheck.py and compared with PyTorch in test_torch_oracle.py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install 'minigrad[torch]'")
TOL = dict(rtol=1e-10, atol=1e-12)


def both(fn_mg, fn_torch, *arrays: np.ndarray, dout: np.ndarray | None = None) -> None:
    """fn_mg on minigrad tensors and fn_torch on torch tensors give the same values and input gradients."""
    xs = [mg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, t_out = fn_mg(*xs), fn_torch(*ts)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), **TOL)
    dout = np.random.default_rng(5).standard_normal(out.shape) if dout is None else dout
    out.backward(dout)
    t_out.backward(torch.tensor(dout))
    for i, (x, t) in enumerate(zip(xs, ts, strict=True)):
        np.testing.assert_allclose(x.grad, t.grad.numpy(), **TOL, err_msg=f"gradient of input {i}")


# ---- erf: NumPy has none; backend.erf must be as good as math.erf ----

# every interval of backend.erf's three formulas, their edges, and tiny values (0 is in test_erf_special_values)
ERF_GRID = np.concatenate([np.linspace(0.0007, 7, 20000), np.geomspace(1e-300, 1e-2, 300), [0.46875, 4.0, 5.9, 26.0]])


def test_erf_matches_math_erf_to_float64_rounding(device) -> None:
    x = np.concatenate([ERF_GRID, -ERF_GRID])
    expected = np.array([math.erf(v) for v in x])
    got = mg.tensor(x, device=device).erf().numpy()
    relative = np.abs(got - expected) / np.abs(expected)
    assert relative.max() < 1e-15, f"worst at x = {x[relative.argmax()]!r}: {relative.max():.3g}"


def test_erf_special_values(device) -> None:
    x = mg.tensor([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -40.0], dtype=mg.float64, device=device)
    y = x.erf().numpy()
    np.testing.assert_array_equal(y[[0, 2, 3, 5, 6]], [0.0, 1.0, -1.0, 1.0, -1.0])
    assert np.signbit(y[1]) and np.isnan(y[4])


def test_erf_keeps_float32(device) -> None:
    x = mg.tensor(ERF_GRID[::50], dtype=mg.float32, device=device)
    y = x.erf()
    assert y.dtype == mg.float32
    expected = np.array([math.erf(v) for v in x.numpy().astype(np.float64)], dtype=np.float32)
    np.testing.assert_allclose(y.numpy(), expected, rtol=2e-7, atol=1e-37)


@needs_torch
def test_gelu_default_is_exact_as_pytorch() -> None:
    x = np.linspace(-6, 6, 41)
    both(F.gelu, TF.gelu, x)
    tanh_form = F.gelu(mg.tensor(x), approximate="tanh").numpy()
    assert 1e-4 < np.abs(F.gelu(mg.tensor(x)).numpy() - tanh_form).max() < 5e-4  # two different functions


def test_gelu_refuses_unknown_approximation() -> None:
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh', got 'erf'"):
        F.gelu(mg.tensor([1.0]), approximate="erf")


# ---- kinks and ties: the gradient PyTorch picks ----

@needs_torch
def test_abs_and_leaky_relu_at_zero_match_torch() -> None:
    x = np.array([-2.0, -0.0, 0.0, 3.0])
    both(mg.abs, torch.abs, x)
    both(F.leaky_relu, TF.leaky_relu, x)
    both(lambda t: abs(t), lambda t: abs(t), x)  # Tensor.__abs__


@needs_torch
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_share_ties_as_torch(op: str) -> None:
    a = np.array([[1.0, 2.0, 3.0, 2.0]])
    b = np.array([[1.0], [2.0], [3.0]])  # broadcast to (3, 4): a tie in every row
    both(getattr(mg, op), getattr(torch, op), a, b)
    tie = mg.tensor([2.0], requires_grad=True)
    getattr(mg, op)(tie, tie).backward(np.array([1.0]))
    assert tie.grad[0] == 1.0  # both halves arrive at the one input


@needs_torch
def test_min_shares_ties_as_torch_amin() -> None:
    x = np.array([[1.0, 3.0, 1.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]])
    both(lambda t: t.amin(axis=1), lambda t: t.amin(dim=1), x)


@needs_torch
def test_clamp_on_its_bounds_matches_torch() -> None:
    x = np.array([-1.0, -0.5, 0.0, 0.7, 2.0])  # -0.5 and 0.7 sit exactly on the bounds
    both(lambda t: t.clamp(min=-0.5, max=0.7), lambda t: t.clamp(min=-0.5, max=0.7), x)
    both(lambda t: mg.clip(t, min=0.7, max=-0.5), lambda t: torch.clip(t, min=0.7, max=-0.5), x)  # min > max


def test_clamp_errors() -> None:
    x = mg.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="at least one of min and max"):
        x.clamp()
    with pytest.raises(TypeError, match="bounds must be numbers.*mg.maximum"):
        x.clamp(min=mg.tensor(0.0))
    with pytest.raises(TypeError, match="clamp: expected a tensor or a number, got str"):
        x.clamp(max="1")


def test_clamp_of_an_integer_tensor_by_a_float_is_float32() -> None:
    """As in PyTorch: the float bound promotes the integer tensor (an int bound keeps it int64)."""
    y = mg.tensor([1, 2]).clamp(max=0.5)
    assert y.dtype == mg.float32 and y.numpy().tolist() == [0.5, 0.5]
    assert mg.tensor([1, 3]).clamp(max=2).numpy().tolist() == [1, 2]


@needs_torch
@pytest.mark.parametrize("x", [
    [[0.0, 2.0, 3.0], [4.0, 0.5, -1.0]],  # one zero in a row
    [[0.0, 2.0, 0.0], [4.0, 0.5, -1.0]],  # two zeros in a row
    [[0.0, 0.0, 0.0], [0.0, 0.5, -1.0]],
], ids=["one zero", "two zeros", "all zeros"])
def test_prod_with_zeros(x) -> None:
    x = np.array(x)
    both(lambda t: t.prod(axis=1), lambda t: t.prod(dim=1), x)
    both(lambda t: t.prod(), lambda t: t.prod(), x)
    assert mg.gradcheck(lambda t: t.prod(axis=1), mg.tensor(x, requires_grad=True)).passed


def test_prod_with_a_zero_gradchecks_on_device(device) -> None:
    x = mg.tensor([[1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 3.0, 1.0]], dtype=mg.float64, requires_grad=True, device=device)
    assert mg.gradcheck(lambda t: t.prod(axis=-1), x).passed
    assert mg.gradcheck(lambda t: t.prod(axis=0), x).passed


@needs_torch
def test_where_takes_a_comparison_and_refuses_numbers() -> None:
    x = np.array([[-1.0, 2.0, 0.5], [3.0, -4.0, 0.0]])
    y = np.array([10.0, 20.0, 30.0])
    both(lambda a, b: mg.where(a > 0, a, b), lambda a, b: torch.where(a > 0, a, b), x, y)
    with pytest.raises(TypeError, match="where: expected boolean values, got dtype int64"):
        mg.where([1, 0], mg.tensor([1.0, 2.0]), 0.0)


# ---- extreme inputs ----

@pytest.mark.parametrize("dtype", [mg.float32, mg.float64])
def test_sigmoid_and_silu_do_not_overflow(dtype) -> None:
    x = mg.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=dtype, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exp(1000) would overflow with a RuntimeWarning
        s, y = x.sigmoid(), F.silu(x)
        (s + y).backward(np.ones(5))
    np.testing.assert_array_equal(s.numpy()[[0, 2, 4]], [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(y.numpy()[[0, 2, 4]], [-0.0, 0.0, 1000.0])
    assert s.dtype == y.dtype == x.grad.dtype == dtype and np.isfinite(x.grad.numpy()).all()


@needs_torch
def test_logsumexp_is_stable_and_matches_torch() -> None:
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -1002.0], [0.0, -np.inf, 1.0]])
    both(lambda t: t.logsumexp(1), lambda t: torch.logsumexp(t, dim=1), x)
    both(lambda t: mg.logsumexp(t, 0, keepdims=True), lambda t: torch.logsumexp(t, dim=0, keepdim=True), x)


@needs_torch
def test_logsumexp_of_infinite_rows_as_torch() -> None:
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0]])
    with np.errstate(divide="ignore"):  # log(0) = -inf is the answer for a row of -inf
        got = mg.tensor(x).logsumexp(1).numpy()
    np.testing.assert_array_equal(got, torch.logsumexp(torch.tensor(x), dim=1).numpy())


# ---- no gradient: argmax, argmin, any, all ----

INDEX_INPUT = np.array([[[1.0, 5.0, 5.0], [2.0, -1.0, 0.0]], [[7.0, 7.0, 7.0], [0.0, 3.0, -2.0]]])


@needs_torch
@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin_match_torch(op: str, axis, keepdims: bool) -> None:
    x = mg.tensor(INDEX_INPUT, requires_grad=True)
    got = getattr(x, op)(axis, keepdims)
    expected = getattr(torch, op)(torch.tensor(INDEX_INPUT), dim=axis, keepdim=keepdims)
    assert got.dtype == mg.int64 and not got.requires_grad
    assert got.shape == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())  # ties: the first index, as torch


@needs_torch
@pytest.mark.parametrize("op", ["any", "all"])
@pytest.mark.parametrize("values", [INDEX_INPUT, INDEX_INPUT > 0, INDEX_INPUT.astype(np.int64)], ids=["float", "bool",
                                                                                                   "int"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (-1, True), ((0, 2), False)])
def test_any_all_match_torch(op: str, values, axis, keepdims: bool) -> None:
    got = getattr(mg, op)(mg.tensor(values), axis, keepdims)
    t = torch.tensor(values)
    expected = getattr(torch, op)(t) if axis is None else getattr(torch, op)(t, dim=axis, keepdim=keepdims)
    assert got.dtype == mg.bool_ and got.shape == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_reduction_errors() -> None:
    with pytest.raises(ValueError, match=r"argmax: tensor of shape \(0, 2\) is empty"):
        mg.zeros(0, 2).argmax()
    with pytest.raises(ValueError, match=r"min: tensor of shape \(0,\) is empty"):
        mg.zeros(0).min()
    with pytest.raises(TypeError, match=r"argmin: dim must be one int, got \(0, 1\)"):
        mg.zeros(2, 2).argmin((0, 1))
    with pytest.raises(TypeError, match="cumsum: dim must be one int"):
        mg.zeros(2, 2).cumsum(None)
    with pytest.raises(ValueError, match=r"cumsum: dim 2 is out of range \[-2, 1\] for a tensor of shape \(2, 2\)"):
        mg.zeros(2, 2).cumsum(2)


# ---- var and std ----

@needs_torch
def test_var_std_options_match_torch() -> None:
    x = np.random.default_rng(0).standard_normal((3, 4))
    t = torch.tensor(x)
    for mine, theirs in [(mg.tensor(x).var(), t.var()), (mg.tensor(x).std(0, correction=0), t.std(0, correction=0)),
                         (mg.std(mg.tensor(x), 1, unbiased=True), t.std(1, unbiased=True)),
                         (mg.var(mg.tensor(x), -1, correction=2.5, keepdims=True), t.var(-1, correction=2.5,
                                                                                             keepdim=True))]:
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), **TOL)


def test_var_errors() -> None:
    with pytest.raises(ValueError, match="correction or unbiased, not both"):
        mg.zeros(3).std(correction=1, unbiased=True)
    with pytest.raises(TypeError, match="var: needs a floating-point tensor, got int64"):
        mg.tensor([1, 2, 3]).var()


@needs_torch
def test_cumsum_of_integers_stays_integer() -> None:
    x = mg.tensor([[1, 2, 3], [4, 5, 6]])
    y = x.cumsum(1)
    assert y.dtype == mg.int64
    np.testing.assert_array_equal(y.numpy(), torch.cumsum(torch.tensor(x.numpy()), dim=1).numpy())


# ---- every new op keeps float32, and mg.X is Tensor.X ----

UNARY = {
    "sigmoid": (mg.sigmoid, lambda x: x.sigmoid()), "abs": (mg.abs, lambda x: x.abs()),
    "rsqrt": (mg.rsqrt, lambda x: x.rsqrt()), "sin": (mg.sin, lambda x: x.sin()), "cos": (mg.cos, lambda x: x.cos()),
    "erf": (mg.erf, lambda x: x.erf()), "clamp": (lambda x: mg.clamp(x, 0.6, 1.5), lambda x: x.clamp(0.6, 1.5)),
    "amin": (lambda x: mg.amin(x, 1), lambda x: x.amin(1)), "var": (lambda x: mg.var(x, 1), lambda x: x.var(1)),
    "std": (mg.std, lambda x: x.std()), "prod": (lambda x: mg.prod(x, 0), lambda x: x.prod(0)),
    "logsumexp": (lambda x: mg.logsumexp(x, -1), lambda x: x.logsumexp(-1)),
    "cumsum": (lambda x: mg.cumsum(x, 1), lambda x: x.cumsum(1)),
    "maximum": (lambda x: mg.maximum(x, 1.0), lambda x: x.maximum(1.0)),
    "minimum": (lambda x: mg.minimum(x, 1.0), lambda x: x.minimum(1.0)),
    "where": (lambda x: mg.where(x > 1, x, 0.0), lambda x: x.where(x > 1, 0.0)),
    "F.sigmoid": (F.sigmoid, lambda x: x.sigmoid()), "F.silu": (F.silu, lambda x: x * x.sigmoid()),
    "F.leaky_relu": (F.leaky_relu, F.relu),  # the same for positive inputs
    "F.gelu": (F.gelu, lambda x: x * 0.5 * (1 + (x * math.sqrt(0.5)).erf())),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_module_function_and_method_agree_and_keep_float32(name: str, rand) -> None:
    module_fn, method = UNARY[name]
    x = rand(2, 3, positive=True, dtype=mg.float32)
    x2 = mg.tensor(x.numpy().copy(), requires_grad=True, device=x.device)
    y, y2 = module_fn(x), method(x2)
    assert y.dtype == y2.dtype == mg.float32
    np.testing.assert_allclose(y.numpy(), y2.numpy(), rtol=1e-5, atol=1e-6)
    y.backward(np.ones(y.shape))
    y2.backward(np.ones(y2.shape))
    assert x.grad.dtype == mg.float32
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-4, atol=1e-5)


# ---- creation ----

def test_like_creators_keep_shape_dtype_and_device(device) -> None:
    t = mg.tensor([[1, 2, 3], [4, 5, 6]], device=device)
    for made, value in ((mg.zeros_like(t), 0), (mg.ones_like(t), 1), (mg.full_like(t, 7), 7)):
        assert made.shape == (2, 3) and made.dtype == mg.int64 and made.device == device
        assert not made.requires_grad and (made.numpy() == value).all()
    f = mg.full_like(t, 2.5, dtype=mg.float64, requires_grad=True)
    assert f.dtype == mg.float64 and f.requires_grad and (f.numpy() == 2.5).all()
    assert mg.ones_like(t, device="cpu").device == "cpu"


@needs_torch
@pytest.mark.parametrize("value", [2, 2.5, True, -1])
def test_full_picks_the_dtype_as_torch(value, device) -> None:
    made = mg.full((2, 3), value, device=device)
    expected = torch.full((2, 3), value)
    assert str(made.dtype) == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(made.numpy(), expected.numpy())
    assert mg.full(4, value).shape == (4,)


@needs_torch
@pytest.mark.parametrize("n, m", [(3, None), (2, 4), (4, 1), (0, 2)])
def test_eye_matches_torch(n: int, m, device) -> None:
    made = mg.eye(n, m, device=device, requires_grad=True)
    expected = torch.eye(n, m) if m is not None else torch.eye(n)
    assert made.dtype == mg.float32 and made.requires_grad and made.device == device
    np.testing.assert_array_equal(made.numpy(), expected.numpy())


def test_creation_errors() -> None:
    with pytest.raises(TypeError, match="only floating-point tensors can require grad, got dtype int64"):
        mg.full((2,), 3, requires_grad=True)
    with pytest.raises(TypeError, match=r"full: fill_value must be a number, got an array of shape \(2,\)"):
        mg.full((2,), [1.0, 2.0])
    with pytest.raises(TypeError, match="dtype <U1 is not a number type"):
        mg.full((2,), "a")

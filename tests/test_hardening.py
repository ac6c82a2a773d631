"""Edge cases each pinned by a test that failed before its fix, and their relatives:
0-d tensors (gradient accumulation, NumPy scalars), zero bases in pow, 1-D and zero-sized matmul, empty
reductions, re-entrant and per-thread grad mode, None and strings as operands, dtype promotion, the
differentiable .to(dtype), softmax of a 0-d tensor, and mg.save / mg.load / load_state_dict on bad
values and crafted files. PyTorch gives the reference values where it is installed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import threading
import warnings
import zipfile

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.array import backend
from minigrad.nn import functional as F

try:
    import torch
except ImportError:  # the tests that need it skip and say why
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install 'minigrad[torch]' "
                                                       "for the reference values")
TOL = dict(rtol=1e-12, atol=1e-12)


def scalar(value: float, device: str = "cpu") -> mg.Tensor:
    return mg.tensor(value, requires_grad=True, dtype=mg.float64, device=device)


def grad(t: mg.Tensor) -> np.ndarray:
    assert t.grad is not None, f"tensor of shape {t.shape} got no gradient"
    assert isinstance(t.grad, mg.Tensor), f".grad is a {type(t.grad).__name__}"
    assert isinstance(t.grad.array, backend.get_array_module(t.array).ndarray), f"its array is a {type(t.grad.array)}"
    return t.grad.numpy()


# ---- a 0-d tensor used more than once ----

# expression -> its derivative at x, by hand (the torch test runs the same expressions)
SCALAR_USES = {
    "(x + x) * x": (lambda x: (x + x) * x, lambda x: 4 * x),
    "x * x": (lambda x: x * x, lambda x: 2 * x),
    "x * x * x": (lambda x: x * x * x, lambda x: 3 * x**2),
    "x / x + x": (lambda x: x / x + x, lambda x: 1.0),
    "x - x * x": (lambda x: x - x * x, lambda x: 1 - 2 * x),
    "-x + x * 3": (lambda x: -x + x * 3.0, lambda x: 2.0),
    "exp(x) * x": (lambda x: x.exp() * x, lambda x: np.exp(x) * (1 + x)),
    "x ** x": (lambda x: x**x, lambda x: x**x * (np.log(x) + 1)),
    "tanh(x) * sqrt(x)": (lambda x: x.tanh() * x.sqrt(), lambda x: (1 - np.tanh(x) ** 2) * np.sqrt(x)
                          + np.tanh(x) / (2 * np.sqrt(x))),
    "sum and mean of x * x": (lambda x: (x * x).sum() + (x * x).mean(), lambda x: 4 * x),
    "max(x) * x": (lambda x: x.max() * x, lambda x: 2 * x),
    "x[None] * x": (lambda x: (x[None] * x).sum(), lambda x: 2 * x),
}


@pytest.mark.parametrize("name", SCALAR_USES)
def test_scalar_used_twice_gets_the_whole_gradient(name, device) -> None:
    """Gradients of a 0-d tensor used twice were summed with `total += dx`, which NumPy scalars do not do
    in place: (x + x) * x gave 2x instead of 4x."""
    fn, derivative = SCALAR_USES[name]
    x = scalar(1.5, device)
    y = fn(x)
    assert y.shape == () and isinstance(y.array, backend.module_for(device).ndarray)
    y.backward()
    np.testing.assert_allclose(grad(x), derivative(1.5), **TOL)


@needs_torch
@pytest.mark.parametrize("name", SCALAR_USES)
def test_scalar_used_twice_matches_torch(name) -> None:
    fn, _ = SCALAR_USES[name]
    x, tx = scalar(0.7), torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    fn(x).backward()
    fn(tx).backward()
    np.testing.assert_allclose(grad(x), tx.grad.numpy(), **TOL)


@pytest.mark.parametrize("fn", [lambda x: x[0, 1], lambda x: x[0, 0] < x[0, 1], lambda x: x.sum() * x.sum(),
                                lambda x: F.gelu(x.sum()), lambda x: -x[1, 2]],
                         ids=["getitem", "compare", "product", "gelu", "neg"])
def test_zero_d_results_are_arrays(fn, rand) -> None:
    """NumPy gives scalars for 0-d results (x[0, 1], a < b on 0-d arrays); a tensor's data is always an array,
    which `out=` and in-place updates can write into (F.gelu of a 0-d tensor raised)."""
    x = rand(2, 3)
    assert isinstance(fn(x).array, backend.get_array_module(x.array).ndarray)


def test_function_returning_numpy_scalars_still_accumulates() -> None:
    """A user's Function whose forward and backward return NumPy scalars: the engine still sums right."""
    class Triple(mg.Function):
        def forward(self, x):
            return x * 3.0  # a NumPy scalar for a 0-d x

        def backward(self, dout):
            return (dout * 3.0,)  # likewise

    x = scalar(2.0)
    y = Triple.apply(x)
    assert isinstance(y.array, np.ndarray)
    (y * Triple.apply(x) + Triple.apply(x)).backward()  # 9 x^2 + 3 x
    np.testing.assert_allclose(grad(x), 18 * 2.0 + 3, **TOL)


# ---- pow at a zero base ----

BASES = [0.0, 0.0, 0.0, 0.0, 1.5, -1.5, 2.0]
EXPONENTS = [0.0, 0.5, 2.0, -1.0, 0.0, 0.0, -0.5]


@needs_torch
def test_pow_at_zero_base_matches_torch() -> None:
    """d(x**0)/dx at 0 and d(0**y)/dy were NaN or -inf where PyTorch gives 0."""
    a, b = mg.tensor(BASES, requires_grad=True, dtype=mg.float64), mg.tensor(EXPONENTS, requires_grad=True,
                                                                            dtype=mg.float64)
    ta, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (BASES, EXPONENTS))
    dout = np.random.default_rng(0).standard_normal(len(BASES))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0 ** -1 is inf, as it should be
        (a**b).backward(dout)
    (ta**tb).backward(torch.from_numpy(dout))
    np.testing.assert_allclose(grad(a), ta.grad.numpy(), **TOL)
    np.testing.assert_allclose(grad(b), tb.grad.numpy(), **TOL)


def test_pow_zero_exponent_and_zero_base_have_zero_gradient(device) -> None:
    x = mg.tensor([0.0, 1.0, -2.0], requires_grad=True, dtype=mg.float64, device=device)
    (x**0.0).sum().backward()
    np.testing.assert_array_equal(grad(x), [0.0, 0.0, 0.0])
    y = mg.tensor([0.0, 1.0, 2.5], requires_grad=True, dtype=mg.float64, device=device)
    (0.0**y).sum().backward()
    np.testing.assert_array_equal(grad(y), [0.0, 0.0, 0.0])


# ---- matmul: 1-D, zero-sized ----

MATMUL_SHAPES = [((3,), (3,)), ((0,), (0,)), ((2, 0), (0, 3)), ((0, 2), (2, 3)), ((2, 3), (3, 0)),
                 ((2, 3, 0), (2, 0, 4)), ((0,), (0, 4)), ((2, 0), (0,)), ((4,), (2, 4, 3)), ((2, 2, 3), (3,))]


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_of_vectors_and_zero_sizes(a_shape, b_shape, device) -> None:
    """1-D @ 1-D raised in forward; a zero-sized dimension raised in forward or backward."""
    rng = np.random.default_rng(0)
    an, bn = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    a, b = (mg.tensor(v, requires_grad=True, device=device) for v in (an, bn))
    out = a @ b
    assert out.shape == np.matmul(an, bn).shape
    np.testing.assert_allclose(out.numpy(), np.matmul(an, bn), **TOL)
    assert mg.gradcheck(lambda a, b: a @ b, a, b).passed
    out.backward(np.ones(out.shape))  # gradcheck leaves the inputs' .grad as it found them: none
    assert grad(a).shape == a_shape and grad(b).shape == b_shape


@needs_torch
@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_of_vectors_and_zero_sizes_matches_torch(a_shape, b_shape) -> None:
    rng = np.random.default_rng(1)
    an, bn = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    a, b = (mg.tensor(v, requires_grad=True) for v in (an, bn))
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (an, bn))
    out, t_out = a @ b, ta @ tb
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), **TOL)
    dout = rng.standard_normal(out.shape)
    out.backward(dout)
    t_out.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(grad(a), ta.grad.numpy(), **TOL)
    np.testing.assert_allclose(grad(b), tb.grad.numpy(), **TOL)


# second operands as attention makes them, by views in the graph: a transposed view (K^T), a broadcast one (one
# key for many heads), a transposed view of a broadcast one, (1, 1) matrices, no rows (matmul.product copies the
# ones whose rows are not contiguous). Each: a's shape, b's leaf shape, the view in minigrad, the same in NumPy,
# and how its gradient goes back to the leaf (transposed back, summed over the broadcast axis)
def _T(x):
    return x.swapaxes(-1, -2)


VIEW_CASES = {
    "transposed": ((2, 3, 5, 4), (2, 3, 6, 4), lambda b: b.transpose(-1, -2), _T, _T),
    "broadcast batch": ((2, 3, 5, 4), (1, 3, 4, 6), lambda b: b.expand(2, 3, 4, 6),
                        lambda b: np.broadcast_to(b, (2, 3, 4, 6)), lambda g: g.sum(axis=0, keepdims=True)),
    "transposed broadcast": ((2, 3, 5, 4), (3, 6, 4), lambda b: b.expand(2, 3, 6, 4).transpose(-1, -2),
                             lambda b: _T(np.broadcast_to(b, (2, 3, 6, 4))), lambda g: _T(g).sum(axis=0)),
    "1 x 1": ((4, 5, 1), (4, 1, 1), lambda b: b.transpose(-1, -2), _T, _T),
    "no rows": ((2, 0, 4), (2, 6, 4), lambda b: b.transpose(-1, -2), _T, _T),
}


@pytest.mark.parametrize("case", list(VIEW_CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stacked_products_of_views_equal_numpy_s(case, dtype, device) -> None:
    """The product and both gradients (dA = dZ B^T, dB = A^T dZ, taken back to b's leaf) of a second operand that
    is a view, against NumPy's float64 matmul."""
    a_shape, b_shape, view, np_view, np_back = VIEW_CASES[case]
    rng = np.random.default_rng(0)
    an, bn = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    a, b = mg.tensor(an, requires_grad=True, device=device), mg.tensor(bn, requires_grad=True, device=device)
    out = a @ view(b)
    dout = rng.standard_normal(out.shape).astype(dtype)
    out.backward(dout)
    a64, b64 = an.astype(np.float64), np_view(bn.astype(np.float64))
    tol = TOL if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(out.numpy(), a64 @ b64, **tol)
    np.testing.assert_allclose(grad(a), dout @ _T(b64), **tol)
    assert grad(b).shape == b_shape and grad(b).dtype == dtype
    np.testing.assert_allclose(grad(b), np_back(_T(a64) @ dout), **tol)


@pytest.mark.parametrize("x_shape, w_shape", [((0, 3), (2, 3)), ((4, 0), (2, 0)), ((2, 0, 3), (5, 3))])
def test_linear_with_zero_sizes(x_shape, w_shape, device) -> None:
    x, w = mg.zeros(x_shape, requires_grad=True, device=device), mg.ones(w_shape, requires_grad=True, device=device)
    b = mg.ones(w_shape[0], requires_grad=True, device=device)
    y = F.linear(x, w, b)
    assert y.shape == (*x_shape[:-1], w_shape[0])
    y.sum().backward()
    assert grad(x).shape == x_shape and grad(w).shape == w_shape
    np.testing.assert_array_equal(grad(b), np.full(w_shape[0], float(np.prod(x_shape[:-1]))))


def test_embedding_of_width_zero(device) -> None:
    w = mg.zeros(5, 0, requires_grad=True, device=device)
    F.embedding([1, 2, 2], w).sum().backward()
    assert grad(w).shape == (5, 0)


# ---- empty reductions and empty inputs ----

@pytest.mark.parametrize("shape, axis", [((0, 3), 0), ((0, 3), None), ((2, 0), 1), ((2, 0), (0, 1)), ((0, 3), 1)])
def test_mean_over_an_empty_axis_is_nan(shape, axis, device) -> None:
    """mean over an empty axis raised ZeroDivisionError; NumPy and PyTorch give NaN."""
    x = mg.zeros(shape, requires_grad=True, device=device)
    y = x.mean(axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.zeros(shape, dtype=np.float32).mean(axis=axis)
    assert y.shape == np.shape(expected) and y.dtype == mg.float32
    np.testing.assert_array_equal(y.numpy(), expected)
    y.sum().backward()
    assert grad(x).shape == shape


@pytest.mark.parametrize("op", ["max", "min", "amax", "amin", "argmax", "argmin", "logsumexp"])
def test_reductions_along_a_non_empty_axis_of_an_empty_tensor(op, device) -> None:
    """(0, 3) has a maximum along axis 1 (for each of its no rows), as in NumPy and PyTorch; none along axis 0."""
    result = getattr(mg.zeros(0, 3, device=device), op)(axis=1)
    for t in result if op in ("max", "min") else (result,):  # (values, indices)
        assert t.shape == (0,)
    with pytest.raises(ValueError, match=rf"{op}: tensor of shape \(0, 3\) is empty along dim 0"):
        getattr(mg.zeros(0, 3, device=device), op)(axis=0)


@pytest.mark.parametrize("op", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, axis", [((3, 0), -1), ((0, 3), 0), ((0, 3), -1)])
def test_softmax_of_empty_tensors(op, shape, axis, device) -> None:
    x = mg.zeros(shape, requires_grad=True, device=device)
    y = op(x, axis=axis)
    assert y.shape == shape
    y.sum().backward()
    assert grad(x).shape == shape


# ---- softmax of a 0-d tensor ----

@pytest.mark.parametrize("op, value", [(F.softmax, 1.0), (F.log_softmax, 0.0)], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_of_a_scalar(op, value, axis, device) -> None:
    """A 0-d tensor is a row of one, as in PyTorch: softmax 1, log_softmax 0, gradient 0 (it raised)."""
    x = scalar(2.5, device)
    y = op(x, axis=axis)
    assert y.shape == () and y.item() == value
    y.backward()
    np.testing.assert_array_equal(grad(x), 0.0)
    with pytest.raises(ValueError, match=r"dim 1 is out of range \[-1, 0\] for a tensor of shape \(\)"):
        op(x, axis=1)


@needs_torch
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_a_scalar_matches_torch(name) -> None:
    x, tx = scalar(-0.3), torch.tensor(-0.3, dtype=torch.float64, requires_grad=True)
    y, ty = getattr(F, name)(x), getattr(torch, name)(tx, dim=-1)
    assert y.item() == ty.item()
    y.backward(np.float64(1.7))
    ty.backward(torch.tensor(1.7, dtype=torch.float64))
    np.testing.assert_array_equal(grad(x), tx.grad.numpy())


def test_reductions_of_a_scalar_take_axis_0_and_minus_1(device) -> None:
    """As in PyTorch, a 0-d tensor has one axis to name: x.sum(axis=0) is x."""
    x = scalar(1.25, device)
    assert x.argmax(0).item() == 0 and x.argmin(-1).item() == 0
    for reduce in ("sum", "mean", "max", "min", "amax", "amin", "prod", "logsumexp", "cumsum"):
        for axis in (0, -1):
            y = getattr(x, reduce)(axis=axis)
            assert (y.values.item(), y.indices.item()) == (1.25, 0) if reduce in ("max", "min") else y.item() == 1.25
        with pytest.raises(ValueError, match=rf"{reduce}: dim 1 is out of range \[-1, 0\] for a tensor of shape \(\)"):
            getattr(x, reduce)(axis=1)


# ---- grad mode ----

def test_one_no_grad_object_entered_twice_restores_each_mode() -> None:
    ng = mg.no_grad()
    with ng:
        with ng:
            assert not mg.is_grad_enabled()
        assert not mg.is_grad_enabled()  # the inner exit restores the outer block's mode: still off
    assert mg.is_grad_enabled()  # the outer exit restores what was there before: on


def test_recursive_no_grad_function_restores_grad_mode() -> None:
    """A decorated function shares one no_grad object between its calls: a recursion left grad mode off."""
    @mg.no_grad()
    def depth(n: int) -> int:
        assert not mg.is_grad_enabled()
        return 0 if n == 0 else 1 + depth(n - 1)

    assert depth(3) == 3
    assert mg.is_grad_enabled()
    x = scalar(1.0)
    assert (x * 2.0).requires_grad


def test_grad_mode_is_per_thread() -> None:
    """As in PyTorch: no_grad in one thread leaves the others recording, and a new thread starts with it on."""
    seen: dict[str, bool] = {}
    inside, leave = threading.Event(), threading.Event()

    def worker() -> None:
        with mg.no_grad():
            seen["worker inside"] = mg.is_grad_enabled()
            inside.set()
            leave.wait(5)
        seen["worker after"] = mg.is_grad_enabled()

    thread = threading.Thread(target=worker)
    thread.start()
    inside.wait(5)
    seen["main while worker is inside"] = mg.is_grad_enabled()
    with mg.no_grad():
        fresh = threading.Thread(target=lambda: seen.setdefault("new thread under main's no_grad",
                                                                mg.is_grad_enabled()))
        fresh.start()
        fresh.join()
        leave.set()
        thread.join()
        seen["main inside after worker left"] = mg.is_grad_enabled()
    assert seen == {"worker inside": False, "main while worker is inside": True,
                    "new thread under main's no_grad": True, "worker after": True,
                    "main inside after worker left": False}
    assert mg.is_grad_enabled()


def test_one_decorated_function_in_two_threads() -> None:
    """One no_grad object used by two threads at once: each exit restores its own thread's mode."""
    both_inside = threading.Barrier(2, timeout=5)

    @mg.no_grad()
    def step() -> bool:
        both_inside.wait()
        return mg.is_grad_enabled()

    results = []
    threads = [threading.Thread(target=lambda: results.append((step(), mg.is_grad_enabled()))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(False, True), (False, True)]


# ---- None, strings and other non-numbers ----

NOT_NUMBERS = {  # what a user writes -> the op the error must name
    "x + None": (lambda x: x + None, "add"),
    "None * x": (lambda x: None * x, "mul"),
    "x + '3'": (lambda x: x + "3", "add"),
    "'3' - x": (lambda x: "3" - x, "sub"),
    "x / b'2'": (lambda x: x / b"2", "div"),
    "x ** None": (lambda x: x**None, "pow"),
    "x < None": (lambda x: x < None, "lt"),
    "x @ None": (lambda x: x @ None, "matmul"),
    "x + 1j": (lambda x: x + 1j, "add"),
    "x + [1.0, 2.0, 3.0]": (lambda x: x + [1.0, 2.0, 3.0], "add"),
    "masked_fill(value=None)": (lambda x: F.masked_fill(x, x > 0.0, None), "masked_fill"),
    "masked_fill(value='1')": (lambda x: F.masked_fill(x, x > 0.0, "1"), "masked_fill"),
    "masked_fill(mask=None)": (lambda x: F.masked_fill(x, None, 0.0), "masked_fill"),
    "embedding(None)": (lambda x: F.embedding(None, x), "embedding"),
    "embedding(['1'])": (lambda x: F.embedding(["1"], x), "embedding"),
    "cross_entropy(targets=None)": (lambda x: F.cross_entropy(x, None), "cross_entropy"),
    "backward([None, 1, 1])": (lambda x: x.sum(axis=0).backward([None, 1.0, 1.0]), "backward"),
    "softmax(ndarray)": (lambda x: F.softmax(x.numpy()), "softmax"),
    "cat([x, None])": (lambda x: mg.cat([x, None]), "cat"),
    "linear(x, None)": (lambda x: F.linear(x, None), "linear"),
}


@pytest.mark.parametrize("name", NOT_NUMBERS)
def test_non_numbers_are_a_type_error_naming_the_op(name, rand) -> None:
    """None became NaN and "3" became 3.0 (x + "3" gave x + 3); now each is a TypeError that names the op."""
    fn, op = NOT_NUMBERS[name]
    with pytest.raises(TypeError, match=f"^{op}: "):
        fn(rand(2, 3))


@pytest.mark.parametrize("data, dtype", [([1.0, None], None), ([1.0, None], mg.float32), ("3", mg.float32),
                                         (["1", "2"], mg.float64), (None, mg.float32), ([1 + 2j], mg.float32),
                                         (np.array([1.0, None], dtype=object), mg.float32)])
def test_tensor_of_non_numbers_is_refused_whatever_the_dtype(data, dtype) -> None:
    """With a dtype, NumPy turned None into NaN and "3" into 3.0 (and dropped imaginary parts)."""
    with pytest.raises(TypeError, match="tensor: expected numbers.*not a number type"):
        mg.tensor(data, dtype=dtype)


@pytest.mark.parametrize("make", [lambda: mg.zeros(2, dtype="U3"), lambda: mg.ones(2, dtype=object),
                                  lambda: mg.arange(3, dtype="U3"), lambda: mg.tensor([1.0]).to("U5"),
                                  lambda: mg.tensor([1.0]).to(None)],
                         ids=["zeros", "ones", "arange", "to str", "to None"])
def test_dtype_arguments_must_be_number_types(make) -> None:
    """zeros(dtype="U3") made a tensor of strings, to(None) one of float64. (zeros(2, dtype=None) is the default
    float, as torch's.)"""
    with pytest.raises(TypeError, match="not a number type|is not a dtype"):
        make()


def test_huge_python_int_with_a_float_tensor(device) -> None:
    x = mg.ones(2, device=device)
    np.testing.assert_allclose((x * 2**70).numpy(), np.float32(2**70))


# ---- promotion between kinds: bool < integer < float ----

# minigrad expression -> the same in torch (on int64 i = [1, 2, 3], bool b = [True, False, True],
# float32 f = [0.5, -1.0, 2.0])
PROMOTIONS = {
    "i * 0.5": lambda i, b, f: i * 0.5,
    "0.5 * i": lambda i, b, f: 0.5 * i,
    "i + 2": lambda i, b, f: i + 2,
    "i ** 0.5": lambda i, b, f: i**0.5,
    "i ** 2": lambda i, b, f: i**2,
    "2.0 ** i": lambda i, b, f: 2.0**i,
    "i / i": lambda i, b, f: i / i,
    "i / 2": lambda i, b, f: i / 2,
    "3 / i": lambda i, b, f: 3 / i,
    "exp(i)": lambda i, b, f: i.exp(),
    "log(i)": lambda i, b, f: i.log(),
    "sqrt(i)": lambda i, b, f: i.sqrt(),
    "tanh(i)": lambda i, b, f: i.tanh(),
    "i < 1.5": lambda i, b, f: i < 1.5,
    "b * 1.5": lambda i, b, f: b * 1.5,
    "b * 2": lambda i, b, f: b * 2,
    "b + b": lambda i, b, f: b + b,
    "b / b": lambda i, b, f: b / b,
    "exp(b)": lambda i, b, f: b.exp(),
    "f * b": lambda i, b, f: f * b,
    "i + f": lambda i, b, f: i + f,
    "i + True": lambda i, b, f: i + True,
    "sum(b)": lambda i, b, f: b.sum(),
    "sigmoid(i)": lambda i, b, f: i.sigmoid(),
    "rsqrt(i)": lambda i, b, f: i.rsqrt(),
    "sin(b)": lambda i, b, f: b.sin(),
    "erf(i)": lambda i, b, f: i.erf(),
    "logsumexp(i)": lambda i, b, f: i.logsumexp(0),
    "maximum(i, 1.5)": lambda i, b, f: i.maximum(f * 0 + 1.5),
    "where(b, i, 0.5)": lambda i, b, f: i.where(b, 0.5),
    "clamp(i, max=2.5)": lambda i, b, f: i.clamp(max=2.5),
    "clamp(i, max=2)": lambda i, b, f: i.clamp(max=2),
    "abs(i)": lambda i, b, f: i.abs(),
}


def _operands(device: str):
    return (mg.tensor([1, 2, 3], device=device), mg.tensor([True, False, True], device=device),
            mg.tensor([0.5, -1.0, 2.0], device=device))


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")  # b / b has 0 / 0
@pytest.mark.parametrize("name", PROMOTIONS)
def test_promotion_gives_pytorchs_dtype_and_values(name, device) -> None:
    """int * 0.5 was refused; int / int and exp(int) gave float64 instead of the default float32."""
    expected_dtype = {"i < 1.5": mg.bool_, "b + b": mg.bool_, "i + 2": mg.int64, "i ** 2": mg.int64,
                      "b * 2": mg.int64, "i + True": mg.int64, "sum(b)": mg.int64, "clamp(i, max=2)": mg.int64,
                      "abs(i)": mg.int64}.get(name, mg.float32)
    y = PROMOTIONS[name](*_operands(device))
    assert y.dtype == expected_dtype
    if torch is not None:
        t = PROMOTIONS[name](torch.tensor([1, 2, 3]), torch.tensor([True, False, True]),
                             torch.tensor([0.5, -1.0, 2.0]))
        assert str(t.dtype) == f"torch.{ {'bool': 'bool'}.get(str(y.dtype), str(y.dtype))}"
        np.testing.assert_allclose(y.numpy(), t.numpy(), rtol=1e-6)


def test_float_tensor_with_a_mask_gets_its_gradient(device) -> None:
    x = mg.tensor([0.5, -1.0, 2.0], requires_grad=True, dtype=mg.float64, device=device)
    y = x * (x > 0.0)
    assert y.dtype == mg.float64
    y.backward([1.0, 1.0, 1.0])
    np.testing.assert_array_equal(grad(x), [1.0, 0.0, 1.0])


def test_same_kind_different_dtypes_are_still_refused_with_one_message(rand) -> None:
    a, b = rand(2, 3, dtype=mg.float32), rand(2, 3)
    for op, name in [(lambda: a + b, "add"), (lambda: a < b, "lt"), (lambda: F.linear(a, b), "linear"),
                     (lambda: mg.cat([a, b]), "cat")]:
        with pytest.raises(TypeError, match=f"{name}: inputs have different dtypes .*float32.*float64"):
            op()
    with pytest.raises(TypeError, match="add: inputs have different dtypes .*int32.*int64"):
        mg.tensor([1], dtype="int32") + mg.tensor([1])


@pytest.mark.parametrize("op", [F.softmax, F.log_softmax, F.gelu, lambda x: F.layer_norm(x, 3),
                                lambda x: F.dropout(x, 0.5), lambda x: F.cross_entropy(x.reshape(1, 3), [0]),
                                lambda x: x.mean(), F.silu,
                                F.leaky_relu, lambda x: F.rms_norm(x, 3), lambda x: x.var(),
                                lambda x: F.scaled_dot_product_attention(*[x.reshape(1, 1, 3)] * 3)],
                         ids=["softmax", "log_softmax", "gelu", "layer_norm", "dropout", "cross_entropy", "mean",
                              "silu", "leaky_relu", "rms_norm", "var", "attention"])
def test_float_only_functions_refuse_integers(op, device) -> None:
    """As in PyTorch; softmax of an int tensor gave float64."""
    with pytest.raises(TypeError, match="needs a floating-point tensor, got int64"):
        op(mg.tensor([1, 2, 3], device=device))


def test_masked_fill_refuses_a_float_for_an_integer_tensor(device) -> None:
    i = mg.tensor([1, 2, 3], device=device)
    with pytest.raises(TypeError, match="masked_fill: float value -inf for a int64 tensor"):
        F.masked_fill(i, i > 1, float("-inf"))
    np.testing.assert_array_equal(F.masked_fill(i, i > 1, 7).numpy(), [1, 7, 7])


# ---- .to(dtype) ----

def test_to_between_floats_is_differentiable(device) -> None:
    """.to(dtype) made a new leaf, so nothing reached the input's gradient."""
    x = mg.tensor([0.5, -1.0], requires_grad=True, device=device)  # float32
    y = x.to(mg.float64)
    assert y.dtype == mg.float64 and y.requires_grad and not y.is_leaf
    (y * y).backward([1.0, 3.0])
    assert x.grad.dtype == mg.float32
    np.testing.assert_allclose(grad(x), [1.0, -6.0])


@needs_torch
def test_to_matches_torch() -> None:
    x, tx = mg.tensor([0.1, -2.0], requires_grad=True, dtype=mg.float64), torch.tensor([0.1, -2.0],
                                                                                        dtype=torch.float64,
                                                                                        requires_grad=True)
    (x.to(mg.float32).exp() * 3.0).to(mg.float64).backward([1.0, 2.0])
    (tx.to(torch.float32).exp() * 3.0).to(torch.float64).backward(torch.tensor([1.0, 2.0], dtype=torch.float64))
    np.testing.assert_allclose(grad(x), tx.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [mg.int64, "int32", mg.bool_])
def test_to_an_integer_dtype_is_a_plain_tensor(dtype, device) -> None:
    x = mg.tensor([1.7, -0.2, 0.0], requires_grad=True, device=device)
    y = x.to(dtype)
    assert y.dtype == np.dtype(dtype) and not y.requires_grad and y.is_leaf
    np.testing.assert_array_equal(y.numpy(), np.array([1.7, -0.2, 0.0], dtype=np.float32).astype(dtype))
    assert x.to(x.dtype) is x
    with mg.no_grad():
        assert not x.to(mg.float64).requires_grad


def test_gradcheck_of_converted_inputs(rand) -> None:
    """README's first session: mg.gradcheck(fn, x.to(mg.float64), ...) of float32 leaves."""
    x, w = rand(4, 3, dtype=mg.float32), rand(3, 2, dtype=mg.float32)
    assert mg.gradcheck(lambda x, w: F.softmax(x @ w), x.to(mg.float64), w.to(mg.float64)).passed


# ---- a Python number as an operand makes one array ----

def test_python_number_operand_makes_one_array(monkeypatch) -> None:
    """Issue 13: x * 0.5 built two arrays for the 0.5 (one to ask its dtype, one to use). Issue 37: it is filled in
    (empty, then fill), not converted (asarray: on the GPU a host-to-device copy)."""
    x = mg.ones(2, 3)
    made = []
    for name in ("asarray", "array", "full", "empty"):
        original = getattr(np, name)
        monkeypatch.setattr(np, name, lambda *a, _name=name, _original=original, **k:
                            made.append((_name, a[:2])) or _original(*a, **k))
    y = x * 0.5
    monkeypatch.undo()
    assert made == [("empty", ((),))] and y.dtype == mg.float32


# ---- errors that name the op ----

@pytest.mark.parametrize("op, error, message", [
    (lambda x: mg.tensor([True]) - mg.tensor([True]), TypeError, "sub: inputs of shapes"),
    (lambda x: x.reshape(None), TypeError, r"reshape: expected integers, got \(None,\)"),
    (lambda x: x.reshape(2.0, 3), TypeError, "reshape: expected integers"),
    (lambda x: mg.zeros("3"), TypeError, "zeros: expected integers"),
    (lambda x: x.expand(None), TypeError, "expand: expected integers"),
    (lambda x: x.split("a"), TypeError, "split: expected integers"),
    (lambda x: mg.stack([x, None]), TypeError, "stack: item 1 is a NoneType"),
    (lambda x: F.cross_entropy(x, [0, 1], label_smoothing=None), TypeError, "cross_entropy: expected a tensor or a"),
    (lambda x: x.sum(axis="0"), TypeError, "sum: dim must be one int, got '0'"),
    (lambda x: x.sum(axis=1.0), TypeError, "sum: dim must be one int, got 1.0"),
    (lambda x: F.softmax(x, axis=None), TypeError, "softmax: dim must be one int, got None"),
    (lambda x: x.transpose("a", "b"), TypeError, "transpose: dim must be one int"),
    (lambda x: F.dropout(x, None), TypeError, "dropout: expected a tensor or a number, got NoneType"),
], ids=["bool sub", "reshape None", "reshape float", "zeros str", "expand None", "split str", "stack None",
        "label_smoothing None", "axis str", "axis float", "softmax axis None", "transpose str", "dropout None"])
def test_bad_arguments_name_the_op(op, error, message, rand) -> None:
    with pytest.raises(error, match=message):
        op(rand(2, 3))


# ---- mg.save ----

@pytest.mark.parametrize("tree, error, message", [
    ({"w": np.array([1, None], dtype=object)}, TypeError, r"the object\['w'\] is an array of dtype object"),
    ({"a": {"b": {1, 2}}}, TypeError, r"the object\['a'\]\['b'\] is a set"),
    ({"cfg": [1, np.array(["a"])]}, TypeError, r"the object\['cfg'\]\[1\] is an array of dtype <U1"),
    ({"cfg": {(1, 2): np.zeros(2)}}, TypeError, r"the object\['cfg'\] has the key \(1, 2\), a tuple"),
    ({"m": mg.nn.Linear(2, 2)}, TypeError, r"the object\['m'\] is a Linear module.*save its state_dict\(\)"),
], ids=["object array", "set", "string array", "tuple key", "module"])
def test_save_refuses_what_load_cannot_read_back_before_writing(tree, error, message, tmp_path) -> None:
    path = tmp_path / "ckpt.npz"
    mg.save({"w": np.arange(3.0)}, path)
    before = path.read_bytes()
    with pytest.raises(error, match=message):
        mg.save(tree, path)
    assert os.listdir(tmp_path) == ["ckpt.npz"] and path.read_bytes() == before


def test_keys_and_values_format_1_refused_now_round_trip(tmp_path) -> None:
    """Format 1 kept keys as entry names and values as JSON: it refused what format 2 writes as data."""
    tree = {"cfg": [1, np.int64(2), {"w": np.zeros(2)}, {3: "x"}], 3.5: np.ones(2), "": 1, "m": {"__json__": 1},
            "w\x00": 2, "a\nb": 3, "a\\b": 4, "a/b": 5, "\ud800": 6, "s": {0: np.zeros(2), "0": np.ones(2)}}
    mg.save(tree, tmp_path / "x.npz")
    back = mg.load(tmp_path / "x.npz")
    assert list(back) == list(tree) and back["cfg"][1] == 2 and back["cfg"][1].dtype == np.int64
    assert back["cfg"][3] == {3: "x"} and back["m"] == {"__json__": 1} and back["\ud800"] == 6
    np.testing.assert_array_equal(back["s"]["0"], [1.0, 1.0])
    np.testing.assert_array_equal(back["cfg"][2]["w"], [0.0, 0.0])


def test_keys_are_data_never_keyword_arguments(tmp_path) -> None:
    """np.savez(f, **arrays) dropped a key 'allow_pickle' and choked on 'file'; ints came back as strings, or not
    at all. Every key is an entry name, given back with its type."""
    path = tmp_path / "ckpt.npz"
    tree = {"file": np.arange(3), "allow_pickle": np.ones(2), "compress": 1, "kwds": {"args": np.zeros(1)},
            "state": {0: {"step": 3, "exp_avg": np.full(2, 0.5)}, 1: {}, 12: {"momentum_buffer": None}},
            "x.npy": np.ones(1), "-1": {-1: "minus one"}}
    mg.save(tree, path)
    back = mg.load(path)
    assert sorted(back, key=str) == sorted(tree, key=str) and list(back["state"]) == [0, 1, 12]
    assert back["state"][0]["step"] == 3 and back["state"][1] == {} and back["state"][12] == {"momentum_buffer": None}
    assert back["-1"] == {-1: "minus one"} and back["compress"] == 1
    for key in ("file", "allow_pickle", "x.npy"):
        np.testing.assert_array_equal(back[key], tree[key])
    np.testing.assert_array_equal(back["state"][0]["exp_avg"], [0.5, 0.5])


def test_save_takes_any_object_not_only_a_dict(tmp_path) -> None:
    mg.save([np.zeros(2), 3], tmp_path / "x.npz")
    back = mg.load(tmp_path / "x.npz")
    assert isinstance(back, list) and back[1] == 3 and back[0].tolist() == [0.0, 0.0]


def test_tuples_and_special_floats_round_trip(tmp_path) -> None:
    mg.save({"cfg": {"betas": (0.9, 0.99), "inf": float("inf"), "s": "é", "n": None}}, tmp_path / "x.npz")
    assert mg.load(tmp_path / "x.npz") == {"cfg": {"betas": (0.9, 0.99), "inf": float("inf"), "s": "é", "n": None}}


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_saved_file_gets_the_users_umask(umask, tmp_path) -> None:
    """tempfile.mkstemp creates 0600 files, and the rename kept that mode."""
    previous = os.umask(umask)
    try:
        mg.save({"w": np.zeros(2)}, tmp_path / "ckpt.npz")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "ckpt.npz").st_mode) == 0o666 & ~umask


def torch_or_mg_save(save_with: str):
    if save_with == "torch":
        if torch is None:
            pytest.skip("PyTorch is not installed: pip install 'minigrad[torch]'")
        return lambda tree, path: torch.save(tree, path)
    return mg.save


@pytest.mark.parametrize("save_with", ["minigrad", "torch"])
def test_a_file_saved_over_keeps_its_mode_as_torch_save(save_with, tmp_path) -> None:
    save, path = torch_or_mg_save(save_with), tmp_path / "ckpt.npz"
    save({"w": np.zeros(2)}, path)
    os.chmod(path, 0o600)  # a checkpoint the user keeps private
    save({"w": np.ones(2)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and os.listdir(tmp_path) == ["ckpt.npz"]
    if save_with == "minigrad":
        np.testing.assert_array_equal(mg.load(path)["w"], np.ones(2))


@pytest.mark.parametrize("save_with", ["minigrad", "torch"])
def test_a_save_through_a_symlink_writes_its_target_and_keeps_the_link_as_torch_save(save_with, tmp_path) -> None:
    save = torch_or_mg_save(save_with)
    (tmp_path / "runs").mkdir()
    target, link = tmp_path / "runs" / "best.npz", tmp_path / "ckpt.npz"
    save({"w": np.zeros(2)}, target)
    os.chmod(target, 0o640)
    link.symlink_to(os.path.join("runs", "best.npz"))  # a relative link, as `ln -s runs/best.npz ckpt.npz` makes
    save({"w": np.arange(3.0)}, link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("runs", "best.npz")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path / "runs")) == ["best.npz"] and sorted(os.listdir(tmp_path)) == ["ckpt.npz",
                                                                                                       "runs"]
    if save_with == "minigrad":  # the target holds the new values: read through the link and directly, same bytes
        assert target.read_bytes() == link.read_bytes()
        np.testing.assert_array_equal(mg.load(target)["w"], np.arange(3.0))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write a read-only file")
def test_a_read_only_file_is_refused_and_left_as_it_was(tmp_path) -> None:
    path = tmp_path / "ckpt.npz"
    mg.save({"w": np.zeros(2)}, path)
    os.chmod(path, 0o444)
    before = hashlib.md5(path.read_bytes()).hexdigest()
    with pytest.raises(PermissionError, match="read-only \\(mode 444\\)"):  # as open(path, "wb") in torch.save
        mg.save({"w": np.ones(2)}, path)
    assert hashlib.md5(path.read_bytes()).hexdigest() == before and os.listdir(tmp_path) == ["ckpt.npz"]


# ---- mg.load of crafted files ----

def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _metadata(tree: object = None) -> bytes:
    return _npy(np.array(json.dumps({} if tree is None else tree)))


CRAFTED = {
    "path with an empty key": {"a//b.npy": _npy(np.zeros(2)), "__json__.npy": _metadata()},
    "empty leaf": {"a/.npy": _npy(np.zeros(2)), "__json__.npy": _metadata()},
    "reserved key inside": {"a/__json__.npy": _npy(np.zeros(2)), "__json__.npy": _metadata()},
    "through an array": {"m.npy": _npy(np.zeros(2)), "m/w.npy": _npy(np.zeros(2)), "__json__.npy": _metadata()},
    "through a JSON value": {"m/w.npy": _npy(np.zeros(2)), "__json__.npy": _metadata({"m": 3})},
    "over a JSON value": {"m.npy": _npy(np.zeros(2)), "__json__.npy": _metadata({"m": 3})},
    "not an array": {"notes.txt": b"hello", "__json__.npy": _metadata()},
    "null metadata": {"__json__.npy": _npy(np.array("null"))},
    "null metadata and an array": {"w.npy": _npy(np.zeros(2)), "__json__.npy": _npy(np.array("null"))},
    "list metadata": {"__json__.npy": _npy(np.array("[1, 2]"))},
    "no metadata": {"w.npy": _npy(np.zeros(2))},
    "absurd header length": {"w.npy": _npy(np.zeros(2))[:8] + b"\xff\xff" + _npy(np.zeros(2))[10:],
                             "__json__.npy": _metadata()},
    "absurd shape": {"w.npy": _npy(np.zeros(2)).replace(b"(2,)", b"(99999999999999,)"),
                     "__json__.npy": _metadata()},
    "shape larger than the data": {"w.npy": _npy(np.zeros(2)).replace(b"(2,)", b"(9,)  "),
                                   "__json__.npy": _metadata()},
    "object array": {"w.npy": _npy(np.array([1, None], dtype=object)), "__json__.npy": _metadata()},
    "deeply nested metadata": {"__json__.npy": _npy(np.array("[" * 100000 + "]" * 100000))},
}


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_files_end_in_the_documented_error(name, tmp_path) -> None:
    path = tmp_path / "ckpt.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for entry, data in CRAFTED[name].items():
            archive.writestr(entry, data)
    with pytest.raises(ValueError, match="is not a readable minigrad checkpoint"):
        mg.load(path)


def test_unsupported_compression_ends_in_the_documented_error(tmp_path) -> None:
    path = tmp_path / "ckpt.npz"
    mg.save({"w": np.zeros(2)}, path)
    data = bytearray(path.read_bytes())
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # local and central headers: compression method 99
        start = 0
        while (start := data.find(header, start)) >= 0:
            offset = start + (8 if header == b"PK\x03\x04" else 10)
            data[offset:offset + 2] = (99).to_bytes(2, "little")
            start += 4
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="is not a readable minigrad checkpoint"):
        mg.load(path)


# ---- load_state_dict and the optimizer's ----

def _model() -> nn.Module:
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))


@pytest.mark.parametrize("bad, message", [
    (None, "0.bias: a NoneType, not an array"),
    ([0.0, 0.0, 0.0, 0.0], "0.bias: a list, not an array"),
    (np.array(["a", "b", "c", "d"]), "0.bias: dtype <U1 is not a number type"),
    (np.array([1 + 1j] * 4), "0.bias: dtype complex128 is not a number type"),
    (np.zeros((4, 1)), r"0.bias: saved \(4, 1\), model \(4,\)"),
], ids=["None", "list", "strings", "complex", "shape"])
def test_load_state_dict_checks_every_value_before_changing_anything(bad, message) -> None:
    """A value that failed to convert (strings) raised midway, after earlier parameters had been replaced."""
    model = _model()
    before = {k: v.copy() for k, v in model.state_dict().items()}
    state = {k: v + 1 for k, v in model.state_dict().items()}
    state["0.bias"] = bad
    with pytest.raises(ValueError, match=message):
        model.load_state_dict(state)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_load_state_dict_converts_numbers_of_another_dtype() -> None:
    model = _model()
    state = {k: np.ones(v.shape, dtype=np.int64) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    assert all(v.dtype == mg.float32 and (v == 1).all() for v in model.state_dict().values())


@pytest.mark.parametrize("change, message", [
    (lambda s: s["state"][1].update(exp_avg=np.array(["x"] * 4)), "exp_avg must be an array of numbers"),
    (lambda s: s["state"][1].update(exp_avg=None), "exp_avg must be an array of numbers"),
    (lambda s: s["param_groups"][1].update(lr="fast"), "lr must be a number"),
    (lambda s: s["state"][1].update(step="7"), "step must be an integer"),
    (lambda s: s.update(state=[]), "expected what state_dict"),
], ids=["string buffer", "None buffer", "string lr", "string step", "state not a dict"])
def test_optimizer_load_state_dict_checks_before_changing_anything(change, message) -> None:
    """A string buffer raised after the step count and learning rates had been replaced."""
    model = _model()
    opt = optim.AdamW(optim.decay_groups(model.named_parameters(), 0.1), lr=1e-3)
    for p in model.parameters():
        p.grad = mg.ones(p.shape, dtype=p.dtype)
    opt.step()
    saved = opt.state_dict()
    for group in saved["param_groups"]:
        group["lr"] = 0.5
    for state in saved["state"].values():
        state["step"] = 5
    change(saved)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(saved)
    assert {s["step"] for s in opt.state.values()} == {1} and [g["lr"] for g in opt.param_groups] == [1e-3, 1e-3]


# ---- left after the hardening pass: 0-d flip, attention over nothing, var without degrees of freedom,
# ---- == None, requires_grad_ and diagonal arguments, _aux_array's message

@pytest.mark.parametrize("dims", [0, -1, (), (0,)])
def test_flip_of_a_scalar(dims, device) -> None:
    """A 0-d tensor has dim 0 (or -1) to name, as in PyTorch: flip gives it back (it raised)."""
    x = scalar(1.5, device)
    y = mg.flip(x, dims)
    assert y.shape == () and y.item() == 1.5
    y.backward(np.float64(2.0))
    np.testing.assert_array_equal(grad(x), 2.0)
    assert x.flip(0).item() == 1.5
    with pytest.raises(ValueError, match=r"flip: dim 1 is out of range \[-1, 0\] for a tensor of shape \(\)"):
        mg.flip(x, 1)


@needs_torch
@pytest.mark.parametrize("dims", [0, -1, ()])
def test_flip_of_a_scalar_matches_torch(dims) -> None:
    tx = torch.tensor(-0.75, dtype=torch.float64, requires_grad=True)
    ty = torch.flip(tx, (dims,) if isinstance(dims, int) else dims)
    ty.backward(torch.tensor(3.0, dtype=torch.float64))
    x = scalar(-0.75)
    y = mg.flip(x, dims)
    y.backward(np.float64(3.0))
    assert y.shape == tuple(ty.shape) and y.item() == ty.item()
    np.testing.assert_array_equal(grad(x), tx.grad.numpy())


ATTENTION_MASKS = {
    "no mask": lambda L, S: {},
    "boolean mask": lambda L, S: {"attn_mask": np.ones((L, S), dtype=bool)},
    "float mask": lambda L, S: {"attn_mask": np.zeros((L, S))},
    "causal": lambda L, S: {"is_causal": True},
}


@needs_torch
@pytest.mark.parametrize("L, S", [(0, 3), (2, 0), (0, 0)], ids=["no queries", "no keys", "neither"])
@pytest.mark.parametrize("mask", ATTENTION_MASKS)
def test_attention_with_no_queries_or_no_keys_matches_torch(L, S, mask) -> None:
    """No keys made forward raise (the maximum of no scores); PyTorch gives zeros, and zero gradients."""
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, L, 4)), rng.standard_normal((2, S, 4)), rng.standard_normal((2, S, 5))
    options = ATTENTION_MASKS[mask](L, S)
    mine = [mg.tensor(a, requires_grad=True, dtype=mg.float64) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*mine, **options)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *theirs, **{k: torch.from_numpy(m) if isinstance(m, np.ndarray) else m for k, m in options.items()})
    assert out.shape == tuple(expected.shape)
    np.testing.assert_array_equal(out.numpy(), expected.detach().numpy())
    dout = rng.standard_normal(out.shape)
    out.backward(dout)
    expected.backward(torch.from_numpy(dout))
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(grad(m), t.grad.numpy())


VAR_WITHOUT_FREEDOM = [((1, 3), 0, 1), ((0, 3), 0, 1), ((0, 3), 0, 0), ((2, 3), 0, 2), ((2, 3), 0, 3),
                       ((3, 0), 1, 1), ((), None, 1), ((1,), None, 1)]


@needs_torch
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("shape, dim, correction", VAR_WITHOUT_FREEDOM,
                         ids=[f"{s}-dim{d}-c{c}" for s, d, c in VAR_WITHOUT_FREEDOM])
def test_var_and_std_without_degrees_of_freedom_match_torch(op, shape, dim, correction, device) -> None:
    """One element (or none) per result, or correction >= N: a ValueError before; PyTorch divides by 0 (inf,
    or NaN for 0 / 0) and warns. So does minigrad now, naming the shape and the correction."""
    x = np.random.default_rng(1).standard_normal(shape)
    with pytest.warns(RuntimeWarning, match=re.escape(f"(shape {shape}, dim {dim}) with correction={correction} "
                                                      "leave no degrees of freedom")):
        y = getattr(mg, op)(mg.tensor(x, dtype=mg.float64, device=device), dim, correction=correction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch's own warning about the degrees of freedom
        expected = getattr(torch.tensor(x), op)(dim, correction=correction)
    assert y.shape == tuple(expected.shape) and y.dtype == mg.float64
    np.testing.assert_array_equal(y.numpy(), expected.numpy())  # inf and NaN where torch has them


@needs_torch
@pytest.mark.parametrize("shape, correction", [((1, 3), 1), ((2, 3), 2)])
def test_var_gradient_without_degrees_of_freedom_matches_torch(shape, correction) -> None:
    x = np.random.default_rng(2).standard_normal(shape)
    mine, theirs = mg.tensor(x, requires_grad=True, dtype=mg.float64), torch.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn: no degrees of freedom; NumPy's 0 * inf is NaN
        mine.var(0, correction=correction).sum().backward()
        theirs.var(0, correction=correction).sum().backward()
    np.testing.assert_array_equal(grad(mine), theirs.grad.numpy())


@needs_torch
@pytest.mark.parametrize("other", [None, "a", [1.0, 2.0], object()], ids=["None", "str", "list", "object"])
def test_equality_with_what_is_not_an_operand_is_python_s_answer(other, rand) -> None:
    """x == None raised a TypeError; PyTorch returns NotImplemented, so Python answers False (and != True)."""
    x, tx = rand(2), torch.zeros(2)
    assert (x == other) is (tx == other) is False
    assert (x != other) is (tx != other) is True
    assert (other == x) is False and x not in [None, "a"] and x in [None, x]
    with pytest.raises(TypeError, match="^lt: "):  # ordering stays an error, as in PyTorch
        x < other  # noqa: B015
    assert (x == x.detach()).all().item()  # tensors and numbers still compare elementwise


@pytest.mark.parametrize("value", ["yes", 1, None, np.bool_(True)], ids=["str", "int", "None", "numpy bool"])
def test_requires_grad_must_be_a_bool(value) -> None:
    """requires_grad_("yes") set requires_grad to the string; PyTorch refuses anything but a bool."""
    with pytest.raises(TypeError, match=f"requires_grad must be True or False, got {type(value).__name__}"):
        mg.zeros(2).requires_grad_(value)
    with pytest.raises(TypeError, match="requires_grad must be True or False"):
        mg.tensor([1.0], requires_grad=value)
    if torch is not None:
        with pytest.raises(TypeError):
            torch.zeros(2).requires_grad_(value)


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("diagonal", [0.5, 1.0, True, "1", None])
def test_diagonal_must_be_an_int(op, diagonal, rand) -> None:
    """tril(x, 0.5) gave a result; PyTorch refuses a diagonal that is not an int, bool included."""
    with pytest.raises(TypeError, match=rf"{op}: diagonal must be an int, got {type(diagonal).__name__}"):
        getattr(mg, op)(rand(3, 3), diagonal)
    if torch is not None:
        with pytest.raises(TypeError):
            getattr(torch, op)(torch.zeros(3, 3), diagonal)
    assert getattr(rand(3, 3), op)(np.int64(-1)).shape == (3, 3)  # NumPy integers are ints


@pytest.mark.parametrize("call, expected", [
    (lambda x: F.cross_entropy(x, np.array([True, False])), "integer or floating-point values, got dtype bool"),
    (lambda x: F.masked_fill(x, np.zeros((2, 3)), 0.0), "boolean values, got dtype float64"),
    (lambda x: x.gather(0, np.zeros((2, 3))), "integer values, got dtype float64"),
    (lambda x: mg.where(np.ones((2, 3), dtype=np.int64), x, 0.0), "boolean values, got dtype int64"),
])
def test_the_expected_kind_is_named(call, expected, rand) -> None:
    """cross_entropy takes integer or float targets, but the message said "expected integer values"."""
    with pytest.raises(TypeError, match=f"expected {expected}"):
        call(rand(2, 3))

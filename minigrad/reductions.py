"""Reductions over any dims, as torch.X: sum, mean, max, min, var, std, prod, logsumexp (each gradient broadcast
back along the reduced axes), cumsum, and argmax, argmin, any, all (no gradient). max and min return the values
only, as torch.amax and torch.amin do; argmax and argmin give the indices.
"""

from __future__ import annotations

import math
import warnings

from minigrad import backend
from minigrad.arrays import Dims, as_axes, numpy_aliases
from minigrad.dtypes import as_float, check_float
from minigrad.tensor import Function, Tensor

# ---- reductions ----

class Sum(Function):
    """y = sum(x, axis);  dx = dout broadcast back along the summed axes"""

    def forward(self, x, axis, keepdims):
        self.x_shape, self.axis = x.shape, axis
        y = x.sum(axis=axis, keepdims=True)  # keepdims: an array, never a NumPy scalar
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        return (xp.broadcast_to(dout.reshape(_kept_shape(self.x_shape, self.axis)), self.x_shape),)


class Max(Function):
    """y = max(x, axis);  dx = dout where x is the maximum (shared equally between ties), else 0"""

    pick = "max"  # Min differs only here

    def forward(self, x, axis, keepdims):
        y = getattr(x, self.pick)(axis=axis, keepdims=True)
        self.picked = x == y
        self.axis = axis
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        dout = dout.reshape(_kept_shape(self.picked.shape, self.axis))
        ties = self.picked.sum(axis=self.axis, keepdims=True, dtype=dout.dtype)
        return (self.picked * (dout / ties),)


class Min(Max):
    """y = min(x, axis);  dx = dout where x is the minimum (shared equally between ties), else 0"""

    pick = "min"


def _kept_shape(shape: tuple[int, ...], axis: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with the reduced axes kept as 1 (what keepdims=True would give)."""
    return tuple(1 if i in axis else n for i, n in enumerate(shape))


def _count(shape: tuple[int, ...], axis: tuple[int, ...]) -> int:
    """How many elements each result of a reduction over `axis` combines."""
    return math.prod(shape[a] for a in axis)


@numpy_aliases
def sum(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return Sum.apply(x, axis=as_axes("sum", dim, x.shape), keepdims=keepdim)


@numpy_aliases
def mean(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """sum / count: derived, so it needs no backward of its own."""
    check_float("mean", x)
    reduced = as_axes("mean", dim, x.shape)
    count = _count(x.shape, reduced)
    return Sum.apply(x, axis=reduced, keepdims=keepdim) * (1.0 / count if count else math.nan)  # empty: NaN, as NumPy


@numpy_aliases
def max(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return Max.apply(x, axis=_axes_with_values("max", x, dim), keepdims=keepdim)


@numpy_aliases
def min(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return Min.apply(x, axis=_axes_with_values("min", x, dim), keepdims=keepdim)


def _axes_with_values(op: str, x: Tensor, dim: Dims) -> tuple[int, ...]:
    """The axes of a reduction that has no value for nothing (max, argmax, ...), each of length > 0. An
    empty tensor is fine along its other axes: (0, 3) has a maximum along dim 1, for each of no rows."""
    reduced = as_axes(op, dim, x.shape)
    for a in reduced:
        if x.shape[a] == 0:
            raise ValueError(f"{op}: tensor of shape {x.shape} is empty along dim {a}")
    return reduced


# ---- var, std, prod, logsumexp, cumsum ----

class Var(Function):
    """y = sum((x - mean)^2, axis) / (N - correction);  dx = dout * 2 (x - mean) / (N - correction)

    With no degrees of freedom (N - correction <= 0) the division is by 0, as in PyTorch: y is inf, or
    NaN where all x - mean are 0 (one element, or none); dx likewise.
    """

    def forward(self, x, axis, keepdims, correction):
        xp, n = backend.get_array_module(x), _count(x.shape, axis)
        self.centered = x - x.sum(axis=axis, keepdims=True) / (n or 1)  # x - mean; no values: no mean to take
        self.axis, self.scale = axis, 1.0 / (n - correction) if n > correction else math.inf
        total = (self.centered * self.centered).sum(axis=axis, keepdims=True)
        if n > correction:
            y = total * self.scale
        else:  # total / 0: inf, or NaN for 0 / 0 (written out, as 0 * inf would also warn)
            y = xp.where(total > 0, math.inf, math.nan).astype(x.dtype)
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        dout = dout.reshape(_kept_shape(self.centered.shape, self.axis))
        return (dout * self.centered * (2 * self.scale),)


@numpy_aliases
def var(x: Tensor, dim: Dims = None, *, correction: float | None = None, unbiased: bool | None = None,
        keepdim: bool = False) -> Tensor:
    """Variance over `dim`, dividing by N - correction (1, Bessel's, by default; unbiased=True / False is PyTorch's
    older spelling of 1 / 0); with N - correction <= 0 the result is inf or NaN, with a warning, as in PyTorch."""
    check_float("var", x)
    if unbiased is not None and correction is not None:
        raise ValueError("var: give correction or unbiased, not both")
    correction = (1 if unbiased is None or unbiased else 0) if correction is None else correction
    reduced = as_axes("var", dim, x.shape)
    n = _count(x.shape, reduced)
    if n - correction <= 0:
        warnings.warn(f"var: {n} element(s) per result (shape {x.shape}, dim {dim}) with correction={correction} "
                      "leave no degrees of freedom: the result is inf or NaN", RuntimeWarning, stacklevel=3)
    return Var.apply(x, axis=reduced, keepdims=keepdim, correction=correction)


@numpy_aliases
def std(x: Tensor, dim: Dims = None, *, correction: float | None = None, unbiased: bool | None = None,
        keepdim: bool = False) -> Tensor:
    """sqrt(var): derived, so dx = dout / (2 std) * d var / dx."""
    return var(x, dim, correction=correction, unbiased=unbiased, keepdim=keepdim).sqrt()


class Prod(Function):
    """y = prod(x, axis);  dx_i = dout * (product of the other x_j): y / x_i when no x_j is zero. With one
    zero, only the zero's place gets a gradient (the product of the rest); with two or more, none does."""

    def forward(self, x, axis, keepdims):
        self.x, self.axis = x, axis
        y = x.prod(axis=axis, keepdims=True)
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        x, axis = self.x, self.axis
        zero = x == 0
        others = xp.where(zero, 1, x)  # the zeros left out, so that nothing is divided by zero
        rest = others.prod(axis=axis, keepdims=True)
        zeros = zero.sum(axis=axis, keepdims=True)
        product_of_others = xp.where(zero, rest * (zeros == 1), rest / others * (zeros == 0))
        return (dout.reshape(rest.shape) * product_of_others,)


@numpy_aliases
def prod(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return Prod.apply(x, axis=as_axes("prod", dim, x.shape), keepdims=keepdim)


class LogSumExp(Function):
    """y = log(sum(exp(x), axis)) = m + log(sum(exp(x - m), axis)) for any m; m = max(x) keeps exp from
    overflowing.  dx = dout * exp(x - y) = dout * softmax(x)"""

    def forward(self, x, axis, keepdims):
        xp = backend.get_array_module(x)
        m = x.max(axis=axis, keepdims=True)
        m = xp.where(xp.isinf(m), 0, m)  # all -inf (or one +inf): x - m would be NaN
        self.x, self.axis = x, axis
        self.y = xp.log(xp.exp(x - m).sum(axis=axis, keepdims=True)) + m
        return self.y if keepdims else self.y.squeeze(axis)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        return (dout.reshape(self.y.shape) * xp.exp(self.x - self.y),)


@numpy_aliases
def logsumexp(x: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over `dim` (required, as in torch.logsumexp), without overflow."""
    return LogSumExp.apply(as_float(x), axis=_axes_with_values("logsumexp", x, dim), keepdims=keepdim)


class Cumsum(Function):
    """y_i = x_0 + ... + x_i along axis;  dx_i = dout_i + ... + dout_last (dout summed from the end)"""

    def forward(self, x, axis):
        self.axis = axis
        return backend.get_array_module(x).cumsum(x, axis=axis)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        return (xp.flip(xp.cumsum(xp.flip(dout, self.axis), axis=self.axis), self.axis),)


@numpy_aliases
def cumsum(x: Tensor, dim: int) -> Tensor:
    along = as_axes("cumsum", dim, x.shape, one=True)
    return Cumsum.apply(x, axis=along[0]) if along else x.reshape(())  # a 0-d x: its one value


# ---- argmax, argmin, any, all: no gradient ----

@numpy_aliases
def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """int64 index of the largest value along `dim` (the first one on ties); dim=None: the index into
    the flattened tensor. Outside the graph."""
    return _index_of("argmax", x, dim, keepdim)


@numpy_aliases
def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """int64 index of the smallest value along `dim`; as argmax."""
    return _index_of("argmin", x, dim, keepdim)


def _index_of(op: str, x: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    along = _axes_with_values(op, x, None if dim is None else as_axes(op, dim, x.shape, one=True))
    if dim is None or not along:  # all axes, or a 0-d x; keepdim then keeps every axis, as 1 (as PyTorch)
        index = getattr(x.data.reshape(-1), op)()
        shape = (1,) * x.ndim if keepdim else ()
    else:
        index = getattr(x.data, op)(axis=along[0])
        shape = _kept_shape(x.shape, along) if keepdim else index.shape
    return Tensor.wrap(backend.get_array_module(x.data).asarray(index, dtype="int64").reshape(shape), False)


@numpy_aliases
def any(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """True where some element along `dim` is nonzero: a boolean tensor, outside the graph."""
    return _logical("any", x, dim, keepdim)


@numpy_aliases
def all(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """True where every element along `dim` is nonzero: a boolean tensor, outside the graph."""
    return _logical("all", x, dim, keepdim)


def _logical(op: str, x: Tensor, dim: Dims, keepdim: bool) -> Tensor:
    reduced = as_axes(op, dim, x.shape)
    y = getattr(x.data, op)(axis=reduced, keepdims=True)  # keepdims: an array, never a NumPy scalar
    return Tensor.wrap(y if keepdim else y.squeeze(reduced), False)

"""Reductions: sum, mean, max, min, var, std, prod, logsumexp over any axes, each gradient broadcast back
along the reduced axes; cumsum; and argmax, argmin, any, all, which have no gradient.

The arguments follow minigrad's (and NumPy's) spelling, `axis=` and `keepdims=`, where PyTorch says `dim=`
and `keepdim=`; positional calls read the same in both (x.sum(1), x.var(-1)). Other options keep
PyTorch's names (`correction=`, `unbiased=`). max and min return the values only, as torch.amax and
torch.amin do (not PyTorch's (values, indices) pair); argmax and argmin give the indices.

Where an op lives: tensor math that PyTorch offers as torch.X / Tensor.X sits by kind in
elementwise.py, reductions.py, shapes.py and matmul.py; neural-network functions that PyTorch places in
torch.nn.functional sit in functional.py, normalization.py and losses.py (all re-exported as F).
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import backend
from minigrad.tensor import Function, Tensor, _as_float, _check_float

# ---- reductions ----

def _normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """axis=None, an int or a tuple, possibly negative, as a sorted tuple of non-negative ints.

    A 0-d tensor takes axis 0 or -1 as PyTorch does, meaning its one value: no axis to reduce."""
    axes = range(ndim) if axis is None else axis if isinstance(axis, (tuple, list)) else (axis,)
    normalized = []
    for a in axes:
        if not hasattr(a, "__index__") or not -(ndim or 1) <= a < (ndim or 1):  # an int, not 1.0 or "0"
            raise ValueError(f"axis {a!r} is out of range for a tensor with {ndim} dimensions")
        if ndim:
            normalized.append(a % ndim)
    return tuple(sorted(normalized))


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
    count = 1
    for a in axis:
        count *= shape[a]
    return count


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Sum.apply(x, axis=_normalize_axis(axis, x.ndim), keepdims=keepdims)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """sum / count: derived, so it needs no backward of its own."""
    _check_float("mean", x)
    axes = _normalize_axis(axis, x.ndim)
    count = _count(x.shape, axes)
    return Sum.apply(x, axis=axes, keepdims=keepdims) * (1.0 / count if count else math.nan)  # empty: NaN, as NumPy


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Max.apply(x, axis=_axes_with_values("max", x, axis), keepdims=keepdims)


def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Min.apply(x, axis=_axes_with_values("min", x, axis), keepdims=keepdims)


def _axes_with_values(op: str, x: Tensor, axis: Any) -> tuple[int, ...]:
    """The axes of a reduction that has no value for nothing (max, argmax, ...), each of length > 0. An
    empty tensor is fine along its other axes: (0, 3) has a maximum along axis 1, for each of no rows."""
    axes = _normalize_axis(axis, x.ndim)
    for a in axes:
        if x.shape[a] == 0:
            raise ValueError(f"{op}: tensor of shape {x.shape} is empty along axis {a}")
    return axes


# ---- var, std, prod, logsumexp, cumsum ----

class Var(Function):
    """y = sum((x - mean)^2, axis) / (N - correction);  dx = dout * 2 (x - mean) / (N - correction)"""

    def forward(self, x, axis, keepdims, correction):
        self.centered = x - x.mean(axis=axis, keepdims=True)
        self.axis, self.scale = axis, 1.0 / (_count(x.shape, axis) - correction)
        y = (self.centered * self.centered).sum(axis=axis, keepdims=True) * self.scale
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        dout = dout.reshape(_kept_shape(self.centered.shape, self.axis))
        return (dout * self.centered * (2 * self.scale),)


def var(x: Tensor, axis: Any = None, *, correction: float | None = None, unbiased: bool | None = None,
        keepdims: bool = False) -> Tensor:
    """Variance over `axis`, dividing by N - correction: correction=1 (the default, Bessel's) is the
    unbiased estimate, 0 the population variance. unbiased=True / False is PyTorch's older spelling of
    correction=1 / 0."""
    _check_float("var", x)
    if unbiased is not None and correction is not None:
        raise ValueError("var: give correction or unbiased, not both")
    correction = (1 if unbiased is None or unbiased else 0) if correction is None else correction
    axes = _normalize_axis(axis, x.ndim)
    n = _count(x.shape, axes)
    if n - correction <= 0:
        raise ValueError(f"var: {n} element(s) per result (shape {x.shape}, axis {axis}) with correction="
                         f"{correction} leave no degrees of freedom")
    return Var.apply(x, axis=axes, keepdims=keepdims, correction=correction)


def std(x: Tensor, axis: Any = None, *, correction: float | None = None, unbiased: bool | None = None,
        keepdims: bool = False) -> Tensor:
    """sqrt(var): derived, so dx = dout / (2 std) * d var / dx."""
    return var(x, axis, correction=correction, unbiased=unbiased, keepdims=keepdims).sqrt()


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


def prod(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Prod.apply(x, axis=_normalize_axis(axis, x.ndim), keepdims=keepdims)


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


def logsumexp(x: Tensor, axis: Any, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis` (required, as in torch.logsumexp), without overflow."""
    return LogSumExp.apply(_as_float(x), axis=_axes_with_values("logsumexp", x, axis), keepdims=keepdims)


class Cumsum(Function):
    """y_i = x_0 + ... + x_i along axis;  dx_i = dout_i + ... + dout_last (dout summed from the end)"""

    def forward(self, x, axis):
        self.axis = axis
        return backend.get_array_module(x).cumsum(x, axis=axis)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        return (xp.flip(xp.cumsum(xp.flip(dout, self.axis), axis=self.axis), self.axis),)


def cumsum(x: Tensor, axis: int) -> Tensor:
    axes = _normalize_axis(_one_axis("cumsum", axis), x.ndim)
    return Cumsum.apply(x, axis=axes[0]) if axes else x.reshape(())  # a 0-d x: its one value


def _one_axis(op: str, axis: Any) -> int:
    if not hasattr(axis, "__index__"):
        raise TypeError(f"{op}: axis must be one int, got {axis!r}")
    return axis


# ---- argmax, argmin, any, all: no gradient ----

def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """int64 index of the largest value along `axis` (the first one on ties); axis=None: the index into
    the flattened tensor. Outside the graph."""
    return _index_of("argmax", x, axis, keepdims)


def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """int64 index of the smallest value along `axis`; as argmax."""
    return _index_of("argmin", x, axis, keepdims)


def _index_of(op: str, x: Tensor, axis: int | None, keepdims: bool) -> Tensor:
    axes = _axes_with_values(op, x, None if axis is None else _one_axis(op, axis))
    if axis is None or not axes:  # all axes, or a 0-d x; keepdims then keeps every axis, as 1 (as PyTorch)
        index = getattr(x.data.reshape(-1), op)()
        shape = (1,) * x.ndim if keepdims else ()
    else:
        index = getattr(x.data, op)(axis=axes[0])
        shape = _kept_shape(x.shape, axes) if keepdims else index.shape
    return Tensor._wrap(backend.get_array_module(x.data).asarray(index, dtype="int64").reshape(shape), False)


def any(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """True where some element along `axis` is nonzero: a boolean tensor, outside the graph."""
    return _logical("any", x, axis, keepdims)


def all(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """True where every element along `axis` is nonzero: a boolean tensor, outside the graph."""
    return _logical("all", x, axis, keepdims)


def _logical(op: str, x: Tensor, axis: Any, keepdims: bool) -> Tensor:
    axes = _normalize_axis(axis, x.ndim)
    y = getattr(x.data, op)(axis=axes, keepdims=True)  # keepdims: an array, never a NumPy scalar
    return Tensor._wrap(y if keepdims else y.squeeze(axes), False)

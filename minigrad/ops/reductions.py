"""Reductions over any dims, as torch.X: sum, mean, amax, amin, var, std, prod, logsumexp (each gradient broadcast
back along the reduced axes), cumsum, and argmax, argmin, any, all (no gradient). max and min with a dim return
(values, indices) as in PyTorch, without one the largest (smallest) value; amax and amin give values only.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import Dims, as_axes, as_axis, numpy_aliases
from minigrad.array.dtypes import as_float, check_float
from minigrad.core import Tensor, namespace
from minigrad.ops import Primitive

# ---- reductions ----

class Sum(Primitive):
    """y = sum(x, axis);  dx = dout broadcast back along the summed axes"""

    def forward(self, x, axis, keepdims):
        self.x_shape, self.axis = x.shape, axis
        y = x.sum(axis=axis, keepdims=True)  # keepdims: an array, never a NumPy scalar
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        xp = namespace(dout)
        return (xp.broadcast_to(dout.reshape(_kept_shape(self.x_shape, self.axis)), self.x_shape),)


class Max(Primitive):
    """y = amax(x, axis);  dx = dout where x is the maximum (shared equally between ties), else 0"""

    pick = "max"  # Min differs only here

    def forward(self, x, axis, keepdims):
        y = getattr(x, self.pick)(axis=axis, keepdims=True)
        self.picked = x == y
        self.axis = axis
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        ties = self.picked.sum(axis=self.axis, keepdims=True, dtype=dout.dtype)  # how many share each maximum
        share = dout.reshape(_kept_shape(self.picked.shape, self.axis)) / ties
        return (namespace(dout).where(self.picked, share, 0),)  # selected: no 0 * inf


class Min(Max):
    """y = amin(x, axis);  dx = dout where x is the minimum (shared equally between ties), else 0"""

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


class ValuesIndices(NamedTuple):
    """What max and min with a dim return, as torch.return_types.max: `values, indices = x.max(dim=1)`."""

    values: Tensor
    indices: Tensor


@numpy_aliases
def amax(x: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """The largest values over `dim` (an int or ints; () or None: all), as torch.amax; ties share the gradient."""
    return Max.apply(x, axis=_axes_with_values("amax", x, None if dim == () else dim), keepdims=keepdim)


@numpy_aliases
def amin(x: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """The smallest values over `dim`, as torch.amin; ties share the gradient."""
    return Min.apply(x, axis=_axes_with_values("amin", x, None if dim == () else dim), keepdims=keepdim)


@numpy_aliases
def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor | ValuesIndices:
    """As torch.max: max(x) is the largest value (ties share the gradient); max(x, dim) is (values, indices) along
    one dim, the first largest where several tie, its value's gradient going to that one; max(x, other) is
    maximum(x, other). For values only over several dims, amax."""
    return _extreme("max", x, dim, keepdim)


@numpy_aliases
def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor | ValuesIndices:
    """As torch.min: the smallest value; (values, indices) along a dim; or minimum(x, other). See max."""
    return _extreme("min", x, dim, keepdim)


def _extreme(op: str, x: Tensor, dim: Any, keepdim: bool) -> Tensor | ValuesIndices:
    if isinstance(dim, Tensor):  # torch.max(a, b): the elementwise maximum
        return getattr(x, "maximum" if op == "max" else "minimum")(dim)
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}: keepdim=True needs a dim (as in PyTorch); for all dims with kept axes use a{op}")
        return (Max if op == "max" else Min).apply(x, axis=_axes_with_values(op, x, None), keepdims=False)
    if not hasattr(dim, "__index__") or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be one int, got {dim!r}; for values over several dims use a{op}")
    _axes_with_values(op, x, as_axes(op, dim, x.shape, one=True))  # a dim in range, along which x is not empty
    indices = _index_of("arg" + op, x, dim, keepdim=True)
    values = x.gather(dim, indices) if x.ndim else x  # the values at the indices: their gradient goes there
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return ValuesIndices(values, indices)


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """The k largest (largest=False: smallest) values along `dim` and their int64 indices, as torch.topk, in order
    (sorted=False gives that order too); NaN counts as the largest. The values are gathered at the indices, so
    their gradient goes there."""
    if x.ndim == 0:  # a 0-d tensor is its own top 1, as in PyTorch
        values, indices = topk(x.reshape(1), k, 0, largest, sorted)
        return ValuesIndices(values.reshape(()), indices.reshape(())) if k == 1 else ValuesIndices(values, indices)
    axis = as_axis("topk", dim, x.shape)
    if not 0 <= k <= x.shape[axis]:
        raise RuntimeError(f"topk: k={k} is out of range for dim {dim} of length {x.shape[axis]}")
    if x.dtype.kind == "b":
        raise TypeError("topk: not defined for bool tensors (as in PyTorch)")
    xp, a = backend.get_array_module(x.array), x.array
    if largest:  # descending, NaN first; the stable sort keeps ties in index order
        a = xp.where(xp.isnan(a), -xp.inf, -a) if a.dtype.kind == "f" else -a
    order = xp.argsort(a, axis=axis, kind="stable")[(slice(None),) * axis + (slice(0, k),)]
    indices = core.TENSOR.wrap(order.astype("int64"), False)
    return ValuesIndices(x.gather(axis, indices), indices)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: backend.Generator | None = None) -> Tensor:
    """Indices drawn from each row of `input` (1-d or 2-d: non-negative weights, not necessarily summing to one), as
    torch.multinomial: int64, shape (num_samples,) or (rows, num_samples). With replacement: the inverse of each row's
    cumulative sum at uniform points; without: the num_samples largest of log(weight) plus Gumbel noise (an argmax
    of noisy logits, hence among the reductions), which is drawing one at a time without putting back; once the
    non-zero weights are drawn, the zero ones follow in index order, as in PyTorch."""
    if input.ndim not in (1, 2) or input.dtype.kind != "f":
        raise RuntimeError(f"multinomial: expected a 1-d or 2-d float tensor of weights, got shape {input.shape} and "
                           f"dtype {input.dtype}")
    xp, w = backend.get_array_module(input.array), input.array.reshape(-1, input.shape[-1])
    if not bool(xp.isfinite(w).all()) or bool((w < 0).any()):
        raise RuntimeError("multinomial: the weights contain inf, nan or a value below 0")
    if bool((w.sum(axis=1) <= 0).any()):
        raise RuntimeError("multinomial: a row of weights sums to 0: nothing to draw from it")
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: num_samples must be positive, got {num_samples}")
    if not replacement and num_samples > w.shape[1]:
        raise RuntimeError(f"multinomial: cannot draw {num_samples} samples without replacement from "
                           f"{w.shape[1]} categories")
    rng = backend.generator(input.device, generator)
    if replacement:
        u = rng.random((w.shape[0], num_samples))
        cdf = w.astype("float64").cumsum(axis=1)
        points = u * cdf[:, -1:]  # uniform in [0, row sum)
        drawn = (cdf[:, None, :] <= points[:, :, None]).sum(axis=2)  # the first category whose cdf passes the point
        drawn = xp.minimum(drawn, w.shape[1] - 1)
    else:
        u = rng.random(w.shape)
        positive = w > 0  # a weight of 0: log w = -inf, drawn only after all the others
        log_w = xp.where(positive, xp.log(xp.where(positive, w, 1).astype("float64")), -xp.inf)
        keys = log_w - xp.log(-xp.log1p(-u))  # log w + Gumbel noise; 1 - u in (0, 1]
        drawn = xp.argsort(-keys, axis=1, kind="stable")[:, :num_samples]  # zero weights last, in order, as torch
    return core.TENSOR.wrap(drawn.astype("int64").reshape(*input.shape[:-1], num_samples))


def _axes_with_values(op: str, x: Tensor, dim: Dims) -> tuple[int, ...]:
    """The axes of a reduction that has no value for nothing (max, argmax, ...), each of length > 0. An
    empty tensor is fine along its other axes: (0, 3) has a maximum along dim 1, for each of no rows."""
    reduced = as_axes(op, dim, x.shape)
    for a in reduced:
        if x.shape[a] == 0:
            raise ValueError(f"{op}: tensor of shape {x.shape} is empty along dim {a}")
    return reduced


# ---- var, std, prod, logsumexp, cumsum ----

class Var(Primitive):
    """y = sum((x - mean)^2, axis) / (N - correction);  dx = dout * 2 (x - mean) / (N - correction)

    With no degrees of freedom (N - correction <= 0) the division is by 0, as in PyTorch: y is inf, or
    NaN where all x - mean are 0 (one element, or none); dx likewise.
    """

    def forward(self, x, axis, keepdims, correction):
        xp, n = backend.get_array_module(x), _count(x.shape, axis)
        centered = _centered(x, axis)
        self.x, self.axis, self.scale = x, axis, 1.0 / (n - correction) if n > correction else math.inf
        total = (centered * centered).sum(axis=axis, keepdims=True)
        if n > correction:
            y = total * self.scale
        else:  # total / 0: inf, or NaN for 0 / 0 (written out, as 0 * inf would also warn)
            y = xp.where(total > 0, math.inf, math.nan).astype(x.dtype)
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        # in the forward pass this was: y = sum((x - mean)^2) * scale
        x = self.saved(self.x, 0)
        dout = dout.reshape(_kept_shape(x.shape, self.axis))
        return (dout * _centered(x, self.axis) * (2 * self.scale),)


def _centered(x: Any, axis: tuple[int, ...]) -> Any:
    """x - mean(x) along `axis` (an array, or a tensor in a backward under create_graph); no values: no mean."""
    return x - x.sum(axis=axis, keepdims=True) * (1 / (_count(x.shape, axis) or 1))


@numpy_aliases
def var(x: Tensor, dim: Dims = None, *, correction: float | None = None, unbiased: bool | None = None,
        keepdim: bool = False) -> Tensor:
    """Variance over `dim`, dividing by N - correction (1, Bessel's, by default; unbiased=True / False is PyTorch's
    older spelling of 1 / 0); with N - correction <= 0 the result is inf or NaN, with a warning, as in PyTorch."""
    return _variance(Var, "var", x, dim, correction, unbiased, keepdim)


def _variance(fn: type[Var], op: str, x: Tensor, dim: Dims, correction: float | None, unbiased: bool | None,
              keepdim: bool) -> Tensor:
    check_float(op, x)
    if unbiased is not None and correction is not None:
        raise ValueError(f"{op}: give correction or unbiased, not both")
    correction = (1 if unbiased is None or unbiased else 0) if correction is None else correction
    reduced = as_axes(op, dim, x.shape)
    n = _count(x.shape, reduced)
    if n - correction <= 0:
        warnings.warn(f"{op}: {n} element(s) per result (shape {x.shape}, dim {dim}) with correction={correction} "
                      "leave no degrees of freedom: the result is inf or NaN", RuntimeWarning, stacklevel=4)
    return fn.apply(x, axis=reduced, keepdims=keepdim, correction=correction)


class Std(Var):
    """y = sqrt(var(x, axis));  dx = dout / (2 y) * d var / dx = dout * (x - mean) / ((N - correction) y),
    and 0 where y = 0 (all x equal): chosen there, as in PyTorch, not 0 / 0"""

    def forward(self, x, axis, keepdims, correction):
        self.y = backend.get_array_module(x).sqrt(super().forward(x, axis, True, correction))
        return self.y if keepdims else self.y.squeeze(axis)

    def backward(self, dout):
        xp = namespace(dout)
        at_zero = self.y == 0  # (the reduced axes kept)
        y = self.saved(self.y, "output").reshape(self.y.shape)
        dvar = xp.where(at_zero, 0, dout.reshape(self.y.shape) / xp.where(at_zero, 1, 2 * y))
        return super().backward(dvar)


@numpy_aliases
def std(x: Tensor, dim: Dims = None, *, correction: float | None = None, unbiased: bool | None = None,
        keepdim: bool = False) -> Tensor:
    """Standard deviation over `dim`, sqrt(var) with var's arguments; its gradient is 0 where it is 0."""
    return _variance(Std, "std", x, dim, correction, unbiased, keepdim)


class Prod(Primitive):
    """y = prod(x, axis);  dx_i = dout * (the product of the other x_j), along the reduced axes taken as one
    (products_of_others: no division, so zeros and a product that overflows need no special case)."""

    def forward(self, x, axis, keepdims):
        self.x, self.axis = x, axis
        y = x.prod(axis=axis, keepdims=True)
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        xp, axis, shape = namespace(dout), self.axis, self.x.shape
        kept = tuple(a for a in range(len(shape)) if a not in axis)
        order = kept + axis  # the reduced axes last, as one: (..., n)
        rows = xp.permute_dims(self.saved(self.x, 0), order).reshape(*(shape[a] for a in kept), _count(shape, axis))
        others = xp.products_of_others(rows).reshape(*(shape[a] for a in order))
        others = xp.permute_dims(others, tuple(order.index(a) for a in range(len(shape))))  # the permutation undone
        return (dout.reshape(_kept_shape(shape, axis)) * others,)


class ProductsOfOthers(Primitive):
    """y_i = prod_{j != i} x_j along the last axis (backend.products_of_others: Prod's backward, as an op of its own
    for create_graph=True);  dx_k = sum_{i != k} dout_i prod_{j != i, k} x_j: the same products, of the rows of a
    grid whose row i is x with x_i set to 1."""

    def forward(self, x):
        self.x = x
        return backend.products_of_others(x)

    def backward(self, dout):
        xp, x = namespace(dout), self.saved(self.x, 0)
        diagonal = backend.get_array_module(self.x).eye(self.x.shape[-1], dtype=bool)  # (n, n), a constant
        grid = xp.where(diagonal, 1, x[..., None, :])  # (..., n, n): row i is x with x_i set to 1
        pairs = xp.products_of_others(grid)  # [i, k] = prod_{j != i, k} x_j where k != i
        return ((xp.where(diagonal, 0, pairs) * dout[..., :, None]).sum(axis=-2),)


def products_of_others(x: Tensor) -> Tensor:
    """backend.products_of_others on a tensor, recorded."""
    return ProductsOfOthers.apply(x)


@numpy_aliases
def prod(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    return Prod.apply(x, axis=as_axes("prod", dim, x.shape), keepdims=keepdim)


class LogSumExp(Primitive):
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
        x, y = self.saved(self.x, 0), self.saved(self.y, "output").reshape(self.y.shape)
        return (dout.reshape(self.y.shape) * namespace(dout).exp(x - y),)


@numpy_aliases
def logsumexp(x: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over `dim` (required, as in torch.logsumexp), without overflow."""
    return LogSumExp.apply(as_float(x), axis=_axes_with_values("logsumexp", x, dim), keepdims=keepdim)


class Cumsum(Primitive):
    """y_i = x_0 + ... + x_i along axis;  dx_i = dout_i + ... + dout_last (dout summed from the end)"""

    def forward(self, x, axis):
        self.axis = axis
        return backend.get_array_module(x).cumsum(x, axis=axis)

    def backward(self, dout):
        xp = namespace(dout)
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
        index = getattr(x.array.reshape(-1), op)()
        shape = (1,) * x.ndim if keepdim else ()
    else:
        index = getattr(x.array, op)(axis=along[0])
        shape = _kept_shape(x.shape, along) if keepdim else index.shape
    return core.TENSOR.wrap(backend.get_array_module(x.array).asarray(index, dtype="int64").reshape(shape), False)


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
    y = getattr(x.array, op)(axis=reduced, keepdims=True)  # keepdims: an array, never a NumPy scalar
    return core.TENSOR.wrap(y if keepdim else y.squeeze(reduced), False)

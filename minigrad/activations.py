"""Softmax, log_softmax and the activations (relu, leaky_relu, gelu, silu), and dropout: each one Function with
a closed-form backward, written in place where a pass over memory is saved (speed: docs/performance.md).
Shapes: N = all leading dimensions flattened.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from minigrad import backend
from minigrad.arrays import (
    as_axis,
    as_rows,
    dropout_scale,
    in_blocks,
    numpy_aliases,
    row_max,
    row_sums,
    stable_sigmoid,
    stable_softmax,
)
from minigrad.dtypes import check_float, number_kind
from minigrad.tensor import Function, Tensor

# ---- softmax, log_softmax ----

class SoftmaxFunction(Function):
    """y = exp(x - max) / sum(exp(x - max)) along the last axis;  dx = y * (dout - sum(dout * y))

    Computed in place in y and dx, with the row maxima and sums of arrays.row_max and arrays.row_sums (speed: see
    docs/performance.md); softmax() swaps another axis to the last and back."""

    def forward(self, x):
        xp = backend.get_array_module(x)
        x_rows = as_rows(x)  # (N, L)
        shifted = xp.subtract(x_rows, row_max(x_rows))  # x - max: changes nothing, but exp() can no longer overflow
        exps = xp.exp(shifted, out=shifted)  # exp(x - max), in shifted's memory
        y = xp.divide(exps, row_sums(exps), out=exps)  # y = exp(x - max) / sum(exp(x - max)), in the exps' memory
        self.y = y  # (N, L)
        return y.reshape(x.shape)

    def backward(self, dout):
        # in the forward pass this was: y = exp(x) / sum(exp(x)), so dy_i/dx_j = y_i * (delta_ij - y_j)
        xp = backend.get_array_module(dout)
        dout_rows = as_rows(dout)  # (N, L)
        dout_y = xp.multiply(dout_rows, self.y)  # dout * y
        centred = xp.subtract(dout_rows, row_sums(dout_y), out=dout_y)  # dout - sum(dout * y), in dout_y's memory
        dx = xp.multiply(centred, self.y, out=centred)  # dx = y * (dout - sum(dout * y)), in the same memory
        return (dx.reshape(dout.shape),)


class LogSoftmaxFunction(Function):
    """y = x - max - log(sum(exp(x - max))) along the last axis;  dx = dout - exp(y) * sum(dout)"""

    def forward(self, x):
        self.y = stable_softmax(x, -1, log=True)
        return self.y

    def backward(self, dout):
        # in the forward pass this was: y = x - log(sum(exp(x))), so dy_i/dx_j = delta_ij - softmax(x)_j
        xp = backend.get_array_module(dout)
        return (dout - xp.exp(self.y) * dout.sum(axis=-1, keepdims=True),)


@numpy_aliases
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return _along_last(SoftmaxFunction, "softmax", x, dim)


@numpy_aliases
def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return _along_last(LogSoftmaxFunction, "log_softmax", x, dim)


def _along_last(fn: type[Function], op: str, x: Tensor, dim: int) -> Tensor:
    """fn along axis `dim` (checked): the last axis itself, another one swapped to the last and back."""
    check_float(op, x)
    along = as_axis(op, dim, x.shape, new=not x.ndim)  # a 0-d x takes dim 0 or -1, as in PyTorch
    if x.ndim == 0 or 0 in x.shape:
        return _empty_or_scalar(fn, x)
    if along != x.ndim - 1:
        return fn.apply(x.transpose(along, -1)).transpose(along, -1)
    return fn.apply(x)


def _empty_or_scalar(fn: type[Function], x: Tensor) -> Tensor:
    """A 0-d x is a row of one (softmax 1, log_softmax 0), as in PyTorch; an empty x has nothing to normalise."""
    return fn.apply(x.reshape(1)).reshape(()) if x.ndim == 0 else x.reshape(x.shape)


# ---- activations ----

_GELU_C, _GELU_K = math.sqrt(2 / math.pi), 0.044715


class SlopeFunction(Function):
    """An elementwise y = f(x) whose derivative dy/dx is computed in forward beside y and saved, so that backward is
    one multiplication, dx = dout * dy/dx. A subclass names `block`, its formula in NumPy, which arrays.in_blocks
    hands x to block by block while the block is in cache (speed: see docs/performance.md)."""

    block: Callable[[Any, Any, Any], None]

    def forward(self, x):
        slope = bool(self.needs_input_grad)  # under no_grad (sampling) nothing needs dy/dx
        y, self.slope = in_blocks(self.block, x, slope=slope)
        self.x = x if slope else None  # not for backward: for its graph under create_graph=True (second_order.py)
        return y

    def backward(self, dout):
        return (dout * self.slope,)


def _gelu_tanh_block(x, y, slope) -> None:
    xp = backend.get_array_module(x)
    x_sq = xp.multiply(x, x)  # x^2
    # u = c (x + k x^3), built in place as (ck x^2 + c) x
    u = xp.multiply(x_sq, _GELU_K * _GELU_C)
    u += _GELU_C
    u *= x
    # h = 0.5 (1 + tanh(u)), in u's memory
    h = xp.tanh(u, out=u)
    h *= 0.5
    h += 0.5
    xp.multiply(x, h, out=y)  # y = x h
    if slope is not None:
        two_du_dx = xp.multiply(x_sq, 6 * _GELU_K * _GELU_C, out=x_sq)  # 2 du/dx = 2c + 6ck x^2, in x^2's memory
        two_du_dx += 2 * _GELU_C
        # dy/dx = h + y (1 - h) (2c + 6ck x^2), built in place in slope
        xp.subtract(1, h, out=slope)
        slope *= y
        slope *= two_du_dx
        slope += h


class GeluFunction(SlopeFunction):
    """y = 0.5 x (1 + tanh(u)),  u = c (x + 0.044715 x^3),  c = sqrt(2 / pi)   (GPT-2's tanh form of GELU)

    dx = dout * dy/dx,  with h = 0.5 (1 + tanh(u)), y = x h:  dy/dx = h + y (1 - h) (2c + 6 * 0.044715 c x^2)
    (dh/dx = 0.5 (1 - tanh(u)^2) du/dx = 2 h (1 - h) c (1 + 3 * 0.044715 x^2)).
    dy/dx is computed in forward, in place, in _gelu_tanh_block above, and saved instead of tanh(u): backward is
    one multiplication (SlopeFunction; x is kept too, for create_graph=True's formula only).
    """

    block = staticmethod(_gelu_tanh_block)


_SQRT_HALF = math.sqrt(0.5)
_ONE_OVER_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _gelu_erf_block(x, y, slope) -> None:
    xp = backend.get_array_module(x)
    # Phi(x) = 0.5 (1 + erf(x / sqrt(2))) = 0.5 erfc(-x / sqrt(2)): no 1 + erf cancelling where Phi is tiny, and
    # in float32 backend.erfc is one formula in place (speed: Cody's erf runs three in float64)
    cdf = backend.erfc(x * -_SQRT_HALF)
    cdf *= 0.5  # Phi(x)
    xp.multiply(x, cdf, out=y)  # y = x Phi(x)
    if slope is not None:
        # phi(x) = exp(-x^2 / 2) / sqrt(2 pi), built in place in slope
        pdf = xp.multiply(x, x, out=slope)
        pdf *= -0.5
        xp.exp(pdf, out=pdf)
        pdf *= _ONE_OVER_SQRT_2PI
        # dy/dx = Phi(x) + x phi(x), in slope, where phi(x) was
        xp.multiply(pdf, x, out=slope)
        slope += cdf


class GeluErfFunction(SlopeFunction):
    """y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), Phi the standard normal CDF   (the exact GELU)

    dx = dout * dy/dx,  dy/dx = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the normal density.
    As the tanh form: dy/dx computed in forward (_gelu_erf_block above) and saved, backward one multiplication.
    """

    block = staticmethod(_gelu_erf_block)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, x Phi(x): exact with erf (approximate="none", PyTorch's default) or GPT-2's tanh form
    (approximate="tanh", within about 5e-4 of it), as torch.nn.functional.gelu."""
    check_float("gelu", x)
    if approximate == "none":
        return GeluErfFunction.apply(x)
    if approximate == "tanh":
        return GeluFunction.apply(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


class ReluFunction(Function):
    """y = max(x, 0);  dx = dout where x > 0, else 0"""

    def forward(self, x):
        self.positive = x > 0
        return backend.get_array_module(x).maximum(x, x.dtype.type(0))  # not x * mask: relu(-inf) is 0, NaN stays

    def backward(self, dout):
        return (backend.get_array_module(dout).where(self.positive, dout, 0),)


def relu(x: Tensor) -> Tensor:
    return ReluFunction.apply(x)


class LeakyReluFunction(Function):
    """y = x where x > 0, else negative_slope * x;  dx = dout where x > 0, else negative_slope * dout"""

    def forward(self, x, negative_slope):
        xp = backend.get_array_module(x)
        self.slope = xp.where(x > 0, x.dtype.type(1), x.dtype.type(negative_slope))
        return x * self.slope

    def backward(self, dout):
        return (dout * self.slope,)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    check_float("leaky_relu", x)  # an int64 slope of 0.01 would be 0
    return LeakyReluFunction.apply(x, negative_slope=negative_slope)


class SiluFunction(Function):
    """y = x s,  s = sigmoid(x)  (also called swish; LLaMA's SwiGLU gates with it);  dx = dout * s (1 + x (1 - s))"""

    def forward(self, x):
        self.x, self.s = x, stable_sigmoid(x)
        return x * self.s

    def backward(self, dout):
        s = self.s
        return (dout * s * (1 + self.x * (1 - s)),)


def silu(x: Tensor) -> Tensor:
    check_float("silu", x)
    return SiluFunction.apply(x)


# ---- dropout ----

class DropoutFunction(Function):
    """y = x * keep / (1 - p), keep ~ Bernoulli(1 - p);  dx = dout * keep / (1 - p)"""

    def forward(self, x, p):
        self.scale = dropout_scale(x, p)
        return x * self.scale

    def backward(self, dout):
        return (dout * self.scale,)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p); identity when not training."""
    number_kind("dropout", p)  # None or a string: a TypeError that names dropout
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    check_float("dropout", x)
    if not training or p == 0:
        return x
    return DropoutFunction.apply(x, p=p)

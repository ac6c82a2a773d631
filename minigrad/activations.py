"""Softmax, log_softmax and the activations (relu, leaky_relu, gelu, silu), and dropout: each one Function with
a closed-form backward. Under mg.fused(), softmax and GELU's tanh form run the fused kernels written beside
them: the same formulas, in fewer passes over memory. Shapes: N = all leading dimensions flattened.
"""

from __future__ import annotations

import math

from minigrad import backend
from minigrad.arrays import (
    as_axis,
    as_rows,
    dropout_scale,
    numpy_aliases,
    row_max,
    row_sums,
    stable_sigmoid,
    stable_softmax,
)
from minigrad.dtypes import check_float, number_kind
from minigrad.tensor import Function, Tensor, is_fused_enabled

# ---- softmax, log_softmax ----

class SoftmaxFunction(Function):
    """y = exp(x - max) / sum(exp(x - max));  dx = y * (dout - sum(dout * y, axis))"""

    def forward(self, x, axis):
        self.y, self.axis = stable_softmax(x, axis), axis
        return self.y

    def backward(self, dout):
        # in the forward pass this was: y = exp(x) / sum(exp(x)), so dy_i/dx_j = y_i * (delta_ij - y_j)
        y = self.y
        return (y * (dout - (dout * y).sum(axis=self.axis, keepdims=True)),)


class FusedSoftmaxFunction(Function):
    """SoftmaxFunction along the last axis, computed in place in its result, with the row maxima and sums of
    arrays.row_max and arrays.row_sums (speed: see docs/performance.md)."""

    def forward(self, x):
        xp = backend.get_array_module(x)
        x2 = as_rows(x)  # (N, L)
        y = xp.subtract(x2, row_max(x2))
        xp.exp(y, out=y)
        y /= row_sums(y)
        self.y = y  # (N, L)
        return y.reshape(x.shape)

    def backward(self, dout):
        # dx = y * (dout - sum(dout * y)), in place in dx
        xp = backend.get_array_module(dout)
        d2 = as_rows(dout)
        dx = xp.multiply(d2, self.y)
        xp.subtract(d2, row_sums(dx), out=dx)
        dx *= self.y
        return (dx.reshape(dout.shape),)


class LogSoftmaxFunction(Function):
    """y = x - max - log(sum(exp(x - max)));  dx = dout - exp(y) * sum(dout, axis)"""

    def forward(self, x, axis):
        self.y, self.axis = stable_softmax(x, axis, log=True), axis
        return self.y

    def backward(self, dout):
        # in the forward pass this was: y = x - log(sum(exp(x))), so dy_i/dx_j = delta_ij - softmax(x)_j
        xp = backend.get_array_module(dout)
        return (dout - xp.exp(self.y) * dout.sum(axis=self.axis, keepdims=True),)


@numpy_aliases
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    along = _axis("softmax", x, dim)
    if along is None:
        return _empty_or_scalar(SoftmaxFunction, x)
    if is_fused_enabled() and along == x.ndim - 1 and x.numel():  # speed: the fused kernel, under mg.fused()
        return FusedSoftmaxFunction.apply(x)
    return SoftmaxFunction.apply(x, axis=along)


@numpy_aliases
def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    along = _axis("log_softmax", x, dim)
    if along is None:
        return _empty_or_scalar(LogSoftmaxFunction, x)
    return LogSoftmaxFunction.apply(x, axis=along)


def _axis(op: str, x: Tensor, dim: int) -> int | None:
    """The axis to normalise along, checked; None for a 0-d or an empty x."""
    check_float(op, x)
    along = as_axis(op, dim, x.shape, new=not x.ndim)  # a 0-d x takes dim 0 or -1, as in PyTorch
    return None if x.ndim == 0 or 0 in x.shape else along


def _empty_or_scalar(fn: type[Function], x: Tensor) -> Tensor:
    """A 0-d x is a row of one (softmax 1, log_softmax 0), as in PyTorch; an empty x has nothing to normalise."""
    return fn.apply(x.reshape(1), axis=0).reshape(()) if x.ndim == 0 else x.reshape(x.shape)


# ---- activations ----

_GELU_C, _GELU_K = math.sqrt(2 / math.pi), 0.044715


class GeluFunction(Function):
    """y = 0.5 x (1 + tanh(u)),  u = c (x + 0.044715 x^3),  c = sqrt(2 / pi)   (GPT-2's tanh form of GELU)

    dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2)),  t = tanh(u)
    """

    def forward(self, x):
        t = backend.get_array_module(x).tanh(_GELU_C * (x + _GELU_K * x * x * x))  # tanh(u)
        self.x, self.t = x, t
        return 0.5 * x * (1 + t)

    def backward(self, dout):
        # in the forward pass this was: y = 0.5 * x * (1 + t),  t = tanh(c * (x + 0.044715 * x^3))
        x, t = self.x, self.t
        du_dx = _GELU_C * (1 + 3 * _GELU_K * x * x)
        return (dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx),)


class FusedGeluFunction(Function):
    """GeluFunction block by block, in place, saving dy/dx (computed while the block is in cache) instead of x
    and t, so that backward is one multiplication. With h = 0.5 (1 + t), y = x h and
    dy/dx = h + y (1 - h) (2c + 6ck x^2), the same derivative as GeluFunction's."""

    BLOCK = 1 << 17  # elements per block: a block and its temporaries stay in cache

    def forward(self, x):
        xp = backend.get_array_module(x)
        x2 = as_rows(x) if x.ndim else x.reshape(1, 1)  # (N, L)
        y = xp.empty(x2.shape, dtype=x.dtype)
        slope = xp.empty_like(y) if self.needs_input_grad else None
        step = x2.shape[0] if backend.device_of(x) == "cuda" else max(1, self.BLOCK // max(x2.shape[1], 1))
        a, h = (xp.empty((min(step, x2.shape[0]), x2.shape[1]), dtype=x.dtype) for _ in range(2))
        for start in range(0, x2.shape[0], step):
            rows = slice(start, start + step)
            xb, yb = x2[rows], y[rows]
            ab, hb = a[: len(xb)], h[: len(xb)]
            xp.multiply(xb, xb, out=ab)  # x^2
            xp.multiply(ab, _GELU_K * _GELU_C, out=hb)
            hb += _GELU_C
            hb *= xb  # u = c (x + k x^3)
            xp.tanh(hb, out=hb)
            hb *= 0.5
            hb += 0.5  # h = 0.5 (1 + t)
            xp.multiply(xb, hb, out=yb)  # y = x h
            if slope is not None:
                sb = slope[rows]
                ab *= 6 * _GELU_K * _GELU_C
                ab += 2 * _GELU_C  # 2c (1 + 3 k x^2)
                xp.subtract(1, hb, out=sb)
                sb *= yb
                sb *= ab
                sb += hb  # dy/dx
        self.slope = None if slope is None else slope.reshape(x.shape)
        return y.reshape(x.shape)

    def backward(self, dout):
        return (dout * self.slope,)


_SQRT_HALF = math.sqrt(0.5)
_ONE_OVER_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


class GeluErfFunction(Function):
    """y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), Phi the standard normal CDF   (the exact GELU)

    dx = dout * (Phi(x) + x phi(x)),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the normal density
    """

    def forward(self, x):
        self.x = x
        self.cdf = 0.5 * (1 + backend.erf(x * _SQRT_HALF))
        return x * self.cdf

    def backward(self, dout):
        x = self.x
        pdf = backend.get_array_module(x).exp(-0.5 * x * x) * _ONE_OVER_SQRT_2PI
        return (dout * (self.cdf + x * pdf),)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, x Phi(x): exact with erf (approximate="none", PyTorch's default) or GPT-2's tanh form
    (approximate="tanh", within about 5e-4 of it), as torch.nn.functional.gelu."""
    check_float("gelu", x)
    if approximate == "none":
        return GeluErfFunction.apply(x)
    if approximate == "tanh":
        if is_fused_enabled() and x.numel():  # speed: the fused kernel, under mg.fused()
            return FusedGeluFunction.apply(x)
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

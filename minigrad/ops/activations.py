"""Softmax, log_softmax and the activations (relu, leaky_relu, gelu, silu), and dropout: each one Function with
a closed-form backward, written once against xp (docs/backward.md). The GELUs' twins that compute in place, for
speed, are in minigrad/speed/twins.py.
"""

from __future__ import annotations

import math

from minigrad.array import backend
from minigrad.array.arrays import (
    as_axis,
    dropout_scale,
    numpy_aliases,
    stable_sigmoid,
    stable_softmax,
)
from minigrad.array.dtypes import check_float, number_kind
from minigrad.autograd.versions import Function
from minigrad.core import Tensor, namespace
from minigrad.ops import Primitive

# ---- softmax, log_softmax ----

class SoftmaxFunction(Primitive):
    """y = exp(x - max) / sum(exp(x - max)) along the last axis;  dx = y * (dout - sum(dout * y))

    softmax() swaps another axis to the last and back. (mg.compiled() runs a kernel: minigrad/speed/kernels.py.)"""

    def forward(self, x):
        y = stable_softmax(x, -1)
        self.y = y
        return y

    def backward(self, dout):
        # in the forward pass this was: y = exp(x) / sum(exp(x)), so dy_i/dx_j = y_i * (delta_ij - y_j)
        y = self.saved(self.y, "output")
        return (y * (dout - (dout * y).sum(axis=-1, keepdims=True)),)


class LogSoftmaxFunction(Primitive):
    """y = x - max - log(sum(exp(x - max))) along the last axis;  dx = dout - exp(y) * sum(dout)"""

    def forward(self, x):
        self.y = stable_softmax(x, -1, log=True)
        return self.y

    def backward(self, dout):
        # in the forward pass this was: y = x - log(sum(exp(x))), so dy_i/dx_j = delta_ij - softmax(x)_j
        y = self.saved(self.y, "output")
        return (dout - namespace(dout).exp(y) * dout.sum(axis=-1, keepdims=True),)


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
_SQRT_HALF = math.sqrt(0.5)
_ONE_OVER_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def gelu_tanh_parts(xp, x):
    """h and dy/dx of the tanh GELU, y = x h: the derivative's one formula, run on arrays in forward and on the
    graph's x under create_graph=True."""
    h = 0.5 * (1 + xp.tanh(_GELU_C * (x + _GELU_K * x * x * x)))
    two_du_dx = 2 * _GELU_C + 6 * _GELU_K * _GELU_C * x * x  # u = c (x + 0.044715 x^3)
    return h, h + (1 - h) * h * x * two_du_dx  # dy/dx = h + x dh/dx,  dh/dx = 2 h (1 - h) du/dx


class GeluFunction(Primitive):
    """y = x h,  h = 0.5 (1 + tanh(u)),  u = c (x + 0.044715 x^3),  c = sqrt(2 / pi)   (GPT-2's tanh form of GELU)

    dx = dout * dy/dx,  dy/dx = h + x h (1 - h) (2c + 6 * 0.044715 c x^2)
    (dh/dx = 0.5 (1 - tanh(u)^2) du/dx = 2 h (1 - h) c (1 + 3 * 0.044715 x^2)). Forward computes dy/dx beside y and
    keeps it, and x, from which create_graph=True computes dy/dx again on the graph's tensors: recomputing tanh in
    backward, as PyTorch's gelu_backward does from x alone, made the default step 15-50% slower here (NumPy's tanh is
    single-threaded). (mg.fused() and mg.compiled() run a twin that computes both in place and keeps dy/dx alone:
    minigrad/speed/twins.py.) GeluErfFunction is the same with the exact GELU's `parts`.
    """

    parts = staticmethod(gelu_tanh_parts)  # x -> (h, dy/dx), y = x h

    def forward(self, x):
        h, self.slope = self.parts(namespace(x), x)
        self.x = x
        return x * h

    def backward(self, dout):
        # in the forward pass this was: y = x h, and dy/dx was computed beside it
        return (dout * self.saved(self.slope, self.slope_in_graph),)

    def slope_in_graph(self) -> Tensor:
        """dy/dx under create_graph=True: the same formula on the graph's x."""
        x = self.saved(self.x, 0)
        return self.parts(namespace(x), x)[1]


def gelu_erf_parts(xp, x):
    """Phi(x) and dy/dx of the exact GELU, y = x Phi(x): the derivative's one formula, run on arrays in forward and
    on the graph's x under create_graph=True."""
    cdf = 0.5 * xp.erfc(x * -_SQRT_HALF)  # Phi(x)
    pdf = xp.exp(-0.5 * x * x) * _ONE_OVER_SQRT_2PI  # phi(x)
    return cdf, cdf + x * pdf


class GeluErfFunction(GeluFunction):
    """y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), Phi the standard normal CDF   (the exact GELU)

    dx = dout * dy/dx,  dy/dx = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the normal density.
    Phi(x) = 0.5 erfc(-x / sqrt(2)): no 1 + erf cancelling where Phi is tiny. GeluFunction's forward and backward,
    with Phi(x) for h: it keeps dy/dx, computed in forward, and x; a twin keeps dy/dx alone (minigrad/speed/twins.py).
    """

    parts = staticmethod(gelu_erf_parts)  # x -> (Phi(x), dy/dx), y = x Phi(x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, x Phi(x): exact with erf (approximate="none", PyTorch's default) or GPT-2's tanh form
    (approximate="tanh", within about 5e-4 of it), as torch.nn.functional.gelu."""
    check_float("gelu", x)
    if approximate == "none":
        return GeluErfFunction.apply(x)
    if approximate == "tanh":
        return GeluFunction.apply(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


class ReluFunction(Primitive):
    """y = max(x, 0);  dx = dout where x > 0, else 0"""

    def forward(self, x):
        self.positive = x > 0
        return backend.get_array_module(x).maximum(x, x.dtype.type(0))  # not x * mask: relu(-inf) is 0, NaN stays

    def backward(self, dout):
        return (namespace(dout).where(self.positive, dout, 0),)


def relu(x: Tensor) -> Tensor:
    return ReluFunction.apply(x)


class LeakyReluFunction(Primitive):
    """y = x where x > 0, else negative_slope * x;  dx = dout where x > 0, else negative_slope * dout"""

    def forward(self, x, negative_slope):
        xp = backend.get_array_module(x)
        self.slope = xp.where(x > 0, x.dtype.type(1), x.dtype.type(negative_slope))
        return x * self.slope

    def backward(self, dout):
        return (dout * self.saved(self.slope, None),)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    check_float("leaky_relu", x)  # an int64 slope of 0.01 would be 0
    return LeakyReluFunction.apply(x, negative_slope=negative_slope)


class SiluFunction(Primitive):
    """y = x s,  s = sigmoid(x)  (also called swish; LLaMA's SwiGLU gates with it);  dx = dout * s (1 + x (1 - s))"""

    def forward(self, x):
        self.x, self.s = x, stable_sigmoid(x)
        return x * self.s

    def backward(self, dout):
        x = self.saved(self.x, 0)
        s = self.saved(self.s, lambda: x.sigmoid())  # sigmoid(x), in the graph under create_graph=True
        return (dout * s * (1 + x * (1 - s)),)


def silu(x: Tensor) -> Tensor:
    check_float("silu", x)
    return SiluFunction.apply(x)


# ---- dropout ----

class DropoutFunction(Primitive):
    """y = x * keep / (1 - p), keep ~ Bernoulli(1 - p);  dx = dout * keep / (1 - p)"""

    def forward(self, x, p):
        self.scale = dropout_scale(x, p)
        return x * self.scale

    def backward(self, dout):
        return (dout * self.saved(self.scale, None),)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p); identity when not training."""
    number_kind("dropout", p)  # None or a string: a TypeError that names dropout
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    check_float("dropout", x)
    if not training or p == 0:
        return x
    return DropoutFunction.apply(x, p=p)

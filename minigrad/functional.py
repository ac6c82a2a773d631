"""Neural-network functions, imported as F: softmax, log_softmax, masked_fill, embedding, one_hot,
gelu, relu, leaky_relu, silu, dropout here; linear (matmul.py), layer_norm and rms_norm
(normalization.py), cross_entropy (losses.py), scaled_dot_product_attention and causal_mask
(attention.py), sigmoid and tanh (elementwise.py) re-exported beside them, as torch.nn.functional
offers them.

Each is one Function with a closed-form backward, rather than a chain of exp/sum/div nodes: fewer
temporaries, fewer graph nodes, and numerically stable (softmax subtracts the row maximum).
Shapes: B batch, T time, C channels, V vocabulary; N = all leading dimensions flattened.
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import backend
from minigrad.attention import causal_mask, scaled_dot_product_attention
from minigrad.dims import as_axes, broadcasts_to, numpy_aliases
from minigrad.dtypes import check_float, number_kind
from minigrad.elementwise import _sigmoid, sigmoid, tanh
from minigrad.matmul import linear
from minigrad.normalization import layer_norm, rms_norm
from minigrad.shapes import _aux_array, _check_range, _indices_in_range
from minigrad.tensor import Function, Tensor, _as_array

__all__ = ["linear", "softmax", "log_softmax", "masked_fill", "causal_mask", "layer_norm", "cross_entropy",
           "embedding", "gelu", "relu", "dropout", "sigmoid", "tanh", "silu", "leaky_relu", "rms_norm",
           "scaled_dot_product_attention", "one_hot"]


# ---- softmax, log_softmax ----

def stable_softmax(x: Any, axis: int, log: bool = False) -> Any:
    """softmax of a raw array along `axis` (with log=True, log softmax), computed without overflow:
    softmax = exp(x - max) / sum(exp(x - max));  log_softmax = (x - max) - log(sum(exp(x - max))).
    Log softmax stays finite where softmax underflows to 0. Used by softmax, log_softmax,
    cross_entropy and the model's sampling."""
    xp = backend.get_array_module(x)
    shifted = x - x.max(axis=axis, keepdims=True)  # changes neither result, but exp() can no longer overflow
    if log:
        return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
    exps = xp.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)


class SoftmaxFunction(Function):
    """y = exp(x - max) / sum(exp(x - max));  dx = y * (dout - sum(dout * y, axis))"""

    def forward(self, x, axis):
        self.y, self.axis = stable_softmax(x, axis), axis
        return self.y

    def backward(self, dout):
        # in the forward pass this was: y = exp(x) / sum(exp(x)), so dy_i/dx_j = y_i * (delta_ij - y_j)
        y = self.y
        return (y * (dout - (dout * y).sum(axis=self.axis, keepdims=True)),)


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
    return _along(SoftmaxFunction, "softmax", x, dim)


@numpy_aliases
def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return _along(LogSoftmaxFunction, "log_softmax", x, dim)


def _along(fn: type[Function], op: str, x: Tensor, dim: int) -> Tensor:
    """fn along `dim`, checked. A 0-d tensor is a row of one (dim 0 or -1), as in PyTorch: softmax 1."""
    check_float(op, x)
    along = as_axes(op, dim, x.shape, one=True)
    if x.ndim == 0:
        return fn.apply(x.reshape(1), axis=0).reshape(())
    if x.size == 0:  # nothing to normalise: an empty result (NumPy's max of no values would raise)
        return x.reshape(x.shape)
    return fn.apply(x, axis=along[0])


# ---- masking ----

class MaskedFillFunction(Function):
    """y = where(mask, value, x);  dx = where(mask, 0, dout): masked positions get no gradient"""

    def forward(self, x, mask, value):
        xp = backend.get_array_module(x)
        self.mask = mask
        y = x.copy()
        xp.copyto(y, value, where=mask)  # speed: where() is slower with a broadcast mask
        return y

    def backward(self, dout):
        dx = dout.copy()
        backend.get_array_module(dout).copyto(dx, 0, where=self.mask)  # speed: as in forward, not where()
        return (dx,)


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    """x with `value` where the boolean `mask` (broadcast to x's shape) is True."""
    if number_kind("masked_fill", value) == "f" and x.dtype.kind != "f":
        raise TypeError(f"masked_fill: float value {value} for a {x.dtype} tensor of shape {x.shape}")
    mask = _aux_array("masked_fill", mask, x, "b")
    if not broadcasts_to(mask.shape, x.shape):
        raise ValueError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the input's {x.shape}")
    return MaskedFillFunction.apply(x, mask=mask, value=_as_array(value, x.dtype, x.device, "masked_fill"))


# ---- embedding ----

class EmbeddingFunction(Function):
    """y = w[indices];  dw = zeros with each row of dout added at its index (repeats accumulate)"""

    def forward(self, w, indices):
        self.w_shape, self.indices = w.shape, indices
        return w[indices]

    def backward(self, dout):
        dw = backend.get_array_module(dout).zeros(self.w_shape, dtype=dout.dtype)
        backend.scatter_add(dw, self.indices.reshape(-1), dout.reshape(self.indices.size, self.w_shape[1]))
        return (dw,)


def embedding(input: Any, weight: Tensor) -> Tensor:
    """Rows of `weight` (num, dim) picked by integer indices `input` of any shape: (*input.shape, dim).
    The indices come first, as in torch.nn.functional.embedding."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding: weight must be a tensor, got {type(weight).__name__}; the indices come first, "
                        "as in PyTorch: F.embedding(input, weight)")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be (num, dim), got shape {weight.shape}")
    indices = _indices_in_range("embedding", input, weight, weight.shape[0], "index")
    return EmbeddingFunction.apply(weight, indices=indices)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """Integer class indices of any shape as int64 rows with a 1 at each index and 0 elsewhere: shape
    (*tensor.shape, num_classes), as torch.nn.functional.one_hot. num_classes=-1 means the largest
    index + 1 (read back from the device, as it decides the shape). No gradient: the result is integers."""
    indices = tensor if isinstance(tensor, Tensor) else Tensor(tensor)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"one_hot: class indices must be integers, got dtype {indices.dtype}")
    if num_classes == -1:
        if indices.size == 0:
            raise ValueError("one_hot: an empty tensor has no largest index; pass num_classes")
        num_classes = int(indices.data.max()) + 1
    if num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be positive or -1, got {num_classes}")
    _check_range("one_hot", indices.data, num_classes, "index")
    xp = backend.get_array_module(indices.data)
    return Tensor._wrap((indices.data[..., None] == xp.arange(num_classes)).astype("int64"), False)


# ---- activations ----

_GELU_C = math.sqrt(2 / math.pi)


class GeluFunction(Function):
    """y = 0.5 x (1 + tanh(u)),  u = c (x + 0.044715 x^3),  c = sqrt(2 / pi)   (GPT-2's tanh form of GeluErfFunction)

    dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2)),  t = tanh(u)
    """

    def forward(self, x):
        t = backend.get_array_module(x).tanh(_GELU_C * (x + 0.044715 * x * x * x))  # tanh(u)
        self.x, self.t = x, t
        return 0.5 * x * (1 + t)

    def backward(self, dout):
        # in the forward pass this was: y = 0.5 * x * (1 + t),  t = tanh(c * (x + 0.044715 * x^3))
        x, t = self.x, self.t
        du_dx = _GELU_C * (1 + 3 * 0.044715 * x * x)
        return (dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx),)


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


class ReluFunction(Function):
    """y = max(x, 0);  dx = dout where x > 0, else 0"""

    def forward(self, x):
        self.positive = x > 0
        return x * self.positive

    def backward(self, dout):
        return (dout * self.positive,)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, x Phi(x): exact with erf (approximate="none", PyTorch's default) or GPT-2's tanh form
    (approximate="tanh", faster, within about 5e-4 of it), as torch.nn.functional.gelu."""
    check_float("gelu", x)
    if approximate == "none":
        return GeluErfFunction.apply(x)
    if approximate == "tanh":
        return GeluFunction.apply(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


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
        self.x, self.s = x, _sigmoid(x)
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
        self.scale = _dropout_scale(x, p)
        return x * self.scale

    def backward(self, dout):
        return (dout * self.scale,)


def _dropout_scale(x: Any, p: float) -> Any:
    """keep / (1 - p), keep ~ Bernoulli(1 - p), an array like x (all 0 when p = 1): what dropout
    multiplies by, here and in scaled_dot_product_attention's weights."""
    keep = backend.generator(backend.device_of(x)).random(x.shape, dtype=x.dtype) >= p
    return keep * x.dtype.type(1 / (1 - p)) if p < 1 else keep.astype(x.dtype)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p); identity when not training."""
    number_kind("dropout", p)  # None or a string: a TypeError that names dropout
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    check_float("dropout", x)
    if not training or p == 0:
        return x
    return DropoutFunction.apply(x, p=p)


# re-exported here, at the end: losses.py uses stable_softmax, defined above
from minigrad.losses import cross_entropy  # noqa: E402

"""Fused primitives for neural networks, imported as F: linear, softmax, log_softmax, masked_fill,
layer_norm, cross_entropy, embedding, gelu, relu, dropout, concatenate.

Each is one Function with a closed-form backward, rather than a chain of exp/sum/div nodes: fewer
temporaries, fewer graph nodes, and numerically stable (softmax subtracts the row maximum).
Shapes: B batch, T time, C channels, V vocabulary; N = all leading dimensions flattened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from minigrad import backend
from minigrad.ops import matmul
from minigrad.tensor import Function, Tensor

__all__ = ["matmul", "linear", "softmax", "log_softmax", "masked_fill", "causal_mask", "layer_norm",
           "cross_entropy", "embedding", "gelu", "relu", "dropout", "concatenate"]


def _aux_array(op: str, value: Any, like: Tensor, kinds: str) -> Any:
    """An index or mask argument as an array on `like`'s device, with a dtype of one of `kinds`."""
    if isinstance(value, Tensor):
        if value.device != like.device:
            raise RuntimeError(f"{op}: tensor of shape {value.shape} is on {value.device}, input on {like.device}")
        value = value.data
    xp = backend.get_array_module(like.data)
    value = backend.to_device(value, like.device) if hasattr(value, "dtype") else xp.asarray(value)
    if value.dtype.kind not in kinds:
        raise TypeError(f"{op}: expected {'integer' if 'i' in kinds else 'boolean'} values, got dtype {value.dtype}")
    return value


def _check_range(op: str, indices: Any, n: int, what: str, ignore: int | None = None) -> None:
    """Refuse indices outside [0, n) here, rather than with an IndexError deep inside NumPy."""
    bad = (indices < 0) | (indices >= n)
    if ignore is not None:
        bad &= indices != ignore
    if bad.any():
        where = tuple(int(i[0]) for i in bad.nonzero())
        raise IndexError(f"{op}: {what} {int(indices[where])} at position {where} is out of range [0, {n})")


# ---- linear ----

class Linear(Function):
    """y = x @ w^T + b  (x: (N, in), w: (out, in));  dx = dout @ w,  dw = dout^T @ x,  db = sum(dout)"""

    def forward(self, x, w, *b):
        self.x, self.w = x, w
        y = (x.reshape(-1, x.shape[-1]) @ w.T).reshape(*x.shape[:-1], w.shape[0])
        if b:
            y += b[0]
        return y

    def backward(self, dout):
        x2, dout2 = self.x.reshape(-1, self.x.shape[-1]), dout.reshape(-1, dout.shape[-1])
        dx = (dout2 @ self.w).reshape(self.x.shape) if self.needs_input_grad[0] else None
        dw = dout2.T @ x2 if self.needs_input_grad[1] else None
        db = (dout2.sum(axis=0),) if len(self.needs_input_grad) == 3 else ()
        return (dx, dw, *db)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias, weight of shape (out, in) as in PyTorch."""
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} does not fit weight {weight.shape} (out, in)")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias {bias.shape} does not fit weight {weight.shape}; expected ({weight.shape[0]},)")
    return Linear.apply(x, weight) if bias is None else Linear.apply(x, weight, bias)


# ---- softmax, log_softmax ----

class Softmax(Function):
    """y = exp(x - max) / sum(exp(x - max));  dx = y * (dout - sum(dout * y, axis))"""

    def forward(self, x, axis):
        xp = backend.get_array_module(x)
        y = x - x.max(axis=axis, keepdims=True)  # the max is subtracted for stability only
        xp.exp(y, out=y)
        y /= y.sum(axis=axis, keepdims=True)
        self.y, self.axis = y, axis
        return y

    def backward(self, dout):
        dx = dout - (dout * self.y).sum(axis=self.axis, keepdims=True)
        dx *= self.y
        return (dx,)


class LogSoftmax(Function):
    """y = x - max - log(sum(exp(x - max)));  dx = dout - exp(y) * sum(dout, axis)"""

    def forward(self, x, axis):
        xp = backend.get_array_module(x)
        y = x - x.max(axis=axis, keepdims=True)
        y -= xp.log(xp.exp(y).sum(axis=axis, keepdims=True))
        self.y, self.axis = y, axis
        return y

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        return (dout - xp.exp(self.y) * dout.sum(axis=self.axis, keepdims=True),)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return Softmax.apply(x, axis=_check_axis("softmax", axis, x))


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    return LogSoftmax.apply(x, axis=_check_axis("log_softmax", axis, x))


def _check_axis(op: str, axis: int, x: Tensor) -> int:
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for a tensor of shape {x.shape}")
    return axis


# ---- masking ----

class MaskedFill(Function):
    """y = where(mask, value, x);  dx = where(mask, 0, dout): masked positions get no gradient"""

    def forward(self, x, mask, value):
        xp = backend.get_array_module(x)
        self.mask = mask
        y = x.copy()
        xp.copyto(y, xp.asarray(value, dtype=x.dtype), where=mask)  # faster than where() for a broadcast mask
        return y

    def backward(self, dout):
        dx = dout.copy()
        backend.get_array_module(dout).copyto(dx, 0, where=self.mask)
        return (dx,)


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    """x with `value` where the boolean `mask` (broadcast to x's shape) is True."""
    mask = _aux_array("masked_fill", mask, x, "b")
    try:
        fits = backend.broadcast_shapes(mask.shape, x.shape) == x.shape
    except ValueError:  # NumPy's own message would not say which op
        fits = False
    if not fits:
        raise ValueError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the input's {x.shape}")
    return MaskedFill.apply(x, mask=mask, value=value)


def causal_mask(T: int, T_k: int | None = None, device: str = "cpu") -> Tensor:
    """(T, T_k) booleans, True where key j lies in the future of query i and must be hidden.

    The T queries are the last T of the T_k positions (T_k > T when a key/value cache holds the
    earlier ones), so query i sits at position i + T_k - T.
    """
    T_k = T if T_k is None else T_k
    if T < 0 or T_k < T:
        raise ValueError(f"causal_mask: need 0 <= T <= T_k, got T={T}, T_k={T_k}")
    xp = backend.module_for(device)
    return Tensor._wrap(xp.triu(xp.ones((T, T_k), dtype=bool), k=T_k - T + 1), False)


# ---- layer norm ----

class LayerNorm(Function):
    """y = (x - mean) * rstd * w + b over the last axis, rstd = 1 / sqrt(var + eps).

    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  with dxhat = dout * w
    """

    def forward(self, x, *affine, eps):
        xp = backend.get_array_module(x)
        xhat = x - x.mean(axis=-1, keepdims=True)
        rstd = 1 / xp.sqrt((xhat * xhat).mean(axis=-1, keepdims=True) + eps)  # (N, 1)
        xhat *= rstd
        self.xhat, self.rstd, self.w = xhat, rstd, affine[0] if affine else None
        y = xhat
        if affine:
            y = xhat * affine[0]
            if len(affine) == 2:
                y += affine[1]
        return y

    def backward(self, dout):
        xhat, rstd, w = self.xhat, self.rstd, self.w
        # in the forward pass this was: y = xhat * w + b
        if w is not None:
            leading = tuple(range(dout.ndim - 1))
            dw = (dout * xhat).sum(axis=leading)
            db = dout.sum(axis=leading)
            dxhat = dout * w
        else:
            dxhat = dout
        # and before that: xhat = (x - mean) * rstd; x enters through x, mean and rstd: three terms
        dx = dxhat - dxhat.mean(axis=-1, keepdims=True)
        dx -= xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
        dx *= rstd
        return (dx,) if w is None else (dx, dw, db)[: len(self.needs_input_grad)]


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last axis, then scale by `weight` and shift by `bias` (each of shape (C,))."""
    C = x.shape[-1] if x.ndim else None
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != (C,):
            raise ValueError(f"layer_norm: {name} of shape {p.shape} for an input of shape {x.shape}; expected ({C},)")
    if bias is not None and weight is None:
        raise ValueError("layer_norm: a bias without a weight is not supported")
    return LayerNorm.apply(x, *(p for p in (weight, bias) if p is not None), eps=eps)


# ---- cross-entropy ----

class CrossEntropy(Function):
    """loss = mean over counted rows of -log softmax(logits)[target];  dlogits = (softmax - one_hot) / n"""

    def forward(self, logits, targets, counted):
        xp = backend.get_array_module(logits)
        V = logits.shape[-1]
        x = logits.reshape(-1, V)  # (N, V)
        rows = xp.arange(x.shape[0])
        probs = x - x.max(axis=1, keepdims=True)
        target_logit = probs[rows, targets]  # shifted logit of the right answer, (N,)
        xp.exp(probs, out=probs)
        sums = probs.sum(axis=1)
        probs /= sums[:, None]
        n = counted.sum() if counted is not None else x.shape[0]
        nll = xp.log(sums) - target_logit  # -log softmax(x)[target]
        if counted is not None:
            nll *= counted
        self.probs, self.rows, self.targets, self.counted, self.n = probs, rows, targets, counted, n
        self.logits_shape = logits.shape
        return (nll.sum() / n).reshape(()) if n else xp.asarray(xp.nan, dtype=logits.dtype)

    def backward(self, dout):
        if not self.n:
            return (backend.get_array_module(dout).zeros(self.logits_shape, dtype=dout.dtype),)
        # in the forward pass this was: loss = mean(-log(probs[rows, targets]))
        scale = dout / self.n
        dx = self.probs * scale
        dx[self.rows, self.targets] -= scale
        if self.counted is not None:
            dx *= self.counted[:, None]
        return (dx.reshape(self.logits_shape),)


def cross_entropy(logits: Tensor, targets: Any, ignore_index: int | None = None) -> Tensor:
    """Mean negative log-likelihood of integer `targets` (shape logits.shape[:-1]) under softmax(logits).

    Targets equal to `ignore_index` are left out of the mean (NaN if every target is ignored).
    """
    targets = _aux_array("cross_entropy", targets, logits, "iu")
    if logits.ndim == 0 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} for logits of shape {logits.shape}; "
                         f"expected {logits.shape[:-1]}")
    _check_range("cross_entropy", targets, logits.shape[-1], "target", ignore_index)
    targets = targets.reshape(-1)
    counted = None
    if ignore_index is not None:
        counted = targets != ignore_index
        targets = targets * counted  # any valid class for ignored rows: their terms are zeroed
        counted = counted.astype(logits.dtype)
    return CrossEntropy.apply(logits, targets=targets, counted=counted)


# ---- embedding ----

class Embedding(Function):
    """y = w[indices];  dw = zeros with each row of dout added at its index (repeats accumulate)"""

    def forward(self, w, indices):
        self.w_shape, self.indices = w.shape, indices
        return w[indices]

    def backward(self, dout):
        dw = backend.get_array_module(dout).zeros(self.w_shape, dtype=dout.dtype)
        backend.scatter_add(dw, self.indices.reshape(-1), dout.reshape(-1, self.w_shape[1]))
        return (dw,)


def embedding(weight: Tensor, indices: Any) -> Tensor:
    """Rows of `weight` (num, dim) picked by integer `indices` of any shape: (*indices.shape, dim)."""
    indices = _aux_array("embedding", indices, weight, "iu")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be (num, dim), got shape {weight.shape}")
    _check_range("embedding", indices, weight.shape[0], "index")
    return Embedding.apply(weight, indices=indices)


# ---- activations ----

_GELU_C = math.sqrt(2 / math.pi)


class Gelu(Function):
    """y = 0.5 x (1 + tanh(u)),  u = c (x + 0.044715 x^3),  c = sqrt(2 / pi)   (GPT-2's tanh form)

    dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2)),  t = tanh(u)
    """

    def forward(self, x):
        xp = backend.get_array_module(x)
        t = x * x
        t *= 0.044715
        t += 1
        t *= x
        t *= _GELU_C  # u = c x (1 + 0.044715 x^2)
        xp.tanh(t, out=t)
        self.x, self.t = x, t
        y = t + 1
        y *= x
        y *= 0.5
        return y

    def backward(self, dout):
        x, t = self.x, self.t
        du_dx = _GELU_C * (1 + 3 * 0.044715 * x * x)
        dx = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx
        dx *= dout
        return (dx,)


class Relu(Function):
    """y = max(x, 0);  dx = dout where x > 0, else 0"""

    def forward(self, x):
        self.positive = x > 0
        return x * self.positive

    def backward(self, dout):
        return (dout * self.positive,)


def gelu(x: Tensor) -> Tensor:
    return Gelu.apply(x)


def relu(x: Tensor) -> Tensor:
    return Relu.apply(x)


# ---- dropout ----

class Dropout(Function):
    """y = x * keep / (1 - p), keep ~ Bernoulli(1 - p);  dx = dout * keep / (1 - p)"""

    def forward(self, x, p):
        keep = backend.generator(backend.device_of(x)).random(x.shape, dtype=x.dtype) >= p
        self.scale = keep * x.dtype.type(1 / (1 - p)) if p < 1 else keep.astype(x.dtype)
        return x * self.scale

    def backward(self, dout):
        return (dout * self.scale,)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p); identity when not training."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: probability must be in [0, 1], got {p}")
    if not training or p == 0:
        return x
    return Dropout.apply(x, p=p)


# ---- concatenate ----

class Concatenate(Function):
    """y = concatenate(xs, axis);  dx_i = the slice of dout where x_i was placed"""

    def forward(self, *xs, axis):
        self.axis, self.sizes = axis, [x.shape[axis] for x in xs]
        return backend.get_array_module(xs[0]).concatenate(xs, axis=axis)

    def backward(self, dout):
        dxs, start = [], 0
        for size in self.sizes:
            index = [slice(None)] * dout.ndim
            index[self.axis] = slice(start, start + size)
            dxs.append(dout[tuple(index)])
            start += size
        return tuple(dxs)


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    if not tensors:
        raise ValueError("concatenate: need at least one tensor")
    ndim = tensors[0].ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"concatenate: axis {axis} is out of range for tensors of shape {tensors[0].shape}")
    return Concatenate.apply(*tensors, axis=axis % ndim)


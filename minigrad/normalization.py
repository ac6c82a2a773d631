"""Layer normalisation and RMS normalisation over the last axes (PyTorch's normalized_shape), each one Function
with a closed-form backward.
Shapes: N = all leading dimensions flattened, C channels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from minigrad import backend
from minigrad.arrays import as_rows, column_sums, int_tuple, row_sums
from minigrad.dtypes import check_float
from minigrad.tensor import Function, Tensor

# ---- layer norm ----

class LayerNormFunction(Function):
    """y = (x - mean) * rstd * w + b over the last axis, rstd = 1 / sqrt(var + eps).

    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  with dxhat = dout * w
    Row and column sums go through arrays.row_sums and column_sums, and the work is done in place: each quantity
    has its name where it is computed, and shares the memory of one computed before it (speed: see
    docs/performance.md).
    """

    def forward(self, x, *affine, eps):
        xp = backend.get_array_module(x)
        x_rows = as_rows(x)  # (N, C)
        w, b = (*affine, None, None)[:2]  # (C,) each, or None
        inv_c = 1 / max(x_rows.shape[1], 1)  # C = 0: nothing to normalise, y is empty (as in PyTorch)
        mean = row_sums(x_rows) * inv_c  # (N, 1)
        centred = xp.subtract(x_rows, mean)  # x - mean, (N, C)
        squares = xp.multiply(centred, centred)  # (x - mean)^2, (N, C): y is computed in its memory below
        var = row_sums(squares) * inv_c  # mean((x - mean)^2), (N, 1)
        rstd = 1 / xp.sqrt(var + eps)  # (N, 1)
        xhat = xp.multiply(centred, rstd, out=centred)  # xhat = (x - mean) * rstd, in centred's memory
        if w is not None:
            y = xp.multiply(xhat, w, out=squares)  # y = xhat * w + b, (N, C) * (C,), in the squares' memory
            if b is not None:
                y += b
        else:
            y = xhat
        self.xhat, self.rstd, self.w = xhat, rstd, w
        return y.reshape(x.shape)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        xhat, dout_rows, w = self.xhat, as_rows(dout), self.w  # (N, C), (N, C), (C,)
        dw = db = None
        inv_c = 1 / max(xhat.shape[1], 1)
        # in the forward pass this was: y = xhat * w + b
        dout_xhat = xp.multiply(dout_rows, xhat)  # dout * xhat, (N, C)
        if w is not None:
            dw, db = column_sums(dout_xhat), column_sums(dout_rows)  # (C,) each: summed over the rows
            dxhat = xp.multiply(dout_rows, w)  # dxhat = dout * w, (N, C)
            dxhat_xhat = xp.multiply(dxhat, xhat, out=dout_xhat)  # dxhat * xhat, in dout_xhat's memory
        else:
            dxhat = dout_rows.copy()  # dxhat = dout, copied: dx is computed in its memory below
            dxhat_xhat = dout_xhat
        # and before that: xhat = (x - mean) * rstd, where x enters three ways, one term each:
        # directly, through mean (N, 1), and through rstd (N, 1)
        mean_dxhat_xhat = row_sums(dxhat_xhat) * inv_c  # (N, 1)
        mean_dxhat = row_sums(dxhat) * inv_c  # (N, 1)
        # dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), in place:
        terms = xp.multiply(xhat, mean_dxhat_xhat, out=dxhat_xhat)  # the terms through rstd and mean, summed in
        terms += mean_dxhat  # dxhat_xhat's memory: mean(dxhat) + xhat * mean(dxhat * xhat)
        inner = xp.subtract(dxhat, terms, out=dxhat)  # dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)
        dx = xp.multiply(inner, self.rstd, out=inner)  # both in dxhat's memory
        dx = dx.reshape(dout.shape)
        return (dx,) if w is None else (dx, dw, db)[: len(self.needs_input_grad)]


def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last axes, those of `normalized_shape`, then scale by `weight` and shift by
    `bias` (each of that shape), as torch.nn.functional.layer_norm. Several axes are normalised as one
    axis of their product."""
    check_float("layer_norm", x)
    shape = _normalized_shape("layer_norm", normalized_shape, x, weight=weight, bias=bias)
    if bias is not None and weight is None:
        raise ValueError("layer_norm: a bias without a weight is not supported")
    if len(shape) > 1:
        n = math.prod(shape)
        weight, bias = (None if p is None else p.reshape(n) for p in (weight, bias))
        return layer_norm(x.reshape(x.shape[:x.ndim - len(shape)] + (n,)), n, weight, bias, eps).reshape(x.shape)
    affine = () if weight is None else (weight,) if bias is None else (weight, bias)
    return LayerNormFunction.apply(x, *affine, eps=eps)


def _normalized_shape(op: str, normalized_shape: int | Sequence[int], x: Tensor, **params: Tensor | None
                      ) -> tuple[int, ...]:
    """normalized_shape as a tuple, checked: the trailing shape of x, and the shape of each parameter given."""
    if isinstance(normalized_shape, Tensor):
        raise TypeError(f"{op}: normalized_shape must be an int or a tuple of ints, got a tensor of shape "
                        f"{normalized_shape.shape}; it comes second, as in PyTorch: "
                        f"F.{op}(x, normalized_shape, weight)")
    shape = int_tuple(op, (normalized_shape,))
    if not shape or x.shape[x.ndim - len(shape):] != shape:
        raise ValueError(f"{op}: normalized_shape {shape} is not the trailing shape of an input of shape {x.shape}")
    for name, p in params.items():
        if p is not None and p.shape != shape:
            raise ValueError(f"{op}: {name} of shape {p.shape} for normalized_shape {shape} (an input of shape "
                             f"{x.shape})")
    return shape


# ---- RMS norm ----

class RMSNormFunction(Function):
    """y = x * rstd * w over the normalised (last) axes, rstd = 1 / sqrt(mean(x^2) + eps): layer norm
    without the mean, as LLaMA uses it.

    dx = rstd * (dxhat - xhat * mean(dxhat * xhat)),  with xhat = x * rstd and dxhat = dout * w
    (x enters through x and through rstd: d rstd / dx = -rstd^3 x / D, D the normalised count);
    dw = dout * xhat summed over the leading axes
    """

    def forward(self, x, *weight, axes, eps):
        xp = backend.get_array_module(x)
        rstd = 1 / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        xhat = x * rstd
        self.xhat, self.rstd, self.axes, self.w = xhat, rstd, axes, weight[0] if weight else None
        return xhat * weight[0] if weight else xhat

    def backward(self, dout):
        # in the forward pass this was: y = xhat * w,  xhat = x * rstd,  rstd = 1 / sqrt(mean(x^2) + eps)
        xhat, w = self.xhat, self.w
        dxhat = dout if w is None else dout * w
        dx = dxhat - xhat * (dxhat * xhat).mean(axis=self.axes, keepdims=True)
        dx *= self.rstd
        if w is None:
            return (dx,)
        leading = tuple(range(dout.ndim - len(self.axes)))
        return dx, (dout * xhat).sum(axis=leading) if self.needs_input_grad[1] else None


def rms_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Divide by the root mean square over the last axes, those of `normalized_shape`, then scale by
    `weight` (of that shape), as torch.nn.functional.rms_norm; eps=None means the dtype's machine
    epsilon (numpy.finfo(dtype).eps), as in PyTorch."""
    check_float("rms_norm", x)
    shape = _normalized_shape("rms_norm", normalized_shape, x, weight=weight)
    if eps is None:
        eps = float(backend.get_array_module(x.array).finfo(x.dtype).eps)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    return RMSNormFunction.apply(x, *(() if weight is None else (weight,)), axes=axes, eps=eps)

"""Layer normalisation and RMS normalisation over the last axes (PyTorch's normalized_shape), each one Function
with a closed-form backward, written once against xp; under create_graph=True the xhat and rstd they saved become
nodes of their own (derived), so that the gradient's graph reaches x through them.
Shapes: N = all leading dimensions flattened, C channels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from minigrad.array import backend
from minigrad.array.arrays import as_rows, column_sums, int_tuple, row_sums
from minigrad.array.dtypes import check_float
from minigrad.core import Tensor, derived
from minigrad.ops import Primitive

# ---- layer norm ----

class LayerNormFunction(Primitive):
    """y = xhat * w + b,  xhat = (x - mean) * rstd over the last axis,  rstd = 1 / sqrt(var + eps).

    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dout * w;
    dw = sum(dout * xhat),  db = sum(dout)  (over the rows).
    It saves xhat and rstd, not x. (mg.compiled() runs kernels: minigrad/speed/kernels.py.)
    """

    def forward(self, x, *affine, eps):
        xp = backend.get_array_module(x)
        x_rows = as_rows(x)  # (N, C)
        w, b = (*affine, None, None)[:2]  # (C,) each, or None
        inv_c = 1 / max(x_rows.shape[1], 1)  # C = 0: nothing to normalise, y is empty (as in PyTorch)
        mean = row_sums(x_rows) * inv_c  # (N, 1)
        var = row_sums((x_rows - mean) ** 2) * inv_c  # (N, 1)
        rstd = 1 / xp.sqrt(var + eps)  # (N, 1)
        xhat = (x_rows - mean) * rstd  # (N, C)
        y = xhat if w is None else xhat * w if b is None else xhat * w + b
        self.xhat, self.rstd, self.w = xhat, rstd, w
        return y.reshape(x.shape)

    def backward(self, dout):
        xhat = self.saved(self.xhat, self.xhat_in_graph)  # (N, C)
        rstd = self.saved(self.rstd, self.rstd_in_graph)  # (N, 1)
        dout_rows = as_rows(dout)  # (N, C)
        inv_c = 1 / max(self.xhat.shape[1], 1)
        # in the forward pass this was: y = xhat * w + b
        dxhat = dout_rows if self.w is None else dout_rows * self.saved(self.w, 1)
        # and before that: xhat = (x - mean) * rstd, where x enters three ways, one term each:
        # directly, through mean (N, 1), and through rstd (N, 1)
        mean_dxhat = row_sums(dxhat) * inv_c  # (N, 1)
        mean_dxhat_xhat = row_sums(dxhat * xhat) * inv_c  # (N, 1)
        dx = (rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)).reshape(dout.shape)
        if self.w is None:
            return (dx,)
        dw, db = column_sums(dout_rows * xhat), column_sums(dout_rows)  # (C,) each: summed over the rows
        return (dx, dw, db)[: len(self.needs_input_grad)]

    def xhat_in_graph(self) -> Tensor:
        """xhat under create_graph=True: the output of a layer norm without its affine part, a node of its own."""
        xhat = derived(LayerNormFunction, self.mg_parents[:1], self.xhat.reshape(self.mg_shape), xhat=self.xhat,
                       rstd=self.rstd, w=None)
        return xhat.reshape(self.xhat.shape)

    def rstd_in_graph(self) -> Tensor:
        """rstd under create_graph=True: the output of an InverseStd node."""
        return derived(InverseStd, self.mg_parents[:1], self.rstd, xhat=self.saved(self.xhat, self.xhat_in_graph),
                       rstd=self.rstd, x_shape=self.mg_shape)


class InverseStd(Primitive):
    """rstd = 1 / sqrt(mean(c^2) + eps) over the normalised axes, c = x - mean (layer norm) or x (RMS norm): the rstd
    a normalisation saved, as a node of its own under create_graph=True (made by derived, never by apply);
    drstd/dx = -rstd^2 xhat / D, D the number of elements normalised together. `xhat` is a tensor (of xhat's own
    node), in the shape that rstd broadcasts against."""

    def backward(self, dout):
        rstd = self.saved(self.rstd, "output")
        xhat = self.saved(self.xhat.array, lambda: self.xhat)
        d = max(self.xhat.array.size // max(self.rstd.size, 1), 1)
        return ((dout * rstd * rstd * xhat * (-1 / d)).reshape(self.x_shape),)


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

class RMSNormFunction(Primitive):
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
        xhat = self.saved(self.xhat, self.xhat_in_graph)
        rstd = self.saved(self.rstd, self.rstd_in_graph)
        dxhat = dout if self.w is None else dout * self.saved(self.w, 1)
        dx = (dxhat - xhat * (dxhat * xhat).mean(axis=self.axes, keepdims=True)) * rstd
        if self.w is None:
            return (dx,)
        leading = tuple(range(dout.ndim - len(self.axes)))
        return dx, (dout * xhat).sum(axis=leading) if self.needs_input_grad[1] else None

    def xhat_in_graph(self) -> Tensor:
        """xhat under create_graph=True: the output of an RMS norm without its weight, a node of its own."""
        return derived(RMSNormFunction, self.mg_parents[:1], self.xhat, xhat=self.xhat, rstd=self.rstd, axes=self.axes,
                       w=None)

    def rstd_in_graph(self) -> Tensor:
        """rstd under create_graph=True: the output of an InverseStd node."""
        return derived(InverseStd, self.mg_parents[:1], self.rstd, xhat=self.saved(self.xhat, self.xhat_in_graph),
                       rstd=self.rstd, x_shape=self.xhat.shape)


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

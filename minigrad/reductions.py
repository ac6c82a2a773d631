"""Reductions: sum, mean, max over any axes; each gradient is broadcast back along the reduced axes.
Where an op lives: tensor math that PyTorch offers as torch.X / Tensor.X sits by kind in
elementwise.py, reductions.py, shapes.py and matmul.py; neural-network functions that PyTorch places in
torch.nn.functional sit in functional.py, normalization.py and losses.py (all re-exported as F).
"""

from __future__ import annotations

from typing import Any

from minigrad import backend
from minigrad.tensor import Function, Tensor

# ---- reductions ----

def _normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """axis=None, an int or a tuple, possibly negative, as a sorted tuple of non-negative ints."""
    axes = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    normalized = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for a tensor with {ndim} dimensions")
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

    def forward(self, x, axis, keepdims):
        y = x.max(axis=axis, keepdims=True)
        self.argmax = x == y
        self.axis = axis
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        dout = dout.reshape(_kept_shape(self.argmax.shape, self.axis))
        ties = self.argmax.sum(axis=self.axis, keepdims=True, dtype=dout.dtype)
        return (self.argmax * (dout / ties),)


def _kept_shape(shape: tuple[int, ...], axis: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with the reduced axes kept as 1 (what keepdims=True would give)."""
    return tuple(1 if i in axis else n for i, n in enumerate(shape))


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Sum.apply(x, axis=_normalize_axis(axis, x.ndim), keepdims=keepdims)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """sum / count: derived, so it needs no backward of its own."""
    if x.dtype.kind != "f":
        raise TypeError(f"mean: needs a floating-point tensor, got {x.dtype}; convert with .to(mg.float32)")
    axes = _normalize_axis(axis, x.ndim)
    count = 1
    for a in axes:
        count *= x.shape[a]
    return Sum.apply(x, axis=axes, keepdims=keepdims) * (1.0 / count)


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    if x.size == 0:
        raise ValueError(f"max: tensor of shape {x.shape} is empty")
    return Max.apply(x, axis=_normalize_axis(axis, x.ndim), keepdims=keepdims)

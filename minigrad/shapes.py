"""Shape and indexing: reshape, transpose, x[index], concatenate, and the checks that turn index and
mask arguments into arrays on the right device. Their backward passes move gradients back to where
the values came from.
Where an op lives: tensor math that PyTorch offers as torch.X / Tensor.X sits by kind in
elementwise.py, reductions.py, shapes.py and matmul.py; neural-network functions that PyTorch places in
torch.nn.functional sit in functional.py, normalization.py and losses.py (all re-exported as F).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minigrad import backend
from minigrad.tensor import Function, Tensor

# ---- shape ----

class Reshape(Function):
    """y = x.reshape(shape);  dx = dout.reshape(x.shape)"""

    def forward(self, x, shape):
        self.x_shape = x.shape
        return x.reshape(shape)

    def backward(self, dout):
        return (dout.reshape(self.x_shape),)


class Transpose(Function):
    """y = x.transpose(axes);  dx = dout.transpose(inverse of axes)"""

    def forward(self, x, axes):
        self.axes = axes
        return x.transpose(axes)

    def backward(self, dout):
        inverse = [0] * len(self.axes)
        for i, a in enumerate(self.axes):
            inverse[a] = i
        return (dout.transpose(inverse),)


def reshape(x: Tensor, *shape: int) -> Tensor:
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return Reshape.apply(x, shape=shape)


def transpose(x: Tensor, *axes: int) -> Tensor:
    """Permute the axes (all reversed when none are given, as x.T)."""
    axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
    if not axes:
        axes = tuple(reversed(range(x.ndim)))
    in_range = all(-x.ndim <= a < x.ndim for a in axes)  # else `a % ndim` would quietly wrap 5 to 1
    if not in_range or len(axes) != x.ndim or sorted(a % x.ndim for a in axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of a tensor with {x.ndim} dimensions")
    return Transpose.apply(x, axes=tuple(a % x.ndim for a in axes))


# ---- indexing ----

class GetItem(Function):
    """y = x[index];  dx = zeros like x with dout added at index (repeated indices accumulate)"""

    def forward(self, x, index):
        self.x_shape, self.index = x.shape, index
        return x[index]

    def backward(self, dout):
        dx = backend.get_array_module(dout).zeros(self.x_shape, dtype=dout.dtype)
        if _is_basic(self.index):
            dx[self.index] = dout  # a basic index names each element at most once
        else:
            backend.scatter_add(dx, self.index, dout)
        return (dx,)


def _is_basic(index: tuple) -> bool:
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index)


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index] for ints, slices, None, Ellipsis and integer arrays (as lists, arrays or tensors)."""
    index = index if isinstance(index, tuple) else (index,)
    xp = backend.get_array_module(x.data)
    index = tuple(_index_array(i, xp, x.device) for i in index)
    try:
        return GetItem.apply(x, index=index)
    except IndexError as err:
        raise IndexError(f"getitem: index {index} into a tensor of shape {x.shape}: {err}") from None


def _index_array(i: Any, xp: Any, device: str) -> Any:
    """Array-like indices go to the data's device, so a NumPy index works on CuPy data too."""
    if isinstance(i, Tensor):
        i = i.data
    if isinstance(i, list) or hasattr(i, "dtype"):
        i = backend.to_device(xp.asarray(i) if isinstance(i, list) else i, device)
        if i.dtype.kind not in "iub":
            raise IndexError(f"getitem: indices must be integers or booleans, got dtype {i.dtype}")
    return i


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

"""Indexing by index tensors, as torch.X and Tensor.X: scatter and scatter_add (along a dim, the inverse of gather),
index_select, index_add, index_copy and index_fill (whole slices along a dim), masked_scatter, take_along_dim,
narrow and unfold (windows), and nonzero, argwhere and count_nonzero. Each is made of Tensor's indexing (x[index],
a write into a copy, x.gather), which carries the gradients, but for the additions: one Function, AddAt. The
in-place forms (x.scatter_(...)) are Tensor's, through its one write path.
"""

from __future__ import annotations

from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_axis, index_array, indices_in_range
from minigrad.autograd.versions import saves_index
from minigrad.core import Tensor
from minigrad.ops import Primitive

# ---- where an index tensor points along a dim ----

def _places(op: str, x: Tensor, dim: int, index: Any, src: Any = None) -> tuple[int, Any, tuple]:
    """(axis, index array, the index tuple of x's elements that `index` names along dim): position (i, j, k) of
    index names x[i, index[i, j, k], k] (for dim 1), as torch.scatter and gather read it."""
    d = as_axis(op, dim, x.shape)
    array = indices_in_range(op, index, x.device, x.shape[d], "index")
    if array.ndim != x.ndim or any(m > n for i, (m, n) in enumerate(zip(array.shape, x.shape, strict=True))
                                   if i != d):
        raise RuntimeError(f"{op}: index of shape {array.shape} for a tensor of shape {x.shape} along dim {dim}: it "
                           "needs as many dims, none larger than the tensor's except along dim")
    if isinstance(src, Tensor) and (src.ndim != x.ndim
                                    or any(m > n for m, n in zip(array.shape, src.shape, strict=True))):
        raise RuntimeError(f"{op}: index of shape {array.shape} is larger than src of shape {src.shape}")
    xp = backend.get_array_module(array)
    places = tuple(array if a == d else xp.arange(n).reshape((n,) + (1,) * (array.ndim - a - 1))
                   for a, n in enumerate(array.shape))
    return d, array, places


def _slices(op: str, x: Tensor, dim: int, index: Any, source: Tensor | None = None) -> tuple:
    """x[:, index] as an index tuple (for dim 1): the whole slices along dim that a 1-D `index` names; a source
    written there must have their shape."""
    d = as_axis(op, dim, x.shape)
    array = indices_in_range(op, index, x.device, x.shape[d] if x.ndim else 1, "index")
    if array.ndim > 1:
        raise IndexError(f"{op}: index must be a vector (or a single number), got shape {array.shape}")
    places = (slice(None),) * d + (array.reshape(-1),)
    if source is not None and source.shape != (*x.shape[:d], array.size, *x.shape[d + 1:]):
        raise RuntimeError(f"{op}: source of shape {source.shape} does not fit input of shape {x.shape} at "
                           f"{array.size} indices along dim {dim}")
    return places


def _check_reduce(op: str, reduce: Any) -> None:
    if reduce is not None:
        raise NotImplementedError(f"{op}: reduce={reduce!r} is not supported here (deprecated in PyTorch); use "
                                  "scatter_add, or scatter_reduce in PyTorch")


def _written(x: Tensor, index: Any, value: Any) -> Tensor:
    """x with value written at index, out of place: a copy of x, written into (in the graph, as x[index] = value)."""
    y = x.clone()
    y[index] = value
    return y


# ---- scatter: writes and additions (AddAt) at those places ----

class AddAt(Primitive):
    """y = x with v added at index (repeated places accumulate);  dx = dout,  dv = dout[index]"""

    def forward(self, x, v, index):
        self.index = index
        y = x.copy()
        backend.scatter_add(y, index, v)
        return y

    def backward(self, dout):
        return dout, dout[self.index]


def scatter(input: Tensor, dim: int, index: Any, src: Any = None, value: Any = None, *,
            reduce: str | None = None) -> Tensor:
    """input with src[i, j, k] (or `value`) written at input[i, index[i, j, k], k] (for dim 1), as torch.scatter;
    src is read over index's shape only. Where an index repeats, one of the values lands (which one, PyTorch does
    not promise either)."""
    _check_reduce("scatter", reduce)
    if (src is None) == (value is None):
        raise TypeError("scatter: give one of src (a tensor) and value (a number)")
    if src is not None and not isinstance(src, Tensor):  # torch.scatter(x, dim, index, 1.0): the value by position
        src, value = None, src
    _, array, places = _places("scatter", input, dim, index, src)
    written = value if src is None else src[tuple(slice(0, n) for n in array.shape)]
    return saves_index(_written(input, places, written), index)


def scatter_add(input: Tensor, dim: int, index: Any, src: Tensor) -> Tensor:
    """input with src[i, j, k] added at input[i, index[i, j, k], k] (for dim 1), repeated places accumulating,
    as torch.scatter_add."""
    _, array, places = _places("scatter_add", input, dim, index, src)
    src = src[tuple(slice(0, n) for n in array.shape)].to(input.dtype)
    return saves_index(AddAt.apply(input, src, index=places), index)


def index_add(input: Tensor, dim: int, index: Any, source: Tensor, *, alpha: float = 1) -> Tensor:
    """input with alpha * source[..., i, ...] added to input[..., index[i], ...] along dim, as torch.index_add."""
    places = _slices("index_add", input, dim, index, source)
    source = source.to(input.dtype) if alpha == 1 else source.to(input.dtype) * alpha
    return saves_index(AddAt.apply(input, source, index=places), index)


def index_copy(input: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:
    """input with source[..., i, ...] written at input[..., index[i], ...] along dim, as torch.index_copy."""
    places = _slices("index_copy", input, dim, index, source)
    return saves_index(_written(input, places, source), index)


def index_fill(input: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """input with `value` (a number or a 0-d tensor) at input[..., index[i], ...] along dim, as torch.index_fill."""
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill: value must be a number or a 0-d tensor, got shape {value.shape}")
    places = _slices("index_fill", input, dim, index)
    return saves_index(_written(input, places, value), index)


def index_select(input: Tensor, dim: int, index: Any) -> Tensor:
    """The slices input[..., index[i], ...] along dim, in index's order, as torch.index_select."""
    places = _slices("index_select", input, dim, index)
    return saves_index(input[places], index)


def masked_scatter(input: Tensor, mask: Any, source: Tensor) -> Tensor:
    """input with the first elements of source, in order, written where the boolean mask (broadcast to input's shape)
    is True, as torch.masked_scatter."""
    given, mask = mask, index_array("masked_scatter", mask, input.device, "b")
    xp = backend.get_array_module(mask)
    try:
        mask = xp.broadcast_to(mask, input.shape)
    except ValueError:
        raise RuntimeError(f"masked_scatter: mask of shape {mask.shape} does not broadcast to input's "
                           f"{input.shape}") from None
    count = int(mask.sum())
    if count > source.numel():
        raise RuntimeError(f"masked_scatter: the mask selects {count} elements, source of shape {source.shape} has "
                           f"{source.numel()}")
    return saves_index(_written(input, mask, source.reshape(-1)[:count]), given)


def take_along_dim(input: Tensor, indices: Any, dim: int | None = None) -> Tensor:
    """input's values picked along dim by indices, the two broadcast against each other but along dim, as
    torch.take_along_dim; dim None: both flattened first."""
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1) if isinstance(indices, Tensor) else indices)
    d = as_axis("take_along_dim", dim, input.shape)
    array = index_array("take_along_dim", indices, input.device, "iu")
    if array.ndim != input.ndim:
        raise RuntimeError(f"take_along_dim: input of shape {input.shape} and indices of shape {array.shape} "
                           "must have the same number of dims")
    try:
        common = backend.broadcast_shapes(*((*s[:d], 1, *s[d + 1:]) for s in (input.shape, array.shape)))
    except ValueError:
        raise RuntimeError(f"take_along_dim: input of shape {input.shape} and indices of shape {array.shape} do not "
                           f"broadcast but along dim {dim}") from None
    xp = backend.get_array_module(array)
    array = xp.broadcast_to(array, (*common[:d], array.shape[d], *common[d + 1:]))
    return saves_index(input.expand(*common[:d], input.shape[d], *common[d + 1:]).gather(d, array), indices)


# ---- windows ----

def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """input[..., start:start + length, ...] along dim (a view), start from the end where negative, as torch.narrow."""
    d = as_axis("narrow", dim, input.shape)
    n = input.shape[d]
    if not -n <= start <= n or length < 0 or start % (n or 1) + length > n:
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}) of a tensor of "
                         f"shape {input.shape}")
    start = start + n if start < 0 else start
    return input[(slice(None),) * d + (slice(start, start + length),)]


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Every window of `size` elements along dimension, `step` apart, as Tensor.unfold: that dim becomes the number
    of windows and a last dim of `size` is added (a copy here, where PyTorch's is a view)."""
    d = as_axis("unfold", dimension, input.shape)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= size <= n or step < 1:
        raise RuntimeError(f"unfold: size ({size}) must be in [0, {n}] (the length of dimension {dimension}, shape "
                           f"{input.shape}) and step ({step}) at least 1")
    xp = backend.module_for(input.device)
    windows = xp.arange(0, n - size + 1, step)[:, None] + xp.arange(size)  # (windows, size)
    y = input[(slice(None),) * d + (windows,)]  # (*before, windows, size, *after)
    return y.permute(*range(d + 1), *range(d + 2, y.ndim), d + 1)  # the window's elements last


# ---- where the non-zeros are: outside the graph ----

def nonzero(input: Tensor, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    """The positions of the non-zero elements, one row each (int64, shape (n, ndim)), in row-major order, as
    torch.nonzero; as_tuple: one vector per dim instead."""
    xp = backend.get_array_module(input.array)
    if as_tuple:  # a 0-d tensor as a vector of one element, as PyTorch's
        rows = xp.argwhere(input.array.reshape(input.shape or (1,))).astype("int64")
        return tuple(core.TENSOR.wrap(rows[:, a].copy(), False) for a in range(rows.shape[1]))
    return core.TENSOR.wrap(xp.argwhere(input.array).astype("int64"), False)


def argwhere(input: Tensor) -> Tensor:
    """nonzero(input): one row per non-zero element."""
    return nonzero(input)


def count_nonzero(input: Tensor, dim: int | tuple[int, ...] | None = None) -> Tensor:
    """How many elements are non-zero (along dim), an int64 tensor, as torch.count_nonzero."""
    axes = None if dim is None else tuple(as_axis("count_nonzero", a, input.shape)
                                          for a in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    xp = backend.get_array_module(input.array)
    return core.TENSOR.wrap(xp.asarray(xp.count_nonzero(input.array, axis=axes), dtype="int64"), False)

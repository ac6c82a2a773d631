"""Shape and indexing: reshape, transpose, x[index], cat (concatenate), stack, split (one node with
several outputs), chunk, squeeze, unsqueeze, expand, flatten, unflatten, flip, tril, triu, repeat and
gather, with PyTorch's names and arguments; and the checks that turn index and mask arguments into
arrays on the right device. Their backward passes move gradients back to where the values came from.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from minigrad import backend, elementwise  # the module, not its names: any import order works
from minigrad.dims import as_axes, as_axis, int_tuple, numpy_aliases
from minigrad.tensor import Function, Tensor, _as_array

# ---- shape ----

class Reshape(Function):
    """y = x.reshape(shape);  dx = dout.reshape(x.shape)"""

    def forward(self, x, shape):
        self.x_shape = x.shape
        return x.reshape(shape)

    def backward(self, dout):
        return (dout.reshape(self.x_shape),)


class Permute(Function):
    """y = x.transpose(axes) (NumPy's name for a permutation);  dx = dout.transpose(inverse of axes)"""

    def forward(self, x, axes):
        self.axes = axes
        return x.transpose(axes)

    def backward(self, dout):
        inverse = [0] * len(self.axes)
        for i, a in enumerate(self.axes):
            inverse[a] = i
        return (dout.transpose(inverse),)


def reshape(x: Tensor, *shape: int) -> Tensor:
    return Reshape.apply(x, shape=int_tuple("reshape", shape))


def permute(x: Tensor, *dims: int) -> Tensor:
    """Reorder all the axes: output axis i is input axis dims[i] (torch.permute; NumPy's transpose)."""
    order = int_tuple("permute", dims)
    in_range = all(-x.ndim <= a < x.ndim for a in order)  # else `a % ndim` would wrap 5 to 1
    if not in_range or len(order) != x.ndim or sorted(a % x.ndim for a in order) != list(range(x.ndim)):
        raise ValueError(f"permute: dims {order} are not a permutation of a tensor with {x.ndim} dimensions")
    return Permute.apply(x, axes=tuple(a % x.ndim for a in order))


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two axes, as torch.transpose: x.transpose(-2, -1) turns the last two around.

    Not NumPy's transpose, which takes a whole permutation: use permute for that.
    """
    order = list(range(x.ndim))
    a, b = as_axis("transpose", dim0, x.shape), as_axis("transpose", dim1, x.shape)
    order[a], order[b] = b, a
    return Permute.apply(x, axes=tuple(order))


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
    index = tuple(_index_array(i, x.device) for i in index)
    try:
        return GetItem.apply(x, index=index)
    except IndexError as err:
        raise IndexError(f"getitem: index {index} into a tensor of shape {x.shape}: {err}") from None


def _index_array(i: Any, device: str) -> Any:
    """Array-like indices (lists, arrays, tensors) as arrays on the data's device, so a NumPy or CPU
    index serves CuPy data too; ints, slices, None and Ellipsis stay as they are."""
    if not (isinstance(i, (list, Tensor)) or hasattr(i, "dtype")):
        return i
    i = _as_array(i, "int64" if isinstance(i, list) and not i else None, device, "getitem")  # x[[]]: no rows
    if i.dtype.kind not in "iub":
        raise IndexError(f"getitem: indices must be integers or booleans, got dtype {i.dtype}")
    return i


def _aux_array(op: str, value: Any, like: Tensor, kinds: str, moved: bool = True) -> Any:
    """An index, mask or target argument as an array on `like`'s device, with a dtype of one of `kinds`.
    NumPy arrays and lists are moved there (moved=False: left where they are, a list on the host); a
    tensor on another device is refused, as an input would be."""
    if isinstance(value, Tensor) and value.device != like.device:
        raise RuntimeError(f"{op}: tensor of shape {value.shape} is on {value.device}, input on {like.device}")
    value = _as_array(value, None, like.device if moved else None, op)
    if value.dtype.kind not in kinds:
        expected = " or ".join(dict.fromkeys(_KIND_NAMES[k] for k in kinds))  # "iu": integer, once
        raise TypeError(f"{op}: expected {expected} values, got dtype {value.dtype}")
    return value


_KIND_NAMES = {"b": "boolean", "i": "integer", "u": "integer", "f": "floating-point"}


def _indices_in_range(op: str, value: Any, like: Tensor, n: int, what: str, ignore: int | None = None) -> Any:
    """Integer indices (token ids, targets) as an array on `like`'s device, refused if any lies outside
    [0, n) other than `ignore`.

    They are checked where they come from: indices from the host (lists, NumPy: train.py's batches)
    before they are copied, so a GPU step does not wait for the check; indices already on the GPU
    there, with one readback (the answer to "any out of range?").
    """
    indices = _aux_array(op, value, like, "iu", moved=False)
    _check_range(op, indices, n, what, ignore)
    return backend.to_device(indices, like.device)


def _check_range(op: str, indices: Any, n: int, what: str, ignore: int | None = None) -> None:
    """Refuse indices outside [0, n) here, rather than with an IndexError deep inside NumPy."""
    bad = (indices < 0) | (indices >= n)
    if ignore is not None:
        bad &= indices != ignore
    if bad.any():  # the one readback where the indices live on the GPU
        where = tuple(int(i[0]) for i in bad.nonzero())
        raise IndexError(f"{op}: {what} {int(indices[where])} at position {where} is out of range [0, {n})")


# ---- cat (concatenate), stack, split, chunk ----

class Cat(Function):
    """y = cat(xs, axis);  dx_i = the slice of dout where x_i was placed"""

    def forward(self, *xs, axis):
        self.axis, self.sizes = axis, [x.shape[axis] for x in xs]
        return backend.get_array_module(xs[0]).concatenate(xs, axis=axis)

    def backward(self, dout):
        return tuple(dout[piece] for piece in _pieces(self.sizes, self.axis))


def _pieces(sizes: Sequence[int], axis: int) -> list[tuple[slice, ...]]:
    """The index of each piece of sizes `sizes` laid side by side along `axis`."""
    ends = itertools.accumulate(sizes)
    return [(slice(None),) * axis + (slice(end - size, end),) for end, size in zip(ends, sizes, strict=True)]


@numpy_aliases
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Tensors joined along `dim`, as torch.cat; all other sizes must match."""
    if not tensors:
        raise ValueError("cat: need at least one tensor")
    return Cat.apply(*tensors, axis=as_axis("cat", dim, tensors[0].shape))


concatenate = cat  # torch.concatenate: the same function

class Stack(Function):
    """y = stack(xs, dim): the xs side by side along a new axis `dim`;  dx_i = dout at index i of dim"""

    def forward(self, *xs, dim):
        self.dim = dim
        return backend.get_array_module(xs[0]).stack(xs, axis=dim)

    def backward(self, dout):
        return tuple(dout[(slice(None),) * self.dim + (i,)] for i in range(dout.shape[self.dim]))


@numpy_aliases
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Tensors of one shape, stacked along a new axis at `dim` (in [-ndim - 1, ndim]), as torch.stack."""
    if not tensors:
        raise ValueError("stack: need at least one tensor")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"stack: item {i} is a {type(t).__name__}, not a tensor")
    if len({t.shape for t in tensors}) > 1:
        raise ValueError(f"stack: tensors must have one shape, got {', '.join(str(t.shape) for t in tensors)}")
    return Stack.apply(*tensors, dim=as_axis("stack", dim, tensors[0].shape, new=True))


class Split(Function):
    """ys = the pieces of x along `dim` (views);  dx = the pieces' gradients side by side along dim,
    zeros for a piece that received none.

    One node with several outputs (see Function in tensor.py), so that backward runs once, with the
    gradients of all pieces, and writes them into one new array of x's shape. Slicing instead, as in
    q, k, v = qkv[..., :C], qkv[..., C:2C], qkv[..., 2C:], makes three nodes, each returning a gradient
    of qkv's full shape that is zero outside its slice, and the engine adds the three up.
    """

    def forward(self, x, sizes, dim):
        self.x_shape, self.x_dtype, self.pieces = x.shape, x.dtype, _pieces(sizes, dim)
        return tuple(x[piece] for piece in self.pieces)

    def backward(self, douts):
        xp = backend.get_array_module(next(d for d in douts if d is not None))
        dx = xp.empty(self.x_shape, dtype=self.x_dtype)
        for piece, d in zip(self.pieces, douts, strict=True):
            dx[piece] = 0 if d is None else d
        return (dx,)


@numpy_aliases
def split(x: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """x cut along `dim`, as torch.split: into pieces of split_size (the last one smaller where the
    size does not divide), or of the listed sizes, which must add up to the axis's size."""
    d = as_axis("split", dim, x.shape)
    n = x.shape[d]
    if hasattr(split_size_or_sections, "__index__"):  # an int: the size of each piece
        size = split_size_or_sections
        if size < 0 or (size == 0 and n):
            raise ValueError(f"split: split_size must be positive, got {size} for dim {dim} of size {n}")
        sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
    else:
        sizes = list(int_tuple("split", (split_size_or_sections,)))
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"split: sizes {sizes} do not add up to {n}, the size of dim {dim} of a tensor "
                             f"of shape {x.shape}")
    return Split.apply(x, sizes=tuple(sizes), dim=d)


@numpy_aliases
def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """x cut along `dim` into pieces of ceil(n / chunks), the last one smaller, as torch.chunk (so
    there can be fewer than `chunks` pieces: 6 in 4 chunks gives 3 of 2)."""
    if chunks < 1:
        raise ValueError(f"chunk: chunks must be at least 1, got {chunks}")
    n = x.shape[as_axis("chunk", dim, x.shape)]
    return split(x, -(-n // chunks) if n else [0] * chunks, dim)


# ---- squeeze, unsqueeze, flatten, unflatten: reshapes ----

@numpy_aliases
def squeeze(x: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """x without its axes of size 1: all of them, or those among `dim` (an int or a tuple). As in
    PyTorch, an axis named in `dim` whose size is not 1 stays, rather than raising."""
    squeezed = as_axes("squeeze", dim, x.shape)
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in squeezed or n != 1))


@numpy_aliases
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """x with a new axis of size 1 at `dim`, in [-ndim - 1, ndim]."""
    d = as_axis("unsqueeze", dim, x.shape, new=True)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Axes start_dim to end_dim (both included) merged into one; a 0-d tensor becomes shape (1,)."""
    if x.ndim == 0:
        return reshape(x, 1)
    start, end = as_axis("flatten", start_dim, x.shape), as_axis("flatten", end_dim, x.shape)
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} in a tensor of shape {x.shape}")
    return reshape(x, x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


@numpy_aliases
def unflatten(x: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Axis `dim` unfolded into `sizes` (one of them may be -1, for what remains): flatten's inverse."""
    d, sizes = as_axis("unflatten", dim, x.shape), tuple(sizes)
    n, known = x.shape[d], math.prod(s for s in sizes if s != -1)
    free = sizes.count(-1)
    if free > 1 or any(s < -1 for s in sizes) or (known != n if not free else known == 0 or n % known):
        raise ValueError(f"unflatten: sizes {sizes} do not multiply to {n}, the size of dim {dim} of a tensor "
                         f"of shape {x.shape}")
    sizes = tuple(n // known if s == -1 else s for s in sizes)
    return reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])


# ---- expand, repeat ----

class Expand(Function):
    """y = x broadcast to `shape` (a read-only view, nothing copied);  dx = dout summed back over the
    axes that were broadcast (the adjoint of broadcasting is summing)"""

    def forward(self, x, shape):
        self.x_shape = x.shape
        return backend.get_array_module(x).broadcast_to(x, shape)

    def backward(self, dout):
        return (elementwise.unbroadcast(dout, self.x_shape),)


def expand(x: Tensor, *sizes: int) -> Tensor:
    """x repeated along its axes of size 1 without copying, as torch's Tensor.expand: -1 keeps an
    axis's size, and new axes may be added in front."""
    sizes = int_tuple("expand", sizes)
    lead = len(sizes) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    if lead < 0 or any(s < 0 for s in shape) or any(n not in (1, shape[lead + i]) for i, n in enumerate(x.shape)):
        raise ValueError(f"expand: a tensor of shape {x.shape} cannot be expanded to {sizes}: only axes of size 1 "
                         "grow, and -1 (keep the size) is for existing axes")
    return Expand.apply(x, shape=shape)


class Repeat(Function):
    """y = x tiled repeats[i] times along axis i (numpy.tile);  dx = dout summed over the copies:
    dout reshaped to (r0, n0, r1, n1, ...) and summed over the r axes"""

    def forward(self, x, repeats):
        self.x_shape, self.repeats = x.shape, repeats
        return backend.get_array_module(x).tile(x, repeats)

    def backward(self, dout):
        padded = (1,) * (len(self.repeats) - len(self.x_shape)) + self.x_shape  # x seen with the new axes
        copies_and_sizes = [m for r, n in zip(self.repeats, padded, strict=True) for m in (r, n)]
        dx = dout.reshape(copies_and_sizes).sum(axis=tuple(range(0, 2 * len(self.repeats), 2)))
        return (dx.reshape(self.x_shape),)


def repeat(x: Tensor, *sizes: int) -> Tensor:
    """x copied sizes[i] times along axis i, as torch's Tensor.repeat (numpy.tile): extra leading
    sizes add new axes in front."""
    sizes = int_tuple("repeat", sizes)
    if len(sizes) < x.ndim or any(s < 0 for s in sizes):
        raise ValueError(f"repeat: sizes {sizes} for a tensor of shape {x.shape}: need one size >= 0 per axis "
                         "at least")
    return Repeat.apply(x, repeats=sizes)


# ---- flip, tril, triu ----

class Flip(Function):
    """y = x reversed along `dims`;  dx = dout reversed along the same dims"""

    def forward(self, x, dims):
        self.dims = dims
        return backend.get_array_module(x).flip(x, dims)

    def backward(self, dout):
        return (backend.get_array_module(dout).flip(dout, self.dims),)


@numpy_aliases
def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """x reversed along each axis in `dims`, as torch.flip; a 0-d tensor takes dims 0 and -1, and stays."""
    return Flip.apply(x, dims=as_axes("flip", dims, x.shape))


class Triangle(Function):
    """y = tril(x, k) or triu(x, k) over the last two axes: x times a 0/1 mask, so dx = the same
    triangle of dout"""

    def forward(self, x, diagonal, upper):
        xp = backend.get_array_module(x)
        self.triangle, self.diagonal = (xp.triu if upper else xp.tril), diagonal
        return self.triangle(x, diagonal)

    def backward(self, dout):
        return (self.triangle(dout, self.diagonal),)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """x with the entries above the `diagonal`-th diagonal of its last two axes set to 0."""
    _check_triangle("tril", x, diagonal)
    return Triangle.apply(x, diagonal=diagonal, upper=False)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """x with the entries below the `diagonal`-th diagonal of its last two axes set to 0."""
    _check_triangle("triu", x, diagonal)
    return Triangle.apply(x, diagonal=diagonal, upper=True)


def _check_triangle(op: str, x: Tensor, diagonal: int) -> None:
    if not hasattr(diagonal, "__index__") or isinstance(diagonal, bool):  # 0.5 or True: no diagonal, as PyTorch
        raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__} {diagonal!r:.40}")
    if x.ndim < 2:
        raise ValueError(f"{op}: needs a tensor of at least 2 dimensions, got shape {x.shape}")


# ---- gather ----

class Gather(Function):
    """y[i, j, k] = x[i, index[i, j, k], k] (for dim 1);  dx = zeros with dout added at those places
    (an index that repeats accumulates)"""

    def forward(self, x, index, dim):
        xp = backend.get_array_module(x)
        # along every other axis d, position i of y reads position i of x, so y covers index.shape only
        self.where = tuple(index if d == dim else xp.arange(n).reshape((n,) + (1,) * (index.ndim - d - 1))
                           for d, n in enumerate(index.shape))
        self.x_shape = x.shape
        return x[self.where]

    def backward(self, dout):
        dx = backend.get_array_module(dout).zeros(self.x_shape, dtype=dout.dtype)
        backend.scatter_add(dx, self.where, dout)
        return (dx,)


@numpy_aliases
def gather(x: Tensor, dim: int, index: Any) -> Tensor:
    """Values of x picked along `dim` by integer `index`, as torch.gather: index has x's number of
    axes, no larger than x's along the others, and the result has index's shape."""
    d = as_axis("gather", dim, x.shape)
    index = _aux_array("gather", index, x, "iu", moved=False)  # still where it came from: see _indices_in_range
    if index.ndim != x.ndim or any(m > n for i, (m, n) in enumerate(zip(index.shape, x.shape, strict=True)) if i != d):
        raise ValueError(f"gather: index of shape {index.shape} for a tensor of shape {x.shape} along dim {dim}: "
                         "it needs as many axes, none larger than the tensor's except along dim")
    index = _indices_in_range("gather", index, x, x.shape[d], "index")
    return Gather.apply(x, index=index, dim=d)

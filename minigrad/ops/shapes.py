"""Shape and indexing, with PyTorch's names and arguments: reshape, permute, transpose, x[index], cat, stack,
split (one node with several outputs), chunk, squeeze, ..., gather, and F.embedding and F.one_hot (rows picked
by index), and F.causal_mask. Their backward passes move gradients back to where the values came from.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import (
    as_array,
    as_axes,
    as_axis,
    check_range,
    index_array,
    indices_in_range,
    int_tuple,
    numpy_aliases,
    padding_index,
    unbroadcast,
)
from minigrad.array.dtypes import DType, number_dtype
from minigrad.autograd.versions import saves_index
from minigrad.core import Tensor, namespace
from minigrad.ops import Primitive

# ---- shape ----

class Reshape(Primitive):
    """y = x.reshape(shape);  dx = dout.reshape(x.shape)"""

    view = True  # y shares x's memory wherever NumPy can reshape without copying

    def forward(self, x, shape):
        self.x_shape = x.shape
        return x.reshape(shape)

    def backward(self, dout):
        return (dout.reshape(self.x_shape),)


class Permute(Primitive):
    """y = x.transpose(axes) (NumPy's name for a permutation);  dx = dout.transpose(inverse of axes)"""

    view = True

    def forward(self, x, axes):
        self.axes = axes
        return x.transpose(axes)

    def backward(self, dout):
        inverse = [0] * len(self.axes)
        for i, a in enumerate(self.axes):
            inverse[a] = i
        return (namespace(dout).permute_dims(dout, tuple(inverse)),)


def permute_dims(x: Tensor, axes: Sequence[int]) -> Tensor:
    """NumPy 2's name for permute (the axes as one tuple): for backward formulas, which speak NumPy's names."""
    return permute(x, *axes)


def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    """Swap two axes, as torch.swapaxes and numpy.swapaxes (transpose's other name)."""
    return transpose(x, axis0, axis1)


def reshape(x: Tensor, *shape: int) -> Tensor:
    return Reshape.apply(x, shape=int_tuple("reshape", shape))


def view(x: Tensor, *shape: int) -> Tensor:
    """x's elements read in another shape, always in x's memory, as torch's view: refused where the memory does not
    allow it (x.T.view(-1) would need a copy), as in PyTorch; x.reshape(...) copies there."""
    if not shape:  # torch refuses it too: x.view(()) is the 0-d shape
        raise TypeError(f"view: expected a shape, got none, for a tensor of shape {x.shape}")
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list)) and not hasattr(shape[0], "__index__"):
        raise TypeError(f"view: expected a shape, got {shape[0]!r}; view(dtype), which reads the bits as another "
                        "dtype, is not supported: x.to(dtype) converts the values")
    y = reshape(x, *shape)
    if y.array.size and not backend.get_array_module(x.array).may_share_memory(y.array, x.array):
        raise RuntimeError(f"view: a tensor of shape {x.shape} and strides {x.array.strides} cannot be read as shape "
                           f"{y.shape} without a copy (one of its dimensions spans two separate parts of memory, as "
                           "after a transpose); use x.reshape(...), which copies, or x.contiguous().view(...)")
    return y


def t(x: Tensor) -> Tensor:
    """The transpose of a matrix (x.T for 0, 1 or 2 dimensions), as torch.t; more dimensions are refused, as there."""
    if x.ndim > 2:
        raise ValueError(f"t: expects a tensor of at most 2 dimensions, got shape {x.shape}; x.transpose(-2, -1) swaps "
                         "the last two dimensions")
    return permute(x, *reversed(range(x.ndim)))


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

class GetItem(Primitive):
    """y = x[index];  dx = zeros like x with dout added at index (repeated indices accumulate)"""

    view = True  # a basic index (ints, slices) gives a view of x, an array index a copy

    def forward(self, x, index):
        self.x_shape, self.index = x.shape, index
        basic = index if any(i is Ellipsis for i in index) else (*index, Ellipsis)  # x[0, ...] of a vector: a 0-d view
        return x[basic]

    def backward(self, dout):
        return (namespace(dout).added_at(dout, self.index, self.x_shape),)


class IndexAdd(Primitive):
    """y = zeros of `shape` with x added at `index` (repeated places accumulate): the backward of x[index] (getitem,
    gather, embedding), as an op of its own for create_graph=True;  dx = dout[index]"""

    def forward(self, x, index, shape):
        self.index = index
        return backend.added_at(x, index, shape)

    def backward(self, dout):
        return (dout[self.index],)


def added_at(values: Tensor, index: tuple, shape: tuple[int, ...]) -> Tensor:
    """backend.added_at on tensors, recorded: zeros of `shape` with values added at `index`."""
    return IndexAdd.apply(values, index=index, shape=shape)


def _is_basic(index: tuple) -> bool:
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index)


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index] for ints, slices, None, Ellipsis and integer or boolean arrays (as lists, arrays or tensors). An index
    that mixes ints and arrays follows PyTorch: the ints select first, then the arrays index what is left
    (x[0, :, [1, 2]] of (2, 3, 4) is (3, 2); NumPy would count the int among the arrays and give (2, 3))."""
    given, index = index, index_tuple(index, x.device)
    ints_first = torch_order(index)
    if ints_first:  # the index tensors given are version-checked with the second step's node, which keeps them
        y = getitem(getitem(x, ints_first[0]), ints_first[1])
        return saves_index(y, *(given if isinstance(given, tuple) else (given,)))
    try:
        y = GetItem.apply(x, index=index)
    except IndexError as err:
        raise IndexError(f"getitem: index {index} into a tensor of shape {x.shape}: {err}") from None
    return y if _is_basic(index) else saves_index(y, *(given if isinstance(given, tuple) else (given,)))


def torch_order(index: tuple) -> tuple[tuple, tuple] | None:
    """For an index that mixes ints and arrays, its two steps in PyTorch's order: the ints (slices elsewhere), then
    the rest (a slice for each axis a None added); None for any other index (NumPy's rule is PyTorch's there)."""
    ints = [isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in index]
    if not any(ints) or not any(getattr(i, "ndim", 0) for i in index):
        return None
    first, rest = [], []
    for i, picked in zip(index, ints, strict=True):
        if picked:
            first.append(i)
        elif i is None or i is Ellipsis:
            first.append(i)
            rest.append(slice(None) if i is None else i)
        else:  # a slice or an array: each axis it indexes is kept whole at first (a mask's, all of its axes)
            kind = getattr(getattr(i, "dtype", None), "kind", "")
            first.extend([slice(None)] * (0 if isinstance(i, bool) else i.ndim if kind == "b" else 1))
            rest.append(i)
    return tuple(first), tuple(rest)


def index_tuple(index: Any, device: str) -> tuple:
    """An index as a tuple, array-likes as arrays on `device`. A list that holds slices, None, Ellipsis or sequences
    is a tuple of indices, as PyTorch (and older NumPy) read x[[slice(None), [1, 3]]]; a list of ints is one index."""
    if isinstance(index, list) and len(index) < 32 and any(
            i is None or i is Ellipsis or isinstance(i, (slice, list, tuple, Tensor)) or getattr(i, "ndim", 0)
            for i in index):
        index = tuple(index)
    index = index if isinstance(index, tuple) else (index,)
    return tuple(_index_argument(i, device) for i in index)


def _index_argument(i: Any, device: str) -> Any:
    """Array-like indices (lists, arrays, tensors) as arrays on the data's device, so a NumPy or CPU
    index serves CuPy data too; ints, slices, None and Ellipsis stay as they are."""
    if not (isinstance(i, (list, Tensor)) or hasattr(i, "dtype")):
        return i
    i = as_array(i, "int64" if isinstance(i, list) and not i else None, device, "getitem")  # x[[]]: no rows
    if i.dtype.kind not in "iub":
        raise IndexError(f"getitem: indices must be integers or booleans, got dtype {i.dtype}")
    return i


class SetItem(Primitive):
    """y = x with y[index] = v (v broadcast to x[index]'s shape), the out-of-place form of x[index] = v;
    dx = dout with 0 at index (those values were overwritten),  dv = dout[index] summed back to v's shape"""

    def forward(self, x, v, index):
        self.index, self.v_shape = index, v.shape
        y = x.copy()
        y[index] = v
        if self.needs_input_grad and self.needs_input_grad[0]:  # where x was overwritten: a constant mask
            self.written = backend.get_array_module(x).zeros(x.shape, dtype=bool)
            self.written[index] = True
        return y

    def backward(self, dout):
        need_x, need_v = self.needs_input_grad
        dx = namespace(dout).where(self.written, 0, dout) if need_x else None
        dv = unbroadcast(dout[self.index], self.v_shape) if need_v else None
        return dx, dv


def setitem(x: Tensor, index: Any, value: Any) -> Tensor:
    """x with value written at index (value converted to x's dtype and broadcast, as PyTorch's x[index] = value
    does): what x[index] = value computes, before it lands in x's memory (Tensor.__setitem__)."""
    index = index_tuple(index, x.device)
    ints_first = torch_order(index)
    if ints_first:  # PyTorch's order, as getitem's: write into the part the ints select, then put it back
        return setitem(x, ints_first[0], setitem(getitem(x, ints_first[0]), ints_first[1], value))
    v = (value.to(x.dtype) if isinstance(value, Tensor)
         else core.TENSOR.wrap(as_array(value, x.dtype, x.device, "setitem")))
    target = x.array[index].shape  # the shape of the place written
    if v.ndim > len(target):  # NumPy lets extra leading axes of size 1 through
        if any(n != 1 for n in v.shape[:v.ndim - len(target)]):
            raise ValueError(f"setitem: a value of shape {v.shape} does not fit x[index] of shape {target}")
        v = reshape(v, v.shape[v.ndim - len(target):])
    try:
        return SetItem.apply(x, v, index=index)
    except IndexError as err:
        raise IndexError(f"setitem: index {index} into a tensor of shape {x.shape}: {err}") from None


def copied(x: Tensor, src: Any) -> Tensor:
    """src as x's dtype, on x's device, broadcast to x's shape: what x.copy_(src) writes; src gets the gradient, x a
    zero one (its old values are gone), as from PyTorch's copy_."""
    if not isinstance(src, Tensor):
        src = core.TENSOR.wrap(as_array(src, x.dtype, x.device, "copy_"))
    return x.where(False, src.to(x.device).to(x.dtype))  # selected: x stays in the graph, with no gradient


# ---- cat (concatenate), stack, split, chunk ----

class Cat(Primitive):
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

class Stack(Primitive):
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


class Split(Primitive):
    """ys = the pieces of x along `dim` (views);  dx = the pieces' gradients side by side, zeros for a piece that
    received none. One node with several outputs (see Output in core.py): backward runs once, with every piece's
    gradient, and writes one array of x's shape."""

    view = True

    def forward(self, x, sizes, dim):
        self.x_shape, self.x_dtype, self.pieces, self.dim = x.shape, x.dtype, _pieces(sizes, dim), dim
        self.module = backend.get_array_module(x)  # for the zeros of a piece no gradient reached
        return tuple(x[piece] for piece in self.pieces)

    def backward(self, douts):
        xp = namespace(next(d for d in douts if d is not None))
        parts = [d if d is not None else self.saved(self.module.zeros(self.shape_of(piece), self.x_dtype), None)
                 for d, piece in zip(douts, self.pieces, strict=True)]
        return (xp.concatenate(parts, axis=self.dim),)

    def shape_of(self, piece: tuple[slice, ...]) -> tuple[int, ...]:
        size = piece[self.dim].stop - piece[self.dim].start
        return self.x_shape[:self.dim] + (size,) + self.x_shape[self.dim + 1:]


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
        if min(sizes, default=0) < 0 or sum(sizes) != n:
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

class Expand(Primitive):
    """y = x broadcast to `shape` (a read-only view, nothing copied);  dx = dout summed back over the
    axes that were broadcast (the adjoint of broadcasting is summing)"""

    view = True

    def forward(self, x, shape):
        self.x_shape = x.shape
        return backend.get_array_module(x).broadcast_to(x, shape)

    def backward(self, dout):
        return (unbroadcast(dout, self.x_shape),)


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


def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
    """x repeated to `shape` without copying, as torch.broadcast_to and numpy.broadcast_to (expand with a whole
    shape)."""
    return expand(x, *shape)


class Repeat(Primitive):
    """y = x tiled repeats[i] times along axis i (numpy.tile);  dx = dout summed over the copies:
    dout reshaped to (r0, n0, r1, n1, ...) and summed over the r axes"""

    def forward(self, x, repeats):
        self.x_shape, self.repeats = x.shape, repeats
        return backend.get_array_module(x).tile(x, repeats)

    def backward(self, dout):
        padded = (1,) * (len(self.repeats) - len(self.x_shape)) + self.x_shape  # x seen with the new axes
        copies_and_sizes = tuple(m for r, n in zip(self.repeats, padded, strict=True) for m in (r, n))
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


# ---- flip, tril, triu, causal_mask ----

class Flip(Primitive):
    """y = x reversed along `dims`;  dx = dout reversed along the same dims"""

    def forward(self, x, dims):
        self.dims = dims
        return backend.get_array_module(x).flip(x, dims).copy()  # a copy, as PyTorch's: NumPy's flip is a view

    def backward(self, dout):
        return (namespace(dout).flip(dout, self.dims),)


@numpy_aliases
def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """x reversed along each axis in `dims`, as torch.flip; a 0-d tensor takes dims 0 and -1, and stays."""
    return Flip.apply(x, dims=as_axes("flip", dims, x.shape))


def roll(x: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """x shifted by `shifts` along `dims`, the elements pushed off one end coming back at the other, as torch.roll;
    without dims, over the flattened tensor, then reshaped. Made of slices and cat, so the gradient rolls back."""
    if dims is None:
        if not isinstance(shifts, int):
            raise RuntimeError(f"roll: without dims, shifts must be one int, got {shifts!r}")
        return roll(x.reshape(-1), shifts, 0).reshape(*x.shape)
    shifts, dims = (shifts,) if isinstance(shifts, int) else tuple(shifts), (dims,) if isinstance(dims, int) else dims
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts {shifts} and dims {tuple(dims)} must be of one length")
    rolled = x
    for shift, dim in zip(shifts, dims, strict=True):
        axis = as_axis("roll", dim, x.shape)
        n = x.shape[axis]
        if n and shift % n:
            before = (slice(None),) * axis
            rolled = cat([rolled[(*before, slice(n - shift % n, None))], rolled[(*before, slice(0, n - shift % n))]],
                         axis)
    return rolled if rolled is not x else x.clone()  # a new tensor even when nothing moves, as PyTorch's


class Triangle(Primitive):
    """y = tril(x, k) or triu(x, k) over the last two axes: x times a 0/1 mask, so dx = the same
    triangle of dout"""

    def forward(self, x, diagonal, upper):
        xp = backend.get_array_module(x)
        self.upper, self.diagonal = upper, diagonal
        return xp.triu(x, diagonal) if upper else xp.tril(x, diagonal)

    def backward(self, dout):
        xp = namespace(dout)
        return (xp.triu(dout, self.diagonal) if self.upper else xp.tril(dout, self.diagonal),)


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


def causal_mask(T: int, T_k: int | None = None, *, device: str = "cpu", dtype: DType | None = None) -> Tensor:
    """(T, T_k) booleans, True where query i may attend to key j, j <= i + T_k - T (the T queries are the last T of
    T_k positions, a key/value cache holding the earlier ones): attn_mask's convention in
    F.scaled_dot_product_attention. Hide the other scores with mg.where(mask, scores, -inf), or pass it as attn_mask.
    dtype (before 0.5 the mask was additive, 0 and -inf): that float mask, one release more, with a warning."""
    T_k = T if T_k is None else T_k
    if T < 0 or T_k < T:
        raise ValueError(f"causal_mask: need 0 <= T <= T_k, got T={T}, T_k={T_k}")
    if dtype is None:
        return core.TENSOR.wrap(allowed_keys(T, T_k, device))
    warnings.warn("causal_mask(dtype=) is deprecated since minigrad 0.5 and goes in the next release: causal_mask is "
                  "boolean now, True = may attend; mask scores with mg.where(F.causal_mask(T, T_k), scores, -inf)",
                  DeprecationWarning, stacklevel=2)
    dtype = number_dtype("causal_mask", dtype)
    if dtype.kind != "f":
        raise TypeError(f"causal_mask: the mask holds -inf, so its dtype must be floating point, got {dtype}")
    return core.TENSOR.wrap(additive_mask(T, T_k, dtype, device))


@functools.lru_cache(maxsize=32)
def additive_mask(T: int, T_k: int, dtype: DType, device: str) -> Any:
    """causal_mask(dtype=)'s (T, T_k) float array, 0 where allowed_keys is True, else -inf; read-only: made once per
    shape, dtype and device."""
    mask = backend.module_for(device).where(allowed_keys(T, T_k, device), dtype.type(0), dtype.type(-math.inf))
    if device == "cpu":
        mask.flags.writeable = False
    return mask


@functools.lru_cache(maxsize=32)
def allowed_keys(T: int, T_k: int, device: str) -> Any:
    """(T, T_k) booleans, True where query i may attend to key j, j <= i + T_k - T (causal_mask), as PyTorch's
    boolean attn_mask (True: may attend); read-only: made once per shape (speed: attention asks for it in every layer
    of every step)."""
    xp = backend.module_for(device)
    allowed = xp.tril(xp.ones((T, T_k), dtype=bool), k=T_k - T)  # key j no later than query i, at i + T_k - T
    if device == "cpu":
        allowed.flags.writeable = False
    return allowed


# ---- gather ----

class Gather(Primitive):
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
        return (namespace(dout).added_at(dout, self.where, self.x_shape),)


@numpy_aliases
def gather(x: Tensor, dim: int, index: Any) -> Tensor:
    """Values of x picked along `dim` by integer `index`, as torch.gather: index has x's number of
    axes, no larger than x's along the others, and the result has index's shape."""
    d = as_axis("gather", dim, x.shape)
    given, index = index, index_array("gather", index, x.device, "iu", moved=False)  # still where it came from
    if index.ndim != x.ndim or any(m > n for i, (m, n) in enumerate(zip(index.shape, x.shape, strict=True)) if i != d):
        raise ValueError(f"gather: index of shape {index.shape} for a tensor of shape {x.shape} along dim {dim}: "
                         "it needs as many axes, none larger than the tensor's except along dim")
    index = indices_in_range("gather", index, x.device, x.shape[d], "index")
    return saves_index(Gather.apply(x, index=index, dim=d), given)


# ---- embedding, one_hot ----

class EmbeddingFunction(Primitive):
    """y = w[indices];  dw = zeros with each row of dout added at its index (repeats accumulate), except the row
    padding_idx (if given), which gets none"""

    def forward(self, w, indices, padding_idx):
        self.w_shape, self.indices, self.padding_idx = w.shape, indices, padding_idx
        return w[indices]

    def backward(self, dout):
        xp = namespace(dout)
        rows = dout.reshape(self.indices.size, self.w_shape[1])  # (N, C): one row of dout per index
        dw = xp.added_at(rows, (self.indices.reshape(-1),), self.w_shape)
        if self.padding_idx is not None:  # the padding row: as if it were a constant
            padding = backend.get_array_module(self.indices).arange(self.w_shape[0])[:, None] == self.padding_idx
            dw = xp.where(padding, 0, dw)
        return (dw,)


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` (num, dim) picked by integer indices `input` of any shape: (*input.shape, dim).
    The indices come first, as in torch.nn.functional.embedding; row padding_idx gets no gradient."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding: weight must be a tensor, got {type(weight).__name__}; the indices come first, "
                        "as in PyTorch: F.embedding(input, weight)")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be (num, dim), got shape {weight.shape}")
    if padding_idx is not None:
        padding_idx = padding_index("embedding", padding_idx, weight.shape[0])
    indices = indices_in_range("embedding", input, weight.device, weight.shape[0], "index")
    return saves_index(EmbeddingFunction.apply(weight, indices=indices, padding_idx=padding_idx), input)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """Integer class indices of any shape as int64 rows with a 1 at each index, (*tensor.shape, num_classes),
    as torch.nn.functional.one_hot; num_classes=-1: the largest index + 1. No gradient: integers."""
    indices = tensor if isinstance(tensor, Tensor) else core.TENSOR.leaf(tensor)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"one_hot: class indices must be integers, got dtype {indices.dtype}")
    if num_classes == -1:
        if indices.numel() == 0:
            raise ValueError("one_hot: an empty tensor has no largest index; pass num_classes")
        num_classes = int(indices.array.max()) + 1
    if num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be positive or -1, got {num_classes}")
    check_range("one_hot", indices.array, num_classes, "index")
    xp = backend.get_array_module(indices.array)
    return core.TENSOR.wrap((indices.array[..., None] == xp.arange(num_classes)).astype("int64"))

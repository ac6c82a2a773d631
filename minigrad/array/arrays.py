"""Helpers below Tensor, on raw backend arrays and plain arguments: the one converter `as_array`, dim and
shape arguments (PyTorch's dim=/keepdim=, NumPy's axis=/keepdims= as aliases), index and mask checks, and
the array formulas several ops share (unbroadcast, stable_softmax, stable_sigmoid, dropout_scale).
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from minigrad.array import backend
from minigrad.array.dtypes import DType, get_default_dtype, number_dtype, own_dtype

Array = backend.Array
Fn = TypeVar("Fn", bound=Callable[..., Any])
Dims = int | Sequence[int] | None

# ---- values into arrays ----

def as_array(value: Any, dtype: DType | None = None, device: str | None = None, op: str = "tensor",
             copy: bool = False) -> Array:
    """The one way values become a backend array: a tensor (its data), a NumPy or CuPy array, a number or a
    (nested) list, as `dtype` (default: its own; Python floats as float32, Python ints as int64, refused beyond it)
    on `device` (default: its own, or "cpu"); an array already so is the array itself unless copy=True. Anything
    that is not numbers (None, strings) is a TypeError naming `op`."""
    if hasattr(value, "requires_grad"):  # a Tensor (tensor.py sits above this module): its array
        value = value.array
    own = own_dtype(value, op)
    if own.kind not in "biuf":
        raise TypeError(f"{op}: expected numbers, got {type(value).__name__} {value!r:.60}, whose dtype {own} "
                        "is not a number type (bool, integer or float)")
    if dtype is not None:
        dtype = number_dtype(op, dtype)
    elif not hasattr(value, "dtype"):  # Python data: floats as float32, ints as int64 (NumPy would pick by size)
        dtype = get_default_dtype() if own.kind == "f" else own
    if device is None:
        device = backend.device_of(value) if hasattr(value, "dtype") else "cpu"
    xp = backend.module_for(device)
    if isinstance(value, (bool, int, float)):  # a Python number: filled in on the device, no host-to-device copy
        return xp.full((), value, dtype=dtype)
    data = backend.to_device(value, device) if hasattr(value, "dtype") else value
    return xp.array(data, dtype=dtype) if copy else xp.asarray(data, dtype=dtype)


_KIND_NAMES = {"b": "boolean", "i": "integer", "u": "integer", "f": "floating-point"}


def index_array(op: str, value: Any, device: str, kinds: str, moved: bool = True) -> Array:
    """An index, mask or target argument as an array with a dtype of one of `kinds`, on `device` (moved=False:
    left where it is, a list on the host). A tensor on another device is refused, as an input would be."""
    if hasattr(value, "requires_grad") and value.device != device:  # a Tensor on another device
        raise RuntimeError(f"{op}: tensor of shape {value.shape} is on {value.device}, input on {device}")
    array = as_array(value, None, device if moved else None, op)
    if array.dtype.kind not in kinds:
        expected = " or ".join(dict.fromkeys(_KIND_NAMES[k] for k in kinds))  # "iu": integer, once
        raise TypeError(f"{op}: expected {expected} values, got dtype {array.dtype}")
    return array


def indices_in_range(op: str, value: Any, device: str, n: int, what: str, ignore: int | None = None) -> Array:
    """Integer indices (token ids, targets) on `device`, refused if any lies outside [0, n) other than `ignore`.
    Indices from the host are checked there, before the copy, so a GPU step does not wait for the check."""
    indices = index_array(op, value, device, "iu", moved=False)
    check_range(op, indices, n, what, ignore)
    return backend.to_device(indices, device)


def check_range(op: str, indices: Array, n: int, what: str, ignore: int | None = None) -> None:
    """Refuse indices outside [0, n) here, rather than with an IndexError deep inside NumPy."""
    bad = (indices < 0) | (indices >= n)
    if ignore is not None:
        bad &= indices != ignore
    if bad.any():  # the one readback where the indices live on the GPU
        where = tuple(int(i[0]) for i in bad.nonzero())
        raise IndexError(f"{op}: {what} {int(indices[where])} at position {where} is out of range [0, {n})")



def padding_index(op: str, padding_idx: Any, n: int) -> int:
    """An embedding's padding_idx as a row in [0, n): an integer in [-n, n), negative ones counting from the end,
    as PyTorch's."""
    if isinstance(padding_idx, bool) or not hasattr(padding_idx, "__index__") or not -n <= padding_idx < n:
        raise ValueError(f"{op}: padding_idx must be an integer in [{-n}, {n - 1}] for {n} embeddings, "
                         f"got {padding_idx!r}")
    return int(padding_idx) % n

# ---- dim and shape arguments ----

_ALIASES = {"axis": ("dim", "dims"), "keepdims": ("keepdim",)}  # NumPy's name -> PyTorch's, whichever fn has


def numpy_aliases(fn: Fn) -> Fn:
    """fn, which takes PyTorch's dim= (or dims=) and keepdim=, also taking NumPy's axis= and keepdims=."""
    signature = inspect.signature(fn)
    renames = {numpy_name: name for numpy_name, names in _ALIASES.items()
               for name in names if name in signature.parameters}

    @functools.wraps(fn)
    def with_aliases(*args: Any, **kwargs: Any) -> Any:
        for numpy_name, name in renames.items():
            if numpy_name in kwargs:
                if name in kwargs or name in signature.bind_partial(*args).arguments:
                    raise TypeError(f"{fn.__name__}: got both {name} and {numpy_name} (NumPy's name for "
                                    f"{name}); give one")
                kwargs[name] = kwargs.pop(numpy_name)
        return fn(*args, **kwargs)

    return with_aliases  # type: ignore[return-value]


def as_axes(op: str, dim: Dims, shape: tuple[int, ...], *, one: bool = False) -> tuple[int, ...]:
    """`dim` (None: every axis; an int or ints, negative from the end) as a sorted tuple of axes of `shape`;
    one=True: one int only. A 0-d tensor takes dim 0 or -1, as in PyTorch: no axis."""
    if dim is None and not one:
        return tuple(range(len(shape)))
    dims = dim if isinstance(dim, (tuple, list)) and not one else (dim,)
    found = tuple(_in_range(op, d, len(shape) or 1, shape) for d in dims)  # 0-d: dim 0 or -1
    if len(set(found)) != len(found):
        raise ValueError(f"{op}: dims {found} name an axis twice")
    return tuple(sorted(found)) if shape else ()


def as_axis(op: str, dim: int, shape: tuple[int, ...], *, new: bool = False) -> int:
    """One int dim as an axis of `shape`; new=True: where a new axis goes (stack, unsqueeze), in [-ndim-1, ndim]."""
    return _in_range(op, dim, len(shape) + new, shape)


def _in_range(op: str, dim: int, n: int, shape: tuple[int, ...]) -> int:
    if not hasattr(dim, "__index__") or isinstance(dim, bool):  # an int: not 1.0, "0", None or True
        raise TypeError(f"{op}: dim must be one int, got {dim!r}")
    if not -n <= dim < n:
        raise ValueError(f"{op}: dim {dim!r} is out of range [{-n}, {n - 1}] for a tensor of shape {shape}")
    return dim % n


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of `shape` broadcasts to `target` unchanged (a mask to its input's shape)."""
    lead = len(target) - len(shape)
    return lead >= 0 and all(n in (1, target[lead + i]) for i, n in enumerate(shape))


def int_tuple(op: str, args: tuple) -> tuple[int, ...]:
    """f(2, 3) and f((2, 3)) both give (2, 3): shapes (zeros, reshape) and axes (permute), integers."""
    values = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    try:
        return tuple(map(operator.index, values))  # an int (NumPy's too), not 2.0, "2" or None
    except TypeError:
        raise TypeError(f"{op}: expected integers, got {values}") from None


# ---- array formulas several ops share ----

def unbroadcast(dx: Array, shape: tuple[int, ...]) -> Array:
    """The adjoint of broadcasting is summing: reduce dx back to the input's `shape`."""
    if dx.shape == shape:
        return dx
    lead = dx.ndim - len(shape)
    axes = list(range(lead))  # the axes broadcasting added in front, then those it stretched from 1
    for i, n in enumerate(shape):
        if n == 1 and dx.shape[lead + i] != 1:
            axes.append(lead + i)
    return dx.sum(axis=tuple(axes), keepdims=True).reshape(shape)


def as_rows(a: Array) -> Array:
    """(..., n) -> (N, n): the leading dimensions flattened into N rows (N spelled out: -1 fails for n = 0)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def stable_softmax(x: Array, axis: int, log: bool = False) -> Array:
    """softmax(x) = exp(x - max) / sum(exp(x - max)) along `axis`, or with log=True
    log_softmax(x) = (x - max) - log(sum(exp(x - max))), which stays finite where softmax underflows."""
    xp = backend.get_array_module(x)
    shifted = x - x.max(axis=axis, keepdims=True)  # changes neither result, but exp() can no longer overflow
    if log:
        return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
    exps = xp.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)


def stable_sigmoid(x: Array) -> Array:
    """1 / (1 + exp(-x)), computed from exp(-|x|) so that exp never overflows."""
    xp = backend.get_array_module(x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def dropout_scale(x: Array, p: float) -> Array:
    """keep / (1 - p), keep ~ Bernoulli(1 - p), an array like x (all 0 when p = 1): what dropout multiplies by."""
    keep = backend.generator(backend.device_of(x)).random(x.shape, dtype=x.dtype) >= p
    return keep * x.dtype.type(1 / (1 - p)) if p < 1 else keep.astype(x.dtype)


def row_sums(a: Array) -> Array:
    """Sums of the rows of a (N, L) as (N, 1), as one matrix-vector product with ones (speed: BLAS runs it
    several times faster than NumPy's sum along a short last axis; softmax, layer norm, cross-entropy and
    attention use it). A tensor (a backward's formula under create_graph=True) is summed as it is, recorded."""
    if type(a) not in backend.ARRAY_TYPES:
        return a.sum(axis=1, keepdims=True)
    return (a @ backend.get_array_module(a).ones(a.shape[1], dtype=a.dtype))[:, None]


def column_sums(a: Array) -> Array:
    """Sums of the columns of a (N, L) as (L,): ones @ a (speed: as row_sums; a tensor is summed as it is)."""
    if type(a) not in backend.ARRAY_TYPES:
        return a.sum(axis=0)
    return backend.get_array_module(a).ones(a.shape[0], dtype=a.dtype) @ a


def row_max(a: Array) -> Array:
    """Maxima of the rows of a (N, L) as (N, 1), exactly a.max(axis=1, keepdims=True) (speed: NumPy reduces a
    short last axis row by row; rows of up to 64 are reduced faster transposed, column by column)."""
    if a.shape[1] <= 64 and backend.device_of(a) == "cpu":
        return backend.get_array_module(a).ascontiguousarray(a.T).max(axis=0)[:, None]
    return a.max(axis=1, keepdims=True)


BLOCK = backend.BLOCK  # elements per block on the CPU (in_blocks reads it here: a test makes it smaller)


def in_blocks(fill: Callable[[Array, Array, Array | None], None], x: Array, slope: bool) -> tuple[Array, Array | None]:
    """An elementwise y = f(x) and, where `slope`, its derivative dy/dx (for a backward that is one
    multiplication), as fill(x_block, y_block, slope_block or None) writes them, block by block on the CPU while a
    block is in cache (speed: fewer passes over memory; docs/performance.md), all at once on the GPU."""
    xp = backend.get_array_module(x)
    x1 = x.reshape(-1)  # flat (a 0-d x too: NumPy makes scalars of 0-d results, which cannot be written into)
    y = xp.empty_like(x1)
    s = xp.empty_like(x1) if slope else None
    step = max(x1.size, 1) if backend.device_of(x) == "cuda" else BLOCK
    for start in range(0, x1.size, step):
        block = slice(start, start + step)
        fill(x1[block], y[block], None if s is None else s[block])
    return y.reshape(x.shape), None if s is None else s.reshape(x.shape)

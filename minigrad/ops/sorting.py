"""Ordering and counting, as torch.X and Tensor.X: sort and argsort (sort's values are x.gather's, so they carry the
gradient), repeat_interleave (an x.index_select), and outside the graph unique, searchsorted, bincount, histc and
histogram.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_array, as_axis, index_array
from minigrad.array.dtypes import check_float
from minigrad.core import Tensor

# ---- sort, argsort: the order outside the graph, the values gathered in it ----

class Sorted(NamedTuple):
    """What sort returns, as torch.return_types.sort: `values, indices = x.sort()`."""

    values: Tensor
    indices: Tensor


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort input along dim (int64), as torch.argsort: ascending, or descending; equal values keep
    their order (every sort here is stable, which PyTorch's stable=True promises)."""
    if input.ndim == 0:
        return core.TENSOR.wrap(backend.get_array_module(input.array).zeros((), dtype="int64"), False)
    d = as_axis("argsort", dim, input.shape)
    xp = backend.get_array_module(input.array)
    key = input.array
    if descending:  # sort -x ascending, stably: equal values stay in order, as PyTorch's stable descending sort
        key = -key if key.dtype.kind == "f" else -key.astype("int64")
    return core.TENSOR.wrap(xp.argsort(key, axis=d, kind="stable").astype("int64"), False)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Sorted:
    """(values, indices) of input sorted along dim, as torch.sort; the values are input's picked by gather, so the
    gradient flows back to the places they came from."""
    indices = argsort(input, dim, descending, stable)
    return Sorted(input if input.ndim == 0 else input.gather(dim, indices), indices)


# ---- repeat_interleave: an index_select ----

def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each element (or slice along dim) repeated `repeats` times (an int, or one count each), in place order, as
    torch.repeat_interleave; dim None: of the flattened input. repeat_interleave(counts) alone gives
    0 repeated counts[0] times, 1 repeated counts[1] times, ..."""
    xp = backend.get_array_module(input.array if isinstance(input, Tensor) else as_array(input))
    if repeats is None:  # torch.repeat_interleave(counts)
        counts = index_array("repeat_interleave", input, input.device, "iu")
        return core.TENSOR.wrap(xp.repeat(xp.arange(counts.shape[0] if counts.ndim else 1), counts.reshape(-1)), False)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = as_axis("repeat_interleave", dim, input.shape)
    counts = index_array("repeat_interleave", repeats, input.device, "iu").reshape(-1)
    if counts.size not in (1, input.shape[d]) or bool((counts < 0).any()):
        raise RuntimeError(f"repeat_interleave: repeats must be one non-negative count or one for each of the "
                           f"{input.shape[d]} elements along dim {dim}, got {counts.size} (shape {input.shape})")
    index = xp.repeat(xp.arange(input.shape[d]), counts if counts.size > 1 else int(counts[0]))
    if output_size is not None and output_size != index.shape[0]:
        raise RuntimeError(f"repeat_interleave: output_size {output_size} is not the {index.shape[0]} elements made")
    return input.index_select(d, index)


# ---- outside the graph: unique, searchsorted, counts and histograms ----

def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None) -> Tensor | tuple[Tensor, ...]:
    """The distinct values (sorted), or with dim the distinct slices along it, as torch.unique; with return_inverse
    where each element went, with return_counts how often each came."""
    xp = backend.get_array_module(input.array)
    axis = None if dim is None else as_axis("unique", dim, input.shape)
    values, inverse, counts = xp.unique(input.array, return_inverse=True, return_counts=True, axis=axis)
    shape = input.shape if axis is None else (input.shape[axis],)
    found = [core.TENSOR.wrap(values, False)]
    if return_inverse:
        found.append(core.TENSOR.wrap(inverse.reshape(shape).astype("int64"), False))
    if return_counts:
        found.append(core.TENSOR.wrap(counts.astype("int64"), False))
    return found[0] if len(found) == 1 else tuple(found)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Any = None) -> Tensor:
    """Where each value of input would go in sorted_sequence to keep it sorted (int64), as torch.searchsorted: the
    first such place, or with right=True (side="right") the last. A sequence of several dims is searched row by row,
    each with the same row of input."""
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            raise RuntimeError(f"searchsorted: side must be 'left' or 'right' (and agree with right={right}), "
                               f"got {side!r}")
        right = side == "right"
    seq = sorted_sequence.array
    if sorter is not None:
        seq = backend.get_array_module(seq).take_along_axis(seq, index_array("searchsorted", sorter, sorted_sequence
                                                                             .device, "iu"), axis=-1)
    values = as_array(input.array if isinstance(input, Tensor) else input, None, sorted_sequence.device, "searchsorted")
    xp = backend.get_array_module(seq)
    if seq.ndim > 1 and seq.shape[:-1] != values.shape[:-1]:
        raise RuntimeError(f"searchsorted: the leading dims of sorted_sequence {seq.shape} and of input "
                           f"{values.shape} must be the same")
    found = (xp.searchsorted(seq, values, side="right" if right else "left") if seq.ndim == 1 else
             xp.stack([xp.searchsorted(s, v, side="right" if right else "left")
                       for s, v in zip(seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1]),
                                       strict=True)]).reshape(values.shape))
    return core.TENSOR.wrap(found.astype("int32" if out_int32 else "int64"), False)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each of 0, 1, ..., max(input) occurs in a vector of non-negative ints (at least minlength counts),
    as torch.bincount; with weights, their sums instead (in the weights' float dtype, float64 for integer ones)."""
    counts = index_array("bincount", input, input.device, "iu")
    if counts.ndim != 1 or (counts.size and bool((counts < 0).any())):
        raise RuntimeError(f"bincount: expected a vector of non-negative integers, got shape {counts.shape}"
                           + (f" with minimum {int(counts.min())}" if counts.size else ""))
    xp = backend.get_array_module(counts)
    if weights is None:
        return core.TENSOR.wrap(xp.bincount(counts, minlength=minlength).astype("int64"), False)
    if weights.shape != counts.shape:
        raise RuntimeError(f"bincount: weights of shape {weights.shape} for input of shape {counts.shape}")
    dtype = weights.dtype if weights.dtype.kind == "f" else "float64"
    return core.TENSOR.wrap(xp.bincount(counts, weights=weights.array, minlength=minlength).astype(dtype), False)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """Counts of input's elements in `bins` equal bins over [min, max] (both 0: the data's own range), in input's
    float dtype, as torch.histc: elements outside are left out, max itself falls in the last bin."""
    dtype = check_float("histc", input)
    if bins <= 0 or min > max:
        raise RuntimeError(f"histc: bins ({bins}) must be positive and min ({min}) <= max ({max})")
    x = input.array.reshape(-1)
    xp = backend.get_array_module(x)
    if min == max and x.size:
        min, max = float(x.min()), float(x.max())
    if min == max:  # as PyTorch: a range of one value is widened by one each way
        min, max = min - 1, max + 1
    x = x[(x >= min) & (x <= max)]
    place = ((x - min) * bins / (max - min)).astype("int64")  # PyTorch's bin of each value
    place[place == bins] = bins - 1
    return core.TENSOR.wrap(xp.bincount(place, minlength=bins).astype(dtype), False)


def histogram(input: Tensor, bins: Any = 100, *, range: tuple[float, float] | None = None,
              weight: Tensor | None = None, density: bool = False) -> tuple[Tensor, Tensor]:
    """(hist, bin_edges) of input's elements in `bins` equal bins over `range` (default: the data's), or between the
    edges of a tensor `bins`, as torch.histogram (NumPy's histogram, in input's float dtype); weight: each element's
    weight instead of 1; density: normalised so the histogram integrates to 1."""
    dtype = check_float("histogram", input)
    xp = backend.get_array_module(input.array)
    edges = bins.array if isinstance(bins, Tensor) else bins
    hist, edges = xp.histogram(input.array.reshape(-1), bins=edges, range=range, density=density,
                               weights=None if weight is None else weight.array.reshape(-1))
    return core.TENSOR.wrap(hist.astype(dtype), False), core.TENSOR.wrap(edges.astype(dtype), False)

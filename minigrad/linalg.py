"""torch.linalg's norms, as mg.linalg: vector_norm, matrix_norm and norm, compositions of abs, powers, sums and maxima
(so their gradients are those ops'), with PyTorch's gradient of 0 where the norm is 0 (not the NaN that
d sqrt(s) / ds = inf times 0 would give). mg.norm and cdist (algebra.py) build on them.
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import elementwise, reductions
from minigrad.arrays import as_axes
from minigrad.dtypes import DType
from minigrad.tensor import Tensor

__all__ = ["matrix_norm", "norm", "vector_norm"]

Dims = int | tuple[int, ...] | list[int] | None


def _floating(op: str, x: Tensor, dtype: DType | None) -> Tensor:
    x = x if dtype is None else x.to(dtype)
    if x.dtype.kind != "f":
        raise RuntimeError(f"{op}: expected a floating point tensor as input, got {x.dtype} of shape {x.shape}")
    return x


def vector_norm(x: Tensor, ord: float = 2, dim: Dims = None, keepdim: bool = False, *,
                dtype: DType | None = None) -> Tensor:
    """(sum |x|^ord)^(1/ord) over dim (None: every element), as torch.linalg.vector_norm; ord inf: max |x|, -inf:
    min |x|, 0: how many are non-zero. Its gradient is 0 where the norm is 0, as PyTorch's."""
    x = _floating("linalg.vector_norm", x, dtype)
    if isinstance(ord, str) or isinstance(ord, bool):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    axes = as_axes("linalg.vector_norm", dim, x.shape)
    size = x.abs()
    if ord == math.inf:
        return reductions.amax(size, axes, keepdim)
    if ord == -math.inf:
        return reductions.amin(size, axes, keepdim)
    if ord == 0:
        return reductions.sum(elementwise.where(x != 0, 1.0, x * 0), axes, keepdim)  # in the graph, gradient 0
    if ord == 1:
        return reductions.sum(size, axes, keepdim)
    powers = reductions.sum(x * x if ord == 2 else size**ord, axes, keepdim)  # sum |x|^ord
    zero = powers == 0
    root = elementwise.where(zero, 1.0, powers) ** (1 / ord)  # no (1/ord) 0^(1/ord - 1) = inf where the norm is 0
    return elementwise.where(zero, 0.0, root)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1), keepdim: bool = False, *,
                dtype: DType | None = None) -> Tensor:
    """The norm of the matrices over the two dims, as torch.linalg.matrix_norm: "fro" (sqrt of the sum of squares),
    1 / -1 (the largest / smallest sum of |a| down a column), inf / -inf (along a row). 2, -2 and "nuc" need singular
    values, which minigrad does not compute: refused."""
    A = _floating("linalg.matrix_norm", A, dtype)
    rows, cols = as_axes("linalg.matrix_norm", tuple(dim), A.shape)
    if len(tuple(dim)) != 2 or rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dim must be two different dims, got {dim} (shape {A.shape})")
    rows, cols = (d % A.ndim for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        along, across = (rows, cols) if ord in (1, -1) else (cols, rows)  # 1: down each column, inf: along each row
        sums = reductions.sum(A.abs(), along, keepdim=True)
        pick = reductions.amax if ord > 0 else reductions.amin
        out = pick(sums, across, keepdim=True)
        return out if keepdim else out.squeeze((rows, cols))
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs the singular values (an SVD), which "
                                  "minigrad does not compute; use 'fro', 1, -1, inf or -inf")
    raise RuntimeError(f"linalg.matrix_norm: order {ord!r} not supported; use 'fro', 'nuc', 1, -1, 2, -2, inf, -inf")


def norm(A: Tensor, ord: Any = None, dim: Dims = None, keepdim: bool = False, *, dtype: DType | None = None) -> Tensor:
    """torch.linalg.norm: with ord None, the 2-norm of every element (or of a dim, or the Frobenius norm of two
    dims); with ord, a vector norm (a 1-D input or one dim) or a matrix norm (a 2-D input or two dims)."""
    dims = None if dim is None else tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if ord is None:
        return vector_norm(A, 2, dims, keepdim, dtype=dtype)
    if dims is None and A.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: with ord={ord!r} the input must be 1-D or 2-D (or give dim), got shape "
                           f"{A.shape}")
    if (dims is None and A.ndim == 2) or (dims is not None and len(dims) == 2):
        return matrix_norm(A, ord, dims or (-2, -1), keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: ord={ord!r} is a matrix norm; it needs a 2-D input or two dims")
    return vector_norm(A, ord, dims, keepdim, dtype=dtype)

"""Norms, products and distances as compositions of Tensor's ops (so their gradients are those ops'): torch.linalg's
vector_norm, matrix_norm and norm (mg.linalg gives them under those names), with PyTorch's gradient of 0 where a
norm is 0 (not the NaN that d sqrt(s) / ds = inf times 0 would give); and torch's einsum, diag, norm and cdist.
einsum lines its operands up by label and multiplies them, broadcast, before summing the labels that go (a product
over every label at once: fine for a program's small contractions, where matmul is the one for big ones).
"""

from __future__ import annotations

import math
import string
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_axes
from minigrad.array.dtypes import DType
from minigrad.core import Tensor

# ---- torch.linalg's norms (mg.linalg, minigrad/ops/linalg.py, gives them under their names there) ----

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
        return size.amax(axes, keepdim)
    if ord == -math.inf:
        return size.amin(axes, keepdim)
    if ord == 0:
        return (x * 0).where(x == 0, 1.0).sum(axes, keepdim)  # 1 for each non-zero, in the graph with gradient 0
    if ord == 1:
        return size.sum(axes, keepdim)
    powers = (x * x if ord == 2 else size**ord).sum(axes, keepdim)  # sum |x|^ord
    nonzero = powers != 0
    root = powers.where(nonzero, 1.0) ** (1 / ord)  # no (1/ord) 0^(1/ord - 1) = inf where the norm is 0
    return root.where(nonzero, 0.0)


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
        sums = A.abs().sum(along, keepdim=True)
        out = sums.amax(across, keepdim=True) if ord > 0 else sums.amin(across, keepdim=True)
        return out if keepdim else out.squeeze((rows, cols))
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs the singular values (an SVD), which "
                                  "minigrad does not compute; use 'fro', 1, -1, inf or -inf")
    raise RuntimeError(f"linalg.matrix_norm: order {ord!r} not supported; use 'fro', 'nuc', 1, -1, 2, -2, inf, -inf")


def linalg_norm(A: Tensor, ord: Any = None, dim: Dims = None, keepdim: bool = False, *,
                dtype: DType | None = None) -> Tensor:
    """torch.linalg.norm (mg.linalg.norm): with ord None, the 2-norm of every element (or of a dim, or the Frobenius
    norm of two dims); with ord, a vector norm (a 1-D input or one dim) or a matrix norm (a 2-D input or two dims)."""
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


# ---- einsum ----

def einsum(equation: str, *operands: Any) -> Tensor:
    """Sum of products over the labels of `equation`, as torch.einsum: "ij,jk->ik" is a matrix product,
    "bii->bi" the diagonals, "...ij->...ji" a transpose of the last two dims; without "->", the labels that occur
    once, in alphabetical order. The operands may come as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    inputs, output = _labels(equation.replace(" ", ""), operands)
    terms = [_diagonals(x, labels) for x, labels in zip(operands, inputs, strict=True)]
    every = output + "".join(sorted({c for _, labels in terms for c in labels} - set(output)))
    sizes: dict[str, int] = {}
    for x, labels in terms:
        for c, n in zip(labels, x.shape, strict=True):
            if sizes.setdefault(c, n) != n and 1 not in (n, sizes[c]):
                raise RuntimeError(f"einsum: label {c!r} is {sizes[c]} long in one operand and {n} in another "
                                   f"({equation})")
    product = None
    for x, labels in terms:  # each with every label's axis, in `every`'s order (1 where it has not the label)
        x = x.permute(*sorted(range(len(labels)), key=lambda i: every.index(labels[i])))
        x = x.reshape(*(x.shape[sorted(labels, key=every.index).index(c)] if c in labels else 1 for c in every))
        product = x if product is None else product * x
    summed = tuple(range(len(output), len(every)))
    return product.sum(summed) if summed else product


def _labels(equation: str, operands: tuple) -> tuple[list[str], str]:
    """Each operand's labels and the output's, with "..." spelt as capital letters (the dims it stands for, aligned
    from the right), and the output's labels where "->" is left out."""
    if not operands or not all(isinstance(x, Tensor) for x in operands):
        raise TypeError(f"einsum: expected tensors after the equation, got {[type(x).__name__ for x in operands]}")
    left, arrow, output = equation.partition("->")
    inputs = left.split(",")
    if len(inputs) != len(operands):
        raise RuntimeError(f"einsum: {equation!r} names {len(inputs)} operands, {len(operands)} were given")
    spare = string.ascii_uppercase[::-1]  # the ellipsis' dims: capitals, the last one for the last dim
    widths = []
    for labels, x in zip(inputs, operands, strict=True):
        named = len(labels.replace("...", ""))
        if not labels.replace("...", "").isalpha() or (named != x.ndim and "..." not in labels) or named > x.ndim:
            raise RuntimeError(f"einsum: the labels {labels!r} do not fit an operand of shape {x.shape}")
        widths.append(x.ndim - named if "..." in labels else 0)
    ellipsis = spare[:max(widths, default=0)][::-1]
    inputs = [labels.replace("...", ellipsis[len(ellipsis) - w:]) for labels, w in zip(inputs, widths, strict=True)]
    if not arrow:
        once = sorted(c for c in set("".join(inputs)) if "".join(inputs).count(c) == 1 and c not in ellipsis)
        output = ellipsis + "".join(once)
    output = output.replace("...", ellipsis)
    if len(set(output)) != len(output) or not set(output) <= set("".join(inputs)):
        raise RuntimeError(f"einsum: the output labels {output!r} must be distinct labels of the operands "
                           f"({equation})")
    return inputs, output


def _diagonals(x: Tensor, labels: str) -> tuple[Tensor, str]:
    """x with each label it repeats ("ii") taken once, along its diagonal, last."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i, j = labels.index(c), labels.index(c, labels.index(c) + 1)
        rest = [a for a in range(x.ndim) if a not in (i, j)]
        arange = backend.module_for(x.device).arange(min(x.shape[i], x.shape[j]))
        x = x.permute(*rest, i, j)[..., arange, arange]  # (*rest, diagonal)
        labels = "".join(labels[a] for a in rest) + c
    return x, labels


# ---- diag, norm, cdist ----

def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A vector's square matrix with the vector on its `diagonal` (above the main one where positive), or a matrix's
    `diagonal` as a vector, as torch.diag."""
    xp = backend.module_for(input.device)
    if input.ndim == 1:
        n = input.shape[0] + abs(diagonal)
        places = xp.arange(input.shape[0])
        flat = (places + max(-diagonal, 0)) * n + places + max(diagonal, 0)  # where (i, i + diagonal) lies, row-major
        return core.TENSOR.wrap(xp.zeros(n * n, dtype=input.dtype)).index_add(0, flat, input).reshape(n, n)
    if input.ndim != 2:
        raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {input.shape}")
    rows, cols = input.shape
    length = max(0, min(rows - max(-diagonal, 0), cols - max(diagonal, 0)))
    places = xp.arange(length)
    return input[places + max(-diagonal, 0), places + max(diagonal, 0)]


def norm(input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """torch.norm: p "fro" (the default) or a number is the vector p-norm of every element or of `dim` (two dims with
    "fro": the Frobenius norm, the same); "nuc" needs singular values, refused (linalg.matrix_norm says why)."""
    dims = None if dim is None else tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if p == "nuc":
        return matrix_norm(input, "nuc", dims or (-2, -1), keepdim, dtype=dtype)
    if isinstance(p, str) and p != "fro":
        raise RuntimeError(f"norm: p must be 'fro', 'nuc' or a number, got {p!r}")
    return vector_norm(input, 2 if p == "fro" else p, dims, keepdim, dtype=dtype)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R), as
    torch.cdist; its gradient is 0 where two rows are equal, as PyTorch's."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: expected x1 (..., P, M) and x2 (..., R, M) with the same M, got shapes "
                           f"{x1.shape} and {x2.shape}")
    if p < 0:
        raise RuntimeError(f"cdist: p must be non-negative, got {p}")
    differences = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (..., P, R, M)
    return vector_norm(differences, p, -1)

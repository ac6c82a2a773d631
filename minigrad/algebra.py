"""torch's einsum, diag, norm and cdist, as compositions of the ops (so their gradients are those ops'): einsum lines
its operands up by label and multiplies them, broadcast, before summing the labels that go (a product over every
label at once: fine for a program's small contractions, where matmul is the one for big ones); norm and cdist use
linalg.py's norms.
"""

from __future__ import annotations

import string
from typing import Any

from minigrad import backend, reductions
from minigrad.linalg import matrix_norm, vector_norm
from minigrad.shapes import getitem, permute, reshape, setitem
from minigrad.tensor import Tensor

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
        x = permute(x, *sorted(range(len(labels)), key=lambda i: every.index(labels[i])))
        x = reshape(x, *(x.shape[sorted(labels, key=every.index).index(c)] if c in labels else 1 for c in every))
        product = x if product is None else product * x
    summed = tuple(range(len(output), len(every)))
    return reductions.sum(product, summed) if summed else product


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
        x = getitem(permute(x, *rest, i, j), (Ellipsis, arange, arange))  # (*rest, diagonal)
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
        index = (places + max(-diagonal, 0), places + max(diagonal, 0))
        return setitem(Tensor.wrap(xp.zeros((n, n), dtype=input.dtype)), index, input)
    if input.ndim != 2:
        raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {input.shape}")
    rows, cols = input.shape
    length = max(0, min(rows - max(-diagonal, 0), cols - max(diagonal, 0)))
    places = xp.arange(length)
    return getitem(input, (places + max(-diagonal, 0), places + max(diagonal, 0)))


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

"""Matrix products: `a @ b` (numpy.matmul semantics, batch dims broadcast), bmm, dot and outer (made of matmul, so
their gradients are matmul's) and F.linear (x @ w^T + b, PyTorch's
weight layout), both computed by `product`, which arranges each for BLAS.
"""

from __future__ import annotations

from typing import Any

from minigrad.array import backend
from minigrad.array.arrays import as_rows, column_sums, unbroadcast
from minigrad.core import Tensor, namespace
from minigrad.ops import Primitive
from minigrad.ops.promotion import operands

# ---- the product all of them share ----

def product(a: Any, b: Any) -> Any:
    """a @ b, arranged for BLAS (speed: docs/performance.md measures both choices). For a matrix b (n, m), one
    (N, n) @ (n, m) product over a's flattened batch, not one per batch entry. For stacked matrices b, on the CPU,
    b's rows are made contiguous when they are not (b a transposed view, as K^T in attention): NumPy's stacked
    product takes up to twice as long with such a b as with a copy of it, the copy included. (Under mg.compiled(),
    the Functions' products run on the compiled kernels' threads: minigrad/speed/compiled_functions.py.)"""
    if b.ndim == 2:  # (tensors too, in a backward under create_graph=True)
        return (as_rows(a) @ b).reshape(*a.shape[:-1], b.shape[1])
    if backend.is_array(b) and b.strides[-1] != b.itemsize and backend.device_of(b) == "cpu":
        b = b.copy()
    return a @ b


# ---- matmul ----

class MatMul(Primitive):
    """z = a @ b (batch dims broadcast);  da = dout @ b^T,  db = a^T @ dout"""

    product = staticmethod(product)

    def forward(self, a, b):
        # da needs b and db needs a: keep only what backward will use (x @ W with x constant keeps no W)
        need_a, need_b = self.needs_input_grad or (False, False)
        self.a, self.b, self.a_shape, self.b_shape = (a if need_b else None), (b if need_a else None), a.shape, b.shape
        return self.product(a, b)

    def backward(self, dout):
        # in the forward pass this was: z = a @ b
        a, b = self.saved(self.a, 0), self.saved(self.b, 1)
        need_a, need_b = self.needs_input_grad
        if len(self.b_shape) == 2:  # speed: the 2-D product of forward, undone as 2-D products
            da = self.product(dout, b.T) if need_a else None  # (..., m) @ (m, n)
            db = self.product(as_rows(a).T, as_rows(dout)) if need_b else None  # (n, N) @ (N, m)
            return da, db
        xp = namespace(dout)
        da = unbroadcast(self.product(dout, xp.swapaxes(b, -1, -2)), self.a_shape) if need_a else None
        db = unbroadcast(self.product(xp.swapaxes(a, -1, -2), dout), self.b_shape) if need_b else None
        return da, db


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b as numpy.matmul: a 1-D operand is promoted to a matrix and that axis removed from the result."""
    a, b = operands("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least 1 dimension, got shapes {a.shape} and {b.shape}")
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a  # (n,) as the row (1, n)
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b  # (n,) as the column (n, 1)
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(
            f"matmul: shapes {a.shape} @ {b.shape}: inner dimensions {a2.shape[-1]} and {b2.shape[-2]} differ"
        )
    out = MatMul.apply(a2, b2)
    if a.ndim == 1:  # drop the row axis that the promotion added
        out = out.reshape(out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:  # and the column axis
        out = out.reshape(out.shape[:-1])
    return out


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product, as torch.bmm: (B, n, k) @ (B, k, m) -> (B, n, m), no broadcasting; matmul's."""
    a, b = operands("bmm", a, b)
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {a.shape} and {b.shape}")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"bmm: shapes {a.shape} and {b.shape} do not fit: expected the second of shape "
                           f"({a.shape[0]}, {a.shape[2]}, m)")
    return matmul(a, b)


def dot(a: Tensor, b: Tensor) -> Tensor:
    """The dot product of two 1-D tensors of one length, as torch.dot: a 0-d tensor; matmul's."""
    a, b = operands("dot", a, b)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"dot: 1-D tensors expected, got shapes {a.shape} and {b.shape}")
    if a.shape != b.shape:
        raise RuntimeError(f"dot: tensors of shapes {a.shape} and {b.shape} differ in length")
    return matmul(a, b)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """The outer product of two 1-D tensors, as torch.outer: (n,) and (m,) -> (n, m), a column @ a row; matmul's."""
    a, b = operands("outer", a, b)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: 1-D tensors expected, got shapes {a.shape} and {b.shape}")
    return matmul(a.reshape(a.shape[0], 1), b.reshape(1, b.shape[0]))


# ---- linear ----

class LinearFunction(Primitive):
    """y = x @ w^T + b  (x: (..., in), w: (out, in));  dx = dout @ w,  dw = dout^T @ x,  db = sum(dout)
    (dw and db summed over every leading axis of x, flattened into N rows)"""

    product = staticmethod(product)

    def forward(self, x, w, *b):
        need_x, need_w = (self.needs_input_grad or (False, False))[:2]
        self.x, self.w = (x if need_w else None), (w if need_x else None)  # dx needs w, dw needs x, db neither
        y = self.product(x, w.T)  # (..., out)
        if b:
            y += b[0]
        return y

    def backward(self, dout):
        # in the forward pass this was: y = x @ w.T + b, as (..., in) @ (in, out) + (out,); as_rows: (N, in)
        need_x, need_w, *has_b = self.needs_input_grad
        dx = self.product(dout, self.saved(self.w, 1)) if need_x else None  # (..., out) @ (out, in)
        dw = self.product(as_rows(dout).T, as_rows(self.saved(self.x, 0))) if need_w else None  # (out, N) @ (N, in)
        db = (column_sums(as_rows(dout)),) if has_b else ()  # (out,): summed over the N rows
        return (dx, dw, *db)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias, weight of shape (out, in) as in PyTorch."""
    if not isinstance(weight, Tensor) or (bias is not None and not isinstance(bias, Tensor)):
        raise TypeError(f"linear: weight must be a tensor and bias a tensor or None, got {type(weight).__name__} "
                        f"and {type(bias).__name__}")
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} does not fit weight {weight.shape} (out, in)")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias {bias.shape} does not fit weight {weight.shape}; expected ({weight.shape[0]},)")
    return LinearFunction.apply(x, weight) if bias is None else LinearFunction.apply(x, weight, bias)

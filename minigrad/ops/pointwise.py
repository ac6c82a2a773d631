"""More elementwise math as torch.X, beside elementwise.py: the other logarithms (log10, log2, log1p) and expm1, each
exact near its awkward point as NumPy's own, and the bitwise and logical operators (&, |, ^, ~ on bool and integer
tensors), which give tensors outside the graph. Tensor's methods and operators of the same names call these.
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.dtypes import as_float
from minigrad.core import Tensor
from minigrad.ops import Primitive
from minigrad.ops.promotion import operands

# ---- log10, log2, log1p, expm1 ----

class OtherLog(Primitive):
    """y = log10(x), log2(x) or log1p(x) = log(1 + x);  dx = dout / ((x + shift) * log(base)),
    shift 1 for log1p (else 0), log(base) log(10), log(2) or 1"""

    KINDS = {"log10": (0, math.log(10)), "log2": (0, math.log(2)), "log1p": (1, 1.0)}  # kind: (shift, log(base))

    def forward(self, x, kind):
        self.x, (self.shift, self.log_base) = x, self.KINDS[kind]
        return getattr(backend.get_array_module(x), kind)(x)

    def backward(self, dout):
        x = self.saved(self.x, 0)
        return (dout / ((x + self.shift) * self.log_base),)


class Expm1(Primitive):
    """y = exp(x) - 1, exact for small x;  dx = dout * (y + 1)"""

    def forward(self, x):
        self.y = backend.get_array_module(x).expm1(x)
        return self.y

    def backward(self, dout):
        return (dout * (self.saved(self.y, "output") + 1),)


def log10(x: Tensor) -> Tensor: return OtherLog.apply(as_float(x), kind="log10")
def log2(x: Tensor) -> Tensor: return OtherLog.apply(as_float(x), kind="log2")
def log1p(x: Tensor) -> Tensor: return OtherLog.apply(as_float(x), kind="log1p")
def expm1(x: Tensor) -> Tensor: return Expm1.apply(as_float(x))


# ---- bitwise and logical operators: tensors outside the graph ----

def _bitwise(op: str, a: Any, b: Any) -> Tensor:
    """a op b on bool or integer tensors (a Python bool or int takes the tensor's dtype), as PyTorch's &, |, ^."""
    a, b = operands(op, a, b)
    if "f" in (a.dtype.kind, b.dtype.kind):
        raise RuntimeError(f"{op}: defined on bool and integer tensors, got {a.dtype} and {b.dtype} (shapes {a.shape} "
                           f"and {b.shape}); compare floats first (x > 0) or use mg.logical_{op.split('_')[1]}")
    return core.TENSOR.wrap(getattr(backend.get_array_module(a.array), op)(a.array, b.array), False)


def bitwise_and(a: Any, b: Any) -> Tensor: return _bitwise("bitwise_and", a, b)
def bitwise_or(a: Any, b: Any) -> Tensor: return _bitwise("bitwise_or", a, b)
def bitwise_xor(a: Any, b: Any) -> Tensor: return _bitwise("bitwise_xor", a, b)


def bitwise_not(x: Tensor) -> Tensor:
    """~x: not of a bool tensor, the bits flipped of an integer one (~5 is -6), as PyTorch's."""
    if x.dtype.kind == "f":
        raise TypeError(f"bitwise_not: defined on bool and integer tensors, got {x.dtype} (shape {x.shape}); use "
                           "mg.logical_not for a float tensor")
    return core.TENSOR.wrap(backend.get_array_module(x.array).invert(x.array), False)


def _logical(op: str, a: Any, b: Any) -> Tensor:
    """a op b of the truth values (non-zero is True) of tensors of any dtype: a bool tensor."""
    a, b = operands(op, a, b)
    return core.TENSOR.wrap(getattr(backend.get_array_module(a.array), op)(a.array, b.array), False)


def logical_and(a: Any, b: Any) -> Tensor: return _logical("logical_and", a, b)
def logical_or(a: Any, b: Any) -> Tensor: return _logical("logical_or", a, b)
def logical_xor(a: Any, b: Any) -> Tensor: return _logical("logical_xor", a, b)
def logical_not(x: Tensor) -> Tensor:
    return core.TENSOR.wrap(backend.get_array_module(x.array).logical_not(x.array), False)

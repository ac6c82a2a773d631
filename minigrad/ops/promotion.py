"""Dtype promotion for the binary ops, as PyTorch promotes: `operands` turns the two operands of x + y, x * 0.5,
x @ w, ... into tensors of one dtype. Around the core, whose Function.apply refuses two dtypes in one op.
"""

from __future__ import annotations

from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.dtypes import get_default_dtype, number_kind

_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}  # bool < integer < float, as PyTorch promotes across kinds


def operands(op: str, a: Any, b: Any) -> tuple[core.Tensor, core.Tensor]:
    """Both operands of a binary op as tensors of one dtype, promoted across kinds as PyTorch does: a number takes the
    tensor's dtype (x * 0.5 stays float32) unless of a higher kind (int_tensor * 0.5 is float32); a tensor of a lower
    kind takes the other's (x * mask). float32 with float64 is refused by Function.apply, not promoted. A NumPy or
    CuPy array (of at least one axis: a 0-d one is a number) is a tensor outside the graph, as PyTorch takes one."""
    if getattr(a, "ndim", 0) and not isinstance(a, core.Tensor) and backend.is_array(a):
        a = core.TENSOR.wrap(a)
    if getattr(b, "ndim", 0) and not isinstance(b, core.Tensor) and backend.is_array(b):
        b = core.TENSOR.wrap(b)
    if isinstance(a, core.Tensor) and isinstance(b, core.Tensor):
        if _KIND_RANK[a.dtype.kind] < _KIND_RANK[b.dtype.kind]:
            a = a.to(b.dtype)
        elif _KIND_RANK[b.dtype.kind] < _KIND_RANK[a.dtype.kind]:
            b = b.to(a.dtype)
        return a, b
    if isinstance(a, core.Tensor):
        return _with_number(op, a, b)
    if isinstance(b, core.Tensor):
        b, a = _with_number(op, b, a)
        return a, b
    raise TypeError(f"{op}: expected a tensor operand, got {type(a).__name__} and {type(b).__name__}")


def _with_number(op: str, x: core.Tensor, value: Any) -> tuple[core.Tensor, core.Tensor]:
    """x and a Python or NumPy number as tensors of their common dtype; the number becomes one 0-d array, filled in
    where x lives (on the GPU a fill kernel takes the number as its argument: no host-to-device copy, as asarray
    would make)."""
    kind = number_kind(op, value)  # a bool, int or float, checked: fill below cannot misread it
    if _KIND_RANK[kind] > _KIND_RANK[x.dtype.kind]:
        x = x.to(get_default_dtype() if kind == "f" else "int64")  # the default for a number of a higher kind
    number = backend.get_array_module(x.array).empty((), dtype=x.dtype)
    number.fill(value)  # on the GPU a kernel that takes the number as its argument
    return x, core.TENSOR.wrap(number)

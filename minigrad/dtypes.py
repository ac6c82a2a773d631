"""The number types a tensor holds (bool, integers, floats), the default float, and the dtype rules
of the ops: what dtype a Python value has, which kind a number is, which ops need floats, and which
tensors may meet in one op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

DType = Any  # anything numpy.dtype() accepts: mg.float32, "float64", np.int64, ...

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

DEFAULT_FLOAT = float32  # what Python floats become, and what exp of an integer tensor gives


def number_dtype(op: str, dtype: DType) -> np.dtype:
    """`dtype` as a NumPy dtype if it is a number type (bool, integer, float); a TypeError naming `op` if not."""
    try:
        result = np.dtype(dtype) if dtype is not None else None  # np.dtype(None) would be float64
    except TypeError:
        result = None
    if result is None:
        raise TypeError(f"{op}: {dtype!r} is not a dtype")
    if result.kind not in "biuf":
        raise TypeError(f"{op}: dtype {result} is not a number type (bool, integer or float)")
    return result


def own_dtype(data: Any) -> np.dtype:
    """The dtype of an array or NumPy scalar, or the one NumPy gives Python data (a number, a list)."""
    if hasattr(data, "dtype"):
        return data.dtype
    if isinstance(data, bool):
        return np.dtype(np.bool_)
    if isinstance(data, (int, float)):  # of any size: NumPy would give 2**70 its object dtype
        return np.dtype(np.int64 if isinstance(data, int) else np.float64)
    return np.asarray(data).dtype  # only asked, then dropped: the real array is made on the device by _as_array


def number_kind(op: str, value: Any) -> str:
    """The dtype kind ("b", "i", "u" or "f") of a Python or NumPy number, 0-d array or 0-d tensor; a
    TypeError naming `op` for anything else (None, a string, a list)."""
    if isinstance(value, (bool, int, float)) or getattr(value, "ndim", None) == 0:
        if (kind := own_dtype(value).kind) in "biuf":
            return kind
    elif hasattr(value, "shape") or isinstance(value, (list, tuple)):
        shape = f" of shape {value.shape}" if hasattr(value, "shape") else ""
        raise TypeError(f"{op}: got a {type(value).__name__}{shape}; wrap it with mg.tensor() first")
    raise TypeError(f"{op}: expected a tensor or a number, got {type(value).__name__} {value!r:.40}")


def as_float(x: Any) -> Any:
    """Tensor x itself if it is floating point, else x as float32 (the default float): exp, log, ... and
    true division of integers give float32, as in PyTorch, not NumPy's float64."""
    return x if x.dtype.kind == "f" else x.to(DEFAULT_FLOAT)


def check_float(op: str, x: Any) -> None:
    """Refuse an integer or bool tensor where only floats make sense (mean, softmax, ...), as PyTorch does."""
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: needs a floating-point tensor, got {x.dtype}; convert with .to(mg.float32)")


def check_same_device_and_dtype(op: str, inputs: Sequence[Any]) -> None:
    """Refuse tensors of two dtypes (float32 with float64) in one op, rather than promote silently and fail
    in backward; likewise tensors on two devices. (Elementwise ops promote a lower kind first: see
    elementwise.as_operands.)"""
    if len({t.device for t in inputs}) > 1:
        where = ", ".join(f"{t.shape} on {t.device}" for t in inputs)
        raise RuntimeError(f"{op.lower()}: inputs are on different devices ({where}); move them with .to()")
    if len({t.dtype for t in inputs}) > 1:
        where = ", ".join(f"{t.shape} {t.dtype}" for t in inputs)
        raise TypeError(f"{op.lower()}: inputs have different dtypes ({where}); convert with .to(dtype)")

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
int32 = np.dtype("int32")
float16 = np.dtype("float16")  # torch.half: NumPy's IEEE half precision
uint8 = np.dtype("uint8")
int8 = np.dtype("int8")
int16 = np.dtype("int16")


class UnsupportedDType:
    """A dtype name PyTorch has and NumPy lacks (bfloat16): it exists, so that a program may name it, and making a
    tensor with it refuses in one line naming the alternative."""

    def __init__(self, name: str, alternative: str) -> None:
        self.name, self.alternative = name, alternative

    def __repr__(self) -> str:
        return f"minigrad.{self.name}"


bfloat16 = UnsupportedDType("bfloat16", "mg.float16 (IEEE half precision) or mg.float32")

_default_float = [float32]  # what Python floats become, what exp of an integer tensor gives, what zeros() makes


def get_default_dtype() -> np.dtype:
    """The default floating-point dtype (float32 unless set_default_dtype said otherwise), as torch's."""
    return _default_float[0]


def set_default_dtype(dtype: DType) -> None:
    """Make `dtype` (float32, float64 or float16) the default float, as torch.set_default_dtype: of Python floats made
    tensors, of exp(x) and x / y of integer tensors, and of zeros, ones, rand, randn, ... where no dtype is given.
    The nn layers keep their own float32 default (pass dtype= to a layer, or call model.to(dtype))."""
    chosen = number_dtype("set_default_dtype", dtype)
    if chosen.kind != "f":
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, got {chosen}")
    _default_float[0] = chosen


def default_or(op: str, dtype: DType | None) -> np.dtype:
    """`dtype` checked as a number type, or the default float where it is None."""
    return _default_float[0] if dtype is None else number_dtype(op, dtype)


def number_dtype(op: str, dtype: DType) -> np.dtype:
    """`dtype` as a NumPy dtype if it is a number type (bool, integer, float); a TypeError naming `op` if not."""
    if isinstance(dtype, UnsupportedDType):
        raise TypeError(f"{op}: dtype {dtype.name} is not supported here (NumPy has no {dtype.name}); "
                        f"use {dtype.alternative}")
    try:
        result = np.dtype(dtype) if dtype is not None else None  # np.dtype(None) would be float64
    except TypeError:
        result = None
    if result is None:
        raise TypeError(f"{op}: {dtype!r} is not a dtype")
    if result.kind not in "biuf":
        raise TypeError(f"{op}: dtype {result} is not a number type (bool, integer or float)")
    return result


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def own_dtype(data: Any, op: str = "tensor") -> np.dtype:
    """The dtype of an array or NumPy scalar, or the one NumPy gives Python data (a number, a list), where a Python int
    beyond int64 is a ValueError naming `op`, as in PyTorch (NumPy would make it an object, or round it to a float)."""
    if hasattr(data, "dtype"):
        return data.dtype
    if isinstance(data, bool):
        return np.dtype(np.bool_)
    if isinstance(data, int):
        _check_int64(op, data)
        return np.dtype(np.int64)
    if isinstance(data, float):
        return np.dtype(np.float64)
    own = np.asarray(data).dtype  # only asked, then dropped: the real array is made on the device by as_array
    if own.kind in "fOu":  # an int beyond int64: NumPy makes it uint64, rounds it to a float, or keeps an object
        try:
            with np.errstate(invalid="ignore"):  # floats convert with a warning at most
                np.asarray(data, dtype=np.int64)  # overflows on such an int, and on nothing else
        except OverflowError:
            numbers = list(_leaves(data))
            if any(isinstance(v, (float, np.floating)) for v in numbers):  # floats with a big int: floats, as torch
                return np.dtype(np.float64)
            for v in numbers:  # ints only: say which one is too big
                if isinstance(v, int) and not isinstance(v, bool):
                    _check_int64(op, v)
        except (TypeError, ValueError):  # not numbers: refused by the caller
            pass
    return own


def _check_int64(op: str, value: int) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{op}: overflow: the integer {value} does not fit in int64, the widest integer dtype here "
                         f"([{_INT64_MIN}, {_INT64_MAX}]); pass it as a float if that is what you mean")


def _leaves(data: Any) -> Any:
    """The numbers of nested lists and tuples."""
    if isinstance(data, (list, tuple)):
        for item in data:
            yield from _leaves(item)
    else:
        yield data


def number_kind(op: str, value: Any) -> str:
    """The dtype kind ("b", "i", "u" or "f") of a Python or NumPy number, 0-d array or 0-d tensor; a
    TypeError naming `op` for anything else (None, a string, a list)."""
    if isinstance(value, (bool, int, float)):  # of any size: x * 2**70 is fine for a float x
        return "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f"
    if getattr(value, "ndim", None) == 0:
        if (kind := own_dtype(value).kind) in "biuf":
            return kind
    elif hasattr(value, "shape") or isinstance(value, (list, tuple)):
        shape = f" of shape {value.shape}" if hasattr(value, "shape") else ""
        raise TypeError(f"{op}: got a {type(value).__name__}{shape}; wrap it with mg.tensor() first")
    raise TypeError(f"{op}: expected a tensor or a number, got {type(value).__name__} {value!r:.40}")


def as_float(x: Any) -> Any:
    """Tensor x itself if it is floating point, else x as the default float (float32): exp, log, ... and
    true division of integers give float32, as in PyTorch, not NumPy's float64."""
    return x if x.dtype.kind == "f" else x.to(_default_float[0])


def check_float(op: str, x: Any) -> np.dtype:
    """Refuse an integer or bool tensor where only floats make sense (mean, softmax, ...), as PyTorch does; else
    its dtype."""
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: needs a floating-point tensor, got {x.dtype} of shape {x.shape}; convert with "
                        ".to(mg.float32)")
    return x.dtype


def check_same_device_and_dtype(op: str, inputs: Sequence[Any]) -> None:
    """Refuse tensors of two dtypes (float32 with float64) in one op, rather than promote silently and fail
    in backward; likewise tensors on two devices. (Binary ops promote a lower kind first: see
    promotion.operands.)"""
    if len({t.device for t in inputs}) > 1:
        where = ", ".join(f"{t.shape} on {t.device}" for t in inputs)
        raise RuntimeError(f"{op.lower()}: inputs are on different devices ({where}); move them with .to()")
    if len({t.dtype for t in inputs}) > 1:
        where = ", ".join(f"{t.shape} {t.dtype}" for t in inputs)
        raise TypeError(f"{op.lower()}: inputs have different dtypes ({where}); convert with .to(dtype)")

"""Creating tensors, as PyTorch's functions of the same names: tensor (a copy), as_tensor and from_numpy (which share
an array's memory), zeros, ones, full, empty (zero-filled), eye, the *_like forms, arange, linspace, and the random
ones: rand, randn, randint and randperm, with rand_like and randn_like (each from the device's seeded generator, or
the `generator=` passed; multinomial, which draws from a tensor's rows, is in reductions.py). Each makes a new leaf,
on "cpu" unless `device` says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_array, int_tuple
from minigrad.array.dtypes import DType, default_or, get_default_dtype, int64, number_dtype
from minigrad.core import Tensor


def tensor(data: Any, requires_grad: bool = False, dtype: DType | None = None, device: str = "cpu") -> Tensor:
    """A new leaf tensor holding a copy of a list, scalar, array or tensor, as torch.tensor: writing into the source
    later changes nothing here. Python floats become float32."""
    return core.TENSOR.leaf(data, requires_grad=requires_grad, dtype=dtype, device=device)


def as_tensor(data: Any, dtype: DType | None = None, device: str | None = None) -> Tensor:
    """`data` as a tensor without a copy where it can be (as torch.as_tensor): a tensor of that dtype and device is
    returned itself, an array of that dtype and device is shared (a write into it shows here); else a copy."""
    if isinstance(data, Tensor) and (dtype is None or number_dtype("as_tensor", dtype) == data.dtype) \
            and (device is None or device == data.device):
        return data
    return core.TENSOR.leaf(data, dtype=dtype, device=device, copy=False)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor that shares the memory of a NumPy array, with its dtype (as torch.from_numpy): a write into either
    shows in the other. Writes through the array are not counted in the tensor's version."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    return core.TENSOR.leaf(array, copy=False)


def zeros(*shape: int, dtype: DType | None = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    data = backend.module_for(device).zeros(int_tuple("zeros", shape), dtype=default_or("zeros", dtype))
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def ones(*shape: int, dtype: DType | None = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    data = backend.module_for(device).ones(int_tuple("ones", shape), dtype=default_or("ones", dtype))
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def empty(*shape: int, dtype: DType | None = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """A tensor of `shape`, as torch.empty, whose values are not to be relied on: here it is zero-filled (zeros),
    where PyTorch's holds whatever its memory held."""
    data = backend.module_for(device).zeros(int_tuple("empty", shape), dtype=default_or("empty", dtype))
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def full(shape: int | Sequence[int], fill_value: float | bool, dtype: DType | None = None, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor of `shape` filled with `fill_value`; its dtype by default as PyTorch picks it: float32 for a
    float, int64 for an int, bool for a bool."""
    value = as_array(fill_value, dtype, device, "full")  # checks the dtype, and picks it when none is given
    if value.ndim != 0:
        raise TypeError(f"full: fill_value must be a number, got an array of shape {value.shape}")
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    data = backend.module_for(device).full(shape, value, dtype=value.dtype)
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def full_like(t: Tensor, fill_value: float | bool, *, dtype: DType | None = None, device: str | None = None,
              requires_grad: bool = False) -> Tensor:
    """A tensor of t's shape filled with `fill_value`, with t's dtype and device unless given."""
    return full(t.shape, fill_value, dtype=t.dtype if dtype is None else dtype,
                device=t.device if device is None else device, requires_grad=requires_grad)


def zeros_like(t: Tensor, *, dtype: DType | None = None, device: str | None = None,
               requires_grad: bool = False) -> Tensor:
    return full_like(t, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(t: Tensor, *, dtype: DType | None = None, device: str | None = None,
              requires_grad: bool = False) -> Tensor:
    return full_like(t, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(t: Tensor, *, dtype: DType | None = None, device: str | None = None,
               requires_grad: bool = False) -> Tensor:
    """A tensor of t's shape, as torch.empty_like, with t's dtype and device unless given; zero-filled here (empty)."""
    return of_shape_of(empty, t, dtype, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype: DType | None = None, device: str = "cpu",
        requires_grad: bool = False) -> Tensor:
    """The (n, m) identity matrix (m = n when not given): ones on the diagonal, zeros elsewhere."""
    data = backend.module_for(device).eye(n, m, dtype=default_or("eye", dtype))
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def randn(*shape: int, dtype: DType | None = None, device: str = "cpu", requires_grad: bool = False,
          generator: backend.Generator | None = None) -> Tensor:
    """Standard normal samples from the device's seeded generator (see mg.manual_seed), or from `generator`."""
    data = backend.generator(device, generator).standard_normal(int_tuple("randn", shape),
                                                                 dtype=floating("randn", dtype))
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def rand(*shape: int, dtype: DType | None = None, device: str = "cpu", requires_grad: bool = False,
         generator: backend.Generator | None = None) -> Tensor:
    """Samples from U(0, 1) from the device's seeded generator (see mg.manual_seed), or from `generator`."""
    data = backend.generator(device, generator).random(int_tuple("rand", shape), dtype=floating("rand", dtype))
    return core.TENSOR.wrap(data).requires_grad_(requires_grad)


def rand_like(t: Tensor, *, dtype: DType | None = None, device: str | None = None,
              requires_grad: bool = False) -> Tensor:
    """rand of t's shape, with t's dtype and device unless given (a floating-point dtype, as torch.rand_like)."""
    return of_shape_of(rand, t, dtype, device, requires_grad)


def randn_like(t: Tensor, *, dtype: DType | None = None, device: str | None = None,
               requires_grad: bool = False) -> Tensor:
    """randn of t's shape, with t's dtype and device unless given (a floating-point dtype, as torch.randn_like)."""
    return of_shape_of(randn, t, dtype, device, requires_grad)


def of_shape_of(make: Callable[..., Tensor], t: Tensor, dtype: DType | None, device: str | None,
                requires_grad: bool) -> Tensor:
    """make(*t.shape, ...) with t's dtype and device where none is given: the X_like functions."""
    return make(*t.shape, dtype=t.dtype if dtype is None else dtype, device=t.device if device is None else device,
                requires_grad=requires_grad)


def floating(op: str, dtype: DType) -> np.dtype:
    """dtype, checked to be floating point (the random normal and uniform samples are)."""
    dtype = default_or(op, dtype)
    if dtype.kind != "f":
        raise TypeError(f"{op}: dtype must be floating point, got {dtype}")
    return dtype


def randint(*args: Any, size: Sequence[int] | None = None, low: int | None = None, high: int | None = None,
            generator: backend.Generator | None = None, dtype: DType = int64, device: str = "cpu",
            requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from [low, high), as torch.randint: randint(high, size) or randint(low, high, size)
    (each also by keyword); int64 unless `dtype` says."""
    bounds = list(args)
    if size is None:
        if not bounds:
            raise TypeError("randint: missing the size, e.g. randint(10, (3,)) or randint(0, 10, size=(3,))")
        size = bounds.pop()
    bounds = ([] if low is None else [low]) + bounds + ([] if high is None else [high])
    if len(bounds) not in (1, 2):
        raise TypeError(f"randint: expected (high, size) or (low, high, size), got bounds {bounds} and size {size}")
    low, high = (0, *bounds) if len(bounds) == 1 else bounds
    if not low < high:
        raise RuntimeError(f"randint: low must be below high, got low={low} >= high={high}")
    data = backend.generator(device, generator).integers(low, high, int_tuple("randint", tuple(size)), dtype=int64)
    return core.TENSOR.wrap(data.astype(number_dtype("randint", dtype), copy=False)).requires_grad_(requires_grad)


def randperm(n: int, *, generator: backend.Generator | None = None, dtype: DType = int64, device: str = "cpu",
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0 .. n-1, as torch.randperm (the order of n uniform samples)."""
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    order = backend.generator(device, generator).random(n).argsort()
    return core.TENSOR.wrap(order.astype(number_dtype("randperm", dtype))).requires_grad_(requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: DType | None = None, device: str = "cpu",
             requires_grad: bool = False) -> Tensor:
    """`steps` values evenly spaced from start to end, both included, as torch.linspace: float32 unless `dtype` says
    (computed in float64, then converted)."""
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    data = backend.module_for(device).linspace(start, end, steps, dtype="float64")
    dtype = default_or("linspace", dtype)
    return core.TENSOR.wrap(data.astype(dtype)).requires_grad_(requires_grad)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: DType | None = None,
           device: str = "cpu") -> Tensor:
    """Like numpy.arange; integer arguments give int64, floats give float32 unless dtype says."""
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
        dtype = int64 if is_int else get_default_dtype()
    dtype = number_dtype("arange", dtype)
    return core.TENSOR.wrap(backend.module_for(device).arange(start, stop, step, dtype=dtype))

"""PyTorch's legacy tensor constructors, a layer of mg.Tensor: `Tensor(data)` (a float32 copy of a list or array),
`Tensor(2, 3)` (a float32 tensor of that size), FloatTensor, LongTensor, ..., and the type strings of
`x.type()` ('torch.FloatTensor'). The engine makes its own tensors with Tensor.leaf(...) (torch.tensor's meaning),
never with Tensor(...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_array

__all__ = ["BoolTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor", "LegacyConstructor", "LongTensor",
           "TensorType", "type_name"]

NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int", "int16": "Short",
         "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def type_name(dtype: np.dtype, device: str) -> str:
    """x.type() as PyTorch writes it: 'torch.FloatTensor', 'torch.cuda.LongTensor', ..."""
    return f"torch.{'cuda.' if device == 'cuda' else ''}{NAMES[np.dtype(dtype).name]}Tensor"


def legacy_array(name: str, dtype: np.dtype, args: tuple[Any, ...], device: str | None) -> Any:
    """What torch.Tensor(*args) holds: one sequence or array is data (a copy, as `dtype`), ints are a size (zeros:
    PyTorch leaves the memory uninitialised, here it is zero-filled), none an empty tensor; a tensor is handled by the
    caller."""
    if len(args) == 1 and not isinstance(args[0], int):
        data = args[0]
        if isinstance(data, (float, complex, np.generic)):
            raise TypeError(f"{name}(): data must be a sequence (got {type(data).__name__}); "
                            f"{name}([{data!r}]) holds it, mg.tensor({data!r}) makes a 0-d tensor")
        if isinstance(data, (str, bytes)) or data is None:
            raise TypeError(f"{name}(): invalid data type {type(data).__name__!r}")
        return as_array(data, dtype, None if device is None else backend.device(device).type, name, copy=True)
    sizes = args or (0,)  # Tensor(): an empty tensor, as PyTorch's
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) for s in sizes):
        raise TypeError(f"{name}(): expected data (a list or an array) or sizes (ints), got "
                        f"({', '.join(type(a).__name__ for a in args)})")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{name}(): trying to create a tensor with negative dimension: {list(sizes)}")
    return backend.module_for(backend.device(device or "cpu").type).zeros(tuple(int(s) for s in sizes), dtype=dtype)


class LegacyConstructor:
    """The constructor's part, a layer of mg.Tensor: Tensor(...) as torch.Tensor(...) is (see the module's
    docstring). The core's Tensor has no __init__ of its own: it makes leaves with init_leaf and leaf (torch.tensor's
    meaning), which this one calls."""

    def __init__(self, *args: Any, device: str | None = None) -> None:
        if len(args) == 1 and isinstance(args[0], core.Tensor):  # as PyTorch: the same memory, dtype and version
            self.init_leaf(args[0], device=device, copy=False)
        else:
            self.init_leaf(legacy_array("Tensor", np.dtype(np.float32), args, device), copy=False)


class TensorType:
    """torch.FloatTensor, torch.LongTensor, ...: called, a tensor of that dtype (data or sizes, as torch.Tensor(...));
    isinstance(x, mg.FloatTensor) asks for a CPU tensor of that dtype; x.type(mg.LongTensor) converts to it."""

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.__name__ = NAMES[self.dtype.name] + "Tensor"

    def __call__(self, *args: Any, device: str | None = None) -> core.Tensor:
        if len(args) == 1 and isinstance(args[0], core.Tensor):
            if args[0].dtype != self.dtype:
                raise TypeError(f"{self.__name__}(): expected a tensor of dtype {self.dtype}, got {args[0].dtype}; "
                                f"convert it with x.to(mg.{self.dtype.name})")
            return args[0]
        return core.TENSOR.wrap(legacy_array(self.__name__, self.dtype, args, device))

    def __instancecheck__(self, x: Any) -> bool:
        return isinstance(x, core.Tensor) and x.dtype == self.dtype and x.device == "cpu"

    def __repr__(self) -> str:
        return f"<class 'minigrad.{self.__name__}'>"


FloatTensor = TensorType(np.float32)
DoubleTensor = TensorType(np.float64)
HalfTensor = TensorType(np.float16)
LongTensor = TensorType(np.int64)
IntTensor = TensorType(np.int32)
BoolTensor = TensorType(np.bool_)
TYPES = {type_name(t.dtype, "cpu"): t for t in (FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor,
                                                BoolTensor)}

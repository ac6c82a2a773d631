"""A strict CuPy stand-in, so that the CUDA-parametrised tests run on a machine without a GPU.

    MINIGRAD_CUPY_STANDIN=1 pytest -m cuda        # docs/gpu.md: what it enforces, what it cannot

tests/conftest.py calls install() before minigrad is imported, which puts this module in sys.modules as `cupy`
(with `cupy.cuda`, `cupy.random`, `cupyx`, `cupyx.scipy.special`), so minigrad.array.backend imports it as it would
import CuPy. It lives under tests/ only: no user's code path can import it.

Its arrays hold NumPy arrays, but answer as CuPy's do, rule by rule; each rule names the CuPy documentation
it copies: [diff] "Differences between CuPy and NumPy" (user_guide/difference), [interop] "Interoperability"
(user_guide/interoperability), [ndarray] "The N-dimensional array (ndarray)" (reference/ndarray), and the
API reference page of the function. `ledger` counts what a GPU would pay for: device-to-host read-backs,
host-to-device copies, and the arrays and generators made on the device (a CPU run must make none).
"""

from __future__ import annotations

import builtins  # the module defines sum, all, any, max, ... as CuPy does: the built-ins by their full name
import math
import os
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

import numpy as np

ENV = "MINIGRAD_CUPY_STANDIN"
HERE = os.path.abspath(__file__)


class Ledger:
    """What the device was asked for since reset(): each read-back and host-to-device copy as "what at file:line"
    (the first caller outside this file and NumPy), and how many arrays and generators were made on it."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.read_backs: list[str] = []
        self.host_to_device: list[str] = []
        self.arrays = 0
        self.generators = 0

    def note(self, kind: list[str], what: str) -> None:
        for frame in reversed(traceback.extract_stack(limit=12)[:-1]):
            if os.path.abspath(frame.filename) != HERE and f"{os.sep}numpy{os.sep}" not in frame.filename:
                kind.append(f"{what} at {os.path.relpath(frame.filename)}:{frame.lineno}")
                return
        kind.append(what)


ledger = Ledger()


def _refuse_host_array(value: Any, where: str) -> None:
    # [diff] "Universal Functions only work with CuPy array or scalar": no lists, no numpy.ndarray; [ndarray]
    # "Conversion to/from NumPy arrays": "NumPy functions cannot take cupy.ndarrays as inputs, and vice versa"
    if isinstance(value, np.ndarray):
        raise TypeError(f"{where}: Unsupported type {type(value)} (a NumPy array on the host; cupy.asarray copies it)")
    if isinstance(value, (list, tuple)):
        for v in value:
            _refuse_host_array(v, where)


def _unwrap(value: Any, where: str) -> Any:
    """Arguments for the NumPy code that plays the device: stand-in arrays as their NumPy arrays (in lists and
    tuples too), host arrays refused."""
    if type(value) is ndarray:
        return value._a
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, where) for v in value)
    _refuse_host_array(value, where)
    return value


def _wrap(value: Any) -> Any:
    """Results as stand-in arrays; a NumPy scalar as a 0-d array, since "CuPy counterparts return zero-dimensional
    cupy.ndarrays" ([diff] "Zero-dimensional array / Reduction methods")."""
    if isinstance(value, np.ndarray):
        # [diff] "Data types": "Data type of CuPy arrays cannot be non-numeric like strings or objects"
        if value.dtype.kind not in "biufc":
            raise ValueError(f"Unsupported dtype {value.dtype}")
        out = object.__new__(ndarray)
        out._a = value
        ledger.arrays += 1
        return out
    if isinstance(value, np.generic):
        return _wrap(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


# reductions: CuPy's take no `initial` and no `where` (API reference: cupy.ndarray.max(axis=None, out=None,
# keepdims=False), cupy.sum(a, axis=None, dtype=None, out=None, keepdims=False), cupy.amax, ...)
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "all", "any", "nansum",
                        "nanmax", "nanmin", "argmax", "argmin", "ptp", "count_nonzero", "cumsum", "cumprod"})
# what makes an array whose size depends on the values: CuPy must read the count back first ([ndarray]
# cupy.nonzero: "synchronizes"; boolean-mask indexing reads the number of Trues, _routines_indexing.pyx)
SIZED_BY_VALUES = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress"})


def _check_options(name: str, kwargs: dict[str, Any]) -> None:
    base = name.rsplit(".", 1)[-1]
    if base in REDUCTIONS:
        for option in ("initial", "where"):
            if option in kwargs:
                raise TypeError(f"{name}() got an unexpected keyword argument '{option}' (CuPy's reductions take none)")


def _call(name: str, func: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """func (NumPy's) on the arrays' NumPy arrays, its result wrapped; an `out=` array is returned as itself."""
    _check_options(name, kwargs)
    out = kwargs.get("out")
    if out is not None and type(out) is not ndarray:
        raise TypeError(f"{name}: out must be a cupy.ndarray, got {type(out).__name__}")
    args, kwargs = _unwrap(args, name), {k: _unwrap(v, name) for k, v in kwargs.items()}
    if name.rsplit(".", 1)[-1] in SIZED_BY_VALUES:
        ledger.note(ledger.read_backs, f"{name}() (its size is read back)")
    result = func(*args, **kwargs)
    return out if out is not None else _wrap(result)


def _function(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def device_function(*args: Any, **kwargs: Any) -> Any:
        return _call(name, func, args, kwargs)

    device_function.__name__ = device_function.__qualname__ = name
    return device_function


class ufunc:
    """A CuPy ufunc: call, and the methods CuPy's ufuncs have (at, reduce, accumulate, reduceat, outer; API
    reference "Universal functions (cupy.ufunc)"), on stand-in arrays and scalars only ([diff] "Universal Functions
    only work with CuPy array or scalar")."""

    def __init__(self, np_ufunc: np.ufunc) -> None:
        self.np_ufunc, self.__name__ = np_ufunc, np_ufunc.__name__
        self.nin, self.nout = np_ufunc.nin, np_ufunc.nout

    def _run(self, method: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        name = self.__name__ if method == "__call__" else f"{self.__name__}.{method}"
        for a in args if method == "__call__" else ():
            if isinstance(a, (list, tuple)):
                raise TypeError(f"{name}: Unsupported type {type(a)}")
        if isinstance(kwargs.get("out"), tuple):  # NumPy hands __array_ufunc__ its out= as a tuple
            (kwargs["out"],) = kwargs["out"]
        return _call(name, self.np_ufunc if method == "__call__" else getattr(self.np_ufunc, method), args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run("__call__", args, kwargs)

    def at(self, a: ndarray, indices: Any, b: Any = None) -> None:
        """ufunc.at: unbuffered, in place; indices as for a[indices] (copied to the device, wrapped around)."""
        if type(a) is not ndarray:
            raise TypeError(f"{self.__name__}.at: Unsupported type {type(a)}")
        args = () if b is None else (_unwrap(b, f"{self.__name__}.at"),)
        self.np_ufunc.at(a._a, a._key(indices, f"{self.__name__}.at"), *args)

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in ("reduce", "accumulate", "reduceat", "outer"):
            raise AttributeError(f"cupy.ufunc has no attribute {method!r}")
        return lambda *args, **kwargs: self._run(method, args, kwargs)


class ndarray:
    """cupy.ndarray, as far as minigrad meets it. Its NumPy array is `_a`; nothing outside this file reads it."""

    __slots__ = ("_a", "__weakref__")

    def __init__(self, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None,
                 order: str = "C") -> None:
        self._a = np.empty(shape, dtype=dtype, order=order)  # cupy.ndarray(shape, dtype): uninitialised memory
        ledger.arrays += 1

    # no implicit conversion: [ndarray] "Conversion to/from NumPy arrays" ("not implicitly convertible"), and
    # cupy.ndarray.__array__ raises this very TypeError (np.asarray(x), np.array(x), np.float32(x) too)
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    # [interop] "NumPy": NumPy ufuncs on CuPy arrays run CuPy's (NEP 13), refusing a numpy.ndarray operand
    def __array_ufunc__(self, np_ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        mine = _UFUNCS.get(np_ufunc.__name__)
        if mine is None:
            return NotImplemented  # NumPy then raises TypeError: no CuPy ufunc of that name
        for x in (*inputs, *kwargs.get("out", ())):
            if isinstance(x, np.ndarray):
                raise TypeError(f"{np_ufunc.__name__}: Unsupported type {type(x)} (a NumPy array on the host)")
            if not (type(x) is ndarray or isinstance(x, (int, float, bool, complex, np.generic))):
                return NotImplemented
        return mine._run(method, inputs, kwargs)

    # [interop] "NumPy": NumPy's functions on CuPy arrays run CuPy's of the same name (NEP 18); where CuPy has none,
    # __array_function__ returns NotImplemented and NumPy raises TypeError
    def __array_function__(self, func: Any, types_: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        module = sys.modules[__name__]
        for part in func.__module__.split(".")[1:]:
            module = getattr(module, part, None)
        mine = getattr(module, func.__name__, None)
        if mine is None or mine is func or not builtins.all(issubclass(t, (ndarray, np.ndarray)) for t in types_):
            return NotImplemented
        return mine(*args, **kwargs)

    # ---- reading the values back to the host: each is counted (cupy.ndarray.__float__ is float(self.get()), item()
    # is self.get().item(), ...: a device-to-host copy that waits for the device)
    def get(self, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> np.ndarray:
        ledger.note(ledger.read_backs, "get()")
        return self._a.copy(order=order)

    def item(self) -> Any:
        if self._a.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        ledger.note(ledger.read_backs, "item()")
        return self._a.item()

    def tolist(self) -> Any:
        ledger.note(ledger.read_backs, "tolist()")
        return self._a.tolist()

    def __float__(self) -> float:
        ledger.note(ledger.read_backs, "float()")
        return float(self._a)

    def __int__(self) -> int:
        ledger.note(ledger.read_backs, "int()")
        return int(self._a)

    def __complex__(self) -> complex:
        ledger.note(ledger.read_backs, "complex()")
        return complex(self._a)

    def __bool__(self) -> bool:
        if self._a.size == 1:  # cupy.ndarray.__nonzero__: bool(self.get()) for one element
            ledger.note(ledger.read_backs, "bool()")
            return bool(self._a)
        if self._a.size == 0:
            return False
        raise ValueError("The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()")

    # no __index__: cupy.ndarray defines none, so range(x) and a list's [x] refuse a device integer

    def __repr__(self) -> str:  # repr(self.get()): a read-back as well
        ledger.note(ledger.read_backs, "repr()")
        return repr(self._a)

    __str__ = __repr__

    def set(self, arr: Any, stream: Any = None) -> None:
        """cupy.ndarray.set: copy a host array into this one (a host-to-device copy)."""
        if not isinstance(arr, np.ndarray) or arr.shape != self._a.shape:
            raise ValueError("Shape mismatch" if isinstance(arr, np.ndarray) else "arr must be a numpy.ndarray")
        ledger.note(ledger.host_to_device, f"set() of shape {arr.shape}")
        self._a[...] = arr

    # ---- what reads no values
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: _wrap(self._a.T))
    mT = property(lambda self: _wrap(self._a.mT))
    real = property(lambda self: _wrap(self._a.real))
    imag = property(lambda self: _wrap(self._a.imag))
    base = property(lambda self: None if self._a.base is None else _wrap(self._a.base))
    device = property(lambda self: cuda.Device(0))

    def __len__(self) -> int:
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self) -> Any:
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __getattr__(self, name: str) -> Any:
        if name not in METHODS:
            raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")
        method = getattr(self._a, name)
        return lambda *args, **kwargs: _call(f"ndarray.{name}", method, args, kwargs)

    # ---- indexing
    def _key(self, key: Any, what: str) -> Any:
        """`key` for the NumPy array: host arrays and lists copied to the device first, as CuPy does
        (_prepare_slice_list: core.array(s)); integer arrays wrapped around, as "CuPy wraps around" out-of-bounds
        indices ([diff] "Out-of-bounds indices"); a boolean mask read back, its number of Trues giving the shape."""
        parts = list(key) if isinstance(key, tuple) else [key]
        for i, s in enumerate(parts):
            if isinstance(s, (list, np.ndarray)):
                ledger.note(ledger.host_to_device, f"{what} with a host index of shape {np.shape(s)}")
                parts[i] = _wrap(np.asarray(s))
        used = builtins.sum(1 if type(s) is not ndarray else (s.ndim if s.dtype == bool else 1)
                   for s in parts if s is not None and s is not Ellipsis)
        axis, out = 0, []
        for s in parts:
            if s is Ellipsis:
                axis += self._a.ndim - used
            elif type(s) is ndarray and s.dtype == bool:
                ledger.note(ledger.read_backs, f"{what} with a boolean mask (its number of Trues)")
                s, axis = s._a, axis + s.ndim
            elif type(s) is ndarray:
                if s.dtype.kind not in "iu":
                    raise IndexError("arrays used as indices must be of integer or boolean type")
                s, axis = np.mod(s._a, self._a.shape[axis]) if self._a.shape[axis] else s._a, axis + 1
            elif s is not None:
                axis += 1
            out.append(s)
        return tuple(out) if isinstance(key, tuple) else out[0]

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._a[self._key(key, "x[index]")])

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, (np.ndarray, list)):
            ledger.note(ledger.host_to_device, f"x[index] = host values of shape {np.shape(value)}")
            value = np.asarray(value)
        self._a[self._key(key, "x[index] =")] = value._a if type(value) is ndarray else value

    # ---- arithmetic: CuPy's ufuncs; an operand that is neither a CuPy array nor a scalar is refused, or left to
    # its own reflected method where it opts out of NumPy's ufuncs (__array_ufunc__ = None, as minigrad's Tensor)
    def _binary(self, name: str, other: Any, reflected: bool = False, out: Any = None) -> Any:
        if getattr(type(other), "__array_ufunc__", False) is None:
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return _UFUNCS[name](a, b) if out is None else _UFUNCS[name](a, b, out=out)

    def __neg__(self) -> ndarray: return _UFUNCS["negative"](self)
    def __pos__(self) -> ndarray: return _UFUNCS["positive"](self)
    def __abs__(self) -> ndarray: return _UFUNCS["absolute"](self)
    def __invert__(self) -> ndarray: return _UFUNCS["invert"](self)
    def __matmul__(self, other: Any) -> Any: return self._binary("matmul", other)
    def __rmatmul__(self, other: Any) -> Any: return self._binary("matmul", other, True)
    def __copy__(self) -> ndarray: return _wrap(self._a.copy())


_OPERATORS = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide", "floordiv": "floor_divide",
              "mod": "remainder", "pow": "power", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
              "lshift": "left_shift", "rshift": "right_shift"}
for _op, _name in _OPERATORS.items():
    setattr(ndarray, f"__{_op}__", lambda self, other, _n=_name: self._binary(_n, other))
    setattr(ndarray, f"__r{_op}__", lambda self, other, _n=_name: self._binary(_n, other, True))
    setattr(ndarray, f"__i{_op}__", lambda self, other, _n=_name: self._binary(_n, other, out=self))
for _op, _name in {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
                   "ge": "greater_equal"}.items():
    setattr(ndarray, f"__{_op}__", lambda self, other, _n=_name: self._binary(_n, other))
ndarray.__hash__ = None  # as NumPy's and CuPy's arrays: unhashable

# the methods of cupy.ndarray (core.pyx) that NumPy's ndarray has too: called on the NumPy array, results wrapped
METHODS = frozenset({
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "clip", "conj", "conjugate", "copy",
    "cumprod", "cumsum", "diagonal", "dot", "fill", "flatten", "max", "mean", "min", "nonzero", "partition", "prod",
    "put", "ravel", "repeat", "reshape", "round", "sort", "squeeze", "std", "sum", "swapaxes", "take", "trace",
    "transpose", "var", "view"})

# CuPy's ufuncs (API reference "Universal functions (cupy.ufunc)": every name below is in cupy/__init__.py)
_UFUNC_NAMES = (
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "negative", "positive", "power",
    "remainder", "mod", "fmod", "absolute", "abs", "rint", "sign", "exp", "exp2", "log", "log2", "log10", "expm1",
    "log1p", "sqrt", "square", "cbrt", "reciprocal", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2",
    "hypot", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "logaddexp", "logaddexp2", "bitwise_and",
    "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift", "greater", "greater_equal", "less",
    "less_equal", "not_equal", "equal", "logical_and", "logical_or", "logical_xor", "logical_not", "maximum",
    "minimum", "fmax", "fmin", "isfinite", "isinf", "isnan", "signbit", "copysign", "nextafter", "floor", "ceil",
    "trunc", "matmul")
_UFUNCS = {name: ufunc(getattr(np, name)) for name in _UFUNC_NAMES}
_UFUNCS["absolute"] = _UFUNCS["abs"]

# CuPy's other functions that minigrad and its tests reach, each one exported by CuPy (its cupy/__init__.py); a NumPy
# function missing here is one CuPy lacks, or one nothing has needed yet: both are refused
_FUNCTION_NAMES = (
    "zeros", "ones", "empty", "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace",
    "eye", "identity", "tri", "tril", "triu", "diag", "ascontiguousarray", "copy", "concatenate", "stack",
    "vstack", "hstack", "split", "array_split", "broadcast_to", "broadcast_arrays", "expand_dims", "squeeze",
    "reshape", "ravel", "transpose", "swapaxes", "moveaxis", "flip", "roll", "repeat", "tile", "pad", "where",
    "clip", "take", "take_along_axis", "put_along_axis", "einsum", "dot", "vdot", "inner", "outer", "tensordot",
    "sum", "prod", "amax", "amin", "max", "min", "mean", "var", "std", "all", "any", "argmax", "argmin", "argsort",
    "sort", "cumsum", "cumprod", "diff", "count_nonzero", "nonzero", "flatnonzero", "argwhere", "unique", "allclose",
    "isclose", "array_equal", "may_share_memory", "shares_memory", "polyval", "nan_to_num", "around", "round",
    "result_type", "can_cast", "promote_types", "isscalar", "ndim", "shape", "size", "atleast_1d", "atleast_2d",
    "searchsorted", "bincount", "histogram", "unravel_index", "ravel_multi_index", "indices", "ix_")
for _name in _FUNCTION_NAMES:
    globals()[_name] = _function(_name, getattr(np, _name))


def _size_one_as_scalar(name: str, value: Any) -> Any:
    """copyto's source (and so full's value): a NumPy array of one element is taken as that scalar (API reference
    cupy.copyto: "non-scalar numpy.ndarray cannot be used"; one of size 1 is squeezed to its value)."""
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"{name}: non-scalar numpy.ndarray cannot be used for copyto")
        return value.squeeze()[()]
    return value


def copyto(dst: ndarray, src: Any, casting: str = "same_kind", where: Any = None) -> None:
    _call("copyto", np.copyto, (dst, _size_one_as_scalar("copyto", src)), {"casting": casting, "where": where})


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> ndarray:
    return _call("full", np.full, (shape, _size_one_as_scalar("full", fill_value)), {"dtype": dtype, "order": order})
globals().update(_UFUNCS)
linalg = types.SimpleNamespace(norm=_function("linalg.norm", np.linalg.norm))

# dtypes and constants are NumPy's own in CuPy ("CuPy scalar values (e.g. cupy.float32) are aliases of NumPy
# scalar values", [diff] "Zero-dimensional array")
for _name in ("bool_", "dtype", "e", "finfo", "float16", "float32", "float64", "floating", "iinfo", "inf", "int8",
              "int16", "int32", "int64", "integer", "nan", "newaxis", "number", "pi", "uint8", "uint32", "uint64"):
    globals()[_name] = getattr(np, _name)


def _host_data(a: Any, what: str) -> Any:
    """a as host data to copy (counted), or a stand-in array's NumPy array (no copy)."""
    if type(a) is ndarray:
        return a._a
    if isinstance(a, (list, tuple)) and builtins.any(type(v) is ndarray for v in a):
        return np.stack([_host_data(v, what) for v in a])  # cupy.array([x, y]) of device arrays: on the device
    ledger.note(ledger.host_to_device, f"{what} of shape {np.shape(a)}")
    return a


def array(obj: Any, dtype: Any = None, copy: bool = True, order: str = "K", subok: bool = False,
          ndmin: int = 0, blocking: bool = False) -> ndarray:
    """cupy.array: a new device array; from host data, a host-to-device copy."""
    return _wrap(np.array(_host_data(obj, "cupy.array()"), dtype=dtype, copy=True, order=order, ndmin=ndmin))


def asarray(a: Any, dtype: Any = None, order: Any = None, copy: Any = None, blocking: bool = False) -> ndarray:
    """cupy.asarray: `a` itself where it is a device array of that dtype; host data copied to the device."""
    if type(a) is ndarray and (dtype is None or np.dtype(dtype) == a.dtype) and copy is not True:
        return a
    return _wrap(np.array(_host_data(a, "cupy.asarray()"), dtype=dtype, order=order, copy=True))


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> np.ndarray:
    """cupy.asnumpy: a device array read back to the host (counted); host data as a NumPy array."""
    return a.get(order=order) if type(a) is ndarray else np.asarray(a, order=order)


def get_array_module(*args: Any) -> types.ModuleType:
    return sys.modules[__name__] if builtins.any(type(a) is ndarray for a in args) else np


# ---- cupy.random: only default_rng's Generator, with the methods CuPy's has (_generator_api.pyx: random, uniform,
# integers, standard_normal, ...; no normal, no choice)
class Generator:
    def __init__(self, seed: Any = None) -> None:
        self.rng = np.random.default_rng(seed)  # CuPy's draws differ from NumPy's; tests compare no draws across
        ledger.generators += 1

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> ndarray:
        return _wrap(self.rng.random(size, dtype=dtype))

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> ndarray:
        return _wrap(self.rng.standard_normal(size, dtype=dtype))

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None, dtype: Any = np.float64) -> ndarray:
        return _wrap(self.rng.uniform(low, high, size).astype(dtype))

    def integers(self, low: int, high: int | None = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False) -> ndarray:
        return _wrap(self.rng.integers(low, high, size, dtype=dtype, endpoint=endpoint))


random = types.ModuleType(f"{__name__}.random")
random.default_rng = Generator
random.Generator = Generator


# ---- cupy.cuda: one device; asking how many there are makes nothing on it
class CUDARuntimeError(RuntimeError):
    pass


class Device:
    def __init__(self, device: int = 0) -> None:
        if device != 0:
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
        self.id = device

    def synchronize(self) -> None:
        pass

    def use(self) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.id == self.id

    __hash__ = object.__hash__


cuda = types.ModuleType(f"{__name__}.cuda")
cuda.Device = Device
cuda.runtime = types.SimpleNamespace(
    getDeviceCount=lambda: 1, CUDARuntimeError=CUDARuntimeError,
    memGetInfo=lambda: (64 << 30, 80 << 30),  # (free, total) bytes, as cudaMemGetInfo
    runtimeGetVersion=lambda: 12080, getDeviceProperties=lambda device: {"name": b"CuPy stand-in (NumPy)"})
# no cupy.cuda.nccl: NCCL cannot be faked (`from cupy.cuda import nccl` raises ImportError, as where CuPy has none)


# ---- cupyx.scipy.special: erf and erfc, elementwise in the array's dtype (API reference cupyx.scipy.special.erf)
def _special(name: str, scalar: Callable[[float], float]) -> Callable[..., ndarray]:
    def f(x: Any) -> ndarray:
        if type(x) is not ndarray:
            raise TypeError(f"{name}: Unsupported type {type(x)}")
        dtype_ = x.dtype if x.dtype.kind == "f" else np.float64
        return _wrap(np.vectorize(scalar, otypes=[dtype_])(x._a))

    f.__name__ = name
    return f


cupyx = types.ModuleType("cupyx")
cupyx.scipy = types.ModuleType("cupyx.scipy")
cupyx.scipy.special = types.ModuleType("cupyx.scipy.special")
cupyx.scipy.special.erf = _special("erf", math.erf)
cupyx.scipy.special.erfc = _special("erfc", math.erfc)


def install() -> None:
    """Stand in for CuPy: `import cupy` (and cupyx) gives this module from now on, in this process. Call it before
    minigrad is imported (nothing to do where it is in place already, imported under another name)."""
    if getattr(sys.modules.get("cupy"), "ENV", None) == ENV:
        return
    if "minigrad" in sys.modules:
        raise RuntimeError(f"{ENV}=1, but minigrad was imported before the stand-in was installed: it would keep the "
                           "real CuPy (or none)")
    this = sys.modules[__name__]
    sys.modules.update({"cupy": this, "cupy.cuda": cuda, "cupy.random": random, "cupyx": cupyx,
                        "cupyx.scipy": cupyx.scipy, "cupyx.scipy.special": cupyx.scipy.special})


def active() -> bool:
    """Whether this run asks for the stand-in (MINIGRAD_CUPY_STANDIN=1)."""
    return os.environ.get(ENV) == "1"

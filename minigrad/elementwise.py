"""Elementwise math behind Tensor's operators: binary ops that broadcast (add, sub, mul, div, pow,
comparisons, maximum, minimum, where) and unary ops (neg, exp, log, sqrt, tanh, sigmoid, abs, rsqrt, sin,
cos, erf, clamp, and cast for Tensor.to).

Each primitive is a Function with forward and backward side by side and its derivative in the
docstring; the lowercase function below it is what Tensor's operators call. One `unbroadcast` serves
every binary op.
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import backend
from minigrad.dtypes import DEFAULT_FLOAT, as_float, check_same_device_and_dtype, number_kind
from minigrad.shapes import _aux_array
from minigrad.tensor import Function, Tensor, _as_array


def unbroadcast(dx: Any, shape: tuple[int, ...]) -> Any:
    """The adjoint of broadcasting is summing: reduce dx back to the input's `shape`."""
    if dx.shape == shape:
        return dx
    lead = dx.ndim - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and dx.shape[lead + i] != 1)
    return dx.sum(axis=tuple(range(lead)) + stretched, keepdims=True).reshape(shape)


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}  # bool < integer < float, as PyTorch promotes across kinds
_KIND_DEFAULT = {"u": "int64", "i": "int64", "f": DEFAULT_FLOAT}  # for a number of a higher kind than its tensor


def as_operands(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands as tensors of one dtype, promoted across kinds as PyTorch does: a Python number
    takes the tensor's dtype (`x * 0.5` stays float32) unless it is of a higher kind, which gives that
    kind's default (`int_tensor * 0.5` is float32); a tensor of a lower kind takes the other tensor's
    dtype (`x * mask`). Two tensors of one kind but different dtypes (float32 and float64) are
    refused by Function.apply, rather than promoted silently."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if _KIND_RANK[a.dtype.kind] < _KIND_RANK[b.dtype.kind]:
            a = a.to(b.dtype)
        elif _KIND_RANK[b.dtype.kind] < _KIND_RANK[a.dtype.kind]:
            b = b.to(a.dtype)
        return a, b
    if isinstance(a, Tensor):
        return _with_number(op, a, b)
    if isinstance(b, Tensor):
        b, a = _with_number(op, b, a)
        return a, b
    raise TypeError(f"{op}: expected a tensor operand, got {type(a).__name__} and {type(b).__name__}")


def _with_number(op: str, x: Tensor, value: Any) -> tuple[Tensor, Tensor]:
    """x and a Python or NumPy number as tensors of their common dtype; the number becomes one 0-d array."""
    kind = number_kind(op, value)
    dtype = x.dtype if _KIND_RANK[kind] <= _KIND_RANK[x.dtype.kind] else _KIND_DEFAULT[kind]
    return x.to(dtype), Tensor._wrap(_as_array(value, dtype, x.device, op), False)


# ---- elementwise: binary (broadcasting like NumPy) ----

class Add(Function):
    """z = a + b;  da = dout,  db = dout  (each summed back over the axes it was broadcast along)"""

    def forward(self, a, b):
        self.a_shape, self.b_shape = a.shape, b.shape
        return a + b

    def backward(self, dout):
        return unbroadcast(dout, self.a_shape), unbroadcast(dout, self.b_shape)


class Sub(Function):
    """z = a - b;  da = dout,  db = -dout"""

    def forward(self, a, b):
        self.a_shape, self.b_shape = a.shape, b.shape
        return a - b

    def backward(self, dout):
        db = unbroadcast(-dout, self.b_shape) if self.needs_input_grad[1] else None
        return unbroadcast(dout, self.a_shape), db


class Mul(Function):
    """z = a * b;  da = dout * b,  db = dout * a"""

    def forward(self, a, b):
        # da needs b and db needs a: keep only what backward will use (`scores * scale` keeps no scores)
        need_a, need_b = self.needs_input_grad or (False, False)
        self.a_shape, self.b_shape = a.shape, b.shape
        self.a, self.b = (a if need_b else None), (b if need_a else None)
        return a * b

    def backward(self, dout):
        da, db = self.needs_input_grad
        return (unbroadcast(dout * self.b, self.a_shape) if da else None,
                unbroadcast(dout * self.a, self.b_shape) if db else None)


class Div(Function):
    """z = a / b;  da = dout / b,  db = -dout * a / b**2 = -dout * z / b"""

    def forward(self, a, b):
        self.b = b
        self.z = a / b
        self.a_shape = a.shape
        return self.z

    def backward(self, dout):
        da = dout / self.b
        db = unbroadcast(-da * self.z, self.b.shape) if self.needs_input_grad[1] else None
        return unbroadcast(da, self.a_shape), db


class Pow(Function):
    """z = a ** b;  da = dout * b * a**(b - 1),  db = dout * z * log(a)

    At a = 0 the formulas meet 0 * inf. As in PyTorch: where b = 0, da = 0 (a**0 is constant), and
    where b >= 0, db = 0 (0**b does not change near such b).
    """

    def forward(self, a, b):
        self.a, self.b = a, b
        self.z = a**b
        return self.z

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        a, b = self.a, self.b
        need_a, need_b = self.needs_input_grad
        da = db = None
        if need_a:  # where b = 0, a**(b - 1) is replaced by 1**(b - 1), so b * ... = 0 even at a = 0
            da = unbroadcast(dout * b * xp.where(b == 0, 1, a) ** (b - 1), a.shape)
        if need_b:  # where a = 0 and b >= 0, log(a) is replaced by log(1) = 0
            db = unbroadcast(dout * self.z * xp.log(xp.where((a == 0) & (b >= 0), 1, a)), b.shape)
        return da, db


def add(a: Any, b: Any) -> Tensor: return Add.apply(*as_operands("add", a, b))
def sub(a: Any, b: Any) -> Tensor: return Sub.apply(*as_operands("sub", a, b))
def mul(a: Any, b: Any) -> Tensor: return Mul.apply(*as_operands("mul", a, b))
def div(a: Any, b: Any) -> Tensor: return Div.apply(*map(as_float, as_operands("div", a, b)))
def pow(a: Any, b: Any) -> Tensor: return Pow.apply(*as_operands("pow", a, b))


def compare(op: str, a: Tensor, b: Any) -> Tensor:
    """a < b, a == b, ...: a boolean tensor, outside the graph (comparisons have no gradient).

    a == b and a != b with a b that is neither a tensor, a number nor an array (None, a string, a list)
    give NotImplemented, so that Python answers False and True, as it does for PyTorch's tensors."""
    if op in ("eq", "ne") and not isinstance(b, (Tensor, bool, int, float)) and not hasattr(b, "dtype"):
        return NotImplemented
    a, b = as_operands(op, a, b)
    check_same_device_and_dtype(op, (a, b))
    ufunc = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal",
             "ne": "not_equal"}[op]
    return Tensor._wrap(getattr(backend.get_array_module(a.data), ufunc)(a.data, b.data), False)


# ---- elementwise: unary ----

class Neg(Function):
    """y = -x;  dx = -dout"""

    def forward(self, x):
        return -x

    def backward(self, dout):
        return (-dout,)


class Exp(Function):
    """y = exp(x);  dx = dout * y"""

    def forward(self, x):
        self.y = backend.get_array_module(x).exp(x)
        return self.y

    def backward(self, dout):
        return (dout * self.y,)


class Log(Function):
    """y = log(x);  dx = dout / x"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).log(x)

    def backward(self, dout):
        return (dout / self.x,)


class Sqrt(Function):
    """y = sqrt(x);  dx = dout / (2 y)"""

    def forward(self, x):
        self.y = backend.get_array_module(x).sqrt(x)
        return self.y

    def backward(self, dout):
        return (dout / (2 * self.y),)


class Tanh(Function):
    """y = tanh(x);  dx = dout * (1 - y**2)"""

    def forward(self, x):
        self.y = backend.get_array_module(x).tanh(x)
        return self.y

    def backward(self, dout):
        return (dout * (1 - self.y * self.y),)


class Cast(Function):
    """y = x as another dtype (Tensor.to);  dx = dout as x's dtype"""

    def forward(self, x, dtype):
        self.x_dtype = x.dtype
        return x.astype(dtype)

    def backward(self, dout):
        return (dout.astype(self.x_dtype),)


def neg(x: Tensor) -> Tensor: return Neg.apply(x)
def exp(x: Tensor) -> Tensor: return Exp.apply(as_float(x))
def log(x: Tensor) -> Tensor: return Log.apply(as_float(x))
def sqrt(x: Tensor) -> Tensor: return Sqrt.apply(as_float(x))
def tanh(x: Tensor) -> Tensor: return Tanh.apply(as_float(x))
def cast(x: Tensor, dtype: Any) -> Tensor: return Cast.apply(x, dtype=dtype)


# ---- more elementwise math: sigmoid, abs, rsqrt, sin, cos, erf, maximum, minimum, where, clamp ----

def _sigmoid(x: Any) -> Any:
    """1 / (1 + exp(-x)) on an array, computed from exp(-|x|) so that exp never overflows."""
    xp = backend.get_array_module(x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


class Sigmoid(Function):
    """y = 1 / (1 + exp(-x));  dx = dout * y * (1 - y)"""

    def forward(self, x):
        self.y = _sigmoid(x)
        return self.y

    def backward(self, dout):
        return (dout * self.y * (1 - self.y),)


class Abs(Function):
    """y = |x|;  dx = dout * sign(x)  (0 at x = 0, as PyTorch)"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).abs(x)

    def backward(self, dout):
        return (dout * backend.get_array_module(dout).sign(self.x),)


class Rsqrt(Function):
    """y = 1 / sqrt(x);  dx = -dout * y**3 / 2"""

    def forward(self, x):
        xp = backend.get_array_module(x)
        self.y = 1 / xp.sqrt(x)
        return self.y

    def backward(self, dout):
        return (dout * self.y**3 * -0.5,)


class Sin(Function):
    """y = sin(x);  dx = dout * cos(x)"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).sin(x)

    def backward(self, dout):
        return (dout * backend.get_array_module(dout).cos(self.x),)


class Cos(Function):
    """y = cos(x);  dx = -dout * sin(x)"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).cos(x)

    def backward(self, dout):
        return (-dout * backend.get_array_module(dout).sin(self.x),)


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


class Erf(Function):
    """y = erf(x) = 2/sqrt(pi) * integral of exp(-t^2) from 0 to x;  dx = dout * 2/sqrt(pi) * exp(-x^2)

    The values come from backend.erf (NumPy has no erf; see there how it is computed)."""

    def forward(self, x):
        self.x = x
        return backend.erf(x)

    def backward(self, dout):
        return (dout * _TWO_OVER_SQRT_PI * backend.get_array_module(dout).exp(-self.x * self.x),)


def sigmoid(x: Tensor) -> Tensor: return Sigmoid.apply(as_float(x))
def abs(x: Tensor) -> Tensor: return Abs.apply(x)
def rsqrt(x: Tensor) -> Tensor: return Rsqrt.apply(as_float(x))
def sin(x: Tensor) -> Tensor: return Sin.apply(as_float(x))
def cos(x: Tensor) -> Tensor: return Cos.apply(as_float(x))
def erf(x: Tensor) -> Tensor: return Erf.apply(as_float(x))


class Maximum(Function):
    """z = maximum(a, b);  da = dout where z == a, db = dout - da; where a == b each gets dout / 2 (as PyTorch)"""

    pick = "maximum"  # Minimum differs only here: the backward reads the choice off z

    def forward(self, a, b):
        self.a, self.b = a, b
        self.z = getattr(backend.get_array_module(a), self.pick)(a, b)
        return self.z

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        da = xp.where(self.a == self.b, dout * 0.5, dout * (self.z == self.a))
        return unbroadcast(da, self.a.shape), unbroadcast(dout - da, self.b.shape)


class Minimum(Maximum):
    """z = minimum(a, b);  da = dout where z == a, db = dout - da; where a == b each gets dout / 2 (as PyTorch)"""

    pick = "minimum"


class Where(Function):
    """z = a where cond else b;  da = dout where cond else 0,  db = dout where not cond else 0"""

    def forward(self, a, b, cond):
        self.cond, self.a_shape, self.b_shape = cond, a.shape, b.shape
        return backend.get_array_module(a).where(cond, a, b)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        need_a, need_b = self.needs_input_grad
        da = unbroadcast(xp.where(self.cond, dout, 0), self.a_shape) if need_a else None
        db = unbroadcast(xp.where(self.cond, 0, dout), self.b_shape) if need_b else None
        return da, db


class Clamp(Function):
    """y = min(max(x, low), high);  dx = dout where low <= x <= high, else 0 (the bounds let it through, as
    PyTorch). A bound of None is no bound; the bounds are numbers and get no gradient."""

    def forward(self, x, low, high):
        xp = backend.get_array_module(x)
        self.inside = (x >= (-math.inf if low is None else low)) & (x <= (math.inf if high is None else high))
        return xp.clip(x, low, high)

    def backward(self, dout):
        return (dout * self.inside,)


def maximum(a: Any, b: Any) -> Tensor: return Maximum.apply(*as_operands("maximum", a, b))
def minimum(a: Any, b: Any) -> Tensor: return Minimum.apply(*as_operands("minimum", a, b))


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """`input` where the boolean `condition` is True, else `other`; all three broadcast (torch.where)."""
    a, b = as_operands("where", input, other)
    cond = _aux_array("where", condition, a, "b")
    return Where.apply(a, b, cond=cond)


def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Limit x to [min, max] (torch.clamp; torch.clip is the same). The bounds are numbers: for tensor
    bounds use mg.maximum and mg.minimum, which share the gradient on ties instead."""
    if min is None and max is None:
        raise ValueError("clamp: give at least one of min and max")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        raise TypeError("clamp: the bounds must be numbers; for tensor bounds use mg.maximum and mg.minimum")
    if any(v is not None and number_kind("clamp", v) == "f" for v in (min, max)):
        x = as_float(x)  # int_tensor.clamp(0.5) is float32, as in PyTorch
    low, high = (None if v is None else _as_array(v, x.dtype, x.device, "clamp") for v in (min, max))
    return Clamp.apply(x, low=low, high=high)


clip = clamp

"""Elementwise math behind Tensor's operators, as torch.X: binary ops that broadcast (add ... pow, comparisons,
maximum, minimum, where, masked_fill) and unary ones (neg, exp, log, sqrt, tanh, sigmoid, abs, ..., clamp, and
cast for Tensor.to). Each Function has its derivative in its docstring; one `unbroadcast` serves every binary op.
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_array, broadcasts_to, index_array, stable_sigmoid, unbroadcast
from minigrad.array.dtypes import as_float, check_same_device_and_dtype, number_kind
from minigrad.autograd.versions import saves_index
from minigrad.core import Tensor, namespace
from minigrad.ops import Primitive
from minigrad.ops.promotion import operands

# ---- elementwise: binary (broadcasting like NumPy) ----

class Add(Primitive):
    """z = a + b;  da = dout,  db = dout  (each summed back over the axes it was broadcast along)"""

    def forward(self, a, b):
        self.a_shape, self.b_shape = a.shape, b.shape
        return a + b

    def backward(self, dout):
        return unbroadcast(dout, self.a_shape), unbroadcast(dout, self.b_shape)


class Sub(Primitive):
    """z = a - b;  da = dout,  db = -dout"""

    def forward(self, a, b):
        self.a_shape, self.b_shape = a.shape, b.shape
        return a - b

    def backward(self, dout):
        da = unbroadcast(dout, self.a_shape)
        db = unbroadcast(-dout, self.b_shape) if self.needs_input_grad[1] else None
        return da, db


class Mul(Primitive):
    """z = a * b;  da = dout * b,  db = dout * a"""

    def forward(self, a, b):
        # da needs b and db needs a: keep only what backward will use (`scores * scale` keeps no scores)
        need_a, need_b = self.needs_input_grad or (False, False)
        self.a_shape, self.b_shape = a.shape, b.shape
        self.a, self.b = (a if need_b else None), (b if need_a else None)
        return a * b

    def backward(self, dout):
        need_a, need_b = self.needs_input_grad
        da = unbroadcast(dout * self.saved(self.b, 1), self.a_shape) if need_a else None
        db = unbroadcast(dout * self.saved(self.a, 0), self.b_shape) if need_b else None
        return da, db


class Div(Primitive):
    """z = a / b;  da = dout / b,  db = -dout * a / b**2 = -dout * z / b"""

    def forward(self, a, b):
        z = a / b
        self.b, self.a_shape = b, a.shape
        self.z = z if self.needs_input_grad and self.needs_input_grad[1] else None  # only db needs z (x / 2 keeps none)
        return z

    def backward(self, dout):
        da = dout / self.saved(self.b, 1)
        db = unbroadcast(-da * self.saved(self.z, "output"), self.b.shape) if self.needs_input_grad[1] else None
        return unbroadcast(da, self.a_shape), db


class Pow(Primitive):
    """z = a ** b;  da = dout * b * a**(b - 1),  db = dout * z * log(a)

    At a = 0 the formulas meet 0 * inf. As in PyTorch: where b = 0, da = 0 (a**0 is constant), and
    where b >= 0, db = 0 (0**b does not change near such b).
    """

    def forward(self, a, b):
        z = a**b
        self.a, self.b = a, b
        self.z = z if self.needs_input_grad and self.needs_input_grad[1] else None  # only db needs z
        return z

    def backward(self, dout):
        xp = namespace(dout)
        a, b = self.saved(self.a, 0), self.saved(self.b, 1)
        need_a, need_b = self.needs_input_grad
        da = db = None
        if need_a:  # where b = 0, a**(b - 1) is replaced by 1**(b - 1), so b * ... = 0 even at a = 0
            da = unbroadcast(dout * b * xp.where(self.b == 0, 1, a) ** (b - 1), self.a.shape)
        if need_b:  # where a = 0 and b >= 0, log(a) is replaced by log(1) = 0
            log_a = xp.log(xp.where((self.a == 0) & (self.b >= 0), 1, a))
            db = unbroadcast(dout * self.saved(self.z, "output") * log_a, self.b.shape)
        return da, db


def add(a: Any, b: Any) -> Tensor: return Add.apply(*operands("add", a, b))
def sub(a: Any, b: Any) -> Tensor: return Sub.apply(*operands("sub", a, b))
def mul(a: Any, b: Any) -> Tensor: return Mul.apply(*operands("mul", a, b))
def div(a: Any, b: Any) -> Tensor: return Div.apply(*map(as_float, operands("div", a, b)))
def pow(a: Any, b: Any) -> Tensor: return Pow.apply(*operands("pow", a, b))


def compare(op: str, a: Tensor, b: Any) -> Tensor:
    """a < b, a == b, ...: a boolean tensor outside the graph. == and != with a b that is no tensor, number or
    array (None, a string) give NotImplemented, so that Python answers False and True, as for PyTorch's."""
    if op in ("eq", "ne") and not isinstance(b, (Tensor, bool, int, float)) and not hasattr(b, "dtype"):
        return NotImplemented
    a, b = operands(op, a, b)
    check_same_device_and_dtype(op, (a, b))
    ufunc = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal",
             "ne": "not_equal"}[op]
    return core.TENSOR.wrap(getattr(backend.get_array_module(a.array), ufunc)(a.array, b.array), False)


def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol * |b| elementwise (equal infinities too), as torch.isclose: a boolean tensor outside
    the graph; a and b broadcast and must have one dtype. NaN is close to NaN only with equal_nan=True."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"isclose: expected tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"isclose: expected both tensors to have one dtype, got {a.dtype} and {b.dtype}")
    if rtol < 0 or atol < 0:
        raise RuntimeError(f"isclose: rtol and atol must be non-negative, got rtol={rtol} and atol={atol}")
    check_same_device_and_dtype("isclose", (a, b))
    xp = backend.get_array_module(a.array)
    return core.TENSOR.wrap(xp.isclose(a.array, b.array, rtol=rtol, atol=atol, equal_nan=equal_nan), False)


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element of a is close to b's (isclose), as torch.allclose: a Python bool."""
    return bool(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).array.all())


def equal(a: Tensor, b: Tensor) -> bool:
    """Whether a and b have one shape and equal elements, as torch.equal: a Python bool (no broadcasting;
    values compared across dtypes, NaN equal to nothing)."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"equal: expected tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.device != b.device:
        raise RuntimeError(f"equal: tensors on {a.device} and {b.device}; move one to the other's device")
    return a.shape == b.shape and bool(backend.get_array_module(a.array).array_equal(a.array, b.array))


# ---- elementwise: unary ----

class Neg(Primitive):
    """y = -x;  dx = -dout"""

    def forward(self, x):
        return -x

    def backward(self, dout):
        return (-dout,)


class Exp(Primitive):
    """y = exp(x);  dx = dout * y"""

    def forward(self, x):
        self.y = backend.get_array_module(x).exp(x)
        return self.y

    def backward(self, dout):
        return (dout * self.saved(self.y, "output"),)


class Log(Primitive):
    """y = log(x);  dx = dout / x"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).log(x)

    def backward(self, dout):
        return (dout / self.saved(self.x, 0),)


class Sqrt(Primitive):
    """y = sqrt(x);  dx = dout / (2 y)"""

    def forward(self, x):
        self.y = backend.get_array_module(x).sqrt(x)
        return self.y

    def backward(self, dout):
        return (dout / (2 * self.saved(self.y, "output")),)


class Tanh(Primitive):
    """y = tanh(x);  dx = dout * (1 - y**2)"""

    def forward(self, x):
        self.y = backend.get_array_module(x).tanh(x)
        return self.y

    def backward(self, dout):
        y = self.saved(self.y, "output")
        return (dout * (1 - y * y),)


class Clone(Primitive):
    """y = a copy of x in new memory (Tensor.clone);  dx = dout"""

    def forward(self, x):
        return x.copy()

    def backward(self, dout):
        return (dout,)


class Cast(Primitive):
    """y = x as another dtype (Tensor.to);  dx = dout as x's dtype"""

    def forward(self, x, dtype):
        self.x_dtype = x.dtype
        return x.astype(dtype)

    def backward(self, dout):
        return (namespace(dout).astype(dout, self.x_dtype),)


def neg(x: Tensor) -> Tensor: return Neg.apply(x)
def exp(x: Tensor) -> Tensor: return Exp.apply(as_float(x))
def log(x: Tensor) -> Tensor: return Log.apply(as_float(x))
def sqrt(x: Tensor) -> Tensor: return Sqrt.apply(as_float(x))
def tanh(x: Tensor) -> Tensor: return Tanh.apply(as_float(x))
def cast(x: Tensor, dtype: Any) -> Tensor: return Cast.apply(x, dtype=dtype)
def clone(x: Tensor) -> Tensor: return Clone.apply(x)


# ---- more elementwise math: sigmoid, abs, rsqrt, sin, cos, erf, maximum, minimum, where, clamp ----

class Sigmoid(Primitive):
    """y = 1 / (1 + exp(-x));  dx = dout * y * (1 - y)"""

    def forward(self, x):
        self.y = stable_sigmoid(x)
        return self.y

    def backward(self, dout):
        y = self.saved(self.y, "output")
        return (dout * y * (1 - y),)


class Abs(Primitive):
    """y = |x|;  dx = dout * sign(x)  (0 at x = 0, as PyTorch)"""

    def forward(self, x):
        xp = backend.get_array_module(x)
        self.sign = xp.sign(x) if self.needs_input_grad else None  # constant where it has a derivative
        return xp.abs(x)

    def backward(self, dout):
        return (dout * self.saved(self.sign, None),)


class Rsqrt(Primitive):
    """y = 1 / sqrt(x);  dx = -dout * y**3 / 2"""

    def forward(self, x):
        xp = backend.get_array_module(x)
        self.y = 1 / xp.sqrt(x)
        return self.y

    def backward(self, dout):
        y = self.saved(self.y, "output")
        return (dout * y * y * y * -0.5,)


class Sin(Primitive):
    """y = sin(x);  dx = dout * cos(x)"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).sin(x)

    def backward(self, dout):
        return (dout * namespace(dout).cos(self.saved(self.x, 0)),)


class Cos(Primitive):
    """y = cos(x);  dx = -dout * sin(x)"""

    def forward(self, x):
        self.x = x
        return backend.get_array_module(x).cos(x)

    def backward(self, dout):
        return (-dout * namespace(dout).sin(self.saved(self.x, 0)),)


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


class Erf(Primitive):
    """y = erf(x) = 2/sqrt(pi) * integral of exp(-t^2) from 0 to x;  dx = dout * 2/sqrt(pi) * exp(-x^2)

    The values come from backend.erf (NumPy has no erf; see there how it is computed)."""

    def forward(self, x):
        self.x = x
        return backend.erf(x)

    def backward(self, dout):
        x = self.saved(self.x, 0)
        return (dout * _TWO_OVER_SQRT_PI * namespace(dout).exp(-x * x),)


class Erfc(Primitive):
    """y = erfc(x) = 1 - erf(x), without the cancellation where erf(x) nears 1;  dx = -dout * 2/sqrt(pi) * exp(-x^2)

    The values come from backend.erfc (the exact GELU's Phi(x) is 0.5 erfc(-x / sqrt(2)))."""

    def forward(self, x):
        self.x = x
        return backend.erfc(x)

    def backward(self, dout):
        x = self.saved(self.x, 0)
        return (-dout * _TWO_OVER_SQRT_PI * namespace(dout).exp(-x * x),)


def sigmoid(x: Tensor) -> Tensor: return Sigmoid.apply(as_float(x))
def abs(x: Tensor) -> Tensor: return Abs.apply(x)
def rsqrt(x: Tensor) -> Tensor: return Rsqrt.apply(as_float(x))
def sin(x: Tensor) -> Tensor: return Sin.apply(as_float(x))
def cos(x: Tensor) -> Tensor: return Cos.apply(as_float(x))
def erf(x: Tensor) -> Tensor: return Erf.apply(as_float(x))
def erfc(x: Tensor) -> Tensor: return Erfc.apply(as_float(x))


class Maximum(Primitive):
    """z = maximum(a, b);  da = dout where a > b, db = dout where b > a; where a == b each gets dout / 2. As in
    PyTorch, selected, not multiplied by a mask: where a or b is NaN (z is NaN) both get dout."""

    pick = "maximum"  # Minimum differs here and in which side `loses`

    def forward(self, a, b):
        self.a, self.b = a, b
        return getattr(backend.get_array_module(a), self.pick)(a, b)

    def backward(self, dout):
        xp = namespace(dout)
        a, b = self.a, self.b  # for the masks only: constants where z has a derivative
        shared = xp.where(a == b, dout * 0.5, dout)
        a_loses, b_loses = (a < b, a > b) if self.pick == "maximum" else (a > b, a < b)
        return (unbroadcast(xp.where(a_loses, 0, shared), a.shape),
                unbroadcast(xp.where(b_loses, 0, shared), b.shape))


class Minimum(Maximum):
    """z = minimum(a, b);  da = dout where a < b, db = dout where b < a; where a == b each gets dout / 2; where
    a or b is NaN both get dout (as PyTorch)"""

    pick = "minimum"


class Where(Primitive):
    """z = a where cond else b;  da = dout where cond else 0,  db = dout where not cond else 0"""

    def forward(self, a, b, cond):
        self.cond, self.a_shape, self.b_shape = cond, a.shape, b.shape
        return backend.get_array_module(a).where(cond, a, b)

    def backward(self, dout):
        xp = namespace(dout)
        need_a, need_b = self.needs_input_grad
        da = unbroadcast(xp.where(self.cond, dout, 0), self.a_shape) if need_a else None
        db = unbroadcast(xp.where(self.cond, 0, dout), self.b_shape) if need_b else None
        return da, db


class Clamp(Primitive):
    """y = min(max(x, low), high);  dx = dout where low <= x <= high, else 0 (the bounds let it through, as
    PyTorch). A bound of None is no bound; the bounds are numbers and get no gradient."""

    def forward(self, x, low, high):
        xp = backend.get_array_module(x)
        self.inside = (x >= (-math.inf if low is None else low)) & (x <= (math.inf if high is None else high))
        return xp.clip(x, low, high)

    def backward(self, dout):
        return (namespace(dout).where(self.inside, dout, 0),)  # selected: an inf dout gives no NaN


def maximum(a: Any, b: Any) -> Tensor: return Maximum.apply(*operands("maximum", a, b))
def minimum(a: Any, b: Any) -> Tensor: return Minimum.apply(*operands("minimum", a, b))


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """`input` where the boolean `condition` is True, else `other`; all three broadcast (torch.where). With two
    numbers the result takes their dtype (int64, float32 or bool) and the condition's device."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        number_kind("where", input)
        device = condition.device if isinstance(condition, Tensor) else backend.device_of(condition) \
            if hasattr(condition, "dtype") else "cpu"
        input = core.TENSOR.wrap(as_array(input, None, device, "where"))
    a, b = operands("where", input, other)
    cond = index_array("where", condition, a.device, "b")
    return saves_index(Where.apply(a, b, cond=cond), condition)


def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """Limit x to [min, max] (torch.clamp; torch.clip is the same). The bounds are numbers: for tensor
    bounds use mg.maximum and mg.minimum, which share the gradient on ties instead."""
    if min is None and max is None:
        raise ValueError("clamp: give at least one of min and max")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        raise TypeError("clamp: the bounds must be numbers; for tensor bounds use mg.maximum and mg.minimum")
    if any(v is not None and number_kind("clamp", v) == "f" for v in (min, max)):
        x = as_float(x)  # int_tensor.clamp(0.5) is float32, as in PyTorch
    low, high = (None if v is None else as_array(v, x.dtype, x.device, "clamp") for v in (min, max))
    return Clamp.apply(x, low=low, high=high)


clip = clamp


def filled(x: Tensor, value: Any) -> Tensor:
    """A tensor of x's shape and dtype with every element `value` (a number, cast to x's dtype as PyTorch's fill_
    casts it, or a 0-d tensor, which gets the gradient, summed); x gets none: fill_'s out-of-place form."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"fill_: expected a number or a 0-d tensor, got a tensor of shape {value.shape}")
        value = value.to(x.device).to(x.dtype)
    else:
        number_kind("fill_", value)
        value = core.TENSOR.wrap(as_array(value, x.dtype, x.device, "fill_"))
    return where(True, value, x)


class MaskedFillFunction(Primitive):
    """y = where(mask, value, x);  dx = where(mask, 0, dout): masked positions get no gradient"""

    def forward(self, x, mask, value):
        self.mask = mask
        return backend.get_array_module(x).where(mask, value, x)

    def backward(self, dout):
        return (namespace(dout).where(self.mask, 0, dout),)


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    """x with `value` where the boolean `mask` (broadcast to x's shape) is True. True = fill, PyTorch's sense here, the
    opposite of attn_mask's and minigrad's other masks (True = may attend): hide what a query may not see with
    masked_fill(~allowed, -inf)."""
    if number_kind("masked_fill", value) == "f" and x.dtype.kind != "f":
        raise TypeError(f"masked_fill: float value {value} for a {x.dtype} tensor of shape {x.shape}")
    given, mask = mask, index_array("masked_fill", mask, x.device, "bf")
    if mask.dtype.kind == "f":
        raise TypeError(f"masked_fill: expected boolean values, got dtype {mask.dtype} (True: fill); to hide what a "
                        "query may not see: mg.where(F.causal_mask(T), scores, -inf)")
    if not broadcasts_to(mask.shape, x.shape):
        raise ValueError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the input's {x.shape}")
    value = as_array(value, x.dtype, x.device, "masked_fill")
    return saves_index(MaskedFillFunction.apply(x, mask=mask, value=value), given)

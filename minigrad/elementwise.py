"""Elementwise math behind Tensor's operators: binary ops that broadcast (add, sub, mul, div, pow,
comparisons) and unary ops (neg, exp, log, sqrt, tanh).

Each primitive is a Function with forward and backward side by side and its derivative in the
docstring; the lowercase function below it is what Tensor's operators call. One `unbroadcast` serves
every binary op.
Where an op lives: tensor math that PyTorch offers as torch.X / Tensor.X sits by kind in
elementwise.py, reductions.py, shapes.py and matmul.py; neural-network functions that PyTorch places in
torch.nn.functional sit in functional.py, normalization.py and losses.py (all re-exported as F).
"""

from __future__ import annotations

from typing import Any

from minigrad import backend
from minigrad.tensor import Function, Tensor, _check_same_device


def unbroadcast(dx: Any, shape: tuple[int, ...]) -> Any:
    """The adjoint of broadcasting is summing: reduce dx back to the input's `shape`."""
    if dx.shape == shape:
        return dx
    lead = dx.ndim - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and dx.shape[lead + i] != 1)
    return dx.sum(axis=tuple(range(lead)) + stretched, keepdims=True).reshape(shape)


def as_operands(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands as tensors of one dtype. A Python number takes the tensor's dtype, so
    `x * 0.5` stays float32; two tensors of different dtypes are refused rather than promoted."""
    if not isinstance(a, Tensor):
        a = _constant_like(op, a, b)
    elif not isinstance(b, Tensor):
        b = _constant_like(op, b, a)
    elif a.dtype != b.dtype:
        raise TypeError(
            f"{op}: dtypes {a.dtype} and {b.dtype} differ (shapes {a.shape}, {b.shape}); "
            "convert one with .to(dtype)"
        )
    return a, b


def _constant_like(op: str, value: Any, like: Tensor) -> Tensor:
    """A Python or NumPy number as a constant tensor of `like`'s dtype and device."""
    xp = backend.get_array_module(like.data)
    if getattr(value, "ndim", 0) != 0:
        raise TypeError(f"{op}: got a {type(value).__name__} of shape {value.shape}; wrap it with mg.tensor() first")
    if xp.asarray(value).dtype.kind == "f" and like.dtype.kind != "f":
        raise TypeError(f"{op}: float {value} with a {like.dtype} tensor; convert the tensor with .to(mg.float32)")
    return Tensor._wrap(xp.asarray(value, dtype=like.dtype), False)


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
    """z = a ** b;  da = dout * b * a**(b - 1),  db = dout * z * log(a)"""

    def forward(self, a, b):
        self.a, self.b = a, b
        self.z = a**b
        return self.z

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        need_a, need_b = self.needs_input_grad
        da = unbroadcast(dout * self.b * self.a ** (self.b - 1), self.a.shape) if need_a else None
        db = unbroadcast(dout * self.z * xp.log(self.a), self.b.shape) if need_b else None
        return da, db


def add(a: Any, b: Any) -> Tensor: return Add.apply(*as_operands("add", a, b))
def sub(a: Any, b: Any) -> Tensor: return Sub.apply(*as_operands("sub", a, b))
def mul(a: Any, b: Any) -> Tensor: return Mul.apply(*as_operands("mul", a, b))
def div(a: Any, b: Any) -> Tensor: return Div.apply(*as_operands("div", a, b))
def pow(a: Any, b: Any) -> Tensor: return Pow.apply(*as_operands("pow", a, b))


def compare(op: str, a: Any, b: Any) -> Tensor:
    """a < b, a == b, ...: a boolean tensor, outside the graph (comparisons have no gradient)."""
    a, b = as_operands(op, a, b)
    _check_same_device(op, (a, b))
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


def neg(x: Tensor) -> Tensor: return Neg.apply(x)
def exp(x: Tensor) -> Tensor: return Exp.apply(x)
def log(x: Tensor) -> Tensor: return Log.apply(x)
def sqrt(x: Tensor) -> Tensor: return Sqrt.apply(x)
def tanh(x: Tensor) -> Tensor: return Tanh.apply(x)

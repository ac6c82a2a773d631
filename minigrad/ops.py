"""The primitives behind Tensor's operators: elementwise math, reductions, shape, matmul, indexing.

Each primitive is a Function with forward and backward side by side and its derivative in the
docstring; the lowercase function below it is what Tensor's operators call. Fused primitives for
neural networks (softmax, layer norm, cross-entropy, ...) live in functional.py.
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


# ---- reductions ----

def _normalize_axis(axis: Any, ndim: int) -> tuple[int, ...]:
    """axis=None, an int or a tuple, possibly negative, as a sorted tuple of non-negative ints."""
    axes = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    normalized = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for a tensor with {ndim} dimensions")
        normalized.append(a % ndim)
    return tuple(sorted(normalized))


class Sum(Function):
    """y = sum(x, axis);  dx = dout broadcast back along the summed axes"""

    def forward(self, x, axis, keepdims):
        self.x_shape, self.axis = x.shape, axis
        y = x.sum(axis=axis, keepdims=True)  # keepdims: an array, never a NumPy scalar
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        return (xp.broadcast_to(dout.reshape(_kept_shape(self.x_shape, self.axis)), self.x_shape),)


class Max(Function):
    """y = max(x, axis);  dx = dout where x is the maximum (shared equally between ties), else 0"""

    def forward(self, x, axis, keepdims):
        y = x.max(axis=axis, keepdims=True)
        self.argmax = x == y
        self.axis = axis
        return y if keepdims else y.squeeze(axis)

    def backward(self, dout):
        dout = dout.reshape(_kept_shape(self.argmax.shape, self.axis))
        ties = self.argmax.sum(axis=self.axis, keepdims=True, dtype=dout.dtype)
        return (self.argmax * (dout / ties),)


def _kept_shape(shape: tuple[int, ...], axis: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with the reduced axes kept as 1 (what keepdims=True would give)."""
    return tuple(1 if i in axis else n for i, n in enumerate(shape))


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return Sum.apply(x, axis=_normalize_axis(axis, x.ndim), keepdims=keepdims)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """sum / count: derived, so it needs no backward of its own."""
    if x.dtype.kind != "f":
        raise TypeError(f"mean: needs a floating-point tensor, got {x.dtype}; convert with .to(mg.float32)")
    axes = _normalize_axis(axis, x.ndim)
    count = 1
    for a in axes:
        count *= x.shape[a]
    return Sum.apply(x, axis=axes, keepdims=keepdims) * (1.0 / count)


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    if x.size == 0:
        raise ValueError(f"max: tensor of shape {x.shape} is empty")
    return Max.apply(x, axis=_normalize_axis(axis, x.ndim), keepdims=keepdims)


# ---- shape ----

class Reshape(Function):
    """y = x.reshape(shape);  dx = dout.reshape(x.shape)"""

    def forward(self, x, shape):
        self.x_shape = x.shape
        return x.reshape(shape)

    def backward(self, dout):
        return (dout.reshape(self.x_shape),)


class Transpose(Function):
    """y = x.transpose(axes);  dx = dout.transpose(inverse of axes)"""

    def forward(self, x, axes):
        self.axes = axes
        return x.transpose(axes)

    def backward(self, dout):
        inverse = [0] * len(self.axes)
        for i, a in enumerate(self.axes):
            inverse[a] = i
        return (dout.transpose(inverse),)


def reshape(x: Tensor, *shape: int) -> Tensor:
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return Reshape.apply(x, shape=shape)


def transpose(x: Tensor, *axes: int) -> Tensor:
    """Permute the axes (all reversed when none are given, as x.T)."""
    axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
    if not axes:
        axes = tuple(reversed(range(x.ndim)))
    in_range = all(-x.ndim <= a < x.ndim for a in axes)  # else `a % ndim` would quietly wrap 5 to 1
    if not in_range or len(axes) != x.ndim or sorted(a % x.ndim for a in axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of a tensor with {x.ndim} dimensions")
    return Transpose.apply(x, axes=tuple(a % x.ndim for a in axes))


# ---- indexing ----

class GetItem(Function):
    """y = x[index];  dx = zeros like x with dout added at index (repeated indices accumulate)"""

    def forward(self, x, index):
        self.x_shape, self.index = x.shape, index
        return x[index]

    def backward(self, dout):
        dx = backend.get_array_module(dout).zeros(self.x_shape, dtype=dout.dtype)
        if _is_basic(self.index):
            dx[self.index] = dout  # a basic index names each element at most once
        else:
            backend.scatter_add(dx, self.index, dout)
        return (dx,)


def _is_basic(index: tuple) -> bool:
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index)


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index] for ints, slices, None, Ellipsis and integer arrays (as lists, arrays or tensors)."""
    index = index if isinstance(index, tuple) else (index,)
    xp = backend.get_array_module(x.data)
    index = tuple(_index_array(i, xp, x.device) for i in index)
    try:
        return GetItem.apply(x, index=index)
    except IndexError as err:
        raise IndexError(f"getitem: index {index} into a tensor of shape {x.shape}: {err}") from None


def _index_array(i: Any, xp: Any, device: str) -> Any:
    """Array-like indices go to the data's device, so a NumPy index works on CuPy data too."""
    if isinstance(i, Tensor):
        i = i.data
    if isinstance(i, list) or hasattr(i, "dtype"):
        i = backend.to_device(xp.asarray(i) if isinstance(i, list) else i, device)
        if i.dtype.kind not in "iub":
            raise IndexError(f"getitem: indices must be integers or booleans, got dtype {i.dtype}")
    return i


# ---- matmul ----

class MatMul(Function):
    """z = a @ b (batch dims broadcast);  da = dout @ b^T,  db = a^T @ dout"""

    def forward(self, a, b):
        self.a, self.b = a, b
        if b.ndim == 2:  # (..., n) @ (n, m) is one big 2-D product, not a loop over the batch
            return (a.reshape(-1, a.shape[-1]) @ b).reshape(*a.shape[:-1], b.shape[1])
        return a @ b

    def backward(self, dout):
        a, b = self.a, self.b
        need_a, need_b = self.needs_input_grad
        if b.ndim == 2:  # undo the 2-D product of forward
            a2, dout2 = a.reshape(-1, a.shape[-1]), dout.reshape(-1, dout.shape[-1])
            return ((dout2 @ b.T).reshape(a.shape) if need_a else None,
                    a2.T @ dout2 if need_b else None)
        return (unbroadcast(dout @ b.swapaxes(-1, -2), a.shape) if need_a else None,
                unbroadcast(a.swapaxes(-1, -2) @ dout, b.shape) if need_b else None)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b as numpy.matmul: 1-D operands are promoted to matrices and the extra axis removed."""
    a, b = as_operands("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least 1 dimension, got shapes {a.shape} and {b.shape}")
    if a.ndim == 1:
        return matmul(a.reshape(1, -1), b).reshape(*b.shape[:-2], b.shape[-1])
    if b.ndim == 1:
        return matmul(a, b.reshape(-1, 1)).reshape(a.shape[:-1])
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul: shapes {a.shape} @ {b.shape}: inner dimensions {a.shape[-1]} and {b.shape[-2]} differ"
        )
    return MatMul.apply(a, b)


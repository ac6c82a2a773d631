"""mg.Tensor and mg.Function, assembled: the core's Tensor (minigrad/core.py, read it first) with PyTorch's
contract as layers around it, each a module of its own that adds methods and replaces none of the core's: writes in
place and version counters (autograd/versions.py), hooks (autograd/hooks.py), the legacy constructor (legacy.py);
and here, the methods and operators a PyTorch user calls, each one op of the op modules (ops/elementwise.py,
ops/reductions.py, ops/shapes.py, ops/matmul.py, ops/activations.py, ...). Those sit below this file: they build
on the core's Tensor and Function, and this file imports them, so the imports run one way.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_axis
from minigrad.array.dtypes import DType, UnsupportedDType, check_float, number_dtype, number_kind
from minigrad.array.global_settings import print_options
from minigrad.autograd import grad
from minigrad.autograd.hooks import HookedTensor, RemovableHandle, move_retained
from minigrad.autograd.switches import enable_grad, intercept, no_grad, set_grad_enabled
from minigrad.autograd.versions import Function, VersionedTensor, increment_version, saves_index
from minigrad.core import as_writable, graph_order, is_grad_enabled, modes, namespace
from minigrad.legacy import TYPES, LegacyConstructor, TensorType, type_name
from minigrad.ops import (
    Primitive,
    activations,
    algebra,
    creation,
    elementwise,
    indexing,
    matmul,
    pointwise,
    reductions,
    shapes,
    sorting,
)
from minigrad.ops.promotion import operands

__all__ = [
    "Function", "RemovableHandle", "Tensor", "as_writable", "enable_grad", "grad", "graph_order", "increment_version",
    "intercept", "is_grad_enabled", "is_tensor", "modes", "namespace", "no_grad", "numel", "operands", "Primitive",
    "saves_index", "set_grad_enabled",
]


class Tensor(LegacyConstructor, HookedTensor, VersionedTensor, core.Tensor):
    """An n-dimensional array that can record the operations applied to it for backward(): minigrad/core.py's
    Tensor (its backward is the one there), with PyTorch's legacy constructor, hooks and version counters from the
    layers, each adding methods and replacing none of the core's, and PyTorch's methods below.

    Tensor(data) and Tensor(2, 3) are PyTorch's legacy constructor (float32: minigrad/legacy.py); mg.tensor(data)
    and Tensor.leaf(data) make a leaf as torch.tensor does.

    Its version counts the in-place writes into its memory (in-place ops, x[idx] = v, optimizer steps); views of it
    (x[0], x.reshape(...), x.T, x.detach()) share its memory and so its counter. A node that saved the array for
    backward refuses to run once the version has moved on, as in PyTorch.
    """

    __hash__ = object.__hash__  # == builds a comparison tensor, so hash by identity
    __array_ufunc__ = None  # np.float64(2) * x: NumPy defers to Tensor.__rmul__ instead of making an object array

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    def zero_grad(self) -> None:
        self.grad = None

    # -- what it is --
    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or with a dim that axis's length, as PyTorch's x.size(); numel() counts the elements."""
        return self.shape if dim is None else self.shape[as_axis("size", dim, self.shape)]

    def numel(self) -> int:
        """The number of elements (NumPy's size)."""
        return self.array.size

    def dim(self) -> int:
        return self.array.ndim

    nelement = numel  # PyTorch's other name for it

    @property
    def is_cuda(self) -> bool:
        return self.device == "cuda"

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        dev = ", device='cuda'" if self.device == "cuda" else ""
        values = np.array2string(self.numpy(), prefix="tensor(", **print_options)  # as mg.set_printoptions says
        return f"tensor({values}, dtype={self.dtype}{dev}{grad})"

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        """The rows x[0], x[1], ... (views, in the graph), as iterating a PyTorch tensor gives them."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, element: Any) -> bool:
        """`value in x`: whether some element of x equals it, as in PyTorch."""
        if not isinstance(element, (Tensor, bool, int, float)):
            raise RuntimeError(f"`in`: expected a tensor or a number, got {type(element).__name__}")
        return bool((self == element).any())

    def __bool__(self) -> bool:
        if self.array.size != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()")
        return bool(self.item())

    # -- conversions --
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array: on the CPU the array itself (shared, as PyTorch's), from the GPU a copy."""
        return backend.to_numpy(self.array)

    def item(self) -> float | int | bool:
        if self.array.size != 1:
            raise RuntimeError(f"item(): only a one-element tensor has an item, this one has shape {self.shape}")
        return self.array.reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def _scalar(self, what: str) -> float | int | bool:
        if self.array.size != 1:  # a ValueError here, as PyTorch's (item() raises a RuntimeError, as PyTorch's)
            raise ValueError(f"{what}(): only a one-element tensor converts to a Python number, this one has shape "
                             f"{self.shape}")
        return self.item()

    def __index__(self) -> int:
        if self.dtype.kind not in "biu":
            raise TypeError(f"only integer tensors of a single element can be used as an index, got dtype {self.dtype}")
        return int(self.item())

    def __format__(self, spec: str) -> str:
        """f"{loss:.4f}" formats a one-element tensor's value; f"{x}" is a 0-d tensor's value (as PyTorch's)."""
        if self.array.size == 1 and (self.ndim == 0 or spec):
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """np.asarray(x): the values, the array itself where no copy is needed; CPU tensors only, as in PyTorch."""
        if self.device != "cpu":
            raise TypeError(f"np.asarray: this tensor of shape {self.shape} is on {self.device}; x.numpy() copies it "
                            "to the host")
        array = self.array if dtype is None else self.array.astype(dtype, copy=False)
        return array.copy() if copy else array

    def to(self, *args: Any, device: str | None = None, dtype: DType | None = None, non_blocking: bool = False,
           copy: bool = False) -> Tensor:
        """A copy on another device ("cpu", "cuda": a new leaf) and/or of another dtype; `self` if nothing changes
        (copy=True: a copy all the same). As PyTorch's: x.to("cuda"), x.to(mg.float64), x.to("cuda", mg.float64),
        x.to(device=..., dtype=...), x.to(other) (other's device and dtype); non_blocking changes nothing here.
        A float-to-float conversion is an op that gradients flow back through; an integer or bool result is
        a plain tensor."""
        for target in args:
            if isinstance(target, core.Tensor):
                device, dtype = target.device, target.dtype
            elif isinstance(target, str) and target.partition(":")[0] in backend.DEVICES:
                device = target
            else:  # a dtype; None by position is refused, as a dtype argument is everywhere here
                dtype = number_dtype("to", target)
        out = self if device is None else self._to_device(backend.device(device).type)
        out = out if dtype is None else out._to_dtype(dtype)
        return elementwise.clone(out) if copy and out is self else out

    def _to_device(self, device: str) -> Tensor:
        data = backend.to_device(self.array, device)
        return self if data is self.array else Tensor.wrap(data, False).requires_grad_(self.requires_grad)

    def _to_dtype(self, target: DType) -> Tensor:
        dtype = number_dtype("to", target)
        if dtype == self.dtype:
            return self
        if dtype.kind != "f":
            return Tensor.wrap(self.array.astype(dtype), False)
        return elementwise.cast(self, dtype)

    def cpu(self) -> Tensor:
        """self.to("cpu"): this tensor itself where it is already there, as PyTorch's."""
        return self.to("cpu")

    def type(self, dtype: Any = None, non_blocking: bool = False) -> str | Tensor:
        """Without an argument, the type's name as PyTorch writes it ('torch.FloatTensor', 'torch.cuda.LongTensor');
        with a dtype (mg.long), a type (mg.LongTensor) or a type's name, self.to(it) (self where nothing changes)."""
        if dtype is None:
            return type_name(self.dtype, self.device)
        if isinstance(dtype, str):
            cpu_name = dtype.replace("torch.cuda.", "torch.")
            if cpu_name not in TYPES:
                raise ValueError(f"type: invalid type {dtype!r}; expected a dtype (mg.long) or one of {sorted(TYPES)}")
            device = "cuda" if dtype.startswith("torch.cuda.") else "cpu"
            return self.to(device).to(TYPES[cpu_name].dtype)
        if isinstance(dtype, TensorType):
            return self.to("cpu").to(dtype.dtype)
        if not isinstance(dtype, (np.dtype, UnsupportedDType)):  # np.dtype(int) would be int64; PyTorch refuses
            raise ValueError(f"type: invalid type {dtype!r}; expected a dtype (mg.long) or a type (mg.LongTensor)")
        return self.to(dtype)

    def type_as(self, other: Tensor) -> Tensor:
        """self.type(other.type()): other's dtype (and device), as PyTorch's."""
        return self.type(other.type())

    # -- new tensors with this one's dtype and device unless told otherwise, as PyTorch's x.new_zeros(...) --
    def new_zeros(self, *size: int, dtype: DType | None = None, device: str | None = None,
                  requires_grad: bool = False) -> Tensor:
        return creation.zeros(*size, **self._new_options(dtype, device, requires_grad))

    def new_ones(self, *size: int, dtype: DType | None = None, device: str | None = None,
                 requires_grad: bool = False) -> Tensor:
        return creation.ones(*size, **self._new_options(dtype, device, requires_grad))

    def new_empty(self, *size: int, dtype: DType | None = None, device: str | None = None,
                  requires_grad: bool = False) -> Tensor:
        return creation.empty(*size, **self._new_options(dtype, device, requires_grad))

    def new_full(self, size: Any, fill_value: Any, *, dtype: DType | None = None, device: str | None = None,
                 requires_grad: bool = False) -> Tensor:
        return creation.full(size, fill_value, **self._new_options(dtype, device, requires_grad))

    def new_tensor(self, data: Any, dtype: DType | None = None, device: str | None = None,
                   requires_grad: bool = False) -> Tensor:
        """A copy of data as a new leaf, as mg.tensor(data), with this tensor's dtype and device unless given."""
        return creation.tensor(data, **self._new_options(dtype, device, requires_grad))

    def _new_options(self, dtype: DType | None, device: str | None, requires_grad: bool) -> dict[str, Any]:
        return {"dtype": self.dtype if dtype is None else dtype, "device": self.device if device is None else device,
                "requires_grad": requires_grad}

    # -- random fills in place, from the device's seeded generator or `generator`, as PyTorch's --
    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Tensor:
        """Draws from U(a, b)."""
        return self.copy_(self._uniform("uniform_", generator) * (b - a) + a)

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
        """Draws from N(mean, std^2)."""
        floating = check_float("normal_", self)
        return self.copy_(creation.randn(*self.shape, dtype=floating, device=self.device, generator=generator)
                          * std + mean)

    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
        """Draws from the exponential distribution of rate lambd: -log(1 - U) / lambd."""
        return self.copy_(-elementwise.log(1 - self._uniform("exponential_", generator)) / lambd)

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> Tensor:
        """1 with probability p (a number, or a tensor of probabilities that broadcasts to this one), else 0; of any
        dtype."""
        dtype = p.dtype if isinstance(p, Tensor) and p.dtype.kind == "f" else None  # else the default float
        draws = creation.rand(*self.shape, dtype=dtype, device=self.device, generator=generator)
        return self.copy_(draws < p)

    def _uniform(self, op: str, generator: Any) -> Tensor:
        return creation.rand(*self.shape, dtype=check_float(op, self), device=self.device, generator=generator)

    def clone(self) -> Tensor:
        """A copy in new memory, in the graph (dx = dout), as PyTorch's clone."""
        return elementwise.clone(self)

    def is_contiguous(self) -> bool:
        """Whether its elements lie in memory in row-major order, one after another (not after a transpose)."""
        return bool(self.array.flags.c_contiguous)

    def contiguous(self) -> Tensor:
        """This tensor if contiguous, else a row-major copy in the graph (clone), as PyTorch's: what view() needs."""
        return self if self.is_contiguous() else elementwise.clone(self)

    # -- in place: each writes an op's result into this tensor's own memory, through _write --
    def add_(self, other: Any, *, alpha: float = 1) -> Tensor:
        return self._write("add_", elementwise.add, _scaled(other, alpha))

    def sub_(self, other: Any, *, alpha: float = 1) -> Tensor:
        return self._write("sub_", elementwise.sub, _scaled(other, alpha))

    def mul_(self, other: Any) -> Tensor: return self._write("mul_", elementwise.mul, other)
    def div_(self, other: Any) -> Tensor: return self._write("div_", elementwise.div, other)
    def pow_(self, other: Any) -> Tensor: return self._write("pow_", elementwise.pow, other)
    def neg_(self) -> Tensor: return self._write("neg_", elementwise.neg)
    def exp_(self) -> Tensor: return self._write("exp_", elementwise.exp)
    def log_(self) -> Tensor: return self._write("log_", elementwise.log)
    def sqrt_(self) -> Tensor: return self._write("sqrt_", elementwise.sqrt)
    def tanh_(self) -> Tensor: return self._write("tanh_", elementwise.tanh)
    def sigmoid_(self) -> Tensor: return self._write("sigmoid_", elementwise.sigmoid)
    def abs_(self) -> Tensor: return self._write("abs_", elementwise.abs)
    def relu_(self) -> Tensor: return self._write("relu_", activations.relu)
    def clamp_(self, min=None, max=None) -> Tensor: return self._write("clamp_", elementwise.clamp, min, max)
    def masked_fill_(self, mask, value) -> Tensor: return self._write("masked_fill_", elementwise.masked_fill,
                                                                     mask, value)
    def fill_(self, value: Any) -> Tensor: return self._write("fill_", elementwise.filled, value)
    def zero_(self) -> Tensor: return self._write("zero_", elementwise.filled, 0)
    def copy_(self, src: Any) -> Tensor: return self._write("copy_", shapes.copied, src)
    def __setitem__(self, index: Any, value: Any) -> None: self._write("setitem", shapes.setitem, index, value)
    __iadd__, __isub__, __imul__, __itruediv__, __ipow__ = add_, sub_, mul_, div_, pow_

    def scatter_(self, dim: int, index: Any, src: Any = None, value: Any = None, *, reduce: Any = None) -> Tensor:
        return self._write("scatter_", functools.partial(indexing.scatter, reduce=reduce), dim, index, src, value)

    def scatter_add_(self, dim, index, src) -> Tensor: return self._write("scatter_add_", indexing.scatter_add, dim,
                                                                          index, src)
    def index_add_(self, dim, index, source, *, alpha=1) -> Tensor: return self._write(
        "index_add_", functools.partial(indexing.index_add, alpha=alpha), dim, index, source)
    def index_copy_(self, dim, index, source) -> Tensor: return self._write("index_copy_", indexing.index_copy, dim,
                                                                            index, source)
    def index_fill_(self, dim, index, value) -> Tensor: return self._write("index_fill_", indexing.index_fill, dim,
                                                                           index, value)
    def masked_scatter_(self, mask, source) -> Tensor: return self._write("masked_scatter_", indexing.masked_scatter,
                                                                          mask, source)
    clip_ = clamp_

    def unsqueeze_(self, dim: int) -> Tensor:
        """In place, as PyTorch's: this tensor takes the shape unsqueeze(dim) gives, in the same memory, and, where a
        gradient is recorded, the result's place in the graph; counted as a write (its version goes up)."""
        if core.modes.grad and self.requires_grad and self.grad_fn is None:
            raise RuntimeError(f"unsqueeze_: a leaf tensor that requires grad (shape {self.shape}) is being used in an "
                               "in-place operation; use x.unsqueeze(dim), or change it under mg.no_grad()")
        out = shapes.unsqueeze(self, dim)
        if out.requires_grad:
            move_retained(self._grad_fn, out._grad_fn, self)
        self.array, self._grad_fn = out.array, out._grad_fn
        self._version_counter[0] += 1
        if self._view is not None and out._view is not None:  # a view of a base: cut one step further, as of now
            self._view = out._view
            self._view.version = self._version_counter[0]
        return self

    # -- operators: each calls one op, so every op can be found by grep --
    def __add__(self, other): return elementwise.add(self, other)
    def __radd__(self, other): return elementwise.add(other, self)
    def __sub__(self, other): return elementwise.sub(self, other)
    def __rsub__(self, other): return elementwise.sub(other, self)
    def __mul__(self, other): return elementwise.mul(self, other)
    def __rmul__(self, other): return elementwise.mul(other, self)
    def __truediv__(self, other): return elementwise.div(self, other)
    def __rtruediv__(self, other): return elementwise.div(other, self)
    def __pow__(self, other): return elementwise.pow(self, other)
    def __rpow__(self, other): return elementwise.pow(other, self)
    def __matmul__(self, other): return matmul.matmul(self, other)
    def __rmatmul__(self, other): return matmul.matmul(other, self)
    def __neg__(self): return elementwise.neg(self)
    def __getitem__(self, index): return shapes.getitem(self, index)
    def __lt__(self, other): return elementwise.compare("lt", self, other)
    def __le__(self, other): return elementwise.compare("le", self, other)
    def __gt__(self, other): return elementwise.compare("gt", self, other)
    def __ge__(self, other): return elementwise.compare("ge", self, other)
    def __eq__(self, other): return elementwise.compare("eq", self, other)
    def __ne__(self, other): return elementwise.compare("ne", self, other)
    def __abs__(self): return elementwise.abs(self)
    def __and__(self, other): return pointwise.bitwise_and(self, other)
    def __rand__(self, other): return pointwise.bitwise_and(other, self)
    def __or__(self, other): return pointwise.bitwise_or(self, other)
    def __ror__(self, other): return pointwise.bitwise_or(other, self)
    def __xor__(self, other): return pointwise.bitwise_xor(self, other)
    def __rxor__(self, other): return pointwise.bitwise_xor(other, self)
    def __invert__(self): return pointwise.bitwise_not(self)
    T = property(lambda self: shapes.permute(self, *reversed(range(self.ndim))))  # all axes reversed

    # -- math as methods, as PyTorch's: x.exp() is elementwise.exp(x), x.sum(1) is reductions.sum(x, 1) --
    add, sub, mul, div, pow, neg, matmul = __add__, __sub__, __mul__, __truediv__, __pow__, __neg__, __matmul__
    def exp(self) -> Tensor: return elementwise.exp(self)
    def log(self) -> Tensor: return elementwise.log(self)
    def sqrt(self) -> Tensor: return elementwise.sqrt(self)
    def tanh(self) -> Tensor: return elementwise.tanh(self)
    def abs(self) -> Tensor: return elementwise.abs(self)
    def sigmoid(self) -> Tensor: return elementwise.sigmoid(self)
    def rsqrt(self) -> Tensor: return elementwise.rsqrt(self)
    def sin(self) -> Tensor: return elementwise.sin(self)
    def cos(self) -> Tensor: return elementwise.cos(self)
    def erf(self) -> Tensor: return elementwise.erf(self)
    def erfc(self) -> Tensor: return elementwise.erfc(self)
    def log10(self) -> Tensor: return pointwise.log10(self)
    def log2(self) -> Tensor: return pointwise.log2(self)
    def log1p(self) -> Tensor: return pointwise.log1p(self)
    def expm1(self) -> Tensor: return pointwise.expm1(self)
    bitwise_and, bitwise_or, bitwise_xor, bitwise_not = __and__, __or__, __xor__, __invert__
    def logical_and(self, other) -> Tensor: return pointwise.logical_and(self, other)
    def logical_or(self, other) -> Tensor: return pointwise.logical_or(self, other)
    def logical_xor(self, other) -> Tensor: return pointwise.logical_xor(self, other)
    def logical_not(self) -> Tensor: return pointwise.logical_not(self)
    def maximum(self, other) -> Tensor: return elementwise.maximum(self, other)
    def minimum(self, other) -> Tensor: return elementwise.minimum(self, other)
    def where(self, condition, other) -> Tensor: return elementwise.where(condition, self, other)
    def clamp(self, min=None, max=None) -> Tensor: return elementwise.clamp(self, min, max)
    def clip(self, min=None, max=None) -> Tensor: return elementwise.clamp(self, min, max)
    def masked_fill(self, mask, value) -> Tensor: return elementwise.masked_fill(self, mask, value)
    def relu(self) -> Tensor: return activations.relu(self)
    def bmm(self, other) -> Tensor: return matmul.bmm(self, other)
    def dot(self, other) -> Tensor: return matmul.dot(self, other)
    def outer(self, other) -> Tensor: return matmul.outer(self, other)
    def isclose(self, *args, **kwargs) -> Tensor: return elementwise.isclose(self, *args, **kwargs)
    def allclose(self, *args, **kwargs) -> bool: return elementwise.allclose(self, *args, **kwargs)
    def equal(self, other) -> bool: return elementwise.equal(self, other)

    # those with a dim pass their arguments on, so that each has one signature: the function's (see there)
    def sum(self, *args, **kwargs) -> Tensor: return reductions.sum(self, *args, **kwargs)
    def mean(self, *args, **kwargs) -> Tensor: return reductions.mean(self, *args, **kwargs)
    def max(self, *args, **kwargs) -> Any: return reductions.max(self, *args, **kwargs)
    def min(self, *args, **kwargs) -> Any: return reductions.min(self, *args, **kwargs)
    def amax(self, *args, **kwargs) -> Tensor: return reductions.amax(self, *args, **kwargs)
    def amin(self, *args, **kwargs) -> Tensor: return reductions.amin(self, *args, **kwargs)
    def argmax(self, *args, **kwargs) -> Tensor: return reductions.argmax(self, *args, **kwargs)
    def argmin(self, *args, **kwargs) -> Tensor: return reductions.argmin(self, *args, **kwargs)
    def var(self, *args, **kwargs) -> Tensor: return reductions.var(self, *args, **kwargs)
    def std(self, *args, **kwargs) -> Tensor: return reductions.std(self, *args, **kwargs)
    def prod(self, *args, **kwargs) -> Tensor: return reductions.prod(self, *args, **kwargs)
    def logsumexp(self, *args, **kwargs) -> Tensor: return reductions.logsumexp(self, *args, **kwargs)
    def cumsum(self, *args, **kwargs) -> Tensor: return reductions.cumsum(self, *args, **kwargs)
    def topk(self, *args, **kwargs) -> Any: return reductions.topk(self, *args, **kwargs)
    def multinomial(self, *args, **kwargs) -> Tensor: return reductions.multinomial(self, *args, **kwargs)
    def any(self, *args, **kwargs) -> Tensor: return reductions.any(self, *args, **kwargs)
    def all(self, *args, **kwargs) -> Tensor: return reductions.all(self, *args, **kwargs)
    def softmax(self, *args, **kwargs) -> Tensor: return activations.softmax(self, *args, **kwargs)
    def log_softmax(self, *args, **kwargs) -> Tensor: return activations.log_softmax(self, *args, **kwargs)
    def split(self, *args, **kwargs) -> tuple[Tensor, ...]: return shapes.split(self, *args, **kwargs)
    def chunk(self, *args, **kwargs) -> tuple[Tensor, ...]: return shapes.chunk(self, *args, **kwargs)
    def squeeze(self, *args, **kwargs) -> Tensor: return shapes.squeeze(self, *args, **kwargs)
    def unsqueeze(self, *args, **kwargs) -> Tensor: return shapes.unsqueeze(self, *args, **kwargs)
    def flatten(self, *args, **kwargs) -> Tensor: return shapes.flatten(self, *args, **kwargs)
    def unflatten(self, *args, **kwargs) -> Tensor: return shapes.unflatten(self, *args, **kwargs)
    def gather(self, *args, **kwargs) -> Tensor: return shapes.gather(self, *args, **kwargs)
    def roll(self, *args, **kwargs) -> Tensor: return shapes.roll(self, *args, **kwargs)
    def scatter(self, *args, **kwargs) -> Tensor: return indexing.scatter(self, *args, **kwargs)
    def scatter_add(self, *args, **kwargs) -> Tensor: return indexing.scatter_add(self, *args, **kwargs)
    def index_add(self, *args, **kwargs) -> Tensor: return indexing.index_add(self, *args, **kwargs)
    def index_copy(self, *args, **kwargs) -> Tensor: return indexing.index_copy(self, *args, **kwargs)
    def index_fill(self, *args, **kwargs) -> Tensor: return indexing.index_fill(self, *args, **kwargs)
    def index_select(self, *args, **kwargs) -> Tensor: return indexing.index_select(self, *args, **kwargs)
    def masked_scatter(self, *args, **kwargs) -> Tensor: return indexing.masked_scatter(self, *args, **kwargs)
    def take_along_dim(self, *args, **kwargs) -> Tensor: return indexing.take_along_dim(self, *args, **kwargs)
    def narrow(self, *args, **kwargs) -> Tensor: return indexing.narrow(self, *args, **kwargs)
    def unfold(self, *args, **kwargs) -> Tensor: return indexing.unfold(self, *args, **kwargs)
    def nonzero(self, *args, **kwargs) -> Any: return indexing.nonzero(self, *args, **kwargs)
    def argwhere(self) -> Tensor: return indexing.argwhere(self)
    def count_nonzero(self, *args, **kwargs) -> Tensor: return indexing.count_nonzero(self, *args, **kwargs)
    def sort(self, *args, **kwargs) -> Any: return sorting.sort(self, *args, **kwargs)
    def argsort(self, *args, **kwargs) -> Tensor: return sorting.argsort(self, *args, **kwargs)
    def unique(self, *args, **kwargs) -> Any: return sorting.unique(self, *args, **kwargs)
    def repeat_interleave(self, *args, **kwargs) -> Tensor: return sorting.repeat_interleave(self, *args, **kwargs)
    def bincount(self, *args, **kwargs) -> Tensor: return sorting.bincount(self, *args, **kwargs)
    def histc(self, *args, **kwargs) -> Tensor: return sorting.histc(self, *args, **kwargs)
    def histogram(self, *args, **kwargs) -> Any: return sorting.histogram(self, *args, **kwargs)
    def norm(self, *args, **kwargs) -> Tensor: return algebra.norm(self, *args, **kwargs)
    def diag(self, *args, **kwargs) -> Tensor: return algebra.diag(self, *args, **kwargs)

    # shapes and dims as varargs, x.reshape(2, 3) or x.reshape((2, 3)), as in PyTorch
    def reshape(self, *shape: int) -> Tensor: return shapes.reshape(self, *shape)
    def transpose(self, dim0: int, dim1: int) -> Tensor: return shapes.transpose(self, dim0, dim1)
    def swapaxes(self, axis0: int, axis1: int) -> Tensor: return shapes.swapaxes(self, axis0, axis1)
    def broadcast_to(self, *shape: int) -> Tensor: return shapes.broadcast_to(self, shape)
    def permute(self, *dims: int) -> Tensor: return shapes.permute(self, *dims)
    def expand(self, *sizes: int) -> Tensor: return shapes.expand(self, *sizes)
    def repeat(self, *sizes: int) -> Tensor: return shapes.repeat(self, *sizes)
    def flip(self, *dims: int) -> Tensor: return shapes.flip(self, dims[0] if len(dims) == 1 else dims)
    def tril(self, diagonal: int = 0) -> Tensor: return shapes.tril(self, diagonal)
    def triu(self, diagonal: int = 0) -> Tensor: return shapes.triu(self, diagonal)
    def view(self, *shape: int) -> Tensor: return shapes.view(self, *shape)
    def view_as(self, other: Tensor) -> Tensor: return shapes.view(self, other.shape)
    def t(self) -> Tensor: return shapes.t(self)

    # dtype conversions as PyTorch names them, each x.to(dtype) (the same tensor where it already has that dtype);
    # last in the class, as their names are the builtins' within the class body
    def float(self) -> Tensor: return self.to(np.float32)
    def double(self) -> Tensor: return self.to(np.float64)
    def long(self) -> Tensor: return self.to(np.int64)
    def int(self) -> Tensor: return self.to(np.int32)
    def bool(self) -> Tensor: return self.to(np.bool_)


def _scaled(other: Any, alpha: float) -> Any:
    """other * alpha, for add_(other, alpha=...) and sub_; alpha=1 leaves other as it is."""
    if alpha == 1:
        return other
    if isinstance(other, Tensor):
        return elementwise.mul(other, alpha)
    number_kind("alpha", other)  # a number (a list would be repeated): anything else is a TypeError
    return other * alpha


def is_tensor(obj: Any) -> bool:
    """Whether obj is a tensor, as torch.is_tensor (a NumPy array is not)."""
    return isinstance(obj, core.Tensor)


def numel(t: Tensor) -> int:
    """The number of elements of t, as torch.numel (t.numel())."""
    if not isinstance(t, core.Tensor):
        raise TypeError(f"numel: expected a tensor, got {type(t).__name__}")
    return t.numel()


core.make_tensors_as(Tensor)  # op results and gradients are of this class (core.TENSOR)


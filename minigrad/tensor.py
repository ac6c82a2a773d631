"""Tensor, the Function protocol that records the graph, and reverse-mode backward().

Read this file first. A Tensor wraps a backend array (NumPy on "cpu", CuPy on "cuda"). Every
primitive (elementwise.py, reductions.py, shapes.py, matmul.py, functional.py, ...) is a Function
subclass with `forward` and `backward` side by side; `Function.apply` runs forward on raw arrays
and, when a gradient is wanted, remembers the inputs.
`Tensor.backward` walks that record in reverse topological order, calling each `backward`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from minigrad import backend
from minigrad.dtypes import DEFAULT_FLOAT, DType, check_same_device_and_dtype, number_dtype, own_dtype

# ---- grad mode ----

class _GradMode(threading.local):
    """Grad mode is per thread, as in PyTorch: each thread starts with it on."""

    def __init__(self) -> None:
        self.enabled = True
        self.saved: list[bool] = []  # the mode before each no_grad block this thread is inside


_grad_mode = _GradMode()


class no_grad(contextlib.ContextDecorator):
    """`with mg.no_grad():` (or as a decorator): nothing inside is recorded for backward.

    Each exit restores the mode of its own entry, so one object may be entered again while it is in
    use (nested, or by a decorated function that calls itself), and threads do not see each other's.
    """

    def __enter__(self) -> None:
        _grad_mode.saved.append(_grad_mode.enabled)
        _grad_mode.enabled = False

    def __exit__(self, *exc: object) -> None:
        _grad_mode.enabled = _grad_mode.saved.pop()


def is_grad_enabled() -> bool:
    return _grad_mode.enabled


# ---- Function: one primitive, one graph node ----

class Function:
    """A primitive with a hand-written backward. An instance is both the graph node and the `ctx`.

    Subclasses define `forward(self, *arrays, **options) -> array`, saving on `self` what backward
    needs, and `backward(self, dout) -> tuple of dx`, one per input (None where no gradient is
    needed; `self.needs_input_grad` says which). Each dx must be a new array, `dout` itself, or a
    view of `dout`: the engine copies before writing into the latter two. NumPy turns the result of
    arithmetic on 0-d arrays into a NumPy scalar (`dout * b`); the engine makes it a 0-d array again,
    in forward and backward alike, so every .data and .grad is an array.

    A forward that returns a tuple of arrays makes a node with several outputs (split does): each
    output tensor gets its own edge, an `Output`, and backward runs once, with a list of every
    output's gradient (None for an output that received none) in place of `dout`.

    The graph's edges are `parents`: for each input, the node that computed it, or the input itself
    when it is a leaf (None when it needs no gradient). Edges lead to nodes, not to the tensors
    between them, so an intermediate result stays in memory only if some backward saved it.
    """

    parents: tuple[Function | Tensor | None, ...] | None = ()
    needs_input_grad: tuple[bool, ...] = ()
    _hooks: tuple[Any, ...] = ()  # register_hook / retain_grad on the tensor this node computed
    _op = "function"  # the name in error messages, set once per subclass: LinearFunction -> "linear"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._op = cls.__name__.removesuffix("Function").lower()

    @classmethod
    def apply(cls, *inputs: Tensor, **options: Any) -> Tensor | tuple[Tensor, ...]:
        op = cls._op
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"{op}: input {i} is a {type(t).__name__}, not a tensor; wrap it with mg.tensor()")
        if len(inputs) > 1:
            check_same_device_and_dtype(op, inputs)
        fn = cls()
        requires_grad = _grad_mode.enabled and any(t.requires_grad for t in inputs)
        if requires_grad:
            fn.needs_input_grad = tuple(t.requires_grad for t in inputs)
        try:
            out = fn.forward(*(t.data for t in inputs), **options)
        except (ValueError, TypeError) as err:  # a NumPy/CuPy complaint: say which op and which shapes
            shapes = ", ".join(str(t.shape) for t in inputs)
            kind = ValueError if isinstance(err, ValueError) else TypeError
            raise kind(f"{op}: inputs of shapes {shapes}: {err}") from None
        if requires_grad:
            fn.parents = tuple((t._ctx or t) if t.requires_grad else None for t in inputs)
        if isinstance(out, tuple):  # several outputs: each reaches this node through its own edge
            results = tuple(Tensor._wrap(o, requires_grad) for o in out)
            if requires_grad:
                fn.n_outputs = len(out)
                for i, r in enumerate(results):
                    r._ctx = Output(fn, i, r.data)
            return results
        result = Tensor._wrap(out, requires_grad)
        if requires_grad:
            fn.shape, fn.dtype = out.shape, out.dtype  # what this node hands its consumers, for checks
            result._ctx = fn
        return result

    def forward(self, *arrays: Any, **options: Any) -> Any:
        raise NotImplementedError

    def backward(self, dout: Any) -> tuple[Any, ...]:
        raise NotImplementedError

    def release(self) -> None:
        """Drop the saved arrays and the inputs once backward has used them."""
        self.__dict__.clear()
        self.parents = None


class Output(Function):
    """The edge to output `index` of a node with several outputs. The backward sweep calls no
    backward here: it files the gradient in the node's list, at `index`, for the node's one backward."""

    def __init__(self, node: Function, index: int, array: Any) -> None:
        self.parents, self.index = (node,), index
        self.shape, self.dtype = array.shape, array.dtype  # for the checks, as a one-output node has


def _array(value: Any) -> Any:
    """`value` as an array: a NumPy scalar (what NumPy arithmetic on 0-d arrays returns) becomes a 0-d
    array, which, unlike the scalar, can be written in place."""
    return backend.get_array_module(value).asarray(value) if isinstance(value, np.generic) else value


def _as_array(data: Any, dtype: DType | None = None, device: str | None = None, op: str = "tensor") -> Any:
    """The one way values become a backend array: a tensor, a NumPy or CuPy array, a Python number or a
    (nested) list, as `dtype` (default: its own, with Python floats as float32) on `device` (default:
    its own, or "cpu"). Values that are not numbers (None, strings, objects) are a TypeError naming `op`,
    whatever `dtype` asks for: NumPy would turn None into NaN and "3" into 3.0."""
    if isinstance(data, Tensor):
        data = data.data
    own = own_dtype(data)
    if own.kind not in "biuf":
        raise TypeError(f"{op}: expected numbers, got {type(data).__name__} {data!r:.60}, whose dtype {own} "
                        "is not a number type (bool, integer or float)")
    if dtype is not None:
        dtype = number_dtype(op, dtype)
    elif not hasattr(data, "dtype") and own.kind == "f":
        dtype = DEFAULT_FLOAT
    if device is None:
        device = backend.device_of(data) if hasattr(data, "dtype") else "cpu"
    xp = backend.module_for(device)
    return xp.asarray(backend.to_device(data, device) if hasattr(data, "dtype") else data, dtype=dtype)


# ---- Tensor ----

class Tensor:
    """An n-dimensional array that can record the operations applied to it for backward()."""

    __slots__ = ("data", "grad", "requires_grad", "_ctx", "_hooks")
    __hash__ = object.__hash__  # == builds a comparison tensor, so hash by identity
    __array_ufunc__ = None  # np.float64(2) * x: NumPy defers to Tensor.__rmul__ instead of making an object array

    def __init__(self, data: Any, requires_grad: bool = False, dtype: DType | None = None,
                 device: str | None = None) -> None:
        self.data = _as_array(data, dtype, device)
        self.grad = None
        self.requires_grad = False
        self._ctx: Function | None = None
        self._hooks: tuple[Any, ...] = ()
        self.requires_grad_(requires_grad)

    @classmethod
    def _wrap(cls, data: Any, requires_grad: bool) -> Tensor:
        """Fast constructor for op outputs: `data` is already a backend array (or a NumPy scalar)."""
        t = object.__new__(cls)
        t.data, t.grad, t.requires_grad, t._ctx, t._hooks = _array(data), None, requires_grad, None, ()
        return t

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if not isinstance(requires_grad, bool):  # "yes" or 0 would pass as a flag; PyTorch refuses them too
            raise TypeError(f"requires_grad must be True or False, got {type(requires_grad).__name__} "
                            f"{requires_grad!r:.40}")
        if requires_grad and self.data.dtype.kind != "f":
            raise TypeError(f"only floating-point tensors can require grad, got dtype {self.dtype}")
        self.requires_grad = requires_grad
        return self

    # -- what it is --
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)
    device = property(lambda self: backend.device_of(self.data))
    is_leaf = property(lambda self: self._ctx is None)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        dev = ", device='cuda'" if self.device == "cuda" else ""
        return f"tensor({np.array2string(self.numpy(), prefix='tensor(')}, dtype={self.dtype}{dev}{grad})"

    def __len__(self) -> int:
        return len(self.data)

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    # -- conversions --
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (copied from the GPU where needed)."""
        return backend.to_numpy(self.data)

    def item(self) -> float | int | bool:
        if self.size != 1:
            raise ValueError(f"item(): only a one-element tensor has an item, this one has shape {self.shape}")
        return self.data.reshape(()).item()

    def to(self, target: str | DType) -> Tensor:
        """A copy on another device ("cpu", "cuda") or of another dtype; `self` if nothing changes.

        A copy on another device is a new leaf. A float-to-float conversion is an op: gradients flow back
        through it, cast to the input's dtype. An integer or bool result is a plain tensor (no gradient).
        """
        if isinstance(target, str) and target in backend.DEVICES:
            data = backend.to_device(self.data, target)
            return self if data is self.data else Tensor._wrap(data, False).requires_grad_(self.requires_grad)
        dtype = number_dtype("to", target)
        if dtype == self.dtype:
            return self
        if dtype.kind != "f":
            return Tensor._wrap(self.data.astype(dtype), False)
        return elementwise.cast(self, dtype)

    def detach(self) -> Tensor:
        """The same values, cut off from the graph."""
        return Tensor._wrap(self.data, False)

    # -- autograd --
    def backward(self, grad: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into `.grad` of every leaf that requires grad.

        `grad` is d(loss)/d(self): needed when self is not a scalar. The graph's saved arrays are
        freed as it goes unless `retain_graph=True`.
        """
        if not self.requires_grad:
            raise RuntimeError(
                "backward(): this tensor does not require grad: no input it was computed from has "
                "requires_grad=True, or it was computed under no_grad()"
            )
        if grad is None:
            if self.size != 1:
                raise RuntimeError(
                    f"backward(): output of shape {self.shape} is not a scalar; pass its gradient, "
                    "y.backward(dy), or reduce it first (y.sum(), y.mean())"
                )
            grad = backend.get_array_module(self.data).ones_like(self.data)
        else:
            grad = _as_array(grad, self.dtype, self.device, "backward")
            if grad.shape != self.shape:
                raise ValueError(f"backward(): gradient of shape {grad.shape} for a tensor of shape {self.shape}")
        _run_backward(self, grad, retain_graph)

    def zero_grad(self) -> None:
        self.grad = None

    def register_hook(self, hook: Callable[[Tensor], Any]) -> None:
        """Call `hook(grad)` when backward() reaches this tensor, with d(loss)/d(self) as a Tensor.

        If the hook returns a tensor (or array) of the same shape, that replaces the gradient: a leaf
        stores it in .grad, an intermediate result passes it on to what it was computed from. The
        hook must not change `grad` in place. Hooks run in the order they were registered.
        """
        if not self.requires_grad:
            raise RuntimeError(f"register_hook: this tensor of shape {self.shape} does not require grad, "
                               "so backward() never reaches it")
        edge = self._ctx or self  # the graph edge that stands for this tensor: its node, or itself
        # retain_grad's hook stays last, so .grad shows the gradient after every other hook (as PyTorch)
        edge._hooks = tuple(sorted((*edge._hooks, hook), key=lambda h: isinstance(h, _RetainGrad)))

    def retain_grad(self) -> None:
        """Keep d(loss)/d(self) in `.grad` after backward(), also for an intermediate result.

        Leaves keep theirs anyway. Like a leaf's, it accumulates over backward() calls.
        """
        if not self.requires_grad:
            raise RuntimeError(f"retain_grad: this tensor of shape {self.shape} does not require grad")
        if self._ctx is not None and not any(isinstance(h, _RetainGrad) for h in self._ctx._hooks):
            self.register_hook(_RetainGrad(self))

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
    def maximum(self, other) -> Tensor: return elementwise.maximum(self, other)
    def minimum(self, other) -> Tensor: return elementwise.minimum(self, other)
    def where(self, condition, other) -> Tensor: return elementwise.where(condition, self, other)
    def clamp(self, min=None, max=None) -> Tensor: return elementwise.clamp(self, min, max)
    def clip(self, min=None, max=None) -> Tensor: return elementwise.clamp(self, min, max)
    def masked_fill(self, mask, value) -> Tensor: return functional.masked_fill(self, mask, value)
    def relu(self) -> Tensor: return functional.relu(self)

    # those with a dim pass their arguments on, so that each has one signature: the function's (see there)
    def sum(self, *args, **kwargs) -> Tensor: return reductions.sum(self, *args, **kwargs)
    def mean(self, *args, **kwargs) -> Tensor: return reductions.mean(self, *args, **kwargs)
    def max(self, *args, **kwargs) -> Tensor: return reductions.max(self, *args, **kwargs)
    def min(self, *args, **kwargs) -> Tensor: return reductions.min(self, *args, **kwargs)
    def argmax(self, *args, **kwargs) -> Tensor: return reductions.argmax(self, *args, **kwargs)
    def argmin(self, *args, **kwargs) -> Tensor: return reductions.argmin(self, *args, **kwargs)
    def var(self, *args, **kwargs) -> Tensor: return reductions.var(self, *args, **kwargs)
    def std(self, *args, **kwargs) -> Tensor: return reductions.std(self, *args, **kwargs)
    def prod(self, *args, **kwargs) -> Tensor: return reductions.prod(self, *args, **kwargs)
    def logsumexp(self, *args, **kwargs) -> Tensor: return reductions.logsumexp(self, *args, **kwargs)
    def cumsum(self, *args, **kwargs) -> Tensor: return reductions.cumsum(self, *args, **kwargs)
    def any(self, *args, **kwargs) -> Tensor: return reductions.any(self, *args, **kwargs)
    def all(self, *args, **kwargs) -> Tensor: return reductions.all(self, *args, **kwargs)
    def softmax(self, *args, **kwargs) -> Tensor: return functional.softmax(self, *args, **kwargs)
    def log_softmax(self, *args, **kwargs) -> Tensor: return functional.log_softmax(self, *args, **kwargs)
    def split(self, *args, **kwargs) -> tuple[Tensor, ...]: return shapes.split(self, *args, **kwargs)
    def chunk(self, *args, **kwargs) -> tuple[Tensor, ...]: return shapes.chunk(self, *args, **kwargs)
    def squeeze(self, *args, **kwargs) -> Tensor: return shapes.squeeze(self, *args, **kwargs)
    def unsqueeze(self, *args, **kwargs) -> Tensor: return shapes.unsqueeze(self, *args, **kwargs)
    def flatten(self, *args, **kwargs) -> Tensor: return shapes.flatten(self, *args, **kwargs)
    def unflatten(self, *args, **kwargs) -> Tensor: return shapes.unflatten(self, *args, **kwargs)
    def gather(self, *args, **kwargs) -> Tensor: return shapes.gather(self, *args, **kwargs)

    # shapes and dims as varargs, x.reshape(2, 3) or x.reshape((2, 3)), as in PyTorch
    def reshape(self, *shape: int) -> Tensor: return shapes.reshape(self, *shape)
    def transpose(self, dim0: int, dim1: int) -> Tensor: return shapes.transpose(self, dim0, dim1)
    def permute(self, *dims: int) -> Tensor: return shapes.permute(self, *dims)
    def expand(self, *sizes: int) -> Tensor: return shapes.expand(self, *sizes)
    def repeat(self, *sizes: int) -> Tensor: return shapes.repeat(self, *sizes)
    def flip(self, *dims: int) -> Tensor: return shapes.flip(self, dims[0] if len(dims) == 1 else dims)
    def tril(self, diagonal: int = 0) -> Tensor: return shapes.tril(self, diagonal)
    def triu(self, diagonal: int = 0) -> Tensor: return shapes.triu(self, diagonal)


class _RetainGrad:
    """The hook that retain_grad() registers: it stores the gradient in the tensor's .grad."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor  # kept alive by its node's hook, as long as the graph is

    def __call__(self, grad: Tensor) -> None:
        t = self.tensor
        t.grad = grad.data.copy() if t.grad is None else _array(t.grad + grad.data)


def _run_backward(root: Tensor, grad: Any, retain_graph: bool) -> None:
    """Reverse-mode sweep: each node's gradient is complete once every consumer has sent its part.

    The sweep visits nodes (Functions) and leaves (Tensors), the two kinds of graph edge.
    """
    start = root._ctx or root
    grads = {id(start): (grad, False)}  # id(edge) -> (gradient so far, do we own that array?)
    for node in reversed(_topological_order(start)):
        dout, owned = grads.pop(id(node), (None, False))
        if dout is None:
            continue
        if node._hooks:
            dout, owned = _run_hooks(node, dout), False
        if isinstance(node, Tensor):  # a leaf: accumulate into .grad, which must own its memory
            if node.grad is None:
                node.grad = dout if owned else dout.copy()
            else:
                node.grad += dout
            continue
        if isinstance(node, Output):  # one of several outputs: the node's backward gets them all at once
            owner = node.parents[0]
            grads.setdefault(id(owner), ([None] * owner.n_outputs, True))[0][node.index] = dout
            if not retain_graph:
                node.release()
            continue
        for parent, dx in zip(node.parents, _input_grads(node, dout), strict=True):
            if parent is None or dx is None:
                continue
            dx = _array(dx)
            if dx.shape != parent.shape or dx.dtype != parent.dtype:
                raise RuntimeError(
                    f"{type(node).__name__}.backward returned a gradient of shape {dx.shape} and dtype "
                    f"{dx.dtype} for an input of shape {parent.shape} and dtype {parent.dtype}"
                )
            fresh = dx is not dout and dx.base is None  # speed: ours to add into (see the Function docstring)
            if id(parent) not in grads:
                grads[id(parent)] = (dx, fresh)
                continue
            total, owned = grads[id(parent)]
            if owned:
                total += dx  # speed: in place, as this array is ours (not a new array per extra use)
            else:
                grads[id(parent)] = (_array(total + dx), True)
        if not retain_graph:
            node.release()


def _run_hooks(edge: Function | Tensor, dout: Any) -> Any:
    """The gradient of the tensor `edge` stands for, after its hooks (each may return a replacement)."""
    for hook in edge._hooks:
        result = hook(Tensor._wrap(dout, False))
        if result is not None:
            new = _array(result.data if isinstance(result, Tensor) else result)
            if (getattr(new, "shape", None), getattr(new, "dtype", None)) != (dout.shape, dout.dtype) \
                    or backend.device_of(new) != backend.device_of(dout):
                raise RuntimeError(f"hook {getattr(hook, '__name__', hook)!r} returned {type(new).__name__} "
                                   f"{getattr(new, 'shape', '')} {getattr(new, 'dtype', '')} for a gradient of "
                                   f"shape {dout.shape} and dtype {dout.dtype} on {backend.device_of(dout)}")
            dout = new
    return dout


def _input_grads(node: Function, dout: Any) -> tuple[Any, ...]:
    """node.backward(dout), checked: one gradient per input, in a tuple."""
    dxs = node.backward(dout)
    name = type(node).__name__
    if not isinstance(dxs, (tuple, list)):
        raise TypeError(f"{name}.backward returned {type(dxs).__name__} instead of a tuple with one gradient "
                        f"per input; for a single input write `return (dx,)`")
    if len(dxs) != len(node.parents):
        raise TypeError(f"{name}.backward returned {len(dxs)} gradients for {len(node.parents)} inputs")
    return dxs


def _topological_order(start: Function | Tensor) -> list[Function | Tensor]:
    """Nodes and leaves that need a gradient, each after everything it was computed from.

    Depth-first with an explicit stack instead of recursion, so a graph of any depth works.
    """
    order: list[Function | Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[Function | Tensor, bool]] = [(start, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        if isinstance(node, Function):
            if node.parents is None:
                raise RuntimeError(
                    "backward(): this graph was already used by a backward() call and its saved "
                    "arrays were freed; pass retain_graph=True to the first call to go through it twice"
                )
            stack.extend((p, False) for p in node.parents if p is not None and id(p) not in visited)
    return order


# the op modules need Tensor and Function, defined above
from minigrad import elementwise, functional, matmul, reductions, shapes  # noqa: E402

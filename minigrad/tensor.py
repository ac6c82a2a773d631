"""Tensor, Function (one primitive, one graph node) and reverse-mode backward(); grad mode and the other
per-thread switches. Read this file first: every op module (elementwise.py, reductions.py, shapes.py,
matmul.py, activations.py) defines Functions, and Tensor's operators call those modules' functions.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from minigrad import backend
from minigrad.arrays import as_array, as_axis
from minigrad.dtypes import DEFAULT_FLOAT, DType, check_same_device_and_dtype, number_dtype, number_kind

# ---- per-thread switches: grad mode, the fused path, the compiled kernels, the function hook ----

class _Modes(threading.local):
    """This thread's switches, which the ops read (`modes.grad`, ...) and the context managers below set. Each thread
    starts with grad mode on, the fused path and the compiled kernels off and no hook, as in PyTorch for grad mode."""

    def __init__(self) -> None:
        self.grad = True
        self.fused = False
        self.kernels: Any = None  # the module minigrad.kernels while mg.compiled() is on: `kernels = modes.kernels`
        self.hook: Callable[[Function, str, Callable[[], Any]], Any] | None = None


modes = _Modes()


class _Switch(contextlib.ContextDecorator):
    """A per-thread setting for the block it guards; each exit restores what its own entry found, so one
    object may be entered again while in use (nested, or by a decorated function that calls itself)."""

    name = ""

    def __init__(self, value: Any) -> None:
        self.value, self.saved = value, []

    def __enter__(self) -> None:
        self.saved.append(getattr(modes, self.name))
        setattr(modes, self.name, self.value)

    def __exit__(self, *exc: object) -> None:
        setattr(modes, self.name, self.saved.pop())

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """As a decorator: the function runs inside the block; a generator function's body too, each time it resumes
        (its caller keeps its own setting in between), as PyTorch's decorators do."""
        if not inspect.isgeneratorfunction(func):
            return super().__call__(func)

        @functools.wraps(func)
        def resumed_inside(*args: Any, **kwargs: Any) -> Any:
            gen, sent, thrown = func(*args, **kwargs), None, None
            while True:
                with self:
                    try:
                        value = gen.send(sent) if thrown is None else gen.throw(thrown)
                    except StopIteration as stop:
                        return stop.value
                try:
                    sent, thrown = (yield value), None
                except GeneratorExit:
                    with self:
                        gen.close()
                    raise
                except BaseException as err:  # thrown into the generator: its body handles it inside the block
                    sent, thrown = None, err

        return resumed_inside


class _GradSwitch(_Switch):
    """no_grad and enable_grad: a with-block, or a decorator with or without parentheses (@mg.no_grad), as in
    PyTorch."""

    name = "grad"
    value = True

    def __new__(cls, func: Callable[..., Any] | None = None) -> Any:
        if func is None:
            return super().__new__(cls)
        if not callable(func):
            raise TypeError(f"{cls.__name__}() takes no arguments; as a decorator it is @mg.{cls.__name__} or "
                            f"@mg.{cls.__name__}(), got {type(func).__name__} {func!r:.40}")
        return cls()(func)  # @mg.no_grad without parentheses: the decorated function

    def __init__(self, func: Callable[..., Any] | None = None) -> None:
        super().__init__(self.value)


class no_grad(_GradSwitch):
    """`with mg.no_grad():` (or as a decorator): nothing inside is recorded for backward."""

    value = False


class enable_grad(_GradSwitch):
    """`with mg.enable_grad():` (or as a decorator): grad mode on inside, also within a no_grad block."""

    value = True


class set_grad_enabled(_Switch):
    """Grad mode on or off, as torch.set_grad_enabled: at once, as a function call (mg.set_grad_enabled(False)), or
    for a with-block, which then restores the mode found at the call; as a decorator only for the function."""

    name = "grad"

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: mode must be True or False, got {type(mode).__name__} {mode!r:.40}")
        super().__init__(mode)
        self.found, modes.grad = modes.grad, mode  # found: restored by the first exit (None once entered)

    def __enter__(self) -> None:
        if self.found is None:
            return super().__enter__()
        self.saved.append(self.found)  # `with mg.set_grad_enabled(m):` the call switched already; the exit restores
        self.found, modes.grad = None, self.value

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        if self.found is not None:  # as a decorator, the call's switch is undone: only the function runs in `mode`
            self.found, modes.grad = None, self.found
        return super().__call__(func)


def is_grad_enabled() -> bool:
    return modes.grad


class fused(_Switch):
    """`with mg.fused():` the models' attention runs as one node, F.scaled_dot_product_attention, instead of its
    four steps written out (models/attention.py, where the choice is made); mg.fused(False) turns it off again."""

    name = "fused"

    def __init__(self, enabled: bool = True) -> None:
        super().__init__(bool(enabled))


def is_fused_enabled() -> bool:
    return modes.fused


class compiled(_Switch):
    """`with mg.compiled():` the Functions that have a compiled kernel (minigrad.kernels: GELU, layer norm, attention's
    weights and their backward, F.softmax's backward, Adam(W)(fused=True)'s step) run it on float32 CPU arrays instead
    of their NumPy code, chosen in forward (and kept for backward), on every core; float32 matrix products run on the
    same threads, and NumPy's own BLAS on one thread meanwhile (process-wide, until the outermost block exits). The
    optional extra `pip install -e '.[compiled]'` (Numba) must be installed. mg.compiled(False) turns it off again."""

    name = "kernels"

    def __init__(self, enabled: bool = True) -> None:
        if not enabled:
            return super().__init__(None)
        try:
            from minigrad import kernels  # only here: the extra is optional, and Numba takes a while to import
        except ImportError as e:
            raise ImportError(f"mg.compiled() needs Numba, the optional extra: pip install -e '.[compiled]' "
                              f"(or pip install numba): {e}") from None
        super().__init__(kernels)

    def __enter__(self) -> None:
        super().__enter__()
        if self.value is not None:  # the cores are the kernels' (and the matrix products run on their threads)
            self.value.take_cores()

    def __exit__(self, *exc: object) -> None:
        if self.value is not None:
            self.value.give_cores()
        super().__exit__(*exc)


def is_compiled_enabled() -> bool:
    return modes.kernels is not None


class intercept(_Switch):
    """`with intercept(hook):` every Function.forward and .backward this thread runs is called as
    hook(node, "forward" or "backward", run), which must return run(): a way in for profilers and checks."""

    name = "hook"


# ---- Function: one primitive, one graph node ----

class Function:
    """A primitive with a hand-written backward; an instance is both the graph node and the `ctx`.

    forward(self, *arrays, **options) -> array saves on self what backward needs; backward(self, dout)
    returns one dx per input (None where `needs_input_grad` says no gradient is needed). The whole
    protocol, and how to write your own, is in docs/backward.md ("Writing your own Function").
    """

    parents: tuple[Function | Tensor | None, ...] | None = ()  # per input: the node that computed it, the leaf
    needs_input_grad: tuple[bool, ...] = ()  # itself, or None where no gradient is needed
    # per input, then per output: (its version counter, the version then, id of its array), which backward
    # compares with the version now wherever this node still holds that array (see _refuse_modified)
    versions: Sequence[tuple[list[int], int, int]] = ()
    view = False  # True: forward may return a view of its first input, which then shares its memory and version
    _hooks: tuple[Any, ...] = ()  # register_hook / retain_grad on the tensor this node computed
    _op = "function"  # the name in error messages, once per subclass: LinearFunction -> "linear"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._op = cls.__name__.removesuffix("Function").lower()

    @classmethod
    def apply(cls, *inputs: Tensor, **options: Any) -> Tensor | tuple[Tensor, ...]:
        """Run forward on the inputs' arrays; where a gradient is wanted, record the node for backward."""
        op, arrays, needs, edges = cls._op, [], [], []
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):  # an option given by position, or an array not wrapped yet
                raise TypeError(
                    f"{op}: input {i} is a {type(t).__name__} ({t!r}), not a tensor; options are keyword arguments: "
                    f"{cls.__name__}.apply(x, name={t!r}) calls forward(x.data, name={t!r})"
                    if isinstance(t, (int, float, np.generic)) else
                    f"{op}: input {i} is a {type(t).__name__}, not a tensor; wrap it with mg.tensor()")
            if t._view is not None and t._view.version != t._version_counter[0]:
                t._view.refresh(t)  # its base was written in place since: its node is made again, from the base
            if i and (t.dtype != arrays[0].dtype or type(t._data) is not type(arrays[0])):  # another dtype or device
                check_same_device_and_dtype(op, inputs)  # raises, naming every input's shape and dtype or device
            arrays.append(t._data)
            needs.append(t._requires_grad)
            edges.append((t._ctx or t) if t._requires_grad else None)  # the node that computed t, or t itself
        fn = cls()
        requires_grad = modes.grad and any(needs)
        if requires_grad:
            fn.needs_input_grad = tuple(needs)
        try:
            if modes.hook is None:
                out = fn.forward(*arrays, **options)
            else:
                out = modes.hook(fn, "forward", lambda: fn.forward(*arrays, **options))
        except (ValueError, TypeError) as err:  # a NumPy/CuPy complaint: say which op and which shapes
            shapes = ", ".join(str(t.shape) for t in inputs)
            kind = ValueError if isinstance(err, ValueError) else TypeError
            raise kind(f"{op}: inputs of shapes {shapes}: {err}") from None
        if isinstance(out, tuple):  # several outputs (split): each reaches this node through its own edge
            results = tuple(Tensor.wrap(o, requires_grad) for o in out)
            if requires_grad:
                fn.n_outputs = len(out)
                for i, r in enumerate(results):
                    r._ctx = Output(fn, i, r._data)
        else:
            results = (Tensor.wrap(out, requires_grad),)
            if requires_grad:
                fn.shape, fn.dtype = out.shape, out.dtype  # what this node hands its consumers, for checks
                results[0]._ctx = fn
        if requires_grad:
            fn.parents = tuple(edges)
            fn.versions = versions = []
            for t in (*inputs, *results):  # a plain loop, so that no comprehension joins the walk (test_layout)
                versions.append((t._version_counter, t._version_counter[0], id(t._data)))
        if cls.view:
            _share_memory(inputs[0], results, cls, options, isinstance(out, tuple))
        return results if isinstance(out, tuple) else results[0]

    def forward(self, *arrays: Any, **options: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward(self, *arrays, **options), which "
                                  "returns the output array (docs/backward.md, 'Writing your own Function')")

    def backward(self, dout: Any) -> tuple[Any, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not define backward(self, dout), which returns one "
                                  "gradient per input (docs/backward.md, 'Writing your own Function')")

    def release(self) -> None:
        """Drop the arrays saved for backward once it has used them, and with them the inputs: backward() refuses to
        pass again. A node that saved no array (add, reshape: shapes only) stays whole, and may, as in PyTorch."""
        freed = False
        for key, value in tuple(self.__dict__.items()):  # a plain loop: no comprehension joins the walk (test_layout)
            if type(value) in backend.ARRAY_TYPES or type(value) in (tuple, list) \
                    and not backend.ARRAY_TYPES.isdisjoint(map(type, value)):  # an array, or a tuple holding one
                del self.__dict__[key]
                freed = True
        if freed:
            self.parents = None


class Output(Function):
    """The edge to output `index` of a node with several outputs: the sweep files its gradient in the
    node's list, and calls the node's one backward with all of them."""

    def __init__(self, node: Function, index: int, array: Any) -> None:
        self.parents, self.index = (node,), index
        self.shape, self.dtype = array.shape, array.dtype  # for the checks, as a one-output node has


def _array(value: Any) -> Any:
    """A NumPy scalar (what NumPy arithmetic on 0-d arrays returns) as a 0-d array, which can be written in place."""
    return backend.get_array_module(value).asarray(value) if isinstance(value, np.generic) else value


# ---- Tensor ----

class Tensor:
    """An n-dimensional array that can record the operations applied to it for backward().

    Its version counts the in-place writes into its memory (in-place ops, x[idx] = v, optimizer steps, .data =);
    views of it (x[0], x.reshape(...), x.T, x.detach()) share its memory and so its counter. A node that saved
    the array for backward refuses to run once the version has moved on, as in PyTorch.
    """

    __slots__ = ("_data", "_grad", "_requires_grad", "_ctx", "_hooks", "_version_counter", "_view", "__weakref__")
    __hash__ = object.__hash__  # == builds a comparison tensor, so hash by identity
    __array_ufunc__ = None  # np.float64(2) * x: NumPy defers to Tensor.__rmul__ instead of making an object array

    def __init__(self, data: Any, requires_grad: bool = False, dtype: DType | None = None,
                 device: str | None = None, *, copy: bool = True) -> None:
        """A new leaf holding a copy of `data`, as torch.tensor makes one; copy=False shares an array that already has
        the dtype and device asked for (as torch.as_tensor), and then its version too where `data` is a tensor."""
        self._data = as_array(data, dtype, device, copy=copy)
        self._grad = None
        self._requires_grad = False
        self._ctx: Function | None = None
        self._hooks: tuple[Any, ...] = ()
        shared = isinstance(data, Tensor) and self._data is data._data
        self._version_counter = data._version_counter if shared else [0]
        self._view: _View | None = None
        self.requires_grad_(requires_grad)

    @classmethod
    def wrap(cls, data: Any, requires_grad: bool = False) -> Tensor:
        """A tensor around `data`, already a backend array (or a NumPy scalar): no copy, no check; for op results."""
        t = object.__new__(cls)
        t._data, t._grad, t._requires_grad, t._ctx, t._hooks = _array(data), None, requires_grad, None, ()
        t._version_counter, t._view = [0], None
        return t

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    def _set_requires_grad(self, requires_grad: bool) -> None:
        """x.requires_grad = flag (and requires_grad_): a leaf's flag, for a floating-point tensor, as in PyTorch."""
        if not isinstance(requires_grad, bool):  # "yes" or 0 would pass as a flag; PyTorch refuses them too
            raise TypeError(f"requires_grad must be True or False, got {type(requires_grad).__name__} "
                            f"{requires_grad!r:.40}")
        if requires_grad and self._data.dtype.kind != "f":
            raise TypeError(f"only floating-point tensors can require grad, got dtype {self.dtype}")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError(f"requires_grad = False: only a leaf's flag can change, and this tensor was computed "
                               f"by {self._ctx._op}; x.detach() gives its values outside the graph")
        self._requires_grad = requires_grad

    def _set_grad(self, grad: Any) -> None:
        """x.grad = array (or tensor, or None): refused unless of x's shape, dtype and device, as in PyTorch; .grad is
        then that array itself, which backward() adds into."""
        if grad is self:
            raise RuntimeError("grad: a tensor cannot be assigned as its own grad")
        array = grad._data if isinstance(grad, Tensor) else _array(grad)
        if array is not None:
            if not backend.is_array(array):
                raise TypeError(f"grad: expected a NumPy or CuPy array, a tensor or None, got {type(grad).__name__}")
            found = (tuple(array.shape), array.dtype, backend.device_of(array))
            if found != (self.shape, self.dtype, self.device):
                raise RuntimeError(f"grad: assigned a gradient of shape {found[0]}, dtype {found[1]} on {found[2]} "
                                   f"to a tensor of shape {self.shape}, dtype {self.dtype} on {self.device}; it must "
                                   "match all three")
        self._grad = array

    # the getters are C (attrgetter), so that reading them costs no call of ours: the engine reads them on every op
    requires_grad = property(attrgetter("_requires_grad"), _set_requires_grad, doc="Whether backward() reaches it")
    grad = property(attrgetter("_grad"), _set_grad, doc="d(loss)/d(self) once backward() has run: an array, or None")

    # -- what it is --
    def _set_data(self, value: Any) -> None:
        """t.data = array (or a tensor's array): the tensor holds another array of numbers; a write, so the version
        goes up."""
        value = value._data if isinstance(value, Tensor) else _array(value)
        if not backend.is_array(value) or value.dtype.kind not in "biuf":
            raise TypeError(f"data: expected a NumPy or CuPy array of numbers, got {type(value).__name__} "
                            f"{getattr(value, 'dtype', '')}")
        if self.requires_grad and value.dtype.kind != "f":
            raise TypeError(f"data: a tensor that requires grad holds floats, got dtype {value.dtype}")
        self._data = value
        self._version_counter[0] += 1

    # C getters (attrgetter), as for grad: the engine reads these on every op
    data = property(attrgetter("_data"), _set_data, doc="The backend array itself (writes into it are not counted)")
    shape = property(attrgetter("_data.shape"))
    ndim = property(attrgetter("_data.ndim"))
    dtype = property(attrgetter("_data.dtype"))
    device = property(lambda self: backend.device_of(self._data))
    _version = property(lambda self: self._version_counter[0])  # as PyTorch's x._version: writes counted so far

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        """The shape, or with a dim that axis's length, as PyTorch's x.size(); numel() counts the elements."""
        return self.shape if dim is None else self.shape[as_axis("size", dim, self.shape)]

    def numel(self) -> int:
        """The number of elements (NumPy's size)."""
        return self._data.size

    def dim(self) -> int:
        return self._data.ndim

    @property
    def is_leaf(self) -> bool:
        self._refresh_if_stale()
        return self._ctx is None

    @property
    def grad_fn(self) -> Function | None:
        """The node that computed this tensor, None for a leaf (as PyTorch's grad_fn)."""
        self._refresh_if_stale()
        return self._ctx

    def _refresh_if_stale(self) -> None:
        if self._view is not None and self._view.version != self._version_counter[0]:
            self._view.refresh(self)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        dev = ", device='cuda'" if self.device == "cuda" else ""
        return f"tensor({np.array2string(self.numpy(), prefix='tensor(')}, dtype={self.dtype}{dev}{grad})"

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
        if self._data.size != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()")
        return bool(self.item())

    # -- conversions --
    def numpy(self) -> np.ndarray:
        """The values as a NumPy array: on the CPU the array itself (shared, as PyTorch's), from the GPU a copy."""
        return backend.to_numpy(self._data)

    def item(self) -> float | int | bool:
        if self._data.size != 1:
            raise RuntimeError(f"item(): only a one-element tensor has an item, this one has shape {self.shape}")
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def _scalar(self, what: str) -> float | int | bool:
        if self._data.size != 1:  # a ValueError here, as PyTorch's (item() raises a RuntimeError, as PyTorch's)
            raise ValueError(f"{what}(): only a one-element tensor converts to a Python number, this one has shape "
                             f"{self.shape}")
        return self.item()

    def __index__(self) -> int:
        if self.dtype.kind not in "biu":
            raise TypeError(f"only integer tensors of a single element can be used as an index, got dtype {self.dtype}")
        return int(self.item())

    def __format__(self, spec: str) -> str:
        """f"{loss:.4f}" formats a one-element tensor's value; f"{x}" is a 0-d tensor's value (as PyTorch's)."""
        if self._data.size == 1 and (self.ndim == 0 or spec):
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """np.asarray(x): the values, the array itself where no copy is needed; CPU tensors only, as in PyTorch."""
        if self.device != "cpu":
            raise TypeError(f"np.asarray: this tensor of shape {self.shape} is on {self.device}; x.numpy() copies it "
                            "to the host")
        array = self._data if dtype is None else self._data.astype(dtype, copy=False)
        return array.copy() if copy else array

    def to(self, target: str | DType) -> Tensor:
        """A copy on another device ("cpu", "cuda": a new leaf) or of another dtype; `self` if nothing changes.
        A float-to-float conversion is an op that gradients flow back through; an integer or bool result is
        a plain tensor."""
        if isinstance(target, str) and target in backend.DEVICES:
            data = backend.to_device(self._data, target)
            return self if data is self._data else Tensor.wrap(data, False).requires_grad_(self.requires_grad)
        dtype = number_dtype("to", target)
        if dtype == self.dtype:
            return self
        if dtype.kind != "f":
            return Tensor.wrap(self._data.astype(dtype), False)
        return elementwise.cast(self, dtype)

    def detach(self) -> Tensor:
        """The same values, cut off from the graph. It shares this tensor's memory, so also its version: a write into
        either is seen by whatever saved the other (as PyTorch's detach)."""
        t = Tensor.wrap(self._data, False)
        t._version_counter = self._version_counter
        return t

    def clone(self) -> Tensor:
        """A copy in new memory, in the graph (dx = dout), as PyTorch's clone."""
        return elementwise.clone(self)

    def is_contiguous(self) -> bool:
        """Whether its elements lie in memory in row-major order, one after another (not after a transpose)."""
        return bool(self._data.flags.c_contiguous)

    def contiguous(self) -> Tensor:
        """This tensor if contiguous, else a row-major copy in the graph (clone), as PyTorch's: what view() needs."""
        return self if self.is_contiguous() else elementwise.clone(self)

    # -- autograd --
    def backward(self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Tensor | Sequence[Tensor] | None = None) -> None:
        """Accumulate d(self)/d(leaf) into `.grad` of every leaf that requires grad, or only of `inputs` (leaves or
        not); `gradient` is d(loss)/d(self), needed when self is not a scalar. The graph's saved arrays are freed
        unless retain_graph=True. As torch.Tensor.backward; create_graph=True is refused (see mg.autograd.grad)."""
        targets = None if inputs is None else _targets("backward", inputs)
        for t in (targets or {}).values():  # a non-leaf input retains its gradient, from now on too, as in PyTorch
            t.retain_grad()
        captured = _run_backward("backward", (self,), (gradient,), bool(retain_graph), create_graph, targets)
        for key, t in (targets or {}).items():  # the leaves among the inputs (retain_grad's hook stored the others)
            g = captured.get(key)
            if g is not None and t.is_leaf:  # accumulated as the sweep does a leaf's: g is ours (a copy)
                if t._grad is None:
                    t._grad = g
                else:
                    t._grad += g

    def zero_grad(self) -> None:
        self._grad = None

    def register_hook(self, hook: Callable[[Tensor], Any]) -> RemovableHandle:
        """Call hook(grad) with d(loss)/d(self) when backward() reaches this tensor, in the order registered;
        a tensor (or array) of the same shape that it returns replaces the gradient. It must not change grad.
        An in-place write into self later leaves the hook with the values it was registered on, as in PyTorch.
        Returns a handle: handle.remove() takes the hook off again."""
        self._refresh_if_stale()
        if not self._requires_grad:
            raise RuntimeError(f"register_hook: this tensor of shape {self.shape} does not require grad, "
                               "so backward() never reaches it")
        if not callable(hook):
            raise TypeError(f"register_hook: expected a function of the gradient, got {type(hook).__name__}")
        edge = self._ctx or self  # the graph edge that stands for this tensor: its node, or itself
        # retain_grad's hook stays last, so .grad shows the gradient after every other hook (as PyTorch)
        edge._hooks = tuple(sorted((*edge._hooks, hook), key=lambda h: isinstance(h, _RetainGrad)))
        return RemovableHandle(edge, "_hooks", hook)

    def retain_grad(self) -> None:
        """Keep d(loss)/d(self) in `.grad` after backward(), also for an intermediate result (leaves keep theirs
        anyway); like a leaf's, it accumulates over backward() calls. After an in-place write it is the gradient
        of the latest values. The graph holds the tensor weakly: it lives as long as you keep it, as in PyTorch."""
        self._refresh_if_stale()
        if not self._requires_grad:
            raise RuntimeError(f"retain_grad: this tensor of shape {self.shape} does not require grad")
        if not self.retains_grad and self._ctx is not None:
            self.register_hook(_RetainGrad(self))

    @property
    def retains_grad(self) -> bool:
        """Whether retain_grad() was called on this intermediate result (False for a leaf, as in PyTorch)."""
        self._refresh_if_stale()
        hooks = () if self._ctx is None else self._ctx._hooks
        return any(isinstance(h, _RetainGrad) and h.tensor() is self for h in hooks)

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
    clip_ = clamp_

    def _write(self, op: str, compute: Callable[..., Tensor], *operands: Any) -> Tensor:
        """Write compute(self, *operands), an out-of-place op giving self's shape and dtype, into self's own memory
        (so every view of it sees it), and count the write. Where it is recorded for backward (grad mode, and a
        gradient wanted), compute runs on a copy of the old values, which its node may keep, and self takes the
        result's place in the graph, as does self's base if self is a view of one (see CopySlices)."""
        self._refresh_if_stale()
        view = self._view
        if modes.grad and view is not None and view.base.requires_grad and not self.requires_grad:
            view.refresh(self)  # a view made under no_grad: its values come from the base, and so will its gradient
        if modes.grad:
            leaf = self if view is None else view.base
            if leaf.requires_grad and leaf._ctx is None:
                what = "a leaf tensor" if view is None else "a view of a leaf tensor"
                raise RuntimeError(f"{op}: {what} that requires grad (shape {leaf.shape}) is being used in an in-place "
                                   "operation; update it under mg.no_grad(), as an optimizer does, or write into a "
                                   "copy (x.clone())")
        recording = modes.grad and (self.requires_grad or any(isinstance(o, Tensor) and o.requires_grad
                                                               for o in operands))
        if recording and view is not None and view.steps[-1][2] is not None:
            raise RuntimeError(f"{op}: this tensor of shape {self.shape} is one of several views that "
                               f"{view.steps[-1][0]._op} returned, which cannot be written in place where a gradient "
                               "is recorded; use an out-of-place op (x = x + y)")
        if any(s == 0 and n > 1 for s, n in zip(self._data.strides, self.shape, strict=True)) \
                or not getattr(self._data.flags, "writeable", True):
            raise RuntimeError(f"{op}: several elements of this tensor of shape {self.shape} share one memory "
                               "location (an expand() view), or its memory is read-only; write into x.clone()")
        old = self
        if recording:  # compute's node may keep the old values: they must outlive the write
            old = Tensor.wrap(self._data.copy(), self.requires_grad)
            old._ctx = self._ctx
        result = compute(old, *operands)
        if result.shape != self.shape or result.dtype != self.dtype:
            raise RuntimeError(f"{op}: the result, of shape {result.shape} and dtype {result.dtype}, cannot be "
                               f"written into this tensor of shape {self.shape} and dtype {self.dtype}; compute it "
                               "out of place")
        self._data[...] = result._data
        self._version_counter[0] += 1
        if result.requires_grad:
            _move_retained(self._ctx, result._ctx, self)
            self._ctx, self._requires_grad = result._ctx, True
            if view is not None:  # the base now holds the new values where the view lies, the old ones elsewhere
                base = view.base
                before = Tensor.wrap(base._data, base.requires_grad)
                before._ctx = base._ctx
                after = shapes.CopySlices.apply(before, result, steps=view.steps)
                _move_retained(base._ctx, after._ctx, base)
                base._ctx, base._requires_grad = after._ctx, True
        if view is not None:
            view.version = self._version_counter[0]
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
    def masked_fill(self, mask, value) -> Tensor: return elementwise.masked_fill(self, mask, value)
    def relu(self) -> Tensor: return activations.relu(self)

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

    # shapes and dims as varargs, x.reshape(2, 3) or x.reshape((2, 3)), as in PyTorch
    def reshape(self, *shape: int) -> Tensor: return shapes.reshape(self, *shape)
    def transpose(self, dim0: int, dim1: int) -> Tensor: return shapes.transpose(self, dim0, dim1)
    def permute(self, *dims: int) -> Tensor: return shapes.permute(self, *dims)
    def expand(self, *sizes: int) -> Tensor: return shapes.expand(self, *sizes)
    def repeat(self, *sizes: int) -> Tensor: return shapes.repeat(self, *sizes)
    def flip(self, *dims: int) -> Tensor: return shapes.flip(self, dims[0] if len(dims) == 1 else dims)
    def tril(self, diagonal: int = 0) -> Tensor: return shapes.tril(self, diagonal)
    def triu(self, diagonal: int = 0) -> Tensor: return shapes.triu(self, diagonal)
    def view(self, *shape: int) -> Tensor: return shapes.view(self, *shape)
    def t(self) -> Tensor: return shapes.t(self)

    # dtype conversions as PyTorch names them, each x.to(dtype) (the same tensor where it already has that dtype);
    # last in the class, as their names are the builtins' within the class body
    def float(self) -> Tensor: return self.to(np.float32)
    def double(self) -> Tensor: return self.to(np.float64)
    def long(self) -> Tensor: return self.to(np.int64)
    def int(self) -> Tensor: return self.to(np.int32)
    def bool(self) -> Tensor: return self.to(np.bool_)


class _RetainGrad:
    """The hook that retain_grad() registers: it stores the gradient in the tensor's .grad, while the tensor lives."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = weakref.ref(tensor)  # the graph does not keep it alive (y = x * 2; y.retain_grad(); del y)

    def __call__(self, grad: Tensor) -> None:
        t = self.tensor()
        if t is not None:
            t._grad = grad.data.copy() if t._grad is None else _array(t._grad + grad.data)


class RemovableHandle:
    """What register_hook (and a Module's forward hooks) return, as torch.utils.hooks.RemovableHandle: remove() takes
    that one hook off again (a no-op once done, or once its owner is gone); `with handle:` removes it at the end."""

    def __init__(self, owner: Any, attribute: str, entry: Any) -> None:
        self.owner, self.attribute, self.entry = weakref.ref(owner), attribute, entry

    def remove(self) -> None:
        owner = self.owner()
        hooks = () if owner is None else getattr(owner, self.attribute)
        for i, h in enumerate(hooks):
            if h is self.entry:  # this registration only: the same function registered twice has two entries
                object.__setattr__(owner, self.attribute, hooks[:i] + hooks[i + 1:])
                break
        self.entry = None

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def increment_version(tensor: Tensor) -> None:
    """Count a write into the tensor's memory made behind the API (an optimizer's step on p.data): whatever saved
    it, or a view of it, for backward then refuses to use it (PyTorch: torch.autograd.graph.increment_version)."""
    tensor._version_counter[0] += 1


def _move_retained(old: Function | None, new: Function | None, tensor: Tensor) -> None:
    """retain_grad's hook follows `tensor` from the node that computed its old values to the one that computes
    its new values, so that .grad is the gradient of the latest version (as in PyTorch); other hooks stay."""
    if old is None or new is None:
        return
    moved = tuple(h for h in old._hooks if isinstance(h, _RetainGrad) and h.tensor() is tensor)
    if moved:
        old._hooks = tuple(h for h in old._hooks if h not in moved)
        new._hooks = (*new._hooks, *moved)


def _scaled(other: Any, alpha: float) -> Any:
    """other * alpha, for add_(other, alpha=...) and sub_; alpha=1 leaves other as it is."""
    if alpha == 1:
        return other
    if isinstance(other, Tensor):
        return elementwise.mul(other, alpha)
    number_kind("alpha", other)  # a number (a list would be repeated): anything else is a TypeError
    return other * alpha


# ---- views: tensors that share a base's memory ----

@dataclass(slots=True)
class _View:
    """How a view tensor was cut from its base, whose memory and version it shares: the view ops from the base,
    each (Function class, its options, which of its outputs or None), and the version its node was made at."""

    base: Tensor
    steps: tuple[tuple[type[Function], dict[str, Any], int | None], ...]
    version: int

    def refresh(self, t: Tensor) -> None:
        """t's node made again from the base, whose values an in-place write changed since (as PyTorch makes a
        view's grad_fn again): the view ops replayed on the base, recorded even under no_grad."""
        grad, modes.grad = modes.grad, True
        try:
            v = self.base
            for cls, options, index in self.steps:
                v = cls.apply(v, **options)
                v = v if index is None else v[index]
        finally:
            modes.grad = grad
        _move_retained(t._ctx, v._ctx, t)
        t._ctx, t._requires_grad, self.version = v._ctx, v._requires_grad, t._version_counter[0]


def _share_memory(x: Tensor, results: tuple[Tensor, ...], cls: type[Function], options: dict[str, Any],
                  several: bool) -> None:
    """Results of a view op (cls.view) that lie in x's memory share x's version counter, and remember how they
    were cut from x's base (x, or the base x was cut from), so that an in-place write through one is seen by all."""
    xp = backend.get_array_module(x._data)
    base, steps = (x, ()) if x._view is None else (x._view.base, x._view.steps)
    for i, r in enumerate(results):
        if xp.may_share_memory(r._data, x._data):
            r._version_counter = x._version_counter
            r._view = _View(base, (*steps, (cls, options, i if several else None)), x._version_counter[0])


_FREED = ("backward(): this graph was already used by a backward() call and its saved arrays were freed; pass "
          "retain_graph=True to the first call to go through it twice")


def _run_backward(op: str, outputs: Sequence[Tensor], gradients: Sequence[Any], retain_graph: bool,
                  create_graph: bool, targets: dict[int, Tensor] | None = None, early: bool = False) -> dict[int, Any]:
    """Reverse-mode sweep over nodes (Functions) and leaves (Tensors), the two kinds of graph edge: each
    one's gradient is complete once every consumer has sent its part. It starts from `outputs`, each with its
    d(loss)/d(output) (None: 1 for a scalar). With `targets` (id of an edge -> its tensor), only the part of the graph
    that leads to them runs, and their gradients are returned (after the hooks), leaving every leaf's .grad alone;
    early=True takes the gradient of a target the sweep goes on past before its hooks, as torch.autograd.grad does."""
    if create_graph:
        raise NotImplementedError(f"{op}: create_graph=True (gradients of gradients) is not supported: backward "
                                  "computes on arrays, outside the graph")
    starts, grads = [], {}  # grads: id(edge) -> (gradient so far, do we own that array?)
    for i, (t, grad) in enumerate(zip(outputs, gradients, strict=True)):
        which = f"output {i}: " if len(outputs) > 1 else ""
        if t._view is not None and t._view.version != t._version_counter[0]:
            t._view.refresh(t)
        if not t._requires_grad:
            raise RuntimeError(f"{op}(): {which}this tensor does not require grad: no input it was computed from has "
                               "requires_grad=True, or it was computed under no_grad()")
        if grad is None:
            if t._data.size != 1:
                raise RuntimeError(f"{op}(): {which}output of shape {t.shape} is not a scalar; pass its gradient, "
                                   "y.backward(dy), or reduce it first (y.sum(), y.mean())")
            grad = backend.get_array_module(t._data).ones_like(t._data)
        else:
            grad = as_array(grad, t.dtype, t.device, op)
            if grad.shape != t.shape:
                raise ValueError(f"{op}(): {which}gradient of shape {grad.shape} for a tensor of shape {t.shape}")
        start = t._ctx or t
        starts.append(start)
        total = grads.get(id(start))  # two outputs that are one tensor: their gradients add
        grads[id(start)] = (grad, False) if total is None else (_array(total[0] + grad), True)
    order = _topological_order(*starts)
    needed = through = None
    if targets is not None:
        needed, through, freed = _leading_to(order, targets)
    captured: dict[int, Any] = {}
    enabled, modes.grad = modes.grad, False  # backward computes outside the graph: grad mode off, as in PyTorch
    try:
        for node in reversed(order):
            dout, owned = grads.pop(id(node), (None, False))
            if dout is None or needed is not None and id(node) not in needed:
                continue
            if needed is not None and early and id(node) in targets and id(node) in through:
                captured[id(node)] = dout.copy()  # an input asked for that the sweep goes past: before its hooks
            if node._hooks:
                dout, owned = _run_hooks(node, dout), False
            if needed is not None and id(node) in targets and id(node) not in captured:  # an input asked for
                captured[id(node)] = dout if owned else dout.copy()
                if id(node) not in through:
                    continue
            if isinstance(node, Tensor):  # a leaf: accumulate into .grad, which must own its memory
                if node._grad is None:
                    node._grad = dout if owned else dout.copy()
                else:
                    node._grad += dout
                continue
            if node.parents is None:  # after a node that refuses (a version check) comes first, as in PyTorch
                raise RuntimeError(_FREED)
            if isinstance(node, Output):  # one of several outputs: the node's backward gets them all at once
                owner = node.parents[0]
                grads.setdefault(id(owner), ([None] * owner.n_outputs, True))[0][node.index] = dout
                if not retain_graph:
                    node.release()
                continue
            for counter, seen, array_id in node.versions:  # an array this node saved, written in place since?
                if counter[0] != seen:
                    _refuse_modified(node, counter, seen, array_id)
            dxs = _input_grads(node, dout)
            handed, shared = set(), set()  # arrays handed to two inputs (or one and its view): neither's to add into
            for dx in dxs:  # a plain loop: no comprehension joins the walk (test_layout)
                if dx is not None:
                    root = id(dx if getattr(dx, "base", None) is None else dx.base)
                    (shared if root in handed else handed).add(root)
            for parent, dx in zip(node.parents, dxs, strict=True):
                if parent is None or dx is None:
                    continue
                dx = _array(dx)
                if dx.shape != parent.shape or dx.dtype != parent.dtype:
                    raise RuntimeError(
                        f"{type(node).__name__}.backward returned a gradient of shape {dx.shape} and dtype "
                        f"{dx.dtype} for an input of shape {parent.shape} and dtype {parent.dtype}"
                        + ("; the gradient of an input that forward broadcast is summed back to its shape "
                           "(arrays.unbroadcast)" if dx.shape != parent.shape else "")
                    )
                # speed: ours to add into: not dout, nor a view of it, nor handed to another input as well
                fresh = dx is not dout and dx.base is None and id(dx) not in shared
                if id(parent) not in grads:
                    grads[id(parent)] = (dx, fresh)
                    continue
                total, owned = grads[id(parent)]
                if owned:
                    total += dx  # speed: in place, as this array is ours (not a new array per extra use)
                elif fresh:
                    dx += total  # speed: into dx, ours too (the same sum: addition commutes exactly)
                    grads[id(parent)] = (dx, True)
                else:
                    grads[id(parent)] = (_array(total + dx), True)
            if not retain_graph:
                node.release()
    finally:
        modes.grad = enabled
    if targets is not None and freed and len(captured) < len(targets):
        raise RuntimeError(_FREED)  # an input not reached: the way to it may have been freed
    return captured


def _leading_to(order: list[Function | Tensor], targets: dict[int, Tensor]) -> tuple[set[int], set[int], bool]:
    """For a sweep toward `targets`: the edges it visits (the targets, and the nodes it goes through, those with an
    input on the way to a target), as PyTorch runs only what the inputs asked for need; and whether a freed node
    (whose inputs are forgotten) was met."""
    through: set[int] = set()
    freed = False
    for node in order:  # each after its inputs
        if isinstance(node, Function):
            freed = freed or node.parents is None
            if any(p is not None and (id(p) in targets or id(p) in through) for p in node.parents or ()):
                through.add(id(node))
    return through | targets.keys(), through, freed


def _tensor_list(op: str, what: str, value: Any) -> list[Tensor]:
    """One tensor, or a non-empty list or tuple of them, as a list."""
    tensors = [value] if isinstance(value, Tensor) else list(value) if isinstance(value, (list, tuple)) else None
    if tensors is None or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"{op}: {what} must be a tensor or a list or tuple of tensors, got {type(value).__name__} "
                        f"{value!r:.60}")
    if not tensors:
        raise RuntimeError(f"{op}: {what} cannot be empty")
    return tensors


def _targets(op: str, inputs: Any) -> dict[int, Tensor]:
    """The tensors asked for (one, or a list or tuple), by the id of the edge that stands for each; each must require
    grad, as in PyTorch."""
    targets = {}
    for i, t in enumerate(_tensor_list(op, "inputs", inputs)):
        if not t.requires_grad:
            raise RuntimeError(f"{op}: input {i}, of shape {t.shape}, does not require grad, so no gradient reaches it")
        targets[id(t.grad_fn or t)] = t
    return targets


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor], grad_outputs: Any = None,
         retain_graph: bool | None = None, create_graph: bool = False, allow_unused: bool | None = None,
         materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """d(outputs)/d(input) for each input, as torch.autograd.grad: new tensors, the leaves' .grad left as they were
    (a retained intermediate's is filled, as there), and only the part of the graph that leads to the inputs run.
    grad_outputs: d(loss)/d(output), one per output (None: 1 for a scalar). An input the outputs do not depend on is
    refused, or gives None with allow_unused=True (zeros with materialize_grads=True)."""
    outputs, inputs = _tensor_list("grad", "outputs", outputs), _tensor_list("grad", "inputs", inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif not isinstance(grad_outputs, (list, tuple)):  # one gradient, for one output
        grad_outputs = [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad: {len(grad_outputs)} grad_outputs for {len(outputs)} outputs; give one for each "
                         "(None for a scalar output)")
    targets = _targets("grad", inputs)
    captured = _run_backward("grad", outputs, grad_outputs, bool(retain_graph), create_graph, targets, early=True)
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    results, given = [], set()
    for i, t in enumerate(inputs):
        g = captured.get(id(t.grad_fn or t))
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {i}, of shape {t.shape}, was not used to compute the outputs; pass "
                               "allow_unused=True to get None for it")
        if g is None and materialize_grads:
            g = backend.get_array_module(t._data).zeros_like(t._data)
        results.append(None if g is None else Tensor.wrap(g.copy() if id(g) in given else g))
        given.add(id(g))
    return tuple(results)


def _run_hooks(edge: Function | Tensor, dout: Any) -> Any:
    """The gradient of the tensor `edge` stands for, after its hooks (each may return a replacement)."""
    for hook in edge._hooks:
        result = hook(Tensor.wrap(dout, False))
        if result is not None:
            new = _array(result.data if isinstance(result, Tensor) else result)
            if (getattr(new, "shape", None), getattr(new, "dtype", None)) != (dout.shape, dout.dtype) \
                    or backend.device_of(new) != backend.device_of(dout):
                raise RuntimeError(f"hook {getattr(hook, '__name__', hook)!r} returned {type(new).__name__} "
                                   f"{getattr(new, 'shape', '')} {getattr(new, 'dtype', '')} for a gradient of "
                                   f"shape {dout.shape} and dtype {dout.dtype} on {backend.device_of(dout)}")
            dout = new
    return dout


def _refuse_modified(node: Function, counter: list[int], seen: int, array_id: int) -> None:
    """Raise if `node` keeps, for its backward, the array of an input or output (id `array_id`) that an in-place
    write has changed since it was saved, as PyTorch's version check does: its gradient would come from the new
    values. (The ids are safe: the node's arrays and the input's were alive together.) Arrays it did not keep
    (add saves nothing) are no matter."""
    kept = [v for value in vars(node).values() for v in (value if isinstance(value, (tuple, list)) else (value,))]
    array = next((v for v in kept if array_id in (id(v), id(getattr(v, "base", None)))), None)
    if array is None:
        return
    i = [entry[2] for entry in node.versions].index(array_id)
    if i < len(node.parents):
        parent = node.parents[i]
        source = ("a leaf" if isinstance(parent, Tensor) else "not in the graph" if parent is None
                  else f"the output of {parent._op}")
        what = f"input {i} of {node._op} ({source})"
    else:
        what = f"output {i - len(node.parents)} of {node._op}"
    raise RuntimeError(f"backward(): one of the arrays needed for gradient computation has been modified by an "
                       f"in-place operation: {what}, of shape {array.shape} and dtype {array.dtype}, is at version "
                       f"{counter[0]}; {node._op} saved it at version {seen}. Compute it out of place (y = x * 2, not "
                       "x *= 2), or write into a copy (x.clone())")


def _input_grads(node: Function, dout: Any) -> tuple[Any, ...]:
    """node.backward(dout), checked: one gradient per input, in a tuple."""
    dxs = node.backward(dout) if modes.hook is None else modes.hook(node, "backward", lambda: node.backward(dout))
    name = type(node).__name__
    if not isinstance(dxs, (tuple, list)):
        raise TypeError(f"{name}.backward returned {type(dxs).__name__} instead of a tuple with one gradient "
                        f"per input; for a single input write `return (dx,)`")
    if len(dxs) != len(node.parents):
        if len(dxs) > len(node.parents) and all(dx is None for dx in dxs[len(node.parents):]):
            return dxs[:len(node.parents)]  # a None for each option, as PyTorch's backward gives its non-tensor inputs
        raise TypeError(f"{name}.backward returned {len(dxs)} gradients for {len(node.parents)} inputs")
    return dxs


def _topological_order(*starts: Function | Tensor) -> list[Function | Tensor]:
    """Nodes and leaves that need a gradient, each after everything it was computed from: depth-first with
    an explicit stack instead of recursion, so a graph of any depth works."""
    order: list[Function | Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[Function | Tensor, bool]] = []
    for start in reversed(starts):  # a plain loop: no comprehension joins the walk (test_layout)
        stack.append((start, False))
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        if isinstance(node, Function) and node.parents is not None:  # a freed node: refused if the sweep reaches it
            for p in node.parents:
                if p is not None and id(p) not in visited:
                    stack.append((p, False))
    return order


# ---- operands of binary ops ----

_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}  # bool < integer < float, as PyTorch promotes across kinds
_KIND_DEFAULT = {"u": "int64", "i": "int64", "f": DEFAULT_FLOAT}  # for a number of a higher kind than its tensor


def operands(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands of a binary op as tensors of one dtype, promoted across kinds as PyTorch does: a number takes the
    tensor's dtype (x * 0.5 stays float32) unless of a higher kind (int_tensor * 0.5 is float32); a tensor of a lower
    kind takes the other's (x * mask). float32 with float64 is refused by Function.apply, not promoted. A NumPy or
    CuPy array (of at least one axis: a 0-d one is a number) is a tensor outside the graph, as PyTorch takes one:
    p -= lr * p.grad works, .grad being an array."""
    if getattr(a, "ndim", 0) and not isinstance(a, Tensor) and backend.is_array(a):
        a = Tensor.wrap(a)
    if getattr(b, "ndim", 0) and not isinstance(b, Tensor) and backend.is_array(b):
        b = Tensor.wrap(b)
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
    """x and a Python or NumPy number as tensors of their common dtype; the number becomes one 0-d array, filled in
    where x lives (on the GPU a fill kernel takes the number as its argument: no host-to-device copy, as asarray
    would make)."""
    kind = number_kind(op, value)  # a bool, int or float, checked: full below cannot misread it
    if _KIND_RANK[kind] > _KIND_RANK[x.dtype.kind]:
        x = x.to(_KIND_DEFAULT[kind])
    return x, Tensor.wrap(backend.get_array_module(x.data).full((), value, dtype=x.dtype))


# The Tensor <-> ops tie, the one import cycle of the engine: Tensor's operators and methods above call the
# op modules' functions, and those modules build their Functions and results on Function and Tensor, defined
# above. Each op module imports only this file and the modules below it, never another op module.
from minigrad import activations, elementwise, matmul, reductions, shapes  # noqa: E402

"""The autograd core, the file to read first: Tensor (an array that remembers how it was computed), Function (one
primitive with a hand-written backward, and one node of the graph), grad mode, the graph's order, and Sweep, the one
reverse sweep that x.backward(), backward(inputs=...), mg.autograd.grad() and create_graph=True all run. It imports
only the array layer below it (backend, dtypes, arrays). docs/backward.md walks through this file.

What PyTorch's contract adds is called from here at named points, never layered over it (docs/layout.md has the
table). Functions of the table `contract` (at the end), each provided at import by the module that implements it:
in the sweep an edge's hooks (hooks.py), a chosen input's capture (autograd.py), a node's version check, the count
of a write into .grad and the version of a saved tensor under create_graph (versions.py); in Tensor its grad_fn and
a shared version (versions.py) and backward(inputs=...) (autograd.py). And methods a subclass defines, the only
ones of Function, Tensor and Sweep defined again anywhere (tests/test_layout.py checks it): a Function's `forward`
and `backward`, `arrays_of` and `made` (versions.py), `apply` and `__init_subclass__` (PyTorch's protocol,
custom_function.py). mg.Tensor (tensor.py) is this Tensor with layers that add methods and replace none: the legacy
constructor (legacy.py's __init__; this Tensor has none, and makes leaves with Tensor.leaf), hooks (hooks.py) and
versions (versions.py).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from minigrad.array import backend
from minigrad.array.arrays import as_array
from minigrad.array.dtypes import DType, check_same_device_and_dtype

# ---- grad mode, and this thread's other switches ----

class Modes(threading.local):
    """This thread's switches, read by the core (minigrad/autograd/switches.py has the context managers that set
    them). Each thread starts with grad mode on, the teaching implementations and no hook, as in PyTorch for grad
    mode."""

    def __init__(self) -> None:
        self.grad = True  # grad mode: whether Function.apply records nodes for backward
        self.implementations: dict[type[Function], type[Function]] = {}  # teaching Function -> the one that runs
        self.hook: Callable[[Function, str, Callable[[], Any]], Any] | None = None  # around every forward, backward
        self.graph = False  # inside a node's backward under create_graph=True: its formula computes on tensors


modes = Modes()


def is_grad_enabled() -> bool:
    return modes.grad


# ---- Tensor ----

class Tensor:
    """An n-dimensional array (`array`, NumPy's or CuPy's) that can require a gradient. A tensor computed from
    others by a Function remembers that node (`grad_fn`); a leaf (made by the user: a parameter, an input) has
    none. backward() fills `.grad` of every leaf that requires grad with d(loss)/d(leaf), a tensor of its shape.
    A leaf is made with Tensor.leaf(data) (mg.tensor calls it); Tensor(...) is left to the class users get, whose
    constructor is PyTorch's legacy one (minigrad/legacy.py), so this class defines no __init__."""

    mg_backward_hooks: tuple[Callable[..., Any], ...] = ()  # a leaf's hooks (hooks.py registers, the sweep runs them)

    def init_leaf(self, data: Any, requires_grad: bool = False, dtype: DType | None = None,
                  device: str | None = None, *, copy: bool = True) -> None:
        """Make this tensor a leaf holding a copy of `data`, as torch.tensor makes one; copy=False shares an array
        that already has the dtype and device asked for, as torch.as_tensor (and then a tensor's version too)."""
        self.array = as_array(data, dtype, device, copy=copy)
        self._grad: Tensor | None = None
        self._grad_fn: Function | None = None
        self._requires_grad = False
        self.requires_grad = requires_grad  # checked: a bool, for a floating-point tensor
        if isinstance(data, Tensor) and self.array is data.array:
            contract.share_version(self, data)  # point: writes through either are seen by both (versions.py)

    @classmethod
    def leaf(cls, data: Any, requires_grad: bool = False, dtype: DType | None = None, device: str | None = None, *,
             copy: bool = True) -> Any:
        """A new leaf holding `data`, as torch.tensor(data) makes one (mg.tensor, as_tensor and from_numpy call it)."""
        t = cls.__new__(cls)
        t.init_leaf(data, requires_grad, dtype, device, copy=copy)
        return t

    @classmethod
    def wrap(cls, array: Any, requires_grad: bool = False) -> Tensor:
        """A tensor around `array`, already a backend array (or a NumPy scalar): no copy, no check; for results."""
        t = object.__new__(cls)
        t.array = as_writable(array) if isinstance(array, np.generic) else array
        t._grad, t._grad_fn, t._requires_grad = None, None, requires_grad
        return t

    def _set_requires_grad(self, requires_grad: bool) -> None:
        if not isinstance(requires_grad, bool):  # "yes" or 0 would pass as a flag; PyTorch refuses them too
            raise TypeError(f"requires_grad must be True or False, got {type(requires_grad).__name__} "
                            f"{requires_grad!r:.40}")
        if requires_grad and self.array.dtype.kind != "f":
            raise TypeError(f"only floating-point tensors can require grad, got dtype {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(f"requires_grad = False: only a leaf's flag can change, and this tensor was computed "
                               f"by {self.grad_fn.op}; x.detach() gives its values outside the graph")
        self._requires_grad = requires_grad

    # C getters (attrgetter), as for shape below: the engine reads them on every op
    requires_grad = property(attrgetter("_requires_grad"), _set_requires_grad,
                             doc="Whether backward() reaches this tensor: set on leaves, inherited by what is "
                                 "computed from them")
    grad_fn = property(lambda self: contract.node_of(self), doc="The node that computed this tensor; None for a leaf "
                                                                 "(point: a stale view's, made again: versions.py)")

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        """d(loss)/d(self), a tensor of self's shape, once backward() has run (summed over backward() calls)."""
        return self._grad

    @grad.setter
    def grad(self, grad: Tensor | None) -> None:
        """x.grad = a tensor of x's shape, dtype and device (or None), as in PyTorch; backward() adds into it. A NumPy
        or CuPy array, what .grad was before 0.2, is still taken (wrapped, not copied), with a DeprecationWarning."""
        if grad is not None and not isinstance(grad, Tensor) and backend.is_array(as_writable(grad)):
            warnings.warn("assigning an array to .grad is deprecated: .grad is a tensor now; assign "
                          "mg.tensor(array) (or mg.Tensor.wrap(array), which shares it)", DeprecationWarning,
                          stacklevel=2)
            grad = TENSOR.wrap(as_writable(grad))
        if grad is not None:
            if not isinstance(grad, Tensor):
                raise TypeError(f"grad: expected a tensor or None, got {type(grad).__name__}; wrap an array with "
                                "mg.tensor(array)")
            if grad is self:
                raise RuntimeError("grad: a tensor cannot be assigned as its own grad")
            found, expected = (grad.shape, grad.dtype, grad.device), (self.shape, self.dtype, self.device)
            if found != expected:
                raise RuntimeError(f"grad: assigned a gradient of shape {found[0]}, dtype {found[1]} on {found[2]} "
                                   f"to a tensor of shape {expected[0]}, dtype {expected[1]} on {expected[2]}; it "
                                   "must match all three")
        self._grad = grad

    @property
    def data(self) -> Tensor:
        """The same values as a tensor outside the graph, sharing this one's memory (as PyTorch's x.data);
        `x.data = y` makes x hold y's values (y's array itself)."""
        return TENSOR.wrap(self.array)

    @data.setter
    def data(self, value: Tensor) -> None:
        array = value.array if isinstance(value, Tensor) else as_writable(value)
        if not backend.is_array(array) or array.dtype.kind not in "biuf":
            raise TypeError(f"data: expected a tensor (or a NumPy or CuPy array) of numbers, got "
                            f"{type(value).__name__} {getattr(array, 'dtype', '')}")
        if self.requires_grad and array.dtype.kind != "f":
            raise TypeError(f"data: a tensor that requires grad holds floats, got dtype {array.dtype}")
        self.array = array

    # C getters (attrgetter): the engine reads these on every op, and a getter of ours would cost a call each time
    shape = property(attrgetter("array.shape"))
    ndim = property(attrgetter("array.ndim"))
    dtype = property(attrgetter("array.dtype"))
    device = property(lambda self: backend.device_of(self.array))

    def backward(self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Tensor | Sequence[Tensor] | None = None) -> None:
        """Add d(self)/d(leaf) into `.grad` of every leaf that requires grad, or only of `inputs` (leaves or not: an
        intermediate one keeps its .grad from now on, as after retain_grad()); `gradient` is d(loss)/d(self) (None: 1
        for a scalar). The arrays the graph saved are freed afterwards unless retain_graph=True (by default:
        create_graph). create_graph=True makes each .grad a tensor of a graph, accumulated out of place, so that it
        can be differentiated in turn. As torch.Tensor.backward."""
        targets = None if inputs is None else contract.chosen_inputs(inputs)  # point: checked (autograd.py)
        sweep = Sweep(bool(create_graph if retain_graph is None else retain_graph), create_graph, targets)
        sweep.run([self], [gradient])
        for key, t in (targets or {}).items():  # a chosen leaf's gradient, captured, into its .grad (retain_grad()
            if key in sweep.captured and t.is_leaf:  # filled a chosen intermediate's during the sweep)
                sweep.accumulate_grad(t, sweep.captured[key])


def as_writable(value: Any) -> Any:
    """A NumPy scalar (what NumPy arithmetic on 0-d arrays returns) as a 0-d array, which can be written in place."""
    return backend.get_array_module(value).asarray(value) if isinstance(value, np.generic) else value


# The class of the tensors the engine makes (op results, gradients): Tensor above, until minigrad/tensor.py
# assembles mg.Tensor from it and the layers around it and names that class here, once, with make_tensors_as().
TENSOR: type[Tensor] = Tensor


def make_tensors_as(cls: type[Tensor]) -> None:
    global TENSOR
    TENSOR = cls


# ---- the names a backward formula computes with ----

# minigrad itself, as the array namespace of formulas under create_graph=True (it speaks NumPy's names): named here
# once by minigrad/__init__.py, with use_graph_namespace(), as the op modules cannot import the package above them
GRAPH_NAMESPACE: Any = None


def use_graph_namespace(namespace: Any) -> None:
    global GRAPH_NAMESPACE
    GRAPH_NAMESPACE = namespace


def namespace(dout: Any) -> Any:
    """xp, what a backward formula computes with: NumPy's (or CuPy's) names for an array dout (first order: plain
    arrays, nothing recorded), minigrad's for a tensor dout (create_graph=True: each step a recorded op), so that
    one formula gives both."""
    return GRAPH_NAMESPACE if isinstance(dout, Tensor) else backend.namespace(dout)


# ---- Function: one primitive, one graph node ----

class Function:
    """A primitive with a hand-written backward; an instance is both the graph node and the `ctx` of PyTorch.

    forward(self, *arrays, **options) -> array computes on the inputs' arrays and keeps on self what backward
    needs; backward(self, dout) returns one dx per input (None where needs_input_grad says none is needed).
    How to write your own: docs/backward.md, "Writing your own Function".
    """

    # The engine's own attributes on a node start with mg_, so that a Function's own (self.shape in forward, or
    # ctx.parents in PyTorch's protocol) never collide with them; needs_input_grad is PyTorch's name on ctx.
    mg_parents: tuple[Function | Tensor | None, ...] = ()  # per input: the node that computed it, the leaf itself,
    needs_input_grad: tuple[bool, ...] = ()  # or None where no gradient is needed; release() keeps them (edges stay)
    mg_n_outputs: int | None = None  # how many arrays forward returned in a tuple (split); None: one array
    mg_freed = False  # True once release() dropped what backward needs: a second backward is refused
    mg_backward_hooks: tuple[Callable[..., Any], ...] = ()  # the hooks of the tensor it computed (hooks.py)
    graph_backward = False  # True: backward is written once against xp and self.saved, so that create_graph=True
    # runs it on tensors (minigrad's own Functions); False: a backward on arrays, refused under create_graph=True
    op = "function"  # the name in error messages, once per subclass: LinearFunction -> "linear"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.op = cls.__name__.removesuffix("Function").lower()

    @classmethod
    def apply(cls, *inputs: Tensor, **options: Any) -> Tensor | tuple[Tensor, ...]:
        """Run forward on the inputs' arrays; where a gradient is wanted, record the node for backward."""
        node = modes.implementations.get(cls, cls)()  # extension point: which implementation runs (mg.compiled())
        arrays = node.arrays_of(inputs)  # extension point: the inputs checked (and a stale view brought up to date)
        needs = [t.requires_grad for t in inputs]
        recording = modes.grad and True in needs
        if recording:
            node.needs_input_grad = tuple(needs)
        try:
            out = node.forward(*arrays, **options) if modes.hook is None else node.call("forward", *arrays, **options)
        except (ValueError, TypeError) as err:  # a NumPy/CuPy complaint: say which op and which shapes
            shapes = ", ".join(str(t.shape) for t in inputs)
            raise type(err)(f"{cls.op}: inputs of shapes {shapes}: {err}") from None
        several = isinstance(out, tuple)  # several outputs (split): each reaches the node through its own edge
        results = [TENSOR.wrap(o, recording) for o in out] if several else [TENSOR.wrap(out, recording)]
        if several:
            node.mg_n_outputs = len(results)
        if recording:
            # each input's edge: the node that computed it (arrays_of brought a view's up to date), or the leaf
            node.mg_parents = tuple([(t._grad_fn or t) if need else None
                                     for t, need in zip(inputs, needs, strict=True)])
            if several:
                for i, r in enumerate(results):
                    r._grad_fn = Output(node, i, r.array)
            else:
                results[0]._grad_fn = node
                node.mg_shape, node.mg_dtype = out.shape, out.dtype  # what it hands its consumers, for the checks
        node.made(inputs, results, options)  # extension point: versions, views (minigrad/autograd/versions.py)
        return tuple(results) if several else results[0]

    def arrays_of(self, inputs: Sequence[Tensor]) -> list[Any]:
        """The inputs' arrays, checked: tensors, all of one dtype and on one device (an extension point: a view whose
        base was written in place is brought up to date first, minigrad/autograd/versions.py)."""
        arrays = []
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):  # an option given by position, or an array not wrapped yet
                raise TypeError(
                    f"{self.op}: input {i} is a {type(t).__name__} ({t!r}), not a tensor; options are keyword "
                    f"arguments: {type(self).__name__}.apply(x, name={t!r}) calls forward(x.array, name={t!r})"
                    if isinstance(t, (int, float, np.generic)) else
                    f"{self.op}: input {i} is a {type(t).__name__}, not a tensor; wrap it with mg.tensor()")
            if arrays and (t.array.dtype != arrays[0].dtype or type(t.array) is not type(arrays[0])):
                check_same_device_and_dtype(self.op, inputs)  # another dtype or device: raises, naming each input's
            arrays.append(t.array)
        return arrays

    def call(self, phase: str, *args: Any, **options: Any) -> Any:
        """self.forward(...) or self.backward(...) inside mg.intercept's hook (an extension point: a profiler's). A
        forward run by a backward's formula under create_graph=True is told to the hook as "forward in backward"."""
        run = getattr(self, phase)
        told = "forward in backward" if modes.graph and phase == "forward" else phase
        return modes.hook(self, told, lambda: run(*args, **options))

    def made(self, inputs: Sequence[Tensor], results: Sequence[Tensor], options: dict[str, Any]) -> None:
        """Called once forward has run and the node is recorded (an extension point: versions, views)."""

    def forward(self, *arrays: Any, **options: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward(self, *arrays, **options), which "
                                  "returns the output array (docs/backward.md, 'Writing your own Function')")

    def backward(self, dout: Any) -> tuple[Any, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not define backward(self, dout), which returns one "
                                  "gradient per input (docs/backward.md, 'Writing your own Function')")

    def saved(self, array: Any, source: int | str | Callable[[], Tensor] | None) -> Any:
        """What forward kept, as backward computes with it: the array itself in first order; under create_graph=True
        the tensor of the graph it stands for, so that the gradient's own graph reaches back through it. source: i
        for the node's input i (the leaf itself, or a tensor computed by that input's node), "output" for the
        node's own output, None for a constant, or a method that makes the tensor of a quantity forward derived on
        the way (layer norm's xhat: a node of its own, see derived)."""
        if not modes.graph:
            return array
        if callable(source):
            return source()
        if source == "output":
            return self.graph_tensor(array.reshape(self.mg_shape), self, len(self.mg_parents))
        parent = None if source is None else self.mg_parents[source]
        if isinstance(parent, Tensor):
            return parent
        return TENSOR.wrap(array) if parent is None else self.graph_tensor(array, parent, source)

    def graph_tensor(self, array: Any, node: Function, index: int) -> Tensor:
        """array as a tensor computed by `node`, which is this node's input `index` (or, past the inputs, its
        output), counting its writes where that tensor counts them."""
        t = TENSOR.wrap(array, True)
        t._grad_fn = node
        contract.saved_version(t, self, index)  # point: the version counter this node noted for it (versions.py)
        return t

    def release(self) -> None:
        """Drop the arrays kept for backward once it has used them (and any tensor, for a user's Function): a second
        backward() is refused. The edges stay (a picture can still walk the graph, as PyTorch's
        grad_fn.next_functions stays). A node that kept no array (add, reshape: shapes only) stays whole and may run
        again, as in PyTorch."""
        arrays = backend.ARRAY_TYPES
        kept = [key for key, value in vars(self).items()  # an array or a tensor, or a tuple or list holding an array
                if type(value) in arrays or isinstance(value, Tensor)
                or type(value) in (tuple, list) and not arrays.isdisjoint(map(type, value))]
        for key in kept:
            del self.__dict__[key]
        if kept:
            self.mg_freed = True


def derived(cls: type[Function], parents: Sequence[Function | Tensor | None], output: Any, **saved: Any) -> Tensor:
    """`output`, an array a node derived on the way (layer norm's xhat, attention's weights), as the tensor of a node
    of `cls` made here, with these edges and saved attributes, whose backward takes the gradient on from it: what
    Function.saved gives for it under create_graph=True. Nothing is computed again."""
    node = cls()
    node.mg_parents, node.needs_input_grad = tuple(parents), tuple(p is not None for p in parents)
    node.mg_shape, node.mg_dtype = output.shape, output.dtype
    vars(node).update(saved)
    t = TENSOR.wrap(output, any(node.needs_input_grad))
    if t.requires_grad:
        t._grad_fn = node
    return t


class Output(Function):
    """The edge to output `index` of a node with several outputs: the sweep files its gradient in the node's list
    and calls the node's one backward with all of them."""

    def __init__(self, node: Function, index: int, array: Any) -> None:
        self.mg_parents, self.mg_index = (node,), index
        self.mg_shape, self.mg_dtype = array.shape, array.dtype  # for the checks, as a one-output node has


# ---- backward: the graph in order, then one sweep back through it ----

def graph_order(*starts: Function | Tensor) -> list[Function | Tensor]:
    """The nodes and leaves that `starts` were computed from, each after everything it was computed from:
    depth first, with a stack of our own instead of recursion, so that a graph of any depth works."""
    order: list[Function | Tensor] = []
    visited: set[int] = set()
    stack = [(start, False) for start in reversed(starts)]
    while stack:
        edge, inputs_done = stack.pop()
        if inputs_done:
            order.append(edge)
        elif id(edge) not in visited:
            visited.add(id(edge))
            stack.append((edge, True))
            if isinstance(edge, Function):
                stack += [(p, False) for p in edge.mg_parents if p is not None and id(p) not in visited]
    return order


FREED = ("backward(): this graph was already used by a backward() call and its saved arrays were freed; pass "
         "retain_graph=True to the first call to go through it twice")


class Sweep:
    """One reverse-mode pass, the one every backward runs: the gradient of every edge (a node, or a leaf tensor),
    from the outputs back. An edge's gradient is complete once every consumer has sent its part, which the graph's
    order guarantees. With `targets` (grad() and backward(inputs=...): id of an edge -> the chosen input it stands
    for), only the edges on the way to them run, and their gradients are captured. create_graph=True: the sweep runs
    in grad mode, its gradients are tensors of a graph (each node's backward as recorded ops), and its sums and
    a leaf's .grad are computed out of place, so that they can be differentiated in turn."""

    def __init__(self, retain_graph: bool, create_graph: bool = False, targets: dict[int, Tensor] | None = None,
                 early: bool = False) -> None:
        self.retain_graph, self.create_graph = retain_graph, create_graph
        self.targets, self.early = targets, early  # early: a target's gradient before its hooks, as grad() takes it
        self.grads: dict[int, Any] = {}  # id(edge) -> its gradient so far (a list, for a node of several outputs)
        self.through: set[int] = set()  # with targets: the nodes on the way to one
        self.captured: dict[int, Any] = {}  # id(target edge) -> its gradient (contract.capture fills it)

    def run(self, outputs: Sequence[Tensor], gradients: Sequence[Any]) -> None:
        """Sweep from `outputs`, each with its d(loss)/d(output) (None: 1 for a scalar)."""
        which = [f"output {i}: " if len(outputs) > 1 else "" for i in range(len(outputs))]
        starts = [self.start(t, g, w) for t, g, w in zip(outputs, gradients, which, strict=True)]
        order = graph_order(*starts)
        way = None if self.targets is None else self.way_to_targets(order)  # None: every edge
        freed = way is not None and any(isinstance(edge, Function) and edge.mg_freed for edge in order)  # by an earlier
        # a graph of the gradients only with create_graph=True, where each backward's one formula runs on tensors
        enabled, graph = modes.grad, modes.graph
        modes.grad = modes.graph = self.create_graph
        try:
            for edge in reversed(order):
                dout = self.grads.pop(id(edge), None)
                if dout is not None and (way is None or id(edge) in way):
                    self.visit(edge, dout)
        finally:
            modes.grad, modes.graph = enabled, graph
        if freed and len(self.captured) < len(self.targets):
            raise RuntimeError(FREED)  # a chosen input not reached: the way to it may have been freed

    def start(self, t: Tensor, grad: Any, which: str) -> Function | Tensor:
        """File d(loss)/d(t) under t's edge (a loss's is 1), checked; return the edge."""
        edge = t.grad_fn or t
        if not t.requires_grad:
            raise RuntimeError(f"backward(): {which}this tensor does not require grad: no input it was computed from "
                               "has requires_grad=True, or it was computed under no_grad()")
        if grad is None:
            if t.array.size != 1:
                raise RuntimeError(f"backward(): {which}output of shape {t.shape} is not a scalar; pass its gradient, "
                                   "y.backward(dy), or reduce it first (y.sum(), y.mean())")
            array = backend.get_array_module(t.array).ones_like(t.array)
        else:
            array = as_array(grad, t.dtype, t.device, "backward")
            if array.shape != t.shape:
                raise ValueError(f"backward(): {which}gradient of shape {array.shape} for a tensor of shape {t.shape}")
        if self.create_graph:  # the tensor given, which may be part of a graph itself, or the array as a constant
            array = grad if isinstance(grad, Tensor) and grad.array is array else TENSOR.wrap(array)
        self.add(edge, array)  # two outputs that are one tensor: their gradients add
        return edge

    def way_to_targets(self, order: list[Function | Tensor]) -> set[int]:
        """The ids of the edges of `order` on the way to a target, as PyTorch runs only those: the targets, and each
        node with an input on the way (noted in self.through)."""
        for edge in order:  # each after its inputs
            if isinstance(edge, Function) and any(p is not None and (id(p) in self.targets or id(p) in self.through)
                                                  for p in edge.mg_parents):
                self.through.add(id(edge))
        return self.through | self.targets.keys()

    def visit(self, edge: Function | Tensor, dout: Any) -> None:
        """dout, d(loss)/d(the tensor edge stands for), is complete: after the edge's hooks, hand it on to a leaf's
        .grad, or through the node's backward to its inputs."""
        if self.targets is not None and id(edge) in self.targets:
            dout = contract.capture(self, edge, dout)  # point: a chosen input's gradient kept, hooks run (autograd.py)
            if dout is None:  # the sweep goes no further this way
                return
        elif edge.mg_backward_hooks:
            dout = contract.run_hooks(edge, dout)  # point: the hooks registered on this edge (hooks.py)
        if isinstance(edge, Tensor):  # a leaf
            return self.accumulate_grad(edge, dout)
        if edge.mg_freed:  # by an earlier backward(), after a node met before it (a version check) has said its word
            raise RuntimeError(FREED)
        if isinstance(edge, Output):  # one of several outputs: the node's backward gets them all at once
            node = edge.mg_parents[0]
            self.grads.setdefault(id(node), [None] * node.mg_n_outputs)[edge.mg_index] = dout
        else:
            for parent, dx in zip(edge.mg_parents, self.input_grads(edge, dout), strict=True):
                if parent is not None and dx is not None:
                    self.add(parent, dx)
        if not self.retain_graph:
            edge.release()

    def input_grads(self, node: Function, dout: Any) -> Sequence[Any]:
        """node.backward(dout), checked: one gradient per input, each of its input's shape and dtype."""
        contract.check_versions(node)  # point: nothing it kept was written in place since (versions.py)
        if self.create_graph and not type(node).graph_backward:  # the class's: a ctx's attributes are its user's
            raise NotImplementedError(
                f"create_graph=True: {type(node).__name__}.backward computes on arrays, so its gradient cannot be "
                "differentiated; write it against xp and self.saved and set graph_backward = True (docs/backward.md, "
                "'Backward is a graph too')")
        dxs = node.backward(dout) if modes.hook is None else node.call("backward", dout)
        return checked_grads(node, dxs)

    def add(self, edge: Function | Tensor, dx: Any) -> None:
        """A tensor used twice gets the sum of the gradients of its two uses (under create_graph=True a sum of
        tensors, recorded)."""
        total = self.grads.get(id(edge))
        self.grads[id(edge)] = dx if total is None else as_writable(total + dx)  # 0-d arrays add up to a NumPy scalar

    def accumulate_grad(self, leaf: Tensor, dout: Any) -> None:
        """A leaf's .grad: the sum over backward() calls, in its own memory; under create_graph=True out of place, in
        the graph (an earlier .grad may be part of a graph)."""
        if self.create_graph:
            leaf.grad = dout.clone() if leaf.grad is None else leaf.grad + dout
        elif leaf.grad is None:
            leaf.grad = TENSOR.wrap(dout.copy())
        else:
            leaf.grad.array += dout
            contract.count_write(leaf.grad)  # point: a write into .grad's memory moves its version on (versions.py)


def shape_and_dtype(edge: Function | Tensor) -> tuple[tuple[int, ...], Any]:
    """The shape and dtype of the tensor an edge of the graph stands for: a leaf's, or the output its node computed."""
    return (edge.shape, edge.dtype) if isinstance(edge, Tensor) else (edge.mg_shape, edge.mg_dtype)


def checked_grads(node: Function, dxs: Any) -> list[Any]:
    """What a node's backward returned, checked: one gradient per input (arrays; tensors under create_graph=True),
    each of its input's shape and dtype."""
    name = type(node).__name__
    if not isinstance(dxs, (tuple, list)):
        raise TypeError(f"{name}.backward returned {type(dxs).__name__} instead of a tuple with one gradient "
                        f"per input; for a single input write `return (dx,)`")
    n = len(node.mg_parents)
    if len(dxs) > n and all(dx is None for dx in dxs[n:]):  # a None for each option, as PyTorch's backward gives
        dxs = dxs[:n]
    if len(dxs) != n:
        raise TypeError(f"{name}.backward returned {len(dxs)} gradients for {n} inputs")
    checked = []
    for parent, dx in zip(node.mg_parents, dxs, strict=True):
        if dx is not None:
            dx = as_writable(dx)
            shape, dtype = (dx.shape, dx.dtype) if parent is None else shape_and_dtype(parent)
            if dx.shape != shape or dx.dtype != dtype:
                raise RuntimeError(
                    f"{name}.backward returned a gradient of shape {dx.shape} and dtype {dx.dtype} for an input "
                    f"of shape {shape} and dtype {dtype}"
                    + ("; the gradient of an input that forward broadcast is summed back to its shape "
                       "(arrays.unbroadcast)" if dx.shape != shape else ""))
        checked.append(dx)
    return checked


# ---- the named points: what PyTorch's contract adds, called from the core on one line each ----

def unchanged(edge: Function | Tensor, dout: Any) -> Any:
    return dout


def nothing(*args: Any) -> None:
    return None


def not_provided(point: str) -> Callable[..., Any]:
    """The plain version of a point that only PyTorch's contract can fill: a one-line refusal."""
    def refuse(*args: Any) -> Any:
        raise NotImplementedError(f"{point} comes with PyTorch's contract around the core: import minigrad")
    return refuse


class Contract:
    """The core's table of named points, each a function called on one line of the core (grep `contract.`) and
    provided once, at its import, by the module that implements it (`core.contract.run_hooks = run_hooks` in
    hooks.py). The plain versions below let the core run alone: no hooks, no versions."""

    __slots__ = ("capture", "check_versions", "chosen_inputs", "count_write", "node_of", "run_hooks", "saved_version",
                 "share_version")

    def __init__(self) -> None:
        self.run_hooks = unchanged  # hooks.py: (edge, dout) -> dout after the edge's hooks
        self.capture = not_provided("grad()")  # autograd.py: (sweep, edge, dout) -> dout to go on with, or None
        self.check_versions = nothing  # versions.py: (node), which refuses one whose saved arrays were written since
        self.count_write = nothing  # versions.py: (t), a write into t's memory counted, so what saved t refuses
        self.node_of = attrgetter("_grad_fn")  # versions.py: (t) -> t.grad_fn, a stale view's made again first
        self.saved_version = nothing  # versions.py: (t, node, i), t counts its writes where node's input i (or output)
        self.share_version = nothing  # versions.py: (leaf, source), made on source's memory: one version counter
        self.chosen_inputs = not_provided("backward(inputs=...)")  # autograd.py: (inputs) -> {id(edge): tensor}


contract = Contract()

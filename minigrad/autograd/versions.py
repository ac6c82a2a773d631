"""PyTorch's contract for writes in place, around the core: every tensor counts the writes into its memory (its
version), views (x[0], x.reshape(...), x.T, x.detach()) share their base's memory and counter, a node checks at
backward that nothing it kept was written since, and x.add_(y), x[i] = v and the like write an op's result into
x's own memory (`write`), keeping the graph right (CopySlices). docs/in-place.md explains each rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.autograd.hooks import move_retained

# ---- the Function minigrad's ops are written on: the core's, with versions and views ----

class Function(core.Function):
    """core.Function, which also remembers the version of every input and output it was made with (to refuse,
    at backward, an array it kept that was written since), and gives the results of a view op (`view = True`: forward
    may return a view of its first input) their input's memory and version counter."""

    view = False
    mg_versions: Sequence[tuple[list[int], int, int]] = ()  # per input, then per output: (counter, version, id(array))

    def arrays_of(self, inputs: Sequence[core.Tensor]) -> list[Any]:
        arrays = super().arrays_of(inputs)  # checked: tensors
        for t in inputs:
            if t._view is not None and t._view.version != t._version_counter[0]:
                t._view.refresh(t)  # its base was written in place since: its node is made again, from the base
        return arrays

    def made(self, inputs: Sequence[core.Tensor], results: Sequence[core.Tensor], options: dict[str, Any]) -> None:
        if self.mg_parents:
            self.mg_versions = versions = []
            for t in inputs:
                counter = t._version_counter
                versions.append((counter, counter[0], id(t.array)))
            for r in results:  # new tensors: new counters (a view's becomes its input's below)
                r._counter = counter = [0]
                versions.append((counter, 0, id(r.array)))
        if type(self).view:  # the class's flag (a ctx may keep a `view` of its own)
            share_memory(inputs[0], results, type(self), options, self.mg_n_outputs is not None)

    mg_saved_indices: Sequence[tuple[list[int], int, tuple[int, ...]]] = ()  # (counter, version, shape) per index kept

    def check_versions(self) -> None:
        """Refuse to run backward if an array this node kept (an input's or an output's, or an index or mask tensor
        it was given: see saves_index) was written in place since it was saved, as PyTorch's version check does: its
        gradient would come from the new values. Arrays it did not keep (add keeps none) are no matter. (The ids
        are safe: the node's arrays and the inputs' were alive together.) Then it follows `x.data = y` (follow_data)."""
        for counter, seen, shape in self.mg_saved_indices:
            if counter[0] != seen:
                raise RuntimeError(f"backward(): an index or mask tensor that {self.op} saved for gradient "
                                   f"computation, of shape {shape}, has been modified by an in-place operation: it "
                                   f"is at version {counter[0]}; {self.op} saved it at version {seen}, and the "
                                   "gradient would go where it points now. Write into a copy (idx.clone())")
        for i, (counter, seen, array_id) in enumerate(self.mg_versions):
            if counter[0] != seen:
                kept = [v for value in vars(self).values()
                        for v in (value if isinstance(value, (tuple, list)) else (value,))]
                array = next((v for v in kept if array_id in (id(v), id(getattr(v, "base", None)))), None)
                if array is not None:
                    raise RuntimeError(self._modified(i, array, counter[0], seen))
        self.follow_data()

    def follow_data(self) -> None:
        """`x.data = y` since forward, for a leaf x whose array this node kept: from now on the node keeps y's array
        in its place, so that backward() and backward(create_graph=True) (which reads the leaf itself) both use x's
        new values, as PyTorch's saved tensor reads x's data. Arrays forward derived from x's (a reshape of it, its
        output) keep the old values, as PyTorch's do. (The ids are safe: the node keeps the old array alive.)"""
        for i, parent in enumerate(self.mg_parents if self.mg_versions else ()):
            if not isinstance(parent, core.Tensor) or id(parent.array) == self.mg_versions[i][2]:
                continue  # not a leaf, or a leaf that holds the array forward read
            counter, seen, old = self.mg_versions[i]
            new = parent.array
            for key, value in list(vars(self).items()):
                values = value if isinstance(value, (tuple, list)) else (value,)
                kept = next((v for v in values if id(v) == old), None)
                if kept is None:
                    continue
                if (new.shape, new.dtype) != (kept.shape, kept.dtype):
                    raise RuntimeError(f"backward(): input {i} of {self.op}, a leaf of shape {kept.shape} and dtype "
                                       f"{kept.dtype} at forward, was given values of shape {new.shape} and dtype "
                                       f"{new.dtype} since (x.data = y), which its backward cannot use")
                vars(self)[key] = type(value)(new if id(v) == old else v for v in values) if values is value else new
            self.mg_versions[i] = (counter, seen, id(new))

    def _modified(self, i: int, array: Any, now: int, seen: int) -> str:
        if i < len(self.mg_parents):
            parent = self.mg_parents[i]
            source = ("a leaf" if isinstance(parent, core.Tensor) else "not in the graph" if parent is None
                      else f"the output of {parent.op}")
            what = f"input {i} of {self.op} ({source})"
        else:
            what = f"output {i - len(self.mg_parents)} of {self.op}"
        return (f"backward(): one of the arrays needed for gradient computation has been modified by an in-place "
                f"operation: {what}, of shape {array.shape} and dtype {array.dtype}, is at version {now}; {self.op} "
                f"saved it at version {seen}. Compute it out of place (y = x * 2, not x *= 2), or write into a copy "
                "(x.clone())")


def saves_index(result: core.Tensor, *sources: Any) -> core.Tensor:
    """The node that computed `result` keeps, for its backward, indices or a mask made from `sources`: those that are
    tensors are version-checked with it, so that backward refuses once one is written in place (the gradient would
    go to the rows it holds now), as PyTorch refuses. Returns result."""
    node = result.grad_fn
    tensors = [s for s in sources if isinstance(s, core.Tensor)]
    if tensors and isinstance(node, Function):
        node.mg_saved_indices = [*node.mg_saved_indices, *((t._version_counter, t._version, t.shape) for t in tensors)]
    return result


def increment_version(tensor: core.Tensor) -> None:
    """Count a write into the tensor's memory made behind the API (an optimizer's step on p.array): whatever saved
    it, or a view of it, for backward then refuses to use it (PyTorch: torch.autograd.graph.increment_version)."""
    tensor._version_counter[0] += 1


# ---- views: tensors that share a base's memory ----

@dataclass(slots=True)
class View:
    """How a view tensor was cut from its base, whose memory and version it shares: the view ops from the base,
    each (Function class, its options, which of its outputs or None), and the version its node was made at."""

    base: core.Tensor
    steps: tuple[tuple[type[Function], dict[str, Any], int | None], ...]
    version: int

    def refresh(self, t: core.Tensor) -> None:
        """t's node made again from the base, whose values an in-place write changed since (as PyTorch makes a
        view's grad_fn again): the view ops replayed on the base, recorded even under no_grad."""
        grad, core.modes.grad = core.modes.grad, True
        try:
            v = self.base
            for cls, options, index in self.steps:
                v = cls.apply(v, **options)
                v = v if index is None else v[index]
        finally:
            core.modes.grad = grad
        move_retained(t._grad_fn, v._grad_fn, t)
        t._grad_fn, t._requires_grad, self.version = v._grad_fn, v.requires_grad, t._version_counter[0]


def share_memory(x: core.Tensor, results: Sequence[core.Tensor], cls: type[Function], options: dict[str, Any],
                 several: bool) -> None:
    """Results of a view op that lie in x's memory share x's version counter, and remember how they were cut from
    x's base (x, or the base x was cut from), so that an in-place write through one is seen by all."""
    xp = backend.get_array_module(x.array)
    base, steps = (x, ()) if x._view is None else (x._view.base, x._view.steps)
    for i, r in enumerate(results):
        if xp.may_share_memory(r.array, x.array):
            r._counter = x._version_counter
            r._view = View(base, (*steps, (cls, options, i if several else None)), x._version_counter[0])


def views_of_inputs(what: str, inputs: Sequence[core.Tensor], results: Sequence[core.Tensor]) -> None:
    """Results of a custom Function (`what`) that lie in an input's memory (its forward returned a view of the
    input, or the input itself): each shares that input's version counter, so that a write through either is seen by
    whatever saved the other, and refuses an in-place write where a gradient is recorded, which would go around the
    Function's backward (PyTorch refuses it too)."""
    for i, r in enumerate(results):
        xp = backend.get_array_module(r.array)
        x = next((t for t in inputs if xp.may_share_memory(r.array, t.array)), None)
        if x is not None:
            r._counter, r._made_inside = x._version_counter, f"output {i} of {what}"


class CopySlices(Function):
    """y = base with its view (the view ops `steps` from the base) replaced by v, after an in-place write into
    the view (VersionedTensor._write), as PyTorch's CopySlices; forward returns the base's array, already written.
    dbase = dout with 0 where the view lies,  dv = dout where the view lies, in the view's shape"""

    graph_backward = True  # its backward is written against xp: create_graph=True runs it on tensors

    def forward(self, base, v, steps):
        self.base_shape, self.steps = base.shape, steps
        self.module = backend.get_array_module(base)
        return base

    def backward(self, dout):
        where = self.positions(self.module)  # (the view's shape): constants
        in_view = self.module.zeros(math.prod(self.base_shape), dtype=bool)
        in_view[where.reshape(-1)] = True
        dbase = core.namespace(dout).where(in_view.reshape(self.base_shape), 0, dout)
        return dbase, dout.reshape(-1)[where]

    def positions(self, xp: Any) -> Any:
        """The flat position in the base of each element of the view (an array of the view's shape)."""
        where = xp.arange(math.prod(self.base_shape)).reshape(self.base_shape)  # each element's flat position
        for cls, options, index in self.steps:  # ... cut as the view was: the positions the view covers
            where = cls().forward(where, **options)
            where = where if index is None else where[index]
        return where


# ---- the tensor's side: its counter, its view, and writes in place ----

class VersionedTensor:
    """The tensor's part of the contract, a layer of mg.Tensor: its version counter (shared by its views), how it
    was cut from a base, and write(), through which every in-place op goes."""

    _counter: list[int] | None = None  # made at the first write or save (most results are never written)
    _view: View | None = None
    _made_inside: str | None = None  # "output i of F" where a custom Function F returned its input's memory

    @property
    def _version_counter(self) -> list[int]:
        """The count of writes into this tensor's memory, in a list that its views share."""
        if self._counter is None:
            self._counter = [0]
        return self._counter

    _version = property(lambda self: self._version_counter[0])  # as PyTorch's x._version: writes counted so far

    def detach(self) -> core.Tensor:
        """The same values, cut off from the graph. It shares this tensor's memory, so also its version: a write into
        either is seen by whatever saved the other (as PyTorch's detach)."""
        t = core.TENSOR.wrap(self.array)
        t._counter = self._version_counter
        return t

    def detach_(self) -> core.Tensor:
        """Cut this tensor itself off from the graph, as PyTorch's: it becomes a leaf that does not require grad,
        holding the same memory (zero_grad(set_to_none=False) does this to .grad before writing zeros into it). A
        view in the graph cannot be, as there: x.detach() gives its values outside the graph."""
        if self._view is not None and self.requires_grad:
            raise RuntimeError(f"detach_: this tensor of shape {self.shape} is a view of another tensor in the graph, "
                               "which cannot be detached in place; use x.detach()")
        self._grad_fn, self._requires_grad = None, False
        return self

    def _write(self, op: str, compute: Callable[..., core.Tensor], *operands: Any) -> core.Tensor:
        """Write compute(self, *operands), an out-of-place op giving self's shape and dtype, into self's own memory
        (so every view of it sees it), and count the write. Where it is recorded for backward (grad mode, and a
        gradient wanted), compute runs on a copy of the old values, which its node may keep, and self takes the
        result's place in the graph, as does self's base if self is a view of one (see CopySlices)."""
        self.grad_fn  # brings a stale view up to date  # noqa: B018
        view = self._view
        grad_mode = core.modes.grad
        if grad_mode and view is not None and view.base.requires_grad and not self.requires_grad:
            view.refresh(self)  # a view made under no_grad: its values come from the base, and so will its gradient
        if grad_mode:
            leaf = self if view is None else view.base
            if leaf.requires_grad and leaf.grad_fn is None:
                what = "a leaf tensor" if view is None else "a view of a leaf tensor"
                raise RuntimeError(f"{op}: {what} that requires grad (shape {leaf.shape}) is being used in an in-place "
                                   "operation; update it under mg.no_grad(), as an optimizer does, or write into a "
                                   "copy (x.clone())")
        recording = grad_mode and (self.requires_grad or any(isinstance(o, core.Tensor) and o.requires_grad
                                                              for o in operands))
        if recording and view is not None and view.steps[-1][2] is not None:
            raise RuntimeError(f"{op}: this tensor of shape {self.shape} is one of several views that "
                               f"{view.steps[-1][0].op} returned, which cannot be written in place where a gradient "
                               "is recorded; use an out-of-place op (x = x + y)")
        if recording and self._made_inside is not None:
            raise RuntimeError(f"{op}: this tensor, {self._made_inside}, is a view of that Function's input (or the "
                               "input itself) and cannot be written in place where a gradient is recorded: the write "
                               "would go around the Function's backward; write into its .clone()")
        if any(s == 0 and n > 1 for s, n in zip(self.array.strides, self.shape, strict=True)) \
                or not getattr(self.array.flags, "writeable", True):
            raise RuntimeError(f"{op}: several elements of this tensor of shape {self.shape} share one memory "
                               "location (an expand() view), or its memory is read-only; write into x.clone()")
        old = self
        if recording:  # compute's node may keep the old values: they must outlive the write
            old = core.TENSOR.wrap(self.array.copy(), self.requires_grad)
            old._grad_fn = self._grad_fn
        result = compute(old, *operands)
        if result.shape != self.shape or result.dtype != self.dtype:
            raise RuntimeError(f"{op}: the result, of shape {result.shape} and dtype {result.dtype}, cannot be "
                               f"written into this tensor of shape {self.shape} and dtype {self.dtype}; compute it "
                               "out of place")
        self.array[...] = result.array
        self._version_counter[0] += 1
        if result.requires_grad:
            move_retained(self._grad_fn, result._grad_fn, self)
            self._grad_fn, self._requires_grad = result._grad_fn, True
            if view is not None:  # the base now holds the new values where the view lies, the old ones elsewhere
                base = view.base
                before = core.TENSOR.wrap(base.array, base.requires_grad)
                before._grad_fn = base._grad_fn
                after = CopySlices.apply(before, result, steps=view.steps)
                move_retained(base._grad_fn, after._grad_fn, base)
                base._grad_fn, base._requires_grad = after._grad_fn, True
        if view is not None:
            view.version = self._version_counter[0]
        return self


# ---- the core's named points (core.contract), provided here ----

def check_versions(node: core.Function) -> None:
    """Before a node's backward: refuse it if an array it kept was written in place since (Function.check_versions)."""
    if isinstance(node, Function):
        node.check_versions()


def node_of(t: core.Tensor) -> core.Function | None:
    """t.grad_fn: the node that computed t, None for a leaf (as PyTorch's grad_fn); a view whose base was written in
    place since gets its node made again first."""
    view = getattr(t, "_view", None)  # a tensor of the core's own class has none
    if view is not None and view.version != t._version_counter[0]:
        view.refresh(t)
    return t._grad_fn


def share_version(leaf: core.Tensor, source: core.Tensor) -> None:
    """Tensor.leaf(t, copy=False) shares t's array, and then its version too (as torch.as_tensor)."""
    leaf._counter = source._version_counter


def saved_version(t: core.Tensor, node: core.Function, index: int) -> None:
    """The core's point in Function.saved under create_graph=True: t, the tensor a node's input `index` (or, past the
    inputs, its output) stands for, counts its writes in the counter the node noted for it, so that a write into it
    before the gradient's own backward is refused."""
    if node.mg_versions:
        t._counter = node.mg_versions[index][0]


core.contract.check_versions = check_versions
core.contract.count_write = increment_version
core.contract.saved_version = saved_version
core.contract.node_of = node_of
core.contract.share_version = share_version

"""torch.autograd around the core: the sweep that x.backward() and grad() run (core.Sweep with hooks, chosen
inputs, version checks and sums that reuse memory), grad() (gradients of chosen inputs, returned without touching
any .grad), backward(inputs=...), create_graph=True (GraphBackward: the same sweep, whose gradients are tensors of a
graph: each node's one backward formula run on tensors), and torch.autograd's other names (Function, which also takes
PyTorch's protocol: minigrad/custom_function.py; the grad-mode switches, graph_order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minigrad import backend, core, versions
from minigrad.core import FREED, graph_order
from minigrad.custom_function import Function, once_differentiable
from minigrad.hooks import hooks_of, run_hooks
from minigrad.switches import enable_grad, no_grad, set_grad_enabled

__all__ = ["Backward", "Function", "GraphBackward", "enable_grad", "grad", "graph_order", "no_grad",
           "once_differentiable", "set_grad_enabled"]

class Backward(core.Sweep):
    """core.Sweep, as backward() and grad() run it. With `targets` (id of an edge -> its tensor), only the part of
    the graph that leads to them runs, and their gradients are captured (after their hooks) instead of reaching
    .grad; early=True takes a target's gradient before its hooks where the sweep goes on past it, as
    torch.autograd.grad does. Each node checks, before its backward, that what it kept was not written since."""

    def __init__(self, retain_graph: bool, targets: dict[int, core.Tensor] | None = None, early: bool = False) -> None:
        super().__init__(retain_graph)
        self.targets, self.early = targets, early
        self.needed: set[int] | None = None  # with targets: the edges to visit
        self.through: set[int] = set()  # the nodes on the way to a target
        self.freed = False  # a freed node met on the way (its inputs forgotten)
        self.captured: dict[int, Any] = {}  # id(target edge) -> its gradient
        self.owns: set[int] = set()  # ids of the edges whose gradient so far is an array of ours, to add into
        self.fresh: set[int] = set()  # ids of the arrays the last backward made for one input alone

    def order(self, starts: Sequence[core.Function | core.Tensor]) -> list[core.Function | core.Tensor]:
        order = super().order(starts)
        if self.targets is not None:  # only the nodes with an input on the way to a target, as PyTorch runs
            for edge in order:  # each after its inputs
                if isinstance(edge, core.Function):
                    self.freed = self.freed or edge.freed
                    if any(p is not None and (id(p) in self.targets or id(p) in self.through)
                           for p in edge.parents):
                        self.through.add(id(edge))
            self.needed = self.through | self.targets.keys()
        return order

    def run(self, outputs: Sequence[core.Tensor], gradients: Sequence[Any]) -> None:
        super().run(outputs, gradients)
        if self.targets is not None and self.freed and len(self.captured) < len(self.targets):
            raise RuntimeError(FREED)  # an input not reached: the way to it may have been freed

    def visit(self, edge: core.Function | core.Tensor, dout: Any) -> None:
        key = id(edge)
        if self.targets is not None or hooks_of(edge):
            dout = self.before_visit(edge, key, dout)
            if dout is None:
                return
        super().visit(edge, dout)
        self.owns.discard(key)

    def before_visit(self, edge: core.Function | core.Tensor, key: int, dout: Any) -> Any:
        """The edge's hooks, and with targets the capture of a chosen input's gradient: dout as the sweep goes on
        with it, or None where it goes no further along this edge."""
        targets = self.targets
        if targets is not None and key not in self.needed:
            return None
        if targets is not None and self.early and key in targets and key in self.through:
            self.captured[key] = self.kept(dout)  # an input asked for that the sweep goes past: before its hooks
        if hooks_of(edge):
            dout = run_hooks(edge, dout)
            self.owns.discard(key)  # a hook saw it (and may keep it): no longer ours to add into
        if targets is not None and key in targets and key not in self.captured:  # an input asked for
            self.captured[key] = dout if key in self.owns else self.kept(dout)
            if key not in self.through:
                return None
        return dout

    @staticmethod
    def kept(dout: Any) -> Any:
        """A gradient the sweep hands out (captured for grad()): a copy, as the sweep may add into dout later."""
        return dout.copy()

    def input_grads(self, node: core.Function, dout: Any) -> Sequence[Any]:
        if isinstance(node, versions.Function):  # an array it kept (or an index tensor) written in place since? refused
            node.check_versions()
        dxs = super().input_grads(node, dout)
        # the arrays made for one input alone: not dout, nor a view, nor handed to another input too (or its view)
        fresh = {id(dx) for dx in dxs if dx is not None and dx is not dout and dx.base is None}
        if len(dxs) > 1 and fresh:
            roots = [id(dx if dx.base is None else dx.base) for dx in dxs if dx is not None]
            fresh -= {root for root in roots if roots.count(root) > 1}
        self.fresh = fresh
        return dxs

    def add(self, edge: core.Function | core.Tensor, dx: Any) -> None:
        """The same sum as the core's, into an array of ours where there is one: the total so far if we made it,
        else dx if its backward made it for this input alone (addition commutes exactly), else a new one."""
        key, total = id(edge), self.grads.get(id(edge))
        if total is None:
            self.grads[key] = dx
            if id(dx) in self.fresh:
                self.owns.add(key)
        elif key in self.owns:
            total += dx
        elif id(dx) in self.fresh:
            dx += total
            self.grads[key] = dx
            self.owns.add(key)
        else:
            self.grads[key] = core.as_writable(total + dx)  # 0-d arrays add up to a NumPy scalar: as an array again
            self.owns.add(key)

    def accumulate_grad(self, leaf: core.Tensor, dout: Any) -> None:
        if leaf.grad is None and id(leaf) in self.owns:  # ours: no copy needed
            leaf.grad = core.TENSOR.wrap(dout)
        else:
            super().accumulate_grad(leaf, dout)


class GraphBackward(Backward):
    """Backward with create_graph=True: the same sweep (order, targets, hooks, version checks), in grad mode, whose
    gradients are tensors of a graph of their own, so that they can be differentiated in turn. Three extension
    points change: a node's backward runs on tensors (its one formula, with xp = minigrad and self.saved giving the
    graph's tensors), sums are recorded, and a leaf's .grad is accumulated out of place (an earlier .grad may be part
    of a graph)."""

    grad_mode = True

    def start(self, t: core.Tensor, grad: Any, which: str) -> core.Function | core.Tensor:
        edge = super().start(t, grad, which)  # checked, and filed as an array
        filed = self.grads[id(edge)]
        if not isinstance(filed, core.Tensor):  # the tensor given, which may be part of a graph itself (or a constant)
            self.grads[id(edge)] = grad if isinstance(grad, core.Tensor) and grad.array is filed else \
                core.TENSOR.wrap(filed)
        return edge

    @staticmethod
    def kept(dout: core.Tensor) -> core.Tensor:
        return dout  # a tensor of the graph: nothing adds into it

    def input_grads(self, node: core.Function, dout: Any) -> Sequence[Any]:
        if isinstance(node, versions.Function):
            node.check_versions()
        if not type(node).graph_backward:  # the class's: a ctx's attributes are its user's
            raise NotImplementedError(
                f"create_graph=True: {type(node).__name__}.backward computes on arrays, so its gradient cannot be "
                "differentiated; write it against xp and self.saved and set graph_backward = True (docs/backward.md, "
                "'Backward is a graph too')")
        graph, core.modes.graph = core.modes.graph, True  # the one point where a backward runs on tensors
        try:
            return core.Sweep.input_grads(self, node, dout)
        finally:
            core.modes.graph = graph

    add = core.Sweep.add  # total + dx: recorded, out of place

    def accumulate_grad(self, leaf: core.Tensor, dout: core.Tensor) -> None:
        leaf.grad = dout.clone() if leaf.grad is None else leaf.grad + dout  # out of place, in the graph


def tensor_list(op: str, what: str, value: Any) -> list[core.Tensor]:
    """One tensor, or a non-empty list or tuple of them, as a list."""
    tensors = ([value] if isinstance(value, core.Tensor) else list(value) if isinstance(value, (list, tuple))
               else None)
    if tensors is None or not all(isinstance(t, core.Tensor) for t in tensors):
        raise TypeError(f"{op}: {what} must be a tensor or a list or tuple of tensors, got {type(value).__name__} "
                        f"{value!r:.60}")
    if not tensors:
        raise RuntimeError(f"{op}: {what} cannot be empty")
    return tensors


def targets_of(op: str, inputs: Any) -> dict[int, core.Tensor]:
    """The tensors asked for (one, or a list or tuple), by the id of the edge that stands for each; each must require
    grad, as in PyTorch."""
    targets = {}
    for i, t in enumerate(tensor_list(op, "inputs", inputs)):
        if not t.requires_grad:
            raise RuntimeError(f"{op}: input {i}, of shape {t.shape}, does not require grad, so no gradient reaches it")
        targets[id(t.grad_fn or t)] = t
    return targets


class BackwardTensor:
    """The tensor's part, a layer of mg.Tensor: backward() with PyTorch's arguments."""

    def backward(self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: core.Tensor | Sequence[core.Tensor] | None = None) -> None:
        """Accumulate d(self)/d(leaf) into `.grad` of every leaf that requires grad, or only of `inputs` (leaves or
        not); `gradient` is d(loss)/d(self), needed when self is not a scalar. The graph's saved arrays are freed
        unless retain_graph=True (by default: create_graph). create_graph=True makes each .grad a tensor of a graph,
        accumulated out of place, so that it can be differentiated again. As torch.Tensor.backward."""
        targets = None if inputs is None else targets_of("backward", inputs)
        for t in (targets or {}).values():  # a non-leaf input retains its gradient, from now on too, as in PyTorch
            t.retain_grad()
        retain_graph = create_graph if retain_graph is None else retain_graph
        sweep = (GraphBackward if create_graph else Backward)(bool(retain_graph), targets)
        sweep.run([self], [gradient])
        for key, t in (targets or {}).items():  # the leaves among the inputs (retain_grad's hook stored the others)
            g = sweep.captured.get(key)
            if g is not None and t.is_leaf and create_graph:
                sweep.accumulate_grad(t, g)
            elif g is not None and t.is_leaf:  # accumulated as the sweep does a leaf's: g is ours (a copy)
                if t.grad is None:
                    t.grad = core.TENSOR.wrap(g)
                else:
                    t.grad.array += g

    def zero_grad(self) -> None:
        self.grad = None


def grad(outputs: core.Tensor | Sequence[core.Tensor], inputs: core.Tensor | Sequence[core.Tensor],
         grad_outputs: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool | None = None, materialize_grads: bool = False) -> tuple[core.Tensor | None, ...]:
    """d(outputs)/d(input) for each input, as torch.autograd.grad: new tensors, the leaves' .grad left as they were
    (a retained intermediate's is filled, as there), and only the part of the graph that leads to the inputs run.
    grad_outputs: d(loss)/d(output), one per output (None: 1 for a scalar). An input the outputs do not depend on is
    refused, or gives None with allow_unused=True (zeros with materialize_grads=True). create_graph=True: each
    gradient is a tensor of a graph (of the grad_outputs too, where they require grad), to differentiate again."""
    outputs, inputs = tensor_list("grad", "outputs", outputs), tensor_list("grad", "inputs", inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif not isinstance(grad_outputs, (list, tuple)):  # one gradient, for one output
        grad_outputs = [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad: {len(grad_outputs)} grad_outputs for {len(outputs)} outputs; give one for each "
                         "(None for a scalar output)")
    retain_graph = create_graph if retain_graph is None else retain_graph
    sweep = (GraphBackward if create_graph else Backward)(bool(retain_graph), targets_of("grad", inputs), early=True)
    sweep.run(outputs, grad_outputs)
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    results, given = [], set()
    for i, t in enumerate(inputs):
        g = sweep.captured.get(id(t.grad_fn or t))
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {i}, of shape {t.shape}, was not used to compute the outputs; pass "
                               "allow_unused=True to get None for it")
        if g is None and materialize_grads:
            g = backend.get_array_module(t.array).zeros_like(t.array)
        if isinstance(g, core.Tensor):  # create_graph=True: a tensor of the gradient's graph
            results.append(g)
            continue
        results.append(None if g is None else core.TENSOR.wrap(g.copy() if id(g) in given else g))
        given.add(id(g))
    return tuple(results)

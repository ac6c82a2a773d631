"""torch.autograd around the core: grad() (gradients of chosen inputs, returned without touching any .grad), and what
the core's sweep calls for them at its named points (core.contract): the capture of a chosen input's gradient, the
inputs of backward(inputs=...); and torch.autograd's other names (Function, which also takes PyTorch's protocol:
minigrad/autograd/custom_function.py; the grad-mode switches, graph_order). The sweep itself is core.Sweep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.autograd.custom_function import Function, once_differentiable
from minigrad.autograd.hooks import run_hooks
from minigrad.autograd.switches import enable_grad, no_grad, set_grad_enabled
from minigrad.core import graph_order

__all__ = ["Function", "enable_grad", "grad", "graph_order", "no_grad", "once_differentiable", "set_grad_enabled"]


def capture(sweep: core.Sweep, edge: core.Function | core.Tensor, dout: Any) -> Any:
    """The sweep's point at a chosen input: its gradient kept in sweep.captured, as PyTorch's engine keeps it: before
    the edge's hooks where grad() goes on past it (towards another input), after them otherwise. Returns dout after
    the hooks where the sweep goes on, None where it stops here."""
    key, goes_on = id(edge), id(edge) in sweep.through
    if sweep.early and goes_on:
        sweep.captured[key] = kept(dout)
    if edge.mg_backward_hooks:
        dout = run_hooks(edge, dout)
    if key not in sweep.captured:
        sweep.captured[key] = kept(dout)
    return dout if goes_on else None


def kept(dout: Any) -> Any:
    """A gradient the sweep hands out: an array copied (what grad() returns is the caller's to write into), a tensor
    of the gradient's graph (create_graph=True) as it is."""
    return dout if isinstance(dout, core.Tensor) else dout.copy()


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


def chosen_inputs(inputs: Any) -> dict[int, core.Tensor]:
    """The core's point for backward(inputs=...): the inputs, checked, each keeping its .grad from now on where it is
    not a leaf (retain_grad), as in PyTorch."""
    targets = targets_of("backward", inputs)
    for t in targets.values():
        t.retain_grad()
    return targets


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
    sweep = core.Sweep(bool(retain_graph), create_graph, targets_of("grad", inputs), early=True)
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


core.contract.capture = capture
core.contract.chosen_inputs = chosen_inputs

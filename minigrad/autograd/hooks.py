"""Hooks on gradients, around the core: x.register_hook(f) calls f with d(loss)/d(x) when backward() reaches x
(and may replace it), x.retain_grad() keeps an intermediate tensor's gradient in its .grad, and the handle that
takes a hook off again. A hook lives on the graph edge that stands for its tensor (its node, or the leaf itself),
where the core's sweep runs it (core.contract.run_hooks, provided here).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from minigrad import core
from minigrad.array import backend


class HookedTensor:
    """The tensor's part, a layer of mg.Tensor: register_hook, retain_grad, retains_grad."""

    def register_hook(self, hook: Callable[[core.Tensor], Any]) -> RemovableHandle:
        """Call hook(grad) with d(loss)/d(self) when backward() reaches this tensor, in the order registered;
        a tensor of the same shape that it returns replaces the gradient. It must not change grad.
        An in-place write into self later leaves the hook with the values it was registered on, as in PyTorch.
        Returns a handle: handle.remove() takes the hook off again."""
        edge = self.grad_fn or self  # the graph edge that stands for this tensor: its node, or itself
        if not self.requires_grad:
            raise RuntimeError(f"register_hook: this tensor of shape {self.shape} does not require grad, "
                               "so backward() never reaches it")
        if not callable(hook):
            raise TypeError(f"register_hook: expected a function of the gradient, got {type(hook).__name__}")
        # retain_grad's hook stays last, so .grad shows the gradient after every other hook (as PyTorch)
        edge.mg_backward_hooks = tuple(sorted((*hooks_of(edge), hook), key=lambda h: isinstance(h, RetainGrad)))
        return RemovableHandle(edge, "mg_backward_hooks", hook)

    def retain_grad(self) -> None:
        """Keep d(loss)/d(self) in `.grad` after backward(), also for an intermediate result (leaves keep theirs
        anyway); like a leaf's, it accumulates over backward() calls. After an in-place write it is the gradient
        of the latest values. The graph holds the tensor weakly: it lives as long as you keep it, as in PyTorch."""
        node = self.grad_fn
        if not self.requires_grad:
            raise RuntimeError(f"retain_grad: this tensor of shape {self.shape} does not require grad")
        if not self.retains_grad and node is not None:
            self.register_hook(RetainGrad(self))

    @property
    def retains_grad(self) -> bool:
        """Whether retain_grad() was called on this intermediate result (False for a leaf, as in PyTorch)."""
        node = self.grad_fn
        return node is not None and any(isinstance(h, RetainGrad) and h.tensor() is self for h in hooks_of(node))


def hooks_of(edge: core.Function | core.Tensor) -> tuple[Any, ...]:
    """The hooks registered on a graph edge (a node, or a leaf), in order."""
    return edge.mg_backward_hooks


def run_hooks(edge: core.Function | core.Tensor, dout: Any) -> Any:
    """The sweep's point at an edge with hooks: the gradient of the tensor `edge` stands for, after its hooks (each
    may return a replacement). Under create_graph=True dout is a tensor of the gradient's graph: the hooks get it,
    and a tensor they return stays in the graph."""
    graph = isinstance(dout, core.Tensor)
    for hook in hooks_of(edge):
        result = hook(dout if graph else core.TENSOR.wrap(dout, False))
        if result is not None:
            new = core.as_writable(result.array if isinstance(result, core.Tensor) else result)
            array = dout.array if graph else dout
            if (getattr(new, "shape", None), getattr(new, "dtype", None)) != (array.shape, array.dtype) \
                    or backend.device_of(new) != backend.device_of(array):
                raise RuntimeError(f"hook {getattr(hook, '__name__', hook)!r} returned {type(new).__name__} "
                                   f"{getattr(new, 'shape', '')} {getattr(new, 'dtype', '')} for a gradient of "
                                   f"shape {array.shape} and dtype {array.dtype} on {backend.device_of(array)}")
            dout = (result if isinstance(result, core.Tensor) else core.TENSOR.wrap(new)) if graph else new
    return dout


class RetainGrad:
    """The hook that retain_grad() registers: it stores the gradient in the tensor's .grad, while the tensor lives."""

    def __init__(self, tensor: core.Tensor) -> None:
        self.tensor = weakref.ref(tensor)  # the graph does not keep it alive (y = x * 2; y.retain_grad(); del y)

    def __call__(self, grad: core.Tensor) -> None:
        t = self.tensor()
        if t is not None and grad.requires_grad:  # create_graph=True: .grad keeps the gradient's graph, as PyTorch's
            t.grad = grad.clone() if t.grad is None else t.grad + grad
        elif t is not None:
            t.grad = core.TENSOR.wrap(grad.array.copy() if t.grad is None else t.grad.array + grad.array)


def move_retained(old: core.Function | None, new: core.Function | None, tensor: core.Tensor) -> None:
    """retain_grad's hook follows `tensor` from the node that computed its old values to the one that computes
    its new values, so that .grad is the gradient of the latest version (as in PyTorch); other hooks stay."""
    if old is None or new is None:
        return
    moved = tuple(h for h in hooks_of(old) if isinstance(h, RetainGrad) and h.tensor() is tensor)
    if moved:
        old.mg_backward_hooks = tuple(h for h in hooks_of(old) if h not in moved)
        new.mg_backward_hooks = (*hooks_of(new), *moved)


class RemovableHandle:
    """What register_hook (and a Module's forward hooks) return, as torch.utils.hooks.RemovableHandle: remove() takes
    that one hook off again (a no-op once done, or once its owner is gone); `with handle:` removes it at the end."""

    def __init__(self, owner: Any, attribute: str, entry: Any) -> None:
        self.owner, self.attribute, self.entry = weakref.ref(owner), attribute, entry

    def remove(self) -> None:
        owner = self.owner()
        hooks = () if owner is None else getattr(owner, self.attribute, ())
        for i, h in enumerate(hooks):
            if h is self.entry:  # this registration only: the same function registered twice has two entries
                object.__setattr__(owner, self.attribute, hooks[:i] + hooks[i + 1:])
                break
        self.entry = None

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


core.contract.run_hooks = run_hooks

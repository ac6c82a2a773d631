"""PyTorch's custom Function protocol, an adapter around minigrad's own (docs/backward.md, "PyTorch's protocol"): a
subclass of mg.autograd.Function whose forward is a @staticmethod forward(ctx, *args) on tensors, with
backward(ctx, *grads), runs as one node of minigrad's protocol, which is also its ctx: a subclass of Custom named as
PyTorch names the grad_fn (LegendrePolynomial3Backward). A subclass in minigrad's protocol (forward(self, *arrays)
on arrays) runs as mg.Function does."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.autograd import versions
from minigrad.autograd.switches import no_grad

__all__ = ["Custom", "Function", "once_differentiable"]


class Function(versions.Function):
    """mg.autograd.Function: minigrad's Function (mg.Function), which also takes PyTorch's protocol: where a subclass's
    forward is a staticmethod, Cls.apply(*args) calls Cls.forward(ctx, *args) on the tensors themselves (outside the
    graph, as there) and records one Custom node, whose backward calls Cls.backward(ctx, *grads)."""

    torch_style = False
    node: type[Custom]  # with PyTorch's protocol: the class of its nodes, named as PyTorch names its grad_fn

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.torch_style = isinstance(inspect.getattr_static(cls, "forward"), staticmethod)
        if cls.torch_style:  # LegendrePolynomial3 -> LegendrePolynomial3Backward, its op "legendrepolynomial3backward"
            cls.node = type(f"{cls.__name__}Backward", (Custom,), {"mg_fn": cls, "__module__": cls.__module__})

    @classmethod
    def apply(cls, *args: Any, **options: Any) -> Any:
        if not cls.torch_style:
            return super().apply(*args, **options)
        if options:
            raise TypeError(f"{cls.__name__}.apply takes its arguments by position, as PyTorch's: got keyword "
                            f"arguments {sorted(options)}")
        results = cls.node.apply(*[a for a in args if isinstance(a, core.Tensor)], args=args)
        several = isinstance(results, tuple)
        for r in results if several else (results,):  # marked non-differentiable, or not floats: outside the graph
            node = r._grad_fn.mg_parents[0] if several and r._grad_fn is not None else r._grad_fn
            if node is not None and (id(r.array) in node.mg_non_differentiable or r.dtype.kind != "f"):
                r._grad_fn, r._requires_grad = None, False
        return results


class Custom(versions.Function):
    """The node of one call of a PyTorch-style Function `fn` (its subclass FnBackward, made for it), and its ctx:
    save_for_backward, saved_tensors, needs_input_grad (one per argument of forward, False for a non-tensor),
    mark_non_differentiable, set_materialize_grads. fn.forward(ctx, *args) runs on the tensors; fn.backward(ctx,
    *grads) gets one gradient per output (zeros where none reached it, unless set_materialize_grads(False)) and
    returns one per argument (None for a non-tensor), or a single tensor for a single argument."""

    mg_fn: type[Function]  # the PyTorch-style Function whose forward and backward this node runs
    mg_non_differentiable: frozenset[int] = frozenset()  # ids of the output arrays marked so
    materialize_grads = True
    mg_saved: tuple[Any, ...] = ()  # the arrays of the tensors save_for_backward was given (None for None)
    mg_saved_as: tuple[int | str | None, ...] = ()  # each one's place: input i, "output", or None (made in forward)
    mg_unpacked: tuple[core.Tensor | None, ...] | None = None  # ctx.saved_tensors, while backward runs

    def forward(self, *arrays: Any, args: tuple[Any, ...]) -> Any:
        fn = self.mg_fn
        inputs = [a for a in args if isinstance(a, core.Tensor)]
        self.mg_is_tensor = tuple(isinstance(a, core.Tensor) for a in args)
        self.needs_input_grad = tuple(core.modes.grad and isinstance(a, core.Tensor) and a.requires_grad
                                      for a in args)
        with no_grad():  # as PyTorch's: the ops inside forward are not recorded
            out = fn.forward(self, *args)
        outs = out if isinstance(out, tuple) else (out,)
        if not outs or not all(isinstance(o, core.Tensor) for o in outs):
            raise TypeError(f"{fn.__name__}.forward must return a tensor or a tuple of tensors, got "
                            f"{type(out).__name__}")
        self.mg_outputs = tuple((o.shape, o.dtype) for o in outs)
        kept = self.__dict__.pop("to_save", ())  # the tensors themselves: only their arrays and places stay
        places = {id(t): i for i, t in enumerate(inputs)}
        outputs = {id(o) for o in outs}
        self.mg_saved = tuple(None if t is None else t.array for t in kept)
        self.mg_saved_as = tuple(None if t is None else places.get(id(t), "output" if id(t) in outputs else None)
                                 for t in kept)
        return tuple(o.array for o in outs) if isinstance(out, tuple) else out.array

    def made(self, inputs: Sequence[core.Tensor], results: Sequence[core.Tensor], options: dict[str, Any]) -> None:
        super().made(inputs, results, options)
        versions.views_of_inputs(self.mg_fn.__name__, inputs, results)  # forward may return a view of its input

    graph_backward = True  # fn.backward computes on tensors: under create_graph=True, on those of the graph

    def backward(self, dout: Any) -> tuple[Any, ...]:
        """fn.backward(ctx, *douts), as PyTorch runs it: on tensors outside the graph in first order (the arrays
        wrapped), on tensors of the graph under create_graph=True, with ctx.saved_tensors the inputs and the output
        it saved back in the graph (self.saved), so that its gradients can be differentiated in turn."""
        graph = core.modes.graph
        if graph and self.mg_n_outputs is not None and "output" in self.mg_saved_as:
            raise NotImplementedError(f"create_graph=True: {self.mg_fn.__name__} saved one of its several outputs, "
                                      "which cannot be brought back into the graph here; save its inputs instead")
        douts = list(dout) if self.mg_n_outputs is not None else [dout]
        saved = [None if a is None else core.Function.saved(self, a, where)  # the class's: ctx.saved may be the user's
                 for a, where in zip(self.mg_saved, self.mg_saved_as, strict=True)]
        if not graph:  # arrays, as tensors outside the graph
            douts = [None if d is None else core.TENSOR.wrap(d) for d in douts]
            saved = [None if a is None else core.TENSOR.wrap(a) for a in saved]
        grads = self.run_backward(douts, saved, in_graph=graph)
        return tuple(g if graph or g is None else g.array for g in grads)

    def run_backward(self, douts: list[core.Tensor | None], saved: list[core.Tensor | None],
                     in_graph: bool = False) -> list[core.Tensor | None]:
        """fn.backward(ctx, *douts) with ctx.saved_tensors = saved: one gradient per tensor input, checked."""
        name = self.mg_fn.__name__
        if in_graph and getattr(self.mg_fn.backward, "once_differentiable", False):
            raise RuntimeError(f"create_graph=True: {name}.backward is marked @once_differentiable, so its gradients "
                               "cannot be differentiated (PyTorch refuses when they are; here, at once)")
        if self.materialize_grads:
            xp = backend.get_array_module(next(d for d in douts if d is not None).array)
            douts = [core.TENSOR.wrap(xp.zeros(shape, dtype)) if d is None else d
                     for d, (shape, dtype) in zip(douts, self.mg_outputs, strict=True)]
        self.mg_unpacked = tuple(saved)
        try:
            grads = self.mg_fn.backward(self, *douts)
        finally:
            self.mg_unpacked = None
        grads = grads if isinstance(grads, tuple) else (grads,)  # a single tensor: the one argument's gradient
        if len(grads) != len(self.mg_is_tensor):
            raise RuntimeError(f"{name}.backward returned {len(grads)} gradients for {len(self.mg_is_tensor)} "
                               "arguments of forward; return one per argument (None for a non-tensor)")
        dxs = []
        for i, (g, is_tensor) in enumerate(zip(grads, self.mg_is_tensor, strict=True)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(f"{name}.backward returned a gradient for argument {i} of forward, which is "
                                       "not a tensor; return None there")
            elif g is not None and not isinstance(g, core.Tensor):
                raise TypeError(f"{name}.backward returned a {type(g).__name__} for argument {i}; return a tensor "
                                "or None")
            else:
                dxs.append(g)
        return dxs

    # -- the ctx's methods, as PyTorch's --
    def save_for_backward(self, *tensors: core.Tensor | None) -> None:
        """Keep tensors for backward (ctx.saved_tensors): their arrays, version-checked and freed as a node's are."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, core.Tensor):
                raise TypeError(f"save_for_backward: argument {i} is not a tensor or None (got {type(t).__name__} "
                                f"{t!r:.40}); keep other values as attributes of ctx (ctx.k = k)")
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple[core.Tensor | None, ...]:
        """The tensors save_for_backward was given, in backward (those of the graph under create_graph=True)."""
        if self.mg_freed:
            raise RuntimeError(core.FREED)
        if self.mg_unpacked is None:
            raise RuntimeError(f"{self.mg_fn.__name__}: ctx.saved_tensors is read in backward")
        return self.mg_unpacked

    def mark_non_differentiable(self, *outputs: core.Tensor) -> None:
        """These outputs do not require grad; backward gets zeros for them."""
        self.mg_non_differentiable = frozenset(id(t.array) for t in outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """False: backward gets None, not zeros, for an output that no gradient reached."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors: core.Tensor) -> None:
        raise NotImplementedError("mark_dirty: a custom Function that writes into its inputs is not supported here; "
                                  "return a new tensor (compute on x.clone())")


def once_differentiable(backward: Callable[..., Any]) -> Callable[..., Any]:
    """PyTorch's decorator for a backward that cannot itself be differentiated: the backward itself, marked, so that
    create_graph=True through it is refused in one line."""
    backward.once_differentiable = True
    return backward

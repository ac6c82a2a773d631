"""Deprecated (one release, until 0.5): the second formulas that create_graph=True ran are gone, as each Function's
backward is now written once against xp and runs on tensors itself (docs/backward.md, "Backward is a graph too").
`formula` and `sum_to`, which the docs taught, still work, with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from minigrad import core
from minigrad.array.arrays import unbroadcast


def formula(*classes: type[core.Function]) -> Callable[[Callable[..., Sequence[Any]]], Callable[..., Sequence[Any]]]:
    """Deprecated: formula(node, dout) on tensors, run for `classes` under create_graph=True instead of their array
    backward. Write the backward once against xp = namespace(dout) and self.saved, and set graph_backward = True."""
    warnings.warn("minigrad.autograd.second_order.formula is deprecated and goes in 0.5: write the Function's "
                  "backward once, against xp = namespace(dout) and self.saved, and set graph_backward = True "
                  "(docs/backward.md)",
                  DeprecationWarning, stacklevel=2)

    def register(f: Callable[..., Sequence[Any]]) -> Callable[..., Sequence[Any]]:
        for cls in classes:
            cls.backward = both_orders(cls.backward, f)
            cls.graph_backward = True
        return f
    return register


def both_orders(first: Callable[..., Sequence[Any]], second: Callable[..., Sequence[Any]]) -> Callable[..., Any]:
    """A backward that runs `second` on tensors under create_graph=True, `first` on arrays otherwise."""
    def backward(self: core.Function, dout: Any) -> Sequence[Any]:
        return second(self, dout) if core.modes.graph else first(self, dout)
    return backward


def sum_to(t: Any, shape: tuple[int, ...]) -> Any:
    """Deprecated: arrays.unbroadcast, which sums a tensor back to `shape` as it does an array."""
    warnings.warn("minigrad.autograd.second_order.sum_to is deprecated and goes in 0.5: use "
                  "minigrad.array.arrays.unbroadcast, which takes tensors too", DeprecationWarning, stacklevel=2)
    return unbroadcast(t, shape)

"""What an exercise is (Exercise: a Function's forward, the cases, the engine's reference, the hints), and the
helpers the exercises share (random inputs, the causal mask, the masked scores); catalog.py lists them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minigrad.tensor import Tensor

Case = tuple[list[np.ndarray], dict[str, Any]]  # the float64 inputs that get gradients, and the other arguments


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    cls_name: str  # the Function the learner writes
    inputs: tuple[str, ...]  # the names of the inputs that get gradients, in forward's order
    docstring: str  # what forward computes (the derivative is the learner's)
    forward: str  # forward's source, as the stub has it
    returns: str  # what backward returns, with the shapes
    cases: Callable[[np.random.Generator], list[Case]]
    reference: Callable[..., Tensor]  # (tensors, options) -> the engine's output, whose backward is the answer
    solution: tuple[Any, ...]  # the engine's own Functions (or the composition) that --solution prints
    section: str  # the heading in docs/backward.md that derives it
    hints: tuple[str, ...]
    rows_sum_to_zero: dict[str, str] = field(default_factory=dict)  # input -> why its gradient's rows sum to 0
    imports: str = ""  # what the stub imports (and defines) besides Primitive and namespace
    intermediates: tuple[str, ...] = ()  # a composition's steps whose gradients backward leaves in self.grads,
    # in backward's order: each compared with autograd's (backprop ninja's cmp), the first wrong one named


def floats(rng: np.random.Generator, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [rng.standard_normal(s) for s in shapes]


def causal(t: int) -> np.ndarray:
    """(T, T): True where query t may see key s, s <= t."""
    return np.tril(np.ones((t, t), dtype=bool))



def masked_scores(q: Tensor, k: Tensor) -> Tensor:
    """Q K^T / sqrt(E), -inf where a query may not see a key: the composition the exercise `scores` checks against."""
    return (q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]))).masked_fill(~causal(q.shape[-2]), -math.inf)

"""torch.nn.utils' names that training programs call: the gradient clipping (which lives with the optimizers,
minigrad/optim/__init__.py) and parameters_to_vector.
"""

from __future__ import annotations

from collections.abc import Iterable

from minigrad.ops.shapes import cat
from minigrad.optim import clip_grad_norm_, clip_grad_value_
from minigrad.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and joined into one vector, in the graph, as torch.nn.utils.parameters_to_vector."""
    return cat([p.reshape(-1) for p in parameters])

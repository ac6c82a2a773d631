"""The lesson of docs/graph.md's last section: attention of two queries over three keys, where one score is masked
and the keys are also the values (a tensor used twice), after backward(). The page runs it; scripts/graph_lesson.py
draws it (docs/graph-lesson.svg).
"""

from __future__ import annotations

import math

import minigrad as mg
import minigrad.nn.functional as F


def lesson() -> tuple[mg.Tensor, dict[str, mg.Tensor]]:
    """The loss, and the tensors the picture names, after backward()."""
    x = mg.tensor([[1.0, 0.5], [-0.5, 1.0], [0.3, -1.2]], requires_grad=True)  # 3 positions, 2 channels
    q = mg.tensor([[0.2, 1.0], [1.0, -0.4]], requires_grad=True)  # the queries of the last 2 positions
    allowed = mg.tensor([[True, True, False], [True, True, True]])  # query 0 (position 1) may not see key 2
    scores = q @ x.T  # (2, 3): x as the keys
    weights = F.softmax(mg.where(allowed, scores, -math.inf), dim=-1)  # the mask of the walkthrough
    out = weights @ x  # (2, 2): x again, as the values
    loss = (out * mg.tensor([[1.0, -1.0], [0.5, 2.0]])).sum()
    for t in (scores, weights, out):
        t.retain_grad()
    loss.backward()
    return loss, {"x": x, "q": q, "scores": scores, "weights": weights, "out": out}

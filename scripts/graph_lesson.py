"""The picture of docs/graph.md's last section, docs/graph-lesson.svg: attention of two queries over three keys,
where one score is masked and the keys are also the values (a tensor used twice), drawn by mg.draw after
backward(). After a change to mg.draw, draw it again (it needs the draw extra: pip install -e '.[draw]' and
Graphviz's dot program):

    python scripts/graph_lesson.py

tests/test_picture.py checks that the committed picture shows what lesson() draws now.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import minigrad as mg  # noqa: E402
import minigrad.functional as F  # noqa: E402
from minigrad.picture import Graph  # noqa: E402

PICTURE = ROOT / "docs" / "graph-lesson.svg"
TITLE = ("x is used twice, as the keys and as the values: two arrows leave it, and its gradient is the sum of both "
         "paths\nquery 0 may not see key 2: that score's gradient is exactly 0 (scores' grad, first row)")


def lesson() -> tuple[mg.Tensor, dict[str, mg.Tensor]]:
    """The loss, and the tensors the picture names, after backward()."""
    x = mg.tensor([[1.0, 0.5], [-0.5, 1.0], [0.3, -1.2]], requires_grad=True)  # 3 positions, 2 channels
    q = mg.tensor([[0.2, 1.0], [1.0, -0.4]], requires_grad=True)  # the queries of the last 2 positions
    mask = mg.tensor([[0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]])  # query 0 (position 1) may not see key 2
    scores = q @ x.T  # (2, 3): x as the keys
    weights = F.softmax(scores + mask, dim=-1)
    out = weights @ x  # (2, 2): x again, as the values
    loss = (out * mg.tensor([[1.0, -1.0], [0.5, 2.0]])).sum()
    for t in (scores, weights, out):
        t.retain_grad()
    loss.backward()
    return loss, {"x": x, "q": q, "scores": scores, "weights": weights, "out": out}


def draw() -> Graph:
    """lesson()'s graph, top to bottom (mg.draw's is left to right: too wide for a page of docs)."""
    loss, names = lesson()
    return Graph(mg.draw(loss, params=names, title=TITLE).source.replace('rankdir="LR"', 'rankdir="TB"'))


if __name__ == "__main__":
    argparse.ArgumentParser(prog="scripts/graph_lesson.py", description=f"draw {PICTURE.name} again").parse_args()
    print("wrote", draw().render(str(PICTURE.with_suffix(""))))

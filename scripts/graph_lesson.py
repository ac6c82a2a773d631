"""The picture of docs/graph.md's last section, docs/graph-lesson.svg: gptlab/graph_lesson.py's attention of two
queries over three keys, where one score is masked and the keys are also the values (a tensor used twice), drawn by
mg.draw after backward(). After a change to mg.draw or to the lesson, draw it again (it needs the draw extra:
pip install -e '.[draw]' and Graphviz's dot program):

    python scripts/graph_lesson.py

tests/test_picture.py checks that the committed picture shows what lesson() draws now.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import minigrad as mg  # noqa: E402
from gptlab.graph_lesson import lesson  # noqa: E402
from minigrad.autograd.picture import Graph  # noqa: E402

PICTURE = ROOT / "docs" / "graph-lesson.svg"
TITLE = ("x is used twice, as the keys and as the values: two arrows leave it, and its gradient is the sum of both "
         "paths\nquery 0 may not see key 2: that score's gradient is exactly 0 (scores' grad, first row)")


def draw() -> Graph:
    """lesson()'s graph, top to bottom (mg.draw's is left to right: too wide for a page of docs)."""
    loss, names = lesson()
    return Graph(mg.draw(loss, params=names, title=TITLE).source.replace('rankdir="LR"', 'rankdir="TB"'))


if __name__ == "__main__":
    argparse.ArgumentParser(prog="scripts/graph_lesson.py", description=f"draw {PICTURE.name} again").parse_args()
    print("wrote", draw().render(str(PICTURE.with_suffix(""))))

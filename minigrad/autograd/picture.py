"""mg.draw(tensor): the graph that computed a tensor, as Graphviz DOT text (no dependency), rendered to SVG or PNG
and shown in Jupyter where the optional `graphviz` package and its program are installed. Operations and tensors
are the nodes, edges go the way the forward pass went, and each tensor shows its shape, dtype and, after backward(),
its gradient where one is kept: a leaf's .grad, an intermediate's where retain_grad() kept it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minigrad import core
from minigrad.array import backend
from minigrad.autograd.hooks import RetainGrad, hooks_of

SMALL = 6  # a tensor of at most this many elements shows its values (and its gradient's), as micrograd's picture


class Graph:
    """A drawn graph: `source` is its DOT text; `render(path)` writes a picture; Jupyter shows it inline."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __str__(self) -> str:
        return self.source

    def render(self, path: str, format: str = "svg") -> str:
        """Write the picture to path (+ '.svg' or '.png'), through the graphviz package; returns the file's path."""
        return _graphviz().Source(self.source).render(outfile=f"{path}.{format}", format=format, cleanup=True)

    def pipe(self, format: str = "svg") -> bytes:
        """The picture's bytes (SVG or PNG), through the graphviz package."""
        return _graphviz().Source(self.source).pipe(format=format)

    def _repr_svg_(self) -> str:
        return self.pipe("svg").decode()


def _graphviz() -> Any:
    try:
        import graphviz
    except ImportError:
        raise ImportError("rendering the graph needs the graphviz package and Graphviz's dot program: "
                          "pip install -e '.[draw]' and apt-get install graphviz (brew install graphviz); "
                          "Graph.source is the DOT text without them") from None
    return graphviz


def draw(tensor: core.Tensor, params: dict[str, core.Tensor] | None = None, max_nodes: int = 300,
         inputs: Sequence[core.Tensor] = (), title: str | None = None) -> Graph:
    """The graph that computed `tensor`. params (e.g. dict(model.named_parameters())) names the leaves, as
    torchviz's make_dot, and any other tensor of the graph it holds; max_nodes cuts a larger graph, saying how much
    was left out. inputs: tensors where the picture starts (what computed them is left out), such as one layer's
    q, k and v; title: a line above the picture."""
    if not isinstance(tensor, core.Tensor):
        raise TypeError(f"draw: expected a tensor, got {type(tensor).__name__}")
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"draw: max_nodes must be a positive int, got {max_nodes!r}")
    names = {id(edge_of(t)): name for name, t in (params or {}).items()}
    starts = {id(edge_of(t)) for t in inputs}
    start = edge_of(tensor)
    order = between(tensor, inputs)
    shown = order[-max_nodes:]  # the edges nearest the output: the order puts each after its inputs
    ids = {id(edge) for edge in shown}
    lines = ["digraph {", '  rankdir="LR"', '  node [fontname="monospace" fontsize=10]']
    if title is not None:
        label = escape(title)
        lines.append(f'  graph [label="{label}" labelloc="t" fontname="monospace" fontsize=11]')
    for edge in shown:
        if isinstance(edge, core.Tensor):  # a leaf
            lines.append(f'  t{id(edge)} [shape=ellipse label="{_leaf_label(edge, names)}"]')
            continue
        output = tensor if edge is start else None
        if id(edge) in starts:  # an input: the tensor alone, not the node that computed it
            lines.append(f'  t{id(edge)} [shape=ellipse label="{_result_label(edge, output, names)}"]')
            continue
        if isinstance(edge, core.Output):  # output `index` of a node of several outputs
            lines.append(f'  t{id(edge)} [shape=ellipse label="{_result_label(edge, output, names)}"]')
            lines.append(f'  n{id(edge.mg_parents[0])} -> t{id(edge)} [label="{edge.mg_index}"]')
            continue
        lines.append(f'  n{id(edge)} [shape=box style=filled fillcolor="#dde8f6" label="{_op_label(edge)}"]')
        if edge.mg_n_outputs is None:  # and the one tensor it computed (a node of several: their Output edges)
            lines.append(f'  t{id(edge)} [shape=ellipse label="{_result_label(edge, output, names)}"]')
            lines.append(f"  n{id(edge)} -> t{id(edge)}")
        for i, parent in enumerate(edge.mg_parents):
            if parent is not None and id(parent) in ids:  # a tensor used twice has two edges out
                label = f' [label="{i}"]' if len(edge.mg_parents) > 1 else ""
                lines.append(f"  t{id(parent)} -> n{id(edge)}{label}")
    if len(order) > len(shown):
        lines.append(f'  cut [shape=note label="{len(order) - len(shown)} more nodes not drawn (max_nodes='
                     f'{max_nodes})"]')
    lines.append("}")
    return Graph("\n".join(lines))


def edge_of(t: core.Tensor) -> core.Function | core.Tensor:
    """The graph edge that stands for a tensor: the node that computed it, or the leaf itself."""
    return t.grad_fn or t


def between(tensor: core.Tensor, inputs: Sequence[core.Tensor] = ()) -> list[core.Function | core.Tensor]:
    """The edges of the graph that computed `tensor`, each after its inputs; with inputs, only those computed from
    them (and the inputs themselves): the part of the graph that leads from the inputs to the tensor."""
    order = core.graph_order(edge_of(tensor))
    if not inputs:
        return order
    kept = {id(edge_of(t)) for t in inputs}
    for edge in order:  # an edge comes after its parents, so one pass finds every edge computed from the inputs
        if isinstance(edge, core.Function) and id(edge) not in kept \
                and any(p is not None and id(p) in kept for p in edge.mg_parents):
            kept.add(id(edge))
    return [edge for edge in order if id(edge) in kept]


def _op_label(node: core.Function) -> str:
    freed = "\\n(saved arrays freed by backward)" if node.mg_freed else ""
    return f"{escape(type(node).__name__)}{freed}"  # a class of the user's may be named anything


def _leaf_label(t: core.Tensor, names: dict[int, str]) -> str:
    name = escape(names.get(id(t), "leaf"))
    return f"{name}\\n{_describe(t.shape, t.dtype, t.device)}{_values(t.array)}\\n{_gradient(t.grad)}"


def _result_label(edge: core.Function, output: core.Tensor | None, names: dict[int, str]) -> str:
    """The tensor an op computed: its name where params gave one, shape and dtype, and its gradient where kept."""
    kept = output if output is not None and output.grad is not None else None
    for hook in hooks_of(edge):
        if isinstance(hook, RetainGrad) and hook.tensor() is not None:
            kept = hook.tensor()
    gradient = _gradient(kept.grad) if kept is not None else "grad: not kept (retain_grad() keeps it)"
    name = f"{escape(names[id(edge)])}\\n" if id(edge) in names else ""
    return f"{name}{_describe(edge.mg_shape, edge.mg_dtype, None)}\\n{gradient}"


def escape(text: str) -> str:
    """User text (a title, a name) as it goes between a DOT label's quotes: a backslash doubled and a quote escaped,
    so that Graphviz shows them and a trailing backslash cannot escape the closing quote ("C:\\runs\\"); each line a
    line of the label (DOT's \\n)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _describe(shape: tuple[int, ...], dtype: Any, device: str | None) -> str:
    return f"{shape} {dtype}{' cuda' if device == 'cuda' else ''}"


def _gradient(grad: core.Tensor | None) -> str:
    if grad is None:
        return "grad: none yet"
    array = grad.array
    norm = float(backend.get_array_module(array).linalg.norm(array.astype("float64")))
    return f"grad norm {norm:.4g}{_values(grad.array, 'grad ')}"


def _values(array: Any, what: str = "") -> str:
    if array.size > SMALL:
        return ""
    values = np.array2string(backend.to_numpy(array).reshape(-1), precision=4, separator=", ")
    return f"\\n{what}{values}"

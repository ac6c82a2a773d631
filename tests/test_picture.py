"""mg.draw: the graph that computed a tensor as DOT text, checked node by node and edge by edge; after backward()
too (the graph's edges survive, its saved arrays do not, and a second backward is still refused)."""

from __future__ import annotations

import html
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

ROOT = Path(__file__).resolve().parents[1]


def nodes_and_edges(source: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """{node id: its label}, [(from, to, edge label)] of a DOT text that mg.draw wrote."""
    nodes = dict(re.findall(r'^\s+(\w+) \[.*?label="(.*?)"\]$', source, re.M))
    edges = [(a, b, label) for a, b, label in re.findall(r'^\s+(\w+) -> (\w+)(?: \[label="(.*?)"\])?$', source, re.M)]
    return nodes, edges


def test_a_tensor_used_twice_fans_out_and_the_picture_outlives_backward():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x  # x used twice
    z = y.sum()
    nodes, edges = nodes_and_edges(mg.draw(z).source)
    x_id, mul_id, sum_id = f"t{id(x)}", f"n{id(y.grad_fn)}", f"n{id(z.grad_fn)}"
    assert nodes[x_id].startswith("leaf\\n(3,) float32") and "grad: none yet" in nodes[x_id]
    assert nodes[mul_id] == "Mul" and nodes[sum_id] == "Sum"
    assert sorted(label for a, b, label in edges if (a, b) == (x_id, mul_id)) == ["0", "1"]  # two edges out of x
    assert (mul_id, f"t{id(y.grad_fn)}", "") in edges and (f"t{id(y.grad_fn)}", sum_id, "") in edges
    assert "grad: not kept (retain_grad() keeps it)" in nodes[f"t{id(y.grad_fn)}"]
    z.backward()
    nodes, _ = nodes_and_edges(mg.draw(z).source)
    assert "grad norm 7.483" in nodes[x_id] and "grad [2., 4., 6.]" in nodes[x_id]  # 2x, the sum of its two uses
    assert nodes[mul_id] == "Mul\\n(saved arrays freed by backward)"
    with pytest.raises(RuntimeError, match="already used by a backward"):
        z.backward()


def test_a_retained_intermediate_shows_its_gradient():
    x = mg.tensor([1.0, -1.0], requires_grad=True)
    h = x.exp()
    h.retain_grad()
    (h * 3).sum().backward()
    nodes, _ = nodes_and_edges(mg.draw(h).source)
    assert "grad norm 4.243" in nodes[f"t{id(h.grad_fn)}"]  # 3 for both elements: sqrt(18)


def test_parameters_are_named_and_several_outputs_are_numbered():
    mg.manual_seed(0)
    layer = nn.Linear(3, 2)
    out = layer(mg.ones(4, 3))
    a, b = out.split(1, dim=1)
    nodes, edges = nodes_and_edges(mg.draw(a + b, params=dict(layer.named_parameters())).source)
    assert nodes[f"t{id(layer.weight)}"].startswith("weight\\n(2, 3) float32")
    assert nodes[f"t{id(layer.bias)}"].startswith("bias\\n(2,) float32")
    split = f"n{id(a.grad_fn.mg_parents[0])}"
    assert {(split, f"t{id(a.grad_fn)}", "0"), (split, f"t{id(b.grad_fn)}", "1")} <= set(edges)


def test_a_large_graph_is_cut_with_a_note():
    x = mg.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(50):
        y = y * 1.5
    source = mg.draw(y, max_nodes=10).source
    nodes, _ = nodes_and_edges(source)
    assert len([n for n in nodes if n.startswith("n")]) == 10
    assert "more nodes not drawn (max_nodes=10)" in nodes["cut"]


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="draw: expected a tensor, got ndarray"):
        mg.draw(np.ones(2))
    with pytest.raises(ValueError, match="max_nodes must be a positive int"):
        mg.draw(mg.ones(2), max_nodes=0)


def test_rendering_needs_graphviz_and_says_so_or_writes_the_svg(tmp_path):
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    graph = mg.draw((x * x).sum())
    try:
        import graphviz  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install -e '.\\[draw\\]'"):
            graph.render(str(tmp_path / "g"))
        pytest.skip("graphviz is not installed (pip install -e '.[draw]'): the refusal was checked instead")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed (apt-get install graphviz)")
    path = graph.render(str(tmp_path / "g"))
    assert path.endswith("g.svg") and "<svg" in open(path).read()


def test_an_in_place_write_and_the_device_are_drawn(rand, device):
    """A write through a view of a computed tensor: its base's node becomes CopySlices, drawn as an op whose inputs
    are the base's old values and the view's new ones; a tensor on the GPU says so in its label."""
    x = rand(3)
    h = x * 2
    v = rand(1)
    first_two = h[:2]
    first_two[0] = v[0]  # in place, through a view: h's node is now CopySlices(h before, the view after)
    loss = h.sum()
    loss.backward()
    nodes, edges = nodes_and_edges(mg.draw(loss, params={"x": x, "v": v}).source)
    copy = f"n{id(h.grad_fn)}"
    assert nodes[copy].startswith("CopySlices")
    into_copy = {a for a, b, _ in edges if b == copy}
    assert len(into_copy) == 2  # the old values' tensor and the slice of v
    on_device = " cuda" if device == "cuda" else ""
    assert nodes[f"t{id(x)}"].startswith(f"x\\n(3,) float64{on_device}")
    assert "grad [0., 2., 2.]" in nodes[f"t{id(x)}"]  # h[0] was overwritten: x[0]'s gradient is 0


def test_inputs_cut_the_graph_where_it_starts_and_names_show_on_intermediate_tensors():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2.0
    b = a.exp()
    c = (b + a).sum()  # a used twice: by exp and by the sum
    a.retain_grad()
    c.backward()
    source = mg.draw(c, params={"a": a, "b": b}, inputs=[a], title='from "a"\nto c').source
    nodes, edges = nodes_and_edges(source)
    assert f"t{id(x)}" not in nodes and f"n{id(a.grad_fn)}" not in nodes  # what computed a is left out
    a_node = f"t{id(a.grad_fn)}"
    assert nodes[a_node].startswith("a\\n(2,) float32\\ngrad norm ")  # an input: its name, shape and gradient
    np.testing.assert_allclose(a.grad.numpy(), np.exp([2.0, 4.0]) + 1, rtol=1e-6)  # the sum of its two paths
    users = sorted(dst for src, dst, _ in edges if src == a_node)  # two edges out of a
    assert users == sorted([f"n{id(b.grad_fn)}", f"n{id(c.grad_fn.mg_parents[0])}"])
    assert nodes[f"t{id(b.grad_fn)}"].startswith("b\\n(2,) float32\\ngrad: not kept")
    assert sorted(label for node, label in nodes.items() if node.startswith("n")) == \
        ["Add", "Exp\\n(saved arrays freed by backward)", "Sum"]
    assert '  graph [label="from \\"a\\"\\nto c" labelloc="t"' in source  # quotes escaped, a line each


def test_the_docs_picture_shows_what_the_script_draws_now():
    """docs/graph-lesson.svg is rendered by scripts/graph_lesson.py: each text of the picture (labels, title,
    edge numbers) is one line of the DOT text that the script's draw() gives now. A change to mg.draw or to the
    lesson that changes what the picture says fails here: run `python scripts/graph_lesson.py` again."""
    spec = importlib.util.spec_from_file_location("graph_lesson", ROOT / "scripts" / "graph_lesson.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    source = script.draw().source
    lines = [line for label in re.findall(r'label="(.*?)"', source) for line in label.split("\\n")]
    texts = re.findall(r"<text[^>]*>(.*?)</text>", script.PICTURE.read_text(encoding="utf-8"))
    shown = [html.unescape(text).replace("\xa0", " ") for text in texts]  # Graphviz writes two spaces as " &#160;"
    assert sorted(shown) == sorted(lines)
    assert "grad [ 0.495 , -0.495 ,  0.    ," in source  # the masked score's gradient: exactly 0


# DOT's tokens, as Graphviz's scanner reads them: a quoted string ends at the first quote not escaped by a backslash
# (a backslash before a backslash is a pair); anything else outside the listed tokens is a syntax error
DOT_TOKEN = re.compile(r'\s+|"(?:\\\\|\\"|[^"\\]|\\(?![\\"]))*"|->|[{}\[\]=;,]|[A-Za-z_][A-Za-z_0-9]*|-?\d+(?:\.\d*)?')


def dot_labels(source: str) -> list[str]:
    """Every quoted string of a DOT text, as Graphviz shows it (\\\\ a backslash, \\" a quote, \\n a new line);
    fails where the text does not scan."""
    position, labels = 0, []
    while position < len(source):
        token = DOT_TOKEN.match(source, position)
        assert token, f"DOT does not scan at {position}: {source[position:position + 40]!r}"
        if token.group().startswith('"'):
            labels.append(re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m[1], m[1]), token.group()[1:-1]))
        position = token.end()
    return labels


def test_user_text_with_backslashes_and_quotes_gives_dot_that_parses_and_shows_it(tmp_path):
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    reversed_ = type('Rev"erse\\', (mg.autograd.Function,), {  # a class of the user's, named anything
        "forward": staticmethod(lambda ctx, t: -t), "backward": staticmethod(lambda ctx, dout: -dout)})
    y = (reversed_.apply(x) * 2).sum()
    title, name = 'C:\\runs\\', 'x "the input" \\'
    source = mg.draw(y, params={name: x}, title=title + '\nsay "hi"').source
    labels = dot_labels(source)
    assert title + '\nsay "hi"' in labels and any(label.startswith(name + "\n") for label in labels)
    assert 'Rev"erse\\Backward' in labels  # its node, named as PyTorch names it
    assert mg.draw(y, title="C:\\runs\\").source.count('"C:\\\\runs\\\\"') == 1  # the trailing backslash doubled
    with pytest.raises(AssertionError, match="does not scan"):  # the check itself refuses what mg.draw wrote before
        dot_labels('digraph {\n  graph [label="C:\\runs\\"]\n}')
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed (apt-get install graphviz): the strict scan was checked")
    svg = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout
    shown = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]
    assert "C:\\runs\\" in shown and 'say "hi"' in shown and 'Rev"erse\\Backward' in shown

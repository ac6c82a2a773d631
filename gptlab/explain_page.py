"""The explain page: explain.Steps as one self-contained HTML file (inline CSS and JavaScript, the numbers as JSON, no
network, no web fonts) where a reader clicks a token, a head and a key to see the four steps and the neuron view.
`python train.py explain --html FILE` writes it; it needs only token strings and the model's trace (and, where the
run's metrics log is there, its loss curve, drawn here as an SVG). It reads a Steps
(and a LayerGraph: one layer's graph, laid out here without Graphviz) by their fields, so it imports nothing from
explain.py, which imports it.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

import numpy as np

from minigrad import core
from minigrad.autograd.picture import between, edge_of


def page_data(steps: Any, graph: Any = None) -> dict[str, Any]:
    """The numbers the page shows, as JSON-ready lists of float64 (each one the exact double the text table
    formats, so the page's rounding matches it); a non-finite number is refused, since JSON has none. With a
    LayerGraph, its nodes and its tensors' values and gradients too (graph_data)."""
    arrays = {name: getattr(steps, name) for name in ("scores", "weights", "shares", "q", "k")}  # products: q * k in JS
    check_finite(arrays)
    return {"tokens": steps.labels, "text": steps.text, "hs": int(steps.q.shape[-1]), "query": steps.query,
            "why_query": steps.why_query, "heads": [list(choice) for choice in steps.heads],
            "kept": steps.kept.tolist(), **{name: a.tolist() for name, a in arrays.items()},
            "graph": None if graph is None else graph_data(graph)}


def check_finite(arrays: dict[str, np.ndarray]) -> None:
    """JSON has no NaN or infinity: a page of them is refused, naming the array."""
    for name, a in arrays.items():
        if not np.isfinite(a).all():
            raise ValueError(f"the model's attention {name} {a.shape} has non-finite values; no page is written")


def graph_data(graph: Any) -> dict[str, Any]:
    """A LayerGraph for the page: its nodes (the ops from q, k and v to out, and the trace's tensors by name), each
    with its parents, in the order of the forward pass (graph_svg lays them out), and each tensor's values and
    gradient as (nh, T, n) lists: for head h and position i, the row [h][i] (of out: head h's part of it)."""
    t = graph.tensors
    inputs = {id(edge_of(t[name])) for name in ("q", "k", "v")}
    names = {id(edge_of(tensor)): name for name, tensor in t.items()}
    nodes: list[dict[str, Any]] = []
    index: dict[int, int] = {}  # id(edge) -> the node that stands for its tensor
    for edge in between(t["out"], [t["q"], t["k"], t["v"]]):
        if isinstance(edge, core.Output):  # one output of a node of several: the node stands for it
            index[id(edge)] = index[id(edge.mg_parents[0])]
            continue
        parents = []
        if id(edge) not in inputs:  # an op, drawn as a box, fed by what its inputs stand for
            parents = [index[id(p)] for p in edge.mg_parents if p is not None and id(p) in index]
            nodes.append({"op": type(edge).__name__, "shape": list(core.shape_and_dtype(edge)[0]), "parents": parents})
            parents = [len(nodes) - 1]
        if id(edge) in names:  # a tensor of the trace, drawn as an ellipse below the op that computed it
            nodes.append({"name": names[id(edge)], "shape": list(core.shape_and_dtype(edge)[0]), "parents": parents})
        index[id(edge)] = len(nodes) - 1
    nh = t["q"].shape[1]
    values = {name: by_head(tensor.numpy(), nh) for name, tensor in t.items()}
    grads = {name: by_head(tensor.grad.numpy(), nh) for name, tensor in t.items()}
    check_finite(values | {f"gradient of {name}": g for name, g in grads.items()})
    return {"layer": graph.layer, "position": graph.position, "target": graph.target, "why_target": graph.why_target,
            "title": graph.title, "steps": graph.STEPS, "nodes": nodes,
            "values": {name: a.tolist() for name, a in values.items()},
            "grads": {name: a.tolist() for name, a in grads.items()}}


def by_head(a: np.ndarray, nh: int) -> np.ndarray:
    """A traced tensor of one sequence as (nh, T, n) float64: (1, nh, T, n) as it is, out (1, T, nh*hs) cut into
    its heads' parts."""
    a = a[0].astype(np.float64)
    return a if a.ndim == 3 else a.reshape(a.shape[0], nh, -1).transpose(1, 0, 2)  # (T, nh*hs) -> (nh, T, hs)


ROW, COLUMN, BOX_W, BOX_H = 54, 150, 136, 32  # the graph's layout, in pixels


def graph_svg(nodes: list[dict[str, Any]]) -> str:
    """The nodes as an SVG picture, top to bottom in the order of the forward pass: each node one row below its
    lowest parent; in a row, the sources in the order q, k, v, and the others in order of appearance."""
    row_of: list[int] = []  # the parents come first in nodes
    for node in nodes:
        row_of.append(1 + max(row_of[p] for p in node["parents"]) if node["parents"] else 0)
    rows: dict[int, list[int]] = {}
    for i, r in enumerate(row_of):
        rows.setdefault(r, []).append(i)
    rows[0].sort(key=lambda i: "qkv".index(nodes[i]["name"]))
    width = COLUMN * max(len(row) for row in rows.values())
    xy = {i: (width * (c + 0.5) / len(row), ROW * (r + 0.5)) for r, row in rows.items() for c, i in enumerate(row)}
    height = ROW * len(rows)
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for i, node in enumerate(nodes):  # an edge runs down from its parent's column, then turns to the node
        for p in node["parents"]:
            (x0, y0), (x1, y1) = xy[p], xy[i]
            y0, bend, y1 = y0 + BOX_H / 2, y1 - BOX_H / 2 - ROW / 4, y1 - BOX_H / 2
            dx, dy = (x1 - x0) / math.hypot(x1 - x0, y1 - bend), (y1 - bend) / math.hypot(x1 - x0, y1 - bend)
            head = " ".join(f"{x1 - 7 * dx + a * 3.5 * dy:.1f},{y1 - 7 * dy - a * 3.5 * dx:.1f}" for a in (1, -1))
            parts.append(f'<path class="edge" d="M{x0:.0f},{y0:.0f} L{x0:.0f},{bend:.0f} L{x1:.0f},{y1:.0f}"/>'
                         f'<polygon class="arrow" points="{head} {x1:.0f},{y1:.0f}"/>')
    for i, node in enumerate(nodes):
        x, y = xy[i]
        if "name" in node:  # its name, and its shape below in small type
            shape = f'<ellipse cx="{x:.0f}" cy="{y:.0f}" rx="{BOX_W / 2:.0f}" ry="{BOX_H / 2:.0f}"/>'
            label = (f'<text x="{x:.0f}" y="{y - 2:.0f}">{html.escape(node["name"])}</text>'
                     f'<text class="shape" x="{x:.0f}" y="{y + 10:.0f}">{tuple(node["shape"])}</text>')
        else:
            shape = f'<rect x="{x - BOX_W / 2:.0f}" y="{y - BOX_H / 2:.0f}" width="{BOX_W}" height="{BOX_H}" rx="4"/>'
            label = f'<text x="{x:.0f}" y="{y + 4:.0f}">{html.escape(node["op"])}</text>'
        parts.append(f'<g class="gnode {"tensor" if "name" in node else "op"}" data-node="{i}">{shape}{label}</g>')
    return "".join(parts) + "</svg>"


CURVE_W, CURVE_H, MARGIN = 640, 220, 48  # the loss curve's picture, in pixels


def curve_svg(points: dict[str, list[tuple[int, float]]]) -> str:
    """The training (solid) and held-out (dashed) loss against the step, on a log scale (as train.py plot draws it),
    as an SVG picture: points maps "train" and "val" to (step, loss) pairs, the loss above 0, from the run's metrics
    log (gptlab/metrics.py, loss_points)."""
    points = {part: [(x, math.log10(y)) for x, y in curve] for part, curve in points.items()}
    steps = [x for curve in points.values() for x, _ in curve]
    losses = [y for curve in points.values() for _, y in curve]
    x0, x1, y0, y1 = min(steps), max(max(steps), min(steps) + 1), min(losses), max(max(losses), min(losses) + 1e-9)

    def at(x: float, y: float) -> str:  # a point of the plot in pixels: steps to the right, loss upwards
        return (f"{MARGIN + (x - x0) / (x1 - x0) * (CURVE_W - 2 * MARGIN):.1f},"
                f"{CURVE_H - MARGIN - (y - y0) / (y1 - y0) * (CURVE_H - 2 * MARGIN):.1f}")

    parts = [f'<svg viewBox="0 0 {CURVE_W} {CURVE_H}" width="{CURVE_W}" height="{CURVE_H}" role="img">',
             f'<path class="axes" d="M{at(x0, y1)} L{at(x0, y0)} L{at(x1, y0)}"/>',
             f'<text x="{MARGIN}" y="{CURVE_H - MARGIN + 16}">{x0}</text>',
             f'<text x="{CURVE_W - MARGIN}" y="{CURVE_H - MARGIN + 16}">step {x1}</text>',
             f'<text x="{MARGIN - 4}" y="{CURVE_H - MARGIN}" class="y">{10 ** y0:.2g}</text>',
             f'<text x="{MARGIN - 4}" y="{MARGIN + 4}" class="y">{10 ** y1:.2g}</text>']
    for part, curve in points.items():
        parts.append(f'<polyline class="{part}" points="{" ".join(at(x, y) for x, y in curve)}"/>')
    parts.append(f'<text x="{CURVE_W - MARGIN}" y="{MARGIN - 24}" class="y">— training loss  - - held-out loss</text>')
    return "".join(parts) + "</svg>"


def page_html(steps: Any, graph: Any = None, curve: dict[str, list[tuple[int, float]]] | None = None) -> str:
    """The whole page: the data as JSON in a script tag (with "<" escaped, so no token can end the tag); with curve
    (the run's loss, as curve_svg reads it), a section showing it."""
    data = page_data(steps, graph)
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    training = "" if not curve else fill(TRAINING, picture=curve_svg(curve))
    return fill(PAGE, title=html.escape(f"Attention of every head for {steps.text!r}"), css=CSS, js=JS,
                data=text.replace("<", "\\u003c"), graph="" if graph is None else graph_svg(data["graph"]["nodes"]),
                training=training)


def fill(template: str, **values: str) -> str:
    """`template` with each {name} of `values` replaced by its value, in one pass over the template: a value is never
    read again, so a prompt holding "{js}" stays those four characters."""
    return re.sub("{(" + "|".join(values) + ")}", lambda m: values[m[1]], template)


TRAINING = """<section id="training">
  <h2>How the model learnt: its loss during training</h2>
  <div id="curve">{picture}</div>
  <p class="hint">From the run's metrics.csv: the loss on training examples (solid) and on held-out ones (dashed),
    at each estimate; <code>python train.py plot</code> draws it with the learning rate.</p>
</section>
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<style>{css}</style>
</head>
<body>
<header>
  <h1>Attention, step by step</h1>
  <p id="sentence"></p>
  <p class="hint">Click a token to make it the query, a head to open it, a row of the table (or a key in the
    heatmap) for the neuron view. Every number is the trained model's own, as <code>train.py explain</code> prints
    it.</p>
</header>
{training}<section>
  <h2>The query: the position whose attention is explained</h2>
  <div id="tokens" role="group" aria-label="tokens"></div>
  <p class="hint">Red: the query. Blue: the key taken apart in the neuron view.</p>
  <p id="why-query" class="why"></p>
</section>
<div class="columns">
  <section id="model-view">
    <h2>Every layer and head (the model view)</h2>
    <p class="hint">Row: the query, looking. Column: the key it looks at. The query's row is outlined.</p>
    <div id="grid"></div>
    <div class="colour-bar">
      <span>0</span><span class="bar viridis"></span><span>1</span>
      <span class="caption">attention weight (each row adds up to 1); grey: masked</span>
    </div>
  </section>
  <section id="head-view">
    <h2 id="head-title"></h2>
    <p id="why-head" class="why"></p>
    <div id="matrix"></div>
  </section>
</div>
<div class="columns">
<section id="steps">
  <h2 id="steps-title"></h2>
  <ol class="legend">
    <li><b>score</b><sub>j</sub> = q · k<sub>j</sub> / √d<sub>k</sub>: how well position j's key matches this
      query</li>
    <li><b>causal mask</b>: positions after the query are set to −inf (the model may not look ahead); the
      others keep their score</li>
    <li><b>softmax</b> over the row: weights in [0, 1] that add up to 1</li>
    <li><b>output</b> b = Σ<sub>j</sub> weight<sub>j</sub> v<sub>j</sub>, the weighted sum of the value vectors
      v<sub>j</sub>; share<sub>j</sub> = weight<sub>j</sub> |v<sub>j</sub>| / Σ<sub>i</sub> weight<sub>i</sub>
      |v<sub>i</sub>|: position j's part of b, from 0 to 100%</li>
  </ol>
  <table id="steps-table" class="numbers">
    <thead><tr><th>pos</th><th class="token">token</th><th>1 score</th><th>2 masked</th><th>3 weight</th>
      <th></th><th>4 share</th></tr></thead>
    <tbody></tbody>
  </table>
  <p id="b-line" class="formula"></p>
</section>
<section id="neuron">
  <h2 id="neuron-title"></h2>
  <p class="hint">q · k<sub>j</sub> = Σ<sub>n</sub> q<sub>n</sub> k<sub>j,n</sub>: each row is one of the
    d<sub>k</sub> dimensions, its bar the product q<sub>n</sub> k<sub>j,n</sub> (red adds to the match, blue takes
    from it). The dimensions with the longest bars are the ones that made this score.</p>
  <div class="colour-bar">
    <span id="neuron-low"></span><span class="bar diverging"></span><span id="neuron-high"></span>
    <span class="caption">q<sub>n</sub> k<sub>j,n</sub></span>
  </div>
  <table id="neuron-table" class="numbers">
    <thead><tr><th>n</th><th>q<sub>n</sub></th><th>k<sub>j,n</sub></th><th>q<sub>n</sub> k<sub>j,n</sub></th>
      <th class="bars"></th></tr></thead>
    <tbody></tbody>
  </table>
  <p id="neuron-sum" class="formula"></p>
</section>
<section id="graph-view">
  <h2 id="graph-title"></h2>
  <p id="graph-note" class="hint"></p>
  <p id="graph-steps" class="hint"></p>
  <p id="why-target" class="why"></p>
  <div id="graph-picture">{graph}</div>
  <p class="hint">Boxes: the engine's operations; ellipses: the tensors the trace keeps. Click one for its numbers.
    </p>
  <h3 id="node-title"></h3>
  <p id="node-note" class="hint"></p>
  <table id="node-table" class="numbers">
    <thead><tr><th id="node-index"></th><th>value</th><th>gradient</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
</div>
<script type="application/json" id="data">{data}</script>
<script>{js}</script>
</body>
</html>
"""

CSS = """
:root {
  /* system fonts only: CJK tokens fall through to whichever CJK font the reader's system has */
  --sans: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial, "Noto Sans CJK TC",
    "Noto Sans CJK SC", "Noto Sans TC", "PingFang TC", "PingFang SC", "Hiragino Sans", "Microsoft JhengHei",
    "Microsoft YaHei", "Source Han Sans TC", "WenQuanYi Micro Hei", sans-serif;
  --mono: ui-monospace, "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", "Noto Sans Mono CJK TC",
    "Noto Sans Mono CJK SC", monospace;
  --accent: #d62728;
}
body { font-family: var(--sans); margin: 1.2rem auto; max-width: 1240px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem; }
h2 { font-size: 1.1rem; margin: 1.2rem 0 .4rem; }
.hint { color: #555; font-size: .9rem; margin: .3rem 0; }
.why { margin: .4rem 0; }
.why button { margin-left: .5rem; }
code, .formula { font-family: var(--mono); }
#sentence { font-size: 1.3rem; margin: .2rem 0; }
#tokens { display: flex; flex-wrap: wrap; gap: .35rem; }
#tokens button { font: 1.15rem var(--sans); padding: .25rem .55rem; border: 1px solid #aaa; border-radius: 6px;
  background: #fff; cursor: pointer; }
#tokens button small { color: #777; font-size: .7rem; margin-right: .3rem; }
#tokens button.query { border: 2px solid var(--accent); background: #fde8e8; }
#tokens button.key { box-shadow: 0 0 0 2px #1f77b4 inset; }
.columns { display: flex; gap: 2.5rem; flex-wrap: wrap; align-items: flex-start; }
.columns > section { flex: 1 1 380px; min-width: 0; }
.columns > #model-view { flex: 0 0 auto; }
#grid { display: grid; gap: .5rem; }
#grid .head { border: 2px solid transparent; padding: 2px; cursor: pointer; text-align: center; font-size: .75rem; }
#grid .head.open { border-color: var(--accent); }
#grid canvas { width: 110px; height: 110px; image-rendering: pixelated; display: block; }
#grid .layer-label { align-self: center; font-size: .8rem; color: #555; }
.colour-bar { display: flex; align-items: center; gap: .4rem; font-size: .8rem; margin: .5rem 0; }
.colour-bar .bar { width: 160px; height: 12px; border: 1px solid #999; }
.viridis { background: linear-gradient(to right, #440154, #472d7b, #3b528b, #2c728e, #21918c, #28ae80, #5ec962,
  #addc30, #fde725); }
.diverging { background: linear-gradient(to right, #053061, #2a71b2, #6bacd1, #c2ddec, #f7f6f6, #fbccb4, #e48066,
  #ba2832, #67001f); }
.colour-bar .caption { color: #555; }
#matrix table { border-collapse: collapse; }
#matrix td.cell { width: var(--cell); height: var(--cell); padding: 0; cursor: pointer; border: 1px solid #fff; }
#matrix td.masked { background: #e4e4e4; }
#matrix tr.query td.cell { border-top: 2px solid var(--accent); border-bottom: 2px solid var(--accent); }
#matrix td.cell.key { outline: 3px solid #1f77b4; outline-offset: -3px; }
#matrix th { font-weight: normal; font-size: .8rem; padding: 0 .3rem; white-space: nowrap; }
#matrix thead th { writing-mode: vertical-rl; text-align: left; padding: .3rem 0; vertical-align: bottom; }
#matrix thead th.axis { writing-mode: horizontal-tb; text-align: right; padding: 0 .3rem; }
#matrix .axis { color: #555; font-size: .8rem; }
table.numbers { border-collapse: collapse; font-variant-numeric: tabular-nums; }
#steps-table th, #steps-table td, #neuron-table th, #neuron-table td { padding: .15rem .6rem; text-align: right;
  white-space: nowrap; }
#steps-table .token { text-align: left; }
#steps-table tbody tr { cursor: pointer; }
#steps-table tr.masked { color: #999; }
#steps-table tr.key { background: #e8f1fa; }
#steps-table tr.query td.pos { color: var(--accent); font-weight: bold; }
.barcell { width: 120px; }
.barcell div { height: 10px; background: #21918c; }
#neuron-table td { padding-top: 0; padding-bottom: 0; }
#neuron-table td.bars { width: 200px; position: relative; }
#neuron-table td.bars div { position: absolute; top: 3px; height: 12px; }
#neuron-table td.bars .zero { left: 50%; width: 1px; background: #999; top: 0; height: 100%; }
ol.legend { margin: .3rem 0 .6rem; padding-left: 1.5rem; }
#graph-note, #graph-steps { white-space: pre-line; }
#graph-picture svg { display: block; max-width: 100%; height: auto; }
#curve svg { display: block; max-width: 100%; height: auto; font: 11px var(--mono); }
#curve .axes { fill: none; stroke: #777; }
#curve polyline { fill: none; stroke: #1f77b4; stroke-width: 2; }
#curve polyline.val { stroke: #ff7f0e; stroke-dasharray: 6 4; }
#curve text.y { text-anchor: end; }
#graph-picture text { text-anchor: middle; }
#graph-picture text.shape { font-size: 10px; fill: #555; }
#graph-picture .gnode { cursor: pointer; }
#graph-picture .edge { fill: none; stroke: #777; }
#graph-picture .arrow { fill: #777; }
#graph-picture .gnode text { font: 12px var(--mono); }
#graph-picture .op rect { fill: #dde8f6; stroke: #557; }
#graph-picture .tensor ellipse { fill: #fff; stroke: #555; }
#graph-picture .gnode.open rect, #graph-picture .gnode.open ellipse { stroke: var(--accent); stroke-width: 3; }
#node-table th, #node-table td { padding: .1rem .6rem; text-align: right; white-space: nowrap; }
ol.legend li { margin: .15rem 0; }
"""

JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const T = D.tokens.length, LAYERS = D.scores.length, HEADS = D.scores[0].length;
const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"];
const DIVERGING = ["#053061", "#2a71b2", "#6bacd1", "#c2ddec", "#f7f6f6", "#fbccb4", "#e48066", "#ba2832", "#67001f"];
// what is shown: the query position, the open head, and the key of the neuron view (null: the most attended)
const G = D.graph;  // one layer's graph with its gradients, or null
const state = {query: D.query, layer: D.heads[D.query][0], head: D.heads[D.query][1], key: null,
               node: G === null ? null : G.nodes.findIndex(n => n.name === "weights")};

// Python's format(x, f".{d}f"): the nearest decimal with d digits, and a tie (x * 2^(d+1) an odd integer,
// exactly halfway) to the even digit, where toFixed would round away from zero
function fixed(x, d) {
  const twice = x * 2 ** (d + 1);
  let text = x.toFixed(d);
  if (Number.isInteger(twice) && Math.abs(twice) % 2 === 1) {
    const low = Math.floor(x * 10 ** d);
    text = ((low % 2 === 0 ? low : low + 1) / 10 ** d).toFixed(d);
  }
  return (x < 0 || Object.is(x, -0)) && !text.startsWith("-") ? "-" + text : text;
}
function percent(x) { return fixed(100 * x, 1) + "%"; }  // Python's format(x, ".1%")

function colour(stops, t) {  // t in [0, 1] -> a colour between the stops
  const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2);
  const [a, b] = [stops[i], stops[i + 1]].map(s => [1, 3, 5].map(p => parseInt(s.slice(p, p + 2), 16)));
  return "rgb(" + a.map((v, c) => Math.round(v + (x - i) * (b[c] - v))).join(",") + ")";
}
function el(tag, props = {}, children = []) {  // an element with properties (text via textContent, never HTML)
  const e = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "data") Object.assign(e.dataset, value);
    else if (name === "class") e.className = value;
    else e[name] = value;
  }
  e.append(...children);
  return e;
}
function token(j) { return `${j} (${D.tokens[j]})`; }
function keyShown() {  // the neuron view's key: the one picked, else the one the query attends to most
  if (state.key !== null) return state.key;
  const w = D.weights[state.layer][state.head][state.query];
  return w.indexOf(Math.max(...w));
}

function buildTokens() {
  document.getElementById("sentence").textContent = D.text;
  const box = document.getElementById("tokens");
  D.tokens.forEach((t, j) => {
    const b = el("button", {data: {pos: j}, title: `make position ${j} the query`}, [el("small", {textContent: j}), t]);
    b.addEventListener("click", () => { state.query = j; state.key = null; render(); });
    box.append(b);
  });
}

function buildGrid() {
  const grid = document.getElementById("grid");
  grid.style.gridTemplateColumns = `auto repeat(${HEADS}, auto)`;
  grid.append(el("span"), ...[...Array(HEADS).keys()].map(h => el("span", {class: "layer-label",
                                                                          textContent: `head ${h}`})));
  for (let l = 0; l < LAYERS; l++) {
    grid.append(el("span", {class: "layer-label", textContent: `layer ${l}`}));
    for (let h = 0; h < HEADS; h++) {
      const canvas = el("canvas", {width: T * 8, height: T * 8});
      const cell = el("div", {class: "head", data: {layer: l, head: h}, title: `open layer ${l}, head ${h}`},
                      [canvas, `layer ${l}, head ${h}`]);
      cell.addEventListener("click", () => { state.layer = l; state.head = h; state.key = null; render(); });
      grid.append(cell);
    }
  }
}

function drawHead(canvas, l, h) {  // one head's weights, 8 pixels a cell; the query's row outlined
  const c = canvas.getContext("2d");
  for (let i = 0; i < T; i++) {
    for (let j = 0; j < T; j++) {
      c.fillStyle = D.kept[i][j] ? colour(VIRIDIS, D.weights[l][h][i][j]) : "#e4e4e4";
      c.fillRect(j * 8, i * 8, 8, 8);
    }
  }
  c.strokeStyle = "#d62728";
  c.lineWidth = 2;
  c.strokeRect(1, state.query * 8 + 1, T * 8 - 2, 6);
}

function renderMatrix() {  // the open head as a labelled heatmap: click a row for the query, a cell for the key too
  const {layer: l, head: h, query: q} = state, key = keyShown();
  const box = document.getElementById("matrix");
  box.style.setProperty("--cell", Math.max(10, Math.min(30, Math.floor(520 / T))) + "px");
  const head = el("tr", {}, [el("th", {class: "axis", textContent: "query ↓  key →"}),
                             ...D.tokens.map((t, j) => el("th", {textContent: `${j} ${t}`}))]);
  const rows = D.tokens.map((t, i) => el("tr", {class: i === q ? "query" : ""}, [
    el("th", {textContent: `${i} ${t}`}),
    ...D.tokens.map((_, j) => {
      const w = D.weights[l][h][i][j], td = el("td", {
        class: "cell" + (D.kept[i][j] ? "" : " masked") + (i === q && j === key ? " key" : ""),
        title: `query ${token(i)} → key ${token(j)}: ` + (D.kept[i][j] ? `weight ${percent(w)}` : "masked")});
      if (D.kept[i][j]) td.style.background = colour(VIRIDIS, w);
      td.addEventListener("click", () => { state.query = i; state.key = j; render(); });
      return td;
    })]));
  box.replaceChildren(el("table", {}, [el("thead", {}, [head]), el("tbody", {}, rows)]));
}

function renderWhy() {
  const {layer: l, head: h, query: q} = state, [cl, ch, why] = D.heads[q];
  document.getElementById("why-query").textContent = q === D.query
    ? `why position ${q}: ${D.why_query}`
    : `position ${q}: your pick (explain's is position ${token(D.query)}: ${D.why_query})`;
  const box = document.getElementById("why-head");
  if (l === cl && h === ch) {
    box.replaceChildren(`why head ${h} of layer ${l}: ${why}`);
  } else {
    const open = el("button", {textContent: `open layer ${cl}, head ${ch}`});
    open.addEventListener("click", () => { state.layer = cl; state.head = ch; state.key = null; render(); });
    box.replaceChildren(`layer ${l}, head ${h}: your pick. Explain's for position ${q}: layer ${cl}, head ${ch}, ` +
                        `${why}`, open);
  }
}

function renderSteps() {  // the text table of train.py explain, at its precision, for the open head and query
  const {layer: l, head: h, query: q} = state, key = keyShown();
  const scores = D.scores[l][h][q], w = D.weights[l][h][q], share = D.shares[l][h][q], kept = D.kept[q];
  document.getElementById("steps-title").textContent =
    `Attention in layer ${l}, head ${h}, for position ${q} (${D.tokens[q]}); hs = ${D.hs}`;
  const bar = x => el("td", {class: "barcell"}, [el("div", {style: `width: ${100 * x}%`})]);
  const rows = D.tokens.map((t, j) => {
    const tr = el("tr", {data: {pos: j}, class: [kept[j] ? "" : "masked", j === key ? "key" : "",
                                                 j === q ? "query" : ""].join(" ").trim(),
                         title: `the neuron view of key ${token(j)}`}, [
      el("td", {class: "pos", textContent: j}), el("td", {class: "token", textContent: t}),
      el("td", {class: "score", textContent: fixed(scores[j], 3)}),
      el("td", {class: "masked-score", textContent: kept[j] ? fixed(scores[j], 3) : "-inf"}),
      el("td", {class: "weight", textContent: percent(w[j])}), bar(w[j]),
      el("td", {class: "share", textContent: kept[j] ? percent(share[j]) : ""})]);
    tr.addEventListener("click", () => { state.key = j; render(); });
    return tr;
  });
  document.querySelector("#steps-table tbody").replaceChildren(...rows);
  const terms = D.tokens.map((_, j) => j).filter(j => kept[j]).map(j => `${fixed(w[j], 2)}·v${j}`);
  document.getElementById("b-line").textContent = `b${q} = ${terms.join(" + ")}`;
}

function renderNeuron() {  // the score of the query and one key, taken apart into the hs products q_n k_j,n
  const {layer: l, head: h, query: q} = state, key = keyShown();
  const qv = D.q[l][h][q], kv = D.k[l][h][key], p = qv.map((x, n) => x * kv[n]);  // float64, as Steps.products
  const range = Math.max(...p.map(Math.abs)) || 1;
  document.getElementById("neuron-title").textContent =
    `Neuron view: layer ${l}, head ${h}, query ${token(q)} · key ${token(key)}` + (D.kept[q][key] ? "" : " (masked)");
  document.getElementById("neuron-low").textContent = fixed(-range, 3);
  document.getElementById("neuron-high").textContent = fixed(range, 3);
  const rows = p.map((x, n) => {
    const width = 50 * Math.abs(x) / range;
    return el("tr", {data: {dim: n}}, [
      el("td", {textContent: n}), el("td", {textContent: fixed(qv[n], 3)}), el("td", {textContent: fixed(kv[n], 3)}),
      el("td", {class: "product", textContent: fixed(x, 3)}),
      el("td", {class: "bars"}, [el("div", {class: "zero"}), el("div", {style: `left: ${x < 0 ? 50 - width : 50}%; ` +
        `width: ${width}%; background: ${colour(DIVERGING, 0.5 + x / (2 * range))}`})])]);
  });
  document.querySelector("#neuron-table tbody").replaceChildren(...rows);
  const dot = p.reduce((a, b) => a + b, 0);
  document.getElementById("neuron-sum").textContent =
    `q · k${key} = ${fixed(dot, 3)};  ${fixed(dot, 3)} / √${D.hs} = ${fixed(D.scores[l][h][q][key], 3)}, ` +
    `step 1's score of key ${key}`;
}

function buildGraph() {
  if (G === null) { document.getElementById("graph-view").hidden = true; return; }
  document.querySelectorAll("#graph-picture .gnode").forEach(g => {
    g.addEventListener("click", () => { state.node = +g.dataset.node; render(); });
  });
}

function renderGraph() {  // the open node's shape, and its values and gradient for the open head and query
  if (G === null) return;
  const {head: h, query: q} = state, node = G.nodes[state.node], shape = `(${node.shape.join(", ")})`;
  document.getElementById("graph-title").textContent = `The graph of layer ${G.layer}`;
  document.getElementById("graph-note").textContent = G.title;
  document.getElementById("graph-steps").textContent = G.steps;
  document.getElementById("why-target").textContent = `target: ${G.target}, ${G.why_target}`;
  document.querySelectorAll("#graph-picture .gnode").forEach(g => g.classList.toggle("open",
                                                                                   +g.dataset.node === state.node));
  const rows = [];
  if (node.name === undefined) {
    document.getElementById("node-title").textContent = `${node.op}: computes a tensor of shape ${shape}`;
    document.getElementById("node-note").textContent =
      "The trace keeps the tensors drawn as ellipses: click one for its values and gradient.";
  } else {
    const keys = node.name === "scores" || node.name === "weights";  // a row over the keys; else over dimensions
    document.getElementById("node-title").textContent = `${node.name}: shape ${shape}, ` +
      `layer ${G.layer}, head ${h}, ${keys ? "query" : "position"} ${token(q)}`;
    document.getElementById("node-note").textContent = `gradient: d log p(${G.target} after position ` +
      `${G.position}) / d ${node.name}` + (node.name === "scores" ? "; a masked key's is exactly 0" : "") +
      (node.name === "out" ? `; out is (B, T, nh·hs): head ${h}'s part of position ${q}` : "");
    document.getElementById("node-index").textContent = keys ? "key" : "n";
    const values = G.values[node.name][h][q], grads = G.grads[node.name][h][q];
    values.forEach((x, n) => rows.push(el("tr", {data: {index: n}}, [
      el("td", {textContent: keys ? token(n) : n}), el("td", {class: "value", textContent: fixed(x, 4)}),
      el("td", {class: "grad", textContent: grads[n] === 0 ? "0" : grads[n].toPrecision(4)})])));
  }
  document.getElementById("node-table").hidden = node.name === undefined;
  document.querySelector("#node-table tbody").replaceChildren(...rows);
}

function render() {
  document.querySelectorAll("#tokens button").forEach(b => {
    b.classList.toggle("query", +b.dataset.pos === state.query);
    b.classList.toggle("key", +b.dataset.pos === keyShown());
  });
  document.querySelectorAll("#grid .head").forEach(cell => {
    const l = +cell.dataset.layer, h = +cell.dataset.head;
    cell.classList.toggle("open", l === state.layer && h === state.head);
    drawHead(cell.querySelector("canvas"), l, h);
  });
  document.getElementById("head-title").textContent =
    `Layer ${state.layer}, head ${state.head}: every position's weights (row: query, column: key)`;
  renderWhy();
  renderMatrix();
  renderSteps();
  renderNeuron();
  renderGraph();
}

buildTokens();
buildGrid();
buildGraph();
render();
"""

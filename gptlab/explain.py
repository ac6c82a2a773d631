"""Explain mode: the walkthrough's four steps of self-attention (scores, causal mask, softmax, weighted sum of
the values) on a trained model's numbers, for one layer, head and query position, and why those; the same
table ends `python train.py`. Run `python train.py explain` with --help for the flags.
"""

from __future__ import annotations

import functools
import os
import shutil
import textwrap
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import minigrad as mg
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.explain_page import page_html
from gptlab.metrics import loss_points, read_log
from gptlab.settings import (
    CHECKPOINT,
    DTYPES,
    HELDOUT_SEED,
    METRICS,
    FlagParser,
    UsageError,
    check_writes,
    folder_files,
    load_pretrained,
    prompt_ids,
    run_files,
    write_atomically,
)
from gptlab.tasks import Task, split
from gptlab.tokenizer import HFTokenizer
from minigrad import nn
from minigrad.array import backend
from minigrad.autograd.picture import Graph
from minigrad.nn import functional as F


def explain_main(argv: Sequence[str], prog: str = "train.py explain") -> int:
    p = FlagParser(prog=prog, description="Print the walkthrough's attention steps "
                   "with the numbers of the model trained in --out.")
    p.add_argument("--out", default="out", help=f"folder holding {CHECKPOINT} (default ./out)")
    p.add_argument("--prompt", help="space-separated tokens (text for the text task); "
                                    "default: the first held-out example")
    p.add_argument("--layer", type=int, help="decoder block, from 0 (default: with --head, the block whose head "
                                             "reaches furthest back)")
    p.add_argument("--head", type=int, help="attention head, from 0 (default: the one whose attention reaches "
                                            "furthest back)")
    p.add_argument("--query", type=int, help="position whose attention is explained (default: the task's focus, "
                                             "such as 被 in the sentences task, else the last)")
    p.add_argument("--device", choices=list(backend.DEVICES), default="cpu")
    p.add_argument("--png", metavar="FILE", help="also draw every head's attention weights (needs matplotlib)")
    p.add_argument("--html", metavar="FILE", help="also write a page to explore every head's steps in a browser "
                                                  "(one self-contained HTML file)")
    p.add_argument("--graph", metavar="FILE", help="also draw the layer's attention computation with its gradients "
                   "(of the layer --layer, else explain's): FILE.dot (DOT text), .svg or .png (these need the graphviz "
                   "package and program)")
    p.add_argument("--target", metavar="TOKEN", help="with --graph or --html: the gradients are of log p(TOKEN) at "
                   "the query position (default: the token after it, else the model's most likely token)")
    p.add_argument("--init-from", metavar="DIR", help="a Hugging Face GPT-2 or LLaMA folder instead of --out; "
                                                     "needs --prompt")
    p.add_argument("--dtype", choices=DTYPES, help="with --init-from: the weights' dtype (default float32)")
    p.add_argument("--overwrite", action="store_true", help="let --png or --html replace a file this command reads "
                   "or a checkpoint of the run in --out (refused otherwise)")
    args = p.parse_args(argv)
    if args.png is not None:  # an empty name too: refused in check_output, not skipped as if not given
        check_png(args.png)
    if args.html is not None:
        check_output("--html", args.html, "attention.html")
    if args.graph is not None:
        check_graph(args.graph)
    if args.target is not None and not (args.graph or args.html):
        raise UsageError("--target chooses what the gradients of --graph and --html are of; give one of them")

    keep = run_files(args.out)  # what --png, --html and --graph may not replace: the run's files, and those read below
    if args.init_from:
        if args.prompt is None:
            raise UsageError("--init-from needs a --prompt to explain")
        model, tokenizer = load_pretrained(args.init_from, args.dtype or "float32", args.device)
        task = TokenizerTask(tokenizer)
        keep.update(folder_files(args.init_from))
    else:
        if args.dtype is not None:
            raise UsageError("--dtype is for --init-from; a checkpoint in --out keeps the dtype it was trained in")
        ckpt = load_checkpoint(args.out)
        task, model = restore(ckpt, args.device)
        if ckpt["settings"]["data"] is not None:
            keep[ckpt["settings"]["data"]] = "--data of the run, the text explain reads"
    writes = {flag: path for flag, path in (("--png", args.png), ("--html", args.html), ("--graph", args.graph))
              if path is not None}
    check_writes(writes, keep, args.overwrite, remedy="choose another file name, or give --overwrite to replace it "
                                                      "on purpose")
    model.eval()
    ids = default_ids(task) if args.prompt is None else prompt_ids(task, args.prompt)
    if not 1 <= len(ids) <= model.config.block_size:
        raise UsageError(f"--prompt has {len(ids)} tokens; this model takes 1 to {model.config.block_size}")
    traced = trace_gradients(model, task, ids, args.query, args.target) if args.graph or args.html else None
    steps = explain_example(model, task, ids, args.layer, args.head, args.query, traced)
    graph = None if traced is None else layer_graph(task, steps, traced)
    if args.png:
        draw_attention(model, task, ids, args.png)
    if args.graph:
        write_graph(graph, args.graph)
    if args.html:
        log = os.path.join(args.out, METRICS)
        curve = loss_points(read_log(log)) if not args.init_from and os.path.isfile(log) else None
        write_page(steps, args.html, graph, curve)
    return 0


class TokenizerTask(Task):
    """What explain reads of a task, for a loaded model: its tokenizer's tokens, encode and decode (no focus token:
    the last position is explained unless --query says otherwise)."""

    def __init__(self, tokenizer: HFTokenizer) -> None:
        texts = [tokenizer.token(i) for i in range(tokenizer.vocab_size)]  # a newline's shown as \n in the table
        super().__init__("pretrained", [t if t.isprintable() else repr(t)[1:-1] for t in texts], 0, 0)
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)


def default_ids(task: Task) -> list[int]:
    """The example explained when no --prompt is given: the first held-out example, as the model reads it
    (all tokens but the last), the same one that train.py explains at the end of training."""
    return [int(i) for i in split(task, seed=HELDOUT_SEED).heldout[0][0][:-1]]


@mg.no_grad()
def trace_attention(model: nn.Module, ids: Sequence[int]) -> list[dict[str, mg.Tensor]]:
    """Every layer's attention steps (q, k, v, scores, weights, out) for one sequence of token ids."""
    trace: list[dict[str, mg.Tensor]] = []
    model(np.array([list(ids)]), trace=trace)
    return trace


@dataclass
class Steps:
    """Every layer's and head's four steps of attention for one token sequence, in float64, and which position,
    layer and head explain shows, with why: what the text table, the heatmap and the explain page all read."""

    tokens: list[str]  # the T token strings
    text: str  # the sequence as its task writes it
    scores: np.ndarray  # (n_layer, nh, T, T) step 1: q_i . k_j / sqrt(hs), before the mask, as the model computed it
    kept: np.ndarray  # (T, T) bool, step 2: True where query i may look at key j (F.causal_mask)
    weights: np.ndarray  # (n_layer, nh, T, T) step 3: the softmax of the masked scores, as the model computed it
    shares: np.ndarray  # (n_layer, nh, T, T) step 4: key j's part of query i's output b_i (0 where masked)
    q: np.ndarray  # (n_layer, nh, T, hs) the queries; with grouped-query attention the shared k heads come repeated
    k: np.ndarray  # (n_layer, nh, T, hs) the keys
    query: int  # the position explained
    why_query: str
    heads: list[tuple[int, int, str]]  # for each query position: (layer, head, why) that explain picks for it

    @property
    def products(self) -> np.ndarray:
        """(n_layer, nh, T, T, hs) q_i * k_j elementwise, the neuron view: they add up to q_i . k_j. Made on demand,
        since they are T times larger than q and k (a loaded GPT-2 at 200 tokens: gigabytes)."""
        return self.q[:, :, :, None, :] * self.k[:, :, None, :, :]

    @property
    def labels(self) -> list[str]:
        """The tokens as a reader sees them: a space, a newline or another character that would not show (the text
        task's) as its repr; " the" stays " the", a BPE token's stray byte is \\xe4 already (tokenizer.py)."""
        return [shown(token) for token in self.tokens]


def shown(token: str) -> str:
    """A token as the tables show it: itself, or its repr where it would not show (see Steps.labels)."""
    return token if token.isprintable() and token.strip() else repr(token)


def attention_steps(model: nn.Module, task: Task, ids: Sequence[int], layer: int | None = None,
                    head: int | None = None, query: int | None = None, traced: GradientTrace | None = None) -> Steps:
    """Steps of the token sequence `ids` from the model's trace (traced's, where given), with explain's choice of
    query position (--query, else choose_query) and, for every position, of layer and head (--layer/--head, else
    choose_head)."""
    ids = [int(i) for i in ids]
    traces = trace_attention(model, ids) if traced is None else traced.layers
    scores, weights, q, k, v = (np.stack([trace[name].numpy()[0] for trace in traces]).astype(np.float64)
                                for name in ("scores", "weights", "q", "k", "v"))  # (n_layer, nh, T, T or hs)
    n_layer, n_head, T = weights.shape[:3]
    for name, value, limit in (("--layer", layer, n_layer), ("--head", head, n_head), ("--query", query, T)):
        check_range(name, value, limit)
    query, why_query = choose_query(task, ids, query)
    return Steps(tokens=[task.vocab[i] for i in ids], text=task.decode(ids), scores=scores,
                 kept=F.causal_mask(T).numpy(), weights=weights,
                 shares=shares(weights, v[:, :, None]),  # each query's row: v (n_layer, nh, 1, T, hs) for every row
                 q=q, k=k, query=query, why_query=why_query,
                 heads=[choose_head(weights, i, layer, head) for i in range(T)])


def check_range(flag: str, value: int | None, limit: int) -> None:
    """--layer, --head and --query count from 0 to limit - 1."""
    if value is not None and not 0 <= value < limit:
        raise UsageError(f"{flag} {value} is out of range: this model/prompt has 0 to {limit - 1}")


@dataclass
class GradientTrace:
    """Every layer's attention steps, as trace_attention's but in grad mode, each with its gradient (.grad) under
    the target: d log p(target | the tokens up to position) / d(each)."""

    layers: list[dict[str, mg.Tensor]]  # each layer's q, k, v, scores, weights, out (see GPT.forward's trace)
    position: int  # the query position whose next-token log-probability is the target
    target: int  # the token id
    why_target: str


def trace_gradients(model: nn.Module, task: Task, ids: Sequence[int], query: int | None,
                    target: str | None) -> GradientTrace:
    """The trace of `ids` with the gradients of log p(target) at explain's query position (--query, else
    choose_query): the numbers of --graph and of the page, tables and graph alike."""
    check_range("--query", query, len(ids))
    position = choose_query(task, ids, query)[0]
    layers: list[dict[str, mg.Tensor]] = []
    logits, _ = model(np.array([list(ids)]), trace=layers)  # (1, T, vocab)
    for step in layers:
        for tensor in step.values():
            tensor.retain_grad()
    token, why = choose_target(task, ids, position, target, logits)
    F.log_softmax(logits[0, position], dim=-1)[token].backward()
    return GradientTrace(layers, position, token, why)


def choose_target(task: Task, ids: Sequence[int], position: int, target: str | None,
                  logits: mg.Tensor) -> tuple[int, str]:
    """The token whose log-probability at `position` the gradients are of, and why: --target, else the token after
    the position, else (at the end of the sequence) the one the model finds most likely there."""
    if target is not None:
        try:
            pieces = task.encode(target)
        except ValueError as err:
            raise UsageError(f"--target: {err}") from None
        if len(pieces) != 1:
            raise UsageError(f"--target {target!r} is {len(pieces)} tokens of this model; give one token")
        return pieces[0], f"--target {target}"
    if position + 1 < len(ids):
        return int(ids[position + 1]), f"the token after position {position} (the default; --target picks another)"
    guess = int(logits[0, position].numpy().argmax())
    return guess, (f"the model's most likely token after position {position}, where the sequence ends "
                   "(the default; --target picks another)")


@dataclass
class LayerGraph:
    """One layer's attention computation with the gradients of a target: what --graph draws and the page shows."""

    layer: int
    position: int  # where the target is predicted
    target: str  # the target token as the tables show it
    why_target: str
    tensors: dict[str, mg.Tensor]  # the layer's trace: q, k, v, scores, weights, out, each with its .grad
    STEPS: ClassVar[str] = ("step 1: scores = q @ kᵀ · 1/√hs (MatMul of q and k's Permute, then Mul)\n"
             "step 2: the causal mask (Where: the score where the key may be seen, else -inf)\n"
             "step 3: weights = the softmax of each row\n"
             "step 4: the weighted sum weights @ v (MatMul); the heads merged side by side into out (Permute, Reshape)")

    @property
    def title(self) -> str:
        B, nh, T, hs = self.tensors["q"].shape
        return (f"Attention of layer {self.layer}: all {nh} heads at once, batched as the engine computes them\n"
                f"(q, k, v: (B, nh, T, hs) = {(B, nh, T, hs)}); gradients of log p({self.target} after position "
                f"{self.position})")

    def draw(self) -> Graph:
        """The graph from q, k and v to out, named by the trace, with the gradients the trace kept."""
        t = self.tensors
        return mg.draw(t["out"], params=t, inputs=(t["q"], t["k"], t["v"]), title=f"{self.title}\n{self.STEPS}")


def layer_graph(task: Task, steps: Steps, traced: GradientTrace) -> LayerGraph:
    """The graph of the layer explain shows for its query position (--layer, else choose_head's)."""
    layer = steps.heads[traced.position][0]
    return LayerGraph(layer, traced.position, shown(task.vocab[traced.target]), traced.why_target,
                      traced.layers[layer])


def shares(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """share_j = w_j |v_j| / sum_i w_i |v_i|: the part of the output b = sum_j w_j v_j that position j
    contributes, by size. With weights w (..., T) >= 0 and values v (..., T, hs) each share is in [0, 1] and
    they add up to 1 (all 0 if every w_j v_j is zero)."""
    contribution = w * np.linalg.norm(v, axis=-1)  # |w_j v_j|, (..., T)
    total = contribution.sum(axis=-1, keepdims=True)
    return np.divide(contribution, total, out=np.zeros_like(contribution), where=total > 0)


def choose_query(task: Task, ids: Sequence[int], query: int | None) -> tuple[int, str]:
    """The position to explain and why: --query, else the task's focus token (the first one), else the last."""
    if query is not None:
        return query, f"--query {query}"
    if task.focus is not None and task.stoi.get(task.focus[0]) in ids:
        token, why = task.focus
        return list(ids).index(task.stoi[token]), f"the {task.name} task's default: {why}"
    return len(ids) - 1, "the last one (the default; --query picks another)"


def choose_head(weights: list[np.ndarray], query: int, layer: int | None, head: int | None) -> tuple[int, int, str]:
    """(layer, head, why): the ones asked for, else, among the heads allowed, the one whose attention from
    `query` reaches furthest back on average, sum_j weight_j (query - j): where attention, rather than the
    token itself or the one before, does the work. weights[layer] is (nh, T, T)."""
    n_layer, n_head = len(weights), weights[0].shape[0]
    if layer is not None and head is not None:
        return layer, head, f"--layer {layer} --head {head}"
    layers = range(n_layer) if layer is None else [layer]
    heads = range(n_head) if head is None else [head]
    back = query - np.arange(query + 1)  # how far back each kept position is
    reach = {(lay, h): float(weights[lay][h, query, :query + 1] @ back) for lay in layers for h in heads}
    best = max(reach, key=reach.get)  # the first of equals
    among = (f"all {n_layer * n_head} heads" if layer is None and head is None
             else f"the {n_head} heads of layer {layer}" if head is None else f"head {head} in each layer")
    return (*best, f"of {among}, the one that reaches furthest back from position {query}: "
                   f"sum_j weight_j ({query} - j) = {reach[best]:.2f}")


def explain_example(model: nn.Module, task: Task, ids: Sequence[int], layer: int | None = None, head: int | None = None,
                    query: int | None = None, traced: GradientTrace | None = None) -> Steps:
    """Print the four steps for one layer, head and query position of the token sequence `ids`, and why
    those were chosen; return every head's steps (attention_steps, of traced where given), which the table was read
    from."""
    steps = attention_steps(model, task, ids, layer, head, query, traced)
    print(table(steps))
    return steps


TABLE_WIDTH = 100  # columns: the b line wraps at this width, and a longer prompt is cut in the title


def table(steps: Steps) -> str:
    """The text walkthrough of steps.query in the layer and head explain picks for it."""
    i, tokens = steps.query, steps.labels
    layer, head, why_head = steps.heads[i]
    scores, w, share = (a[layer, head, i] for a in (steps.scores, steps.weights, steps.shares))  # each (T,)
    lines = [f"\nAttention in layer {layer}, head {head}, for position {i} ({tokens[i]}) "
             f"of {shortened(steps.text, TABLE_WIDTH // 2)}; hs = {steps.q.shape[-1]}:",
             f"  why position {i}: {steps.why_query}",
             f"  why head {head} of layer {layer}: {why_head}",
             "  step 1  score_j = q . k_j / sqrt(hs): how well position j's key matches this query",
             "  step 2  causal mask: positions after the query are set to -inf (the model may not look ahead)",
             "  step 3  softmax over the row: weights in [0, 1] that add up to 1",
             "  step 4  output b = sum_j weight_j v_j, the weighted sum of the value vectors v_j;",
             "          share_j = weight_j |v_j| / sum_i weight_i |v_i|: position j's part of b, from 0 to 100%",
             f"  {'pos':>3}  {_pad('token', 8)} {'1 score':>9}  {'2 mask':<8} {'3 weight':>8}  {'4 share':>8}"]
    for j in range(len(tokens)):
        kept = steps.kept[i, j]
        lines.append(f"  {j:>3}  {_pad(tokens[j], 8)} {scores[j]:>9.3f}  {'kept' if kept else '-inf':<8} "
                     f"{w[j]:>8.1%}  {f'{share[j]:>8.1%}' if kept else ''}".rstrip())
    terms = " + ".join(f"{w[j]:.2f}·v{j}" for j in range(len(tokens)) if steps.kept[i, j])
    start = f"  b{i} = "  # every term kept, on lines of TABLE_WIDTH columns under the first
    lines += textwrap.wrap(terms, TABLE_WIDTH, initial_indent=start, subsequent_indent=" " * len(start),
                           break_on_hyphens=False)
    return "\n".join(lines)


def shortened(text: str, width: int) -> str:
    """repr(text), or for a text longer than `width` characters its start and end around an ellipsis, with a note of
    its length."""
    if len(text) <= width:
        return repr(text)
    half = (width - 1) // 2
    return f"{text[:half] + '…' + text[-half:]!r} (cut: {len(text)} characters)"


def _pad(text: str, width: int) -> str:
    """Left-align text in `width` terminal columns (CJK characters take two)."""
    columns = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(0, width - columns)


def check_png(path: str) -> None:
    """Before any work: --png needs a file name in a folder that exists, and matplotlib."""
    check_output("--png", path, "attention.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--png needs matplotlib: pip install -e '.[plot]'") from None


GRAPH_FORMATS = (".dot", ".svg", ".png")


def check_graph(path: str) -> None:
    """Before any work: --graph needs a file name in a folder that exists; its suffix picks the picture; .svg and
    .png need the graphviz package and program."""
    check_output("--graph", path, "attention.svg")
    suffix = Path(path).suffix.lower()
    if suffix not in GRAPH_FORMATS:
        raise UsageError(f"--graph {path}: the file's suffix picks the picture, one of {', '.join(GRAPH_FORMATS)} "
                         f"(.dot is the DOT text and needs nothing)")
    if suffix != ".dot":
        try:
            import graphviz  # noqa: F401
        except ImportError:
            raise UsageError(f"--graph {path} needs the graphviz package: pip install -e '.[draw]' (or give a .dot "
                             "file)") from None
        if shutil.which("dot") is None:
            raise UsageError(f"--graph {path} needs Graphviz's dot program: apt-get install graphviz (brew install "
                             "graphviz), or give a .dot file")


def check_output(flag: str, path: str, example: str) -> None:
    """Before any work: the file of `flag` must be a file name in a folder that exists."""
    if not path.strip():
        raise UsageError(f"{flag} {path!r}: the file name is empty; give one, such as {flag} {example}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder; give a file name such as {os.path.join(path, example)}")


def write_graph(graph: LayerGraph, path: str) -> None:
    """graph.draw() written to `path`, atomically: the DOT text, or the picture its suffix names."""
    picture, suffix = graph.draw(), Path(path).suffix.lower()
    if suffix == ".dot":
        write_atomically(path, "--graph", lambda tmp: Path(tmp).write_text(picture.source, encoding="utf-8"))
    else:
        write_atomically(path, "--graph", lambda tmp: Path(tmp).write_bytes(picture.pipe(suffix[1:])))
    print(f"wrote {path}: layer {graph.layer}'s attention, gradients of log p({graph.target} after position "
          f"{graph.position})")


def write_page(steps: Steps, path: str, graph: LayerGraph | None = None,
               curve: dict[str, list[tuple[int, float]]] | None = None) -> None:
    """The explain page of `steps` (explain_page.page_html), with the layer graph and the loss curve where given,
    written to `path`, atomically."""
    page = page_html(steps, graph, curve)
    write_atomically(path, "--html", lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))
    print(f"wrote {path}: open it in a browser")


def attention_figure(model: nn.Module, task: Task, ids: Sequence[int]) -> Any:
    """A matplotlib Figure of every layer's and head's attention weights for `ids`: one heatmap each, the
    tokens on both axes (row: the query position, column: the key position it looks at), a colour bar and
    a title. Tokens a font cannot draw are labelled by their position alone: see label_font."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = attention_steps(model, task, ids)
    n_layer, n_head = steps.weights.shape[:2]
    font = label_font("".join(steps.tokens))
    labels = [f"{j} {token}" if font else str(j) for j, token in enumerate(steps.labels)]
    side = max(2.3, 0.14 * len(ids))  # inches per heatmap: room for every token's label
    fig, axes = plt.subplots(n_layer, n_head, sharex=True, sharey=True, squeeze=False,
                             figsize=(side * n_head + 1.6, side * n_layer + 1.4), layout="constrained")
    for layer, weights in enumerate(steps.weights):  # each (nh, T, T)
        for head, ax in enumerate(axes[layer]):
            image = ax.imshow(weights[head], vmin=0, vmax=1, cmap="viridis")
            ax.set_title(f"layer {layer}, head {head}", fontsize=9)
            ax.set_xticks(range(len(ids)), labels, fontsize=7, rotation=90, fontfamily=font)
            ax.set_yticks(range(len(ids)), labels, fontsize=7, fontfamily=font)
            ax.label_outer()  # tick labels on the left column and the bottom row only
        axes[layer, 0].set_ylabel("query: position looking", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("key: position looked at", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight (each row adds up to 1)")
    sentence = steps.text if font else f"{len(ids)} tokens"
    fig.suptitle(f"Attention weights of every head for {sentence!r}\n(above the diagonal: masked, a query may "
                 "not look ahead)", fontsize=10, fontfamily=font)
    return fig


@functools.lru_cache
def label_font(text: str) -> str | None:
    """The name of an installed font that can draw every character of `text`, or None: matplotlib's default
    when it can, else a sans-serif one before a serif one. Chinese tokens need a CJK font, such as Noto Sans
    CJK; matplotlib's default has none."""
    from matplotlib import font_manager, ft2font

    needed = {ord(c) for c in text if not c.isspace()}
    default = font_manager.findfont(font_manager.FontProperties())
    fonts = sorted(font_manager.fontManager.ttflist,
                   key=lambda f: (f.fname != default, "Serif" in f.name or "Mono" in f.name, f.name, f.fname))
    for entry in fonts:
        if entry.name.startswith("Last Resort"):  # has every character, each drawn as the same box
            continue
        try:
            if needed <= ft2font.FT2Font(entry.fname).get_charmap().keys():
                return entry.name
        except (OSError, RuntimeError):  # a font file FreeType cannot read
            continue
    return None


def draw_attention(model: nn.Module, task: Task, ids: Sequence[int], path: str) -> None:
    """attention_figure(...) written to `path` as a PNG, atomically."""
    import matplotlib.pyplot as plt

    fig = attention_figure(model, task, ids)
    try:
        write_atomically(path, "--png", lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    finally:
        plt.close(fig)
    tokens = "".join(task.vocab[i] for i in ids)
    print(f"wrote {path}" + ("" if label_font(tokens) else " (tokens labelled by position: no installed font has "
                                                          "their characters; install one such as Noto Sans CJK)"))


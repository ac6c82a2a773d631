"""Explain mode: the walkthrough's four steps of self-attention (scores, causal mask, softmax, weighted sum of
the values) on a trained model's numbers, for one layer, head and query position, and why those; the same
table ends `python train.py`. Run `python train.py explain` with --help for the flags.
"""

from __future__ import annotations

import argparse
import functools
import os
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import minigrad as mg
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.explain_page import page_html
from gptlab.settings import (
    CHECKPOINT,
    DTYPES,
    HELDOUT_SEED,
    UsageError,
    check_writes,
    folder_files,
    load_pretrained,
    prompt_ids,
    run_files,
)
from gptlab.tasks import Task, split
from gptlab.tokenizer import HFTokenizer
from minigrad import backend, nn
from minigrad import functional as F


def explain_main(argv: Sequence[str], prog: str = "train.py explain") -> int:
    p = argparse.ArgumentParser(prog=prog, description="Print the walkthrough's attention steps "
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
    p.add_argument("--init-from", metavar="DIR", help="a Hugging Face GPT-2 or LLaMA folder instead of --out; "
                                                     "needs --prompt")
    p.add_argument("--dtype", choices=DTYPES, help="with --init-from: the weights' dtype (default float32)")
    p.add_argument("--overwrite", action="store_true", help="let --png or --html replace a file this command reads "
                   "or a checkpoint of the run in --out (refused otherwise)")
    args = p.parse_args(argv)
    if args.png:
        check_png(args.png)
    if args.html:
        check_output("--html", args.html, "attention.html")

    keep = run_files(args.out)  # what --png and --html may not replace: the run's files, and those read below
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
    writes = {flag: path for flag, path in (("--png", args.png), ("--html", args.html)) if path is not None}
    check_writes(writes, keep, args.overwrite, remedy="choose another file name, or give --overwrite to replace it "
                                                      "on purpose")
    model.eval()
    ids = default_ids(task) if args.prompt is None else prompt_ids(task, args.prompt)
    if not 1 <= len(ids) <= model.config.block_size:
        raise UsageError(f"--prompt has {len(ids)} tokens; this model takes 1 to {model.config.block_size}")
    steps = explain_example(model, task, ids, args.layer, args.head, args.query)
    if args.png:
        draw_attention(model, task, ids, args.png)
    if args.html:
        write_page(steps, args.html)
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
    scores: np.ndarray  # (L, nh, T, T) step 1: q_i . k_j / sqrt(d_k), before the mask, as the model computed it
    kept: np.ndarray  # (T, T) bool, step 2: True where query i may look at key j (the causal mask adds 0)
    weights: np.ndarray  # (L, nh, T, T) step 3: the softmax of the masked scores, as the model computed it
    shares: np.ndarray  # (L, nh, T, T) step 4: key j's part of query i's output b_i (0 where masked)
    q: np.ndarray  # (L, nh, T, d_k) the queries; with grouped-query attention the shared k heads come repeated
    k: np.ndarray  # (L, nh, T, d_k) the keys
    query: int  # the position explained
    why_query: str
    heads: list[tuple[int, int, str]]  # for each query position: (layer, head, why) that explain picks for it

    @property
    def products(self) -> np.ndarray:
        """(L, nh, T, T, d_k) q_i * k_j elementwise, the neuron view: they add up to q_i . k_j. Made on demand, since
        they are T times larger than q and k (a loaded GPT-2 at 200 tokens: gigabytes)."""
        return self.q[:, :, :, None, :] * self.k[:, :, None, :, :]

    @property
    def labels(self) -> list[str]:
        """The tokens as a reader sees them: a space, a newline or another character that would not show (the text
        task's) as its repr; " the" stays " the", a BPE token's stray byte is \\xe4 already (tokenizer.py)."""
        return [token if token.isprintable() and token.strip() else repr(token) for token in self.tokens]


def attention_steps(model: nn.Module, task: Task, ids: Sequence[int], layer: int | None = None,
                    head: int | None = None, query: int | None = None) -> Steps:
    """Steps of the token sequence `ids` from the model's trace, with explain's choice of query position (--query,
    else choose_query) and, for every position, of layer and head (--layer/--head, else choose_head)."""
    ids = [int(i) for i in ids]
    traces = trace_attention(model, ids)
    scores, weights, q, k, v = (np.stack([trace[name].numpy()[0] for trace in traces]).astype(np.float64)
                                for name in ("scores", "weights", "q", "k", "v"))  # (L, nh, T, T) or (L, nh, T, d_k)
    n_layer, n_head, T = weights.shape[:3]
    for name, value, limit in (("--layer", layer, n_layer), ("--head", head, n_head), ("--query", query, T)):
        if value is not None and not 0 <= value < limit:
            raise UsageError(f"{name} {value} is out of range: this model/prompt has 0 to {limit - 1}")
    query, why_query = choose_query(task, ids, query)
    return Steps(tokens=[task.vocab[i] for i in ids], text=task.decode(ids), scores=scores,
                 kept=F.causal_mask(T).numpy() == 0, weights=weights,
                 shares=shares(weights, v[:, :, None]),  # each query's row: v (L, nh, 1, T, d_k) for every row
                 q=q, k=k, query=query, why_query=why_query,
                 heads=[choose_head(weights, i, layer, head) for i in range(T)])


def shares(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """share_j = w_j |v_j| / sum_i w_i |v_i|: the part of the output b = sum_j w_j v_j that position j
    contributes, by size. With weights w (..., T) >= 0 and values v (..., T, d_k) each share is in [0, 1] and
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
                    query: int | None = None) -> Steps:
    """Print the four steps for one layer, head and query position of the token sequence `ids`, and why
    those were chosen; return every head's steps (attention_steps), which the table was read from."""
    steps = attention_steps(model, task, ids, layer, head, query)
    print(table(steps))
    return steps


def table(steps: Steps) -> str:
    """The text walkthrough of steps.query in the layer and head explain picks for it."""
    i, tokens = steps.query, steps.labels
    layer, head, why_head = steps.heads[i]
    scores, w, share = (a[layer, head, i] for a in (steps.scores, steps.weights, steps.shares))  # each (T,)
    lines = [f"\nAttention in layer {layer}, head {head}, for position {i} ({tokens[i]}) "
             f"of {steps.text!r}; d_k = {steps.q.shape[-1]}:",
             f"  why position {i}: {steps.why_query}",
             f"  why head {head} of layer {layer}: {why_head}",
             "  step 1  score_j = q . k_j / sqrt(d_k): how well position j's key matches this query",
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
    lines.append(f"  b{i} = {terms}")
    return "\n".join(lines)


def _pad(text: str, width: int) -> str:
    """Left-align text in `width` terminal columns (CJK characters take two)."""
    columns = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(0, width - columns)


def check_png(path: str) -> None:
    """Before any work: --png needs matplotlib and a file name in a folder that exists."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--png needs matplotlib: pip install -e '.[plot]'") from None
    check_output("--png", path, "attention.png")


def check_output(flag: str, path: str, example: str) -> None:
    """Before any work: the file of `flag` must be a file name in a folder that exists."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder; give a file name such as {os.path.join(path, example)}")


def write_atomically(path: str, flag: str, write: Callable[[str], object]) -> None:
    """write(tmp) fills a temporary file beside `path`, which then replaces `path`: the file is whole or not
    there. A failure to write is a UsageError naming `flag`, and leaves no temporary file."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as err:
        raise UsageError(f"cannot write {flag} {path}: {err}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_page(steps: Steps, path: str) -> None:
    """The explain page of `steps` (explain_page.page_html) written to `path`, atomically."""
    write_atomically(path, "--html", lambda tmp: Path(tmp).write_text(page_html(steps), encoding="utf-8"))
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


"""Explain mode: the walkthrough's four steps of self-attention on a trained model's numbers.

    python explain.py --prompt "我 吃 蘋果" [--layer L] [--head H] [--query I] [--png attention.png]
    python train.py explain ...          # the same

For one layer, head and query position it prints step 1 the scores q.k / sqrt(d_k) against every
position, step 2 which of them the causal mask removes, step 3 the softmax weights, and step 4 how
much each position's value vector contributes to the output.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import unicodedata
from collections.abc import Sequence

import numpy as np

from checkpoint import CHECKPOINT, UsageError, load_checkpoint, prompt_ids, restore, run_cli
from minigrad import nn
from tasks import Task


def explain_main(argv: Sequence[str], prog: str = "explain.py") -> int:
    p = argparse.ArgumentParser(prog=prog, description="Print the walkthrough's attention steps "
                                "with the numbers of the model trained in --out.")
    p.add_argument("--out", default="out", help=f"folder holding {CHECKPOINT} (default ./out)")
    p.add_argument("--prompt", help="space-separated tokens (characters for the text task); "
                                    "default: a held-out example's prompt")
    p.add_argument("--layer", type=int, help="decoder block, from 0 (default: the last)")
    p.add_argument("--head", type=int, help="attention head, from 0 (default: the most focused one)")
    p.add_argument("--query", type=int, help="position whose attention is explained (default: the last)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--png", metavar="FILE", help="also draw every head's attention weights (needs matplotlib)")
    args = p.parse_args(argv)
    if args.png:
        check_png(args.png)

    task, model = restore(load_checkpoint(args.out), args.device)
    model.eval()
    ids = prompt_ids(task, args.prompt)
    if not 1 <= len(ids) <= model.config.block_size:
        raise UsageError(f"--prompt has {len(ids)} tokens; this model takes 1 to {model.config.block_size}")
    explain_example(model, task, ids, args.layer, args.head, args.query)
    if args.png:
        draw_attention(model, task, ids, args.png)
    return 0


def explain_example(model: nn.Module, task: Task, ids: Sequence[int], layer: int | None = None, head: int | None = None,
                    query: int | None = None, brief: bool = False) -> None:
    """Print the four steps for one layer, head and query position of the token sequence `ids`."""
    ids = [int(i) for i in ids]
    traces = model.trace_attention(np.array([ids]))
    n_layer, n_head, T = len(traces), model.config.n_head, len(ids)
    layer = n_layer - 1 if layer is None else layer
    query = T - 1 if query is None else query
    for name, value, limit in (("--layer", layer, n_layer), ("--head", head, n_head), ("--query", query, T)):
        if value is not None and not 0 <= value < limit:
            raise UsageError(f"{name} {value} is out of range: this model/prompt has 0 to {limit - 1}")
    q, k, v, weights = (traces[layer][name].numpy()[0] for name in ("q", "k", "v", "weights"))  # (nh, T, ...)
    if head is None:  # the head that is most sure where to look, for this query
        head = int(weights[:, query, :].max(axis=1).argmax())
    d_k = q.shape[-1]
    tokens = [task.vocab[i] for i in ids]

    scores = k[head] @ q[head, query] / math.sqrt(d_k)  # step 1: q . k_j / sqrt(d_k), (T,)
    w = weights[head, query].astype(np.float64)  # step 3, as the model computed it
    b = w @ v[head]  # step 4: the output vector, sum_j w_j v_j
    share = (w[:, None] * v[head]) @ b / (b @ b)  # part of b along each w_j v_j; adds up to 1

    print(f"\nAttention in layer {layer}, head {head}, for position {query} ({tokens[query]}) "
          f"of {task.decode(ids)!r}; d_k = {d_k}:")
    if not brief:
        print("  step 1  score_j = q . k_j / sqrt(d_k): how well position j's key matches this query\n"
              "  step 2  causal mask: positions after the query are set to -inf (the model may not look ahead)\n"
              "  step 3  softmax over the row: weights in [0, 1] that add up to 1\n"
              "  step 4  output b = sum_j weight_j v_j; 'share' is the part of b that comes from position j")
    print(f"  {'pos':>3}  {_pad('token', 8)} {'1 score':>9}  {'2 mask':<8} {'3 weight':>8}  {'4 share':>8}")
    for j in range(T):
        masked = j > query
        print(f"  {j:>3}  {_pad(tokens[j], 8)} {scores[j]:>9.3f}  {'-inf' if masked else 'kept':<8} "
              f"{w[j]:>8.1%}  {'' if masked else f'{share[j]:>8.1%}'}")
    terms = " + ".join(f"{w[j]:.2f}·v{j}" for j in range(query + 1))
    print(f"  b{query} = {terms}")


def farthest_look(model: nn.Module, ids: Sequence[int]) -> tuple[int, int, int]:
    """(layer, head, query) whose attention reaches furthest back on average: where attention, not the
    previous token, is doing the work. Used for the short explanation at the end of training."""
    best, where = -1.0, (0, 0, 0)
    for layer, trace in enumerate(model.trace_attention(np.array([list(ids)]))):
        weights = trace["weights"].numpy()[0]  # (nh, T, T)
        T = weights.shape[-1]
        distance = (weights * (np.arange(T)[:, None] - np.arange(T)[None, :])).sum(axis=-1)  # (nh, T)
        head, query = np.unravel_index(distance.argmax(), distance.shape)
        if distance[head, query] > best:
            best, where = distance[head, query], (layer, int(head), int(query))
    return where


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
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--png {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"--png {path} is a folder; give a file name such as {os.path.join(path, 'attention.png')}")


def draw_attention(model: nn.Module, task: Task, ids: Sequence[int], path: str) -> None:
    """A grid of heatmaps, one per layer and head, of the attention weights for `ids`, written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = model.trace_attention(np.array([list(ids)]))
    n_layer, n_head = len(traces), model.config.n_head
    labels = [task.vocab[i] if task.vocab[i].isascii() else str(j) for j, i in enumerate(ids)]
    fig, axes = plt.subplots(n_layer, n_head, figsize=(2.2 * n_head + 1, 2.2 * n_layer + 0.6), squeeze=False)
    for layer, trace in enumerate(traces):
        weights = trace["weights"].numpy()[0]  # (nh, T, T)
        for head in range(n_head):
            ax = axes[layer, head]
            ax.imshow(weights[head], vmin=0, vmax=1, cmap="viridis")
            ax.set_title(f"layer {layer} head {head}", fontsize=8)
            ax.set_xticks(range(len(ids)), labels, fontsize=6)
            ax.set_yticks(range(len(ids)), labels, fontsize=6)
    fig.suptitle("attention weights (row: query position, column: key position)", fontsize=9)
    fig.tight_layout()
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, format="png", dpi=120)
        os.replace(tmp, path)  # atomic: the file is whole or not there
    except OSError as err:
        raise UsageError(f"cannot write --png {path}: {err}") from None
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {path}" + ("" if all(t.isascii() for t in labels) else " (non-ASCII tokens labelled by position)"))


if __name__ == "__main__":
    sys.exit(run_cli(explain_main, sys.argv[1:], "explain.py"))

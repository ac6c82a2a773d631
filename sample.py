"""Sample mode, as nanoGPT's sample.py: continue a prompt with the model trained in --out, and print the new
tokens only (`python train.py sample --prompt "我 吃 蘋果"`, or `python sample.py`). A prompt longer than the
block size is cropped to its last block_size tokens, as nanoGPT does.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

import numpy as np

import minigrad as mg
from checkpoint import load_checkpoint, restore
from minigrad import backend
from settings import CHECKPOINT, UsageError, prompt_ids, run_cli


def sample_main(argv: Sequence[str], prog: str = "sample.py") -> int:
    p = argparse.ArgumentParser(prog=prog, description="Continue --prompt with the model trained in --out.")
    p.add_argument("--out", default="out", help=f"folder holding {CHECKPOINT} (default ./out)")
    p.add_argument("--prompt", help="space-separated tokens (characters for the text task); "
                                    "default: a held-out example's prompt")
    p.add_argument("--max-new-tokens", type=int, help="tokens to add (default: as many as the task's answers have)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="above 0: below 1 sharper, above 1 more random (default 1.0); --top-k 1 is greedy")
    p.add_argument("--top-k", type=int, help="sample only among the k likeliest tokens (default: all)")
    p.add_argument("--seed", type=int, default=1337, help="seeds the sampling (default 1337)")
    p.add_argument("--device", choices=list(backend.DEVICES), default="cpu")
    args = p.parse_args(argv)
    check_sampling(args)

    task, model = restore(load_checkpoint(args.out), args.device)
    model.eval()
    ids = prompt_ids(task, args.prompt)
    if not ids:
        raise UsageError("--prompt has no tokens; give at least one")
    ids = ids[-model.config.block_size:]  # cropped, as nanoGPT does
    n_new = task.seq_len - task.prompt_len if args.max_new_tokens is None else args.max_new_tokens
    mg.manual_seed(args.seed)
    tokens = model.generate(np.array([ids]), n_new, temperature=args.temperature, top_k=args.top_k)
    print(task.decode(tokens[0, len(ids):]))
    return 0


def check_sampling(args: argparse.Namespace) -> None:
    """Refuse, before loading anything, the values generate cannot use."""
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        raise UsageError(f"--temperature must be a finite number above 0, got {args.temperature} "
                         "(for the likeliest token each time, use --top-k 1)")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError(f"--top-k must be 1 or more, got {args.top_k}")
    if args.max_new_tokens is not None and args.max_new_tokens < 0:
        raise UsageError(f"--max-new-tokens must be 0 or more, got {args.max_new_tokens}")
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {args.seed}")


if __name__ == "__main__":
    sys.exit(run_cli(sample_main, sys.argv[1:], "sample.py"))

"""Sample mode, as nanoGPT's sample.py: continue a prompt with the model trained in --out (`python train.py sample
--prompt "我 吃 蘋果"`, or the root's `python sample.py`), or with a Hugging Face model (--init-from DIR), printing the
new tokens as they come, after the prompt they continue in [brackets]. A prompt longer than the block size is cropped
to its last block_size tokens, as nanoGPT does, and shown cropped.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

import numpy as np

import minigrad as mg
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.settings import CHECKPOINT, DTYPES, FlagParser, UsageError, load_pretrained, prompt_ids
from gptlab.tasks import TextTask
from gptlab.tokenizer import HFTokenizer
from minigrad.array import backend

PRETRAINED_NEW_TOKENS = 64  # --max-new-tokens of a loaded or fine-tuned model, unless given
TEXT_NEW_TOKENS = 256  # --max-new-tokens of a model trained on --task text: a paragraph (nanoGPT's sample.py: 500)


def sample_main(argv: Sequence[str], prog: str = "sample.py") -> int:
    p = FlagParser(prog=prog, description="Continue --prompt with the model trained in --out.")
    p.add_argument("--out", default="out", help=f"folder holding {CHECKPOINT} (default ./out)")
    p.add_argument("--prompt", help="space-separated tokens (text for the text task); "
                                    "default: a held-out example's prompt")
    p.add_argument("--max-new-tokens", type=int, help=f"tokens to add (default: {TEXT_NEW_TOKENS} for --task text, "
                   f"{PRETRAINED_NEW_TOKENS} for a Hugging Face model, else as many as the task's answers have)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="above 0: below 1 sharper, above 1 more random (default 1.0); --top-k 1 is greedy")
    p.add_argument("--top-k", type=int, help="sample only among the k likeliest tokens (default: all)")
    p.add_argument("--seed", type=int, default=1337, help="seeds the sampling (default 1337)")
    p.add_argument("--device", choices=list(backend.DEVICES), default="cpu")
    p.add_argument("--init-from", metavar="DIR", help="a Hugging Face GPT-2 or LLaMA folder (config.json, "
                   "model.safetensors, tokenizer.json) instead of --out; stops at its end-of-text token")
    p.add_argument("--dtype", choices=DTYPES, help="with --init-from: the weights' dtype (default float32)")
    args = p.parse_args(argv)
    check_sampling(args)

    if args.init_from:
        model, tokenizer = load_pretrained(args.init_from, args.dtype or "float32", args.device)
        ids = pretrained_prompt(tokenizer, args.prompt)
        decode, stop, n_new, in_context, lead = tokenizer.decode, tokenizer.eos_id, PRETRAINED_NEW_TOKENS, True, ""
    else:
        if args.dtype is not None:
            raise UsageError("--dtype is for --init-from; a checkpoint in --out keeps the dtype it was trained in")
        task, model = restore(load_checkpoint(args.out), args.device)
        ids = prompt_ids(task, args.prompt)
        in_context = isinstance(task, TextTask) and isinstance(task.tokenizer, HFTokenizer)  # fine-tuned, --init-from
        decode, stop = task.decode, task.tokenizer.eos_id if in_context else None
        if isinstance(task, TextTask):
            n_new, lead = PRETRAINED_NEW_TOKENS if in_context else TEXT_NEW_TOKENS, ""
        else:  # a toy task: as long as its answers, a space after the prompt as between its tokens
            n_new, lead = task.seq_len - task.prompt_len, " "
    n_new = n_new if args.max_new_tokens is None else args.max_new_tokens
    if not ids:
        raise UsageError("--prompt has no tokens; give at least one")
    ids = ids[-model.config.block_size:]  # cropped, as nanoGPT does
    # a loaded or fine-tuned model's text continues the prompt's (a first word's space depends on what precedes it);
    # a toy task's tokens are printed on their own, as its decode joins them
    print(f"[{decode(ids)}]", end="")  # the prompt, marked off: what the model continues
    stream = Stream(decode, ids, stop, in_context, lead)
    mg.manual_seed(args.seed)
    model.eval().generate(np.array([ids]), n_new, temperature=args.temperature, top_k=args.top_k, stop_token=stop,
                          on_token=stream)
    stream.end()
    return 0


def pretrained_prompt(tokenizer: HFTokenizer, prompt: str | None) -> list[int]:
    """--prompt as the tokenizer encodes it; an empty one starts from the tokenizer's BOS token (GPT-2: <|endoftext|>),
    as a document does."""
    if prompt is None:
        raise UsageError("--init-from needs a --prompt (\"\" starts from the beginning-of-text token)")
    if prompt == "" and tokenizer.bos_id is not None:
        return [tokenizer.bos_id]
    return prompt_ids(tokenizer, prompt)


class Stream:
    """on_token for generate: prints each step's new text at once, decode(base + new tokens) past decode(base), where
    base is the prompt or, for a toy task, nothing; `lead` before the first piece. A token ending inside a UTF-8
    character (U+FFFD for now) waits
    for the rest of it; a final stop token is not printed. Characters already printed stay: where later bytes make
    earlier ones invalid UTF-8 (LLaMA's byte tokens), the text goes on at the position it had reached."""

    def __init__(self, decode: Callable[[Sequence[int]], str], prompt: Sequence[int], stop: int | None,
                 in_context: bool, lead: str = "") -> None:
        self.decode, self.start, self.stop, self.lead = decode, len(prompt), stop, lead
        self.base = list(prompt) if in_context else []
        self.new: list[int] = []  # the tokens generated so far
        self.shown = ""  # the part of their text printed so far

    def __call__(self, idx: np.ndarray) -> None:
        self.new = [int(i) for i in idx[0, self.start:]]
        self.show(self.text().rstrip("\ufffd"))

    def text(self) -> str:
        new = self.new[:-1] if self.new and self.new[-1] == self.stop else self.new
        return self.decode(self.base + new)[len(self.decode(self.base)):]

    def show(self, text: str) -> None:
        if len(text) > len(self.shown):
            print(("" if self.shown else self.lead) + text[len(self.shown):], end="", flush=True)
            self.shown = text

    def end(self) -> None:
        self.show(self.text())
        print(flush=True)


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


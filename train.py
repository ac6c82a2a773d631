"""Train the minigrad GPT on a toy next-token task, then show what its attention does.

    python train.py                      # the default: the `sentences` task, about a minute on a laptop CPU
    python train.py --task sort --steps 1500 --preset small
    python train.py --resume             # continue the run saved in --out (same total --steps)
    python train.py explain --prompt "我 吃 蘋果"   # the walkthrough's four steps on the trained model

Everything the training loop needs is in this file; the tasks are in tasks.py, the model in models/.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

import minigrad as mg
from minigrad import backend, fast
from minigrad.optim import AdamW, clip_grad_norm_, cosine_lr, decay_groups
from models import GPT, IGNORE_INDEX, GPTConfig
from tasks import TASKS, Task, make_task, split

PRESETS = {  # model sizes: n_embd, n_head, n_layer
    "tiny": {"n_embd": 64, "n_head": 4, "n_layer": 2},
    "small": {"n_embd": 128, "n_head": 4, "n_layer": 4},
    "medium": {"n_embd": 256, "n_head": 8, "n_layer": 4},
}
DEFAULTS = {  # what `python train.py` runs; flags override, --resume restores the saved ones
    "task": "sentences", "data": None, "preset": "tiny", "n_embd": None, "n_head": None, "n_layer": None,
    "block_size": None, "dropout": 0.0, "steps": 300, "batch_size": 32, "lr": 3e-3, "warmup": 20,
    "weight_decay": 0.1, "grad_clip": 1.0, "seed": 1337, "eval_interval": 100, "checkpoint_interval": 100,
    "dtype": "float32",
}
MODEL_KEYS = ("task", "data", "preset", "n_embd", "n_head", "n_layer", "block_size", "dtype")  # fixed on resume
CHECKPOINT = "ckpt.npz"
HELDOUT_SEED = 0  # the held-out examples do not change with --seed, so runs compare on the same ones


class UsageError(Exception):
    """A bad argument or setup: reported in one line, exit status 2."""


# ---- setting up a run ----

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Train the minigrad GPT on a toy next-token task. Tasks: "
        + "; ".join(f"{k}: {v}" for k, v in TASKS.items()),
        epilog="Explain mode (the walkthrough's steps on a trained model): python train.py explain --help")
    g = p.add_argument_group("task")
    g.add_argument("--task", choices=list(TASKS), help=f"what to learn (default {DEFAULTS['task']})")
    g.add_argument("--data", metavar="FILE", help="UTF-8 text file for --task text")
    g = p.add_argument_group("model")
    g.add_argument("--preset", choices=list(PRESETS), help="model size (default tiny: " + ", ".join(
        f"{k} {v['n_embd']}/{v['n_head']}/{v['n_layer']}" for k, v in PRESETS.items()) + " width/heads/layers)")
    g.add_argument("--n-embd", type=int, help="width (d_model); overrides the preset")
    g.add_argument("--n-head", type=int, help="attention heads; must divide the width")
    g.add_argument("--n-layer", type=int, help="decoder blocks")
    g.add_argument("--block-size", type=int, help="longest sequence (default: what the task needs)")
    g.add_argument("--dropout", type=float)
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int, help=f"total optimizer steps (default {DEFAULTS['steps']})")
    g.add_argument("--batch-size", type=int, help=f"sequences per step (default {DEFAULTS['batch_size']})")
    g.add_argument("--lr", type=float, help=f"peak learning rate (default {DEFAULTS['lr']}); cosine decay to lr/10")
    g.add_argument("--warmup", type=int, help="linear warmup steps")
    g.add_argument("--weight-decay", type=float)
    g.add_argument("--seed", type=int, help="seeds the weights, the data and dropout")
    g.add_argument("--device", choices=list(backend.DEVICES), default="cpu")
    g.add_argument("--dtype", choices=["float32", "float64"])
    g.add_argument("--eval-interval", type=int, help="steps between held-out evaluations")
    g = p.add_argument_group("output")
    g.add_argument("--out", default="out", help="folder for the checkpoint (default ./out)")
    g.add_argument("--resume", action="store_true", help=f"continue from --out/{CHECKPOINT} up to --steps")
    g.add_argument("--checkpoint-interval", type=int, help="steps between checkpoints")
    g.add_argument("--samples", type=int, default=3, help="held-out completions shown at the end")
    g.add_argument("--no-explain", action="store_true", help="skip the attention explanation at the end")
    return p


def resolve_settings(args: argparse.Namespace, saved: dict[str, Any] | None) -> dict[str, Any]:
    """DEFAULTS, then the checkpoint's settings when resuming, then the flags given."""
    settings = dict(DEFAULTS if saved is None else saved)
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is None:
            continue
        if saved is not None and key in MODEL_KEYS and value != saved[key]:
            raise UsageError(f"--{key.replace('_', '-')} {value} differs from the checkpoint's {saved[key]}; "
                             "drop the flag to resume, or start a new run with another --out")
        settings[key] = value
    for key in ("steps", "batch_size", "eval_interval", "checkpoint_interval"):
        if settings[key] <= 0:
            raise UsageError(f"--{key.replace('_', '-')} must be positive, got {settings[key]}")
    if settings["lr"] <= 0:
        raise UsageError(f"--lr must be positive, got {settings['lr']}")
    return settings


def build(settings: dict[str, Any], device: str) -> tuple[Task, GPT]:
    """The task and a freshly initialised model (seeded) on `device`."""
    try:
        backend.check_device(device)
        task = make_task(settings["task"], data=settings["data"])
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        raise UsageError(str(err)) from None
    needed = task.seq_len - 1  # the model reads all tokens but the last
    block_size = needed if settings["block_size"] is None else settings["block_size"]
    if block_size < needed:
        raise UsageError(f"--block-size {block_size} is too small for task {task.name!r}, "
                         f"whose sequences need {needed}")
    preset = PRESETS[settings["preset"]]
    sizes = {k: preset[k] if settings[k] is None else settings[k] for k in ("n_embd", "n_head", "n_layer")}
    try:
        config = GPTConfig(vocab_size=len(task.vocab), block_size=block_size, dropout=settings["dropout"], **sizes)
    except ValueError as err:
        raise UsageError(str(err)) from None
    mg.manual_seed(settings["seed"])
    model = GPT(config).to(settings["dtype"]).to(device)
    return task, model


def batch_arrays(tokens: np.ndarray, scored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model input (all tokens but the last) and targets (the next token where scored, else IGNORE_INDEX)."""
    return tokens[:, :-1], np.where(scored[:, 1:], tokens[:, 1:], IGNORE_INDEX)


# ---- evaluation ----

@mg.no_grad()
def evaluate(model: GPT, tokens: np.ndarray, scored: np.ndarray, batch_size: int = 256) -> tuple[float, float]:
    """Mean loss and accuracy over the scored targets of the held-out examples."""
    model.eval()
    loss_sum, correct, counted = 0.0, 0, 0
    for i in range(0, len(tokens), batch_size):
        x, y = batch_arrays(tokens[i:i + batch_size], scored[i:i + batch_size])
        logits, loss = model(x, y)
        n = int((y != IGNORE_INDEX).sum())
        loss_sum += loss.item() * n
        correct += int(((logits.numpy().argmax(-1) == y) & (y != IGNORE_INDEX)).sum())
        counted += n
    model.train()
    return loss_sum / counted, correct / counted


def show_samples(model: GPT, task: Task, tokens: np.ndarray, n: int) -> None:
    model.eval()
    for row in tokens[:n]:
        prompt, answer = task.split_prompt(row)
        completion = model.generate(np.array([prompt]), len(answer), temperature=0)[0, len(prompt):]
        mark = "ok" if list(completion) == answer else f"expected {task.decode(answer)!r}"
        print(f"  {task.decode(prompt)!r} -> {task.decode(completion)!r}  {mark}")
    model.train()


# ---- checkpoints ----

def save_checkpoint(path: str, model: GPT, opt: AdamW, step: int, settings: dict[str, Any],
                    data_rng: np.random.Generator) -> None:
    """Everything needed to continue exactly: weights, optimizer, step, settings and RNG states."""
    mg.save(path, {"model": model.state_dict(), "optim": opt.state_dict(), "step": step, "settings": settings,
                   "rng": {"data": data_rng.bit_generator.state,
                           "cpu": backend.generator("cpu").bit_generator.state}})


def load_checkpoint(out: str) -> dict[str, Any]:
    path = os.path.join(out, CHECKPOINT)
    if not os.path.exists(path):
        raise UsageError(f"no checkpoint at {path}; train one first: python train.py --out {out}")
    try:
        return mg.load(path)
    except ValueError as err:
        raise UsageError(str(err)) from None


# ---- training ----

class StopRequest:
    """Ctrl-C or SIGTERM sets a flag; the loop saves at the end of the step. A second Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.requested = False
        self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def restore(self) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def train(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.out) if args.resume else None
    settings = resolve_settings(args, ckpt["settings"] if ckpt else None)
    task, model = build(settings, args.device)
    data = split(task, seed=HELDOUT_SEED)
    opt = AdamW(decay_groups(model.named_parameters(), settings["weight_decay"]), lr=settings["lr"],
                betas=(0.9, 0.95), fused=True)
    data_rng = np.random.default_rng(settings["seed"])
    step = 0
    path = os.path.join(args.out, CHECKPOINT)
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optim"])
        step = int(ckpt["step"])
        data_rng.bit_generator.state = ckpt["rng"]["data"]
        backend.generator("cpu").bit_generator.state = ckpt["rng"]["cpu"]
        print(f"resumed from {path} at step {step}" + (f"; --steps {settings['steps']} is already reached"
                                                        if step >= settings["steps"] else ""))
    else:
        os.makedirs(args.out, exist_ok=True)
        if os.path.exists(path):
            os.replace(path, path.replace(".npz", "-previous.npz"))
            print(f"note: the earlier {path} was kept as {CHECKPOINT.replace('.npz', '-previous.npz')}")

    steps = settings["steps"]
    print(f"task {task.name}: {TASKS[task.name]}")
    print(f"model: {model.num_parameters():,} parameters, width {model.config.n_embd}, {model.config.n_head} heads, "
          f"{model.config.n_layer} layers; {steps} steps of {settings['batch_size']} sequences on {args.device}")
    stop = StopRequest()
    loss_value, train_time, trained_tokens = float("nan"), 0.0, 0
    bar = tqdm(total=steps, initial=step, disable=None, unit="step", dynamic_ncols=True)
    try:
        while step < steps:
            start = time.perf_counter()
            lr = cosine_lr(step, settings["lr"], steps, settings["warmup"], settings["lr"] / 10)
            for group in opt.param_groups:
                group["lr"] = lr
            x, y = batch_arrays(*data.train_batch(data_rng, settings["batch_size"]))
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            clip_grad_norm_(model.parameters(), settings["grad_clip"])
            opt.step()
            step += 1
            loss_value = loss.item()
            train_time += time.perf_counter() - start
            trained_tokens += x.size
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.4f}", tok_s=f"{trained_tokens / train_time:,.0f}")
            if step % settings["eval_interval"] == 0 or step == steps:
                val_loss, val_acc = evaluate(model, *data.heldout)
                bar.write(f"step {step:5d}  train loss {loss_value:.4f}  val loss {val_loss:.4f}  "
                          f"val acc {val_acc:.2%}")
            if step % settings["checkpoint_interval"] == 0 or step == steps or stop.requested:
                save_checkpoint(path, model, opt, step, settings, data_rng)
            if stop.requested:
                bar.close()
                print(f"stopped at step {step}; checkpoint saved to {path}. Continue with: "
                      f"python train.py --resume --out {args.out}")
                return 130
    finally:
        bar.close()
        stop.restore()

    val_loss, val_acc = evaluate(model, *data.heldout)
    if args.samples:
        print("held-out completions (greedy):")
        show_samples(model, task, data.heldout[0], args.samples)
    if not args.no_explain:
        from explain import explain_example, farthest_look

        ids = data.heldout[0][0][:-1]  # a held-out example, as the model reads it
        explain_example(model, task, ids, *farthest_look(model, ids), brief=True)
    tokens_per_s = trained_tokens / train_time if train_time else float("nan")
    print(f"final: step={step} train_loss={loss_value:.4f} val_loss={val_loss:.4f} val_acc={val_acc:.4f} "
          f"tokens_per_s={tokens_per_s:.0f}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["explain"]:
            from explain import explain_main

            return explain_main(argv[1:])
        return train(build_parser().parse_args(argv))
    except UsageError as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # run the importable module `train`, not this __main__ copy: explain.py imports `train`, and both
    # must raise and catch the same UsageError class
    import train

    fast.keep_large_blocks_in_heap()  # a whole run: big freed blocks are reused (README, Performance)
    sys.exit(train.main())

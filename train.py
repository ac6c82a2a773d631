"""Train the minigrad GPT (or its LLaMA-style sibling) on a toy next-token task, then show what its attention does:
`python train.py` (--help for the flags; `python train.py explain`, `python train.py sample`). This file is the
training loop, in the order nanoGPT's reads; run.py is everything around it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

import minigrad as mg
import run
from minigrad import nn
from minigrad.optim import Optimizer, clip_grad_norm_, cosine_lr
from models import IGNORE_INDEX
from tasks import Split


def get_batch(data: Split, rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch of training examples as (inputs, targets)."""
    return batch_arrays(*data.train_batch(rng, batch_size))


def batch_arrays(tokens: np.ndarray, scored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model input (all tokens but the last) and targets (the next token where scored, else IGNORE_INDEX)."""
    return tokens[:, :-1], np.where(scored[:, 1:], tokens[:, 1:], IGNORE_INDEX)


def train_step(model: nn.Module, opt: Optimizer, x: np.ndarray, y: np.ndarray, grad_clip: float,
               reduce_grads: Callable[[list[nn.Parameter]], None] | None = None) -> float:
    """One optimizer step on a batch: forward, loss, backward, clip, update. Returns the loss. reduce_grads
    (data parallelism) combines the .grad of model.parameters() across processes, before the clip."""
    _, loss = model(x, y)  # forward: logits and the mean cross-entropy over the scored targets
    opt.zero_grad()
    loss.backward()  # every parameter's .grad
    if reduce_grads is not None:
        reduce_grads(model.parameters())
    clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.item()


@mg.no_grad()
def evaluate(model: nn.Module, tokens: np.ndarray, scored: np.ndarray, batch_size: int = 256) -> tuple[float, float]:
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


def train(r: run.Run) -> int:
    """The loop, from step r.step to r.settings["steps"], then the held-out report; returns the exit status."""
    model, opt, s = r.model, r.opt, r.settings
    step, loss, train_time, trained_tokens = r.step, math.nan, 0.0, 0
    while step < s["steps"]:
        start = time.perf_counter()
        lr = cosine_lr(step, s["lr"], s["steps"], s["warmup"], s["lr"] / 10)  # warmup, then cosine decay to lr/10
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = get_batch(r.data, r.data_rng, s["batch_size"])
        if r.world.size == 1:
            loss, stopping = train_step(model, opt, x, y, s["grad_clip"]), r.stop.requested
        else:  # data parallel: this rank's rows, the gradients and the loss combined across the ranks (run.py)
            loss, stopping = r.data_parallel_step(train_step, x, y)
        step += 1
        train_time += time.perf_counter() - start
        trained_tokens += x.size
        r.bar.update(1)
        r.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{trained_tokens / train_time:,.0f}")
        if not math.isfinite(loss):
            raise r.diverged(f"the training loss is {loss} at step {step}")
        if r.world.rank == 0 and (step % s["eval_interval"] == 0 or step == s["steps"]):
            val_loss, val_acc = evaluate(model, *r.data.heldout)
            r.bar.write(f"step {step:5d}  train loss {loss:.4f}  val loss {val_loss:.4f}  val acc {val_acc:.2%}")
        if step % s["checkpoint_interval"] == 0 or step == s["steps"] or stopping:
            r.save(step)
        if stopping:  # every rank stops after the same step
            return r.stopped(step)
    r.bar.close()
    if r.world.rank == 0:
        val_loss, val_acc = evaluate(model, *r.data.heldout)
        r.report(step, loss, val_loss, val_acc, trained_tokens / train_time if train_time else math.nan)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run.main(argv, train)


if __name__ == "__main__":
    sys.exit(main())

"""Train the minigrad GPT (or its LLaMA-style sibling) on a toy next-token task or your own text, then show what its
attention does:
`python train.py` (--help for the flags; `python train.py explain`, `python train.py sample`). This file is the
training loop, in the order nanoGPT's reads; gptlab/run.py is everything around it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

import minigrad as mg
from gptlab import run
from gptlab.tasks import Split
from minigrad import nn
from minigrad.optim import Optimizer, clip_grad_norm_, cosine_lr
from models import IGNORE_INDEX


def get_batch(data: Split, rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch of training examples as (inputs, targets)."""
    return batch_arrays(*data.train_batch(rng, batch_size))


def batch_arrays(tokens: np.ndarray, scored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model input (all tokens but the last) and targets (the next token where scored, else IGNORE_INDEX)."""
    return tokens[:, :-1], np.where(scored[:, 1:], tokens[:, 1:], IGNORE_INDEX)


def train_step(model: nn.Module, opt: Optimizer, x: np.ndarray, y: np.ndarray, grad_clip: float,
               micro_batch: int | None = None, n_scored: int | None = None,
               reduce_grads: Callable[[list[nn.Parameter]], None] | None = None) -> float:
    """One optimizer step on the sequences x (targets y): forward, loss, backward in passes of micro_batch rows
    (nanoGPT's gradient accumulation; default: one pass), then clip, update. Each pass's gradient is weighted by its
    share of the n_scored targets (default: those in y), so they add up to the gradient of the mean loss over all of
    them, the same as one pass. reduce_grads (data parallelism) sums the .grad of model.parameters() across processes,
    before the clip. Returns the mean loss (this process's part of it, with reduce_grads)."""
    micro_batch = len(x) if micro_batch is None else micro_batch
    n_scored = int((y != IGNORE_INDEX).sum()) if n_scored is None else n_scored
    opt.zero_grad()
    loss_sum = 0.0
    for i in range(0, len(x), micro_batch):  # a micro-step: one forward and backward pass
        xb, yb = x[i:i + micro_batch], y[i:i + micro_batch]
        share = int((yb != IGNORE_INDEX).sum()) / n_scored  # d(the step's mean loss) / d(this pass's mean loss)
        _, loss = model(xb, yb)  # forward: logits and the mean cross-entropy over the pass's scored targets
        loss.backward(share)  # every parameter's .grad, added to those of the passes before
        loss_sum += loss.item() * share
    if reduce_grads is not None:
        reduce_grads(model.parameters())
    clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss_sum


@mg.no_grad()
def evaluate(model: nn.Module, tokens: np.ndarray, scored: np.ndarray, batch_size: int = 256) -> tuple[float, float]:
    """Mean loss and accuracy over the scored targets of the examples, batch_size at a time."""
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


def estimate_loss(model: nn.Module, data: Split, rng: np.random.Generator, eval_iters: int,
                  batch_size: int) -> dict[str, tuple[float, float]]:
    """nanoGPT's estimate_loss: (loss, accuracy) over eval_iters batches of training examples and of held-out ones."""
    return {part: evaluate(model, *draw(rng, eval_iters * batch_size), batch_size)
            for part, draw in (("train", data.train_batch), ("val", data.heldout_batch))}


def train(r: run.Run) -> int:
    """The loop, from step r.step to r.settings["steps"], then the held-out report; returns the exit status."""
    model, opt, s = r.model, r.opt, r.settings
    step, loss, train_time, trained_tokens, train_loss, lr = r.step, math.nan, 0.0, 0, math.nan, math.nan
    min_lr = s["lr"] / 10 if s["min_lr"] is None else s["min_lr"]
    while step < s["steps"]:
        start = time.perf_counter()
        lr = cosine_lr(step, s["lr"], s["steps"], s["warmup"], min_lr)  # warmup, then cosine decay to min_lr
        for group in opt.param_groups:
            group["lr"] = lr
        # the step's sequences: grad_accum passes of batch_size (on one rank, or shared among the ranks)
        x, y = get_batch(r.data, r.data_rng, s["batch_size"] * s["grad_accum"])
        if r.world.size == 1:
            loss, stopping = train_step(model, opt, x, y, s["grad_clip"], s["batch_size"]), r.stop.requested
        else:  # data parallel: this rank's rows, the gradients and the loss combined across the ranks (gptlab/run.py)
            loss, stopping = r.data_parallel_step(train_step, x, y)
        step += 1
        seconds = time.perf_counter() - start
        train_time += seconds
        r.step_took(seconds)  # which may choose NumPy's BLAS threads by it
        trained_tokens += x.size
        r.bar.update(1)
        r.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{trained_tokens / train_time:,.0f}")
        if not math.isfinite(loss):
            raise r.diverged(f"the training loss is {loss} at step {step}")
        improved = False
        if r.world.rank == 0 and (step % s["eval_interval"] == 0 or step == s["steps"]):
            losses = estimate_loss(model, r.data, np.random.default_rng([s["seed"], step]), s["eval_iters"],
                                   s["batch_size"])  # the same batches on a resumed run
            (train_loss, _), (val_loss, val_acc) = losses["train"], losses["val"]
            r.bar.write(f"step {step:5d}  train loss {train_loss:.4f}  val loss {val_loss:.4f}  val acc {val_acc:.2%}")
            improved, r.best_val = val_loss < r.best_val, min(val_loss, r.best_val)
            if step < s["steps"] or stopping:  # the last step's row is the final one, below (nanoGPT: wandb.log)
                r.log(step, train_loss=train_loss, val_loss=val_loss, val_acc=val_acc, lr=lr,
                      tokens_per_s=trained_tokens / train_time)
        if (step % s["checkpoint_interval"] == 0 or step == s["steps"] or stopping) if s["always_save"] else improved:
            r.save(step)
        if stopping:  # every rank stops after the same step
            return r.stopped(step)
    r.bar.close()
    if r.world.rank == 0:
        val_loss, val_acc = evaluate(model, *r.data.heldout, s["batch_size"])  # all of the held-out examples
        tokens_per_s = trained_tokens / train_time if train_time else math.nan
        r.log(step, train_loss=train_loss, val_loss=val_loss, val_acc=val_acc, lr=lr, tokens_per_s=tokens_per_s)
        r.report(step, train_loss, val_loss, val_acc, tokens_per_s)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run.main(argv, train)


if __name__ == "__main__":
    sys.exit(main())

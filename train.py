"""Train the minigrad GPT on a toy next-token task, then show what its attention does.

    python train.py                      # the default: the `sentences` task, a few seconds on a CPU
    python train.py --task sort --steps 1500 --preset small
    python train.py --resume             # continue the run saved in --out (same total --steps)
    mpiexec -n 2 python train.py --dist mpi   # data-parallel: each process trains on half of each batch
    python train.py explain --prompt "我 吃 蘋果"   # the walkthrough's four steps on the trained model
    python train.py sample --prompt "我 吃 蘋果"    # continue a prompt with the trained model (sample.py)

The heart of this file is train_step(): forward, loss, backward, clip, optimizer step. train() runs it
in a loop with the learning-rate schedule, held-out evaluation, checkpoints and Ctrl-C. What explain.py
needs too (settings, building the model, the checkpoint file, one-line errors) is in checkpoint.py;
the tasks are in tasks.py, the model in models/, data parallelism in minigrad/distributed.py.
"""

from __future__ import annotations

import argparse
import fcntl
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from functools import partial
from typing import Any

import numpy as np
from tqdm import tqdm

import minigrad as mg
from checkpoint import (
    ARCHITECTURES,
    CHECKPOINT,
    DEFAULTS,
    DTYPES,
    HELDOUT_SEED,
    MODEL_KEYS,
    PRESETS,
    RunFailed,
    UsageError,
    build_model,
    build_task,
    check_device,
    check_settings,
    flag,
    load_checkpoint,
    model_config,
    resume_training,
    run_cli,
    save_checkpoint,
)
from explain import default_ids, explain_example, explain_main
from minigrad import backend, distributed, fast, nn
from minigrad.optim import AdamW, Optimizer, clip_grad_norm_, cosine_lr, decay_groups
from models import IGNORE_INDEX
from sample import sample_main
from tasks import TASKS, Task, split

LOCK = "train.lock"  # in --out, while a run writes there


# ---- the training step ----

def train_step(model: nn.Module, opt: Optimizer, x: np.ndarray, y: np.ndarray, grad_clip: float,
               reduce_grads: Callable[[list[nn.Parameter]], None] | None = None) -> float:
    """One optimizer step on a batch: forward, loss, backward, clip, update. Returns the loss.

    reduce_grads, for data-parallel training: a function given model.parameters() that combines their
    .grad across processes in place (an all-reduce, such as minigrad.distributed's), so that each holds
    the gradient of the whole batch. It runs between backward and the clip, so that every process clips
    and updates with the same gradients and the replicas stay identical.
    """
    _, loss = model(x, y)  # forward: logits and the mean cross-entropy over the scored targets
    opt.zero_grad()
    loss.backward()  # every parameter's .grad
    if reduce_grads is not None:
        reduce_grads(model.parameters())
    clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.item()


# ---- setting up a run ----

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Train the minigrad GPT (--arch llama: a LLaMA-style decoder) on a toy next-token task. Tasks: "
        + "; ".join(f"{k}: {v}" for k, v in TASKS.items()),
        epilog="Explain mode (the walkthrough's steps on a trained model): python train.py explain --help. "
               "Sample mode (continue a prompt): python train.py sample --help")
    g = p.add_argument_group("task")
    g.add_argument("--task", choices=list(TASKS), help=f"what to learn (default {DEFAULTS['task']})")
    g.add_argument("--data", metavar="FILE", help="UTF-8 text file for --task text")
    g = p.add_argument_group("model")
    g.add_argument("--arch", choices=list(ARCHITECTURES),
                   help=f"architecture (default {DEFAULTS['arch']}; llama: RMSNorm, rotary positions, SwiGLU)")
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
    g.add_argument("--grad-clip", type=float, help=f"largest gradient norm (default {DEFAULTS['grad_clip']})")
    g.add_argument("--seed", type=int, help="seeds the weights, the data and dropout")
    g.add_argument("--device", choices=list(backend.DEVICES), default="cpu")
    g.add_argument("--dtype", choices=DTYPES)
    g.add_argument("--eval-interval", type=int, help="steps between held-out evaluations")
    g.add_argument("--dist", choices=["mpi"], help="data-parallel over the processes of mpiexec, each on its "
                   "slice of every batch: mpiexec -n 2 python train.py --dist mpi (pip install -e '.[mpi]')")
    g = p.add_argument_group("output")
    g.add_argument("--out", default="out", help="folder for the checkpoint (default ./out)")
    g.add_argument("--resume", action="store_true", help=f"continue from --out/{CHECKPOINT} up to --steps")
    g.add_argument("--checkpoint-interval", type=int, help="steps between checkpoints")
    g.add_argument("--samples", type=int, default=3, help="held-out completions shown at the end")
    g.add_argument("--no-explain", action="store_true", help="skip the attention explanation at the end")
    return p


def resolve_settings(args: argparse.Namespace, saved: dict[str, Any] | None) -> dict[str, Any]:
    """DEFAULTS, then the checkpoint's settings when resuming, then the flags given; checked."""
    settings = dict(DEFAULTS if saved is None else saved)
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is None:
            continue
        if saved is not None and key in MODEL_KEYS and value != saved[key]:
            raise UsageError(f"{flag(key)} {value} differs from the checkpoint's {saved[key]}; "
                             "drop the flag to resume, or start a new run with another --out")
        settings[key] = value
    check_settings(settings)
    return settings


@contextmanager
def writing_into(out: str) -> Iterator[None]:
    """Create the folder --out and hold it: only one train.py writes into a folder at a time, so that two
    runs never interleave checkpoints.

    The lock is flock() on --out/train.lock, which holds the pid of the run. The kernel releases it when
    the process ends, however it ends, so the file that a killed run leaves behind never blocks.
    """
    try:
        os.makedirs(out, exist_ok=True)
        fd = os.open(os.path.join(out, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise UsageError(f"--out {out} cannot be created or written: {err.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise UsageError(f"--out {out} is in use by another train.py (pid {pid}); wait for it to end, "
                             "or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def check_memory(config: Any, settings: dict[str, Any], seq_len: int, device: str) -> None:
    """Refuse a model or batch that cannot fit, before allocating anything, and say what it would need.

    Training keeps every parameter four times (weights, gradients, AdamW's m and v) and, for the backward
    pass, about 20 (B, T, C) and 3 (B, nh, T, T) arrays per layer and 3 (B, T, vocab) for the loss: within
    about 10% of the peaks benchmarks/bench.py measures for its small, medium and seed-scale models. The
    parameter count is the GPT's; other decoders come close.
    """
    C, L, nh, V = config.n_embd, config.n_layer, config.n_head, config.vocab_size
    B, T = settings["batch_size"], seq_len
    params = (V + config.block_size) * C + L * (12 * C * C + 13 * C) + 2 * C
    activations = B * T * (L * (20 * C + 3 * nh * T) + 3 * V)
    need = np.dtype(settings["dtype"]).itemsize * (4 * params + activations)
    free = available_memory(device)
    if need > free:
        raise UsageError(f"this run needs about {need / 2**30:,.1f} GiB ({params:,} parameters, kept 4 times, and "
                         f"the activations of {B} x {T} tokens), more than the {free / 2**30:,.1f} GiB available on "
                         f"{device}: choose a smaller --preset, --n-embd, --n-layer, --block-size or --batch-size")


def available_memory(device: str) -> int:
    """Bytes this run may use: the GPU's free memory, or Linux's MemAvailable (elsewhere, all of the RAM)."""
    if device == "cuda":
        return backend.module_for("cuda").cuda.runtime.memGetInfo()[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def batch_arrays(tokens: np.ndarray, scored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model input (all tokens but the last) and targets (the next token where scored, else IGNORE_INDEX)."""
    return tokens[:, :-1], np.where(scored[:, 1:], tokens[:, 1:], IGNORE_INDEX)


# ---- evaluation ----

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


def show_samples(model: nn.Module, task: Task, tokens: np.ndarray, n: int) -> None:
    model.eval()
    for row in tokens[:n]:
        prompt, answer = task.split_prompt(row)
        completion = model.generate(np.array([prompt]), len(answer), temperature=0)[0, len(prompt):]
        mark = "ok" if list(completion) == answer else f"expected {task.decode(answer)!r}"
        print(f"  {task.decode(prompt)!r} -> {task.decode(completion)!r}  {mark}")
    model.train()


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


def all_finite(model: nn.Module) -> bool:
    return all(bool(backend.get_array_module(p.data).isfinite(p.data).all()) for p in model.parameters())


def train(args: argparse.Namespace) -> int:
    """python train.py, or one rank of `mpiexec -n N python train.py --dist mpi`.

    Rank 0 speaks for all: the other ranks print nothing, and leave to it the errors that every rank
    meets alike (the only errors they can meet before training: each reads the same flags and files).
    """
    world = join_world(args)
    if world.rank == 0:
        return train_rank(args, world)
    sys.stdout = open(os.devnull, "w")  # for as long as this process lives
    try:
        return train_rank(args, world)
    except (UsageError, RunFailed) as err:
        return 2 if isinstance(err, UsageError) else 1


def join_world(args: argparse.Namespace) -> distributed.World:
    """--dist mpi: the ranks of the mpiexec this process was started by (run alone, a world of one)."""
    if args.dist is None:
        return distributed.World()
    check_device(args.device)
    try:
        world = distributed.init(args.device)
    except RuntimeError as err:  # no mpi4py or no MPI library: what to install
        raise UsageError(f"--dist mpi: {err}") from None
    if world.ranks_on_node > 1:
        fast.share_cores(world.ranks_on_node)  # speed: each rank's BLAS gets its share of the cores, not all
    return world


def train_rank(args: argparse.Namespace, world: distributed.World) -> int:
    """Check every argument before any work, build (or resume) the run, train, report."""
    if args.samples < 0:
        raise UsageError(f"--samples must be 0 or more, got {args.samples}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out} is a file, not a folder")
    check_device(args.device)
    ckpt = load_checkpoint(args.out) if args.resume else None
    settings = resolve_settings(args, ckpt["settings"] if ckpt else None)
    task = build_task(settings)
    config = model_config(settings, task)
    check_memory(config, settings, task.seq_len - 1, args.device)
    if settings["batch_size"] % world.size:
        raise UsageError(f"--batch-size {settings['batch_size']} does not split evenly over {world.size} ranks; "
                         f"choose a multiple of {world.size}")

    # from here on the ranks talk to each other: one that fails must not leave the others waiting
    with world.failing_together(), writing_into(args.out) if world.rank == 0 else nullcontext():
        model = build_model(settings, config, args.device)
        opt = AdamW(decay_groups(model.named_parameters(), settings["weight_decay"]), lr=settings["lr"],
                    betas=(0.9, 0.95), fused=True)  # speed: AdamW.update's rule, in place on every core
        data_rng = np.random.default_rng(settings["seed"])
        step, path = 0, os.path.join(args.out, CHECKPOINT)
        if ckpt:
            step = resume_training(ckpt, task, model, opt, data_rng)
            print(f"resumed from {path} at step {step}" + (
                f"; --steps {settings['steps']} is already reached" if step >= settings["steps"] else ""))
        elif world.rank == 0 and os.path.exists(path):
            os.replace(path, path.replace(".npz", "-previous.npz"))
            print(f"note: the earlier {path} was kept as {CHECKPOINT.replace('.npz', '-previous.npz')}")
        world.broadcast([p.data for p in model.parameters()])  # every rank starts from rank 0's weights
        if world.rank:
            mg.manual_seed(settings["seed"] + world.rank)  # but draws dropout masks of its own
        return run_training(args, settings, task, model, opt, data_rng, step, world)


def run_training(args: argparse.Namespace, settings: dict[str, Any], task: Task, model: nn.Module, opt: Optimizer,
                 data_rng: np.random.Generator, step: int, world: distributed.World) -> int:
    """The loop around train_step, from `step` to settings["steps"], then the held-out report.

    With several ranks, every rank draws the whole batch from the same random stream, trains on its own
    slice of the rows, and the gradients are combined (sum_shares) before the update.
    """
    data = split(task, seed=HELDOUT_SEED)
    steps, path = settings["steps"], os.path.join(args.out, CHECKPOINT)
    per_rank = settings["batch_size"] // world.size
    rows = slice(world.rank * per_rank, (world.rank + 1) * per_rank)  # this rank's slice of every batch
    saved_step = step if args.resume else None  # the last good checkpoint on disk
    print(f"task {task.name}: {TASKS[task.name]}")
    print(f"model: {model.num_parameters():,} parameters, width {model.config.n_embd}, {model.config.n_head} heads, "
          f"{model.config.n_layer} layers; {steps} steps of {settings['batch_size']} sequences on {args.device}"
          + (f", {per_rank} on each of {world.size} ranks" if world.size > 1 else ""))
    stop = StopRequest()
    loss_value, train_time, trained_tokens = float("nan"), 0.0, 0
    bar = tqdm(total=steps, initial=step, disable=None if world.rank == 0 else True, unit="step",
               dynamic_ncols=True)
    # a diverging run overflows inside NumPy; the loop notices the non-finite loss itself and says so in one line
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            while step < steps:
                start = time.perf_counter()
                lr = cosine_lr(step, settings["lr"], steps, settings["warmup"], settings["lr"] / 10)
                for group in opt.param_groups:
                    group["lr"] = lr
                x, y = batch_arrays(*data.train_batch(data_rng, settings["batch_size"]))
                if world.size == 1:
                    loss_value = train_step(model, opt, x, y, settings["grad_clip"])
                    stopping = stop.requested
                else:  # this rank's rows; its gradients and loss, weighted by its share, summed over the ranks
                    share = scored_share(y, rows)
                    loss_value = train_step(model, opt, x[rows], y[rows], settings["grad_clip"],
                                            partial(sum_shares, world, share))
                    loss_value, stopping = agree(world, loss_value * share, stop.requested)
                step += 1
                train_time += time.perf_counter() - start
                trained_tokens += x.size
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.4f}", tok_s=f"{trained_tokens / train_time:,.0f}")
                if not math.isfinite(loss_value):
                    raise diverged(f"the training loss is {loss_value} at step {step}", settings, path, saved_step)
                if world.rank == 0 and (step % settings["eval_interval"] == 0 or step == steps):
                    val_loss, val_acc = evaluate(model, *data.heldout)
                    bar.write(f"step {step:5d}  train loss {loss_value:.4f}  val loss {val_loss:.4f}  "
                              f"val acc {val_acc:.2%}")
                if step % settings["checkpoint_interval"] == 0 or step == steps or stopping:
                    if not all_finite(model):  # a finite loss, but the update that followed overflowed
                        raise diverged(f"the weights are no longer finite after step {step}", settings, path,
                                       saved_step)
                    if world.rank == 0:  # the ranks' weights are equal: one writes them
                        save_checkpoint(path, model, opt, step, settings, task.vocab, data_rng)
                    saved_step = step
                if stopping:  # every rank stops after the same step
                    bar.close()
                    launch = f"mpiexec -n {world.size} " if world.size > 1 else ""
                    print(f"stopped at step {step}; checkpoint saved to {path}. Continue with: "
                          f"{launch}python train.py --resume --out {args.out}" + (" --dist mpi" if args.dist else ""))
                    return 130
        finally:
            bar.close()
            stop.restore()

    if world.rank != 0:
        return 0
    val_loss, val_acc = evaluate(model, *data.heldout)
    if args.samples:
        print("held-out completions (greedy):")
        show_samples(model, task, data.heldout[0], args.samples)
    if not args.no_explain:
        explain_example(model, task, default_ids(task))  # what `python train.py explain` shows first
    tokens_per_s = trained_tokens / train_time if train_time else float("nan")
    print(f"final: step={step} train_loss={loss_value:.4f} val_loss={val_loss:.4f} val_acc={val_acc:.4f} "
          f"tokens_per_s={tokens_per_s:.0f}")
    return 0


def scored_share(y: np.ndarray, rows: slice) -> float:
    """The part of the batch's scored targets (those not IGNORE_INDEX) that lie in `rows`."""
    return float((y[rows] != IGNORE_INDEX).sum() / (y != IGNORE_INDEX).sum())


def sum_shares(world: distributed.World, share: float, params: list[nn.Parameter]) -> None:
    """train_step's reduce_grads under --dist mpi. A rank's gradient is that of the mean loss over its own
    scored targets; weighted by its share of the batch's scored targets and summed over the ranks, it is
    the gradient of the mean over all of them: what one process computes on the whole batch."""
    grads = [p.grad for p in params]
    for g in grads:
        g *= share
    world.all_reduce(grads)


def agree(world: distributed.World, loss_share: float, stop_requested: bool) -> tuple[float, bool]:
    """The whole batch's loss (the ranks' weighted losses, summed) and whether any rank was asked to stop,
    in one small all-reduce: every rank then reports the same loss and stops after the same step."""
    sums = np.array([loss_share, float(stop_requested)])
    world.all_reduce([sums])
    return float(sums[0]), bool(sums[1])


def diverged(what: str, settings: dict[str, Any], path: str, saved_step: int | None) -> RunFailed:
    kept = (f"the last good checkpoint, step {saved_step}, is kept in {path}" if saved_step is not None
            else "no checkpoint was written")
    return RunFailed(f"{what}: training diverged (is --lr {settings['lr']:g} too high?); stopped, and {kept}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["explain"]:
        return run_cli(lambda a: explain_main(a, prog="train.py explain"), argv[1:], "train.py explain")
    if argv[:1] == ["sample"]:
        return run_cli(lambda a: sample_main(a, prog="train.py sample"), argv[1:], "train.py sample")
    return run_cli(lambda a: train(build_parser().parse_args(a)), argv, "train.py")


if __name__ == "__main__":
    fast.keep_large_blocks_in_heap()  # speed: big freed blocks are reused in a whole run (docs/performance.md)
    fast.enable()  # speed: fused passes of GELU, softmax and layer norm, the same formulas (minigrad/fast.py)
    sys.exit(main())

"""Everything around train.py's loop for one run: the flags and their checks, resume, the --out folder lock,
Ctrl-C, the ranks of mpiexec, the memory estimate, the metrics log, the report at the end, and the explain / sample /
plot commands (`python train.py explain`, `python train.py sample`, `python train.py plot`). train.py calls
main(argv, loop).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from minigrad.utils.tensorboard import SummaryWriter
from tqdm import tqdm

import minigrad as mg
from gptlab.checkpoint import checkpoint_config, load_checkpoint, restore_task, resume_training, save_checkpoint
from gptlab.explain import default_ids, explain_example, explain_main
from gptlab.metrics import TAGS, MetricsLog, plot_main
from gptlab.sample import sample_main
from gptlab.settings import (
    ARCHITECTURES,
    CHECKPOINT,
    DEFAULTS,
    DTYPES,
    FOLDER_KEYS,
    GELUS,
    HELDOUT_SEED,
    LOCK,
    METRICS,
    MODEL_KEYS,
    PRESETS,
    TOKENIZERS,
    FlagParser,
    RunFailed,
    UsageError,
    as_saved,
    build_model,
    build_task,
    check_block_size,
    check_device,
    check_settings,
    check_writes,
    dated_name,
    flag,
    folder_files,
    initial_model,
    model_config,
    pretrained_task,
    run_cli,
    silence,
)
from gptlab.tasks import TASKS, TEXT_CONTEXT, Split, Task, TextTask, split
from gptlab.tokenizer import BPE_VOCAB_SIZE
from minigrad import distributed, nn
from minigrad.array import backend, blas_threads, runtime
from minigrad.optim import AdamW, Optimizer, decay_groups
from minigrad.tensor import increment_version
from models import IGNORE_INDEX

try:
    import fcntl  # the --out lock; POSIX only
except ImportError:
    fcntl = None


def main(argv: Sequence[str] | None, loop: Callable[[Run], int]) -> int:
    """python train.py [explain | sample | plot] ...: the subcommands, or a training run whose loop is `loop`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["explain"]:
        return run_cli(explain_main, argv[1:], "train.py explain")
    if argv[:1] == ["sample"]:
        return run_cli(lambda a: sample_main(a, prog="train.py sample"), argv[1:], "train.py sample")
    if argv[:1] == ["plot"]:
        return run_cli(plot_main, argv[1:], "train.py plot")
    return run_cli(lambda a: train(build_parser().parse_args(a), loop), argv, "train.py")


# ---- the flags ----

def build_parser() -> argparse.ArgumentParser:
    p = FlagParser(
        prog="train.py",
        description="Train the minigrad GPT (--arch llama: a LLaMA-style decoder) on a toy next-token task, or on "
        "your own text. Tasks: " + "; ".join(f"{k}: {v}" for k, v in TASKS.items()) + ". In [brackets]: nanoGPT's "
        "name for a setting (docs/train-on-your-text.md).",
        epilog="Explain mode (the walkthrough's steps on a trained model): python train.py explain --help. "
               "Sample mode (continue a prompt): python train.py sample --help. "
               f"Curves of {METRICS}: python train.py plot --help")
    g = p.add_argument_group("task")
    g.add_argument("--task", choices=list(TASKS), help=f"what to learn (default {DEFAULTS['task']})")
    g.add_argument("--data", metavar="FILE", help="UTF-8 text file for --task text; the last 10%% is held out")
    g.add_argument("--tokenizer", choices=TOKENIZERS, help="text as tokens: char, one per character (default; "
                   "shakespeare_char), or bpe, byte-level BPE learnt from the training text (pip install -e '.[text]')")
    g.add_argument("--vocab-size", type=int, help=f"tokens of --tokenizer bpe, at least 256 (default {BPE_VOCAB_SIZE})")
    g = p.add_argument_group("model")
    g.add_argument("--arch", choices=list(ARCHITECTURES),
                   help=f"architecture (default {DEFAULTS['arch']}; llama: RMSNorm, rotary positions, SwiGLU)")
    g.add_argument("--preset", choices=list(PRESETS), help="model size (default tiny: " + ", ".join(
        f"{k} {v['n_embd']}/{v['n_head']}/{v['n_layer']}" for k, v in PRESETS.items()) + " width/heads/layers)")
    g.add_argument("--n-embd", type=int, help="width, C channels; overrides the preset [n_embd]")
    g.add_argument("--n-head", type=int, help="attention heads; must divide the width [n_head]")
    g.add_argument("--n-layer", type=int, help="decoder blocks [n_layer]")
    g.add_argument("--block-size", type=int, help=f"context: tokens the model reads (default: the length of the "
                   f"task's sequences, which only --task text lets you choose: {TEXT_CONTEXT} there) [block_size]")
    g.add_argument("--bias", action=argparse.BooleanOptionalAction, help="biases in Linear and LayerNorm layers "
                   "(--arch gpt; default on, as GPT-2; nanoGPT's default is --no-bias) [bias]")
    g.add_argument("--gelu", choices=list(GELUS), help="the MLP's GELU (--arch gpt): tanh, GPT-2's approximation "
                   "(default), or exact, with erf, nanoGPT's nn.GELU()")
    g.add_argument("--dropout", type=float, help="[dropout]")
    g.add_argument("--init-from", metavar="DIR", help="fine-tune a Hugging Face GPT-2 or LLaMA folder (config.json, "
                   "model.safetensors, tokenizer.json) on --task text: its weights, sizes and tokenizer, so no --arch, "
                   "--preset, sizes or --tokenizer (docs/gpt2.md) [init_from='gpt2']")
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int, help=f"total optimizer steps (default {DEFAULTS['steps']}) [max_iters, "
                   "lr_decay_iters]")
    g.add_argument("--batch-size", type=int, help=f"sequences per forward pass (default {DEFAULTS['batch_size']}) "
                   "[batch_size]")
    g.add_argument("--grad-accum", type=int, help="forward passes per optimizer step, their gradients added up: a "
                   "step learns from batch size x grad accum sequences (default 1); with --dist mpi the ranks share "
                   "them [gradient_accumulation_steps]")
    g.add_argument("--lr", type=float, help=f"peak learning rate (default {DEFAULTS['lr']}) [learning_rate]")
    g.add_argument("--min-lr", type=float, help="where the cosine decay ends (default lr/10) [min_lr]")
    g.add_argument("--warmup", type=int, help=f"linear warmup steps (default {DEFAULTS['warmup']}) [warmup_iters]")
    g.add_argument("--weight-decay", type=float, help=f"AdamW's, on the matrices (default {DEFAULTS['weight_decay']}) "
                   "[weight_decay]")
    g.add_argument("--beta2", type=float, help=f"AdamW's second-moment decay (default {DEFAULTS['beta2']}; beta1 is "
                   "0.9) [beta2]")
    g.add_argument("--grad-clip", type=float, help=f"largest gradient norm (default {DEFAULTS['grad_clip']}) "
                   "[grad_clip]")
    g.add_argument("--seed", type=int, help="seeds the weights, the data and dropout")
    g.add_argument("--device", choices=list(backend.DEVICES), default="cpu")
    g.add_argument("--dtype", choices=DTYPES)
    g.add_argument("--fused", action="store_true", help="speed: attention as one node (mg.fused) and "
                   "AdamW(fused=True), the same formulas (docs/performance.md)")
    g.add_argument("--compiled", action="store_true", help="speed: --fused, and the compiled kernels of GELU, "
                   "layer norm and AdamW (mg.compiled; pip install -e '.[compiled]', Numba), on the CPU")
    g.add_argument("--blas-threads", type=int, metavar="N", help="NumPy's BLAS on N threads (default: chosen by "
                   "timing the first steps at 1 and at the BLAS's own count, tried again now and then; "
                   "OMP_NUM_THREADS, OPENBLAS_NUM_THREADS or MKL_NUM_THREADS set also fix it; docs/performance.md)")
    g.add_argument("--eval-interval", type=int, help=f"steps between loss estimates (default "
                   f"{DEFAULTS['eval_interval']}) [eval_interval]")
    g.add_argument("--eval-iters", type=int, help=f"batches per estimate, of the training and of the held-out "
                   f"examples (default {DEFAULTS['eval_iters']}) [eval_iters]")
    g.add_argument("--dist", choices=["mpi"], help="data-parallel over the processes of mpiexec, each on its "
                   "share of every step: mpiexec -n 2 python train.py --dist mpi (pip install -e '.[mpi]')")
    g = p.add_argument_group("output")
    g.add_argument("--out", default="out", help=f"folder for the checkpoint and the metrics log, {METRICS} (default "
                   "./out) [out_dir]")
    g.add_argument("--tensorboard", action="store_true", help="also write the metrics as TensorBoard event files in "
                   "--out: tensorboard --logdir out (pip install -e '.[tensorboard]') [wandb_log]")
    g.add_argument("--resume", action="store_true", help=f"continue from --out/{CHECKPOINT} up to --steps "
                   "[init_from='resume']")
    g.add_argument("--always-save", dest="always_save", action="store_const", const=True, help="a checkpoint every "
                   "--checkpoint-interval steps, at the end and on Ctrl-C: the run as it is (default) "
                   "[always_save_checkpoint=True]")
    g.add_argument("--keep-best", dest="always_save", action="store_const", const=False, help="a checkpoint only "
                   "when the held-out estimate beats the best so far, as nanoGPT's shakespeare_char recipe "
                   "[always_save_checkpoint=False]")
    g.add_argument("--checkpoint-interval", type=int, help="steps between checkpoints (with --always-save)")
    g.add_argument("--samples", type=int, default=3, help="held-out completions shown at the end")
    g.add_argument("--no-explain", action="store_true", help="skip the attention explanation at the end")
    return p


def resolve_settings(args: argparse.Namespace, saved: dict[str, Any] | None) -> dict[str, Any]:
    """DEFAULTS, then the checkpoint's settings when resuming, then the flags given; checked. A flag of what an
    --init-from folder fixes is refused."""
    folder = args.init_from if saved is None or saved["init_from"] is None else saved["init_from"]
    fixed = [key for key in FOLDER_KEYS if getattr(args, key, None) is not None]
    if folder is not None and fixed:
        given = "--bias / --no-bias" if fixed[0] == "bias" else flag(fixed[0])
        raise UsageError(f"{given} cannot be given with --init-from {folder}: the folder's config.json and "
                         "tokenizer.json fix the model and its tokenizer; drop it")
    settings = dict(DEFAULTS if saved is None else saved)
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is None:
            continue
        if saved is not None and key in MODEL_KEYS:
            value_then, shown = as_saved(saved, key)
            if value != value_then:
                raise UsageError(f"{flag(key)} {value} differs from the checkpoint's {shown}; drop the flag to "
                                 "resume, or start a new run with another --out")
            continue  # the same as the checkpoint's (a preset's width given as --n-embd): kept as it was saved
        settings[key] = value
    check_settings(settings)
    return settings


# ---- a run: what the loop works with ----

@dataclass
class Run:
    """What train.py's loop reads: the settings, the model and its optimizer, the data and its random stream,
    the step to start from, this process's rank, the Ctrl-C flag and the progress bar."""

    args: argparse.Namespace
    settings: dict[str, Any]
    task: Task
    data: Split
    model: nn.Module
    opt: Optimizer
    data_rng: np.random.Generator
    step: int
    world: distributed.World
    stop: StopRequest
    bar: Any
    path: str
    saved_step: int | None = None  # the last good checkpoint of this run on disk
    earlier: bool = False  # an earlier run's checkpoint is at `path`, until this run's first one is saved
    rows: slice = field(default_factory=lambda: slice(None))  # this rank's share of every step's sequences
    best_val: float = math.inf  # the lowest held-out estimate so far: --keep-best saves when it falls
    metrics: MetricsLog | None = None  # --out/metrics.csv, rank 0's
    tensorboard: SummaryWriter | None = None  # --tensorboard, rank 0's
    blas: blas_threads.BlasThreads | None = None  # NumPy's BLAS threads, chosen by timing the steps (on the CPU)

    def step_took(self, seconds: float) -> None:
        """A training step's time, for the choice of the BLAS's threads (said once, when first made, on stderr as
        mg.compiled()'s choices are: a note on how it runs, not on what it learns)."""
        said = self.blas.after_step(seconds) if self.blas is not None else None
        if said:
            self.bar.write(said, file=sys.stderr)

    def log(self, step: int, **values: float) -> None:
        """One row of the metrics log (COLUMNS of gptlab/metrics.py), and with --tensorboard the same scalars."""
        row = self.metrics.write(step, **values)
        if self.tensorboard is not None:
            for key, tag in TAGS.items():
                self.tensorboard.add_scalar(tag, row[key], step)
            self.tensorboard.flush()

    def data_parallel_step(self, train_step: Callable[..., float], x: np.ndarray, y: np.ndarray) -> tuple[float, bool]:
        """train_step on this rank's rows of the step's sequences, in passes of --batch-size, weighted as one process
        weighs them and summed over the ranks; the whole step's loss, and whether any rank was asked to stop, agreed
        in one small all-reduce."""
        loss = train_step(self.model, self.opt, x[self.rows], y[self.rows], self.settings["grad_clip"],
                          self.settings["batch_size"], int((y != IGNORE_INDEX).sum()),
                          self.sum_grads)
        sums = np.array([loss, float(self.stop.requested)])
        self.world.all_reduce([sums])
        return float(sums[0]), bool(sums[1])

    def sum_grads(self, params: list[nn.Parameter]) -> None:
        """Each parameter's .grad summed over the ranks, in place: a write into .grad, counted in its version."""
        self.world.all_reduce([p.grad.array for p in params])
        for p in params:
            increment_version(p.grad)

    def save(self, step: int) -> None:
        """The checkpoint of `step`, written by rank 0 (the ranks' weights are equal), after checking the weights."""
        params = list(self.model.parameters())
        xp = backend.get_array_module(params[0].array)
        if not bool(xp.stack([xp.isfinite(p.array).all() for p in params]).all()):  # one read-back, not one per weight
            raise self.diverged(f"the weights are no longer finite after step {step}")  # an overflowed update
        if self.world.rank == 0:
            def write() -> None:
                save_checkpoint(self.path, self.model, self.opt, step, self.settings, self.task, self.data_rng,
                                None if math.isinf(self.best_val) else self.best_val)
            try:
                if self.earlier:  # this run's first checkpoint: the earlier one goes aside as it is replaced
                    kept = keep_earlier(self.path, write)
                    self.earlier = False
                    self.bar.write(f"note: the earlier {self.path} was kept as {kept} (docs/checkpoints.md)")
                else:
                    write()
            except RunFailed as err:  # a full disk: say what is left
                raise RunFailed(f"{err}; {self.kept()}") from None
            self.metrics.begin()  # the log goes with the checkpoint: a fresh run's first one puts the earlier aside
        self.saved_step = step

    def kept(self) -> str:
        """Where the last good checkpoint is, for a run that stops early."""
        if self.saved_step is not None:
            return f"the last good checkpoint, step {self.saved_step}, is kept in {self.path}"
        if self.earlier:
            return f"no checkpoint of this run was written, and {self.path} still holds the earlier run's"
        return "no checkpoint was written"

    def diverged(self, what: str) -> RunFailed:
        return RunFailed(f"{what}: training diverged (is --lr {self.settings['lr']:g} too high?); stopped, and "
                         f"{self.kept()}")

    def stopped(self, step: int) -> int:
        """After Ctrl-C: say how to continue; exit status 130."""
        self.bar.close()
        launch = f"mpiexec -n {self.world.size} " if self.world.size > 1 else ""
        again = f"{launch}python train.py --resume --out {self.args.out}" + (" --dist mpi" if self.args.dist else "")
        if self.saved_step == step:
            print(f"stopped at step {step}; checkpoint saved to {self.path}. Continue with: {again}")
        elif self.saved_step is not None:  # --keep-best: the file holds the best step, not this one
            print(f"stopped at step {step}; {self.path} holds step {self.saved_step}, the best held-out estimate "
                  f"(--keep-best). Continue from there with: {again}")
        else:
            print(f"stopped at step {step}; no checkpoint yet (--keep-best saves at an estimate that improves)")
        return 130

    def report(self, step: int, train_loss: float, val_loss: float, val_acc: float, tokens_per_s: float) -> None:
        """The end of a run: held-out completions, the attention explanation, and the final line."""
        if self.args.samples:
            print("held-out completions (greedy):")
            show_samples(self.model, self.task, self.data.heldout[0], self.args.samples)
        if not self.args.no_explain:
            explain_example(self.model, self.task, default_ids(self.task))  # what `python train.py explain` shows
        if not self.settings["always_save"]:
            print(f"checkpoint: step {self.saved_step}'s, the best held-out estimate ({self.best_val:.4f}), in "
                  f"{self.path}" if self.saved_step is not None else "checkpoint: none written (--keep-best)")
        print(f"final: step={step} train_loss={train_loss:.4f} val_loss={val_loss:.4f} val_acc={val_acc:.4f} "
              f"tokens_per_s={tokens_per_s:.0f}")


def show_samples(model: nn.Module, task: Task, tokens: np.ndarray, n: int) -> None:
    model.eval()
    for row in tokens[:n]:
        prompt, answer = task.split_prompt(row)
        completion = model.generate(np.array([prompt]), len(answer), temperature=0)[0, len(prompt):]
        mark = "ok" if list(completion) == answer else f"expected {task.decode(answer)!r}"
        print(f"  {task.decode(prompt)!r} -> {task.decode(completion)!r}  {mark}")
    model.train()


# ---- setting a run up ----

class ReportedByRankZero(Exception):
    """A failure of the argument checks that rank 0 reports for every rank (see agree): the others exit quietly."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def train(args: argparse.Namespace, loop: Callable[[Run], int]) -> int:
    """python train.py, or one rank of `mpiexec -n N python train.py --dist mpi`. Rank 0 speaks for all: the other
    ranks print nothing but an error of their own once training has begun, named by rank, before the job ends."""
    runtime.keep_large_blocks_in_heap()  # a process-wide allocator setting: no code path (docs/performance.md)
    world = join_world(args)
    if world.rank == 0:
        return train_rank(args, world, loop)
    sys.stdout = open(os.devnull, "w")  # for as long as this process lives
    try:
        return train_rank(args, world, loop)
    except ReportedByRankZero as failed:
        return failed.code
    except (UsageError, RunFailed) as err:  # its own, which rank 0 may never hear of: said here, then the job ends
        print(f"train.py: error: rank {world.rank}: {err}", file=sys.stderr, flush=True)
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
        runtime.share_cores(world.ranks_on_node)  # each rank's BLAS gets its share of the cores, not all of them
    return world


def check_run(args: argparse.Namespace, world: distributed.World) -> tuple[Any, dict[str, Any], Task, Any]:
    """Every argument checked, on each rank, before any work: the checkpoint to resume (or None), the settings,
    the task and the model's config."""
    if args.samples < 0:
        raise UsageError(f"--samples must be 0 or more, got {args.samples}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out} is a file, not a folder")
    check_device(args.device)
    if args.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise UsageError("--tensorboard needs the tensorboard package: pip install -e '.[tensorboard]' (without it, "
                         f"the run's metrics are in --out/{METRICS})")
    if args.blas_threads is not None and args.blas_threads < 1:
        raise UsageError(f"--blas-threads must be 1 or more, got {args.blas_threads}")
    if args.blas_threads is not None and (args.compiled or args.device != "cpu" or args.dist):
        raise UsageError(f"--blas-threads {args.blas_threads} is for NumPy's BLAS on the CPU in one process: "
                         "--compiled runs it on one thread beside its kernels, --device cuda does not use it, and "
                         "--dist shares the cores among the ranks; drop one of them")
    if args.compiled:
        if args.device != "cpu":
            raise UsageError(f"--compiled: the compiled kernels run on the CPU; on --device {args.device} it would "
                             "change nothing (drop it, or use --fused)")
        try:
            mg.compiled()
        except ImportError as err:  # no Numba: what to install
            raise UsageError(f"--compiled: {err}") from None
    ckpt = load_checkpoint(args.out) if args.resume else None
    settings = resolve_settings(args, ckpt["settings"] if ckpt else None)
    if ckpt and settings["steps"] < ckpt["step"]:
        raise UsageError(f"--steps {settings['steps']} is fewer than the checkpoint's {ckpt['step']} steps: --steps "
                         f"counts every step of the run, those before --resume too; to train {settings['steps']} "
                         f"more, give --steps {ckpt['step'] + settings['steps']}")
    n_params = None  # the real count where it is known before building: a checkpoint's weights, a folder's tensors
    if ckpt:  # the checkpoint's tokenizer and model config: an --init-from folder is not needed again
        task = restore_task(ckpt, settings)
        config = checkpoint_config(ckpt, settings, task)
        n_params = sum(int(np.size(value)) for value in ckpt["model"].values())
    elif settings["init_from"] is not None:
        task, config, n_params = pretrained_task(settings)
    else:
        task = build_task(settings)
        check_block_size(settings, task)
        config = model_config(settings, task)
    reads = {settings["data"]: "--data, the text the run reads"} if settings["data"] is not None else {}
    if settings["init_from"] is not None and not ckpt:
        reads.update(folder_files(settings["init_from"]))
    check_writes({"the checkpoint": os.path.join(args.out, CHECKPOINT),
                  "the metrics log": os.path.join(args.out, METRICS)}, reads, remedy="choose another --out")
    check_memory(config, settings, task.seq_len - 1, args.device, n_params)
    per_step = settings["batch_size"] * settings["grad_accum"]  # sequences per optimizer step
    if per_step % world.size:
        raise UsageError(f"--batch-size {settings['batch_size']} x --grad-accum {settings['grad_accum']} = {per_step} "
                         f"sequences per step do not split evenly over {world.size} ranks; make --grad-accum (as "
                         f"nanoGPT asks) or --batch-size a multiple of {world.size}")
    return ckpt, settings, task, config


def agree(world: distributed.World, failure: Exception | None) -> None:
    """Every rank learns, in one small all-gather, whether any rank failed its checks (a memory check, a file only
    one of them cannot read), and all stop alike: rank 0 raises its own failure or the first failing rank's, named,
    which run_cli reports once; the other ranks exit quietly (an unforeseen error shows its traceback)."""
    said = str(failure) if isinstance(failure, (UsageError, RunFailed)) else f"{type(failure).__name__}: {failure}"
    failures = world.all_gather(None if failure is None else (isinstance(failure, UsageError), said))
    first = next((rank for rank, f in enumerate(failures) if f is not None), None)
    if first is None:
        return
    if failure is not None and (world.rank == 0 or not isinstance(failure, (UsageError, RunFailed))):
        raise failure  # rank 0 reports its own; on another rank an unforeseen error shows its traceback
    if world.rank == 0:
        usage, message = failures[first]
        raise (UsageError if usage else RunFailed)(f"rank {first}: {message}")
    raise ReportedByRankZero(2 if failures[first][0] else 1)


def train_rank(args: argparse.Namespace, world: distributed.World, loop: Callable[[Run], int]) -> int:
    """Check every argument before any work (all ranks agreeing), build (or resume) the run, and hand it to the loop."""
    try:
        ckpt, settings, task, config = check_run(args, world)
        failure = None
    except Exception as err:  # whatever it is, every rank must hear of it before any waits for another
        failure = err
    agree(world, failure)

    # from here on the ranks talk to each other: one that fails must not leave the others waiting
    with world.failing_together(), writing_into(args.out) if world.rank == 0 else nullcontext():
        model = build_model(settings, config, args.device) if ckpt else initial_model(settings, config, args.device)
        opt = AdamW(decay_groups(model.named_parameters(), settings["weight_decay"]), lr=settings["lr"],
                    betas=(0.9, settings["beta2"]), fused=args.fused or args.compiled)
        data_rng = np.random.default_rng(settings["seed"])
        step, path = 0, os.path.join(args.out, CHECKPOINT)
        if ckpt:
            step = resume_training(ckpt, model, opt, data_rng)
            if step == settings["steps"]:  # the same on every rank
                print(f"resumed from {path} at step {step}: --steps {step} is already reached, nothing to train; a "
                      "larger --steps trains on")
                return 0
            print(f"resumed from {path} at step {step}")
        world.broadcast([p.array for p in model.parameters()])  # every rank starts from rank 0's weights
        if world.rank:
            mg.manual_seed(settings["seed"] + world.rank)  # but draws dropout masks of its own
        per_step = settings["batch_size"] * settings["grad_accum"]  # sequences per optimizer step, split evenly
        per_rank = per_step // world.size
        print(f"task {task.name}: {TASKS[task.name]}" + (
            f"; {task.tokenizer.kind} tokenizer, {len(task.vocab)} tokens; context {task.seq_len - 1} tokens"
            if isinstance(task, TextTask) else ""))
        c, accum = model.config, settings["grad_accum"]
        stop = StopRequest()  # before the line that tells a watcher training has begun: a SIGTERM after it is caught
        print(f"model: {model.num_parameters():,} parameters, width {c.n_embd}, {c.n_head} heads, "
              f"{c.n_layer} layers" + (f", from {settings['init_from']}" if settings["init_from"] else "")
              + f"; {settings['steps']} steps of {per_step} sequences"
              + (f" ({accum} passes of {settings['batch_size']})" if accum > 1 else "") + f" on {args.device}"
              + (f", {per_rank} on each of {world.size} ranks" if world.size > 1 else ""))
        bar = tqdm(total=settings["steps"], initial=step, disable=None if world.rank == 0 else True, unit="step",
                   dynamic_ncols=True)
        resumed = step if ckpt else None
        metrics = MetricsLog(args.out, resumed) if world.rank == 0 else None
        # TensorBoard hides what an earlier run wrote after the checkpoint's step, as the log drops it
        board = SummaryWriter(args.out, purge_step=None if resumed is None else resumed + 1) \
            if args.tensorboard and world.rank == 0 else None
        run = Run(args, settings, task, split(task, seed=HELDOUT_SEED), model, opt, data_rng, step, world, stop, bar,
                  path, saved_step=step if args.resume else None,
                  earlier=world.rank == 0 and not args.resume and os.path.exists(path),
                  rows=slice(world.rank * per_rank, (world.rank + 1) * per_rank),
                  best_val=math.inf if ckpt is None or ckpt["best_val"] is None else ckpt["best_val"],
                  metrics=metrics, tensorboard=board)
        # NumPy's BLAS threads: fixed by --blas-threads, or chosen by timing the steps where nothing else sets them
        # (mg.compiled() sets the BLAS aside itself, the ranks of --dist share the cores, a GPU has no use for them)
        own_threads = args.device == "cpu" and not args.compiled and world.size == 1
        run.blas, fixed, said = blas_threads.for_training(args.blas_threads) if own_threads else (None, None, None)
        if said:
            print(said, file=sys.stderr)
        # a diverging run overflows inside NumPy; the loop notices the non-finite loss itself and says so in one line
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"), mg.fused(args.fused or args.compiled), \
                    mg.compiled(args.compiled):
                return loop(run)
        except BrokenPipeError:  # `python train.py | head`: the reader has gone; the run stops, and says where it is
            silence(sys.stdout)
            raise RunFailed(f"the output was closed by its reader (a pipe such as `| head`), so the run stopped; "
                            f"{run.kept()}") from None
        finally:
            bar.close()
            stop.restore()
            if run.blas is not None:
                run.blas.close()
            if fixed is not None:
                fixed.restore_original_limits()
            for file in (metrics, board):
                if file is not None:
                    file.close()


def keep_earlier(path: str, write: Callable[[], None]) -> str:
    """A fresh run's first checkpoint written to `path` by write(), the earlier run's checkpoint there kept under a
    name dated by when it was written (ckpt-2025-01-31-142501.npz; -2, -3, ... for two written in one second), never
    over another file: a fresh run destroys no checkpoint. At every moment `path` holds a whole checkpoint, the
    earlier one until write() replaces it (mg.save is atomic), so a run that dies leaves one where sample and --resume
    look; if write() fails, the dated name is removed again. Returns that name (no folder). Safe from other runs
    under the lock."""
    kept = dated_name(path)
    try:
        os.link(path, kept)  # a second name of the same file: nothing copied, nothing moved yet
    except OSError:  # a file system without hard links
        shutil.copy2(path, kept)
    try:
        write()
    except BaseException:
        os.unlink(kept)  # `path` still holds it
        raise
    return os.path.basename(kept)


@contextmanager
def writing_into(out: str) -> Iterator[None]:
    """Create the folder --out and hold it, so that two runs never interleave checkpoints there: flock() on
    --out/train.lock, which holds the pid of the run. The kernel releases it when the process ends, however it
    ends, so a killed run's file never blocks. Where there is no fcntl (Windows), it says so and does without."""
    try:
        os.makedirs(out, exist_ok=True)
        fd = os.open(os.path.join(out, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise UsageError(f"--out {out} cannot be created or written: {err.strerror}") from None
    try:
        if fcntl is None:
            print(f"note: no folder lock on this system (no fcntl): make sure no other train.py writes into {out}")
        else:
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


def check_memory(config: Any, settings: dict[str, Any], seq_len: int, device: str, params: int | None = None) -> None:
    """Refuse a model or batch that cannot fit, before allocating anything: every parameter kept four times (weights,
    gradients, AdamW's m and v), and about 20 (B, T, C) and 3 (B, nh, T, T) arrays per layer and 3 (B, T, vocab) for
    backward, within about 10% of the peaks benchmarks/bench.py measures. params: the real count, where known; else
    the GPT's, from the config."""
    C, L, nh, V = config.n_embd, config.n_layer, config.n_head, config.vocab_size
    B, T = settings["batch_size"], seq_len
    if params is None:
        params = (V + config.block_size) * C + L * (12 * C * C + 13 * C) + 2 * C
    activations = B * T * (L * (20 * C + 3 * nh * T) + 3 * V)
    need = np.dtype(settings["dtype"]).itemsize * (4 * params + activations)
    free = runtime.available_memory(device)
    if need > free:
        smaller = ("--block-size or --batch-size, or a smaller model" if settings["init_from"]
                   else "--preset, --n-embd, --n-layer, --block-size or --batch-size")
        raise UsageError(f"this run needs about {need / 2**30:,.1f} GiB ({params:,} parameters, kept 4 times, and "
                         f"the activations of {B} x {T} tokens), more than the {free / 2**30:,.1f} GiB available on "
                         f"{device}: choose a smaller {smaller}")

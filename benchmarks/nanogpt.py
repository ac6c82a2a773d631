"""nanoGPT's CPU recipe (shakespeare_char: block 64, batch 12, 4 layers, 4 heads, width 128, 2000 steps) on a text you
bring, trained by train.py and by a faithful PyTorch re-implementation of nanoGPT's train.py on the same split, each
seed in fresh processes side by side: the loss on the whole held-out part and the time per step of each.
`python -m benchmarks.nanogpt --data shakespeare.txt` (docs/train-on-your-text.md says what it compares).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench import step_flops, write_atomically
from gptlab.tasks import make_task, split
from minigrad.array import blas_threads, machine
from models import IGNORE_INDEX
from train import batch_arrays, get_batch

ROOT = Path(__file__).resolve().parents[1]
USAGE = """\
    python -m benchmarks.nanogpt --data shakespeare.txt                       # 2000 steps x seeds 1337 1338 1339
    python -m benchmarks.nanogpt --data shakespeare.txt --steps 20 --seeds 1337   # a quick check that both run

Per seed: one fresh process runs train.py with the recipe, then one runs the PyTorch re-implementation (--worker
torch); then the next seed, the order of the two alternating."""

RECIPE = {  # nanoGPT's README, "I only have a macbook": config/train_shakespeare_char.py with these overrides
    "block_size": 64, "batch_size": 12, "n_layer": 4, "n_head": 4, "n_embd": 128, "dropout": 0.0, "bias": False,
    "learning_rate": 1e-3, "min_lr": 1e-4, "warmup_iters": 100, "beta2": 0.99, "weight_decay": 0.1, "grad_clip": 1.0,
    "eval_interval": 250, "eval_iters": 20,
}


SPEEDS = {"plain": [], "fused": ["--fused"], "compiled": ["--compiled"]}  # train.py's speed flags, --speed NAME


def train_py_argv(data: str, steps: int, seed: int, out: str, speed: str = "plain") -> list[str]:
    """The recipe as one train.py command (docs/train-on-your-text.md shows it), with the flags of `speed`."""
    r = RECIPE
    return ["--task", "text", "--data", data, "--n-embd", str(r["n_embd"]), "--n-head", str(r["n_head"]),
            "--n-layer", str(r["n_layer"]), "--block-size", str(r["block_size"]), "--batch-size", str(r["batch_size"]),
            "--steps", str(steps), "--lr", str(r["learning_rate"]), "--min-lr", str(r["min_lr"]),
            "--warmup", str(r["warmup_iters"]), "--beta2", str(r["beta2"]), "--weight-decay", str(r["weight_decay"]),
            "--grad-clip", str(r["grad_clip"]), "--dropout", str(r["dropout"]), "--no-bias", "--gelu", "exact",
            "--eval-interval", str(r["eval_interval"]), "--eval-iters", str(r["eval_iters"]), "--keep-best",
            "--seed", str(seed), "--out", out, "--samples", "0", "--no-explain", *SPEEDS[speed]]


def nanogpt_lr(it: int, max_iters: int) -> float:
    """nanoGPT's get_lr (lr_decay_iters = max_iters): warmup to (it + 1) / (warmup + 1) of the peak, then cosine."""
    r = RECIPE
    lr, min_lr, warmup = r["learning_rate"], r["min_lr"], r["warmup_iters"]
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > max_iters:
        return min_lr
    ratio = (it - warmup) / (max_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def nanogpt_model(vocab_size: int) -> Any:
    """nanoGPT's GPT as its model.py builds it: models/torch_reference.TorchGPT (the same function, W_Q, W_K, W_V apart
    where nanoGPT has one c_attn), attention through PyTorch's fused kernel as nanoGPT's, and nanoGPT's init:
    N(0, 0.02) for every Linear and Embedding, biases 0, the residual projections N(0, 0.02 / sqrt(2 n_layer))."""
    import torch

    from models import GPTConfig
    from models.torch_reference import MultiHeadSelfAttention, TorchGPT

    r = RECIPE
    config = GPTConfig(vocab_size=vocab_size, block_size=r["block_size"], n_layer=r["n_layer"], n_head=r["n_head"],
                       n_embd=r["n_embd"], dropout=r["dropout"], bias=r["bias"], gelu="none")
    model = TorchGPT(config)
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if getattr(module, "bias", None) is not None:
                torch.nn.init.zeros_(module.bias)
        if isinstance(module, MultiHeadSelfAttention):
            module.sdpa = True
    for name, p in model.named_parameters():
        if name.endswith(".proj.weight"):  # nanoGPT's c_proj of attention and of the MLP
            torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * r["n_layer"]))
    return model


def train_py_model(data: str, seed: int, task: Any) -> Any:
    """The model train.py starts the recipe from with `seed` (its settings, config and seeded init: gptlab) for
    `task`, the recipe's text task, in PyTorch: models/torch_reference.TorchGPT with the same weights, attention
    through PyTorch's fused kernel."""
    import torch

    from gptlab import run
    from gptlab.settings import initial_model, model_config
    from models.torch_reference import from_minigrad

    settings = run.resolve_settings(run.build_parser().parse_args(train_py_argv(data, 1, seed, "unused")), None)
    model = initial_model(settings, model_config(settings, task), "cpu")
    return from_minigrad(model, dtype=torch.float32, sdpa=True)


def torch_run(data: str, steps: int, seed: int, same_start: bool = False) -> dict[str, Any]:
    """nanoGPT's training loop on train.py's split of `data`: its batches (torch.randint windows of the training part),
    AdamW with weight decay on the matrices, its learning-rate schedule, clipping; then the loss on the held-out part,
    with the windows train.py uses. Time per step: from drawing the batch to the end of the update, as nanoGPT's dt.
    same_start: from train.py's initial weights for `seed`, on the batches train.py draws (its generator,
    default_rng(seed)), instead of nanoGPT's own draws: the two runs then differ by rounding and by the first 100
    steps' warmup (train.py's lr reaches its peak one step sooner), not by what the seed drew."""
    import torch

    r = RECIPE
    task = make_task("text", data=data, seq_len=r["block_size"] + 1)  # the same characters, split and held-out part
    torch.manual_seed(seed)
    model = train_py_model(data, seed, task) if same_start else nanogpt_model(len(task.vocab))
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": r["weight_decay"]},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=r["learning_rate"], betas=(0.9, r["beta2"]))
    data_ids, T, B = torch.from_numpy(task.train_ids), r["block_size"], r["batch_size"]
    train_split = split(task)
    draws = np.random.default_rng(seed)  # train.py's batch generator

    def batch() -> tuple[Any, Any]:
        """The step's (x, y): train.py's batch where same_start, else nanoGPT's torch.randint windows."""
        if same_start:
            xs, ys = get_batch(train_split, draws, B)
            return torch.from_numpy(np.ascontiguousarray(xs)), torch.from_numpy(ys)
        ix = torch.randint(len(data_ids) - T, (B,))
        return torch.stack([data_ids[i:i + T] for i in ix]), torch.stack([data_ids[i + 1:i + 1 + T] for i in ix])

    times = []
    for it in range(steps):
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = nanogpt_lr(it, steps)
        _, loss = model(*batch())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    model.eval()
    tokens, scored = train_split.heldout
    loss_sum, counted = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(tokens), 256):
            xs, ys = batch_arrays(tokens[i:i + 256], scored[i:i + 256])
            _, loss = model(torch.from_numpy(np.ascontiguousarray(xs)), torch.from_numpy(ys))
            n = int((ys != IGNORE_INDEX).sum())
            loss_sum, counted = loss_sum + loss.item() * n, counted + n
    return {"val_loss": loss_sum / counted, "ms_per_step": 1e3 * sum(times) / len(times),
            "threads": torch.get_num_threads()}


def minigrad_run(data: str, steps: int, seed: int, out: str, env: dict[str, str], speed: str = "plain"
                 ) -> dict[str, Any]:
    """train.py with the recipe in a fresh process: its final line's held-out loss (the whole held-out part) and its
    time per step (tokens per step / tokens_per_s, which leaves the evaluations out)."""
    result = subprocess.run([sys.executable, "train.py", *train_py_argv(data, steps, seed, out, speed)], cwd=ROOT,
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"train.py failed ({result.returncode}): {last_line(result.stderr)}")
    final = dict(re.findall(r"(\w+)=([-\d.e+na]+)", result.stdout.splitlines()[-1]))
    tokens_per_step = RECIPE["batch_size"] * RECIPE["block_size"]
    return {"val_loss": float(final["val_loss"]), "ms_per_step": 1e3 * tokens_per_step / float(final["tokens_per_s"])}


def last_line(stderr: str) -> str:
    """A failed process's last line of stderr, whole: its error, or a traceback's last line."""
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else "(nothing on stderr)"


def torch_worker(data: str, steps: int, seed: int, env: dict[str, str], threads: int | None,
                 same_start: bool = False) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.nanogpt", "--worker", "torch", "--data", data, "--steps", str(steps),
            "--seeds", str(seed), *(["--threads", str(threads)] if threads else []),
            *(["--same-start"] if same_start else [])]
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the PyTorch worker failed ({result.returncode}): {last_line(result.stderr)}")
    return json.loads(result.stdout.splitlines()[-1])


def compare(data: str, steps: int, seeds: list[int], out: str, threads: int | None, speed: str = "plain",
            same_start: bool = False) -> dict[str, Any]:
    """Each seed: train.py and the PyTorch re-implementation, each in a fresh process, alternating which goes first."""
    env = dict(os.environ, **({v: str(threads) for v in blas_threads.THREAD_VARIABLES} if threads else {}))
    runs: dict[str, list[dict[str, Any]]] = {"minigrad": [], "nanoGPT (PyTorch)": []}
    for k, seed in enumerate(seeds):
        jobs = [("minigrad", lambda s=seed: minigrad_run(data, steps, s, os.path.join(out, f"seed{s}"), env, speed)),
                ("nanoGPT (PyTorch)", lambda s=seed: torch_worker(data, steps, s, env, threads, same_start))]
        for name, job in jobs if k % 2 == 0 else jobs[::-1]:
            runs[name].append({"seed": seed, **job()})
            print(f"seed {seed}  {name:<18} held-out loss {runs[name][-1]['val_loss']:.4f}  "
                  f"{runs[name][-1]['ms_per_step']:.1f} ms/step", flush=True)
    medians = {name: {key: statistics.median(r[key] for r in rs) for key in ("val_loss", "ms_per_step")}
               for name, rs in runs.items()}
    flops = recipe_flops(len(make_task("text", data=data, seq_len=RECIPE["block_size"] + 1).vocab))
    for m in medians.values():
        m["gflops"] = flops / m["ms_per_step"] / 1e6
    return {"data": data, "steps": steps, "seeds": seeds, "threads": threads, "speed": speed, "same_start": same_start,
            "recipe": RECIPE,
            "step_flops": flops, "runs": runs, "medians": medians}


def recipe_flops(vocab_size: int) -> float:
    """A training step's model FLOPs at the recipe's shapes (benchmarks.bench.step_flops' formula)."""
    r = RECIPE
    return step_flops({"batch": r["batch_size"], "block_size": r["block_size"], "n_embd": r["n_embd"],
                       "n_layer": r["n_layer"], "vocab_size": vocab_size})


def report(results: dict[str, Any], peak: float) -> str:
    """The medians as a table: held-out loss, ms/step, the model's GFLOP/s and that as a share of the sgemm peak."""
    m = results["medians"]
    ours, theirs = m["minigrad"], m["nanoGPT (PyTorch)"]
    gap = ours["val_loss"] - theirs["val_loss"]
    rows = [f"| {name} | {v['val_loss']:.4f} | {v['ms_per_step']:.1f} | {v['gflops']:.1f} | "
            f"{100 * v['gflops'] / peak:.0f}% |" for name, v in m.items()]
    start = "; PyTorch from train.py's start (--same-start)" if results.get("same_start") else ""
    return "\n".join([f"{results['steps']} steps, seeds {' '.join(map(str, results['seeds']))}, train.py "
                      f"{results.get('speed', 'plain')}{start}; medians:",
                      "| | held-out loss | ms/step | GFLOP/s | % of peak |", "|---|---|---|---|---|", *rows,
                      f"held-out loss, minigrad - PyTorch: {gap:+.4f} ({'within' if abs(gap) <= 0.03 else 'NOT within'}"
                      f" 0.03); time per step, minigrad / PyTorch: {ours['ms_per_step'] / theirs['ms_per_step']:.2f}"])


def what_is_missing(data: str, speed: str) -> str | None:
    """What the comparison needs and this machine lacks, in one line: torch for the PyTorch side, Numba for
    --speed compiled, the --data file."""
    if importlib.util.find_spec("torch") is None:
        return "it trains nanoGPT in PyTorch beside train.py, and torch is not installed: pip install -e '.[torch]'"
    if speed == "compiled" and importlib.util.find_spec("numba") is None:
        return "--speed compiled needs Numba, which is not installed: pip install -e '.[compiled]'"
    if not os.path.isfile(data):
        return f"--data {data}: no such file"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.nanogpt", description=__doc__, epilog=USAGE,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the UTF-8 text (nanoGPT's shakespeare_char: tiny Shakespeare)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--seeds", type=int, nargs="+", default=[1337, 1338, 1339])
    p.add_argument("--threads", type=int, help="threads of each process's BLAS and PyTorch (default: theirs)")
    p.add_argument("--out", default="out-nanogpt", help="folder for train.py's checkpoints, one folder per seed")
    p.add_argument("--json", metavar="FILE", help="also write every run's figures here")
    p.add_argument("--speed", choices=list(SPEEDS), default="plain", help="train.py as `python train.py` runs it "
                   "(plain, the default), with --fused, or with --compiled (pip install -e '.[compiled]')")
    p.add_argument("--same-start", action="store_true", help="the PyTorch side starts from train.py's weights for "
                   "each seed and draws train.py's batches, instead of nanoGPT's own draws: the held-out losses then "
                   "differ by rounding (and the warmup's first steps), not by what each side's seed drew")
    p.add_argument("--worker", choices=["torch"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    missing = None if args.worker else what_is_missing(args.data, args.speed)
    if missing:  # before any work: a comparison that fails after one side has trained for minutes wastes them
        print(f"python -m benchmarks.nanogpt: error: {missing}", file=sys.stderr)
        return 2
    if args.worker:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        print(json.dumps(torch_run(args.data, args.steps, args.seeds[0], args.same_start)))
        return 0
    print(machine.describe(), flush=True)  # the machine, and the sgemm peak the table's "% of peak" divides by
    peak = machine.sgemm_peak()[0]
    results = {**compare(args.data, args.steps, args.seeds, args.out, args.threads, args.speed, args.same_start),
               "sgemm_peak": peak,
               "machine": machine.key()}
    print(report(results, peak))
    if args.json:
        write_atomically(Path(args.json), json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

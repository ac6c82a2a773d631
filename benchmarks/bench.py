"""Benchmark: a full training step (forward, backward, AdamW) of the minigrad GPT in float32, against
the same model in PyTorch eager with the same weights and thread count, and against the machine's
NumPy matmul throughput (the practical ceiling for the array work).

    python benchmarks/bench.py                          # every configuration
    python benchmarks/bench.py --configs tiny small --steps 20

Steps of the two frameworks alternate and the ratio is taken pair by pair, so a noisy machine hurts
both alike. Peak memory is measured in a fresh process per framework and configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import minigrad as mg  # noqa: E402
from minigrad import backend, fast  # noqa: E402
from minigrad.optim import AdamW, decay_groups  # noqa: E402
from models import GPT, GPTConfig  # noqa: E402

CONFIGS = {  # GPTConfig fields, plus the batch size
    "tiny": {"vocab_size": 32, "n_embd": 64, "n_head": 4, "n_layer": 2, "block_size": 32, "batch": 32},
    "small": {"vocab_size": 64, "n_embd": 128, "n_head": 4, "n_layer": 4, "block_size": 64, "batch": 32},
    "medium": {"vocab_size": 256, "n_embd": 256, "n_head": 8, "n_layer": 4, "block_size": 128, "batch": 16},
    # the walkthrough's numbers: one block of width 4096, 32 heads of 128
    "seed-scale": {"vocab_size": 256, "n_embd": 4096, "n_head": 32, "n_layer": 1, "block_size": 128, "batch": 1},
    # GPT-2 small's shape, for a GPU (not run by default)
    "gpt2": {"vocab_size": 50304, "n_embd": 768, "n_head": 12, "n_layer": 12, "block_size": 1024, "batch": 8},
}
DEFAULT_CONFIGS = ["tiny", "small", "medium", "seed-scale"]
FLOPS_FORMULA = "3 x forward matmul FLOPs; forward = 2*B*T*(12*L*C^2 + V*C) + 4*L*B*T^2*C"


def step_flops(c: dict[str, int]) -> float:
    B, T, C, L, V = c["batch"], c["block_size"], c["n_embd"], c["n_layer"], c["vocab_size"]
    return 3 * (2 * B * T * (12 * L * C * C + V * C) + 4 * L * B * T * T * C)


def blas_pools() -> list[dict[str, Any]]:
    """The BLAS thread pools NumPy uses, as threadpoolctl sees them ([] without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [i for i in threadpool_info() if i["user_api"] == "blas"]


def blas_threads() -> str:
    pools = blas_pools()
    if not pools:
        return "unknown (pip install threadpoolctl to see)"
    return ", ".join(f"{i['internal_api']} {i['num_threads']} threads ({i.get('architecture', '?')})" for i in pools)


def matmul_ceiling(device: str = "cpu", n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of a float32 n x n x n matmul (NumPy, or CuPy on "cuda"), best of `repeats`."""
    a = backend.to_device(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), device)
    b = backend.to_device(np.random.default_rng(1).standard_normal((n, n), dtype=np.float32), device)
    a @ b
    best = min(_timed(lambda: a @ b, device) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn: Any, device: str) -> float:
    start = time.perf_counter()
    fn()
    backend.synchronize(device)
    return time.perf_counter() - start


# ---- the two steps ----

def minigrad_setup(c: dict[str, int], device: str = "cpu") -> tuple[GPT, Any, Any, Any]:
    mg.manual_seed(0)
    config = GPTConfig(**{k: v for k, v in c.items() if k != "batch"})
    model = GPT(config).to(device)
    opt = AdamW(decay_groups(model.named_parameters(), 0.1), lr=1e-4, fused=True)
    rng = np.random.default_rng(0)
    x = rng.integers(0, c["vocab_size"], (c["batch"], c["block_size"]))
    y = rng.integers(0, c["vocab_size"], (c["batch"], c["block_size"]))
    return model, opt, x, y


def minigrad_step(model: GPT, opt: AdamW, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """One training step, timed by phase (waiting for the GPU at each boundary, where there is one)."""
    device = model.wte.weight.device
    t0 = time.perf_counter()
    opt.zero_grad()
    _, loss = model(x, y)
    backend.synchronize(device)
    t1 = time.perf_counter()
    loss.backward()
    backend.synchronize(device)
    t2 = time.perf_counter()
    opt.step()
    backend.synchronize(device)
    t3 = time.perf_counter()
    return {"forward": t1 - t0, "backward": t2 - t1, "adamw": t3 - t2, "step": t3 - t0}


def torch_setup(model: GPT, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any, Any, Any]:
    import torch

    from models.torch_reference import from_minigrad

    device = model.wte.weight.device
    ref = from_minigrad(model, dtype=torch.float32, device=device)
    named = dict(ref.named_parameters())
    groups = [{"params": [named[n] for n, p in model.named_parameters() if p.ndim >= 2], "weight_decay": 0.1},
              {"params": [named[n] for n, p in model.named_parameters() if p.ndim < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-4)
    return ref, opt, torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def torch_step(ref: Any, opt: Any, x: Any, y: Any) -> dict[str, float]:
    import torch

    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    _, loss = ref(x, y)
    sync()
    t1 = time.perf_counter()
    loss.backward()
    sync()
    t2 = time.perf_counter()
    opt.step()
    sync()
    t3 = time.perf_counter()
    return {"forward": t1 - t0, "backward": t2 - t1, "adamw": t3 - t2, "step": t3 - t0}


def float64_free(model: GPT, x: np.ndarray, y: np.ndarray) -> bool:
    """True when a float32 step makes no float64 array: every op output, every array an op saves for
    backward, every gradient."""
    from minigrad.tensor import Function

    seen: list[str] = []
    original = Function.apply.__func__

    def recording(cls: type, *inputs: Any, **options: Any) -> Any:
        out = original(cls, *inputs, **options)
        if out.dtype == np.float64:
            seen.append(f"{cls.__name__} output")
        if out._ctx is not None:
            saved = vars(out._ctx).items()
            seen.extend(f"{cls.__name__}.{k}" for k, v in saved if getattr(v, "dtype", None) == np.float64)
        return out

    Function.apply = classmethod(recording)
    try:
        _, loss = model(x, y)
    finally:
        Function.apply = classmethod(original)
    loss.backward()
    seen.extend(f"grad of {n}" for n, p in model.named_parameters() if p.grad.dtype != np.float32)
    model.zero_grad()
    return not seen


# ---- measurements ----

def compare(name: str, steps: int, warmup: int, with_torch: bool, device: str = "cpu") -> dict[str, Any]:
    c = CONFIGS[name]
    model, opt, x, y = minigrad_setup(c, device)
    result: dict[str, Any] = {"config": name, "float64_free": float64_free(model, x, y)}
    runs: dict[str, list[dict[str, float]]] = {"minigrad": []}
    ref = None
    if with_torch:
        ref = torch_setup(model, x, y)
        runs["torch"] = []
    for i in range(warmup + steps):
        for fw, run in runs.items():
            t = minigrad_step(model, opt, x, y) if fw == "minigrad" else torch_step(*ref)
            if i >= warmup:
                run.append(t)
    for fw, run in runs.items():
        result[fw] = {phase: statistics.median(t[phase] for t in run) for phase in run[0]}
    if with_torch:
        result["ratio"] = statistics.median(m["step"] / t["step"] for m, t in zip(runs["minigrad"], runs["torch"],
                                                                                     strict=True))
    return result


def peak_memory(framework: str, name: str, steps: int = 3) -> float:
    """MiB of peak resident memory added by building the model and training `steps` steps, measured
    in a fresh process so that nothing else run here counts."""
    cmd = [sys.executable, __file__, "--memory-child", framework, name, str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def memory_child(framework: str, name: str, steps: int) -> None:
    c = CONFIGS[name]
    if framework == "torch":
        import torch  # noqa: F401  (imported before the baseline, so its own size does not count)
    baseline = _status_mib("VmRSS")
    model, opt, x, y = minigrad_setup(c)
    if framework == "torch":
        ref = torch_setup(model, x, y)
        del model, opt
        for _ in range(steps):
            torch_step(*ref)
    else:
        for _ in range(steps):
            minigrad_step(model, opt, x, y)
    print(json.dumps({"peak_mib": _status_mib("VmHWM") - baseline}))


def _status_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (resident peak) of this process. Not ru_maxrss: that one carries
    the parent's peak over into a child started with fork and exec."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


# ---- report ----

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=DEFAULT_CONFIGS)
    p.add_argument("--device", choices=list(backend.DEVICES), default="cpu",
                   help="cuda: both frameworks on the GPU (peak memory is then not measured)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per framework (default: 30, 5 at seed-scale)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory processes")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = p.parse_args()
    try:
        import torch

        torch.set_num_threads(_blas_thread_count())
        torch_info = f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        torch = None
        torch_info = "PyTorch not installed: minigrad only (pip install torch==2.13.0 for the comparison)"

    print(f"machine: {_cpu_name()}, {os.cpu_count()} cores; NumPy {np.__version__}; BLAS: {blas_threads()}")
    print(torch_info)
    backend.check_device(args.device)
    if args.device == "cuda":
        args.no_memory = True
    ceiling = matmul_ceiling(args.device)
    library = "CuPy" if args.device == "cuda" else "NumPy"
    print(f"{library} float32 matmul 2048^3: {ceiling:.1f} GFLOP/s (the ceiling for the array work; measured "
          "again at the end, and the higher of the two used)")
    print(f"GFLOP/s below = {FLOPS_FORMULA}, / step time\n")
    header = (f"{'config':<11} {'params':>8} {'ms/step':>9} {'fwd':>7} {'bwd':>7} {'adamw':>7} {'tokens/s':>9} "
              f"{'GFLOP/s':>8} {'torch ms':>9} {'ratio':>6} {'peak MiB':>9} {'torch MiB':>9} f64")
    print(header)
    results = []
    for name in args.configs:
        steps = args.steps or (5 if name == "seed-scale" else 30)
        r = compare(name, steps, args.warmup, torch is not None, args.device)
        c = CONFIGS[name]
        m = r["minigrad"]
        r["params"] = GPT(GPTConfig(**{k: v for k, v in c.items() if k != "batch"})).num_parameters()
        r["tokens_per_s"] = c["batch"] * c["block_size"] / m["step"]
        r["gflops"] = step_flops(c) / m["step"] / 1e9
        r["fwd_bwd_gflops"] = step_flops(c) / (m["forward"] + m["backward"]) / 1e9
        if not args.no_memory:
            r["peak_mib"] = peak_memory("minigrad", name)
            r["torch_peak_mib"] = peak_memory("torch", name) if torch is not None else None
        results.append(r)
        t = r.get("torch", {})
        print(f"{name:<11} {r['params'] / 1e6:>7.2f}M {m['step'] * 1e3:>9.2f} {m['forward'] * 1e3:>7.2f} "
              f"{m['backward'] * 1e3:>7.2f} {m['adamw'] * 1e3:>7.2f} {r['tokens_per_s']:>9.0f} {r['gflops']:>8.1f} "
              f"{t.get('step', float('nan')) * 1e3:>9.2f} "
              f"{r.get('ratio', float('nan')):>6.2f} {r.get('peak_mib', float('nan')):>9.0f} "
              f"{(r.get('torch_peak_mib') or float('nan')):>9.0f} {'no' if r['float64_free'] else 'YES'}", flush=True)
    again = matmul_ceiling(args.device)
    print(f"float32 matmul 2048^3 at the end: {again:.1f} GFLOP/s")
    ceiling = max(ceiling, again)
    print("\nratio = median over pairs of minigrad step / PyTorch step (alternating); f64 = any float64 array in "
          "a float32 step; fwd/bwd/adamw are minigrad's medians by phase")
    for r in results:
        print(f"{r['config']}: whole step at {100 * r['gflops'] / ceiling:.0f}% of the matmul ceiling, forward + "
              f"backward at {r['fwd_bwd_gflops']:.1f} GFLOP/s = {100 * r['fwd_bwd_gflops'] / ceiling:.0f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({"ceiling_gflops": ceiling, "results": results}, indent=1))


def _blas_thread_count() -> int:
    return max((i["num_threads"] for i in blas_pools()), default=os.cpu_count() or 1)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


if __name__ == "__main__":
    fast.keep_large_blocks_in_heap()  # as train.py does: big freed blocks are reused (README, Performance)
    if sys.argv[1:2] == ["--memory-child"]:
        memory_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()

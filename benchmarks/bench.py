"""Benchmark: a float32 training step (forward, backward, AdamW) of the minigrad GPT, as the code on the page runs it
and with every speed option on, against the same model in PyTorch eager, each in fresh processes, pair by pair:
`python -m benchmarks.bench [--configs tiny small] [--profile]`. docs/performance.md explains every column.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import minigrad as mg
from minigrad.array import backend, blas_threads, machine, runtime
from minigrad.ops.matmul import LinearFunction, MatMul
from minigrad.optim import AdamW, decay_groups
from minigrad.tensor import intercept
from models import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
USAGE = """\
    python -m benchmarks.bench                                  # every default configuration
    python -m benchmarks.bench --configs tiny small --steps 20 --pairs 3 --json results.json
    python -m benchmarks.bench --profile --configs small        # where a step's time goes, op by op

Each measurement runs in a fresh process (--worker KIND, one JSON line out); per configuration the kinds run one
after the other, --pairs times, the order rotating."""

CONFIGS: dict[str, dict[str, Any]] = {  # GPTConfig fields, plus the batch size
    "tiny": {"vocab_size": 32, "n_embd": 64, "n_head": 4, "n_layer": 2, "block_size": 32, "batch": 32},
    "small": {"vocab_size": 64, "n_embd": 128, "n_head": 4, "n_layer": 4, "block_size": 64, "batch": 32},
    "medium": {"vocab_size": 256, "n_embd": 256, "n_head": 8, "n_layer": 4, "block_size": 128, "batch": 16},
    # the walkthrough's numbers: one block of width 4096, 32 heads of 128
    "seed-scale": {"vocab_size": 256, "n_embd": 4096, "n_head": 32, "n_layer": 1, "block_size": 128, "batch": 1},
    # nanoGPT's CPU recipe ("baby GPT": shakespeare_char on a laptop) and its GPU recipe scaled down to a CPU; both
    # as nanoGPT sets them: no biases, exact GELU, vocabulary of Shakespeare's 65 characters
    "baby": {"vocab_size": 65, "n_embd": 128, "n_head": 4, "n_layer": 4, "block_size": 64, "batch": 12,
             "bias": False, "gelu": "none"},
    "baby-256": {"vocab_size": 65, "n_embd": 384, "n_head": 6, "n_layer": 6, "block_size": 256, "batch": 64,
                 "bias": False, "gelu": "none"},
    # GPT-2 small's shape, for a GPU (not run by default)
    "gpt2": {"vocab_size": 50304, "n_embd": 768, "n_head": 12, "n_layer": 12, "block_size": 1024, "batch": 8},
}
DEFAULT_CONFIGS = ["tiny", "small", "medium", "baby", "seed-scale"]
# minigrad: the code on the page (with the allocator setting, no code path); minigrad-fused: every speed option of
# NumPy's on; minigrad-compiled: those and the compiled kernels (mg.compiled, the optional extra: Numba)
FRAMEWORKS = {"minigrad": "minigrad", "minigrad-fused": "minigrad fused", "minigrad-compiled": "minigrad compiled",
              "torch": "PyTorch", "torch-sdpa": "PyTorch SDPA"}
HAS_NUMBA = importlib.util.find_spec("numba") is not None
DEFAULT_FRAMEWORKS = [fw for fw in FRAMEWORKS if HAS_NUMBA or fw != "minigrad-compiled"]
PHASES = ("forward", "backward", "optimizer", "step")
FLOPS_FORMULA = "3 x forward matmul FLOPs; forward = 2*B*T*(12*L*C^2 + V*C) + 4*L*B*T^2*C"
CEILING_N = machine.PEAK_N


def step_flops(c: dict[str, Any]) -> float:
    B, T, C, L, V = c["batch"], c["block_size"], c["n_embd"], c["n_layer"], c["vocab_size"]
    return 3 * (2 * B * T * (12 * L * C * C + V * C) + 4 * L * B * T * T * C)


def matmul_ceiling(device: str = "cpu", n: int = CEILING_N, repeats: int = 5) -> float:
    """GFLOP/s of a float32 n x n x n matmul (NumPy, or CuPy on "cuda"), best of `repeats`, measured now."""
    return machine.product_gflops(n, lambda a: backend.to_device(a, device), lambda: backend.synchronize(device),
                                  repeats)


# ---- the steps ----

def minigrad_setup(c: dict[str, Any], device: str = "cpu", fused: bool = False) -> tuple[GPT, Any, Any, Any]:
    """The model, its AdamW (fused=True: AdamW's fused step; the kernels are chosen by mg.fused around the step),
    and the batch. Called in minigrad's processes only, after the allocator setting train.py makes too."""
    mg.manual_seed(0)
    config = GPTConfig(**{k: v for k, v in c.items() if k != "batch"})
    model = GPT(config).to(device)
    opt = AdamW(decay_groups(model.named_parameters(), 0.1), lr=1e-4, fused=fused)
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
    return {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2, "step": t3 - t0}


def torch_setup(model: GPT, x: np.ndarray, y: np.ndarray, device: str = "cpu", sdpa: bool = False
                ) -> tuple[Any, Any, Any, Any]:
    """The PyTorch copy of `model` (same weights) on `device`, its AdamW with the same groups, and the
    batch. sdpa: attention through F.scaled_dot_product_attention instead of written out."""
    import torch

    from models.torch_reference import from_minigrad

    ref = from_minigrad(model, dtype=torch.float32, device=device, sdpa=sdpa)
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
    return {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2, "step": t3 - t0}


def float64_free(model: GPT, x: np.ndarray, y: np.ndarray) -> bool:
    """True when a float32 step makes no float64 array: every op output, every array an op saves for
    backward, every gradient (seen through the engine's intercept hook)."""
    seen: list[str] = []

    def recording(node: Any, method: str, run: Any) -> Any:
        out = run()
        if method == "forward":
            outs = out if isinstance(out, tuple) else (out,)  # a node with several outputs gives a tuple
            name = type(node).__name__
            if any(getattr(o, "dtype", None) == np.float64 for o in outs):
                seen.append(f"{name} output")
            seen.extend(f"{name}.{k}" for k, v in vars(node).items() if getattr(v, "dtype", None) == np.float64)
        return out

    with intercept(recording):
        _, loss = model(x, y)
    loss.backward()
    seen.extend(f"grad of {n}" for n, p in model.named_parameters() if p.grad.dtype != np.float32)
    model.zero_grad()
    return not seen


# ---- the per-primitive profile ----

class PrimitiveTimer:
    """With the engine's intercept hook, the wall time of every primitive's forward and backward (waiting for the
    GPU, where there is one) in seconds[(class name, "forward" or "backward")]; a primitive called from inside
    another one counts towards the outer one only."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.products: set[str] = set()  # the names of the matrix products' primitives (matmul, bmm, linear)
        self.inside = False

    def __call__(self, node: Any, method: str, run: Any) -> Any:
        if self.inside:
            return run()
        self.inside = True
        start = time.perf_counter()
        try:
            return run()
        finally:
            backend.synchronize(self.device)
            self.seconds[(type(node).__name__, method)] += time.perf_counter() - start
            if isinstance(node, (MatMul, LinearFunction)):
                self.products.add(type(node).__name__)
            self.inside = False


def profile_primitives(name: str, steps: int, warmup: int, device: str = "cpu", fused: bool = False,
                       compiled: bool = False) -> dict[str, Any]:
    """Milliseconds per step in each primitive's forward and backward, and the phases they sit in
    (sums over `steps` steps after `warmup`, divided by `steps`)."""
    model, opt, x, y = minigrad_setup(CONFIGS[name], device, fused)
    with mg.fused(fused), mg.compiled(compiled):
        for _ in range(warmup):
            minigrad_step(model, opt, x, y)
        phases: dict[str, float] = defaultdict(float)
        timer = PrimitiveTimer(device)
        with intercept(timer):
            for _ in range(steps):
                for phase, seconds in minigrad_step(model, opt, x, y).items():
                    phases[phase] += seconds
    ms = 1e3 / steps
    per_op: dict[str, dict[str, float]] = defaultdict(lambda: {"forward": 0.0, "backward": 0.0})
    for (op, method), seconds in timer.seconds.items():
        per_op[op][method] = seconds * ms
    primitives = [{"name": op, "forward_ms": t["forward"], "backward_ms": t["backward"],
                   "product": op in timer.products} for op, t in per_op.items()]
    primitives.sort(key=lambda r: -(r["forward_ms"] + r["backward_ms"]))
    return {"config": name, "steps": steps, "phases_ms": {p: s * ms for p, s in phases.items()},
            "primitives": primitives}


def profile_rows(profile: dict[str, Any]) -> list[tuple[str, float | None, float | None, float]]:
    """(label, forward ms, backward ms, total ms) per row, the totals adding up to the whole step: each
    primitive, then [engine], the time in forward and backward outside every primitive, then [optimizer]."""
    rows = [(r["name"], r["forward_ms"], r["backward_ms"], r["forward_ms"] + r["backward_ms"])
            for r in profile["primitives"]]
    phases = profile["phases_ms"]
    engine_fwd = phases["forward"] - sum(r[1] for r in rows)
    engine_bwd = phases["backward"] - sum(r[2] for r in rows)
    rows.append(("[engine]", engine_fwd, engine_bwd, engine_fwd + engine_bwd))
    rows.append(("[optimizer]", None, None, phases["optimizer"]))
    return rows


def kinds_of_work(profile: dict[str, Any]) -> dict[str, float]:
    """A step's ms in four parts that add up to it: the products (the primitives of matmul, bmm and linear, a linear
    layer's bias included), the other primitives' array work (elementwise, reductions, attention as one node), the
    optimizer, and the engine's own Python ([engine] of profile_rows: the step minus every primitive and AdamW)."""
    primitives = profile["primitives"]
    products = sum(r["forward_ms"] + r["backward_ms"] for r in primitives if r["product"])
    rows = {label: total for label, _, _, total in profile_rows(profile)}
    return {"products": products, "other array work": sum(r["forward_ms"] + r["backward_ms"] for r in primitives)
            - products, "optimizer": rows["[optimizer]"], "engine (Python)": rows["[engine]"]}


def torch_profile(name: str, steps: int, warmup: int, device: str, sdpa: bool, top: int = 15) -> dict[str, Any]:
    """PyTorch's own breakdown of its step (torch.profiler: each op's self time, on the CPU or, with
    device "cuda", on the GPU), per step."""
    from torch.profiler import ProfilerActivity, profile

    model, _, x, y = minigrad_setup(CONFIGS[name])  # on the CPU: PyTorch's process leaves CuPy alone
    ref = torch_setup(model, x, y, device, sdpa)
    del model
    for _ in range(warmup):
        torch_step(*ref)
    on_gpu = device == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * on_gpu) as prof:
        step = sum(torch_step(*ref)["step"] for _ in range(steps)) * 1e3 / steps
    self_us = (lambda e: e.self_device_time_total) if on_gpu else (lambda e: e.self_cpu_time_total)
    ops = sorted(((e.key, self_us(e) / 1e3 / steps) for e in prof.key_averages()), key=lambda r: -r[1])
    return {"config": name, "steps": steps, "step_ms": step, "total_self_ms": sum(ms for _, ms in ops),
            "clock": "GPU" if on_gpu else "CPU",
            "ops": [{"name": op, "self_ms": ms} for op, ms in ops[:top]]}


# ---- the worker: one measurement in a fresh process ----

def worker(kind: str, name: str, steps: int, warmup: int, device: str, threads: int) -> dict[str, Any]:
    """One measurement, in the process that runs it: the result as a JSON-able dict."""
    if kind == "versions":
        peak, cached = machine.sgemm_peak()  # before the compiled path's choice, which sets the BLAS aside
        info = {"numpy": np.__version__, "blas": machine.describe_blas(), "machine": machine.describe(),
                "sgemm_peak": peak, "peak_cached": cached}
        try:  # whose sgemm the compiled path's products call (the extras compiled and mkl), on how many threads
            from minigrad.speed import kernels

            with mg.compiled():
                threads = kernels.numba.get_num_threads()
            info["compiled_products"] = (f"{kernels.PRODUCTS}'s sgemm on {threads} threads ({kernels.CHOSEN_BY})"
                                         if kernels.PRODUCTS else "NumPy's")
        except ImportError:
            pass
        try:
            import torch
        except ImportError:
            return info
        torch.set_num_threads(threads)
        return {**info, "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    if kind == "ceiling":
        return {"gflops": matmul_ceiling(device)}
    if kind == "float64":  # the code on the page, then the fused path
        model, _, x, y = minigrad_setup(CONFIGS[name], device)
        plain = float64_free(model, x, y)
        with mg.fused():
            return {"float64_free": plain and float64_free(model, x, y)}
    if kind in ("minigrad-profile", "minigrad-fused-profile", "minigrad-compiled-profile"):
        runtime.keep_large_blocks_in_heap()
        return profile_primitives(name, steps, warmup, device, fused=kind != "minigrad-profile",
                                  compiled="compiled" in kind)
    if kind in ("torch", "torch-sdpa", "torch-profile", "torch-sdpa-profile"):
        import torch  # before the memory baseline, so that its own size does not count

        torch.set_num_threads(threads)
        if kind.endswith("profile"):
            return torch_profile(name, steps, warmup, device, sdpa="sdpa" in kind)
        baseline = _status_mib("VmRSS")
        model, _, x, y = minigrad_setup(CONFIGS[name])  # on the CPU: PyTorch's process leaves CuPy alone
        ref = torch_setup(model, x, y, device, sdpa=kind == "torch-sdpa")
        del model
        return {**_time_steps(lambda: torch_step(*ref), steps, warmup), "threads": torch.get_num_threads(),
                "peak_mib": None if device == "cuda" else _status_mib("VmHWM") - baseline}
    if kind in ("minigrad", "minigrad-fused", "minigrad-compiled"):
        runtime.keep_large_blocks_in_heap()  # as train.py does: an allocator setting, no code path
        if kind == "minigrad-compiled":  # Numba and its compiler before the memory baseline, as torch's import
            mg.compiled()
        baseline = _status_mib("VmRSS")
        model, opt, x, y = minigrad_setup(CONFIGS[name], device, fused=kind != "minigrad")
        with mg.fused(kind != "minigrad"), mg.compiled(kind == "minigrad-compiled"):
            timed = _time_steps(lambda: minigrad_step(model, opt, x, y), steps, warmup)
        return {**timed, "threads": machine.describe_blas(),
                "params": model.num_parameters(),
                "peak_mib": None if device == "cuda" else _status_mib("VmHWM") - baseline}
    raise ValueError(f"bench.py: unknown worker kind {kind!r}")


def _time_steps(step: Any, steps: int, warmup: int) -> dict[str, Any]:
    """Run `warmup` untimed steps, then `steps` timed ones: the median ms of each phase, and each step's ms."""
    for _ in range(warmup):
        step()
    times = [step() for _ in range(steps)]
    return {"ms": {p: statistics.median(t[p] for t in times) * 1e3 for p in PHASES},
            "step_ms": [t["step"] * 1e3 for t in times]}


def _status_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (resident peak) of this process. Not ru_maxrss: that one carries
    the parent's peak over into a child started with fork and exec."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def _worker_env(threads: int) -> dict[str, str]:
    """The environment of a worker: every BLAS and OpenMP pool sized to `threads`."""
    return dict(os.environ, **{var: str(threads) for var in blas_threads.THREAD_VARIABLES})


def spawn(kind: str, args: argparse.Namespace, name: str = "tiny", steps: int = 0) -> dict[str, Any]:
    """Run `worker(kind, ...)` in a fresh Python process and return what it printed."""
    cmd = [sys.executable, "-m", "benchmarks.bench", "--worker", kind, "--configs", name, "--steps", str(steps),
           "--warmup", str(args.warmup), "--device", args.device, "--threads", str(args.threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_worker_env(args.threads), cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"bench.py: worker `{' '.join(cmd[3:])}` failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- the parent: pairs of processes, and the report ----

def default_steps(name: str, profile: bool) -> int:
    if profile:
        return 3 if name == "seed-scale" else 10
    return 5 if name == "seed-scale" else 30


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One configuration: the float64 check, then `args.pairs` rounds of one process per framework
    (the order rotating each round), summarised per framework, with the pair-by-pair ratios."""
    c = CONFIGS[name]
    steps = args.steps or default_steps(name, profile=False)
    result: dict[str, Any] = {"config": name, "steps": steps, "warmup": args.warmup, "pairs": args.pairs,
                              "float64_free": spawn("float64", args, name)["float64_free"]}
    runs: dict[str, list[dict[str, Any]]] = {fw: [] for fw in args.frameworks}
    for i in range(args.pairs):
        k = i % len(args.frameworks)
        for fw in args.frameworks[k:] + args.frameworks[:k]:
            runs[fw].append(spawn(fw, args, name, steps))
    result["params"] = runs["minigrad"][0]["params"]
    result["frameworks"] = {fw: _summary(r, c) for fw, r in runs.items()}
    # each minigrad path against each reference, and the code on the page against the fused path, pair by pair
    result["ratios"] = {f"{mine} / {theirs}": _ratios(runs[mine], runs[theirs])
                        for mine in runs if mine.startswith("minigrad") for theirs in runs
                        if not theirs.startswith("minigrad")}
    if "minigrad-fused" in runs:
        result["ratios"]["minigrad / minigrad-fused"] = _ratios(runs["minigrad"], runs["minigrad-fused"])
    return result


def _summary(runs: list[dict[str, Any]], c: dict[str, Any]) -> dict[str, Any]:
    """A framework's medians over its processes (each process's own median per phase)."""
    ms = {p: statistics.median(r["ms"][p] for r in runs) for p in PHASES}
    peaks = [r["peak_mib"] for r in runs if r["peak_mib"] is not None]
    return {"ms": ms, "tokens_per_s": c["batch"] * c["block_size"] / ms["step"] * 1e3,
            "gflops": step_flops(c) / ms["step"] / 1e6, "peak_mib": statistics.median(peaks) if peaks else None,
            "threads": runs[0]["threads"], "processes": runs}


def _ratios(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    pairs = [m["ms"]["step"] / t["ms"]["step"] for m, t in zip(mine, theirs, strict=True)]
    return {"median": statistics.median(pairs), "min": min(pairs), "max": max(pairs), "pairs": pairs}


def print_header(args: argparse.Namespace, versions: dict[str, Any]) -> None:
    torch_info = (f"PyTorch {versions['torch']}, {versions['torch_threads']} threads" if "torch" in versions
                  else "PyTorch not installed: minigrad only (pip install torch==2.13.0 for the comparison)")
    print(f"{versions['machine']}\nNumPy {versions['numpy']}; {torch_info}; device {args.device}")
    same = (f"same weights (minigrad's seed-0 init, copied into PyTorch); same threads: "
            f"OMP/OPENBLAS/MKL_NUM_THREADS={args.threads} in every process and torch.set_num_threads({args.threads});\n"
            "     minigrad = the code on the page, with train.py's allocator setting (runtime.py: no code path);\n"
            "     minigrad fused = the same with every speed option on (mg.fused() and AdamW(fused=True));\n"
            "     minigrad compiled = fused, and the compiled kernels (mg.compiled(), the optional extra: Numba), "
            f"products: {versions.get('compiled_products', '-')};\n"
            "     PyTorch = eager, written-out attention (models/torch_reference.py); "
            "PyTorch SDPA = eager with F.scaled_dot_product_attention")
    if args.profile:
        print(f"how: one fresh process per framework and config; {same}\n", flush=True)
        return
    steps = args.steps or "30 (5 at seed-scale)"
    print(f"how: every measurement in a fresh process of its own; per config, pairs of processes: {args.pairs} "
          "(one process per framework, the order rotating each pair);\n"
          f"     in each process, warm-up steps dropped: {args.warmup}, then the median of {steps} timed "
          "steps; per framework, the median over its processes;\n"
          "     ratio = a minigrad path's step time / a reference's, pair by pair: median (min..max over the pairs);\n"
          f"     {same}")
    print(f"GFLOP/s = {FLOPS_FORMULA}, / step time\n", flush=True)


def print_result(r: dict[str, Any], peak: float) -> None:
    c = CONFIGS[r["config"]]
    shape = (f"vocab {c['vocab_size']}, width {c['n_embd']}, {c['n_head']} heads, {c['n_layer']} layers, "
             f"block {c['block_size']}, batch {c['batch']}")
    f64 = "none" if r["float64_free"] else "YES (a bug: see float64_free)"
    print(f"{r['config']} ({shape}): {r['params'] / 1e6:.2f} M params; float64 arrays in a float32 step: {f64}")
    print(f"  {'framework':<15} {'ms/step':>9} {'forward':>9} {'backward':>9} {'optimizer':>9} {'tokens/s':>9} "
          f"{'GFLOP/s':>8} {'% peak':>7} {'peak MiB':>9}")
    for fw, s in r["frameworks"].items():
        ms = s["ms"]
        mib = "n/a" if s["peak_mib"] is None else f"{s['peak_mib']:.0f}"
        print(f"  {FRAMEWORKS[fw]:<15} {ms['step']:>9.2f} {ms['forward']:>9.2f} {ms['backward']:>9.2f} "
              f"{ms['optimizer']:>9.2f} {s['tokens_per_s']:>9.0f} {s['gflops']:>8.1f} "
              f"{100 * s['gflops'] / peak:>6.0f}% {mib:>9}")
    for label, ratio in r["ratios"].items():
        mine, theirs = label.split(" / ")
        print(f"  {FRAMEWORKS[mine]} / {FRAMEWORKS[theirs]}: {_spread(ratio)}, pairs: {r['pairs']}")
    print(flush=True)


def _spread(ratio: dict[str, Any]) -> str:
    return f"{ratio['median']:.2f} ({ratio['min']:.2f}..{ratio['max']:.2f})"


def print_summary(results: list[dict[str, Any]], ceiling: float) -> None:
    labels = list(results[0]["ratios"])
    print(f"{'config':<11} " + "".join(f"{' / '.join(FRAMEWORKS[f] for f in label.split(' / ')):>34}"
                                       for label in labels) + "   model GFLOP/s as % of the ceiling")
    for r in results:
        cells = "".join(f"{_spread(r['ratios'][label]):>34}" for label in labels)
        shares = ", ".join(f"{FRAMEWORKS[fw]} {100 * s['gflops'] / ceiling:.0f}%" for fw, s in r["frameworks"].items())
        print(f"{r['config']:<11} {cells}   {shares}")


def print_profile(p: dict[str, Any], warmup: int, label: str = "minigrad") -> None:
    ph = p["phases_ms"]
    print(f"{label}, {p['config']}: ms per step in each primitive (Function subclass), mean of {p['steps']} steps "
          f"after {warmup} warm-up")
    rows = profile_rows(p) + [("[whole step]", ph["forward"], ph["backward"], ph["step"])]
    width = max(len(label) for label, *_ in rows)
    print(f"  {'primitive':<{width}} {'forward':>9} {'backward':>9} {'total':>9} {'share':>6}")
    for label, fwd, bwd, total in rows:
        cells = "".join("          " if t is None else f" {t:>9.2f}" for t in (fwd, bwd))
        print(f"  {label:<{width}}{cells} {total:>9.2f} {100 * total / ph['step']:>5.1f}%")
    kinds = kinds_of_work(p)
    print("  by kind of work: " + ", ".join(f"{name} {ms:.2f} ms ({100 * ms / ph['step']:.0f}%)"
                                            for name, ms in kinds.items()))
    print("  [engine]: each phase's time outside every primitive: zero_grad, the model's Python code and graph "
          "building in\n  forward; the engine's graph walk and gradient sums in backward. [optimizer]: AdamW.step. "
          "The timing wrappers add\n  a little to the step.\n", flush=True)


def print_torch_profile(p: dict[str, Any], label: str) -> None:
    print(f"{label}, {p['config']}: torch.profiler's self {p['clock']} time per op, ms per step over {p['steps']} "
          f"steps (the profiler adds overhead):\n  step {p['step_ms']:.2f} ms under the profiler; the ops' self times "
          f"sum to {p['total_self_ms']:.2f} ms")
    for op in p["ops"]:
        print(f"  {op['name']:<56} {op['self_ms']:>9.2f} {100 * op['self_ms'] / p['total_self_ms']:>5.1f}%")
    print(flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__, epilog=USAGE,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=DEFAULT_CONFIGS)
    p.add_argument("--device", choices=list(backend.DEVICES), default="cpu",
                   help="cuda: both frameworks on the GPU (peak memory is then not measured)")
    p.add_argument("--frameworks", nargs="+", choices=list(FRAMEWORKS),
                   default=DEFAULT_FRAMEWORKS,
                   help="minigrad and the references to time against it (default: all; PyTorch only if installed, "
                        "minigrad compiled only with Numba, the compiled extra)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per process (default: 30, 5 at seed-scale; --profile: 10, 3 at seed-scale)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps at the start of each process")
    p.add_argument("--pairs", type=int, default=5, help="rounds of one process per framework")
    p.add_argument("--threads", type=int, default=runtime.usable_cores(),
                   help="BLAS/OpenMP/PyTorch threads in every process (default: the cores this process may use)")
    p.add_argument("--profile", action="store_true",
                   help="instead: per-primitive time table of each config (and torch.profiler's breakdown)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # run one measurement here, print it as JSON
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.configs[0], args.steps, args.warmup, args.device, args.threads)))
        return
    if "minigrad" not in args.frameworks:
        p.error("--frameworks must include minigrad: the references are timed against it")
    if "minigrad-compiled" in args.frameworks and not HAS_NUMBA:
        p.error("--frameworks minigrad-compiled needs Numba: pip install -e '.[compiled]'")
    if "minigrad-compiled" in args.frameworks and args.device != "cpu":
        if args.frameworks is not DEFAULT_FRAMEWORKS:  # asked for by name
            p.error(f"--frameworks minigrad-compiled: the compiled kernels run on the CPU, not on --device "
                    f"{args.device}")
        args.frameworks = [fw for fw in args.frameworks if fw != "minigrad-compiled"]
    if min(args.pairs, args.threads, 1 if args.steps is None else args.steps) < 1 or args.warmup < 0:
        p.error(f"--pairs ({args.pairs}), --threads ({args.threads}) and --steps ({args.steps}) must be at least 1, "
                f"--warmup ({args.warmup}) at least 0")
    backend.check_device(args.device)
    versions = spawn("versions", args)
    if "torch" not in versions:
        args.frameworks = [fw for fw in args.frameworks if fw.startswith("minigrad")]
    print_header(args, versions)
    report: dict[str, Any] = {"settings": {**vars(args), "versions": versions, "cpu": machine.cpu_model()}}
    if args.profile:
        report["profiles"] = []
        for name in args.configs:
            steps = args.steps or default_steps(name, profile=True)
            for fw in args.frameworks:
                report["profiles"].append(spawn(f"{fw}-profile", args, name, steps))
                if fw.startswith("minigrad"):
                    print_profile(report["profiles"][-1], args.warmup, FRAMEWORKS[fw])
                else:
                    print_torch_profile(report["profiles"][-1], FRAMEWORKS[fw])
    else:
        library = "CuPy" if args.device == "cuda" else "NumPy"
        # the machine's sgemm peak (the header's, cached or measured), or on a GPU CuPy's, measured now
        ceilings = [versions["sgemm_peak"] if args.device == "cpu" else spawn("ceiling", args)["gflops"]]
        print(f"{library} float32 matmul {CEILING_N}^3: {ceilings[0]:.1f} GFLOP/s (the ceiling for the array work, "
              "\"% peak\" below; measured again at the end, the higher used in the summary)\n", flush=True)
        report["results"] = []
        for name in args.configs:
            report["results"].append(measure(name, args))
            print_result(report["results"][-1], ceilings[0])
        ceilings.append(spawn("ceiling", args)["gflops"])
        report["ceiling_gflops"], report["ceiling_runs"] = max(ceilings), ceilings
        print(f"{library} float32 matmul {CEILING_N}^3 at the end: {ceilings[1]:.1f} GFLOP/s\n")
        print_summary(report["results"], report["ceiling_gflops"])
    if args.json:
        write_atomically(Path(args.json), json.dumps(report, indent=1))


def write_atomically(path: Path, text: str) -> None:
    """`text` in `path`, whole or not at all: written beside it, then renamed over it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()

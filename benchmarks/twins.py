"""Does each twin of mg.fused() pay on this machine? `python -m benchmarks.twins [--configs tiny baby] [--rounds 30]`

A twin (minigrad/speed/twins.py) stays only where it saves 3% of a training step or more (docs/performance.md).
Step times drift by 10-25% from process to process on a shared host, more than the effect to be seen, so this
benchmark does not compare processes: in one process, with mg.fused() on, steps with the twin and steps with its
teaching Function in its place take turns, with-without-without-with then the reverse, and each round gives one
ratio, (the round's steps without the twin) / (those with it), above 1 where the twin pays. The two sides differ in
one Function only (the same framework, model and data), so sharing a process is fair, and drift cancels out.
A twin whose teaching Function the configuration never runs shows this host's noise: its row says so.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import minigrad as mg
from benchmarks.bench import CONFIGS, minigrad_setup, minigrad_step
from minigrad import core
from minigrad.array import machine, runtime
from minigrad.autograd import graph_order
from minigrad.speed.twins import FUSED

PAYS = 1.03  # a twin that saves less than 3% of a step is deleted (issue 46's rule)


def measure(name: str, rounds: int, warmup: int = 4) -> list[dict[str, Any]]:
    """For each twin: the median step time with and without it, and the rounds' ratios without / with."""
    model, opt, x, y = minigrad_setup(CONFIGS[name], fused=True)

    def step(table: dict[Any, Any]) -> float:
        core.modes.implementations = table
        return minigrad_step(model, opt, x, y)["step"]

    rows = []
    with mg.fused():
        with_all = core.modes.implementations
        _, loss = model(x, y)
        ran = {type(node) for node in graph_order(loss.grad_fn)}
        for _ in range(warmup):
            step(with_all)
        for teaching, twin in FUSED.items():
            without = {cls: impl for cls, impl in with_all.items() if cls is not teaching}
            times: dict[str, list[float]] = {"with": [], "without": []}
            for r in range(rounds):
                order = ("with", "without", "without", "with") if r % 2 == 0 else ("without", "with", "with", "without")
                took = {"with": 0.0, "without": 0.0}
                for side in order:
                    took[side] += step(with_all if side == "with" else without)
                for side in took:
                    times[side].append(took[side] / 2)
            core.modes.implementations = with_all
            ratios = [b / a for a, b in zip(times["with"], times["without"], strict=True)]
            rows.append({"config": name, "twin": twin.__name__, "runs": twin in ran,
                         "with_ms": statistics.median(times["with"]) * 1e3,
                         "without_ms": statistics.median(times["without"]) * 1e3,
                         "ratio": statistics.median(ratios), "quartiles": statistics.quantiles(ratios, n=4)[::2]})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.twins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small", "baby"], choices=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=30, help="rounds of 4 steps per twin (default 30)")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds must be at least 2 (quartiles need two ratios), got {args.rounds}")
    print(machine.describe())
    print(f"mg.fused() with and without one twin, in one process, {args.rounds} rounds of with-without-without-with "
          "(or the reverse);\nratio = the round's step without the twin / with it: median (quartiles); "
          f"a twin pays where the median is {PAYS} or more\n")
    print(f"{'config':<8} {'twin':<14} {'runs':<5} {'with ms':>8} {'without':>8}  ratio")
    for name in args.configs:
        for row in measure(name, args.rounds):
            verdict = ("pays" if row["ratio"] >= PAYS else "does not pay") if row["runs"] else "not run here: noise"
            low, high = row["quartiles"]
            print(f"{row['config']:<8} {row['twin']:<14} {'yes' if row['runs'] else 'no':<5} {row['with_ms']:8.1f} "
                  f"{row['without_ms']:8.1f}  {row['ratio']:.3f} ({low:.3f}-{high:.3f}) {verdict}", flush=True)


if __name__ == "__main__":
    runtime.keep_large_blocks_in_heap()  # as train.py and bench (process-wide: not in main, which tests call)
    main()

"""How long the gradient all-reduce of data-parallel training takes (minigrad.distributed) for bench.py's configs:
`mpiexec -n 2 python -m benchmarks.allreduce [--configs tiny small --repeats 50]`. Rank 0 prints the bytes per
rank, the median time of one all-reduce of every gradient, and its bus bandwidth (ring model, 2 (N-1)/N x bytes / t).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench import CONFIGS, DEFAULT_CONFIGS

from minigrad import distributed
from models import GPT, GPTConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=DEFAULT_CONFIGS)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    world = distributed.init()
    if world.rank == 0:
        print(f"{world.size} ranks; median of {args.repeats} all-reduces of every float32 gradient")
        print("| config | params | gradient MB per rank | all-reduce ms | bus GB/s |\n|---|---|---|---|---|")
    for name in args.configs:
        c = CONFIGS[name]
        config = GPTConfig(**{k: v for k, v in c.items() if k != "batch"})
        grads = [np.ones(p.shape, dtype=np.float32) for p in GPT(config).parameters()]
        nbytes = sum(g.nbytes for g in grads)
        times = []
        for _ in range(args.repeats + 1):  # the first is a warm-up
            world.barrier()
            start = time.perf_counter()
            world.all_reduce(grads)
            times.append(time.perf_counter() - start)
        median = statistics.median(times[1:])
        if world.rank == 0:
            bus = 2 * (world.size - 1) / world.size * nbytes / median / 1e9
            print(f"| {name} | {nbytes // 4:,} | {nbytes / 1e6:.2f} | {median * 1e3:.2f} | {bus:.1f} |")


if __name__ == "__main__":
    main()

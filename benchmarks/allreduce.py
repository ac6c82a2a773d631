"""How long the gradient all-reduce of data-parallel training takes (minigrad.distributed), per
configuration of bench.py, with one float32 gradient array per parameter as train.py --dist mpi sends.

    mpiexec -n 2 python benchmarks/allreduce.py
    mpiexec -n 2 python benchmarks/allreduce.py --configs tiny small --repeats 50

Rank 0 prints, per configuration, the bytes each rank sends into the reduction, the median time of
one all-reduce of every gradient, and the bus bandwidth of that time under the ring cost model
(2 (N-1)/N x gradient bytes / time), the figure to compare with a network's bandwidth.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import CONFIGS, DEFAULT_CONFIGS  # noqa: E402

from minigrad import distributed  # noqa: E402
from models import GPT, GPTConfig  # noqa: E402


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

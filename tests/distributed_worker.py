"""Run by tests/test_distributed.py under `mpiexec -n 2`: each rank runs one check of
minigrad.distributed and writes what it got to OUT/rank<r>.json, which the test compares (a file per
rank, since the ranks' printed lines can interleave).

    mpiexec -n 2 python -m tests.distributed_worker all_reduce --device cpu --out /tmp/check
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tests import fake_cupy

if fake_cupy.active():  # MINIGRAD_CUPY_STANDIN=1 reaches the ranks too: they take the stand-in for CuPy as well
    fake_cupy.install()

import minigrad as mg  # noqa: E402  (after the stand-in)
import train  # noqa: E402
from gptlab import run  # noqa: E402
from minigrad import distributed  # noqa: E402
from minigrad.array import backend
from minigrad.optim import SGD  # noqa: E402
from models import GPT, IGNORE_INDEX, GPTConfig  # noqa: E402


def inputs(rank: int) -> list[np.ndarray]:
    """What rank `rank` contributes: two dtypes, a 3-D array and a non-contiguous (transposed) one."""
    rng = np.random.default_rng(rank)
    return [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 3, 5)),
            rng.standard_normal((4, 6)).T]


def all_reduce(world: distributed.World, device: str, args: argparse.Namespace) -> list:
    arrays = [backend.to_device(a, device) for a in inputs(world.rank)]
    world.all_reduce(arrays)
    return [[a.dtype.name, backend.to_numpy(a).tolist()] for a in arrays]


def broadcast(world: distributed.World, device: str, args: argparse.Namespace) -> list:
    mg.manual_seed(100 + world.rank)  # each rank starts from different weights
    model = GPT(GPTConfig(vocab_size=7, block_size=4, n_embd=8, n_head=2, n_layer=1)).to(device)
    before = next(model.parameters()).numpy().tolist()
    world.broadcast([p.array for p in model.parameters()])
    return [before, [p.numpy().tolist() for p in model.parameters()]]


def uneven_batch() -> tuple[GPT, np.ndarray, np.ndarray]:
    """A float64 model and a batch of 4 rows whose first two (rank 0's) score 1 target and last two 9."""
    mg.manual_seed(7)
    model = GPT(GPTConfig(vocab_size=7, block_size=5, n_embd=8, n_head=2, n_layer=1)).to(mg.float64)
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 7, (4, 5)), rng.integers(0, 7, (4, 5))
    y[:2] = IGNORE_INDEX
    y[0, 3] = 2
    y[2, 0] = IGNORE_INDEX
    return model, x, y


def weighted_gradients(world: distributed.World, device: str, args: argparse.Namespace) -> list:
    """train.py's gradient combination, as Run.data_parallel_step calls train_step: each rank's half of uneven_batch()
    weighted by its share of all the scored targets, and the ranks' gradients summed (SGD with lr 0 keeps them)."""
    model, x, y = uneven_batch()
    rows = slice(2 * world.rank, 2 * world.rank + 2)
    train.train_step(model, SGD(model.parameters(), lr=0.0), x[rows], y[rows], 1e9, 2, int((y != IGNORE_INDEX).sum()),
                     lambda params: world.all_reduce([p.grad.array for p in params]))
    return [p.grad.tolist() for p in model.parameters()]


def cores(world: distributed.World, device: str, args: argparse.Namespace) -> list:
    """How many ranks train.py's world counts on this machine, and the BLAS threads each then keeps."""
    from threadpoolctl import threadpool_info

    world = run.join_world(argparse.Namespace(dist="mpi", device="cpu"))
    blas = {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    return [world.ranks_on_node, sorted(blas)]


def barrier(world: distributed.World, device: str, args: argparse.Namespace) -> bool:
    """Rank 1 writes a file just before the barrier; every rank looks for it just after."""
    flag = Path(args.out) / "rank1-was-here"
    if world.rank == 1:
        flag.write_text("here")
    world.barrier()
    return flag.exists()


CHECKS = {"all_reduce": all_reduce, "broadcast": broadcast, "barrier": barrier,
          "weighted_gradients": weighted_gradients, "cores": cores}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("check", choices=list(CHECKS))
    p.add_argument("--device", default="cpu")
    p.add_argument("--staged", action="store_true", help="GPU arrays through host memory, even where NCCL is")
    p.add_argument("--out", required=True, help="folder for rank<r>.json")
    args = p.parse_args()
    world = distributed.init(args.device)
    if args.staged:
        world = distributed.World(world.comm)
    result = CHECKS[args.check](world, args.device, args)
    report = {"rank": world.rank, "size": world.size, "nccl": world.nccl_comm is not None, "result": result}
    (Path(args.out) / f"rank{world.rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()

"""Run by tests/test_train_distributed.py under `mpiexec -n 2`: train.py's run where one rank alone fails, in its
argument checks (its memory check) or once training has begun (its loop), while the other rank goes on, so that
the test can see the whole job end, with the failing rank's message, rather than hang.

    mpiexec -n 2 python -m tests.failing_rank check 1 --task sort --out /tmp/x
"""

from __future__ import annotations

import sys

import train
from gptlab import run
from gptlab.settings import RunFailed, UsageError


def this_rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def main(argv: list[str]) -> int:
    when, failing, *rest = argv
    loop = train.train
    if when == "check":
        check_memory = run.check_memory

        def short_of_memory(*args: object) -> None:
            if this_rank() == int(failing):
                raise UsageError(f"rank {failing}'s machine has no memory to spare")
            check_memory(*args)

        run.check_memory = short_of_memory  # this process only: the other rank's check passes
    else:
        def loop(r: run.Run) -> int:
            if r.world.rank == int(failing):
                raise (RunFailed if when == "work" else RuntimeError)(f"rank {failing} lost its data")
            r.world.barrier()  # the other rank waits for the failing one, as in a collective of the loop
            return 0

    return run.main([*rest, "--dist", "mpi"], loop)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

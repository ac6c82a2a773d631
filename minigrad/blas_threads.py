"""How many threads NumPy's BLAS runs on while a model trains, chosen by timing the run's own steps (train.py's
loop reports each step's time to a `BlasThreads`): small matrices on two threads that share their cores with
another busy program wait on each other (a 64-wide model's step 5-8x slower), where one thread would not, and on a
quiet machine the same two threads are the faster. A process-level setting, not a code path (threadpoolctl's).
"""

from __future__ import annotations

import os
import statistics
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def fixed_by_environment() -> str | None:
    """The first of THREAD_VARIABLES that is set, as NAME=value: a count the user chose, left alone."""
    return next((f"{name}={os.environ[name]}" for name in THREAD_VARIABLES if name in os.environ), None)


def blas_controller() -> Any:
    """threadpoolctl's controller of NumPy's BLAS pools, or None where threadpoolctl is not installed or finds none."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    blas = ThreadpoolController().select(user_api="blas")
    return blas if blas.lib_controllers else None


class BlasThreads:
    """Tries each count of `candidates` for `trial` steps in turn (after `warmup` steps at the BLAS's own count),
    keeps the one whose median step was the shortest, and tries them all again `every` steps later, doubling
    `every` each time the choice stays (so a quiet run pays for fewer trials as it goes). close() gives the BLAS
    its own count back."""

    def __init__(self, blas: Any, candidates: list[int], warmup: int = 3, trial: int = 3, every: int = 50) -> None:
        if len(candidates) < 2 or min(candidates) < 1:
            raise ValueError(f"BlasThreads: expected two or more thread counts of at least 1, got {candidates}")
        self.blas, self.candidates, self.trial, self.every = blas, candidates, trial, every
        self.step, self.next_trial = 0, warmup  # steps seen; the step at which the next round of trials starts
        self.times: dict[int, list[float]] = {}  # this round's step times per count
        self.chosen: int | None = None
        self.limit: Any = None  # threadpoolctl's limiter in effect, whose restore gives the BLAS its count back

    def running(self) -> int | None:
        """The count being tried in the step about to run, or None between rounds."""
        k = (self.step - self.next_trial) // self.trial
        return self.candidates[k] if self.step >= self.next_trial and k < len(self.candidates) else None

    def after_step(self, seconds: float) -> str | None:
        """Count the step that took `seconds`; at the end of a round keep the faster count; set the BLAS to the
        count of the next step where it changes. Returns a sentence saying what was chosen, after the first round
        only (for the run's log)."""
        count = self.running()
        self.step += 1
        said = None
        if count is not None:
            self.times.setdefault(count, []).append(seconds)
            if self.running() is None:  # the round is over
                said = self.choose()
        upcoming = self.running()
        if upcoming is not None and (self.step - self.next_trial) % self.trial == 0:
            self.set(upcoming)
        return said

    def choose(self) -> str | None:
        medians = {n: statistics.median(t) for n, t in self.times.items()}
        best = min(medians, key=lambda n: medians[n])
        first, stays = self.chosen is None, best == self.chosen
        self.chosen, self.times = best, {}
        self.every = self.every * 2 if stays else self.every
        self.next_trial = self.step + self.every
        self.set(best)
        if not first:
            return None
        said = ", ".join(f"{n} thread{'s' * (n > 1)} {1e3 * m:.1f} ms" for n, m in medians.items())
        return (f"BLAS threads: {best} (this run's steps, median of {self.trial} at each: {said}; tried again now and "
                "then; --blas-threads N or OPENBLAS_NUM_THREADS=N sets it)")

    def set(self, count: int) -> None:
        if self.limit is None:
            self.limit = self.blas.limit(limits=count)
        else:
            self.blas.limit(limits=count)

    def close(self) -> None:
        if self.limit is not None:
            self.limit.restore_original_limits()
            self.limit = None


def for_training(threads: int | None) -> tuple[BlasThreads | None, Any, str | None]:
    """What a training run does with NumPy's BLAS threads: (a tuner, or None; a limiter to restore at the end, or
    None; a sentence saying what was fixed, or None). `threads` given (--blas-threads): that count, fixed. A count
    set in the environment, a BLAS on one thread, or no threadpoolctl: the BLAS as it is (today's behaviour)."""
    blas = blas_controller()
    if threads is not None:
        if blas is None:
            return None, None, f"--blas-threads {threads}: threadpoolctl is not installed, so the BLAS keeps its own"
        return None, blas.limit(limits=threads), f"BLAS threads: {threads} (--blas-threads)"
    if blas is None or fixed_by_environment() is not None:
        return None, None, None
    found = min(lib.num_threads for lib in blas.lib_controllers)
    return (BlasThreads(blas, [found, 1]) if found > 1 else None), None, None

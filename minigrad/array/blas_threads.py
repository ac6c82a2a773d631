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
    """Tries each count of `candidates` for `trial` steps, taking turns (after `warmup` steps at the BLAS's own count),
    keeps the one whose median step was the shortest, and tries them all again `every` steps later, doubling
    `every` each time the choice stays (so a quiet run pays for fewer trials as it goes). In a later round, a count
    whose step takes more than twice the chosen one's median is dropped at once: beside a busy program a trial of
    two threads costs one slow step, not three. close() gives the BLAS its own count back."""

    def __init__(self, blas: Any, candidates: list[int], warmup: int = 5, trial: int = 3, every: int = 50) -> None:
        if len(candidates) < 2 or min(candidates) < 1:
            raise ValueError(f"BlasThreads: expected two or more thread counts of at least 1, got {candidates}")
        self.blas, self.candidates, self.trial, self.every = blas, candidates, trial, every
        self.wait = warmup  # steps until the next round of trials
        self.queue: list[int] = [] if warmup > 0 else self.round()  # the counts of this round's steps still to run
        self.times: dict[int, list[float]] = {}  # this round's step times per count
        self.chosen: int | None = None
        self.chosen_ms = 0.0  # the chosen count's median step at the last round, in seconds
        self.limit: Any = None  # threadpoolctl's first limiter, whose restore gives the BLAS its own count back
        self.current = 0  # the count set last (0: none yet)

    def after_step(self, seconds: float) -> str | None:
        """Count the step that took `seconds`; at the end of a round keep the faster count; set the BLAS to the
        count of the next step where it changes. Returns a sentence saying what was chosen, after the first round
        only (for the run's log)."""
        said = None
        if self.queue:  # the step was a trial of queue[0]
            count = self.queue.pop(0)
            self.times.setdefault(count, []).append(seconds)
            if self.chosen is not None and count != self.chosen and seconds > 2 * self.chosen_ms:
                self.queue = [n for n in self.queue if n != count]  # clearly slower: no more steps at it
            if not self.queue:
                said = self.choose()
        else:
            self.wait -= 1
            if self.wait <= 0:  # a round starts with the next step
                self.queue = self.round()
        upcoming = self.queue[0] if self.queue else self.chosen
        if upcoming is not None:
            self.set(upcoming)
        return said

    def round(self) -> list[int]:
        """The counts of a round's steps, in order: `trial` steps at each candidate, taking turns (2, 1, 2, 1, ...),
        so that a machine that speeds up or slows down during the round, as at the start of a run, favours none."""
        return [n for _ in range(self.trial) for n in self.candidates]

    def choose(self) -> str | None:
        medians = {n: statistics.median(t) for n, t in self.times.items()}
        best = min(medians, key=lambda n: medians[n])
        first, stays = self.chosen is None, best == self.chosen
        self.chosen, self.chosen_ms, self.times = best, medians[best], {}
        self.every = self.every * 2 if stays else self.every
        self.wait = self.every
        if not first:
            return None
        said = ", ".join(f"{n} thread{'s' * (n > 1)} {1e3 * m:.1f} ms" for n, m in medians.items())
        return (f"BLAS threads: {best} (this run's steps, median of {self.trial} at each: {said}; tried again now and "
                "then; --blas-threads N or OPENBLAS_NUM_THREADS=N sets it)")

    def set(self, count: int) -> None:
        """The BLAS on `count` threads, where it changes."""
        if count == self.current:
            return
        if self.limit is None:
            self.limit = self.blas.limit(limits=count)
        else:
            self.blas.limit(limits=count)
        self.current = count

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

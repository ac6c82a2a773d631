"""train.py --dist mpi: two ranks under a real mpiexec train as one process on the same global batch
(same losses, same parameters, to float64 rounding), with a token-weighted gradient; an indivisible
batch is refused once; a run resumes, and stops on SIGTERM, with every rank at the same step; without
mpi4py, one line says what to install."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import train
from gptlab import run
from gptlab.checkpoint import load_checkpoint
from gptlab.settings import CHECKPOINT
from models import IGNORE_INDEX
from tests.distributed_worker import uneven_batch
from tests.test_distributed import MPIEXEC, needs_mpi, needs_mpi4py, run_worker

ROOT = Path(__file__).resolve().parents[1]
RUN = ["--task", "sort", "--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--batch-size", "8", "--samples", "0",
       "--no-explain", "--eval-interval", "3", "--dtype", "float64"]


def one_process(capsys: pytest.CaptureFixture, *argv: str) -> str:
    assert train.main(list(argv)) == 0
    return capsys.readouterr().out


def two_ranks(*argv: str, ranks: int = 2) -> subprocess.CompletedProcess:
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "train.py", "--dist", "mpi", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def progress(out: str) -> list[str]:
    """The lines that report the run (without tokens/s, which differs from run to run)."""
    return [re.sub(r" tokens_per_s=\S+", "", ln) for ln in out.splitlines() if ln.startswith(("step ", "final: "))]


def assert_same_run(a: str, b: str) -> None:
    """Two checkpoints hold the same weights and optimizer state, to float64 rounding, and the same step and
    data stream."""
    one, two = load_checkpoint(a), load_checkpoint(b)
    assert one["step"] == two["step"] and one["rng"]["data"] == two["rng"]["data"]
    for name, weight in one["model"].items():
        np.testing.assert_allclose(two["model"][name], weight, rtol=1e-12, atol=1e-14, err_msg=name)
    assert one["optim"]["param_groups"] == two["optim"]["param_groups"]
    for i, state in one["optim"]["state"].items():
        assert state["step"] == two["optim"]["state"][i]["step"]
        for name in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(two["optim"]["state"][i][name], state[name], rtol=1e-12, atol=1e-14)


@needs_mpi
def test_two_ranks_train_as_one_process_on_the_whole_batch(tmp_path, capsys):
    alone = one_process(capsys, *RUN, "--steps", "9", "--out", str(tmp_path / "one"))
    result = two_ranks(*RUN, "--steps", "9", "--out", str(tmp_path / "two"))
    assert result.returncode == 0, result.stderr
    assert "8 sequences on cpu, 4 on each of 2 ranks" in result.stdout
    assert len(progress(result.stdout)) == 4, "rank 0 alone prints: steps 3, 6, 9 and the final line"
    assert progress(result.stdout) == progress(alone)
    assert_same_run(str(tmp_path / "one"), str(tmp_path / "two"))


@needs_mpi
def test_two_ranks_share_the_accumulation_passes_as_nanogpt_s_ddp_does(tmp_path, capsys):
    """--grad-accum 2 on 2 ranks: one pass of --batch-size on each, as nanoGPT divides gradient_accumulation_steps by
    the world size; the same run as one process taking both passes."""
    argv = [*RUN, "--batch-size", "4", "--grad-accum", "2", "--steps", "6"]
    alone = one_process(capsys, *argv, "--out", str(tmp_path / "one"))
    assert "6 steps of 8 sequences (2 passes of 4) on cpu" in alone
    result = two_ranks(*argv, "--out", str(tmp_path / "two"))
    assert result.returncode == 0, result.stderr
    assert "6 steps of 8 sequences (2 passes of 4) on cpu, 4 on each of 2 ranks" in result.stdout
    assert progress(result.stdout) == progress(alone)
    assert_same_run(str(tmp_path / "one"), str(tmp_path / "two"))


@needs_mpi
def test_gradient_is_the_mean_over_every_scored_target_not_a_mean_of_the_ranks_means(tmp_path):
    model, x, y = uneven_batch()  # rank 0's rows score 1 target, rank 1's score 9
    model(x, y)[1].backward()
    whole = [p.grad for p in model.parameters()]
    mean_of_means = []
    for rows in (slice(0, 2), slice(2, 4)):
        m, _, _ = uneven_batch()
        m(x[rows], y[rows])[1].backward()
        mean_of_means.append([p.grad / 2 for p in m.parameters()])
    assert not np.allclose(whole[0], mean_of_means[0][0] + mean_of_means[1][0]), "the batch must tell them apart"
    assert (y[:2] != IGNORE_INDEX).sum() == 1 and (y[2:] != IGNORE_INDEX).sum() == 9
    for rank in run_worker(tmp_path, "weighted_gradients"):
        for got, want in zip(rank["result"], whole, strict=True):
            np.testing.assert_allclose(np.array(got), want, rtol=1e-12, atol=1e-15)


@needs_mpi
def test_ranks_on_one_machine_share_its_cores(tmp_path):
    pytest.importorskip("threadpoolctl", reason="limiting NumPy's BLAS threads needs threadpoolctl (the mpi extra)")
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert [r["result"] for r in run_worker(tmp_path, "cores")] == [[2, [share]], [2, [share]]]


@needs_mpi
def test_a_batch_that_does_not_split_evenly_is_refused_once(tmp_path):
    result = two_ranks(*RUN, "--batch-size", "7", "--out", str(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["train.py: error: --batch-size 7 x --grad-accum 1 = 7 sequences per step do not split evenly "
                     "over 2 ranks; make --grad-accum (as nanoGPT asks) or --batch-size a multiple of 2"]
    assert not (tmp_path / CHECKPOINT).exists()


@needs_mpi
def test_two_ranks_resume_as_one_process_does(tmp_path, capsys):
    one_process(capsys, *RUN, "--steps", "4", "--out", str(tmp_path / "one"))
    alone = one_process(capsys, "--resume", "--steps", "8", "--out", str(tmp_path / "one"))
    assert two_ranks(*RUN, "--steps", "4", "--out", str(tmp_path / "two")).returncode == 0
    result = two_ranks("--resume", "--steps", "8", "--out", str(tmp_path / "two"))
    assert result.returncode == 0, result.stderr
    assert "resumed from" in result.stdout and result.stdout.count("final: ") == 1
    assert progress(result.stdout) == progress(alone)
    assert_same_run(str(tmp_path / "one"), str(tmp_path / "two"))


def failing_rank(tmp_path: Path, when: str, rank: int) -> subprocess.CompletedProcess:
    """The job of tests/failing_rank.py: rank `rank` alone fails `when` ("check", "work", "crash")."""
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "tests.failing_rank", when, str(rank), *RUN, "--steps", "2",
           "--out", str(tmp_path)]
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as hung:
        raise AssertionError(f"the job hung: a rank waits for one that has gone ({hung.stderr!r:.400})") from None


@needs_mpi
@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_that_fails_its_checks_ends_the_job_with_its_message_said_once(tmp_path, rank):
    """A rank that failed its argument check exited while the other waited forever in a collective. Now the ranks
    agree on their checks first: the job ends, rank 0 saying what the failing rank met, once."""
    result = failing_rank(tmp_path, "check", rank)
    assert result.returncode == 2
    said = f"{'rank 1: ' if rank else ''}rank {rank}'s machine has no memory to spare"
    assert result.stderr.strip().splitlines() == [f"train.py: error: {said}"]
    assert not (tmp_path / CHECKPOINT).exists()


@needs_mpi
@pytest.mark.parametrize("when, rank", [("work", 1), ("work", 0), ("crash", 1)])
def test_a_rank_that_fails_while_training_ends_the_whole_job_with_its_message(tmp_path, when, rank):
    """Once training has begun, a failing rank says what happened, named, and ends the job (MPI_Abort), however the
    other ranks wait; an unforeseen error shows its traceback."""
    result = failing_rank(tmp_path, when, rank)
    assert result.returncode != 0
    if when == "crash":
        assert "Traceback" in result.stderr and "RuntimeError: rank 1 lost its data" in result.stderr
    else:
        prefix = "rank 1: " if rank else ""
        assert f"train.py: error: {prefix}rank {rank} lost its data" in result.stderr


def run_and_signal(cmd: list[str], out_dir: Path, send: Callable[[subprocess.Popen], None]) -> tuple[str, str]:
    """Start a training job, signal it (send(job)) once it has written a checkpoint, and check that it
    stops with status 130; its stdout and stderr."""
    job = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (out_dir / CHECKPOINT).exists() and time.time() < deadline:
            time.sleep(0.05)
        send(job)
        out, err = job.communicate(timeout=30)
    finally:
        if job.poll() is None:  # a rank that never stopped: end the job rather than leave it running
            job.kill()
            job.communicate()
    assert job.returncode == 130, err
    return out, err


@needs_mpi
def test_sigterm_on_the_job_stops_every_rank_after_the_same_step(tmp_path):
    cmd = [MPIEXEC, "-n", "2", sys.executable, "train.py", "--dist", "mpi", *RUN, "--steps", "100000",
           "--checkpoint-interval", "5", "--out", str(tmp_path)]
    out, err = run_and_signal(cmd, tmp_path, lambda job: job.send_signal(signal.SIGTERM))  # to every rank
    [step] = re.findall(r"stopped at step (\d+)", out)  # said once, by rank 0
    assert load_checkpoint(str(tmp_path))["step"] == int(step)
    assert "mpiexec -n 2 python train.py --resume" in out


@needs_mpi
def test_ctrl_c_that_reaches_one_rank_stops_them_all(tmp_path):
    """The stop flag is summed over the ranks each step: a signal to rank 0 alone stops rank 1 too."""
    cmd = [MPIEXEC, "-n", "2", sys.executable, "train.py", "--dist", "mpi", *RUN, "--steps", "100000",
           "--checkpoint-interval", "5", "--out", str(tmp_path)]
    # the lock file holds the pid of the rank that writes: rank 0
    out, err = run_and_signal(cmd, tmp_path, lambda _: os.kill(int((tmp_path / run.LOCK).read_text()), signal.SIGINT))
    [step] = re.findall(r"stopped at step (\d+)", out)
    assert load_checkpoint(str(tmp_path))["step"] == int(step)


@needs_mpi4py
def test_a_plain_process_with_dist_mpi_is_a_world_of_one(tmp_path, capsys):
    alone = one_process(capsys, *RUN, "--steps", "3", "--out", str(tmp_path / "one"))
    result = subprocess.run([sys.executable, "train.py", "--dist", "mpi", *RUN, "--steps", "3", "--out",
                             str(tmp_path / "mpi")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert progress(result.stdout) == progress(alone)


def test_dist_mpi_without_mpi4py_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` raise ImportError
    code = train.main([*RUN, "--dist", "mpi", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "pip install mpi4py mpich" in err
    assert not any(tmp_path.iterdir())


"""minigrad.distributed under a real `mpiexec -n 2`: all_reduce sums over the ranks, broadcast makes
every rank's parameters rank 0's, barrier waits for every rank; a plain process is a world of one.
Each check runs in tests/distributed_worker.py, whose ranks write what they got as JSON files."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minigrad import distributed
from tests.distributed_worker import inputs

ROOT = Path(__file__).resolve().parents[1]
# mpiexec next to this Python first: `pip install mpich` puts it in the virtual environment's bin/
MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
HAS_MPI4PY = importlib.util.find_spec("mpi4py") is not None
needs_mpi4py = pytest.mark.skipif(not HAS_MPI4PY, reason=f"needs mpi4py: {distributed.INSTALL}")
needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or not HAS_MPI4PY,
    reason=f"needs {'mpiexec' if MPIEXEC is None else 'mpi4py'}: {distributed.INSTALL}")


def run_worker(out: Path, *args: str, ranks: int | None = 2) -> list[dict]:
    """Run the worker on `ranks` processes under mpiexec (None: one plain process); each rank's report."""
    launcher = [] if ranks is None else [MPIEXEC, "-n", str(ranks)]
    worker = [sys.executable, "-m", "tests.distributed_worker"]
    result = subprocess.run([*launcher, *worker, *args, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    reports = [json.loads(f.read_text()) for f in sorted(out.glob("rank*.json"))]
    assert [(r["rank"], r["size"]) for r in reports] == [(i, ranks or 1) for i in range(ranks or 1)]
    return reports


@needs_mpi
def test_all_reduce_sums_over_ranks(tmp_path, device):
    expected = [a + b for a, b in zip(inputs(0), inputs(1), strict=True)]  # a sum of two rounds once: exact
    for rank in run_worker(tmp_path, "all_reduce", "--device", device):
        for (dtype, got), want in zip(rank["result"], expected, strict=True):
            assert dtype == want.dtype.name
            np.testing.assert_array_equal(np.array(got, dtype=dtype), want)


@needs_mpi
@pytest.mark.cuda
def test_gpu_arrays_through_host_memory_without_nccl(tmp_path):
    expected = [a + b for a, b in zip(inputs(0), inputs(1), strict=True)]
    for rank in run_worker(tmp_path, "all_reduce", "--device", "cuda", "--staged"):
        assert not rank["nccl"]
        for (dtype, got), want in zip(rank["result"], expected, strict=True):
            np.testing.assert_array_equal(np.array(got, dtype=dtype), want)


@needs_mpi
def test_broadcast_makes_every_rank_s_parameters_rank_0_s(tmp_path, device):
    reports = run_worker(tmp_path, "broadcast", "--device", device)
    (before_0, after_0), (before_1, after_1) = (r["result"] for r in reports)
    assert before_0 != before_1, "the ranks were seeded differently, so they must start apart"
    assert after_0[0] == before_0, "rank 0 keeps its own parameters"
    assert after_1 == after_0


@needs_mpi
def test_barrier_waits_for_every_rank(tmp_path):
    assert [r["result"] for r in run_worker(tmp_path, "barrier")] == [True, True]


@needs_mpi4py
def test_a_plain_process_is_a_world_of_one(tmp_path):
    [rank] = run_worker(tmp_path, "all_reduce", ranks=None)
    for (dtype, got), want in zip(rank["result"], inputs(0), strict=True):
        np.testing.assert_array_equal(np.array(got, dtype=dtype), want)


def test_world_of_one_without_mpi_leaves_arrays_alone():
    world = distributed.World()
    arrays = inputs(0)
    world.all_reduce(arrays)
    world.broadcast(arrays)
    world.barrier()
    assert (world.rank, world.size) == (0, 1)
    for got, want in zip(arrays, inputs(0), strict=True):
        np.testing.assert_array_equal(got, want)


def test_without_mpi4py_init_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` raise ImportError
    with pytest.raises(RuntimeError, match=r"pip install mpi4py mpich"):
        distributed.init()


def test_minigrad_imports_without_mpi4py():
    code = "import sys; sys.modules['mpi4py'] = None; import minigrad.distributed; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr

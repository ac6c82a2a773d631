"""The pieces of scripts/gpu_check.sh that a machine without a GPU can check: GPU tests fail rather than
skip when MINIGRAD_REQUIRE_CUDA=1, and scripts/compare_curves.py passes equal curves and nothing else."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minigrad.array import backend

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_curves", ROOT / "scripts" / "compare_curves.py")
compare_curves = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_curves)


def run_pytest(*args: str, require: bool) -> tuple[int, dict[str, int], str]:
    """pytest in a fresh process on this repository: exit status, {outcome: count}, output."""
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_REQUIRE_CUDA"}
    if require:
        env["MINIGRAD_REQUIRE_CUDA"] = "1"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?|deselected)", summary)}
    return done.returncode, counts, done.stdout


# the "cuda" case of the device fixture, a test marked cuda, and a test meant for machines without a GPU
SELECTION = ["tests/test_backend.py", "-k", "check_device or test_to_numpy_and_to_device"]


@pytest.mark.skipif(backend.cuda_available(), reason="tests what a machine without a GPU does")
def test_gpu_tests_fail_rather_than_skip_when_a_gpu_is_required() -> None:
    code, counts, out = run_pytest(*SELECTION, require=False)
    assert code == 0 and counts.get("skipped") == 2 and counts.get("passed") == 3, out

    code, counts, out = run_pytest(*SELECTION, require=True)
    assert code == 1, out
    assert "skipped" not in counts, out
    assert counts.get("errors", counts.get("error")) == 2 and counts.get("passed") == 3, out
    for name in ("test_check_device_cuda_with_gpu", "test_to_numpy_and_to_device[cuda]"):
        assert f"ERROR at setup of {name}" in out, out
    assert "MINIGRAD_REQUIRE_CUDA=1, but device 'cuda'" in out


def test_compare_curves_self_test_on_the_cpu(tmp_path, capsys) -> None:
    argv = ["--devices", "cpu", "cpu", "--steps", "6", "--eval-interval", "3", "--out", str(tmp_path)]
    assert compare_curves.main(argv) == 0
    out = capsys.readouterr().out
    assert "evaluated loss: agree" in out and "gradient norm: agree" in out and "curves agree" in out


def test_compare_curves_refuses_nan_incomplete_and_different_curves() -> None:
    assert compare_curves.compare([1.0, 0.5], [1.0, 0.5], 2, 1e-3)[0]
    assert compare_curves.compare([1.0, 0.5], [1.0, 0.5001], 2, 1e-3)[0]
    assert not compare_curves.compare([1.0, 0.5], [1.0, 0.51], 2, 1e-3)[0]
    ok, _, why = compare_curves.compare([1.0, math.nan], [1.0, math.nan], 2, 1e-3)
    assert not ok and "not finite" in why
    ok, _, why = compare_curves.compare([1.0], [1.0], 2, 1e-3)
    assert not ok and "incomplete" in why
    assert not compare_curves.compare([], [], 2, 1e-3)[0]


@pytest.mark.skipif(backend.cuda_available(), reason="tests what a machine without a GPU does")
def test_compare_curves_without_a_gpu_exits_2_before_training(capsys) -> None:
    assert compare_curves.main(["--steps", "1"]) == 2
    captured = capsys.readouterr()
    assert "device 'cuda' requested" in captured.err and "== run" not in captured.out

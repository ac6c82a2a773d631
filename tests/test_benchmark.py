"""The benchmark's code path still runs, and a float32 training step never makes a float64 array."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench  # noqa: E402


@pytest.mark.parametrize("config", ["tiny", "small"])
def test_float32_training_step_makes_no_float64_array(config):
    model, _, x, y = bench.minigrad_setup(bench.CONFIGS[config])
    assert bench.float64_free(model, x, y)


def test_the_float64_detector_can_fail(monkeypatch):
    """A primitive that keeps a float64 array must be caught, even one its backward never uses (the
    engine itself already refuses a float64 gradient for a float32 input)."""
    from minigrad import functional as F

    forward = F.GeluFunction.forward

    def upcasting(self, x):
        y = forward(self, x)
        self.spare = x.astype("float64")
        return y

    monkeypatch.setattr(F.GeluFunction, "forward", upcasting)
    model, _, x, y = bench.minigrad_setup(bench.CONFIGS["tiny"])
    assert not bench.float64_free(model, x, y)


def test_benchmark_step_runs_without_torch():
    result = bench.compare("tiny", steps=1, warmup=0, with_torch=False)
    assert result["float64_free"] and result["minigrad"]["step"] > 0

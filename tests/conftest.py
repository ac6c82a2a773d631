"""Shared fixtures: `device` reruns a test on "cpu" and "cuda" (skipped where no GPU is found), and
`rand` builds seeded float64 inputs on that device. Results are compared as NumPy arrays
(`backend.to_numpy`), so the same test body runs unchanged on both backends.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend

NO_CUDA_REASON = "device 'cuda': minigrad.backend.cuda_available() is False (CuPy not installed or no GPU found)"


@pytest.fixture(params=["cpu", "cuda"])
def device(request: pytest.FixtureRequest) -> str:
    if request.param == "cuda" and not backend.cuda_available():
        pytest.skip(NO_CUDA_REASON)
    return request.param


@pytest.fixture
def rand(device: str):
    """rand(*shape, positive=False, requires_grad=True, dtype=float64): a seeded tensor on `device`.

    Values are N(0, 1), or U(0.5, 2) when `positive` (for log, sqrt, division). Each call draws new
    values from one generator per test, so a test is reproducible but its inputs differ.
    """
    rng = np.random.default_rng(1234)

    def make(*shape: int, positive: bool = False, requires_grad: bool = True, dtype=mg.float64) -> mg.Tensor:
        values = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
        return mg.tensor(values, requires_grad=requires_grad, dtype=dtype, device=device)

    return make


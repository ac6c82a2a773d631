"""Shared fixtures: `device` reruns a test on "cpu" and "cuda", and `rand` builds seeded float64 inputs
on that device. Results are compared as NumPy arrays (`backend.to_numpy`), so the same test body runs
unchanged on both backends.

A test that needs a GPU carries the `cuda` mark (the `device` fixture's "cuda" case carries it too), so
`pytest -k cuda` selects them all. Where no GPU is found they skip, with a reason; with
MINIGRAD_REQUIRE_CUDA=1 (scripts/gpu_check.sh sets it) they fail instead, so a run on a GPU machine
cannot pass by skipping. Tests meant for machines without a GPU (the error `--device cuda` gives
there) carry no mark: they skip on a GPU machine either way.

With MINIGRAD_CUPY_STANDIN=1 the "cuda" cases run on tests/fake_cupy.py, a strict CuPy stand-in, installed here
before minigrad is imported (`MINIGRAD_CUPY_STANDIN=1 pytest -m cuda`, as .ci/run does; docs/gpu.md).

`folders` and `float64_reference` are the Hugging Face folders of tests/hf_folders.py, built once for
every test that loads or fine-tunes one, and the float64 reference they are compared with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fake_cupy
import numpy as np
import pytest

if fake_cupy.active():
    fake_cupy.install()

import minigrad as mg  # noqa: E402  (after the stand-in, which must be in place first)
from minigrad.array import backend  # noqa: E402

NO_CUDA_REASON = "device 'cuda': minigrad.array.backend.cuda_available() is False (CuPy not installed or no GPU found)"
REQUIRE_CUDA = "MINIGRAD_REQUIRE_CUDA"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of a test marked `cuda`: skip it where no GPU is found, or fail it if one is required."""
    if item.get_closest_marker("cuda") is None or backend.cuda_available():
        return
    if os.environ.get(REQUIRE_CUDA) == "1":
        pytest.fail(f"{REQUIRE_CUDA}=1, but {NO_CUDA_REASON}", pytrace=False)
    pytest.skip(NO_CUDA_REASON)


@pytest.fixture(scope="session", autouse=True)
def measured_choices_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What minigrad/array/machine.py measures and caches (the sgemm peak, mg.compiled()'s choices) goes to a folder of
    the session's, never to the user's cache: a test neither reads a stale figure nor leaves one behind."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINIGRAD_CACHE_DIR", str(tmp_path_factory.mktemp("machine-cache")))
        yield


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request: pytest.FixtureRequest) -> str:
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



@pytest.fixture(scope="session")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Every folder of hf_folders.MODELS: name -> (its path, the transformers model it holds, in float64). Importing
    hf_folders skips the test, with the reason, where a package it builds with is missing."""
    import hf_folders

    return hf_folders.build_folders(tmp_path_factory.mktemp("hf"))


@pytest.fixture
def float64_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    import hf_folders

    hf_folders.use_float64_reference(monkeypatch)

"""micrograd's demo written the PyTorch way (examples/micrograd_demo.py) learns its two moons as PyTorch's does: a
median training accuracy of at least 99% over 10 seeds, for minigrad and for the same program in torch. The other
familiar programs (linear regression, an MLP classifier, a bigram model) run in docs/pytorch-way.md.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from examples.micrograd_demo import accuracies, make_moons, train, train_torch
from minigrad import nn

SEEDS = 10


def test_the_moons_are_two_interleaved_half_circles():
    X, y = make_moons(100, noise=0.0, seed=0)
    upper, lower = X[y < 0], X[y > 0]
    assert len(upper) == len(lower) == 50
    np.testing.assert_allclose(np.hypot(*upper.T), 1.0)  # on the unit circle, above the axis
    np.testing.assert_allclose(np.hypot(lower[:, 0] - 1, lower[:, 1] - 0.5), 1.0)  # centre (1, 0.5), below it
    assert (upper[:, 1] >= 0).all() and (lower[:, 1] <= 0.5).all()
    noisy, _ = make_moons(100, noise=0.1, seed=0)
    assert 0.05 < np.std(noisy - X) < 0.15


def test_micrograd_s_demo_reaches_99_percent_as_in_pytorch():
    found = accuracies(train, SEEDS)
    assert statistics.median(found) >= 0.99, found
    assert min(found) >= 0.9, found  # no seed is left far behind


def test_with_gpt2_s_init_in_every_layer_the_demo_falls_short(monkeypatch):
    """What nn.Linear's default used to be, N(0, 0.02) and biases 0: the same program stays below 95% (87% median)."""

    class GPT2Linear(nn.Linear):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            nn.init.normal_(self.weight, 0.0, 0.02)
            nn.init.zeros_(self.bias)

    monkeypatch.setattr(nn, "Linear", GPT2Linear)
    assert statistics.median(accuracies(train, 5)) < 0.95  # seeds 0-4: 84-87%


def test_pytorch_s_own_run_of_the_demo_reaches_99_percent_too():
    pytest.importorskip("torch", reason="PyTorch is not installed: the reference run is skipped")
    found = accuracies(train_torch, SEEDS)
    assert statistics.median(found) >= 0.99, found

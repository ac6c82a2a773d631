"""Numerical stability of the fused ops: huge logits, a huge spread between logits, a constant row in
layer norm, and -inf from a mask. The references are independent of the implementation: softmax is
shift-invariant (so softmax(x + 1e4) must equal softmax(x), computed naively for small x), and
np.logaddexp.reduce is a stable log-sum-exp.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as F


def naive_softmax(x: np.ndarray) -> np.ndarray:
    """exp / sum(exp), with no max subtracted: fine for the small logits it is used on here."""
    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)


def logsumexp(x: np.ndarray) -> np.ndarray:
    return np.logaddexp.reduce(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("shift", [1e4, -1e4, 3e5])
def test_softmax_of_huge_logits(rand, shift) -> None:
    x = rand(3, 5)
    y = F.softmax(x + shift)
    assert np.isfinite(y.numpy()).all()
    np.testing.assert_allclose(y.numpy(), naive_softmax(x.numpy()), rtol=1e-9, atol=1e-15)
    g = np.random.default_rng(0).standard_normal((3, 5))
    y.backward(g)
    s = naive_softmax(x.numpy())
    expected = s * (g - (g * s).sum(-1, keepdims=True))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shift", [1e4, -1e4])
def test_log_softmax_of_huge_logits(rand, shift) -> None:
    x = rand(3, 5)
    y = F.log_softmax(x + shift)
    assert np.isfinite(y.numpy()).all()
    xn = x.numpy()
    np.testing.assert_allclose(y.numpy(), xn - logsumexp(xn), rtol=1e-9, atol=1e-9)


def test_softmax_and_log_softmax_with_a_1e4_spread(device) -> None:
    x = np.array([[0.0, -1e4, 2.0, 0.5], [1e4, 0.0, -1e4, 1e4 - 1.0]])
    t = mg.tensor(x, requires_grad=True, device=device)
    y = F.softmax(t)
    expected = np.exp(x - logsumexp(x))  # e^-1e4 underflows to exactly 0
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-12, atol=0)
    assert y.numpy()[0, 1] == 0.0 and y.numpy()[1, 1] == 0.0 and y.numpy()[1, 2] == 0.0
    lp = F.log_softmax(t)
    assert np.isfinite(lp.numpy()).all()  # no log(0): -1e4 - logsumexp, not log of an underflowed 0
    # the reference subtracts two numbers near 1e4, so it is itself only good to a few ulp(1e4) = 1.8e-12
    np.testing.assert_allclose(lp.numpy(), x - logsumexp(x), rtol=1e-12, atol=1e-11)
    lp.backward(np.ones(x.shape))
    assert np.isfinite(t.grad.numpy()).all()
    np.testing.assert_allclose(t.grad.numpy(), 1 - x.shape[1] * expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale", [1e4, -1e4])
def test_cross_entropy_of_huge_logits(rand, scale) -> None:
    """Logits spread by 1e4 (x * 1e4): the loss is dominated by the margin, exp() alone would overflow."""
    x = rand(2, 3, 5)
    targets = np.array([[1, 0, 4], [2, 2, 3]])
    big = x * scale
    loss = F.cross_entropy(big.view(6, 5), targets.reshape(6))
    bn = big.numpy().reshape(6, 5)
    lp = bn - logsumexp(bn)
    expected = -lp[np.arange(6), targets.reshape(-1)].mean()
    assert np.isfinite(loss.item())
    assert loss.item() == pytest.approx(expected, rel=1e-9)
    loss.backward()
    dx = x.grad.numpy()
    assert np.isfinite(dx).all()
    one_hot = np.eye(5)[targets.reshape(-1)]
    np.testing.assert_allclose(dx, (scale * (np.exp(lp) - one_hot) / 6).reshape(2, 3, 5), rtol=1e-9, atol=1e-6)


def test_cross_entropy_of_shifted_logits(rand) -> None:
    x = rand(4, 6)
    targets = np.array([0, 5, 2, 2])
    small = F.cross_entropy(x, targets).item()
    assert F.cross_entropy(x + 1e4, targets).item() == pytest.approx(small, rel=1e-9)
    assert F.cross_entropy(x - 1e4, targets).item() == pytest.approx(small, rel=1e-9)


def test_cross_entropy_float32_huge_logits(rand) -> None:
    x = rand(4, 6, dtype=mg.float32)
    loss = F.cross_entropy(x * 1e4, np.array([0, 5, 2, 2]))
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("value", [0.0, 3.0, -1e4])
def test_layer_norm_of_a_constant_row(rand, device, value) -> None:
    x = mg.tensor(np.full((2, 6), value), requires_grad=True, device=device)
    w, b = rand(6), rand(6)
    y = F.layer_norm(x, 6, w, b)
    np.testing.assert_allclose(y.numpy(), np.broadcast_to(b.numpy(), (2, 6)), atol=1e-12)  # x - mean = 0
    g = np.random.default_rng(0).standard_normal((2, 6))
    y.backward(g)
    dx = x.grad.numpy()
    assert np.isfinite(dx).all()
    # with xhat = 0: dx = rstd * (dxhat - mean(dxhat)), rstd = 1 / sqrt(eps), dxhat = g * w
    dxhat = g * w.numpy()
    np.testing.assert_allclose(dx, (dxhat - dxhat.mean(-1, keepdims=True)) / np.sqrt(1e-5), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(w.grad.numpy(), 0.0, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), g.sum(0), rtol=1e-12)


def test_layer_norm_of_a_constant_row_float32(device) -> None:
    x = mg.tensor(np.full((3, 8), 7.0, dtype=np.float32), requires_grad=True, device=device)
    y = F.layer_norm(x, 8)
    y.backward(np.random.default_rng(0).standard_normal((3, 8)))
    assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all()


def test_causal_mask_then_softmax(rand, device) -> None:
    T = 5
    x = rand(2, T, T)
    mask = F.causal_mask(T, device=device)  # True: may attend
    y = F.softmax(mg.where(mask, x, -np.inf))
    yn, future = y.numpy(), ~mask.numpy()
    assert (yn[:, future] == 0.0).all()  # exact zeros, not tiny numbers
    assert np.isfinite(yn).all()
    xn = x.numpy()
    for i in range(T):  # row i is a softmax over keys 0..i only
        np.testing.assert_allclose(yn[:, i, : i + 1], naive_softmax(xn[:, i, : i + 1]), rtol=1e-12)
    g = np.random.default_rng(0).standard_normal(x.shape)
    y.backward(g)
    dx = x.grad.numpy()
    assert np.isfinite(dx).all()
    assert (dx[:, future] == 0.0).all()  # masked positions get no gradient
    for i in range(T):
        s, gi = yn[:, i, : i + 1], g[:, i, : i + 1]
        np.testing.assert_allclose(dx[:, i, : i + 1], s * (gi - (gi * s).sum(-1, keepdims=True)), rtol=1e-10,
                                   atol=1e-14)

"""The losses composed of primitives (F.l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div,
cosine_embedding_loss, margin_ranking_loss) and their layers, against PyTorch: every reduction, weights, beta/delta,
log_target and margins; values and float64 gradients of both inputs for a random upstream gradient.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")
TF = torch.nn.functional
R = np.random.default_rng(0)


def inputs(name):
    """(differentiable inputs, constant ones) for each loss, float64 arrays."""
    x, t = R.standard_normal((3, 4)), R.standard_normal((3, 4))
    if name == "binary_cross_entropy":
        return [R.uniform(0.05, 0.95, (3, 4)), R.uniform(0, 1, (3, 4))], []
    if name == "kl_div":
        logp = np.log(R.dirichlet(np.ones(4), 3))
        return [logp], [R.dirichlet(np.ones(4), 3) * (R.random((3, 4)) > 0.2)]  # some targets 0 (no gradient there)
    if name == "cosine_embedding_loss":
        return [x, t], [np.array([1.0, -1.0, -1.0])]
    if name == "margin_ranking_loss":
        return [x[0], t[0]], [np.array([1.0, -1.0, 1.0, -1.0])]
    return [x, t], []


CASES = [("l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0}),
         ("huber_loss", {"delta": 0.7}), ("binary_cross_entropy", {}), ("kl_div", {}),
         ("cosine_embedding_loss", {"margin": 0.1}), ("margin_ranking_loss", {"margin": 0.3})]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name, kwargs", CASES, ids=[f"{n}{kw}" for n, kw in CASES])
def test_loss_matches_pytorch_values_and_gradients(name, kwargs, reduction):
    grads, constants = inputs(name)
    xs = [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in grads]
    ts = [torch.tensor(a, requires_grad=True) for a in grads]
    y = getattr(F, name)(*xs, *[mg.tensor(c) for c in constants], reduction=reduction, **kwargs)
    t_y = getattr(TF, name)(*ts, *[torch.tensor(c) for c in constants], reduction=reduction, **kwargs)
    np.testing.assert_allclose(y.numpy(), t_y.detach().numpy(), atol=1e-12, rtol=1e-9)
    dout = R.standard_normal(t_y.shape)
    (y * mg.tensor(dout)).sum().backward()
    t_y.backward(torch.tensor(dout))
    for i, (x, t) in enumerate(zip(xs, ts, strict=True)):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-10, rtol=1e-7, err_msg=f"input {i}")


def test_kl_div_batchmean_log_target_and_bce_weight_and_clamp_as_pytorch():
    logp, logq = np.log(R.dirichlet(np.ones(5), 4)), np.log(R.dirichlet(np.ones(5), 4))
    for kwargs in ({"reduction": "batchmean"}, {"reduction": "batchmean", "log_target": True}):
        target = logq if kwargs.get("log_target") else np.exp(logq)
        ours = nn.KLDivLoss(**kwargs)(mg.tensor(logp), mg.tensor(target))
        np.testing.assert_allclose(ours.item(), TF.kl_div(torch.tensor(logp), torch.tensor(target), **kwargs).item(),
                                   rtol=1e-12)
    p, t, w = np.array([0.0, 1.0, 0.3, 1.0]), np.array([1.0, 0.0, 0.5, 1.0]), np.array([1.0, 2.0, 0.5, 3.0])
    ours = nn.BCELoss(weight=mg.tensor(w))(mg.tensor(p), mg.tensor(t))  # log 0 clamped to -100, as PyTorch's
    theirs = torch.nn.BCELoss(weight=torch.tensor(w))(torch.tensor(p), torch.tensor(t))
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-12)
    with pytest.raises(ValueError, match="must be probabilities, in \\[0, 1\\]; for logits use"):
        F.binary_cross_entropy(mg.tensor([1.5]), mg.tensor([1.0]))


def test_loss_layers_hold_their_options():
    x, t = R.standard_normal((2, 3)), R.standard_normal((2, 3))
    for name, kwargs in [("L1Loss", {}), ("SmoothL1Loss", {"beta": 0.3}), ("HuberLoss", {"delta": 2.0}),
                         ("L1Loss", {"reduction": "sum"}), ("HuberLoss", {"reduction": "none"})]:
        ours = getattr(nn, name)(**kwargs)(mg.tensor(x), mg.tensor(t))
        theirs = getattr(torch.nn, name)(**kwargs)(torch.tensor(x), torch.tensor(t))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, err_msg=name)
    y = np.array([1.0, -1.0])
    for name in ("CosineEmbeddingLoss", "MarginRankingLoss"):
        a, b = (x, t) if name == "CosineEmbeddingLoss" else (x[:, 0], t[:, 0])
        ours = getattr(nn, name)(margin=0.2)(mg.tensor(a), mg.tensor(b), mg.tensor(y))
        theirs = getattr(torch.nn, name)(margin=0.2)(torch.tensor(a), torch.tensor(b), torch.tensor(y))
        np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-12, err_msg=name)
    with pytest.raises(ValueError, match="L1Loss: reduction must be 'mean', 'sum' or 'none', got 'batchmean'"):
        nn.L1Loss(reduction="batchmean")
    with pytest.raises(ValueError, match=r"target of shape \(3,\) for input of shape \(2, 3\)"):
        F.l1_loss(mg.zeros(2, 3), mg.zeros(3))

"""minigrad.distributions against torch.distributions: Categorical (from probs and from logits), Normal and
Bernoulli: log_prob, entropy, probs/logits, mean/variance and their float64 gradients; samples in shape and dtype,
with frequencies near the probabilities; Normal.rsample differentiable in loc and scale; kl_divergence.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import distributions as D

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")
TD = torch.distributions
R = np.random.default_rng(0)


def both(array):
    return mg.tensor(array, dtype=mg.float64, requires_grad=True), torch.tensor(array, requires_grad=True)


def check(ours, theirs, params, t_params):
    """Values equal; gradients of the parameters for a random upstream gradient equal."""
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    dout = R.standard_normal(theirs.shape)
    grads = mg.autograd.grad((ours * mg.tensor(dout)).sum(), params, retain_graph=True)  # serves the next check
    t_grads = torch.autograd.grad((theirs * torch.tensor(dout)).sum(), t_params, retain_graph=True)
    for g, t_g in zip(grads, t_grads, strict=True):
        np.testing.assert_allclose(g.numpy(), t_g.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_categorical_matches_pytorch(given):
    raw = R.random((3, 4)) + 0.1 if given == "probs" else R.standard_normal((3, 4))
    x, t_x = both(raw)
    d, t_d = D.Categorical(**{given: x}), TD.Categorical(**{given: t_x})
    actions = np.array([[0, 3, 2], [1, 1, 0]])  # (2 samples, 3 rows)
    check(d.log_prob(mg.tensor(actions)), t_d.log_prob(torch.tensor(actions)), [x], [t_x])
    check(d.entropy(), t_d.entropy(), [x], [t_x])
    check(d.probs, t_d.probs, [x], [t_x])
    check(d.logits, t_d.logits, [x], [t_x])
    sample = d.sample((500,))
    assert sample.shape == (500, 3) and sample.dtype == mg.int64 and d.sample().shape == (3,)
    freq = np.stack([(sample.numpy() == k).mean(0) for k in range(4)], -1)
    np.testing.assert_allclose(freq, t_d.probs.detach().numpy(), atol=0.1)


def test_normal_matches_pytorch_and_rsample_carries_gradients():
    (loc, t_loc), (scale, t_scale) = both(R.standard_normal(3)), both(R.random(3) + 0.5)
    d, t_d = D.Normal(loc, scale), TD.Normal(t_loc, t_scale)
    value = R.standard_normal((2, 3))
    check(d.log_prob(mg.tensor(value)), t_d.log_prob(torch.tensor(value)), [loc, scale], [t_loc, t_scale])
    check(d.entropy(), t_d.entropy(), [scale], [t_scale])  # loc plays no part
    assert d.mean is loc and d.stddev is scale and np.allclose(d.variance.numpy(), t_d.variance.detach().numpy())
    mg.manual_seed(0)
    z = d.rsample((4,))
    eps = (z - loc) / scale  # the noise drawn: dz/dloc = 1, dz/dscale = eps
    g_loc, g_scale = mg.autograd.grad(z.sum(), [loc, scale])
    np.testing.assert_allclose(g_loc.numpy(), [4.0] * 3)
    np.testing.assert_allclose(g_scale.numpy(), eps.detach().numpy().sum(0), rtol=1e-10)
    assert not d.sample((2,)).requires_grad and d.sample((2,)).shape == (2, 3)
    standard = D.Normal(0.0, 1.0).sample((4000,)).numpy()
    assert abs(standard.mean()) < 0.1 and abs(standard.std() - 1) < 0.1


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_bernoulli_matches_pytorch(given):
    raw = R.uniform(0.1, 0.9, 4) if given == "probs" else R.standard_normal(4)
    x, t_x = both(raw)
    d, t_d = D.Bernoulli(**{given: x}), TD.Bernoulli(**{given: t_x})
    value = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    check(d.log_prob(mg.tensor(value)), t_d.log_prob(torch.tensor(value)), [x], [t_x])
    check(d.entropy(), t_d.entropy(), [x], [t_x])
    check(d.probs, t_d.probs, [x], [t_x])
    sample = d.sample((800,))
    assert sample.shape == (800, 4) and sample.dtype == mg.float64
    np.testing.assert_allclose(sample.numpy().mean(0), t_d.probs.detach().numpy(), atol=0.1)


def test_kl_divergence_of_normals_and_categoricals():
    (mu, t_mu), (s, t_s) = both(R.standard_normal(3)), both(R.random(3) + 0.5)
    check(D.kl_divergence(D.Normal(mu, s), D.Normal(0.0, 1.0)),
          TD.kl_divergence(TD.Normal(t_mu, t_s), TD.Normal(0.0, 1.0)), [mu, s], [t_mu, t_s])
    (a, t_a), (b, t_b) = both(R.standard_normal((2, 4))), both(R.standard_normal((2, 4)))
    check(D.kl_divergence(D.Categorical(logits=a), D.Categorical(logits=b)),
          TD.kl_divergence(TD.Categorical(logits=t_a), TD.Categorical(logits=t_b)), [a, b], [t_a, t_b])
    with pytest.raises(ValueError, match="give either probs or logits, not both"):
        D.Categorical(probs=mg.ones(3), logits=mg.ones(3))


@pytest.mark.cuda
def test_distributions_sample_and_score_on_the_gpu_backend():
    logits = mg.tensor(R.standard_normal((2, 3)), device="cuda", requires_grad=True)
    d = D.Categorical(logits=logits)
    actions = d.sample((5,))
    assert actions.device == "cuda" and actions.shape == (5, 2)
    (d.log_prob(actions).sum() + d.entropy().sum()).backward()
    cpu = mg.tensor(logits.detach().cpu().numpy(), requires_grad=True)
    c = D.Categorical(logits=cpu)
    (c.log_prob(actions.cpu()).sum() + c.entropy().sum()).backward()
    np.testing.assert_allclose(logits.grad.cpu().numpy(), cpu.grad.numpy(), rtol=1e-10)
    z = D.Normal(mg.zeros(3, device="cuda"), 1.0).rsample((2,))
    assert z.device == "cuda" and D.Bernoulli(logits=mg.zeros(3, device="cuda")).sample().device == "cuda"

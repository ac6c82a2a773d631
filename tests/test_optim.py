"""Tests for minigrad.optim: AdamW (plain and fused) and SGD against the published update rules (in
plain NumPy, and against torch.optim where torch is installed), parameter groups, fused updates in
chunks, parameters that are views, gradient clipping, the warmup + cosine schedule, and optimizer
state that saves, loads and resumes training exactly.
"""

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend, nn, optim
from models import GPT, GPTConfig

STEPS = 5


class Problem:
    """Parameters of a small Linear + LayerNorm model (a matrix and three vectors), in float64, with the
    gradient of a fixed quadratic: g(p) = a * (p - target), with a different scale a per element."""

    def __init__(self, device="cpu"):
        mg.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)).to(device).to(mg.float64)
        rng = np.random.default_rng(0)
        self.shapes = {name: p.shape for name, p in self.model.named_parameters()}
        self.a = {name: rng.uniform(0.1, 3.0, s) for name, s in self.shapes.items()}
        self.target = {name: rng.standard_normal(s) for name, s in self.shapes.items()}
        for p in self.model.parameters():  # start away from zero, so weight decay has something to do
            p.data = backend.to_device(rng.standard_normal(p.shape), device)

    def values(self):
        return {name: p.numpy().copy() for name, p in self.model.named_parameters()}

    def grad(self, name, value):
        return self.a[name] * (value - self.target[name])

    def set_grads(self):
        for name, p in self.model.named_parameters():
            p.grad = backend.to_device(self.grad(name, p.numpy()), p.device)


def adamw_reference(p, g, m, v, t, lr, betas, eps, wd):
    """One AdamW step (Loshchilov & Hutter; torch.optim.AdamW's documented algorithm), in NumPy."""
    b1, b2 = betas
    p = p - lr * wd * p  # decoupled weight decay
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def sgd_reference(p, g, buf, lr, momentum, wd):
    """One SGD step with momentum and L2 weight decay (torch.optim.SGD with dampening 0), in NumPy."""
    g = g + wd * p
    buf = momentum * buf + g
    return p - lr * buf, buf


# ---- AdamW ----

def test_decay_groups_exempt_biases_and_layernorm_weights():
    problem = Problem()
    decay, no_decay = optim.decay_groups(problem.model.named_parameters(), 0.1)
    params = dict(problem.model.named_parameters())
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert [id(p) for p in decay["params"]] == [id(params["0.weight"])]
    assert [id(p) for p in no_decay["params"]] == [id(params[n]) for n in ("0.bias", "1.weight", "1.bias")]


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_adamw_matches_the_published_algorithm_step_by_step(device, fused):
    problem = Problem(device)
    lr, betas, eps, wd = 0.05, (0.8, 0.95), 1e-6, 0.1
    opt = optim.AdamW(optim.decay_groups(problem.model.named_parameters(), wd), lr=lr, betas=betas, eps=eps,
                      fused=fused)
    ref = problem.values()
    m = {name: np.zeros(s) for name, s in problem.shapes.items()}
    v = {name: np.zeros(s) for name, s in problem.shapes.items()}
    for t in range(1, STEPS + 1):
        problem.set_grads()
        opt.step()
        for name in ref:
            decay = wd if name == "0.weight" else 0.0  # only the matrix is in the decaying group
            g = problem.grad(name, ref[name])
            ref[name], m[name], v[name] = adamw_reference(ref[name], g, m[name], v[name], t, lr, betas, eps, decay)
        got = problem.values()
        for name in ref:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-14, err_msg=f"step {t}, {name}")
    start = Problem().values()
    assert all(np.abs(ref[n] - start[n]).min() > 1e-3 for n in ref)  # every element moved: the check had teeth


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_adamw_matches_torch(fused):
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch.optim comparison is skipped")
    problem = Problem()
    named = list(problem.model.named_parameters())
    opt = optim.AdamW(optim.decay_groups(named, 0.1), lr=0.05, betas=(0.8, 0.95), eps=1e-6, fused=fused)
    theirs = {name: torch.tensor(p.numpy(), requires_grad=True) for name, p in named}
    torch_opt = torch.optim.AdamW([
        {"params": [theirs["0.weight"]], "weight_decay": 0.1},
        {"params": [theirs[n] for n in ("0.bias", "1.weight", "1.bias")], "weight_decay": 0.0},
    ], lr=0.05, betas=(0.8, 0.95), eps=1e-6)
    for t in range(STEPS):
        problem.set_grads()
        for name, _ in named:
            theirs[name].grad = torch.from_numpy(problem.grad(name, theirs[name].detach().numpy()))
        opt.step()
        torch_opt.step()
        for name, p in named:
            np.testing.assert_allclose(p.numpy(), theirs[name].detach().numpy(), rtol=1e-12, atol=1e-14,
                                       err_msg=f"step {t + 1}, {name}")


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_parameters_without_a_gradient_are_left_alone(fused):
    problem = Problem()
    opt = optim.AdamW(problem.model.parameters(), lr=0.1, weight_decay=0.5, fused=fused)
    before = problem.values()
    problem.set_grads()
    problem.model[1].weight.grad = None
    opt.step()
    after = problem.values()
    np.testing.assert_array_equal(after["1.weight"], before["1.weight"])  # not even decayed
    assert not np.array_equal(after["0.weight"], before["0.weight"])


# ---- SGD ----

@pytest.mark.parametrize("momentum, wd", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.01)])
def test_sgd_matches_reference(device, momentum, wd):
    problem = Problem(device)
    lr = 0.1
    opt = optim.SGD(problem.model.parameters(), lr=lr, momentum=momentum, weight_decay=wd)
    ref = problem.values()
    buf = {name: np.zeros(s) for name, s in problem.shapes.items()}
    for t in range(STEPS):
        problem.set_grads()
        opt.step()
        for name in ref:
            ref[name], buf[name] = sgd_reference(ref[name], problem.grad(name, ref[name]), buf[name], lr, momentum, wd)
        got = problem.values()
        for name in ref:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-14, err_msg=f"step {t + 1}, {name}")


# ---- fused AdamW, and parameters that are views ----

@pytest.mark.parametrize("chunk", [None, 7], ids=["whole", "chunks of 7"])
def test_fused_adamw_gives_the_parameters_of_the_plain_rule(device, monkeypatch, chunk):
    def run(fused):
        problem = Problem(device)
        opt = optim.AdamW(optim.decay_groups(problem.model.named_parameters(), 0.1), lr=0.05, fused=fused)
        for _ in range(STEPS):
            problem.set_grads()
            opt.step()
        return problem.values()

    plain = run(False)
    pieces = []
    update = optim.AdamW.fused_update

    def counting_update(p, *rest):
        pieces.append(p.size)  # elements in this piece
        update(p, *rest)

    if chunk:
        monkeypatch.setattr(optim.AdamW, "piece", {"cpu": chunk, "cuda": chunk})
    monkeypatch.setattr(optim.AdamW, "fused_update", staticmethod(counting_update))
    fused = run(True)
    # step 1: the (3, 4) weight whole or in pieces of 7 and 5, then the three 3-vectors
    assert pieces[:5] == ([7, 5, 3, 3, 3] if chunk else [12, 3, 3, 3, 12])
    start = Problem().values()
    for name in plain:
        np.testing.assert_allclose(fused[name], plain[name], rtol=1e-12, atol=1e-14, err_msg=name)
        assert np.abs(fused[name] - start[name]).min() > 1e-3  # every element moved


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=1.0),
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: optim.AdamW(ps, lr=0.05, weight_decay=0.1),
    lambda ps: optim.AdamW(ps, lr=0.05, weight_decay=0.1, fused=True),
], ids=["SGD lr=1", "SGD momentum", "AdamW", "AdamW fused"])
@pytest.mark.parametrize("how", ["Parameter(W.T)", "weight.data = W.T"])
def test_a_parameter_that_is_a_transposed_view_is_updated_in_place(device, make, how):
    """The update lands in p.data itself, not in a flattened copy of it."""
    rng = np.random.default_rng(0)
    W = backend.to_device(rng.standard_normal((3, 5)), device)
    if how == "Parameter(W.T)":
        p = nn.Parameter(W.T)
    else:
        layer = nn.Linear(3, 5, dtype=mg.float64, device=device)
        layer.weight.data = W.T
        p = layer.weight
    start = p.numpy().copy()
    contiguous = nn.Parameter(backend.to_device(start.copy(), device))
    opts = [make([p]), make([contiguous])]
    for _ in range(3):
        g = rng.standard_normal((5, 3))
        for q in (p, contiguous):
            q.grad = backend.to_device(g, device)
        for opt in opts:
            opt.step()
    assert not p.data.flags.c_contiguous  # still the view of W
    assert np.abs(contiguous.numpy() - start).min() > 1e-3  # every element moved
    np.testing.assert_array_equal(p.numpy(), contiguous.numpy())
    np.testing.assert_array_equal(backend.to_numpy(W).T, contiguous.numpy())


# ---- clipping and the schedule ----

def test_clip_grad_norm_scales_to_max_norm_and_returns_the_norm_before():
    problem = Problem()
    problem.set_grads()
    params = problem.model.parameters()
    params[2].grad = None  # skipped, not an error
    grads = [p.grad.copy() for p in params if p.grad is not None]
    norm = math.sqrt(sum((g**2).sum() for g in grads))
    assert norm > 1.0
    returned = optim.clip_grad_norm_(params, max_norm=1.0)
    assert returned == pytest.approx(norm, rel=1e-12)
    clipped = [p.grad for p in params if p.grad is not None]
    assert math.sqrt(sum((g**2).sum() for g in clipped)) == pytest.approx(1.0, rel=1e-5)
    for g, before in zip(clipped, grads, strict=True):
        np.testing.assert_allclose(g, before * (1.0 / norm), rtol=1e-5)  # one scale for all: direction kept
    assert params[2].grad is None


def test_clip_grad_norm_leaves_small_gradients_alone():
    problem = Problem()
    problem.set_grads()
    before = [p.grad.copy() for p in problem.model.parameters()]
    norm = optim.clip_grad_norm_(problem.model.parameters(), max_norm=1e6)
    assert norm == pytest.approx(math.sqrt(sum((g**2).sum() for g in before)), rel=1e-12)
    for p, g in zip(problem.model.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.grad, g)


def test_cosine_lr_endpoints_and_monotonicity():
    max_lr, min_lr, warmup, total = 1.0, 0.1, 10, 110
    lrs = [optim.cosine_lr(s, max_lr, total, warmup, min_lr) for s in range(total + 5)]
    assert lrs[0] == pytest.approx(max_lr / warmup)  # the first step already learns
    assert lrs[warmup - 1] == pytest.approx(max_lr) and lrs[warmup] == pytest.approx(max_lr)
    assert lrs[warmup + (total - warmup) // 2] == pytest.approx((max_lr + min_lr) / 2)
    assert lrs[total] == pytest.approx(min_lr) and lrs[-1] == min_lr
    assert all(a < b for a, b in zip(lrs[:warmup - 1], lrs[1:warmup], strict=True))  # warmup rises
    assert all(a >= b for a, b in zip(lrs[warmup:-1], lrs[warmup + 1:], strict=True))  # then never rises
    assert min(lrs) >= min_lr
    assert optim.cosine_lr(0, 0.5, 100) == pytest.approx(0.5)  # no warmup: starts at max_lr


# ---- saving, loading and resuming ----

def tiny_gpt(seed):
    mg.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=9, block_size=6, n_layer=2, n_head=2, n_embd=16))


def make_optimizer(model):
    return optim.AdamW(optim.decay_groups(model.named_parameters(), 0.1), lr=1e-3)


def train(model, opt, steps, max_steps=8):
    """Steps `steps` of training on fixed batches, with clipping and the schedule, as train.py does."""
    rng = np.random.default_rng(42)
    batches = [(rng.integers(0, 9, (4, 6)), rng.integers(0, 9, (4, 6))) for _ in range(max_steps)]
    for step in steps:
        for group in opt.param_groups:
            group["lr"] = optim.cosine_lr(step, 1e-2, max_steps, warmup_steps=2, min_lr=1e-3)
        idx, targets = batches[step]
        loss = model(idx, targets)[1]
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


def test_resuming_from_a_saved_checkpoint_is_bit_identical(tmp_path):
    model = tiny_gpt(0)
    opt = make_optimizer(model)
    train(model, opt, range(8))

    first = tiny_gpt(0)
    first_opt = make_optimizer(first)
    train(first, first_opt, range(4))
    mg.save(tmp_path / "ckpt.npz", {"model": first.state_dict(), "optimizer": first_opt.state_dict()})
    del first, first_opt

    resumed = tiny_gpt(1)  # different weights until loaded
    resumed_opt = make_optimizer(resumed)
    checkpoint = mg.load(tmp_path / "ckpt.npz")
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    assert resumed_opt.step_count == 4
    train(resumed, resumed_opt, range(4, 8))

    assert resumed_opt.step_count == opt.step_count == 8
    for (name, p), q in zip(model.named_parameters(), resumed.parameters(), strict=True):
        np.testing.assert_array_equal(q.numpy(), p.numpy(), err_msg=name)


def test_loading_in_memory_state_does_not_share_buffers():
    """Two optimizers that load the same state step independently, as torch's do."""
    model, other = tiny_gpt(0), tiny_gpt(0)
    opt, other_opt = make_optimizer(model), make_optimizer(other)
    train(model, opt, range(2))
    other.load_state_dict(model.state_dict())
    other_opt.load_state_dict(opt.state_dict())
    train(model, opt, range(2, 4))
    train(other, other_opt, range(2, 4))
    for (name, p), q in zip(model.named_parameters(), other.parameters(), strict=True):
        np.testing.assert_array_equal(q.numpy(), p.numpy(), err_msg=name)


def optimizer_snapshot(opt):
    return opt.step_count, [g["lr"] for g in opt.param_groups], \
        [{k: v.copy() for k, v in s.items()} for s in opt.state]


def assert_same_snapshot(a, b):
    assert a[0] == b[0] and a[1] == b[1]
    for s, t in zip(a[2], b[2], strict=True):
        assert s.keys() == t.keys()
        for k in s:
            np.testing.assert_array_equal(s[k], t[k])


@pytest.mark.parametrize("mismatch, message", [
    ("other model", "saved state is for 4 parameters in 2 groups, this optimizer has 36 in 2"),
    ("one group", "saved state is for 36 parameters in 1 groups, this optimizer has 36 in 2"),
    ("wrong shape", "buffer 'v' of parameter 2 is missing or not of shape \\(16, 16\\)"),
    ("SGD state", "buffer 'm' of parameter 0 is missing"),
])
def test_mismatched_optimizer_state_is_refused_and_changes_nothing(mismatch, message):
    model = tiny_gpt(0)
    opt = make_optimizer(model)
    train(model, opt, range(2))
    if mismatch == "other model":
        saved = optim.AdamW(optim.decay_groups(Problem().model.named_parameters(), 0.1)).state_dict()
    elif mismatch == "one group":
        saved = optim.AdamW(model.parameters()).state_dict()
    elif mismatch == "wrong shape":
        saved = make_optimizer(model).state_dict()
        saved["buffers"]["2"]["v"] = np.zeros((16, 48))
    else:
        saved = optim.SGD(optim.decay_groups(model.named_parameters(), 0.1), momentum=0.9).state_dict()
    saved["step"] = 99
    before = optimizer_snapshot(opt)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(saved)
    assert_same_snapshot(optimizer_snapshot(opt), before)


def test_optimizer_refuses_an_empty_or_wrong_parameter_list():
    with pytest.raises(ValueError, match="empty list of parameters"):
        optim.AdamW([])
    with pytest.raises(TypeError, match="expected Parameters"):
        optim.SGD([mg.tensor([1.0], requires_grad=True)])

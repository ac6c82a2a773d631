"""Tests for minigrad.optim: AdamW and Adam (plain and fused) and SGD against the published update rules (in
plain NumPy, and against torch.optim where torch is installed), parameter groups, fused updates in
chunks, parameters that are views, gradient clipping, the warmup + cosine schedule, and optimizer
state that saves, loads and resumes training exactly.
"""

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.array import backend
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
            p.grad = mg.tensor(self.grad(name, p.numpy()), device=p.device)


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


@pytest.mark.parametrize("kind", [optim.Adam, optim.AdamW])
@pytest.mark.parametrize("maximize", [False, True])
def test_fused_adam_moments_keep_float32s_digits(kind, maximize):
    """After one float32 step m = (1 - b1) g and v = (1 - b2) g^2 to float32's rounding, as torch.optim computes
    them: not b2 (v - g^2) + g^2, which keeps only the last digits of a difference about 1000 times larger."""
    g = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    for fused in (False, True):
        p = mg.tensor(np.zeros(10_000), dtype=mg.float32, requires_grad=True)
        opt = kind([p], lr=1e-3, weight_decay=0.0, maximize=maximize, fused=fused)
        p.grad = mg.tensor(g)
        opt.step()
        sign = -1 if maximize else 1
        np.testing.assert_allclose(opt.state[p]["exp_avg"], sign * 0.1 * g.astype(np.float64), rtol=3e-7)
        np.testing.assert_allclose(opt.state[p]["exp_avg_sq"], 0.001 * g.astype(np.float64) ** 2, rtol=3e-7)


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
            q.grad = mg.tensor(g, device=device)
        for opt in opts:
            opt.step()
    assert not p.array.flags.c_contiguous  # still the view of W
    assert np.abs(contiguous.numpy() - start).min() > 1e-3  # every element moved
    np.testing.assert_array_equal(p.numpy(), contiguous.numpy())
    np.testing.assert_array_equal(backend.to_numpy(W).T, contiguous.numpy())


# ---- clipping and the schedule ----

def test_clip_grad_norm_scales_to_max_norm_and_returns_the_norm_before():
    problem = Problem()
    problem.set_grads()
    params = list(problem.model.parameters())
    params[2].grad = None  # skipped, not an error
    grads = [p.grad.numpy().copy() for p in params if p.grad is not None]
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
    before = [p.grad.numpy().copy() for p in problem.model.parameters()]
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
    mg.save({"model": first.state_dict(), "optimizer": first_opt.state_dict()}, tmp_path / "ckpt.npz")
    del first, first_opt

    resumed = tiny_gpt(1)  # different weights until loaded
    resumed_opt = make_optimizer(resumed)
    checkpoint = mg.load(tmp_path / "ckpt.npz")
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    assert {s["step"] for s in resumed_opt.state.values()} == {4}
    train(resumed, resumed_opt, range(4, 8))

    assert {s["step"] for s in resumed_opt.state.values()} == {s["step"] for s in opt.state.values()} == {8}
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
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    return groups, {id(p): {k: np.copy(v) for k, v in s.items()} for p, s in opt.state.items()}


def assert_same_snapshot(a, b):
    assert a[0] == b[0] and a[1].keys() == b[1].keys()
    for p in a[1]:
        assert a[1][p].keys() == b[1][p].keys()
        for k in a[1][p]:
            np.testing.assert_array_equal(a[1][p][k], b[1][p][k])


def trained_state(opt_for, model):
    opt = opt_for(model)
    train(model, opt, range(1))
    return opt.state_dict()


@pytest.mark.parametrize("mismatch, message", [
    ("other model", r"saved param group 0 holds 1 parameters, this optimizer's holds 14"),
    ("one group", "saved state has 1 param groups, this optimizer has 2"),
    ("wrong shape", r"state of parameter 2: exp_avg_sq must be an array of numbers of shape \(16, 16\)"),
    ("SGD state", r"saved param group 0: settings missing \['amsgrad', 'betas', 'eps'\]"),
    ("SGD state, AdamW settings", r"state of parameter 0: expected the keys \['exp_avg', 'exp_avg_sq', 'step'\]"),
    ("a stranger's number", "state for parameter 99, which no saved param group lists"),
    ("bad betas", r"saved param group 1: invalid betas\[1\] 1.5"),
    ("old format", "expected what state_dict\\(\\) gives"),
])
def test_mismatched_optimizer_state_is_refused_and_changes_nothing(mismatch, message):
    model = tiny_gpt(0)
    opt = make_optimizer(model)
    train(model, opt, range(2))
    if mismatch == "other model":
        problem = Problem()
        other = make_optimizer(problem.model)
        problem.set_grads()
        other.step()
        saved = other.state_dict()
    elif mismatch == "one group":
        saved = trained_state(lambda m: optim.AdamW(m.parameters()), tiny_gpt(0))
    elif mismatch == "wrong shape":
        saved = trained_state(make_optimizer, tiny_gpt(0))
        saved["state"][2]["exp_avg_sq"] = np.zeros((16, 48))
    elif mismatch.startswith("SGD state"):
        saved = trained_state(lambda m: optim.SGD(optim.decay_groups(m.named_parameters(), 0.1), momentum=0.9),
                              tiny_gpt(0))
        if mismatch.endswith("AdamW settings"):
            saved["param_groups"] = make_optimizer(model).state_dict()["param_groups"]
    elif mismatch == "a stranger's number":
        saved = trained_state(make_optimizer, tiny_gpt(0))
        saved["state"][99] = saved["state"].pop(3)
    elif mismatch == "bad betas":
        saved = trained_state(make_optimizer, tiny_gpt(0))
        saved["param_groups"][1]["betas"] = (0.9, 1.5)
    else:
        saved = {"step": 2, "lr": [1e-3, 1e-3], "buffers": {}}
    before = optimizer_snapshot(opt)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(saved)
    assert_same_snapshot(optimizer_snapshot(opt), before)


def test_optimizer_refuses_an_empty_or_wrong_parameter_list():
    with pytest.raises(ValueError, match="empty list of parameters"):
        optim.AdamW([])
    with pytest.raises(TypeError, match="expected tensors, got str"):
        optim.SGD(["weight"])


# ---- state per parameter, as torch.optim keeps it ----

def torch_twin(params):
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch.optim comparison is skipped")
    return torch, [torch.tensor(p.numpy().copy(), requires_grad=True) for p in params]


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_a_parameter_whose_first_gradient_comes_late_starts_at_its_own_step_1(fused):
    """The issue's reproduction: a parameter first given a gradient at step 2 got step 2's bias correction, so its
    first move was 0.74 lr (betas 0.9, 0.999), not lr. Its step counts its own updates, as in torch."""
    a, b = (mg.tensor(np.zeros(3), dtype=mg.float64, requires_grad=True) for _ in range(2))
    opt = optim.AdamW([a, b], lr=0.1, weight_decay=0.0, fused=fused)
    torch, (ta, tb) = torch_twin([a, b])
    topt = torch.optim.AdamW([ta, tb], lr=0.1, weight_decay=0.0)
    g = np.array([0.5, -2.0, 1e-3])
    for step in range(3):
        a.grad, ta.grad = mg.tensor(g), torch.tensor(g)
        b.grad, tb.grad = (None, None) if step == 0 else (mg.tensor(g), torch.tensor(g))  # b is frozen at step 0
        opt.step()
        topt.step()
        if step == 1:  # b's first move: lr * m_hat / (sqrt(v_hat) + eps), which is lr * sign(g)
            np.testing.assert_allclose(b.numpy(), -0.1 * np.sign(g), rtol=1e-4)
    assert opt.state[a]["step"] == 3 and opt.state[b]["step"] == 2
    np.testing.assert_allclose(a.numpy(), ta.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-12, atol=1e-15)


def test_state_is_made_at_a_parameters_first_gradient_and_keyed_by_it():
    problem = Problem()
    params = list(problem.model.parameters())
    opt = optim.AdamW(params)
    assert opt.state == {}
    problem.set_grads()
    params[1].grad = None
    opt.step()
    assert set(opt.state) == {params[0], params[2], params[3]} and params[1] not in opt.state
    assert sorted(opt.state[params[0]]) == ["exp_avg", "exp_avg_sq", "step"]
    assert opt.state[params[0]]["exp_avg"].shape == params[0].shape


# every setting each optimizer has, with a value other than its default
SETTINGS = {
    "SGD": (optim.SGD, {"lr": 0.3, "momentum": 0.8, "dampening": 0.1, "weight_decay": 0.02, "nesterov": False,
                        "maximize": True}),
    "SGD nesterov": (optim.SGD, {"lr": 0.2, "momentum": 0.5, "dampening": 0.0, "weight_decay": 0.0,
                                 "nesterov": True, "maximize": False}),
    "AdamW": (optim.AdamW, {"lr": 0.02, "betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.3, "amsgrad": True,
                            "maximize": True}),
    "Adam": (optim.Adam, {"lr": 0.02, "betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.3, "amsgrad": True,
                          "maximize": True}),
}


@pytest.mark.parametrize("name", SETTINGS)
def test_state_dict_round_trips_the_state_and_every_group_setting(tmp_path, name):
    """Only lr was restored; now every setting of every group, and each parameter's state, also through a file."""
    make, settings = SETTINGS[name]
    problem = Problem()
    groups = optim.decay_groups(problem.model.named_parameters(), 0.0)
    groups[0].update(settings)  # the first group takes every setting; the second keeps the defaults
    opt = make(groups)
    for _ in range(2):
        problem.set_grads()
        opt.step()
    opt.param_groups[1]["initial_lr"] = 0.25  # a key of another's, as a learning-rate scheduler adds: kept too
    saved = opt.state_dict()
    assert [g["params"] for g in saved["param_groups"]] == [[0], [1, 2, 3]] and sorted(saved["state"]) == [0, 1, 2, 3]
    mg.save({"optimizer": saved}, tmp_path / "opt.npz")
    for source in (saved, mg.load(tmp_path / "opt.npz")["optimizer"]):
        other = make(optim.decay_groups(problem.model.named_parameters(), 0.0))  # defaults everywhere
        other.load_state_dict(source)
        assert [{k: v for k, v in g.items() if k != "params"} for g in other.param_groups] == \
               [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
        assert isinstance(other.param_groups[0].get("betas", ()), tuple)
        for p in problem.model.parameters():
            assert other.state[p].keys() == opt.state[p].keys()
            for key, value in opt.state[p].items():
                np.testing.assert_array_equal(other.state[p][key], value)
                assert key == "step" or value is None or other.state[p][key] is not value  # copies: each steps alone


SGD_VARIANTS = {
    "plain": {"lr": 0.1}, "momentum": {"lr": 0.1, "momentum": 0.9},
    "dampening": {"lr": 0.1, "momentum": 0.9, "dampening": 0.3},
    "nesterov": {"lr": 0.1, "momentum": 0.9, "nesterov": True},
    "weight decay": {"lr": 0.1, "momentum": 0.5, "weight_decay": 0.05},
    "maximize": {"lr": 0.1, "momentum": 0.9, "maximize": True, "weight_decay": 0.01},
}
ADAMW_VARIANTS = {
    "amsgrad": {"lr": 0.05, "amsgrad": True}, "maximize": {"lr": 0.05, "maximize": True},
    "amsgrad maximize": {"lr": 0.05, "amsgrad": True, "maximize": True, "betas": (0.5, 0.6), "weight_decay": 0.2},
}
ADAM_VARIANTS = {  # Adam's weight decay is an L2 term in g (and so in the moments): it moves p otherwise than AdamW's
    "defaults": {}, "weight decay": {"lr": 0.05, "weight_decay": 0.3}, **ADAMW_VARIANTS,
    "maximize weight decay": {"lr": 0.05, "maximize": True, "weight_decay": 0.3, "eps": 1e-3},
}
OPTIMIZERS = {"SGD": SGD_VARIANTS, "AdamW": ADAMW_VARIANTS, "Adam": ADAM_VARIANTS}


@pytest.mark.parametrize("name", [*(f"SGD {n}" for n in SGD_VARIANTS), *(f"AdamW {n}" for n in ADAMW_VARIANTS),
                                  *(f"AdamW fused {n}" for n in ADAMW_VARIANTS), *(f"Adam {n}" for n in ADAM_VARIANTS),
                                  *(f"Adam fused {n}" for n in ADAM_VARIANTS)])
def test_every_option_matches_torch_optim(name):
    """nesterov and amsgrad were accepted and ignored; each option now does what torch's does. Adam is new."""
    kind, variant = name.split(" ", 1)
    fused = variant.startswith("fused ")
    settings = OPTIMIZERS[kind][variant.removeprefix("fused ")]
    problem = Problem()
    named = list(problem.model.named_parameters())
    torch, theirs = torch_twin([p for _, p in named])
    make = getattr(optim, kind)
    opt = make([p for _, p in named], **settings) if kind == "SGD" else make([p for _, p in named], **settings,
                                                                             fused=fused)
    topt = getattr(torch.optim, kind)(theirs, **settings)
    for t in range(STEPS):
        problem.set_grads()
        for (n, _), q in zip(named, theirs, strict=True):
            q.grad = torch.from_numpy(problem.grad(n, q.detach().numpy()))
        opt.step()
        topt.step()
        for (n, p), q in zip(named, theirs, strict=True):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=f"{t}, {n}")


def test_adam_has_torchs_defaults_and_adamw_is_an_adam():
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch.optim comparison is skipped")
    p, q = mg.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    for name in ("Adam", "AdamW"):
        mine, theirs = getattr(optim, name)([p]).defaults, getattr(torch.optim, name)([q]).defaults
        assert mine == {key: theirs[key] for key in mine}, name
    assert issubclass(optim.AdamW, optim.Adam) and issubclass(torch.optim.AdamW, torch.optim.Adam)


# ---- what an optimizer accepts ----

@pytest.mark.parametrize("make, error, message", [
    (lambda ps: optim.SGD(ps, momentum=-0.5), ValueError, "invalid momentum -0.5"),
    (lambda ps: optim.SGD(ps, lr=-1), ValueError, "invalid lr -1"),
    (lambda ps: optim.SGD(ps, lr=math.nan), ValueError, "invalid lr nan"),
    (lambda ps: optim.SGD(ps, weight_decay=-1), ValueError, "invalid weight_decay -1"),
    (lambda ps: optim.SGD(ps, nesterov=True), ValueError, "Nesterov momentum needs momentum > 0 and dampening 0"),
    (lambda ps: optim.SGD(ps, momentum=0.9, dampening=0.1, nesterov=True), ValueError, "dampening 0.1"),
    (lambda ps: optim.SGD(ps, nesterov=1), TypeError, "nesterov must be True or False"),
    (lambda ps: optim.SGD(ps, lr="0.1"), TypeError, "lr must be a number, got str"),
    (lambda ps: optim.SGD(ps, nesterov_momentum=True), TypeError, "unexpected keyword argument 'nesterov_momentum'"),
    (lambda ps: optim.AdamW(ps, weight_decy=0.5), TypeError, "unexpected keyword argument 'weight_decy'"),
    (lambda ps: optim.AdamW(ps, betas=(1.0, 0)), ValueError, r"invalid betas\[0\] 1.0: it must be a finite number in "
                                                             r"\[0.0, 1.0\)"),
    (lambda ps: optim.AdamW(ps, betas=(0.9, -0.1)), ValueError, r"invalid betas\[1\] -0.1"),
    (lambda ps: optim.AdamW(ps, betas=0.9), TypeError, "betas must be a pair of numbers"),
    (lambda ps: optim.AdamW(ps, eps=-1e-8), ValueError, "invalid eps"),
    (lambda ps: optim.AdamW(ps, amsgrad="yes"), TypeError, "amsgrad must be True or False"),
    (lambda ps: optim.AdamW(ps, fused=None), TypeError, "fused must be True or False"),
    (lambda ps: optim.AdamW([{"params": ps, "weight_decy": 0.5}]), ValueError,
     r"param group 0: unknown setting\(s\) \['weight_decy'\]; AdamW has amsgrad, betas, eps, lr, maximize, "
     "weight_decay"),
    (lambda ps: optim.SGD([{"params": ps, "lr": -0.1}], lr=0.1), ValueError, "param group 0: invalid lr -0.1"),
    (lambda ps: optim.SGD([{"lr": 0.1}]), ValueError, "a param group needs its 'params'"),
], ids=["negative momentum", "negative lr", "nan lr", "negative weight decay", "nesterov without momentum",
        "nesterov with dampening", "flag not a bool", "lr a string", "unknown option", "misspelt option",
        "beta 1.0", "negative beta", "betas a number", "negative eps", "amsgrad a string", "fused None",
        "unknown group setting", "bad group setting", "group without params"])
def test_unknown_options_and_invalid_values_are_refused(make, error, message):
    params = [mg.tensor([1.0, 2.0], requires_grad=True)]
    with pytest.raises(error, match=message):
        make(params)


def test_a_parameter_listed_twice_is_refused_in_one_group_or_two():
    """It was updated twice a step."""
    p, q = (mg.tensor([1.0], requires_grad=True) for _ in range(2))
    with pytest.raises(ValueError, match=r"param group 0: a parameter of shape \(1,\) is listed twice in this group"):
        optim.SGD([p, q, p], lr=0.1)
    with pytest.raises(ValueError, match="param group 1: a parameter of shape .* is listed in group 0 too"):
        optim.AdamW([{"params": [p]}, {"params": [q, p], "lr": 0.1}])
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="listed in group 0 too"):
        opt.add_param_group({"params": p})


def test_a_parameter_added_to_a_group_later_is_updated_or_refused():
    """param_groups[0]["params"].append(p) raised `generator raised StopIteration`."""
    p, q = (mg.tensor([1.0, 2.0], requires_grad=True) for _ in range(2))
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.0)
    p.grad = mg.ones(2)
    opt.step()
    opt.param_groups[0]["params"].append(q)
    p.grad = q.grad = mg.ones(2)
    opt.step()
    assert opt.state[p]["step"] == 2 and opt.state[q]["step"] == 1
    np.testing.assert_allclose(q.numpy(), [0.9, 1.9], rtol=1e-5)  # AdamW's first step: lr * sign(g)
    opt.param_groups[0]["params"].append(p)
    with pytest.raises(ValueError, match=r"AdamW.step: a parameter of shape \(2,\) is listed twice in param_groups"):
        opt.step()
    opt.param_groups[0]["params"][-1] = "not a tensor"
    with pytest.raises(TypeError, match="AdamW.step: expected tensors, got str"):
        opt.step()
    opt.param_groups[0]["params"].pop()
    opt.add_param_group({"params": [mg.tensor([0.0], requires_grad=True)], "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["betas"] == (0.9, 0.999)


def test_any_leaf_tensor_is_accepted_as_torch_accepts_it():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    for params in ([x], [{"params": x}], [{"params": [x]}], (t for t in [x])):
        opt = optim.SGD(params, lr=0.5)
        x.grad = mg.ones(2)
        opt.step()
    np.testing.assert_array_equal(x.numpy(), [-1.0, 0.0])
    with pytest.raises(TypeError, match=r"params must be a list .* got Tensor of shape \(2,\); pass \[p\]"):
        optim.SGD(x)  # a tensor would iterate its rows
    with pytest.raises(TypeError, match="not a set, whose order changes"):
        optim.SGD([{"params": {x}}])
    with pytest.raises(TypeError, match="params must be a list"):
        optim.SGD({x})
    with pytest.raises(ValueError, match="cannot optimize a tensor computed by mul"):
        optim.SGD([x * 2])
    with pytest.raises(TypeError, match="cannot optimize a tensor of dtype int64"):
        optim.SGD([mg.tensor([1, 2])])


def test_zero_grad_can_keep_the_arrays():
    p = mg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p])
    p.grad = mg.ones(2)
    kept = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is kept and not p.grad.any()
    opt.zero_grad()
    assert p.grad is None


# ---- clip_grad_norm_ ----

@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, 0.5, "inf"])
def test_clip_grad_norm_of_one_tensor_or_many_matches_torch(norm_type, device):
    """clip_grad_norm_(param, 1.0) iterated the rows of one tensor: it returned 0.0 and clipped nothing. An empty
    gradient adds nothing to the norm (for inf it was max(initial=0.0), which CuPy's max does not take)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 4)) * 3, rng.standard_normal(5)]
    empty = mg.tensor(np.zeros(0), requires_grad=True, device=device)
    empty.grad = mg.tensor(np.zeros(0), device=device)
    for group in ([0], [0, 1]):
        mine = [mg.tensor(np.zeros(grads[i].shape), requires_grad=True, device=device) for i in group]
        theirs = [torch.zeros(grads[i].shape, dtype=torch.float64, requires_grad=True) for i in group]
        for i, p, q in zip(group, mine, theirs, strict=True):
            p.grad, q.grad = mg.tensor(grads[i], device=device), torch.tensor(grads[i])
        args = (mine[0], theirs[0]) if len(group) == 1 else ([empty, *mine], theirs)  # a tensor itself, or a list
        norm = optim.clip_grad_norm_(args[0], 1.0, norm_type=norm_type)
        tnorm = torch.nn.utils.clip_grad_norm_(args[1], 1.0, norm_type=norm_type)
        assert norm == pytest.approx(tnorm.item(), rel=1e-12) and norm > 1.0
        for p, q in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_refuses_what_has_no_meaning():
    p = mg.tensor([1.0], requires_grad=True)
    p.grad = mg.tensor(np.array([np.inf], dtype=np.float32))
    with pytest.raises(RuntimeError, match="the total norm of order 2.0 of the gradients is inf"):
        optim.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    assert optim.clip_grad_norm_(p, 1.0) == math.inf and p.grad[0] == np.inf  # left as it was
    with pytest.raises(ValueError, match="max_norm must be a number >= 0, got -1"):
        optim.clip_grad_norm_(p, -1)
    for bad in (0, -1.0, "two", True):  # torch's answers for 0 and below are not norms (a count, a harmonic sum)
        with pytest.raises(ValueError, match=f"norm_type must be a number > 0, or inf .also 'inf'., got {bad!r}"):
            optim.clip_grad_norm_(p, 1.0, norm_type=bad)


@pytest.mark.parametrize("norm_type", [2.0, 3.0])
def test_clip_grad_norm_of_float32_gradients_whose_powers_overflow_is_the_true_norm(norm_type):
    """[3e19, 4e19] in float32: the squares overflow (9e38 > 3.4e38), so the plain sum is inf, where the norm, 5e19,
    is finite. minigrad computes it again over the gradients divided by their largest, returns it and clips.
    PyTorch 2.13 returns inf there and multiplies the gradients by max_norm / inf, zeroing them: a deliberate
    difference (docs/pytorch-way.md), asserted here on both sides."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    values = np.array([3e19, 4e19], dtype=np.float32)
    p, q = mg.tensor(values, requires_grad=True), mg.tensor(np.array([-1e19], dtype=np.float32), requires_grad=True)
    p.grad, q.grad = mg.tensor(values), mg.tensor(q.numpy())
    norm = optim.clip_grad_norm_([p, q], 1.0, norm_type=norm_type)
    true = float(np.linalg.norm(np.array([3e19, 4e19, -1e19]), ord=norm_type))
    assert norm == pytest.approx(true, rel=1e-6)
    clipped = np.concatenate([p.grad.numpy(), q.grad.numpy()])
    assert p.grad.dtype == mg.float32 and _joint_norm(clipped, norm_type) == pytest.approx(1.0, rel=1e-5)
    t = torch.zeros(2, requires_grad=True)
    t.grad = torch.tensor(values)
    assert torch.nn.utils.clip_grad_norm_([t], 1.0, norm_type=norm_type).item() == math.inf  # torch: inf, zeroed
    assert t.grad.tolist() == [0.0, 0.0]


def _joint_norm(values, norm_type):
    return float(np.sum(np.abs(values.astype(np.float64)) ** norm_type) ** (1 / norm_type))

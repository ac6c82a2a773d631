"""mg.lr_scheduler against torch.optim.lr_scheduler: the rates step by step, get_last_lr, several parameter groups,
state_dict / load_state_dict (a resumed schedule goes on where it stopped), and WarmupCosineLR giving exactly the
rates that train.py sets with optim.cosine_lr.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.optim.lr_scheduler import LambdaLR, WarmupCosineLR

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")


def two_groups(lrs=(0.1, 0.02)):
    """An SGD over two groups of one parameter each, in minigrad and in torch."""
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))
    ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    opt = optim.SGD([{"params": [a], "lr": lrs[0]}, {"params": [b], "lr": lrs[1]}])
    t_opt = torch.optim.SGD([{"params": [ta], "lr": lrs[0]}, {"params": [tb], "lr": lrs[1]}])
    return opt, t_opt


def rates(opt, scheduler, steps):
    """The rates each optimizer step would use: the groups' lr before each step, scheduler.step() after."""
    seen = []
    for _ in range(steps):
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        scheduler.step()
    return seen


class Halving:
    """A callable object as lr_lambda: its attributes go into state_dict, as in PyTorch."""

    def __init__(self, every: int) -> None:
        self.every = every

    def __call__(self, step: int) -> float:
        return 0.5 ** (step // self.every)


@pytest.mark.parametrize("lr_lambda", [lambda k: 1.0 - 0.9 * k / 100, [lambda k: 0.95**k, Halving(3)]],
                         ids=["one function", "one per group"])
def test_lambda_lr_gives_torch_s_rates(lr_lambda):
    opt, t_opt = two_groups()
    scheduler, t_scheduler = LambdaLR(opt, lr_lambda), torch.optim.lr_scheduler.LambdaLR(t_opt, lr_lambda)
    ours, theirs = rates(opt, scheduler, 12), rates(t_opt, t_scheduler, 12)
    np.testing.assert_allclose(ours, theirs, rtol=1e-15)
    assert scheduler.get_last_lr() == pytest.approx(t_scheduler.get_last_lr(), rel=1e-15)
    assert scheduler.last_epoch == t_scheduler.last_epoch == 12


def test_a_schedule_resumes_from_its_state_dict():
    opt, _ = two_groups()
    scheduler = LambdaLR(opt, [lambda k: 0.9**k, Halving(2)])
    rates(opt, scheduler, 5)
    saved_opt, saved = opt.state_dict(), scheduler.state_dict()
    assert saved["lr_lambdas"] == [None, {"every": 2}]  # a function is not saved, an object's attributes are
    expected = rates(opt, scheduler, 4)

    fresh, _ = two_groups()
    resumed = LambdaLR(fresh, [lambda k: 0.9**k, Halving(7)])  # made first, then both states loaded, as in PyTorch
    fresh.load_state_dict(saved_opt)
    resumed.load_state_dict(saved)
    assert resumed.lr_lambdas[1].every == 2 and resumed.last_epoch == 5
    assert rates(fresh, resumed, 4) == expected


def _chained_and_recreated(lib, opt):
    """Two schedules on one optimizer, then a third made on it later: each bases itself on the groups' initial_lr."""
    first, second = lib.LambdaLR(opt, lambda k: 0.5 * (k + 1)), lib.LambdaLR(opt, lambda k: k + 1)
    seen = []
    for _ in range(4):
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        first.step()
        second.step()
    lib.LambdaLR(opt, lambda k: 0.9)
    return seen + [[g["lr"] for g in opt.param_groups]], [g["initial_lr"] for g in opt.param_groups]


def test_a_second_schedule_on_one_optimizer_bases_itself_on_initial_lr_as_torch():
    """Each schedule took the rate the one before had already scaled as its base: 0.05 / 0.1 / 0.15 / 0.729 where
    PyTorch gives 0.1 / 0.2 / 0.3 / 0.4 (each schedule's rate written in turn, from initial_lr)."""
    opt, t_opt = two_groups()
    ours = _chained_and_recreated(mg.lr_scheduler, opt)
    theirs = _chained_and_recreated(torch.optim.lr_scheduler, t_opt)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-15)
    assert ours[1] == theirs[1] == [0.1, 0.02]
    assert ours[0][-1] == pytest.approx([0.09, 0.018])  # re-created: 0.9 of the first rate, not of the last one


def test_warmup_cosine_is_train_py_s_schedule():
    """train.py sets cosine_lr(step, lr, steps, warmup, lr / 10) before each step; the scheduler does the same."""
    lr, steps, warmup = 3e-3, 40, 6
    opt = optim.AdamW(nn.Linear(2, 2).parameters(), lr=lr)
    scheduler = WarmupCosineLR(opt, warmup, steps, min_lr=lr / 10)
    ours = [r[0] for r in rates(opt, scheduler, steps + 3)]
    assert ours == [optim.cosine_lr(s, lr, steps, warmup, lr / 10) for s in range(steps + 3)]
    assert ours[warmup - 1] == pytest.approx(lr) and ours[steps] == ours[-1] == lr / 10


def test_warmup_cosine_without_warmup_is_torch_s_cosine_annealing():
    opt, t_opt = two_groups()
    ours = rates(opt, WarmupCosineLR(opt, 0, 10, min_lr=1e-3), 10)
    theirs = rates(t_opt, torch.optim.lr_scheduler.CosineAnnealingLR(t_opt, T_max=10, eta_min=1e-3), 10)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_the_schedule_drives_a_training_run():
    mg.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = optim.SGD(model.parameters(), lr=0.5)
    scheduler = LambdaLR(opt, lambda k: 1 / (1 + k))
    x = mg.randn(16, 3)
    y = x.sum(axis=1, keepdims=True)
    for _ in range(30):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        scheduler.step()
    assert loss.item() < 0.05 and opt.param_groups[0]["lr"] == pytest.approx(0.5 / 31)


@pytest.mark.parametrize("make, error, message", [
    (lambda opt: LambdaLR(opt, [lambda k: 1.0]), ValueError, "expected 2 lr_lambdas (one per group), got 1"),
    (lambda opt: LambdaLR(opt, 0.5), TypeError, "lr_lambda must be a function of the step"),
    (lambda opt: LambdaLR([1, 2], lambda k: 1.0), TypeError, "list is not an optimizer"),
    (lambda opt: WarmupCosineLR(opt, 10, 5), ValueError, "warmup_steps=10 is more than max_steps=5"),
    (lambda opt: WarmupCosineLR(opt, -1, 5), ValueError, "warmup_steps must be an integer >= 0"),
])
def test_bad_schedules_are_refused(make, error, message):
    opt, _ = two_groups()
    with pytest.raises(error) as err:
        make(opt)
    assert message in str(err.value)


@pytest.mark.parametrize("state, message", [
    ({"last_epoch": 3}, "a dict with last_epoch, base_lrs and last_lr"),
    ({"last_epoch": -2, "base_lrs": [0.1, 0.1], "last_lr": [0.1, 0.1]}, "last_epoch must be an integer >= 0"),
    ({"last_epoch": 2, "base_lrs": [0.1], "last_lr": [0.1, 0.1]}, "base_lrs must be a list of 2 numbers"),
    ({"last_epoch": 2, "base_lrs": [0.1, 0.1], "last_lr": [0.1, 0.1], "lr_lambdas": [None]}, "lr_lambdas must be"),
])
def test_a_bad_state_is_refused_and_changes_nothing(state, message):
    opt, _ = two_groups()
    scheduler = LambdaLR(opt, lambda k: math.exp(-k))
    before = scheduler.state_dict()
    with pytest.raises(ValueError, match=message):
        scheduler.load_state_dict(state)
    assert scheduler.state_dict() == before

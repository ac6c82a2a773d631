"""PyTorch's schedules (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, OneCycleLR, SequentialLR,
ReduceLROnPlateau) against torch.optim.lr_scheduler: the rate of every group at every step (and OneCycleLR's
momentum), from minigrad.optim.lr_scheduler (PyTorch's import path); a state_dict saved midway resumes the same
rates on a fresh optimizer.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.optim import lr_scheduler

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")

SCHEDULES = {
    "StepLR": lambda m, opt: m.StepLR(opt, step_size=3, gamma=0.5),
    "MultiStepLR": lambda m, opt: m.MultiStepLR(opt, milestones=[5, 2, 9], gamma=0.3),
    "ExponentialLR": lambda m, opt: m.ExponentialLR(opt, gamma=0.9),
    "CosineAnnealingLR": lambda m, opt: m.CosineAnnealingLR(opt, T_max=7, eta_min=0.01),
    "LinearLR": lambda m, opt: m.LinearLR(opt, start_factor=0.2, total_iters=4),
    "OneCycleLR": lambda m, opt: m.OneCycleLR(opt, max_lr=[1.0, 0.5], total_steps=14),
    "OneCycleLR three_phase linear": lambda m, opt: m.OneCycleLR(
        opt, max_lr=1.0, epochs=2, steps_per_epoch=7, three_phase=True, anneal_strategy="linear"),
    "SequentialLR": lambda m, opt: m.SequentialLR(opt, [m.LinearLR(opt, 0.1, total_iters=3),
                                                        m.ExponentialLR(opt, 0.8), m.StepLR(opt, 2)],
                                                  milestones=[3, 7]),
}


def optimizer(lib, kind="SGD"):
    params = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)]
    groups = [{"params": params[:1]}, {"params": params[1:], "lr": 0.05}]
    return lib.optim.SGD(groups, lr=0.1, momentum=0.9) if kind == "SGD" else lib.optim.Adam(groups, lr=0.1)


def rates(opt, scheduler, steps, start=0):
    seen = []
    for _ in range(start, steps):
        seen.append([(g["lr"], g.get("momentum", g.get("betas", (None,))[0])) for g in opt.param_groups])
        opt.step()
        scheduler.step()
    return seen


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_gives_pytorch_rates_at_every_step(name, kind):
    opt, t_opt = optimizer(mg, kind), optimizer(torch, kind)
    ours = rates(opt, SCHEDULES[name](lr_scheduler, opt), 14)
    theirs = rates(t_opt, SCHEDULES[name](torch.optim.lr_scheduler, t_opt), 14)
    np.testing.assert_allclose(np.array(ours, dtype=float), np.array(theirs, dtype=float), rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_state_dict_resumes_on_a_fresh_optimizer(name):
    opt = optimizer(mg)
    straight = rates(opt, SCHEDULES[name](lr_scheduler, opt), 12)
    opt = optimizer(mg)
    scheduler = SCHEDULES[name](lr_scheduler, opt)
    rates(opt, scheduler, 5)
    saved, saved_opt = scheduler.state_dict(), opt.state_dict()
    fresh = optimizer(mg)
    resumed = SCHEDULES[name](lr_scheduler, fresh)
    fresh.load_state_dict(saved_opt)
    resumed.load_state_dict(saved)
    assert rates(fresh, resumed, 12, start=5) == straight[5:]


def test_reduce_lr_on_plateau_follows_pytorch_and_resumes():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.91, 0.95, 0.95, 0.95, 0.95, 0.5, 0.6, 0.6, 0.6, 0.6]
    for kwargs in ({"patience": 1}, {"mode": "max", "patience": 2, "cooldown": 1, "factor": 0.5},
                   {"patience": 0, "threshold_mode": "abs", "threshold": 0.05, "min_lr": [0.02, 0.01]}):
        opt, t_opt = optimizer(mg), optimizer(torch)
        ours = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(t_opt, **kwargs)
        for i, m in enumerate(metrics):
            ours.step(m)
            theirs.step(m)
            assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12), (kwargs, i)
            if i == 6:  # a copy made from the state so far goes on as the original
                copy = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
                copy.load_state_dict(ours.state_dict())
                ours = copy
    with pytest.raises(ValueError, match="factor must be < 1.0, got 1.5"):
        lr_scheduler.ReduceLROnPlateau(optimizer(mg), factor=1.5)

"""RMSprop, Adagrad and LBFGS (with and without the strong Wolfe line search) against PyTorch: the same parameters
after several steps from the same start on a small least-squares-plus-tanh problem, every option; state_dict round
trips of RMSprop and Adagrad resume as an uninterrupted run.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")
R = np.random.default_rng(0)
A, B, W0, V0 = R.standard_normal((6, 4)), R.standard_normal(6), R.standard_normal(4), R.standard_normal(2)


def loss_of(lib, w, v):
    """A smooth non-quadratic loss of two parameters: mean((tanh(A w) * v0 + v1 - b)^2) + 0.1 |w|^2."""
    pred = lib.tanh(lib.tensor(A) @ w) * v[0] + v[1]
    return ((pred - lib.tensor(B)) ** 2).mean() + 0.1 * (w * w).sum()


def run(lib, make, steps, closure_style=False):
    w = lib.tensor(W0.copy(), requires_grad=True)
    v = lib.tensor(V0.copy(), requires_grad=True)
    opt = make(lib.optim, [w, v])
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = loss_of(lib, w, v)
            loss.backward()
            return loss
        if closure_style:
            opt.step(closure)
        else:
            closure()
            opt.step()
    return np.concatenate([w.detach().numpy(), v.detach().numpy()]), opt


@pytest.mark.parametrize("make", [
    lambda o, p: o.RMSprop(p, lr=0.01),
    lambda o, p: o.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1),
    lambda o, p: o.RMSprop(p, lr=0.01, maximize=True),
    lambda o, p: o.Adagrad(p, lr=0.1),
    lambda o, p: o.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3),
], ids=["rmsprop", "rmsprop centered momentum decay", "rmsprop maximize", "adagrad", "adagrad options"])
def test_adaptive_optimizers_follow_pytorch(make):
    ours, _ = run(mg, make, 8)
    theirs, _ = run(torch, make, 8)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda o, p: o.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
    lambda o, p: o.Adagrad(p, lr=0.1, lr_decay=0.01),
], ids=["rmsprop", "adagrad"])
def test_adaptive_optimizers_resume_from_a_state_dict(make):
    straight, _ = run(mg, make, 6)
    first, opt = run(mg, make, 3)
    w = mg.tensor(first[:4], requires_grad=True)
    v = mg.tensor(first[4:], requires_grad=True)
    resumed = make(optim, [w, v])
    resumed.load_state_dict(opt.state_dict())
    for _ in range(3):
        resumed.zero_grad()
        loss_of(mg, w, v).backward()
        resumed.step()
    np.testing.assert_allclose(np.concatenate([w.numpy(), v.numpy()]), straight, rtol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"line_search_fn": "strong_wolfe"}, {"history_size": 2, "max_iter": 5},
                                    {"lr": 0.5, "line_search_fn": "strong_wolfe", "history_size": 3}])
def test_lbfgs_follows_pytorch_step_by_step(kwargs):
    make = lambda o, p: o.LBFGS(p, **kwargs)  # noqa: E731
    for steps in (1, 3):
        ours, opt = run(mg, make, steps, closure_style=True)
        theirs, t_opt = run(torch, make, steps, closure_style=True)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-8)  # 60 iterations of rounding apart
        state, t_state = next(iter(opt.state.values())), next(iter(t_opt.state.values()))
        assert (state["func_evals"], state["n_iter"]) == (t_state["func_evals"], t_state["n_iter"])


def test_lbfgs_needs_a_closure_and_one_group():
    p = mg.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="LBFGS.step needs a closure"):
        optim.LBFGS([p]).step()
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe', got 'armijo'"):
        optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [p]}, {"params": [mg.zeros(1, requires_grad=True)]}])


def test_lbfgs_resumes_from_a_state_dict_as_an_uninterrupted_run():
    make = lambda o, p: o.LBFGS(p, max_iter=4, history_size=3, line_search_fn="strong_wolfe")  # noqa: E731
    straight, _ = run(mg, make, 4, closure_style=True)
    first, opt = run(mg, make, 2, closure_style=True)
    w, v = mg.tensor(first[:4], requires_grad=True), mg.tensor(first[4:], requires_grad=True)
    resumed = make(optim, [w, v])
    resumed.load_state_dict(opt.state_dict())

    def closure():
        resumed.zero_grad()
        loss = loss_of(mg, w, v)
        loss.backward()
        return loss
    for _ in range(2):
        resumed.step(closure)
    np.testing.assert_allclose(np.concatenate([w.numpy(), v.numpy()]), straight, rtol=1e-12)

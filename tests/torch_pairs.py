"""One helper the namespace tests share: run a minigrad function and its torch twin on the same float64 inputs and
compare values, dtypes and (against a random upstream gradient) the gradients of every input, then gradcheck it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import minigrad as mg


def same_as_torch(mine: Callable[..., Any], theirs: Callable[..., Any], arrays: Sequence[np.ndarray],
                  device: str = "cpu", grad: bool = True, gradcheck: bool = True) -> None:
    """mine(*mg tensors) against theirs(*torch tensors): the values and dtype, and where grad, each input's gradient
    for one random upstream gradient, and mg.gradcheck (float64, central differences) on the CPU."""
    import torch

    xs = [mg.tensor(a, device=device, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    out, expected = mine(*xs), theirs(*ts)
    assert str(out.dtype) == str(expected.dtype).removeprefix("torch."), (out.dtype, expected.dtype)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    if not grad:
        return
    upstream = np.random.default_rng(1).standard_normal(expected.shape)
    out.backward(mg.tensor(upstream, device=device))
    expected.backward(torch.tensor(upstream))
    for i, (x, t) in enumerate(zip(xs, ts, strict=True)):
        if t.requires_grad:
            theirs_grad = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            mine_grad = np.zeros(x.shape) if x.grad is None else x.grad.numpy()
            np.testing.assert_allclose(mine_grad, theirs_grad, rtol=1e-9, atol=1e-12, err_msg=f"input {i}")
    if gradcheck and device == "cpu":
        mg.gradcheck(mine, *[mg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays])


class On:
    """mg, but with the tensors it makes on `device`: a case written once as f(m, ...) for mg and torch alike makes
    its index tensors with m.tensor(...)."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __getattr__(self, name: str) -> Any:
        return getattr(mg, name)

    def tensor(self, data: Any, **kwargs: Any) -> mg.Tensor:
        return mg.tensor(data, device=self.device, **kwargs)

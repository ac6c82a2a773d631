"""Optimizers (SGD with momentum, AdamW), gradient clipping, and the warmup + cosine learning rate. Each
optimizer's `update` is its rule as the paper writes it, for one parameter; AdamW(fused=True) runs the same rule
in place, beside it. Optimizer state (step count, moment buffers) round-trips through state_dict().
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from minigrad import backend, runtime
from minigrad.arrays import as_array
from minigrad.nn import Parameter

ParamGroups = Iterable[Parameter] | Iterable[dict[str, Any]]


class Optimizer:
    """Holds param_groups (dicts with "params" and per-group settings) and per-parameter state.

    A subclass gives its `defaults`, the names of its per-parameter buffers, and `update`.
    """

    defaults: dict[str, Any] = {}
    state_names: tuple[str, ...] = ()  # the per-parameter buffers, each shaped like the parameter
    fused = False

    def __init__(self, params: ParamGroups, **settings: Any) -> None:
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty list of parameters")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.param_groups = [{**self.defaults, **settings, **g, "params": list(g["params"])} for g in groups]
        for p in self.parameters():
            if not isinstance(p, Parameter):
                raise TypeError(f"{type(self).__name__}: expected Parameters, got {type(p).__name__}")
        self.step_count = 0
        self.state = [{name: backend.get_array_module(p.data).zeros(p.shape, dtype=p.dtype)
                       for name in self.state_names} for p in self.parameters()]

    def parameters(self) -> Iterator[Parameter]:
        for g in self.param_groups:
            yield from g["params"]

    def with_state(self) -> Iterator[tuple[dict[str, Any], Parameter, dict[str, Any]]]:
        """(group, parameter, its state) for every parameter, in order."""
        states = iter(self.state)
        for group in self.param_groups:
            for p in group["params"]:
                yield group, p, next(states)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def step(self) -> None:
        """Update every parameter that has a gradient, by update(), or with fused=True by fused_step() (AdamW)."""
        self.step_count += 1
        if self.fused:
            return self.fused_step()  # speed: update()'s rule in place, piece by piece, on every core
        for group, p, state in self.with_state():
            if p.grad is not None:
                self.update(p.data, p.grad, group, state)

    def update(self, p: Any, g: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        """The rule itself: change the parameter's array `p` in place, given its gradient `g`."""
        raise NotImplementedError

    # -- saving and loading --
    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step_count, "lr": [g["lr"] for g in self.param_groups],
                "buffers": {str(i): dict(s) for i, s in enumerate(self.state)}}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Restore step count, learning rates and buffers. Everything is checked, and converted, before
        anything changes: a bad state is a ValueError that leaves the optimizer as it was."""
        params = list(self.parameters())
        name = f"{type(self).__name__}.load_state_dict"
        step, lrs, buffers = saved.get("step"), saved.get("lr", []), saved.get("buffers", {})
        if not isinstance(lrs, list) or not isinstance(buffers, dict):
            raise ValueError(f"{name}: expected what state_dict() gives, with 'lr' a list and 'buffers' a dict")
        if len(buffers) != len(params) or len(lrs) != len(self.param_groups):
            raise ValueError(f"{name}: saved state is for {len(buffers)} parameters in {len(lrs)} groups, this "
                             f"optimizer has {len(params)} in {len(self.param_groups)}")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"{name}: step must be an integer >= 0, got {step!r}")
        if not all(isinstance(lr, (int, float)) and not isinstance(lr, bool) for lr in lrs):
            raise ValueError(f"{name}: learning rates must be numbers, got {lrs!r:.80}")
        for i, p in enumerate(params):
            for buffer in self.state_names:
                entry = buffers.get(str(i))
                value = entry.get(buffer) if isinstance(entry, dict) else None
                if not hasattr(value, "dtype") or value.dtype.kind not in "biuf" or tuple(value.shape) != p.shape:
                    raise ValueError(f"{name}: buffer {buffer!r} of parameter {i} is missing or not of shape "
                                     f"{p.shape} (numbers)")
        # copies, since steps update the buffers in place; made before anything changes
        state = [{buffer: as_array(buffers[str(i)][buffer], p.dtype, p.device, name).copy()
                  for buffer in self.state_names} for i, p in enumerate(params)]
        self.step_count, self.state = step, state
        for group, lr in zip(self.param_groups, lrs, strict=True):
            group["lr"] = lr


class SGD(Optimizer):
    """g = g + wd * p;  buf = momentum * buf + g;  p -= lr * buf   (plain SGD when momentum = 0)"""

    defaults = {"lr": 0.01, "momentum": 0.0, "weight_decay": 0.0}
    state_names = ("momentum_buffer",)

    def update(self, p, g, group, state):
        g = g + group["weight_decay"] * p  # L2 penalty, folded into the gradient
        state["momentum_buffer"] = buf = group["momentum"] * state["momentum_buffer"] + g
        p -= group["lr"] * buf


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW and llm.c:

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
    p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)

    fused=True runs fused_update instead: the same rule in place, in cache-sized pieces spread over the cores.
    """

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
    state_names = ("m", "v")
    piece = {"cpu": 1 << 17, "cuda": 1 << 62}  # fused_step's elements per piece: cache-sized on the CPU, all on a GPU

    def __init__(self, params: ParamGroups, fused: bool = False, **settings: Any) -> None:
        super().__init__(params, **settings)
        self.fused = fused

    def update(self, p, g, group, state):
        xp = backend.get_array_module(p)
        (b1, b2), t = group["betas"], self.step_count
        state["m"] = m = b1 * state["m"] + (1 - b1) * g
        state["v"] = v = b2 * state["v"] + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        p -= group["lr"] * (m_hat / (xp.sqrt(v_hat) + group["eps"]) + group["weight_decay"] * p)

    def fused_step(self) -> None:
        """fused_update on every parameter with a gradient, in pieces of at most self.piece[device] elements, each
        with a scratch buffer of its thread's: no temporary the size of the model."""
        jobs = [(group, *piece) for group, p, state in self.with_state() if p.grad is not None
                for piece in _pieces(p.data, p.grad, state, self.piece[p.device])]
        if not jobs:
            return
        scratch = threading.local()  # this step's scratch buffers, one per thread

        def update(job: tuple) -> None:
            group, p, g, state = job
            self.fused_update(p, g, state["m"], state["v"], _scratch_for(scratch, p), group, self.step_count)

        runtime.run_parallel(update, jobs, backend.device_of(jobs[0][1]), sum(job[1].size for job in jobs))

    @staticmethod
    def fused_update(p: Any, g: Any, m: Any, v: Any, tmp: Any, group: dict[str, Any], t: int) -> None:
        """update()'s rule in the order torch.optim.AdamW computes it, every result written in place in 12 passes
        (13 with weight decay): m = b1 (m - g) + g, v = b2 (v - g^2) + g^2, and the bias corrections folded
        into two constants, lr sqrt(1 - b2^t) / (1 - b1^t) and eps sqrt(1 - b2^t)."""
        xp = backend.get_array_module(p)
        lr, (b1, b2) = group["lr"], group["betas"]
        root = math.sqrt(1 - b2**t)
        if group["weight_decay"]:
            p *= 1 - lr * group["weight_decay"]
        m -= g
        m *= b1
        m += g
        xp.multiply(g, g, out=tmp)
        v -= tmp
        v *= b2
        v += tmp
        xp.sqrt(v, out=tmp)  # the denominator, sqrt(v) + eps sqrt(1 - b2^t), built in tmp
        tmp += group["eps"] * root
        xp.divide(m, tmp, out=tmp)
        tmp *= lr * root / (1 - b1**t)
        p -= tmp


def _pieces(p: Any, g: Any, state: dict[str, Any], size: int) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Views of at most `size` elements of a parameter array, its gradient and its state buffers. An array that
    is not C-contiguous (nn.Parameter(W.T)) would be copied by reshape(-1), and the update lost: one piece."""
    if not all(a.flags.c_contiguous for a in (p, *state.values())):
        yield p, g, state
        return
    flat_p, flat_g = p.reshape(-1), g.reshape(-1)
    flat_state = {k: v.reshape(-1) for k, v in state.items()}
    for start in range(0, p.size, size):
        chunk = slice(start, start + size)
        yield flat_p[chunk], flat_g[chunk], {k: v[chunk] for k, v in flat_state.items()}


def _scratch_for(scratch: threading.local, piece: Any) -> Any:
    """A scratch array shaped like `piece`, one buffer per thread, reused from piece to piece."""
    key = (backend.device_of(piece), piece.dtype)
    buffers = scratch.__dict__
    if key not in buffers or buffers[key].size < piece.size:
        buffers[key] = backend.get_array_module(piece).empty(piece.size, dtype=piece.dtype)
    return buffers[key][: piece.size].reshape(piece.shape)


def decay_groups(named_params: Iterable[tuple[str, Parameter]], weight_decay: float) -> list[dict[str, Any]]:
    """Two groups, as GPT-2 training does: matrices (ndim >= 2) decay; biases and LayerNorm weights do not."""
    params = list(named_params)
    return [{"params": [p for _, p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for _, p in params if p.ndim < 2], "weight_decay": 0.0}]


def clip_grad_norm_(params: Iterable[Parameter], max_norm: float) -> float:
    """Scale all gradients in place so their joint L2 norm is at most max_norm; return the norm before.

    The squares are summed where the gradients live and read back once: on a GPU, one wait per call.
    """
    grads, squares = [], 0.0
    for p in params:
        if p.grad is not None:
            grads.append(p.grad)
            squares = squares + backend.get_array_module(p.grad).vdot(p.grad.reshape(-1), p.grad.reshape(-1))
    total = math.sqrt(float(squares))
    if total > max_norm:
        for g in grads:
            g *= max_norm / (total + 1e-6)
    return total


def cosine_lr(step: int, max_lr: float, max_steps: int, warmup_steps: int = 0, min_lr: float = 0.0) -> float:
    """Learning rate at `step`: linear warmup to max_lr, then cosine decay to min_lr at max_steps."""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))

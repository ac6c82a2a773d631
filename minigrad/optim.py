"""Optimizers (SGD with momentum, AdamW), gradient clipping, and the warmup + cosine learning rate.

Updates run in place on the parameter arrays, in chunks that fit in cache, with one scratch buffer,
so a step over a large model makes no temporaries the size of the model. Optimizer state (step
count, moment buffers) round-trips through state_dict() for exact resumption.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from minigrad import backend
from minigrad.nn import Parameter

ParamGroups = Iterable[Parameter] | Iterable[dict[str, Any]]


class Optimizer:
    """Holds param_groups (dicts with "params" and per-group settings) and per-parameter state."""

    defaults: dict[str, Any] = {}
    state_names: tuple[str, ...] = ()  # the per-parameter buffers, each shaped like the parameter

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
        self.state = [{name: backend.get_array_module(p.data).zeros_like(p.data) for name in self.state_names}
                      for p in self.parameters()]
        self._scratch = threading.local()  # each thread's scratch buffers, by (device, dtype)

    def parameters(self) -> Iterator[Parameter]:
        for g in self.param_groups:
            yield from g["params"]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def step(self) -> None:
        """Update every parameter that has a gradient, chunk by chunk (see _chunks), on all cores."""
        self.step_count += 1
        pairs = [(group, p) for group in self.param_groups for p in group["params"]]
        jobs = [(group, *views) for (group, p), state in zip(pairs, self.state, strict=True) if p.grad is not None
                for views in self._chunks(p, state)]
        if jobs:
            backend.run_parallel(self._update_chunk, jobs, pairs[0][1].device, sum(p.size for _, p in pairs))

    def update(self, group: dict[str, Any], p: Any, g: Any, tmp: Any, **state: Any) -> None:
        """The rule itself, on flat views of parameter, gradient, a scratch buffer and the state."""
        raise NotImplementedError

    def _update_chunk(self, job: tuple) -> None:
        group, p, g, state = job
        self.update(group, p, g, self._scratch_for(p), **state)

    def _scratch_for(self, chunk: Any) -> Any:
        """A scratch array as long as `chunk`, one per thread, reused from step to step."""
        key = (backend.device_of(chunk), chunk.dtype)
        buffers = self._scratch.__dict__
        if key not in buffers or buffers[key].size < chunk.size:
            buffers[key] = backend.get_array_module(chunk).empty(chunk.size, dtype=chunk.dtype)
        return buffers[key][: chunk.size]

    def _chunks(self, p: Parameter, state: dict[str, Any]) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
        """Flat views of at most backend.chunk_size elements: the several elementwise passes of an
        update then run over a chunk that stays in cache, instead of streaming the whole model each time."""
        flat_p, flat_g = p.data.reshape(-1), p.grad.reshape(-1)
        flat_state = {k: v.reshape(-1) for k, v in state.items()}
        size = backend.chunk_size(p.device)
        for start in range(0, p.size, size):
            chunk = slice(start, start + size)
            yield flat_p[chunk], flat_g[chunk], {k: v[chunk] for k, v in flat_state.items()}

    # -- saving and loading --
    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step_count, "lr": [g["lr"] for g in self.param_groups],
                "buffers": {str(i): dict(s) for i, s in enumerate(self.state)}}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Restore step count, learning rates and buffers; checks everything before changing anything."""
        params = list(self.parameters())
        buffers = saved.get("buffers", {})
        if len(buffers) != len(params) or len(saved.get("lr", [])) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: saved state is for {len(buffers)} parameters in "
                             f"{len(saved.get('lr', []))} groups, this optimizer has {len(params)} in "
                             f"{len(self.param_groups)}")
        for i, p in enumerate(params):
            for name in self.state_names:
                if name not in buffers[str(i)] or tuple(buffers[str(i)][name].shape) != p.shape:
                    raise ValueError(f"{type(self).__name__}.load_state_dict: buffer {name!r} of parameter {i} "
                                     f"is missing or not of shape {p.shape}")
        self.step_count = int(saved["step"])
        for group, lr in zip(self.param_groups, saved["lr"], strict=True):
            group["lr"] = lr
        xp = backend.get_array_module  # array(), not asarray(): steps update the buffers in place, so copy them
        self.state = [{name: xp(p.data).array(backend.to_device(buffers[str(i)][name], p.device), dtype=p.dtype)
                       for name in self.state_names} for i, p in enumerate(params)]


class SGD(Optimizer):
    """buf = momentum * buf + g;  p -= lr * buf   (plain SGD when momentum = 0)"""

    defaults = {"lr": 0.01, "momentum": 0.0, "weight_decay": 0.0}
    state_names = ("momentum_buffer",)

    def update(self, group, p, g, tmp, momentum_buffer):
        tmp[...] = g
        if group["weight_decay"]:
            tmp += group["weight_decay"] * p  # L2 penalty, folded into the gradient
        if group["momentum"]:
            momentum_buffer *= group["momentum"]
            momentum_buffer += tmp
            tmp[...] = momentum_buffer
        tmp *= group["lr"]
        p -= tmp


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW:

    p -= lr * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    """

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
    state_names = ("m", "v")

    def update(self, group, p, g, tmp, m, v):
        xp = backend.get_array_module(p)
        lr, (b1, b2), t = group["lr"], group["betas"], self.step_count
        if group["weight_decay"]:
            p *= 1 - lr * group["weight_decay"]
        m *= b1
        xp.multiply(g, 1 - b1, out=tmp)
        m += tmp
        v *= b2
        xp.multiply(g, g, out=tmp)
        tmp *= 1 - b2
        v += tmp
        xp.sqrt(v, out=tmp)  # the denominator, sqrt(v / (1 - b2^t)) + eps, built in tmp
        tmp *= 1 / math.sqrt(1 - b2**t)
        tmp += group["eps"]
        xp.divide(m, tmp, out=tmp)
        tmp *= lr / (1 - b1**t)
        p -= tmp


def decay_groups(named_params: Iterable[tuple[str, Parameter]], weight_decay: float) -> list[dict[str, Any]]:
    """Two groups, as GPT-2 training does: matrices (ndim >= 2) decay; biases and LayerNorm weights do not."""
    params = list(named_params)
    return [{"params": [p for _, p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for _, p in params if p.ndim < 2], "weight_decay": 0.0}]


def clip_grad_norm_(params: Iterable[Parameter], max_norm: float) -> float:
    """Scale all gradients in place so their joint L2 norm is at most max_norm; return the norm before."""
    grads = [p.grad for p in params if p.grad is not None]
    total = math.sqrt(sum(float(backend.get_array_module(g).vdot(g.reshape(-1), g.reshape(-1))) for g in grads))
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

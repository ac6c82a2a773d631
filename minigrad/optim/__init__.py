"""Optimizers (SGD with momentum, Adam, AdamW, RMSprop, Adagrad, LBFGS), gradient clipping, and the warmup + cosine
learning rate. Each optimizer's `update` is its rule as the paper writes it, for one parameter (LBFGS's `step`, over
all of them at once); Adam(W)(fused=True) runs the same rule in place, beside it. As in PyTorch, state is per
parameter (optimizer.state[p], with its own step), and state_dict() / load_state_dict() round-trip it with every param
group's settings.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from minigrad import speed
from minigrad.array import backend, runtime
from minigrad.array.arrays import as_array
from minigrad.tensor import Tensor, increment_version

ParamGroups = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """param_groups: dicts of "params" (leaf tensors) and the settings in `defaults`, which a group may override;
    state: per parameter, made at its first gradient (state[p]). A subclass passes its defaults, and gives `check`
    (a group's settings), `new_state` (a parameter's first state) and `update` (its rule)."""

    fused = False

    def __init__(self, params: ParamGroups, defaults: dict[str, Any]) -> None:
        name = type(self).__name__
        if isinstance(params, Tensor) or isinstance(params, (set, frozenset)) or not isinstance(params, Iterable):
            raise TypeError(f"{name}: params must be a list (or other ordered iterable) of tensors or of dicts (param "
                            f"groups), got {type(params).__name__}" + (f" of shape {params.shape}; pass [p]"
                                                                       if isinstance(params, Tensor) else ""))
        groups = list(params)
        if not groups:
            raise ValueError(f"{name}: got an empty list of parameters")
        self.defaults = self.check(dict(defaults), name)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add {"params": a tensor or tensors, and settings of `defaults` to override}: checked as the constructor
        checks, and refused if it names a setting this optimizer does not have or a parameter already in a group."""
        name = f"{type(self).__name__}: param group {len(self.param_groups)}"
        if not isinstance(group, dict):
            raise TypeError(f"{name}: expected a dict (or give tensors only, no dicts), got {type(group).__name__}")
        unknown = sorted(set(group) - set(self.defaults) - {"params"})
        if unknown:
            raise ValueError(f"{name}: unknown setting(s) {unknown}; {type(self).__name__} has "
                             f"{', '.join(sorted(self.defaults))}")
        if "params" not in group:
            raise ValueError(f"{name}: a param group needs its 'params'")
        params = group["params"]
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: params must be ordered (a list), not a set, whose order changes from run to run")
        params = [params] if isinstance(params, Tensor) else list(params)
        held = {id(p): i for i, g in enumerate(self.param_groups) for p in g["params"]}
        for p in params:
            _check_parameter(name, p)
            if id(p) in held:
                first = held[id(p)]
                where = "twice in this group" if first == len(self.param_groups) else f"in group {first} too"
                raise ValueError(f"{name}: a parameter of shape {p.shape} is listed {where}; each parameter may be in "
                                 "one group once (else it would be updated twice a step)")
            held[id(p)] = len(self.param_groups)
        self.param_groups.append(self.check({**self.defaults, **group, "params": params}, name))

    def check(self, group: dict[str, Any], where: str) -> dict[str, Any]:
        """The group with its settings checked (and normalised: betas as a tuple); raises naming `where`."""
        raise NotImplementedError

    def new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        """The state of parameter p before its first update."""
        raise NotImplementedError

    def parameters(self) -> Iterator[Tensor]:
        for g in self.param_groups:
            yield from g["params"]

    def with_state(self) -> Iterator[tuple[dict[str, Any], Tensor, dict[str, Any]]]:
        """(group, parameter, its state) for every parameter with a gradient, its state made at the first one. A
        parameter added to a group since (param_groups[0]["params"].append(p)) is checked here, as a new group is."""
        seen = set()
        for group in self.param_groups:
            for p in group["params"]:
                if not isinstance(p, Tensor) or id(p) in seen:
                    _check_parameter(f"{type(self).__name__}.step", p)  # a TypeError for what is no tensor
                    raise ValueError(f"{type(self).__name__}.step: a parameter of shape {p.shape} is listed twice in "
                                     "param_groups; each parameter may be in one group once")
                seen.add(id(p))
                if p.grad is None:
                    continue
                state = self.state.get(p)
                if state is None:
                    _check_parameter(f"{type(self).__name__}.step", p)
                    state = self.state[p] = self.new_state(p, group)
                yield group, p, state

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (set_to_none=False: detach it and set it to zeros in place, zero_grads)."""
        for group in self.param_groups:
            zero_grads(group["params"], set_to_none)

    def step(self) -> None:
        """Update every parameter that has a gradient, by update(), or with fused=True by fused_step() (Adam, AdamW),
        and count each update in the parameter's version (a graph that saved it can no longer go back through it)."""
        if self.fused:
            return self.fused_step()  # speed: update()'s rule in place, piece by piece, on every core
        for group, p, state in self.with_state():
            self.update(p.array, p.grad.array, group, state)
            increment_version(p)

    def update(self, p: Any, g: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        """The rule itself: change the parameter's array `p` in place, given its gradient `g`."""
        raise NotImplementedError

    def fused_step(self) -> None:
        raise NotImplementedError

    # -- saving and loading --
    def state_dict(self) -> dict[str, Any]:
        """As PyTorch's: {"state": {i: parameter i's state}, "param_groups": [{every setting, "params": [i, ...]}]},
        the parameters numbered through the groups in order. The arrays are the optimizer's own, not copies."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            numbers = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": numbers})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Restore the state and every group's settings (and any other key a group holds) from what state_dict()
        gave (or mg.load gave back of it), for the same parameters in the same groups. Everything is checked, and
        converted to each parameter's dtype and device, before anything changes: a bad state is a ValueError that
        leaves the optimizer as it was."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(saved, dict) or not isinstance(saved.get("state"), dict) \
                or not isinstance(saved.get("param_groups"), list):
            raise ValueError(f"{name}: expected what state_dict() gives, {{'state': {{...}}, 'param_groups': [...]}}, "
                             f"got {type(saved).__name__} with {sorted(saved) if isinstance(saved, dict) else '-'}")
        theirs = saved["param_groups"]
        if len(theirs) != len(self.param_groups):
            raise ValueError(f"{name}: saved state has {len(theirs)} param groups, this optimizer has "
                             f"{len(self.param_groups)}")
        groups, numbered = [], {}
        for i, (mine, group) in enumerate(zip(self.param_groups, theirs, strict=True)):
            where = f"{name}: saved param group {i}"
            if not isinstance(group, dict) or not isinstance(group.get("params"), list):
                raise ValueError(f"{where} is not a dict with a list of 'params'")
            if len(group["params"]) != len(mine["params"]):
                raise ValueError(f"{where} holds {len(group['params'])} parameters, this optimizer's holds "
                                 f"{len(mine['params'])}")
            missing = sorted(set(self.defaults) - set(group))
            if missing:
                raise ValueError(f"{where}: settings missing {missing}")
            try:  # keys beyond the settings (one a scheduler added, such as initial_lr) are kept as saved
                groups.append(self.check({**group, "params": mine["params"]}, where))
            except TypeError as err:  # a setting of the wrong type: this too is a bad state
                raise ValueError(str(err)) from None
            for number, p in zip(group["params"], mine["params"], strict=True):
                numbered[number] = (p, groups[-1])
        state = {}
        for key, entry in saved["state"].items():
            number = int(key) if isinstance(key, str) and key.isdigit() else key  # keys as mg.load gives them back
            if number not in numbered:
                raise ValueError(f"{name}: state for parameter {key!r}, which no saved param group lists")
            p, group = numbered[number]
            state[p] = _restored(f"{name}: state of parameter {key}", entry, self.new_state(p, group), p)
        for mine, group in zip(self.param_groups, groups, strict=True):  # all checked: now change
            mine.clear()
            mine.update(group)
        self.state = state


def _check_parameter(where: str, p: Any) -> None:
    """What an optimizer can update: a floating-point leaf tensor (any, not only a Parameter, as in PyTorch)."""
    if not isinstance(p, Tensor):
        raise TypeError(f"{where}: expected tensors, got {type(p).__name__}")
    if not p.is_leaf:
        raise ValueError(f"{where}: cannot optimize a tensor computed by {p.grad_fn.op} (a non-leaf); optimize the "
                         "leaves it is computed from")
    if p.dtype.kind != "f":
        raise TypeError(f"{where}: cannot optimize a tensor of dtype {p.dtype}; parameters hold floats")


def _restored(where: str, entry: Any, template: dict[str, Any], p: Tensor) -> dict[str, Any]:
    """A saved parameter state, checked against `template` (the keys a new one has: int, array, or array or None)
    and converted: arrays copied to p's dtype and device, for steps update them in place."""
    if not isinstance(entry, dict) or set(entry) != set(template):
        raise ValueError(f"{where}: expected the keys {sorted(template)}, got "
                         f"{sorted(entry) if isinstance(entry, dict) else type(entry).__name__}")
    restored = {}
    for key, value in entry.items():
        if isinstance(template[key], int):  # a step
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{where}: {key} must be an integer >= 0, got {value!r}")
            restored[key] = int(value)
        elif value is None and template[key] is None:
            restored[key] = None
        elif not backend.is_array(value) or value.dtype.kind not in "biuf" or tuple(value.shape) != p.shape:
            raise ValueError(f"{where}: {key} must be an array of numbers of shape {p.shape}, got "
                             f"{getattr(value, 'shape', type(value).__name__)}")
        else:
            restored[key] = as_array(value, p.dtype, p.device, "load_state_dict", copy=True)
    return restored


def _number(where: str, group: dict[str, Any], key: str, low: float = 0.0, below: float | None = None) -> float:
    """group[key] checked to be a finite number in [low, below): what every rate and coefficient must be."""
    value = group[key]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: {key} must be a number, got {type(value).__name__} {value!r:.40}")
    if not (math.isfinite(value) and low <= value and (below is None or value < below)):
        bounds = f"in [{low}, {below})" if below is not None else f">= {low}"
        raise ValueError(f"{where}: invalid {key} {value}: it must be a finite number {bounds}")
    return float(value)


def _flag(where: str, group: dict[str, Any], key: str) -> bool:
    if not isinstance(group[key], (bool, np.bool_)):
        raise TypeError(f"{where}: {key} must be True or False, got {group[key]!r:.40}")
    return bool(group[key])


class SGD(Optimizer):
    """g = -g if maximize;  g = g + wd * p;  buf = g at the first step, then momentum * buf + (1 - dampening) * g;
    g = g + momentum * buf (nesterov) or buf;  p -= lr * g   (plain SGD when momentum = 0), as torch.optim.SGD"""

    def __init__(self, params: ParamGroups, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize})

    def check(self, group, where):
        for key in ("lr", "momentum", "weight_decay"):
            group[key] = _number(where, group, key)
        group["dampening"] = _number(where, group, "dampening", low=-math.inf)
        group["nesterov"], group["maximize"] = _flag(where, group, "nesterov"), _flag(where, group, "maximize")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"{where}: Nesterov momentum needs momentum > 0 and dampening 0, got momentum "
                             f"{group['momentum']}, dampening {group['dampening']}")
        return group

    def new_state(self, p, group):
        return {"momentum_buffer": None}  # made from the first gradient, where momentum is used

    def update(self, p, g, group, state):
        g = -g if group["maximize"] else g
        g = g + group["weight_decay"] * p if group["weight_decay"] else g  # L2 penalty, folded into the gradient
        momentum = group["momentum"]
        if momentum:
            buf = state["momentum_buffer"]
            buf = g.copy() if buf is None else momentum * buf + (1 - group["dampening"]) * g
            state["momentum_buffer"] = buf
            g = g + momentum * buf if group["nesterov"] else buf
        p -= group["lr"] * g


class Adam(Optimizer):
    """Adam (Kingma & Ba), as torch.optim.Adam, per parameter at its own step t (counting its updates, so one that
    first gets a gradient late is bias-corrected as at step 1); weight decay is an L2 penalty, folded into g:

    g = g + wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
    p -= lr * m_hat / (sqrt(v_hat) + eps)

    amsgrad: v_hat from the largest v so far; maximize: g = -g (before the decay is added). fused=True runs
    fused_update instead: the same rule in place, in cache-sized pieces spread over the cores.
    """

    decoupled = False  # AdamW's decay is a step of its own, outside g and the moments
    piece = {"cpu": 1 << 17, "cuda": 1 << 62}  # fused_step's elements per piece: cache-sized on the CPU, all on a GPU

    def __init__(self, params: ParamGroups, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 fused: bool = False) -> None:
        if not isinstance(fused, bool):
            raise TypeError(f"{type(self).__name__}: fused must be True or False, got {fused!r:.40}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad, "maximize": maximize})
        self.fused = fused  # how the step runs, not what it computes: not a group setting, not in state_dict

    def check(self, group, where):
        for key in ("lr", "eps", "weight_decay"):
            group[key] = _number(where, group, key)
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"{where}: betas must be a pair of numbers, got {betas!r:.60}")
        group["betas"] = tuple(_number(where, {f"betas[{i}]": b}, f"betas[{i}]", below=1.0)
                               for i, b in enumerate(betas))
        group["amsgrad"], group["maximize"] = _flag(where, group, "amsgrad"), _flag(where, group, "maximize")
        return group

    def new_state(self, p, group):
        xp = backend.get_array_module(p.array)
        names = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if group["amsgrad"] else ("exp_avg", "exp_avg_sq")
        return {"step": 0, **{name: xp.zeros(p.shape, dtype=p.dtype) for name in names}}

    def update(self, p, g, group, state):
        xp = backend.get_array_module(p)
        (b1, b2), t, wd = group["betas"], state["step"] + 1, group["weight_decay"]
        g = -g if group["maximize"] else g
        if wd and not self.decoupled:
            g = g + wd * p  # the L2 penalty's gradient, and so part of m and v
        state["step"] = t
        state["exp_avg"] = m = b1 * state["exp_avg"] + (1 - b1) * g
        state["exp_avg_sq"] = v = b2 * state["exp_avg_sq"] + (1 - b2) * g * g
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = v = xp.maximum(state["max_exp_avg_sq"], v)
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        step = m_hat / (xp.sqrt(v_hat) + group["eps"])
        p -= group["lr"] * (step + wd * p if self.decoupled else step)

    def fused_step(self) -> None:
        """fused_update on every parameter with a gradient, in pieces of at most self.piece[device] elements, each
        with a scratch buffer of its thread's: no temporary the size of the model."""
        jobs = []
        for group, p, state in self.with_state():
            state["step"] += 1
            buffers = {k: v for k, v in state.items() if k != "step"}
            param, grad = p.array, p.grad.array
            kernels = speed.modes.kernels  # minigrad.speed.kernels under mg.compiled(): the rule compiled (not amsgrad)
            if kernels and not group["amsgrad"] and all(kernels.takes(a) for a in (param, grad, *buffers.values())):
                kernels.adam(param, grad, buffers["exp_avg"], buffers["exp_avg_sq"], group["lr"], group["betas"],
                             group["eps"], group["weight_decay"], group["maximize"], state["step"], self.decoupled)
            else:
                pieces = _pieces(param, grad, buffers, self.piece[p.device])
                jobs += [(group, state["step"], *piece) for piece in pieces]
            increment_version(p)
        if not jobs:
            return
        scratch = threading.local()  # this step's scratch buffers, one per thread

        def update(job: tuple) -> None:
            group, t, p, g, buffers = job
            self.fused_update(p, g, buffers, _scratch_for(scratch, p), group, t, self.decoupled)

        runtime.run_parallel(update, jobs, backend.device_of(jobs[0][2]), sum(job[2].size for job in jobs))

    @staticmethod
    def fused_update(p: Any, g: Any, buffers: dict[str, Any], tmp: Any, group: dict[str, Any], t: int,
                     decoupled: bool) -> None:
        """update()'s rule in the order torch.optim.AdamW computes it, every result written in place in 12 passes
        (13 with AdamW's decay): m += (1 - b1) (g - m) (torch's lerp), v = b2 v + (1 - b2) g^2, and the bias
        corrections folded into two constants, lr sqrt(1 - b2^t) / (1 - b1^t) and eps sqrt(1 - b2^t). maximize (-g)
        and Adam's L2 decay (g + wd * p) make one new array of the piece's size first (g is the parameter's .grad)."""
        xp = backend.get_array_module(p)
        lr, (b1, b2), decay = group["lr"], group["betas"], group["weight_decay"]
        m, v = buffers["exp_avg"], buffers["exp_avg_sq"]
        root = math.sqrt(1 - b2**t)
        g = -g if group["maximize"] else g
        if decay and decoupled:
            p *= 1 - lr * decay
        elif decay:
            g = g + decay * p
        xp.subtract(g, m, out=tmp)
        tmp *= 1 - b1
        m += tmp
        xp.multiply(g, g, out=tmp)  # not b2 (v - g^2) + g^2, which loses three digits where v is far below g^2
        tmp *= 1 - b2
        v *= b2
        v += tmp
        if group["amsgrad"]:
            v = xp.maximum(buffers["max_exp_avg_sq"], v, out=buffers["max_exp_avg_sq"])
        xp.sqrt(v, out=tmp)  # the denominator, sqrt(v) + eps sqrt(1 - b2^t), built in tmp
        tmp += group["eps"] * root
        xp.divide(m, tmp, out=tmp)
        tmp *= lr * root / (1 - b1**t)
        p -= tmp


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW and llm.c: the decay shrinks p
    directly instead of joining g and the moments, and is on by default (1e-2):

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
    p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)

    amsgrad, maximize and fused=True as Adam's.
    """

    decoupled = True

    def __init__(self, params: ParamGroups, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 fused: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, fused=fused)


# ---- RMSprop and Adagrad: a step scaled by each weight's own history of squared gradients ----

class RMSprop(Optimizer):
    """As torch.optim.RMSprop (Hinton's lecture 6e):

    g = g + wd * p;  v = alpha v + (1 - alpha) g^2;  avg = sqrt(v) + eps
    (centered: m = alpha m + (1 - alpha) g;  avg = sqrt(v - m^2) + eps)
    p -= lr * g / avg   (momentum: buf = momentum buf + g / avg;  p -= lr * buf)
    """

    def __init__(self, params: ParamGroups, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered, "maximize": maximize})

    def check(self, group, where):
        for key in ("lr", "eps", "weight_decay", "momentum", "alpha"):
            group[key] = _number(where, group, key)
        group["centered"], group["maximize"] = _flag(where, group, "centered"), _flag(where, group, "maximize")
        return group

    def new_state(self, p, group):
        xp = backend.get_array_module(p.array)
        names = ["square_avg"] + ["momentum_buffer"] * (group["momentum"] > 0) + ["grad_avg"] * group["centered"]
        return {"step": 0, **{name: xp.zeros(p.shape, dtype=p.dtype) for name in names}}

    def update(self, p, g, group, state):
        xp, alpha = backend.get_array_module(p), group["alpha"]
        g = -g if group["maximize"] else g
        g = g + group["weight_decay"] * p if group["weight_decay"] else g
        state["step"] += 1
        state["square_avg"] = v = alpha * state["square_avg"] + (1 - alpha) * g * g
        if group["centered"]:
            state["grad_avg"] = m = alpha * state["grad_avg"] + (1 - alpha) * g
            v = v - m * m
        avg = xp.sqrt(v) + group["eps"]
        if group["momentum"] > 0:
            state["momentum_buffer"] = buf = group["momentum"] * state["momentum_buffer"] + g / avg
            p -= group["lr"] * buf
        else:
            p -= group["lr"] * g / avg


class Adagrad(Optimizer):
    """As torch.optim.Adagrad (Duchi et al.), at step t:

    g = g + wd * p;  clr = lr / (1 + (t - 1) lr_decay);  sum = sum + g^2;  p -= clr * g / (sqrt(sum) + eps)
    """

    def __init__(self, params: ParamGroups, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, *, maximize: bool = False) -> None:
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "eps": eps,
                                  "maximize": maximize})

    def check(self, group, where):
        for key in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            group[key] = _number(where, group, key)
        group["maximize"] = _flag(where, group, "maximize")
        return group

    def new_state(self, p, group):
        xp = backend.get_array_module(p.array)
        return {"step": 0, "sum": xp.full(p.shape, group["initial_accumulator_value"], dtype=p.dtype)}

    def update(self, p, g, group, state):
        xp = backend.get_array_module(p)
        g = -g if group["maximize"] else g
        g = g + group["weight_decay"] * p if group["weight_decay"] else g
        state["step"] += 1
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        state["sum"] = total = state["sum"] + g * g
        p -= clr * g / (xp.sqrt(total) + group["eps"])


# ---- L-BFGS: a quasi-Newton step from the last history_size steps, with an optional line search ----

class LBFGS(Optimizer):
    """As torch.optim.LBFGS (Nocedal's two-loop recursion; line_search_fn="strong_wolfe" as PyTorch's, after
    minFunc): step(closure) calls closure() (zero the gradients, compute the loss, backward, return the loss) up to
    max_eval times, doing up to max_iter iterations, and returns the first loss. One param group; the parameters are
    treated as one flat vector x with gradient g."""

    def __init__(self, params: ParamGroups, lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval or max_iter * 5 // 4,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS: doesn't support per-parameter options (parameter groups), as PyTorch's")

    def check(self, group, where):
        for key in ("lr", "tolerance_grad", "tolerance_change"):
            group[key] = _number(where, group, key)
        for key in ("max_iter", "max_eval", "history_size"):
            if not isinstance(group[key], int) or isinstance(group[key], bool) or group[key] < 1:
                raise ValueError(f"{where}: {key} must be an int >= 1, got {group[key]!r}")
        return group

    # -- the parameters as one vector --
    def _params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    def _flat_grad(self) -> Any:
        xp = backend.get_array_module(self._params()[0].array)
        return xp.concatenate([(p.grad.array if p.grad is not None else xp.zeros(p.shape, p.dtype)).reshape(-1)
                               for p in self._params()])

    def _add(self, t: float, d: Any) -> None:
        """x += t d, parameter by parameter, in place."""
        offset = 0
        for p in self._params():
            p.array[...] += t * d[offset:offset + p.numel()].reshape(p.shape)
            offset += p.numel()
            increment_version(p)

    def _set(self, x: list[Any]) -> None:
        for p, value in zip(self._params(), x, strict=True):
            p.array[...] = value
            increment_version(p)

    def _evaluate(self, closure: Any, x: list[Any], t: float, d: Any) -> tuple[float, Any]:
        """loss and flat gradient at x + t d; the parameters are put back at x."""
        self._add(t, d)
        loss = float(closure())
        flat_grad = self._flat_grad()
        self._set(x)
        return loss, flat_grad

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        """Up to max_iter iterations of: the direction d from the history (two loops), a step t along it (lr, or
        the first iteration's min(1, 1 / |g|_1) lr; or found by the line search), x += t d, a new loss and gradient."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure: a function that zeroes the gradients, computes the loss, "
                               "calls backward() and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state.setdefault(self._params()[0], {"func_evals": 0, "n_iter": 0})
        orig_loss = closure()
        loss, evals = float(orig_loss), 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        xp = backend.get_array_module(flat_grad)
        if float(xp.abs(flat_grad).max()) <= tolerance_grad:
            return orig_loss  # already optimal
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs", []), state.get("old_stps", []), state.get("ro", [])
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag", 1.0), state.get("prev_flat_grad"), None
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, H_diag = -flat_grad, [], [], [], 1.0
            else:  # remember the step s and the change of gradient y, if the curvature y.s is positive
                y, s = flat_grad - prev_flat_grad, d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == group["history_size"]:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y), old_stps.append(s), ro.append(1.0 / ys)
                    H_diag = ys / float(y @ y)  # the initial inverse Hessian, a scaled identity
                # d = -H g by the two-loop recursion
                q, al = -flat_grad, [0.0] * len(old_dirs)
                for i in reversed(range(len(old_dirs))):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
            prev_flat_grad, prev_loss = flat_grad.copy(), loss
            t = min(1.0, 1.0 / float(xp.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)  # the directional derivative
            if gtd > -tolerance_change:
                break
            if group["line_search_fn"] == "strong_wolfe":
                x_init = [p.array.copy() for p in self._params()]
                loss, flat_grad, t, ls_evals = _strong_wolfe(lambda x, t_, d_: self._evaluate(closure, x, t_, d_),
                                                            x_init, t, d, loss, flat_grad, gtd)
                self._add(t, d)
            else:
                self._add(t, d)
                ls_evals = 0
                if n_iter != max_iter:  # a new gradient for the next direction (the last iteration needs none)
                    loss, flat_grad, ls_evals = float(closure()), self._flat_grad(), 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval:
                break
            if float(xp.abs(flat_grad).max()) <= tolerance_grad:
                break
            if float(xp.abs(d * t).max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """The settings, as every optimizer's, and the history (kept under the first parameter, as PyTorch's: counts,
        numbers, flat arrays and lists of them), its arrays copied to the parameters' dtype and device."""
        entries = list(saved.get("state", {}).values()) if isinstance(saved, dict) else []
        super().load_state_dict({**saved, "state": {}} if isinstance(saved, dict) else saved)
        if entries:
            p = self._params()[0]

            def restored(value: Any) -> Any:
                if isinstance(value, list):
                    return [restored(v) for v in value]
                if backend.is_array(value):
                    return as_array(value, p.dtype, p.device, "LBFGS.load_state_dict", copy=True)
                return value

            self.state = {p: {key: restored(value) for key, value in dict(entries[0]).items()}}


def _cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                      bounds: tuple[float, float] | None = None) -> float:
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clipped to `bounds` (the
    interval [x1, x2] by default); the bounds' midpoint where the cubic has no minimum."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (low + high) / 2
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, low), high)


def _strong_wolfe(evaluate: Any, x: Any, t: float, d: Any, f: float, g: Any, gtd: float, c1: float = 1e-4,
                 c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25) -> tuple[float, Any, float, int]:
    """A step t along d meeting the strong Wolfe conditions, f(x + t d) <= f + c1 t gtd (enough decrease) and
    |g(x + t d).d| <= -c2 gtd (enough flattening), as minFunc's and PyTorch's: grow t until a bracket holds a
    good step, then zoom into it by cubic interpolation. evaluate(x, t, d) gives (loss, flat gradient) at x + t d.
    Returns (loss, gradient, t, evaluations)."""
    xp = backend.get_array_module(d)
    d_norm = float(xp.abs(d).max())
    f_new, g_new = evaluate(x, t, d)
    evals, gtd_new = 1, float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, ls_iter = False, 0
    while ls_iter < max_ls:  # bracketing
        not_lower = f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev)
        if not not_lower and abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        if not_lower or gtd_new >= 0:  # the minimum lies between t_prev and t
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                         bounds=(t + 0.01 * (t - t_prev), t * 10))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals, gtd_new, ls_iter = evals + 1, float(g_new @ d), ls_iter + 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:  # zoom
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # a point too near an end of the bracket is moved 10% inside it, unless the last one was not
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(x, t, d)
        evals, gtd_new, ls_iter = evals + 1, float(g_new @ d), ls_iter + 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = \
                    bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def _pieces(p: Any, g: Any, buffers: dict[str, Any], size: int) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Views of at most `size` elements of a parameter array, its gradient and its state buffers. An array that
    is not C-contiguous (nn.Parameter(W.T)) would be copied by reshape(-1), and the update lost: one piece."""
    if not all(a.flags.c_contiguous for a in (p, *buffers.values())):
        yield p, g, buffers
        return
    flat_p, flat_g = p.reshape(-1), g.reshape(-1)
    flat_buffers = {k: v.reshape(-1) for k, v in buffers.items()}
    for start in range(0, p.size, size):
        chunk = slice(start, start + size)
        yield flat_p[chunk], flat_g[chunk], {k: v[chunk] for k, v in flat_buffers.items()}


def _scratch_for(scratch: threading.local, piece: Any) -> Any:
    """A scratch array shaped like `piece`, one buffer per thread, reused from piece to piece."""
    key = (backend.device_of(piece), piece.dtype)
    buffers = scratch.__dict__
    if key not in buffers or buffers[key].size < piece.size:
        buffers[key] = backend.get_array_module(piece).empty(piece.size, dtype=piece.dtype)
    return buffers[key][: piece.size].reshape(piece.shape)


def decay_groups(named_params: Iterable[tuple[str, Tensor]], weight_decay: float) -> list[dict[str, Any]]:
    """Two groups, as GPT-2 training does: matrices (ndim >= 2) decay; biases and LayerNorm's weight vectors do not."""
    params = list(named_params)
    return [{"params": [p for _, p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for _, p in params if p.ndim < 2], "weight_decay": 0.0}]


def zero_grads(params: Iterable[Tensor], set_to_none: bool = True) -> None:
    """Optimizer.zero_grad and Module.zero_grad, as PyTorch's: drop each parameter's .grad, or with
    set_to_none=False cut it from any graph (grad.detach_(): a penalty built on it with create_graph=True no longer
    reaches the parameters through it) and write zeros into it, a write counted in its version, so that a graph that
    kept .grad refuses to run backward."""
    for p in params:
        if set_to_none:
            p.grad = None
        elif p.grad is not None:
            p.grad.detach_().zero_()


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float | str = 2.0,
                    error_if_nonfinite: bool = False) -> float:
    """Scale all gradients in place so their joint norm (L2, or norm_type: any p > 0, or inf, also as 'inf') is at
    most max_norm; return the norm before. As torch.nn.utils.clip_grad_norm_: one tensor or an iterable of them; a
    non-finite norm leaves the gradients as they are, or with error_if_nonfinite=True is a RuntimeError. Where the
    sum of powers overflows the gradients' dtype (float32 squares beyond 3.4e38) though every gradient is finite, the
    norm is computed again over the gradients divided by their largest magnitude, and comes out true and finite.

    The norm is summed where the gradients live and read back once: on a GPU, one wait per call.
    """
    params = [parameters] if isinstance(parameters, Tensor) else parameters  # a tensor would iterate its rows
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)) or not max_norm >= 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be a number >= 0, got {max_norm!r}")
    if isinstance(norm_type, str) and norm_type.lower() in ("inf", "+inf", "infinity"):
        norm_type = math.inf
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be a number > 0, or inf (also 'inf'), got {norm_type!r}")
    tensors = [p.grad for p in params if p.grad is not None]
    grads = [g.array for g in tensors]
    total = _norm(grads, norm_type)
    if math.isinf(total) and norm_type != math.inf:  # the powers overflowed; the values may not have
        largest = _norm(grads, math.inf)
        if math.isfinite(largest) and largest > 0:
            total = largest * _norm([g / g.dtype.type(largest) for g in grads], norm_type)
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is {total}")
        return total
    for g in tensors:  # PyTorch multiplies by min(1, max_norm / norm): a write, even where the norm was below max_norm
        increment_version(g)
    if total > max_norm:
        for g in grads:
            g *= max_norm / (total + 1e-6)
    return total


def _norm(grads: list[Any], norm_type: float) -> float:
    """The joint norm of order norm_type of the arrays, summed where they live and read back once."""
    total = 0.0
    for g in grads:
        xp, flat = backend.get_array_module(g), g.reshape(-1)
        if norm_type == 2.0:
            total = total + xp.vdot(flat, flat)  # the squares, summed
        elif norm_type == math.inf:
            if flat.size:  # an empty gradient has no max; CuPy's max takes no initial=
                total = xp.maximum(total, xp.abs(flat).max())
        else:
            with np.errstate(over="ignore"):  # an overflow gives inf, which clip_grad_norm_ handles
                total = total + (xp.abs(flat) ** norm_type).sum()
    return float(total) if norm_type == math.inf else float(total) ** (1 / norm_type)


def cosine_lr(step: int, max_lr: float, max_steps: int, warmup_steps: int = 0, min_lr: float = 0.0) -> float:
    """Learning rate at `step`: linear warmup to max_lr, then cosine decay to min_lr at max_steps."""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def clip_grad_value_(params: Iterable[Tensor] | Tensor, clip_value: float) -> None:
    """Clamp every gradient in place to [-clip_value, clip_value], element by element, as
    torch.nn.utils.clip_grad_value_; params is one tensor or several."""
    if isinstance(clip_value, bool) or not isinstance(clip_value, (int, float)) or not clip_value >= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be a number >= 0, got {clip_value!r}")
    for p in [params] if isinstance(params, Tensor) else params:
        if p.grad is not None:
            g = p.grad.array
            backend.get_array_module(g).clip(g, -clip_value, clip_value, out=g)
            increment_version(p.grad)

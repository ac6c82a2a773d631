"""Learning-rate schedules as objects, as torch.optim.lr_scheduler: made on an optimizer, each step() sets the
next rate in every param_groups[i]["lr"]. LambdaLR scales by your function of the step; WarmupCosineLR is train.py's
warmup + cosine (optim.cosine_lr); StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, OneCycleLR and
SequentialLR are PyTorch's, each its closed form; ReduceLROnPlateau follows a metric instead of the step. Each
group's "lr" is written; its first rate is kept in the group as "initial_lr" (set by the first schedule made on it,
as PyTorch's), which every later schedule takes as its base.
"""

from __future__ import annotations

import bisect
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

from minigrad.optim import Optimizer, cosine_lr


class LRScheduler:
    """The base: base_lrs (each group's "initial_lr": its rate before the first schedule made on the optimizer, so
    that a second or re-created schedule does not scale a rate already scaled), last_epoch (the steps taken, 0 after
    construction, which already sets step 0's rate) and get_lr(), the rates at last_epoch, that a subclass gives."""

    def __init__(self, optimizer: Optimizer) -> None:
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an optimizer")
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self.step()

    def get_lr(self) -> list[float]:
        """The rate of each group at step last_epoch."""
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    def step(self) -> None:
        """Advance one step and set each group's rate (call it after optimizer.step(), as in PyTorch)."""
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self.last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The rates step() set last, one per group."""
        return list(self.last_lr)

    # -- saving and loading: the schedule's position, not the optimizer's (its state_dict has the rates) --
    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs), "last_lr": list(self.last_lr)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() gave, after checking it: a bad state is a ValueError that changes nothing."""
        name, groups = f"{type(self).__name__}.load_state_dict", len(self.optimizer.param_groups)
        if not isinstance(state, dict) or not {"last_epoch", "base_lrs", "last_lr"} <= state.keys():
            raise ValueError(f"{name}: expected what state_dict() gives, a dict with last_epoch, base_lrs and last_lr")
        epoch = state["last_epoch"]
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"{name}: last_epoch must be an integer >= 0, got {epoch!r}")
        for key in ("base_lrs", "last_lr"):
            lrs = state[key]
            if not isinstance(lrs, list) or len(lrs) != groups or \
                    not all(isinstance(lr, (int, float)) and not isinstance(lr, bool) for lr in lrs):
                raise ValueError(f"{name}: {key} must be a list of {groups} numbers (one per group), got {lrs!r:.80}")
        self.last_epoch, self.base_lrs, self.last_lr = epoch, list(state["base_lrs"]), list(state["last_lr"])


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(step), one function for every group or a list of one per group, as
    torch.optim.lr_scheduler.LambdaLR; micrograd's demo decays as LambdaLR(opt, lambda k: 1 - 0.9 * k / 100)."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]]
                 ) -> None:
        groups = getattr(optimizer, "param_groups", [])
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * len(groups)
        if len(lambdas) != len(groups):
            raise ValueError(f"LambdaLR: expected {len(groups)} lr_lambdas (one per group), got {len(lambdas)}")
        if not all(callable(f) for f in lambdas):
            raise TypeError(f"LambdaLR: lr_lambda must be a function of the step (or a list of them), "
                            f"got {lr_lambda!r:.80}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """As PyTorch: a plain function is not saved (None); a callable object's attributes are."""
        return {**super().state_dict(), "lr_lambdas": [None if isinstance(f, types.FunctionType) else dict(vars(f))
                                                       for f in self.lr_lambdas]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("lr_lambdas", [None] * len(self.lr_lambdas)) if isinstance(state, dict) else None
        if not isinstance(saved, list) or len(saved) != len(self.lr_lambdas) or \
                not all(s is None or isinstance(s, dict) for s in saved):
            raise ValueError(f"LambdaLR.load_state_dict: lr_lambdas must be a list of {len(self.lr_lambdas)} "
                             f"entries, each None or a dict, got {saved!r:.80}")
        super().load_state_dict(state)
        for f, attributes in zip(self.lr_lambdas, saved, strict=True):
            if attributes is not None:
                vars(f).update(attributes)


class WarmupCosineLR(LRScheduler):
    """train.py's schedule: linear warmup to base_lr over warmup_steps, then a cosine decay to min_lr at max_steps,
    lr = optim.cosine_lr(step, base_lr, max_steps, warmup_steps, min_lr) (PyTorch's CosineAnnealingLR, warmed up)."""

    def __init__(self, optimizer: Optimizer, warmup_steps: int, max_steps: int, min_lr: float = 0.0) -> None:
        for name, value in (("warmup_steps", warmup_steps), ("max_steps", max_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"WarmupCosineLR: {name} must be an integer >= 0, got {value!r}")
        if not warmup_steps <= max_steps:
            raise ValueError(f"WarmupCosineLR: warmup_steps={warmup_steps} is more than max_steps={max_steps}")
        self.warmup_steps, self.max_steps, self.min_lr = warmup_steps, max_steps, min_lr
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [cosine_lr(self.last_epoch, base, self.max_steps, self.warmup_steps, self.min_lr)
                for base in self.base_lrs]


# ---- PyTorch's schedules, each as its closed form of the step (PyTorch's own closed forms, equal to its updates) ----

class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (step // step_size): divided by 1/gamma every step_size steps."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be an integer >= 1, got {step_size!r}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (the milestones passed): multiplied by gamma at each milestone step."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1) -> None:
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** step."""

    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        self.gamma = gamma
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) (1 + cos(pi step / T_max)) / 2 (SGDR without restarts): half a cosine
    from base_lr down to eta_min over T_max steps, then back up, as PyTorch's."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max!r}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = base_lr * factor, the factor going linearly from start_factor to end_factor over total_iters steps
    (a warmup with the defaults 1/3 -> 1 over 5 steps), then staying at end_factor."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor} "
                             f"and {end_factor}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        done = min(self.total_iters, self.last_epoch) / self.total_iters if self.total_iters else 1.0
        factor = self.start_factor + (self.end_factor - self.start_factor) * done
        return [base * factor for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """Smith's 1cycle: from max_lr / div_factor up to max_lr over pct_start of total_steps, then down to
    max_lr / div_factor / final_div_factor (three_phase: back to the start first, then down), each phase a cosine
    (anneal_strategy="cos") or a line; the momentum (SGD's momentum, Adam's beta1) moves the opposite way between
    max_momentum and base_momentum where cycle_momentum. Its rates are its own: it sets each group's initial_lr."""

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True, base_momentum: float = 0.85,
                 max_momentum: float = 0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False) -> None:
        if total_steps is None and (epochs is None or steps_per_epoch is None):
            raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
        self.total_steps = total_steps if total_steps is not None else epochs * steps_per_epoch
        if self.total_steps <= 0 or not 0 <= pct_start <= 1 or anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: total_steps must be positive ({self.total_steps}), pct_start in [0, 1] "
                             f"({pct_start}), anneal_strategy 'cos' or 'linear' ({anneal_strategy!r})")
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        self.anneal = self._cos if anneal_strategy == "cos" else self._linear
        self.cycle_momentum, self.use_beta1 = cycle_momentum, "betas" in optimizer.defaults
        if cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
            raise ValueError("OneCycleLR: the optimizer must have a momentum or betas with cycle_momentum=True")
        for group, top in zip(groups, max_lrs, strict=True):
            group.update(initial_lr=top / div_factor, max_lr=top, min_lr=top / div_factor / final_div_factor)
            if cycle_momentum:
                group.update(max_momentum=max_momentum, base_momentum=base_momentum)
                self._set_momentum(group, max_momentum)
        end = pct_start * self.total_steps
        # (the step a phase ends at, and the group keys its rate and its momentum go between)
        self.phases = [(end - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                       (2 * end - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                       (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")] \
            if three_phase else [(end - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                                 (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        super().__init__(optimizer)

    @staticmethod
    def _cos(start: float, end: float, pct: float) -> float:
        return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _linear(start: float, end: float, pct: float) -> float:
        return (end - start) * pct + start

    def _set_momentum(self, group: dict[str, Any], momentum: float) -> None:
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, more than total_steps={self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, m_from, m_to) in enumerate(self.phases):
                if step <= end or i == len(self.phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self.anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self.anneal(group[m_from], group[m_to], pct))
                    break
                start = end
        return lrs


class SequentialLR(LRScheduler):
    """schedulers[0] until milestones[0], then schedulers[1] from its own step 0, and so on, as PyTorch's."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int]) -> None:
        if len(schedulers) < 1 or len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected one milestone fewer than schedulers, got {len(schedulers)} "
                             f"schedulers and {len(milestones)} milestones")
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ValueError("SequentialLR: every scheduler must be made on the optimizer given")
        self.optimizer, self.schedulers, self.milestones = optimizer, list(schedulers), list(milestones)
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self.step()

    def step(self) -> None:
        self.last_epoch += 1
        i = bisect.bisect_right(self.milestones, self.last_epoch)
        scheduler = self.schedulers[i]
        scheduler.last_epoch = self.last_epoch - (self.milestones[i - 1] if i else 0) - 1  # its own step count
        scheduler.step()
        self.last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "schedulers": [s.state_dict() for s in self.schedulers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("schedulers") if isinstance(state, dict) else None
        if not isinstance(saved, list) or len(saved) != len(self.schedulers):
            raise ValueError(f"SequentialLR.load_state_dict: expected the states of {len(self.schedulers)} "
                             "schedulers under 'schedulers'")
        super().load_state_dict(state)
        for scheduler, s in zip(self.schedulers, saved, strict=True):
            scheduler.load_state_dict(s)


class ReduceLROnPlateau:
    """Divide the rate by 1/factor when the metric given to step(metric) has not improved (by threshold, relative
    or absolute) for more than `patience` steps, then wait `cooldown` steps; never below min_lr, as PyTorch's."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float | Sequence[float] = 0.0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode 'rel' or 'abs', got "
                             f"{mode!r} and {threshold_mode!r}")
        groups = optimizer.param_groups
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * len(groups)
        if len(self.min_lrs) != len(groups):
            raise ValueError(f"ReduceLROnPlateau: expected {len(groups)} min_lrs (one per group), got "
                             f"{len(self.min_lrs)}")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = self.last_epoch = 0
        self.last_lr = [group["lr"] for group in groups]

    def is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < (best * (1 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (1 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics: Any) -> None:
        current = float(metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:  # bad steps in the cooldown do not count
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                new = max(group["lr"] * self.factor, min_lr)
                if group["lr"] - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self.last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self.last_lr)

    _SAVED = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch", "last_lr")

    def state_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self._SAVED}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or not set(self._SAVED) <= state.keys():
            raise ValueError(f"ReduceLROnPlateau.load_state_dict: expected a dict with {', '.join(self._SAVED)}")
        for key in self._SAVED:
            setattr(self, key, list(state[key]) if key == "last_lr" else state[key])

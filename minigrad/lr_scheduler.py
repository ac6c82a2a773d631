"""Learning-rate schedules as objects, as torch.optim.lr_scheduler: made on an optimizer, each step() sets the
next rate in every param_groups[i]["lr"]. LambdaLR scales by your function of the step; WarmupCosineLR is train.py's
warmup + cosine (optim.cosine_lr). Each group's "lr" is written; its first rate is kept in the group as "initial_lr"
(set by the first schedule made on it, as PyTorch's), which every later schedule takes as its base.
"""

from __future__ import annotations

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

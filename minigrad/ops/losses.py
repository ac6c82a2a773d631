"""The losses, each a Function with its closed-form backward. Cross-entropy under softmax(logits), one Function per
kind of target: class indices (dlogits = softmax - the smoothed one-hot) and class probabilities; the negative
log-likelihood of log-probabilities; mean squared error; binary cross-entropy of sigmoid(logits). N rows, V classes.
"""

from __future__ import annotations

from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import (
    as_rows,
    broadcasts_to,
    index_array,
    indices_in_range,
    stable_sigmoid,
    stable_softmax,
)
from minigrad.array.dtypes import check_float, number_kind
from minigrad.core import Tensor, derived, namespace
from minigrad.ops import Primitive
from minigrad.ops.activations import LogSoftmaxFunction, SoftmaxFunction
from minigrad.ops.elementwise import Sub

# ---- cross-entropy ----

class CrossEntropyFunction(Primitive):
    """loss_i = -log softmax(x_i)[t_i] for integer targets t; with label smoothing eps, the target is
    q_i = (1 - eps) one_hot(t_i) + eps / V, so loss_i = -sum_c q_ic log softmax(x_i)_c;  then reduced.

    dx_i = w_i (softmax(x_i) - q_i),  w_i = d loss / d loss_i (see row_weights; 0 for an ignored row)
    """

    def forward(self, logits, targets, counted, smoothing, reduction):
        xp = backend.get_array_module(logits)
        rows = xp.arange(targets.shape[0])
        losses, self.probs = self.losses_and_probs(as_rows(logits), rows, targets, smoothing)  # (N,), (N, V)
        losses = xp.where(counted > 0, losses, 0)  # selected: an ignored row's inf or NaN counts for nothing
        self.rows, self.targets, self.counted, self.n = rows, targets, counted, counted.sum()
        self.smoothing, self.reduction, self.logits_shape = smoothing, reduction, logits.shape
        return _reduce(losses, reduction, self.n, logits.shape[:-1])

    @staticmethod
    def losses_and_probs(x, rows, targets, smoothing):
        """Each row's loss -sum_c q_c log softmax(x)_c, q = (1 - eps) one_hot(t) + eps / V, and softmax(x), from one
        exp: probs = exp(x - max) / sum and -log softmax(x)[t] = log(sum) - (x - max)[t]. (mg.compiled() computes
        them in a kernel: minigrad/speed/kernels.py.)"""
        xp = backend.get_array_module(x)
        most = x.max(axis=1)  # (N,): x - max, the same softmax, and exp can no longer overflow
        exps = xp.exp(x - most[:, None])  # (N, V)
        sums = exps.sum(axis=1, keepdims=True)  # (N, 1)
        log_sums = xp.log(sums[:, 0])
        losses = log_sums - (x[rows, targets] - most)  # -log softmax(x)[t] = log(sum) - (x - max)[t]
        if smoothing:  # -sum_c q_c log softmax(x)_c = (1 - eps) (-log softmax(x)[t]) - eps mean_c log softmax(x)_c
            losses = (1 - smoothing) * losses - smoothing * (x.sum(axis=1) * (1 / x.shape[1]) - most - log_sums)
        return losses, exps / sums

    def backward(self, dout):
        xp = namespace(dout)
        probs = self.saved(self.probs, self.probs_in_graph)  # (N, V)
        counted = self.counted[:, None] > 0  # (N, 1)
        w = xp.where(counted, row_weights(dout, self.reduction, self.n, self.probs.shape[0]), 0)  # (N, 1)
        # in the forward pass this was: loss = reduce(-sum_c q_c log probs_c), so dx = w (probs - q); an ignored row:
        # (probs - q) * 0, so 0 unless its logits hold NaN or +inf (NaN, as PyTorch)
        return (((probs - self.target_distribution()) * w).reshape(self.logits_shape),)

    def target_distribution(self) -> Any:
        """q = (1 - eps) one_hot(t) + eps / V for each row, (N, V): a constant."""
        n, v = self.probs.shape
        q = backend.get_array_module(self.probs).full((n, v), self.smoothing / v, dtype=self.probs.dtype)
        q[self.rows, self.targets] += 1 - self.smoothing
        return q

    def probs_in_graph(self) -> Tensor:
        """softmax(logits) under create_graph=True, (N, V): the output of a softmax node of its own."""
        probs = derived(SoftmaxFunction, self.mg_parents[:1], self.probs.reshape(self.logits_shape),
                        y=self.probs.reshape(self.logits_shape))
        return probs.reshape(self.probs.shape)


class SoftCrossEntropyFunction(Primitive):
    """loss_i = -sum_c q_ic log softmax(x_i)_c for class probabilities p, q = (1 - eps) p + eps / V;
    then reduced (the mean divides by N).

    dx_i = w_i (softmax(x_i) * sum_c q_ic - q_i)  (the q_i need not sum to 1),
    dp_i = -w_i (1 - eps) log softmax(x_i),  w_i = d loss / d loss_i (see row_weights)
    """

    def forward(self, logits, target, smoothing, reduction):
        xp = backend.get_array_module(logits)
        log_probs = stable_softmax(as_rows(logits), axis=1, log=True)  # (N, V)
        q = as_rows(target)
        if smoothing:
            q = (1 - smoothing) * q + smoothing / q.shape[1]
        self.log_probs, self.target, self.smoothing, self.reduction = log_probs, target, smoothing, reduction
        self.n, self.logits_shape = xp.full((), q.shape[0], dtype=q.dtype), logits.shape  # filled in: no copy
        return _reduce(-(q * log_probs).sum(axis=1), reduction, self.n, logits.shape[:-1])

    def backward(self, dout):
        eps = self.smoothing
        log_probs = self.saved(self.log_probs, self.log_probs_in_graph)  # (N, V)
        q = as_rows(self.saved(self.target, 1)) * (1 - eps) + eps / self.log_probs.shape[1]  # (N, V)
        w = row_weights(dout, self.reduction, self.n, self.log_probs.shape[0])  # (N, 1)
        need_logits, need_target = self.needs_input_grad
        dx = dp = None
        # in the forward pass this was: loss = reduce(-sum_c q_c log_probs_c)
        if need_logits:
            softmax = namespace(dout).exp(log_probs)
            dx = (w * (softmax * q.sum(axis=1, keepdims=True) - q)).reshape(self.logits_shape)
        if need_target:
            dp = (log_probs * (w * -(1 - eps))).reshape(self.logits_shape)
        return dx, dp

    def log_probs_in_graph(self) -> Tensor:
        """log_softmax(logits) under create_graph=True, (N, V): the output of a log_softmax node of its own."""
        log_probs = self.log_probs.reshape(self.logits_shape)
        return derived(LogSoftmaxFunction, self.mg_parents[:1], log_probs, y=log_probs).reshape(self.log_probs.shape)


def _reduce(losses: Any, reduction: str, n: Any, shape: tuple[int, ...]) -> Any:
    """The rows' losses (N,) as one loss per row, their sum, or their mean over the n counted rows (NaN for none, as in
    PyTorch: chosen by xp.where, since an `if` would wait for the device to say n)."""
    if reduction == "none":
        return losses.reshape(shape)
    total = losses.sum(keepdims=True).reshape(())
    if reduction == "sum":
        return total
    xp = backend.get_array_module(losses)
    return xp.where(n > 0, total / xp.maximum(n, 1), total.dtype.type("nan"))  # a scalar: no array for the NaN


def row_weights(dout: Any, reduction: str, n: Any, rows: int) -> Any:
    """d loss / d loss_i for each row i, as a column (rows, 1): dout_i ("none"), dout ("sum") or
    dout / n ("mean"; 0 when n is 0, as PyTorch's gradient is then)."""
    if reduction == "none":
        return dout.reshape(-1, 1)
    w = dout / backend.get_array_module(n).maximum(n, 1) if reduction == "mean" else dout
    return namespace(dout).broadcast_to(w.reshape(1, 1), (rows, 1))


REDUCTIONS = ("mean", "sum", "none")  # PyTorch's three


def reduction_error(op: str, reduction: Any) -> ValueError:
    """The error for a reduction not in REDUCTIONS, naming the op (a loss layer's, when it is made)."""
    return ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def classes_last(x: Tensor) -> Tensor:
    """PyTorch's (N, C, d1, ...) as (N, d1, ..., C), a view: the losses' Functions read the classes on the last axis
    (C and (N, C) are already so)."""
    return x if x.ndim < 3 else x.permute(0, *range(2, x.ndim), 1)


def cross_entropy(logits: Tensor, targets: Any, *, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of `targets` under softmax(logits), as torch.nn.functional.cross_entropy: logits (C,), (N, C) or
    (N, C, d1, ...), the classes on axis 1 (for a sequence model's (B, T, V), flatten: logits.view(-1, V)). targets:
    integer class indices of shape (), (N,) or (N, d1, ...), those equal to ignore_index counted for nothing (loss
    and gradient 0, left out of the mean), or class probabilities of the logits' shape. label_smoothing eps:
    (1 - eps) target + eps / V. reduction: "mean" (over the counted rows: NaN if none), "sum" or "none". The options
    are keyword-only, so PyTorch's positional `weight` cannot land in one."""
    op = "cross_entropy"
    if reduction not in REDUCTIONS:
        raise reduction_error(op, reduction)
    number_kind(op, label_smoothing)  # None or a string: a TypeError that names cross_entropy
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    check_float(op, logits)
    if logits.ndim == 0:
        raise ValueError(f"{op}: logits must have a class axis, got shape {logits.shape}")
    if not (isinstance(targets, Tensor) and targets.dtype.kind == "f"):  # a float Tensor keeps its graph edge
        targets = index_array(op, targets, logits.device, "iuf", moved=False)  # still where it came from
    given, logits = logits.shape, classes_last(logits)
    if targets.dtype.kind == "f" and targets.shape == given:
        if not isinstance(targets, Tensor):
            targets = core.TENSOR.wrap(backend.to_device(targets, logits.device).astype(logits.dtype, copy=False))
        return SoftCrossEntropyFunction.apply(logits, classes_last(targets), smoothing=label_smoothing,
                                              reduction=reduction)
    if targets.dtype.kind == "f":
        raise TypeError(f"{op}: targets must be integer class indices of shape {logits.shape[:-1]} or class "
                        f"probabilities of the logits' shape {given}; got {targets.dtype}, {targets.shape}")
    targets, counted = _class_indices(op, targets, logits, f"logits of shape {given}", ignore_index)
    return CrossEntropyFunction.apply(logits, targets=targets, counted=counted, smoothing=label_smoothing,
                                      reduction=reduction)


def _class_indices(op: str, targets: Any, scores: Tensor, name: str, ignore_index: int) -> tuple[Any, Any]:
    """Integer class targets of scores.shape[:-1] (scores with their classes last), checked and flattened to (N,), an
    ignored one replaced by class 0 (a valid index, its loss zeroed), and which of them count: 1 or 0 in the
    scores' dtype."""
    if targets.shape != scores.shape[:-1]:
        hint = "; for (B, T, V) scores, flatten: x.view(-1, V), targets.view(-1)" if scores.ndim > 2 else ""
        raise ValueError(f"{op}: targets of shape {targets.shape} for {name}; expected {scores.shape[:-1]} "
                         f"(the classes are on axis 1){hint}")
    targets = indices_in_range(op, targets, scores.device, scores.shape[-1], "target", ignore_index).reshape(-1)
    counted = targets != ignore_index
    return targets * counted, counted.astype(scores.dtype)


# ---- negative log-likelihood ----

class NLLLossFunction(Primitive):
    """loss_i = -x_i[t_i] for log-probabilities x and integer targets t (0 for an ignored row), then reduced.

    dx_i = -w_i one_hot(t_i),  w_i = d loss / d loss_i (see row_weights; 0 for an ignored row)
    """

    def forward(self, log_probs, targets, counted, reduction):
        xp = backend.get_array_module(log_probs)
        self.rows, self.targets, self.counted, self.n = xp.arange(targets.shape[0]), targets, counted, counted.sum()
        self.reduction, self.input_shape = reduction, log_probs.shape
        losses = xp.where(counted > 0, -as_rows(log_probs)[self.rows, targets], 0)  # an ignored row's NaN: 0
        return _reduce(losses, reduction, self.n, log_probs.shape[:-1])

    def backward(self, dout):
        xp = namespace(dout)
        w = xp.where(self.counted > 0, row_weights(dout, self.reduction, self.n, self.rows.shape[0])[:, 0], 0)
        dx = xp.added_at(-w, (self.rows, self.targets), (self.rows.shape[0], self.input_shape[-1]))  # -w at t_i
        return (dx.reshape(self.input_shape),)


def nll_loss(input: Tensor, target: Any, *, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer class `target` under log-probabilities `input` (log_softmax's output), as
    torch.nn.functional.nll_loss: loss_i = -input_i[target_i], input (C,), (N, C) or (N, C, d1, ...) with the
    classes on axis 1 (as cross_entropy's), targets equal to ignore_index counted for nothing. reduction: "mean"
    (over the counted rows: NaN if none), "sum" or "none". nll_loss(log_softmax(x, 1), t) is cross_entropy(x, t)."""
    op = "nll_loss"
    if reduction not in REDUCTIONS:
        raise reduction_error(op, reduction)
    check_float(op, input)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class axis, got shape {input.shape}")
    given, input = input.shape, classes_last(input)
    targets, counted = _class_indices(op, index_array(op, target, input.device, "iu", moved=False), input,
                                      f"input of shape {given}", ignore_index)
    return NLLLossFunction.apply(input, targets=targets, counted=counted, reduction=reduction)


# ---- mean squared error ----

class MSELossFunction(Primitive):
    """loss_i = (x_i - y_i)^2 for every element i, then reduced (the mean divides by the number of elements).

    dx_i = 2 w_i (x_i - y_i),  dy_i = -dx_i,  w_i = d loss / d loss_i (see row_weights)
    """

    def forward(self, input, target, reduction):
        self.diff, self.reduction = input - target, reduction
        self.n = backend.get_array_module(input).full((), input.size, dtype=input.dtype)  # filled in: no copy
        return _reduce((self.diff * self.diff).reshape(-1), reduction, self.n, input.shape)

    def backward(self, dout):
        need_input, need_target = self.needs_input_grad
        # in the forward pass this was: loss = reduce((x - y)^2)
        w = row_weights(dout, self.reduction, self.n, self.diff.size).reshape(self.diff.shape)
        dx = (2 * w) * self.saved(self.diff, self.diff_in_graph)
        return (dx if need_input else None), (-dx if need_target else None)

    def diff_in_graph(self) -> Tensor:
        """x - y under create_graph=True: the output of a subtraction node of its own."""
        return derived(Sub, self.mg_parents, self.diff, a_shape=self.diff.shape, b_shape=self.diff.shape)


def mse_loss(input: Tensor, target: Any, *, reduction: str = "mean") -> Tensor:
    """The squared differences (input - target)^2, averaged over every element ("mean"), summed ("sum") or each
    kept ("none"), as torch.nn.functional.mse_loss. target: a tensor (its gradient flows too) or an array of the
    input's shape; PyTorch would broadcast another shape, with a warning that the result is likely wrong: refused."""
    op = "mse_loss"
    if reduction not in REDUCTIONS:
        raise reduction_error(op, reduction)
    target = _float_target(op, input, target)
    return MSELossFunction.apply(input, target, reduction=reduction)


def _float_target(op: str, input: Tensor, target: Any) -> Tensor:
    """target as a tensor of the floating-point input's shape: a float Tensor as it is (it may carry a gradient
    and must match the input's dtype), anything else (an array, a list, an integer tensor) in the input's dtype."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a tensor, got {type(input).__name__}")
    check_float(op, input)
    if not (isinstance(target, Tensor) and target.dtype.kind == "f"):
        target = core.TENSOR.leaf(target.array if isinstance(target, Tensor) else target, dtype=input.dtype,
                             device=input.device)
    if target.shape != input.shape:
        raise ValueError(f"{op}: target of shape {target.shape} for input of shape {input.shape}; they must be "
                         "the same")
    return target


# ---- binary cross-entropy of sigmoid(logits) ----

class BCEWithLogitsFunction(Primitive):
    """With s = sigmoid(x), target t, pos_weight p and weight w (both 1 when not given), for every element i:
    loss_i = -w_i [p_i t_i log s_i + (1 - t_i) log(1 - s_i)] = w_i [(1 - t_i) x_i + l_i softplus(-x_i)],
    l_i = 1 + (p_i - 1) t_i, softplus(z) = log(1 + e^z) = max(z, 0) + log(1 + e^-|z|) (finite for any x); reduced.

    dx_i = u_i w_i (l_i s_i - p_i t_i)   (= u_i w_i (s_i - t_i) when p = 1),
    dt_i = u_i w_i ((p_i - 1) softplus(-x_i) - x_i),  u_i = d loss / d loss_i (see row_weights)
    """

    def forward(self, x, target, weight, pos_weight, reduction):
        xp = backend.get_array_module(x)
        self.softplus = xp.maximum(-x, 0) + xp.log1p(xp.exp(-xp.abs(x)))  # softplus(-x) = -log sigmoid(x)
        l_ = 1 if pos_weight is None else 1 + (pos_weight - 1) * target
        losses = (1 - target) * x + l_ * self.softplus
        if weight is not None:
            losses *= weight
        self.x, self.target, self.weight, self.pos_weight, self.reduction = x, target, weight, pos_weight, reduction
        self.n = xp.full((), x.size, dtype=x.dtype)  # filled in on the device: no host-to-device copy
        return _reduce(losses.reshape(-1), reduction, self.n, x.shape)

    def backward(self, dout):
        need_x, need_target = self.needs_input_grad
        x, t = self.saved(self.x, 0), self.saved(self.target, 1)
        u = row_weights(dout, self.reduction, self.n, self.x.size).reshape(self.x.shape)
        if self.weight is not None:
            u = u * self.saved(self.weight, None)
        p = 1 if self.pos_weight is None else self.saved(self.pos_weight, None)
        # in the forward pass this was: loss = reduce(w ((1 - t) x + l softplus(-x))),  l = 1 + (p - 1) t
        dx = dt = None
        if need_x:
            s = self.saved(stable_sigmoid(self.x), lambda: x.sigmoid())  # sigmoid(x)
            dx = u * ((1 if self.pos_weight is None else 1 + (p - 1) * t) * s - p * t)
        if need_target:  # softplus(-x) = max(-x, 0) + log(1 + exp(-|x|)), finite for any x
            softplus = self.saved(self.softplus, lambda: (-x).relu() + ((-x.abs()).exp() + 1).log())
            dt = u * ((p - 1) * softplus - x)
        return dx, dt


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Any = None, *, reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """-[pos_weight t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))] * weight for logits x = input and targets t in
    [0, 1] of its shape, computed from x without overflow, as torch.nn.functional.binary_cross_entropy_with_logits.
    weight and pos_weight (the positives' weight, often one per class, the last axis) broadcast to the input's shape
    and get no gradient, as in PyTorch. reduction: "mean" over every element, "sum" or "none"."""
    op = "binary_cross_entropy_with_logits"
    if reduction not in REDUCTIONS:
        raise reduction_error(op, reduction)
    target = _float_target(op, input, target)
    weight, pos_weight = (_constant(op, name, value, input) for name, value in (("weight", weight),
                                                                                  ("pos_weight", pos_weight)))
    return BCEWithLogitsFunction.apply(input, target, weight=weight, pos_weight=pos_weight, reduction=reduction)


def _constant(op: str, name: str, value: Any, input: Tensor) -> Any:
    """weight or pos_weight as an array of the input's dtype and device that broadcasts to its shape, or None."""
    if value is None:
        return None
    if isinstance(value, Tensor) and value.requires_grad:
        raise ValueError(f"{op}: {name} requires grad, but the loss is not differentiable in it (as in PyTorch); "
                         f"pass {name}.detach()")
    array = core.TENSOR.leaf(value.array if isinstance(value, Tensor) else value, dtype=input.dtype,
                        device=input.device).array
    if not broadcasts_to(array.shape, input.shape):
        raise ValueError(f"{op}: {name} of shape {array.shape} does not broadcast to the input's shape {input.shape}")
    return array

"""Cross-entropy under softmax(logits), one Function per kind of target, each with a closed-form
backward: integer class indices (dlogits = softmax - the smoothed one-hot) and class probabilities
(dlogits = softmax * sum(q) - q), each row's term weighted by what the reduction gives it.
Shapes: N rows (all leading dimensions flattened), V classes (vocabulary), on the last axis.
"""

from __future__ import annotations

from typing import Any

from minigrad import backend
from minigrad.dtypes import check_float, number_kind
from minigrad.functional import stable_softmax
from minigrad.matmul import as_rows
from minigrad.shapes import _aux_array, _indices_in_range
from minigrad.tensor import Function, Tensor

# ---- cross-entropy ----

class CrossEntropyFunction(Function):
    """loss_i = -log softmax(x_i)[t_i] for integer targets t; with label smoothing eps, the target is
    q_i = (1 - eps) one_hot(t_i) + eps / V, so loss_i = -sum_c q_ic log softmax(x_i)_c;  then reduced.

    dx_i = w_i (softmax(x_i) - q_i),  w_i = d loss / d loss_i (see _row_weights; 0 for an ignored row)
    """

    def forward(self, logits, targets, counted, smoothing, reduction):
        xp = backend.get_array_module(logits)
        logp = stable_softmax(as_rows(logits), axis=1, log=True)  # (N, V)
        rows = xp.arange(logp.shape[0])
        losses = -logp[rows, targets]  # (N,): -log softmax(x)[target]
        if smoothing:  # -sum_c q_c log softmax(x)_c, q = (1 - eps) one_hot + eps / V
            losses = (1 - smoothing) * losses - smoothing * logp.mean(axis=1)
        losses *= counted
        self.probs = xp.exp(logp)  # (N, V), for backward
        self.rows, self.targets, self.counted, self.n = rows, targets, counted, counted.sum()
        self.smoothing, self.reduction, self.logits_shape = smoothing, reduction, logits.shape
        return _reduce(losses, reduction, self.n, logits.shape[:-1])

    def backward(self, dout):
        w = _row_weights(dout, self.reduction, self.n, self.probs.shape[0]) * self.counted[:, None]  # (N, 1)
        # in the forward pass this was: loss = reduce(-sum_c q_c log probs_c)
        dx = self.probs * w
        dx[self.rows, self.targets] -= (1 - self.smoothing) * w[:, 0]
        if self.smoothing:
            dx -= (self.smoothing / dx.shape[1]) * w
        return (dx.reshape(self.logits_shape),)


class SoftCrossEntropyFunction(Function):
    """loss_i = -sum_c q_ic log softmax(x_i)_c for class probabilities p, q = (1 - eps) p + eps / V;
    then reduced (the mean divides by N).

    dx_i = w_i (softmax(x_i) * sum_c q_ic - q_i)  (the q_i need not sum to 1),
    dp_i = -w_i (1 - eps) log softmax(x_i),  w_i = d loss / d loss_i (see _row_weights)
    """

    def forward(self, logits, target, smoothing, reduction):
        xp = backend.get_array_module(logits)
        log_probs = stable_softmax(as_rows(logits), axis=1, log=True)  # (N, V)
        q = as_rows(target)
        if smoothing:
            q = (1 - smoothing) * q + smoothing / q.shape[1]
        self.log_probs, self.q, self.smoothing, self.reduction = log_probs, q, smoothing, reduction
        self.n, self.logits_shape = xp.asarray(q.shape[0], dtype=q.dtype), logits.shape
        return _reduce(-(q * log_probs).sum(axis=1), reduction, self.n, logits.shape[:-1])

    def backward(self, dout):
        xp = backend.get_array_module(dout)
        w = _row_weights(dout, self.reduction, self.n, self.q.shape[0])  # (N, 1)
        need_logits, need_target = self.needs_input_grad
        dx = dp = None
        if need_logits:
            dx = xp.exp(self.log_probs) * self.q.sum(axis=1, keepdims=True)
            dx -= self.q
            dx *= w
            dx = dx.reshape(self.logits_shape)
        if need_target:
            dp = (self.log_probs * (-(1 - self.smoothing) * w)).reshape(self.logits_shape)
        return dx, dp


def _reduce(losses: Any, reduction: str, n: Any, shape: tuple[int, ...]) -> Any:
    """The rows' losses (N,) as one loss per row (shape), their sum, or their mean over n rows.

    n, the rows counted, is an array on the device: the mean of no row is NaN (0 / 0, as in PyTorch),
    chosen by xp.where rather than by an `if` that would wait for the device to say n.
    """
    if reduction == "none":
        return losses.reshape(shape)
    total = losses.sum(keepdims=True).reshape(())
    if reduction == "sum":
        return total
    xp = backend.get_array_module(losses)
    return xp.where(n > 0, total / _at_least_one(n), xp.asarray(float("nan"), dtype=total.dtype))


def _row_weights(dout: Any, reduction: str, n: Any, rows: int) -> Any:
    """d loss / d loss_i for each row i, as a column (rows, 1): dout_i ("none"), dout ("sum") or
    dout / n ("mean"; 0 when n is 0, as PyTorch's gradient is then)."""
    if reduction == "none":
        return dout.reshape(-1, 1)
    w = dout / _at_least_one(n) if reduction == "mean" else dout
    return backend.get_array_module(dout).broadcast_to(w.reshape(1, 1), (rows, 1))


def _at_least_one(n: Any) -> Any:
    return backend.get_array_module(n).maximum(n, 1)


def cross_entropy(logits: Tensor, targets: Any, *, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of `targets` under softmax(logits), the classes along the last axis, as
    torch.nn.functional.cross_entropy. `targets` are either
    - integer class indices of shape logits.shape[:-1]; a target equal to `ignore_index` counts for
      nothing: loss 0, gradient 0, and left out of the mean's count;
    - or class probabilities (floats) of the logits' shape; ignore_index does not apply.
    label_smoothing eps mixes the target with the uniform distribution: (1 - eps) target + eps / V.
    reduction: "mean" (over the rows counted: NaN when every target is ignored, as in PyTorch),
    "sum", or "none" (one loss per row, of shape logits.shape[:-1]).
    PyTorch keeps the classes on axis 1 of (N, V, d1, ...); here they are last, as in the GPT's (B, T, V)
    logits. The two agree for (N, V). The options after `targets` are keyword-only, so that PyTorch's
    positional `weight` (not supported) cannot be taken for one of them.
    """
    op = "cross_entropy"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    number_kind(op, label_smoothing)  # None or a string: a TypeError that names cross_entropy
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    check_float(op, logits)
    if logits.ndim == 0:
        raise ValueError(f"{op}: logits must have a class axis, got shape {logits.shape}")
    if not (isinstance(targets, Tensor) and targets.dtype.kind == "f"):  # a float Tensor keeps its graph edge
        targets = _aux_array(op, targets, logits, "iuf", moved=False)  # still where it came from
    if targets.dtype.kind == "f" and targets.shape == logits.shape:
        if not isinstance(targets, Tensor):
            targets = Tensor._wrap(backend.to_device(targets, logits.device).astype(logits.dtype, copy=False), False)
        return SoftCrossEntropyFunction.apply(logits, targets, smoothing=label_smoothing, reduction=reduction)
    if targets.dtype.kind == "f":
        raise TypeError(f"{op}: targets must be integer class indices of shape {logits.shape[:-1]} or class "
                        f"probabilities of the logits' shape {logits.shape}; got {targets.dtype}, {targets.shape}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"{op}: targets of shape {targets.shape} for logits of shape {logits.shape}; "
                         f"expected {logits.shape[:-1]}")
    targets = _indices_in_range(op, targets, logits, logits.shape[-1], "target", ignore_index)
    targets = targets.reshape(-1)
    counted = targets != ignore_index
    return CrossEntropyFunction.apply(logits, targets=targets * counted,  # ignored rows: any valid class, zeroed
                                      counted=counted.astype(logits.dtype), smoothing=label_smoothing,
                                      reduction=reduction)

"""Batch norm and group norm, the activations beyond the teaching set (elu, softplus, hardtanh, mish, ...) and the
losses beyond it (l1, smooth_l1, huber, binary_cross_entropy, kl_div, cosine_embedding, margin_ranking), as
torch.nn.functional's, each written as its formula from the primitives: no backward of its own, so first and
higher-order gradients and CuPy come with the primitives. nn/batchnorm.py, nn/activation.py and nn/loss.py wrap them
as layers.
"""

from __future__ import annotations

from typing import Any

from minigrad import core
from minigrad.autograd.switches import no_grad
from minigrad.core import Tensor
from minigrad.ops.activations import relu, softmax
from minigrad.ops.elementwise import abs, clamp, exp, log, sigmoid, tanh, where
from minigrad.ops.losses import REDUCTIONS, reduction_error

# ---- batch norm ----

def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Normalise each channel (axis 1) of (B, C, *) over the batch and the other axes, then scale and shift:
    y = (x - mean) / sqrt(var + eps) * weight + bias, as torch.nn.functional.batch_norm. Training: mean and var
    (biased) of this batch, and the running statistics (if given) move towards them by `momentum`, the variance's
    unbiased (n / (n - 1)); evaluation: the running statistics."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (B, C, *), got shape {input.shape}")
    C, axes = input.shape[1], (0, *range(2, input.ndim))
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (C,):
            raise ValueError(f"batch_norm: {name} of shape {t.shape} does not fit {C} channels (input {input.shape})")
    shape = (C, *(1,) * (input.ndim - 2))  # a channel's statistic broadcast over (B, C, *)
    if training:
        n = input.numel() // max(C, 1)
        if n <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input of shape "
                             f"{input.shape}")
        mean, var = input.mean(axes), input.var(axes, correction=0)  # (C,)
        if running_mean is not None and running_var is not None:
            with no_grad():  # the running statistics are buffers, not part of the graph
                running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
                running_var.mul_(1 - momentum).add_(var.detach() * (momentum * n / (n - 1)))
    elif running_mean is None or running_var is None:
        raise ValueError("batch_norm: evaluation (training=False) needs running_mean and running_var")
    else:
        mean, var = running_mean, running_var
    y = (input - mean.reshape(shape)) / (var.reshape(shape) + eps).sqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise each sample's channels (axis 1 of (B, C, *)) in num_groups groups of C / num_groups, each group over
    its channels and the other axes, then scale and shift per channel, as torch.nn.functional.group_norm (Wu & He;
    one group is layer norm over (C, *), C groups instance norm). The same in training and evaluation."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ValueError(f"group_norm: {num_groups} groups do not divide the channels (axis 1) of an input of shape "
                         f"{input.shape}")
    B, C = input.shape[:2]
    x = input.reshape(B, num_groups, -1)  # (B, G, C / G * rest)
    x = (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, correction=0) + eps).sqrt()
    y = x.reshape(input.shape)
    shape = (C, *(1,) * (input.ndim - 2))  # a channel's scale broadcast over (B, C, *)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


# ---- activations, each its formula ----

def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha (e^x - 1) (e^min(x, 0): no overflow in the branch not taken)."""
    return where(x > 0, x, alpha * (exp(clamp(x, max=0)) - 1))


def selu(x: Tensor) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants of Klambauer et al."""
    return 1.0507009873554804934193349852946 * elu(x, 1.6732632423543772848170429916717)


def celu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """max(0, x) + min(0, alpha (e^(x / alpha) - 1))."""
    return where(x > 0, x, alpha * (exp(clamp(x / alpha, max=0)) - 1))


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + e^(beta x)) / beta, as max(bx, 0) + log(1 + e^-|bx|) (no overflow); x itself where beta x >
    threshold, as PyTorch's."""
    bx = x * beta
    return where(bx > threshold, x, (relu(bx) + log(1 + exp(-abs(bx)))) / beta)


def logsigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-x)


def softsign(x: Tensor) -> Tensor:
    return x / (1 + abs(x))


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not be greater than max_val ({max_val})")
    return clamp(x, min_val, max_val)


def relu6(x: Tensor) -> Tensor:
    return clamp(x, 0.0, 6.0)


def hardsigmoid(x: Tensor) -> Tensor:
    """x / 6 + 1/2, clamped to [0, 1]: a piecewise-linear sigmoid."""
    return clamp(x / 6 + 0.5, 0.0, 1.0)


def hardswish(x: Tensor) -> Tensor:
    return x * hardsigmoid(x)


def mish(x: Tensor) -> Tensor:
    """x tanh(softplus(x)) (Misra)."""
    return x * tanh(softplus(x))


def tanhshrink(x: Tensor) -> Tensor:
    return x - tanh(x)


def softmin(x: Tensor, dim: int) -> Tensor:
    """softmax(-x): the smallest values get the largest weights."""
    return softmax(-x, dim)


def glu(x: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b), a and b the two halves of x along dim (a gated linear unit)."""
    if x.shape[dim] % 2:
        raise ValueError(f"glu: the halved axis {dim} of shape {x.shape} must have an even size")
    a, b = x.chunk(2, dim)
    return a * sigmoid(b)


def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """x where x >= 0, else weight * x; weight has one slope or one per channel (axis 1)."""
    if weight.numel() != 1 and (x.ndim < 2 or x.shape[1] != weight.numel()):
        raise ValueError(f"prelu: {weight.numel()} slopes do not fit the channels (axis 1) of an input of shape "
                         f"{x.shape}")
    w = weight.reshape(-1, *(1,) * (x.ndim - 2)) if weight.numel() != 1 else weight.reshape(())
    return where(x >= 0, x, w * x)


def normalize(x: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p, eps) along dim, as torch.nn.functional.normalize."""
    norm = (abs(x) ** p).sum(dim, keepdim=True) ** (1 / p) if p != 2 else (x * x).sum(dim, keepdim=True).sqrt()
    return x / clamp(norm, min=eps)



# ---- losses, each its formula (losses.py holds those with a closed-form backward of their own) ----

def _operand(op: str, value: Any, input: Tensor) -> Tensor:
    """A target (tensor, array, list or number) as a tensor of the input's dtype and device; a float tensor as it
    is, so that a loss between two computed tensors has both gradients."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a tensor, got {type(input).__name__}")
    if isinstance(value, Tensor) and value.dtype.kind == "f":
        return value
    return core.TENSOR.leaf(value.array if isinstance(value, Tensor) else value, dtype=input.dtype, device=input.device)


def _reduced(op: str, loss: Tensor, reduction: str) -> Tensor:
    """The elements' losses as they are ("none"), summed ("sum") or averaged ("mean"), as PyTorch's reduction."""
    if reduction not in REDUCTIONS:
        raise reduction_error(op, reduction)
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _same_shape(op: str, input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        raise ValueError(f"{op}: target of shape {target.shape} for input of shape {input.shape}; they must be the "
                         "same")


def l1_loss(input: Tensor, target: Any, *, reduction: str = "mean") -> Tensor:
    """|x - t|, reduced."""
    target = _operand("l1_loss", target, input)
    _same_shape("l1_loss", input, target)
    return _reduced("l1_loss", abs(input - target), reduction)


def smooth_l1_loss(input: Tensor, target: Any, *, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where d = |x - t| < beta, else d - 0.5 beta (beta = 0: |x - t|), reduced."""
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    target = _operand("smooth_l1_loss", target, input)
    _same_shape("smooth_l1_loss", input, target)
    d = abs(input - target)
    loss = d if beta == 0 else where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduced("smooth_l1_loss", loss, reduction)


def huber_loss(input: Tensor, target: Any, *, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 d^2 where d = |x - t| < delta, else delta (d - 0.5 delta) (= delta * smooth_l1 with beta = delta)."""
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    target = _operand("huber_loss", target, input)
    _same_shape("huber_loss", input, target)
    d = abs(input - target)
    return _reduced("huber_loss", where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def binary_cross_entropy(input: Tensor, target: Any, weight: Any = None, *, reduction: str = "mean") -> Tensor:
    """-w [t log x + (1 - t) log(1 - x)] for probabilities x in [0, 1] (each log clamped at -100, as PyTorch's, so
    that x = 0 or 1 gives a finite loss); F.binary_cross_entropy_with_logits takes logits, without the clamp."""
    op = "binary_cross_entropy"
    target = _operand(op, target, input)
    _same_shape(op, input, target)
    x = input.detach().array
    if ((x < 0) | (x > 1)).any():
        raise ValueError(f"{op}: all elements of input (shape {input.shape}) must be probabilities, in [0, 1]; for "
                         "logits use F.binary_cross_entropy_with_logits")
    loss = -(target * clamp(log(input), min=-100) + (1 - target) * clamp(log(1 - input), min=-100))
    if weight is not None:
        loss = loss * _operand(op, weight, input).detach()
    return _reduced(op, loss, reduction)


def kl_div(input: Tensor, target: Any, *, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """The pointwise KL divergence of the target distribution from the input's, input given as log-probabilities:
    t (log t - x) (0 where t = 0), or e^t (t - x) when the target is log-probabilities too (log_target=True).
    reduction "batchmean" (the sum over the batch size, the true KL per sample) as PyTorch's; "mean" averages over
    every element, as PyTorch's (which warns)."""
    op = "kl_div"
    target = _operand(op, target, input)
    if log_target:
        loss = exp(target) * (target - input)
    else:
        loss = where(target > 0, target * log(where(target > 0, target, 1.0)), 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduced(op, loss, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0, *,
                          reduction: str = "mean") -> Tensor:
    """For each row pair: 1 - cos(x1, x2) where the target is 1, max(0, cos(x1, x2) - margin) where it is -1."""
    op = "cosine_embedding_loss"
    target = _operand(op, target, input1)
    if input1.shape != input2.shape or target.shape != input1.shape[:-1]:
        raise ValueError(f"{op}: inputs of shapes {input1.shape} and {input2.shape} and a target of shape "
                         f"{target.shape}: the inputs must be (N, D) (or (D,)) alike and the target (N,) (or ())")
    eps = 1e-12  # PyTorch's, added to each squared norm
    cos = (input1 * input2).sum(-1) / (((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)).sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, clamp(cos - margin, min=0), 0.0)
    return _reduced(op, loss, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0, *,
                        reduction: str = "mean") -> Tensor:
    """max(0, -y (x1 - x2) + margin): x1 should rank above x2 where y = 1, below where y = -1."""
    op = "margin_ranking_loss"
    target = _operand(op, target, input1)
    if not (input1.shape == input2.shape == target.shape):
        raise ValueError(f"{op}: input1 {input1.shape}, input2 {input2.shape} and target {target.shape} must have "
                         "one shape")
    return _reduced(op, clamp(-target * (input1 - input2) + margin, min=0), reduction)

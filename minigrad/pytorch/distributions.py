"""Probability distributions, as torch.distributions: Categorical, Normal and Bernoulli, each with sample(),
log_prob(), entropy() and its parameters (probs and logits, loc and scale); Normal.rsample() draws
loc + scale * eps, differentiable in loc and scale (the reparameterisation trick of a VAE); kl_divergence for two
Normals or two Categoricals. A policy gradient's loss is -(dist.log_prob(action) * reward). Samples come from the
generator mg.manual_seed seeds. Written in the primitives, so log_prob and entropy have gradients.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minigrad.array.backend import broadcast_shapes
from minigrad.ops.activations import log_softmax, softmax
from minigrad.ops.creation import rand, randn
from minigrad.ops.elementwise import clamp, log, sigmoid
from minigrad.ops.losses import binary_cross_entropy_with_logits
from minigrad.ops.reductions import multinomial
from minigrad.tensor import Tensor, no_grad

Shape = tuple[int, ...]


def _as_tensor(value: Any, like: Tensor | None = None) -> Tensor:
    """A parameter or a value as a float tensor (of like's dtype and device, if given)."""
    if isinstance(value, Tensor):
        return value
    return Tensor.leaf(value, dtype=like.dtype if like is not None else np.float32,
                       device=like.device if like is not None else "cpu")


def _limits(dtype: Any) -> tuple[float, float]:
    """The float dtype's machine epsilon and its lowest value, as Python floats."""
    info = np.finfo(dtype)
    return float(info.eps), float(info.min)


def _one_of(name: str, probs: Any, logits: Any) -> None:
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: give either probs or logits, not {'both' if probs is not None else 'neither'}")


class Distribution:
    """batch_shape: the shape of independent distributions held; event_shape: the shape of one draw (() here)."""

    batch_shape: Shape = ()
    event_shape: Shape = ()

    def sample(self, sample_shape: Shape = ()) -> Tensor:
        """Draws of shape sample_shape + batch_shape, outside the graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Shape = ()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sample (rsample); use sample()")

    def _extended_shape(self, sample_shape: Shape) -> Shape:
        return tuple(sample_shape) + tuple(self.batch_shape)


class Categorical(Distribution):
    """K classes on the last axis of probs (non-negative weights, normalised here) or logits (log-weights):
    log_prob(k) = logits[k] - logsumexp(logits), entropy = -sum p log p."""

    def __init__(self, probs: Any = None, logits: Any = None) -> None:
        _one_of("Categorical", probs, logits)
        if probs is not None:
            probs = _as_tensor(probs)
            self.probs = probs / probs.sum(-1, keepdim=True)
            eps = _limits(probs.dtype)[0]
            self.logits = log(clamp(self.probs, eps, 1 - eps))  # as PyTorch's probs_to_logits
        else:
            logits = _as_tensor(logits)
            self.logits = log_softmax(logits, -1)  # normalised: logits - logsumexp(logits)
            self.probs = softmax(logits, -1)
        if self.probs.ndim < 1:
            raise ValueError(f"Categorical: probs or logits need a class axis, got shape {self.probs.shape}")
        self.batch_shape, self.num_events = self.probs.shape[:-1], self.probs.shape[-1]

    def sample(self, sample_shape: Shape = ()) -> Tensor:
        """Class indices (int64) of shape sample_shape + batch_shape."""
        n = math.prod(sample_shape)
        with no_grad():
            draws = multinomial(self.probs.reshape(-1, self.num_events), max(n, 1), replacement=True)  # (rows, n)
        return draws.t().reshape(*self._extended_shape(sample_shape))

    def log_prob(self, value: Any) -> Tensor:
        value = value if isinstance(value, Tensor) else Tensor.leaf(value, dtype=np.int64, device=self.logits.device)
        shape = broadcast_shapes(value.shape, self.batch_shape)
        logits = self.logits.expand(*shape, self.num_events)
        return logits.gather(-1, value.long().expand(*shape).unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> Tensor:
        # a probability of 0 has logit -inf: clamped to the dtype's lowest so that 0 * logit is 0, as PyTorch's
        logits = clamp(self.logits, min=_limits(self.logits.dtype)[1])
        return -(logits * self.probs).sum(-1)


class Normal(Distribution):
    """N(loc, scale^2): log_prob(x) = -(x - loc)^2 / (2 scale^2) - log(scale) - log(sqrt(2 pi)),
    entropy = 1/2 + log(sqrt(2 pi)) + log(scale); rsample = loc + scale * eps, eps ~ N(0, 1)."""

    def __init__(self, loc: Any, scale: Any) -> None:
        first = loc if isinstance(loc, Tensor) else scale if isinstance(scale, Tensor) else None
        self.loc, self.scale = _as_tensor(loc, first), _as_tensor(scale, first)
        self.batch_shape = tuple(broadcast_shapes(self.loc.shape, self.scale.shape))

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale * self.scale

    def rsample(self, sample_shape: Shape = ()) -> Tensor:
        eps = randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * eps

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.loc)
        return -((value - self.loc) ** 2) / (2 * self.variance) - log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + log(self.scale.expand(*self.batch_shape))


class Bernoulli(Distribution):
    """1 with probability p = probs = sigmoid(logits), else 0: log_prob(x) = x log p + (1 - x) log(1 - p), computed
    from the logits (binary cross-entropy with logits, negated); samples are floats, as PyTorch's."""

    def __init__(self, probs: Any = None, logits: Any = None) -> None:
        _one_of("Bernoulli", probs, logits)
        if probs is not None:
            self.probs = _as_tensor(probs)
            eps = _limits(self.probs.dtype)[0]
            p = clamp(self.probs, eps, 1 - eps)
            self.logits = log(p) - log(1 - p)
        else:
            self.logits = _as_tensor(logits)
            self.probs = sigmoid(self.logits)
        self.batch_shape = self.probs.shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Shape = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            u = rand(*shape, dtype=self.probs.dtype, device=self.probs.device)
            return (u < self.probs.expand(*shape)).to(self.probs.dtype)

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.logits)
        shape = broadcast_shapes(value.shape, self.batch_shape)
        return -binary_cross_entropy_with_logits(self.logits.expand(*shape), value.expand(*shape), reduction="none")

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) for two Normals (closed form) or two Categoricals (sum p (log p - log q)), as PyTorch's."""
    if isinstance(p, Normal) and isinstance(q, Normal):
        q_loc, q_scale = q.loc.to(p.loc.dtype), q.scale.to(p.loc.dtype)  # Normal(0.0, 1.0) is float32, as PyTorch's
        var_ratio = (p.scale / q_scale) ** 2
        t1 = ((p.loc - q_loc) / q_scale) ** 2
        return 0.5 * (var_ratio + t1 - 1 - log(var_ratio))
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        return (p.probs * (p.logits - q.logits)).sum(-1)
    raise NotImplementedError(f"kl_divergence: no formula for {type(p).__name__} and {type(q).__name__}; "
                              "Normal/Normal and Categorical/Categorical are here")

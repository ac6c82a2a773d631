"""More losses as layers (nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.BCELoss, nn.KLDivLoss,
nn.CosineEmbeddingLoss, nn.MarginRankingLoss), as torch.nn's: each holds its options and calls its F function
(minigrad/ops/composed.py). MSELoss, CrossEntropyLoss, NLLLoss and BCEWithLogitsLoss are in nn/layers.py.
"""

from __future__ import annotations

from typing import Any

from minigrad.nn import functional as F
from minigrad.nn.layers import Module
from minigrad.ops.losses import REDUCTIONS, reduction_error
from minigrad.tensor import Tensor


class _Loss(Module):
    """A loss layer: F.<fn>(*inputs, **its options)."""

    fn, reductions = "", REDUCTIONS

    def __init__(self, *, reduction: str = "mean", **options: Any) -> None:
        super().__init__()
        if reduction not in self.reductions:
            raise reduction_error(type(self).__name__, reduction)
        self.reduction, self.option_names = reduction, tuple(options)  # attributes, read at every call
        for key, value in options.items():
            setattr(self, key, value)

    def forward(self, *inputs: Any) -> Tensor:
        options = {key: getattr(self, key) for key in self.option_names}
        return getattr(F, self.fn)(*inputs, reduction=self.reduction, **options)


class L1Loss(_Loss):
    """|input - target|, reduced."""

    fn = "l1_loss"

    def __init__(self, *, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)


class SmoothL1Loss(_Loss):
    fn = "smooth_l1_loss"

    def __init__(self, *, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction=reduction, beta=beta)


class HuberLoss(_Loss):
    fn = "huber_loss"

    def __init__(self, *, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction, delta=delta)


class BCELoss(_Loss):
    """F.binary_cross_entropy of probabilities (after a sigmoid), with an optional constant weight."""

    fn = "binary_cross_entropy"

    def __init__(self, weight: Any = None, *, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction, weight=weight)


class KLDivLoss(_Loss):
    """F.kl_div: input log-probabilities, target probabilities (log_target=False) or log-probabilities."""

    fn, reductions = "kl_div", (*REDUCTIONS, "batchmean")

    def __init__(self, *, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction=reduction, log_target=log_target)


class CosineEmbeddingLoss(_Loss):
    fn = "cosine_embedding_loss"

    def __init__(self, margin: float = 0.0, *, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction, margin=margin)


class MarginRankingLoss(_Loss):
    fn = "margin_ranking_loss"

    def __init__(self, margin: float = 0.0, *, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction, margin=margin)

"""Batch normalisation layers (nn.BatchNorm1d, nn.BatchNorm2d), as torch.nn's: weight and bias (learned, init 1
and 0), running_mean, running_var and num_batches_tracked as buffers (in state_dict, as PyTorch's keys), the batch's
statistics in training and the running ones in evaluation; and nn.GroupNorm, per sample. The formulas are
F.batch_norm's and F.group_norm's (minigrad/ops/composed.py).
"""

from __future__ import annotations

import numpy as np

from minigrad.array.dtypes import DType
from minigrad.nn import functional as F
from minigrad.nn.layers import Module, constant
from minigrad.ops.creation import ones, tensor, zeros
from minigrad.tensor import Tensor


class _BatchNorm(Module):
    """momentum: how far each training batch moves the running statistics (None: their cumulative average, as
    PyTorch's); track_running_stats=False uses the batch's statistics in evaluation too; bias=False: no shift."""

    dims = (2,)  # the input's accepted number of axes

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, *, bias: bool = True, dtype: DType = np.float32,
                 device: str = "cpu") -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = constant((num_features,), 1.0, dtype, device) if affine else None
        self.bias = constant((num_features,), 0.0, dtype, device) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=np.int64, device=device))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self.dims:
            raise ValueError(f"{type(self).__name__}: expected a {' or '.join(f'{d}-d' for d in self.dims)} input, "
                             f"got shape {x.shape}")
        momentum = self.momentum or 0.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # the cumulative average: the k-th batch weighs 1/k
                momentum = 1.0 / int(self.num_batches_tracked.item())
        use_batch = self.training or not self.track_running_stats
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch, momentum,
                            self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """(B, C) or (B, C, L): each of the C features normalised over the batch (and L)."""

    dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """(B, C, H, W): each channel normalised over the batch and the image."""

    dims = (4,)


class GroupNorm(Module):
    """F.group_norm as a layer: the C channels in num_groups groups, each normalised per sample; weight and bias per
    channel (learned, init 1 and 0), as torch.nn.GroupNorm. No running statistics: training and evaluation agree."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, *,
                 bias: bool = True, dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = constant((num_channels,), 1.0, dtype, device) if affine else None
        self.bias = constant((num_channels,), 0.0, dtype, device) if affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")

"""Convolution and pooling layers (nn.Conv1d, nn.Conv2d, nn.ConvTranspose1d/2d, nn.MaxPool*, nn.AvgPool*,
nn.AdaptiveAvgPool*, nn.AdaptiveMaxPool*), as torch.nn's: the same arguments, initialisation and state_dict keys, so
that a PyTorch state_dict loads. Each calls its F function (minigrad/ops/convolution.py: the windows, then a matmul, a
max or a mean).
"""

from __future__ import annotations

import math

import numpy as np

from minigrad.array.dtypes import DType
from minigrad.nn import functional as F
from minigrad.nn.activation import FunctionLayer
from minigrad.nn.init import kaiming_uniform_, uniform_
from minigrad.nn.layers import Module, empty
from minigrad.ops.convolution import Size, padding_pairs
from minigrad.tensor import Tensor


class _ConvNd(Module):
    """weight (out_channels, in_channels / groups, *kernel_size) ((in_channels, out_channels / groups, *kernel_size)
    if transposed), bias (out_channels,), both from PyTorch's init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
    weight.shape[1] * prod(kernel_size)."""

    n, transposed = 0, False
    output_padding: tuple[int, ...] = ()

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size, stride: Size = 1,
                 padding: Size | str = 0, dilation: Size = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", *, dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        name = type(self).__name__
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got "
                             f"{padding_mode!r}")

        def as_n(v: Size) -> tuple[int, ...]:
            return (v,) * self.n if hasattr(v, "__index__") else tuple(v)

        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = as_n(kernel_size), as_n(stride), as_n(dilation)
        self.padding = padding if isinstance(padding, str) else as_n(padding)
        self.padding_mode = padding_mode
        channels = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = empty((*channels, *self.kernel_size), dtype, device)
        self.bias = empty((out_channels,), dtype, device) if bias else None
        kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = channels[1] * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        conv = F.conv1d if self.n == 1 else F.conv2d
        if self.padding_mode == "zeros" or self.padding == "valid":
            return conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        pairs = padding_pairs(type(self).__name__, self.padding, self.kernel_size, self.stride, self.dilation)
        x = F.pad(x, [p for before_after in reversed(pairs) for p in before_after], mode=self.padding_mode)
        return conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        s += "" if self.padding in ("valid", (0,) * self.n) else f", padding={self.padding}"
        s += "" if not any(self.output_padding) else f", output_padding={self.output_padding}"
        s += "" if self.dilation == (1,) * self.n else f", dilation={self.dilation}"
        s += "" if self.groups == 1 else f", groups={self.groups}"
        s += "" if self.bias is not None else ", bias=False"
        return s + ("" if self.padding_mode == "zeros" else f", padding_mode={self.padding_mode}")


class Conv1d(_ConvNd):
    """(B, C_in, L) -> (B, C_out, L_out), as torch.nn.Conv1d."""

    n = 1


class Conv2d(_ConvNd):
    """(B, C_in, H, W) -> (B, C_out, H_out, W_out), as torch.nn.Conv2d."""

    n = 2


class _ConvTransposeNd(_ConvNd):
    """The gradient of a convolution with respect to its input, as a layer: (.., L) -> (.., (L - 1) stride -
    2 padding + dilation (kernel_size - 1) + output_padding + 1), an upsampling (F.conv_transpose1d/2d)."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size, stride: Size = 1, padding: Size = 0,
                 output_padding: Size = 0, groups: int = 1, bias: bool = True, dilation: Size = 1,
                 padding_mode: str = "zeros", *, dtype: DType = np.float32, device: str = "cpu") -> None:
        if padding_mode != "zeros":
            raise ValueError(f'{type(self).__name__}: only "zeros" padding mode is supported, got {padding_mode!r}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         dtype=dtype, device=device)
        self.output_padding = (output_padding,) * self.n if hasattr(output_padding, "__index__") else \
            tuple(output_padding)

    def forward(self, x: Tensor) -> Tensor:
        conv_transpose = F.conv_transpose1d if self.n == 1 else F.conv_transpose2d
        return conv_transpose(x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
                              self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """(B, C_in, L) -> (B, C_out, L_out), as torch.nn.ConvTranspose1d."""

    n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """(B, C_in, H, W) -> (B, C_out, H_out, W_out), as torch.nn.ConvTranspose2d (a DCGAN generator's layer)."""

    n = 2


class _MaxPoolNd(FunctionLayer):
    shown = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")

    def __init__(self, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size=kernel_size, stride=stride or kernel_size, padding=padding, dilation=dilation,
                         ceil_mode=ceil_mode, return_indices=return_indices)


class MaxPool1d(_MaxPoolNd):
    fn = "max_pool1d"


class MaxPool2d(_MaxPoolNd):
    fn = "max_pool2d"


class AvgPool1d(FunctionLayer):
    fn, shown = "avg_pool1d", ("kernel_size", "stride", "padding")

    def __init__(self, kernel_size: Size, stride: Size | None = None, padding: Size = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(kernel_size=kernel_size, stride=stride or kernel_size, padding=padding,
                         ceil_mode=ceil_mode, count_include_pad=count_include_pad)


class AvgPool2d(FunctionLayer):
    fn, shown = "avg_pool2d", ("kernel_size", "stride", "padding")

    def __init__(self, kernel_size: Size, stride: Size | None = None, padding: Size = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__(kernel_size=kernel_size, stride=stride or kernel_size, padding=padding,
                         ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=divisor_override)


class _AdaptivePoolNd(FunctionLayer):
    def __init__(self, output_size: Size) -> None:
        super().__init__(output_size=output_size)


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    fn = "adaptive_avg_pool1d"


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    fn = "adaptive_avg_pool2d"


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    fn = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    fn = "adaptive_max_pool2d"

"""Parameter initialisation, as torch.nn.init (nn.init): each function fills a tensor's array in place, drawing from
the generator that mg.manual_seed seeds, and returns the tensor. Gains and fans follow PyTorch's conventions:
fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, the receptive field the product of size(2:).
"""

from __future__ import annotations

import math

import numpy as np

from minigrad.array import backend
from minigrad.array.dtypes import check_float
from minigrad.tensor import Tensor, increment_version

GAINS = {"linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "conv_transpose1d": 1.0,
         "conv_transpose2d": 1.0, "conv_transpose3d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3,
         "relu": math.sqrt(2.0), "selu": 3.0 / 4}  # leaky_relu's depends on its slope: calculate_gain


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The factor that keeps activations' variance steady through `nonlinearity`, as torch.nn.init.calculate_gain:
    sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope `param`, default 0.01), 5/3 for tanh, ..."""
    if nonlinearity == "leaky_relu":
        if param is None:
            param = 0.01
        elif isinstance(param, bool) or not isinstance(param, (int, float)):
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + param**2))
    if nonlinearity not in GAINS:
        raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; expected one of "
                         f"{sorted([*GAINS, 'leaky_relu'])}")
    return GAINS[nonlinearity]


def fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel): in * prod(kernel) and out * prod(kernel)."""
    if tensor.ndim < 2:
        raise ValueError(f"fan_in_and_fan_out: a tensor of shape {tensor.shape} has no fans; need 2 or more dimensions "
                         "(out_features, in_features, ...)")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _fan(op: str, tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{op}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(op: str, tensor: Tensor, draw: str, low_or_mean: float, high_or_std: float) -> Tensor:
    """Write a draw from U(low, high) or N(mean, std^2), of the tensor's shape, into its array in place."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(tensor).__name__}")
    check_float(op, tensor)
    rng = backend.generator(tensor.device)
    dtype = tensor.dtype if tensor.dtype in (np.float32, np.float64) else np.float64  # what the generators draw
    if draw == "uniform":
        values = rng.random(tensor.shape, dtype=dtype)  # U(0, 1), then stretched to U(low, high)
        values *= high_or_std - low_or_mean
        values += low_or_mean
    else:
        values = rng.standard_normal(tensor.shape, dtype=dtype)
        values *= high_or_std
        values += low_or_mean
    tensor.array[...] = values
    increment_version(tensor)  # as any in-place write: whatever saved the old values for backward refuses them
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with draws from U(a, b)."""
    if not a <= b:
        raise ValueError(f"uniform_: need a <= b, got a={a}, b={b}")
    return _fill("uniform_", tensor, "uniform", a, b)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with draws from N(mean, std^2)."""
    if not std >= 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    return _fill("normal_", tensor, "normal", mean, std)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with `val`."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"constant_: expected a tensor, got {type(tensor).__name__}")
    tensor.array[...] = val
    increment_version(tensor)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot's uniform init: U(-a, a), a = gain sqrt(6 / (fan_in + fan_out)), so that the std is
    gain sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _fill("xavier_uniform_", tensor, "uniform", -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot's normal init: N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return _fill("xavier_normal_", tensor, "normal", 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """He's uniform init: U(-b, b), b = gain sqrt(3 / fan), gain = calculate_gain(nonlinearity, a), fan the fan_in or
    fan_out (`mode`). nn.Linear's default is a = sqrt(5): b = 1 / sqrt(in_features)."""
    fan = _fan("kaiming_uniform_", tensor, mode)
    if fan == 0:  # an empty weight: nothing to fill, as in PyTorch
        return tensor
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return _fill("kaiming_uniform_", tensor, "uniform", -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """He's normal init: N(0, std^2), std = gain / sqrt(fan) (the gain and fan as in kaiming_uniform_)."""
    fan = _fan("kaiming_normal_", tensor, mode)
    if fan == 0:
        return tensor
    return _fill("kaiming_normal_", tensor, "normal", 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


__all__ = ["calculate_gain", "constant_", "fan_in_and_fan_out", "kaiming_normal_", "kaiming_uniform_", "normal_",
           "ones_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_"]

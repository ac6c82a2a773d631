"""The activations as layers (nn.Identity, nn.Softmax, nn.SiLU, nn.ELU, ...), as torch.nn's: each holds its
settings and calls its F function, so that nn.Sequential can hold it. PReLU holds its learned slope.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minigrad.array.dtypes import DType
from minigrad.nn import functional as F
from minigrad.nn.init import constant_
from minigrad.nn.layers import Module, empty
from minigrad.tensor import Tensor


class Identity(Module):
    """y = x (a placeholder: a layer switched off, a head removed); any arguments are accepted and ignored."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class FunctionLayer(Module):
    """A layer that calls F.<fn>(x, **its settings) and prints them: the base of the activation and pooling layers."""

    fn = ""
    shown: tuple[str, ...] | None = None  # the settings its repr shows, as PyTorch's (None: all)

    def __init__(self, **settings: Any) -> None:
        super().__init__()
        self.setting_names = tuple(settings)  # each an attribute, read at every call (layer.alpha = 0.5 counts)
        for key, value in settings.items():
            setattr(self, key, value)

    def settings(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.setting_names}

    def forward(self, x: Tensor) -> Tensor:
        return getattr(F, self.fn)(x, **self.settings())

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings().items() if self.shown is None or k in self.shown)


class SiLU(FunctionLayer):
    fn = "silu"


class Mish(FunctionLayer):
    fn = "mish"


class SELU(FunctionLayer):
    fn = "selu"


class Softsign(FunctionLayer):
    fn = "softsign"


class ReLU6(FunctionLayer):
    fn = "relu6"


class Hardsigmoid(FunctionLayer):
    fn = "hardsigmoid"


class Hardswish(FunctionLayer):
    fn = "hardswish"


class LogSigmoid(FunctionLayer):
    fn = "logsigmoid"


class Tanhshrink(FunctionLayer):
    fn = "tanhshrink"


class LeakyReLU(FunctionLayer):
    fn = "leaky_relu"

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope)


class ELU(FunctionLayer):
    fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha)


class CELU(FunctionLayer):
    fn = "celu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha)


class Softplus(FunctionLayer):
    fn = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Hardtanh(FunctionLayer):
    fn = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(min_val=min_val, max_val=max_val)


class Softmax(FunctionLayer):
    """F.softmax along `dim` as a layer (dim=None, PyTorch's legacy guess, is refused: name the axis)."""

    fn = "softmax"

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)


class Softmin(FunctionLayer):
    fn = "softmin"

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)


class GLU(FunctionLayer):
    fn = "glu"

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim=dim)


class PReLU(Module):
    """x where x >= 0, else a * x, the slope `a` learned: one (num_parameters=1) or one per channel, init 0.25."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, *, dtype: DType = np.float32,
                 device: str = "cpu") -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = constant_(empty((num_parameters,), dtype, device), init)

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


"""minigrad: a small, readable autograd engine (NumPy on the CPU, CuPy on NVIDIA GPUs).

Start reading at tensor.py (Tensor and backward), then elementwise.py, reductions.py, shapes.py,
matmul.py and functional.py (the primitives, each with its backward beside its forward), then
finite_differences.py (gradcheck: how we know they are right).
"""

import numpy as _np

from minigrad import functional, nn, optim
from minigrad.backend import cuda_available, manual_seed
from minigrad.elementwise import abs, clamp, clip, cos, erf, maximum, minimum, rsqrt, sigmoid, sin, where
from minigrad.finite_differences import GradcheckError, gradcheck
from minigrad.reductions import all, any, argmax, argmin, cumsum, logsumexp, max, min, prod, std, var
from minigrad.serialization import load, save
from minigrad.shapes import chunk, flatten, flip, gather, split, squeeze, stack, tril, triu, unflatten, unsqueeze
from minigrad.tensor import (
    Function,
    Tensor,
    arange,
    eye,
    full,
    full_like,
    is_grad_enabled,
    no_grad,
    ones,
    ones_like,
    randn,
    tensor,
    zeros,
    zeros_like,
)

float32 = _np.dtype("float32")
float64 = _np.dtype("float64")
int64 = _np.dtype("int64")
bool_ = _np.dtype("bool")

__all__ = [
    "Function", "GradcheckError", "Tensor", "arange", "bool_", "cuda_available", "float32", "float64",
    "functional", "gradcheck", "int64", "is_grad_enabled", "load", "manual_seed", "nn", "no_grad", "ones",
    "optim", "randn", "save", "tensor", "zeros",
    # tensor math as torch.X (elementwise.py, reductions.py) and more creation (tensor.py)
    "abs", "all", "any", "argmax", "argmin", "clamp", "clip", "cos", "cumsum", "erf", "eye", "full", "full_like",
    "logsumexp", "max", "maximum", "min", "minimum", "ones_like", "prod", "rsqrt", "sigmoid", "sin", "std", "var",
    "where", "zeros_like",
    # shape ops as torch.X (shapes.py)
    "chunk", "flatten", "flip", "gather", "split", "squeeze", "stack", "tril", "triu", "unflatten", "unsqueeze",
]

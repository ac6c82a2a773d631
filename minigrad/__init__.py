"""minigrad: a small, readable autograd engine (NumPy on the CPU, CuPy on NVIDIA GPUs).

Start reading at tensor.py (Tensor and backward), then elementwise.py, reductions.py, shapes.py,
matmul.py and functional.py (the primitives, each with its backward beside its forward), then
gradcheck.py (how we know they are right).
"""

import importlib as _importlib

import numpy as _np

from minigrad import functional, nn, optim
from minigrad.backend import cuda_available, manual_seed
from minigrad.serialization import load, save
from minigrad.tensor import Function, Tensor, arange, is_grad_enabled, no_grad, ones, randn, tensor, zeros

float32 = _np.dtype("float32")
float64 = _np.dtype("float64")
int64 = _np.dtype("int64")
bool_ = _np.dtype("bool")

__all__ = [
    "Function", "GradcheckError", "Tensor", "arange", "bool_", "cuda_available", "float32", "float64",
    "functional", "gradcheck", "int64", "is_grad_enabled", "load", "manual_seed", "nn", "no_grad", "ones",
    "optim", "randn", "save", "tensor", "zeros",
]


def __getattr__(name: str):
    """mg.gradcheck and mg.GradcheckError, imported on first use so that
    `python -m minigrad.gradcheck` does not find its module already imported.

    Importing a submodule makes it the package attribute of its name, so mg.gradcheck is the module
    minigrad.gradcheck, which is callable as its gradcheck function (see the end of gradcheck.py).
    """
    if name in ("gradcheck", "GradcheckError"):
        module = _importlib.import_module("minigrad.gradcheck")  # not `from minigrad import`: that calls us again
        return module if name == "gradcheck" else module.GradcheckError
    raise AttributeError(f"module 'minigrad' has no attribute {name!r}")

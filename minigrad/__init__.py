"""minigrad: a small, readable autograd engine (NumPy on the CPU, CuPy on NVIDIA GPUs).

Start reading at tensor.py (Tensor and backward), then elementwise.py, reductions.py, shapes.py,
matmul.py and functional.py (the primitives, each with its backward beside its forward), then
finite_differences.py (gradcheck: how we know they are right).

Where an op lives (the rule each module follows; its docstring says only what it holds):
- tensor.py: Tensor, Function (one primitive, one graph node), grad mode and backward.
- Tensor math that PyTorch offers as torch.X / Tensor.X, by kind: elementwise.py (add ... pow, exp,
  log, tanh, sigmoid, abs, sin, maximum, where, clamp, ...), reductions.py (sum, mean, max, var, ...),
  shapes.py (reshape, transpose, permute, indexing, cat, stack, split, ...) and matmul.py (matmul, and F.linear,
  which shares its 2-D product). creation.py makes tensors (tensor, zeros, full, eye, arange, randn, ...).
- Neural-network functions that PyTorch places in torch.nn.functional: functional.py (softmax,
  activations, masked_fill, embedding, one_hot, dropout), normalization.py (layer_norm, rms_norm),
  losses.py (cross_entropy) and attention.py (scaled_dot_product_attention, causal_mask); functional.py
  re-exports them all, as F. Their Function classes end in Function (LinearFunction, as in PyTorch's
  autograd docs), so that none shares its name with an nn layer (nn.Linear); tensor math keeps bare
  names (Add, MatMul).
- What the ops share: dtypes.py (dtypes, the default float, promotion's building blocks) and dims.py
  (dim arguments: PyTorch's dim= / keepdim= with NumPy's axis= / keepdims= accepted as aliases).
- nn.py (layers), optim.py (optimizers, clipping, the learning-rate schedule), serialization.py
  (mg.save, mg.load).
- finite_differences.py (mg.gradcheck) and gradcheck_cases.py (the table of every primitive it checks).
- backend.py: only NumPy-vs-CuPy. fast.py: all opt-in speed machinery. distributed.py: data
  parallelism over MPI.
Every op takes its array module from its inputs (backend.get_array_module), so one code path serves
both devices.
"""

from minigrad import functional, nn, optim
from minigrad.backend import cuda_available, manual_seed
from minigrad.creation import arange, eye, full, full_like, ones, ones_like, randn, tensor, zeros, zeros_like
from minigrad.dtypes import bool_, float32, float64, int64
from minigrad.elementwise import (
    abs,
    add,
    clamp,
    clip,
    cos,
    div,
    erf,
    exp,
    log,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    sub,
    tanh,
    where,
)
from minigrad.finite_differences import GradcheckError, gradcheck
from minigrad.functional import log_softmax, softmax
from minigrad.matmul import matmul
from minigrad.reductions import all, any, argmax, argmin, cumsum, logsumexp, max, mean, min, prod, std, sum, var
from minigrad.serialization import load, save
from minigrad.shapes import (
    cat,
    chunk,
    concatenate,
    flatten,
    flip,
    gather,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    tril,
    triu,
    unflatten,
    unsqueeze,
)
from minigrad.tensor import Function, Tensor, is_grad_enabled, no_grad

__all__ = [
    "Function", "GradcheckError", "Tensor", "bool_", "cuda_available", "float32", "float64", "functional",
    "gradcheck", "int64", "is_grad_enabled", "load", "manual_seed", "nn", "no_grad", "optim", "save",
    # creation (creation.py)
    "arange", "eye", "full", "full_like", "ones", "ones_like", "randn", "tensor", "zeros", "zeros_like",
    # tensor math as torch.X (elementwise.py, reductions.py, shapes.py, matmul.py; softmax from functional.py)
    "abs", "add", "clamp", "clip", "cos", "div", "erf", "exp", "log", "maximum", "minimum", "mul", "neg", "pow",
    "rsqrt", "sigmoid", "sin", "sqrt", "sub", "tanh", "where",
    "all", "any", "argmax", "argmin", "cumsum", "logsumexp", "max", "mean", "min", "prod", "std", "sum", "var",
    "cat", "chunk", "concatenate", "flatten", "flip", "gather", "permute", "reshape", "split", "squeeze", "stack",
    "transpose", "tril", "triu", "unflatten", "unsqueeze",
    "matmul", "softmax", "log_softmax",
]

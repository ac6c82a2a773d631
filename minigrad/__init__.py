"""minigrad: a small, readable autograd engine (NumPy on the CPU, CuPy on NVIDIA GPUs), with PyTorch's names.
Start at core.py (Tensor, Function, backward), then the op modules; docs/layout.md maps every module.
"""

import sys as _sys

from minigrad import (
    amp,
    autograd,
    backends,
    cuda,
    distributed,
    functional,
    lr_scheduler,
    nn,
    optim,
    second_order,  # noqa: F401  (deprecated: formula and sum_to, until 0.5)
    utils,
)
from minigrad import core as _core
from minigrad import elementwise as _elementwise
from minigrad import reductions as _reductions
from minigrad import shapes as _shapes
from minigrad.activations import log_softmax, softmax
from minigrad.amp import autocast
from minigrad.backend import Generator, cuda_available, device, manual_seed
from minigrad.backend import Names as _Names
from minigrad.creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from minigrad.dtypes import bfloat16, bool_, float16, float32, float64, int32, int64
from minigrad.dtypes import bool_ as bool  # torch.bool
from minigrad.dtypes import float16 as half
from minigrad.dtypes import float32 as float  # PyTorch's dtype names, as torch.float
from minigrad.dtypes import float64 as double
from minigrad.dtypes import int32 as int
from minigrad.dtypes import int64 as long
from minigrad.elementwise import (
    abs,
    add,
    allclose,
    clamp,
    clip,
    clone,
    cos,
    div,
    equal,
    erf,
    erfc,
    exp,
    isclose,
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
from minigrad.finite_differences import GradcheckError, gradcheck, gradgradcheck
from minigrad.legacy import BoolTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor
from minigrad.matmul import bmm, dot, matmul, outer
from minigrad.optimized import compile
from minigrad.picture import draw
from minigrad.reductions import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    cumsum,
    logsumexp,
    max,
    mean,
    min,
    multinomial,
    prod,
    std,
    sum,
    topk,
    var,
)
from minigrad.serialization import load, save
from minigrad.shapes import (
    broadcast_to,
    cat,
    chunk,
    concatenate,
    flatten,
    flip,
    gather,
    permute,
    reshape,
    roll,
    split,
    squeeze,
    stack,
    swapaxes,
    t,
    transpose,
    tril,
    triu,
    unflatten,
    unsqueeze,
)
from minigrad.speed import compiled, fused, is_compiled_enabled, is_fused_enabled
from minigrad.switches import inference_mode
from minigrad.tensor import Function, Tensor, enable_grad, is_grad_enabled, is_tensor, no_grad, numel, set_grad_enabled

# minigrad itself is the array namespace of backward formulas under create_graph=True (core.namespace), with NumPy's
# names for what it spells another way: astype, permute_dims, added_at (the backward of x[index]) and
# products_of_others (prod's)
_core.use_graph_namespace(_Names(_sys.modules[__name__], astype=_elementwise.cast, permute_dims=_shapes.permute_dims,
                                 added_at=_shapes.added_at, products_of_others=_reductions.products_of_others))

# torch.optim.lr_scheduler: the schedulers, minigrad/lr_scheduler.py (which builds on optim.py), under that name too;
# one module under two names, as minigrad.nn.functional is minigrad.functional
optim.lr_scheduler = lr_scheduler
_sys.modules[optim.__name__ + ".lr_scheduler"] = lr_scheduler  # so that PyTorch's import path works too

__all__ = [
    "Function", "GradcheckError", "Tensor", "autograd", "bool_", "compiled", "cuda_available", "draw", "enable_grad",
    "float32", "float64", "functional", "fused", "gradcheck", "gradgradcheck", "int64", "is_compiled_enabled",
    "is_fused_enabled", "is_grad_enabled", "load", "lr_scheduler", "manual_seed", "nn", "no_grad", "optim", "save",
    "set_grad_enabled",
    # PyTorch's namespace around the engine: dtype names, devices, torch.cuda, torch.backends, inference_mode
    "bfloat16", "double", "float", "float16", "half", "int", "int32", "long", "device", "cuda", "backends",
    "inference_mode", "utils",
    # PyTorch's legacy tensor types (legacy.py), torch.amp, torch.compile (optimized.py), torch.distributed
    "BoolTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor", "LongTensor", "amp", "autocast", "compile",
    "distributed", "bool",
    # random and indexing functions (creation.py, reductions.py, shapes.py; Generator in backend.py)
    "Generator", "linspace", "multinomial", "randint", "randperm", "roll", "topk",
    # creation (creation.py)
    "arange", "as_tensor", "eye", "from_numpy", "full", "full_like", "ones", "ones_like", "randn", "tensor", "zeros",
    "zeros_like",
    # tensor math as torch.X (elementwise.py, reductions.py, shapes.py, matmul.py; softmax from activations.py)
    "abs", "add", "clamp", "clip", "clone", "cos", "div", "erf", "erfc", "exp", "log", "maximum", "minimum", "mul",
    "neg",
    "pow", "rsqrt", "sigmoid", "sin", "sqrt", "sub", "tanh", "where",
    "all", "amax", "amin", "any", "argmax", "argmin", "cumsum", "logsumexp", "max", "mean", "min", "prod", "std", "sum",
    "var",
    "broadcast_to", "cat", "chunk", "concatenate", "flatten", "flip", "gather", "permute", "reshape", "split",
    "squeeze", "stack", "swapaxes", "t",
    "transpose", "tril", "triu", "unflatten", "unsqueeze",
    "matmul", "softmax", "log_softmax",
    # more of torch.X: comparisons (elementwise.py), random and empty tensors (creation.py), products (matmul.py)
    "allclose", "isclose", "equal", "is_tensor", "numel", "rand", "rand_like", "randn_like", "empty", "empty_like",
    "bmm", "dot", "outer",
]

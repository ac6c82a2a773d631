"""minigrad: a small, readable autograd engine (NumPy on the CPU, CuPy on NVIDIA GPUs), with PyTorch's names.
Start at core.py (Tensor, Function, backward), then the op modules; docs/layout.md maps every module.
"""

import math as _math
import sys as _sys

__version__ = "0.4.0"  # pyproject.toml's; tests/test_packaging.py keeps the two equal

from minigrad import (
    accelerator,
    amp,
    autograd,
    backends,
    cuda,
    distributed,
    distributions,
    functional,
    linalg,
    lr_scheduler,
    nn,
    onnx,
    optim,
    second_order,  # noqa: F401  (deprecated: formula and sum_to, until 0.5)
    serialization,
    utils,
)
from minigrad import core as _core
from minigrad import elementwise as _elementwise
from minigrad import reductions as _reductions
from minigrad import shapes as _shapes
from minigrad.activations import dropout, log_softmax, relu, softmax
from minigrad.algebra import cdist, diag, einsum, norm
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
from minigrad.dtypes import (
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from minigrad.dtypes import bool_ as bool  # torch.bool
from minigrad.dtypes import float16 as half
from minigrad.dtypes import float32 as float  # PyTorch's dtype names, as torch.float
from minigrad.dtypes import float64 as double
from minigrad.dtypes import int16 as short
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
from minigrad.global_settings import get_float32_matmul_precision, set_float32_matmul_precision, set_printoptions
from minigrad.indexing import (
    argwhere,
    count_nonzero,
    index_add,
    index_copy,
    index_fill,
    index_select,
    masked_scatter,
    narrow,
    nonzero,
    scatter,
    scatter_add,
    take_along_dim,
)
from minigrad.legacy import BoolTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor
from minigrad.matmul import bmm, dot, matmul, outer
from minigrad.normalization import layer_norm
from minigrad.optimized import compile
from minigrad.picture import draw
from minigrad.pointwise import (
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    expm1,
    log1p,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
)
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
from minigrad.sorting import (
    argsort,
    bincount,
    histc,
    histogram,
    repeat_interleave,
    searchsorted,
    sort,
    unique,
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

# torch.nn.modules and torch.nn.modules.module, where programs import Module from: minigrad.nn under those names too
_sys.modules[nn.__name__ + ".modules"] = _sys.modules[nn.__name__ + ".modules.module"] = nn
nn.modules = nn  # so that minigrad.nn.modules.Module reads as torch.nn.modules.Module

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e  # torch.inf, torch.nan, torch.pi, torch.e

__all__ = [
    "Function", "GradcheckError", "Tensor", "autograd", "bool_", "compiled", "cuda_available", "draw", "enable_grad",
    "float32", "float64", "functional", "fused", "gradcheck", "gradgradcheck", "int64", "is_compiled_enabled",
    "is_fused_enabled", "is_grad_enabled", "load", "lr_scheduler", "manual_seed", "nn", "no_grad", "optim", "save",
    "set_grad_enabled",
    # PyTorch's namespace around the engine: dtype names, devices, torch.cuda, torch.backends, inference_mode
    "bfloat16", "double", "float", "float16", "half", "int", "int32", "long", "device", "cuda", "backends",
    "inference_mode", "utils", "distributions",
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
    # the PyTorch namespace by area (issue 50): other logarithms and bitwise operators (pointwise.py), dtypes and
    # the default dtype (dtypes.py), settings (global_settings.py), constants, top-level activations, torch.onnx,
    # torch.accelerator, torch.serialization
    "log10", "log2", "log1p", "expm1", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and",
    "logical_or", "logical_xor", "logical_not", "uint8", "int8", "int16", "short", "get_default_dtype",
    "set_default_dtype", "set_printoptions", "get_float32_matmul_precision", "set_float32_matmul_precision", "inf",
    "nan", "pi", "e", "relu", "dropout", "layer_norm", "onnx", "accelerator", "serialization",
    # indexing by index tensors (indexing.py)
    "scatter", "scatter_add", "index_add", "index_copy", "index_fill", "index_select", "masked_scatter",
    "take_along_dim", "narrow", "nonzero", "argwhere", "count_nonzero",
    # ordering and counting (sorting.py), torch.linalg (linalg.py), einsum, diag, norm, cdist (algebra.py)
    "sort", "argsort", "unique", "searchsorted", "repeat_interleave", "bincount", "histc", "histogram", "linalg",
    "einsum", "diag", "norm", "cdist",
]

"""minigrad: a small, readable autograd engine (NumPy on the CPU, CuPy on NVIDIA GPUs), with PyTorch's names.
Start at core.py (Tensor, Function, backward), then the op modules (ops/); docs/layout.md maps every package:
array/ < core.py < autograd/ < ops/ < tensor.py < pytorch/ < nn/, optim/, speed/ < check/ < this file, which
gathers the mg.X names and keeps the import paths of 0.4 working (the table MOVED at the end).
"""

import importlib as _importlib
import importlib.abc as _abc
import importlib.machinery as _machinery
import importlib.util as _util
import math as _math
import sys as _sys
import warnings as _warnings

__version__ = "0.4.0"  # pyproject.toml's; tests/test_packaging.py keeps the two equal

from minigrad import autograd, nn, optim
from minigrad import core as _core
from minigrad.array.backend import Generator, cuda_available, device, manual_seed
from minigrad.array.backend import Names as _Names
from minigrad.array.dtypes import (
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
from minigrad.array.dtypes import bool_ as bool  # torch.bool
from minigrad.array.dtypes import float16 as half
from minigrad.array.dtypes import float32 as float  # PyTorch's dtype names, as torch.float
from minigrad.array.dtypes import float64 as double
from minigrad.array.dtypes import int16 as short
from minigrad.array.dtypes import int32 as int
from minigrad.array.dtypes import int64 as long
from minigrad.array.global_settings import get_float32_matmul_precision, set_float32_matmul_precision, set_printoptions
from minigrad.autograd import second_order  # noqa: F401  (deprecated: formula and sum_to, until 0.5)
from minigrad.autograd.picture import draw
from minigrad.autograd.switches import inference_mode
from minigrad.check.finite_differences import GradcheckError, gradcheck, gradgradcheck
from minigrad.legacy import BoolTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor
from minigrad.nn import functional, init  # noqa: F401  (init: mg.init, as mg.nn.init)
from minigrad.ops import elementwise as _elementwise
from minigrad.ops import linalg
from minigrad.ops import reductions as _reductions
from minigrad.ops import shapes as _shapes
from minigrad.ops.activations import dropout, log_softmax, relu, softmax
from minigrad.ops.algebra import cdist, diag, einsum, norm
from minigrad.ops.creation import (
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
from minigrad.ops.elementwise import (
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
from minigrad.ops.indexing import (
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
from minigrad.ops.matmul import bmm, dot, matmul, outer
from minigrad.ops.normalization import layer_norm
from minigrad.ops.pointwise import (
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
from minigrad.ops.reductions import (
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
from minigrad.ops.shapes import (
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
from minigrad.ops.sorting import (
    argsort,
    bincount,
    histc,
    histogram,
    repeat_interleave,
    searchsorted,
    sort,
    unique,
)
from minigrad.optim import lr_scheduler
from minigrad.pytorch import (
    accelerator,
    amp,
    backends,
    cuda,
    distributed,
    distributions,
    onnx,
    serialization,
    utils,
)
from minigrad.pytorch.amp import autocast
from minigrad.pytorch.serialization import load, save
from minigrad.speed import compiled, fused, is_compiled_enabled, is_fused_enabled
from minigrad.speed.optimized import compile
from minigrad.tensor import Function, Tensor, enable_grad, is_grad_enabled, is_tensor, no_grad, numel, set_grad_enabled

# minigrad itself is the array namespace of backward formulas under create_graph=True (core.namespace), with NumPy's
# names for what it spells another way: astype, permute_dims, added_at (the backward of x[index]) and
# products_of_others (prod's)
_core.use_graph_namespace(_Names(_sys.modules[__name__], astype=_elementwise.cast, permute_dims=_shapes.permute_dims,
                                 added_at=_shapes.added_at, products_of_others=_reductions.products_of_others))

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

# ---- the import paths of 0.4 ----
# SECOND_NAMES name a package's module for good, one module under two names as minigrad.nn.modules is minigrad.nn:
# PyTorch's paths (torch.amp, torch.cuda, torch.utils.data, torch.linalg, ...) and the modules that are mg.X names
# (mg.functional, mg.init, mg.lr_scheduler). The other flat paths of 0.4 (minigrad.elementwise, minigrad.backend,
# ...) give the moved module with a DeprecationWarning naming its new path, until 0.5. A path names its submodules
# too (minigrad.utils.data.dataloader is minigrad.pytorch.utils.data.dataloader).
SECOND_NAMES = {f"minigrad.{name.rpartition('.')[2]}": f"minigrad.{name}" for name in (
    "pytorch.accelerator", "pytorch.amp", "pytorch.backends", "pytorch.cuda", "pytorch.distributed",
    "pytorch.distributions", "pytorch.onnx", "pytorch.serialization", "pytorch.utils", "ops.linalg", "nn.functional",
    "nn.init", "optim.lr_scheduler")}
MOVED = {f"minigrad.{name.rpartition('.')[2]}": f"minigrad.{name}" for name in (
    "array.backend", "array.dtypes", "array.arrays", "array.global_settings", "array.runtime",
    "autograd.versions", "autograd.hooks", "autograd.custom_function", "autograd.switches", "autograd.second_order",
    "autograd.picture", "ops.elementwise", "ops.pointwise", "ops.reductions", "ops.shapes", "ops.indexing",
    "ops.sorting", "ops.matmul", "ops.algebra", "ops.creation", "ops.activations", "ops.normalization", "ops.losses",
    "ops.convolution", "ops.composed", "ops.sdpa", "ops.promotion", "speed.twins", "speed.kernels",
    "speed.compiled_functions", "speed.optimized", "check.finite_differences", "check.gradcheck_cases")}


def _old_path(name: str) -> str | None:
    """The path of SECOND_NAMES or MOVED that the module `name` is, or is under (None: neither)."""
    if not name.startswith("minigrad."):  # the finder is asked about every import of the process
        return None
    for old in (*SECOND_NAMES, *MOVED):
        if name == old or name.startswith(old + "."):
            return old
    return None


def _new_path(name: str) -> str:
    """Where the module `name`, of an old path, lives now, with a DeprecationWarning if it moved in 0.5."""
    old = _old_path(name)
    if old in MOVED:
        _warnings.warn(f"{old} moved to {MOVED[old]}; the old path goes in 0.5", DeprecationWarning,
                       stacklevel=_caller_level())
    return {**SECOND_NAMES, **MOVED}[old] + name[len(old):]


def _caller_level() -> int:
    """warnings.warn's stacklevel that names the line with the import: past this file's frames (warnings itself
    skips importlib's)."""
    frame, level = _sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(("<frozen", __file__)):
        level += frame.f_code.co_filename == __file__
        frame = frame.f_back
    return level


class _OldPaths(_abc.MetaPathFinder, _abc.Loader):
    """`import minigrad.X` for a path of SECOND_NAMES or MOVED: the module at its new path itself (not a copy)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> _machinery.ModuleSpec | None:
        return None if _old_path(name) is None else _machinery.ModuleSpec(name, self)

    def create_module(self, spec: _machinery.ModuleSpec) -> object:
        module = _importlib.import_module(_new_path(spec.name))
        spec.loader_state = module.__spec__  # importlib sets the alias's spec on the module next: kept to put back
        return module

    def exec_module(self, module: object) -> None:
        module.__spec__ = module.__spec__.loader_state  # the module's own spec again (its real name and file)

    def get_code(self, name: str) -> object:
        """For `python -m minigrad.gradcheck_cases`: the moved module's code, run as __main__."""
        new = _new_path(name)
        return _util.find_spec(new).loader.get_code(new)


def __getattr__(name: str) -> object:
    """mg.X and `from minigrad import X` for a module of MOVED (mg.backend, ...): the moved module, with the warning."""
    if f"minigrad.{name}" not in MOVED:
        raise AttributeError(f"module 'minigrad' has no attribute {name!r}")
    module = globals()[name] = _importlib.import_module(_new_path(f"minigrad.{name}"))  # warned once, as an import
    return module


_sys.meta_path.insert(0, _OldPaths())  # first: before Python's finder would load a second copy from a package's path

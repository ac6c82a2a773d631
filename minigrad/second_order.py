"""Backward is a graph too: every primitive's backward written again in tensor operations, so that a gradient
computed with create_graph=True is itself a tensor of a graph, and can be differentiated (Hessian-vector products,
gradient penalties, Newton's method). Each formula mirrors its Function's backward (whose docstring has the math) and
is registered for that class in autograd.FORMULAS; the sweep (core.Sweep, at autograd.differentiable_backward) runs
it instead of the array backward only when create_graph=True, so the first-order backward stays as it is.
docs/backward.md, "Backward is a graph too", walks through it; docs/higher-order.md shows what it is for.

The arrays a node saved come back into the graph through saved_input (an input: the leaf itself, or a tensor whose
grad_fn is the node that computed it) and saved_output (the node's own output). Where a fused Function saved derived
arrays only (layer norm's xhat and rstd, attention's weights, cross-entropy's probabilities), those become tensors of
nodes of their own (made_node), whose backward is the part of the fused one that made them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

from minigrad import backend, core
from minigrad.activations import (
    DropoutFunction,
    GeluErfFunction,
    GeluFunction,
    LeakyReluFunction,
    LogSoftmaxFunction,
    ReluFunction,
    SiluFunction,
    SoftmaxFunction,
)
from minigrad.arrays import unbroadcast
from minigrad.autograd import FORMULAS
from minigrad.custom_function import Custom
from minigrad.elementwise import (
    Abs,
    Add,
    Cast,
    Clamp,
    Clone,
    Cos,
    Div,
    Erf,
    Exp,
    Log,
    MaskedFillFunction,
    Maximum,
    Mul,
    Neg,
    Pow,
    Rsqrt,
    Sigmoid,
    Sin,
    Sqrt,
    Sub,
    Tanh,
    Where,
)
from minigrad.indexing import AddAt
from minigrad.losses import (
    BCEWithLogitsFunction,
    CrossEntropyFunction,
    MSELossFunction,
    NLLLossFunction,
    SoftCrossEntropyFunction,
)
from minigrad.matmul import LinearFunction, MatMul
from minigrad.normalization import LayerNormFunction, RMSNormFunction
from minigrad.pointwise import Expm1, OtherLog
from minigrad.reductions import Cumsum, LogSumExp, Max, Prod, Std, Sum, Var
from minigrad.sdpa import ScaledDotProductAttentionFunction
from minigrad.shapes import (
    Cat,
    EmbeddingFunction,
    Expand,
    Flip,
    Gather,
    GetItem,
    Permute,
    Repeat,
    Reshape,
    SetItem,
    Split,
    Stack,
    Triangle,
)
from minigrad.tensor import Function, Tensor
from minigrad.versions import CopySlices

Grads = tuple[Tensor | None, ...]


def formula(*classes: type[core.Function]) -> Callable[[Callable[..., Grads]], Callable[..., Grads]]:
    """Register a differentiable backward, formula(node, dout) -> one tensor (or None) per input, for `classes`."""
    def register(f: Callable[..., Grads]) -> Callable[..., Grads]:
        FORMULAS.update(dict.fromkeys(classes, f))
        return f
    return register


# ---- the saved arrays, back in the graph ----

def saved_input(node: core.Function, i: int, array: Any) -> Tensor:
    """The array `node` kept of its input i as a tensor of the graph: the leaf itself, or a tensor computed by the
    input's node (with the input's version counter, so that a write into it before the next backward is refused);
    a constant where the input needed no gradient."""
    parent = node.mg_parents[i]
    if isinstance(parent, core.Tensor):
        return parent
    t = Tensor.wrap(array, parent is not None)
    if parent is not None:
        t._grad_fn = parent
        if node.mg_versions:
            t._counter = node.mg_versions[i][0]
    return t


def saved_output(node: core.Function, array: Any) -> Tensor:
    """The array `node` kept of its own output (in the output's shape) as a tensor computed by node."""
    t = Tensor.wrap(array.reshape(node.mg_shape), True)
    t._grad_fn = node
    if node.mg_versions:
        t._counter = node.mg_versions[len(node.mg_parents)][0]
    return t


def made_node(cls: type[core.Function], parents: Sequence[Any], output: Any, versions: Sequence[Any] = (),
              **saved: Any) -> Tensor:
    """`output`, an array a node computed on the way (layer norm's xhat), as the output of a node of `cls` made here
    (not by apply: nothing is computed again) with these parents (edges) and saved attributes."""
    node = cls()
    node.mg_parents, node.needs_input_grad = tuple(parents), tuple(p is not None for p in parents)
    node.mg_shape, node.mg_dtype = output.shape, output.dtype
    node.mg_versions = [*versions, ([0], 0, id(output))] if versions else ()  # the output's: new, nothing writes it
    vars(node).update(saved)
    t = Tensor.wrap(output, any(node.needs_input_grad))
    if t.requires_grad:
        t._grad_fn = node
    return t


def const(array: Any) -> Tensor:
    return Tensor.wrap(array)


def zero(like: Tensor) -> Tensor:
    """A 0-d zero of like's dtype and device, a constant."""
    return const(backend.get_array_module(like.array).zeros((), dtype=like.dtype))


def sum_to(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """unbroadcast in tensor ops: t summed over the axes it was broadcast along to reach `shape`."""
    if t.shape == shape:
        return t
    lead = t.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and t.shape[lead + i] != 1)
    return Reshape.apply(Sum.apply(t, axis=axes, keepdims=True), shape=shape)


def swap_last(t: Tensor) -> Tensor:
    """t with its last two axes swapped (a batch of transposed matrices)."""
    return Permute.apply(t, axes=(*range(t.ndim - 2), t.ndim - 1, t.ndim - 2))


def kept_shape(shape: tuple[int, ...], axis: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axis else n for i, n in enumerate(shape))


def mean_along(t: Tensor, axes: tuple[int, ...]) -> Tensor:
    return Sum.apply(t, axis=axes, keepdims=True) * (1 / max(math.prod(t.shape[a] for a in axes), 1))


# ---- elementwise ----

@formula(Add)
def add_graph(node, dout):
    return sum_to(dout, node.a_shape), sum_to(dout, node.b_shape)


@formula(Sub)
def sub_graph(node, dout):
    return sum_to(dout, node.a_shape), sum_to(-dout, node.b_shape) if node.needs_input_grad[1] else None


@formula(Mul)
def mul_graph(node, dout):
    need_a, need_b = node.needs_input_grad
    return (sum_to(dout * saved_input(node, 1, node.b), node.a_shape) if need_a else None,
            sum_to(dout * saved_input(node, 0, node.a), node.b_shape) if need_b else None)


@formula(Div)
def div_graph(node, dout):
    da = dout / saved_input(node, 1, node.b)
    db = sum_to(-da * saved_output(node, node.z), node.b.shape) if node.needs_input_grad[1] else None
    return sum_to(da, node.a_shape), db


@formula(Pow)
def pow_graph(node, dout):
    xp = backend.get_array_module(node.a)
    a, b = saved_input(node, 0, node.a), saved_input(node, 1, node.b)
    one = const(xp.ones((), dtype=a.dtype))
    need_a, need_b = node.needs_input_grad
    da = db = None
    if need_a:  # a**(b - 1) with 1 where b = 0, as the array backward
        da = sum_to(dout * b * Where.apply(one, a, cond=node.b == 0) ** (b - 1), node.a.shape)
    if need_b:  # log(a) with log(1) where a = 0 and b >= 0
        safe = Where.apply(one, a, cond=(node.a == 0) & (node.b >= 0))
        db = sum_to(dout * saved_output(node, node.z) * safe.log(), node.b.shape)
    return da, db


@formula(Neg)
def neg_graph(node, dout):
    return (-dout,)


@formula(OtherLog)
def other_log_graph(node, dout):
    return (dout / ((saved_input(node, 0, node.x) + node.shift) * node.log_base),)


@formula(Expm1)
def expm1_graph(node, dout):
    return (dout * (saved_output(node, node.y) + 1),)


@formula(Exp)
def exp_graph(node, dout):
    return (dout * saved_output(node, node.y),)


@formula(Log)
def log_graph(node, dout):
    return (dout / saved_input(node, 0, node.x),)


@formula(Sqrt)
def sqrt_graph(node, dout):
    return (dout / (2 * saved_output(node, node.y)),)


@formula(Tanh)
def tanh_graph(node, dout):
    y = saved_output(node, node.y)
    return (dout * (1 - y * y),)


@formula(Sigmoid)
def sigmoid_graph(node, dout):
    y = saved_output(node, node.y)
    return (dout * y * (1 - y),)


@formula(Rsqrt)
def rsqrt_graph(node, dout):
    y = saved_output(node, node.y)
    return (dout * y * y * y * -0.5,)


@formula(Sin)
def sin_graph(node, dout):
    return (dout * saved_input(node, 0, node.x).cos(),)


@formula(Cos)
def cos_graph(node, dout):
    return (-dout * saved_input(node, 0, node.x).sin(),)


@formula(Erf)
def erf_graph(node, dout):
    x = saved_input(node, 0, node.x)
    return (dout * (2 / math.sqrt(math.pi)) * (-(x * x)).exp(),)


@formula(Abs)
def abs_graph(node, dout):  # sign(x) is constant where it has a derivative
    return (dout * const(backend.get_array_module(node.x).sign(node.x)),)


@formula(Clone)
def clone_graph(node, dout):
    return (dout,)


@formula(Cast)
def cast_graph(node, dout):
    return (Cast.apply(dout, dtype=node.x_dtype),)


@formula(Maximum)  # and Minimum: the same selection, by constant masks
def maximum_graph(node, dout):
    a, b = node.a, node.b
    shared = Where.apply(dout * 0.5, dout, cond=a == b)
    a_loses, b_loses = (a < b, a > b) if node.pick == "maximum" else (a > b, a < b)
    return (sum_to(Where.apply(zero(dout), shared, cond=a_loses), a.shape),
            sum_to(Where.apply(zero(dout), shared, cond=b_loses), b.shape))


@formula(Where)
def where_graph(node, dout):
    need_a, need_b = node.needs_input_grad
    return (sum_to(Where.apply(dout, zero(dout), cond=node.cond), node.a_shape) if need_a else None,
            sum_to(Where.apply(zero(dout), dout, cond=node.cond), node.b_shape) if need_b else None)


@formula(Clamp)
def clamp_graph(node, dout):
    return (Where.apply(dout, zero(dout), cond=node.inside),)


@formula(MaskedFillFunction)
def masked_fill_graph(node, dout):
    return (MaskedFillFunction.apply(dout, mask=node.mask, value=zero(dout).array),)


# ---- reductions ----

@formula(Sum)
def sum_graph(node, dout):
    return (Expand.apply(Reshape.apply(dout, shape=kept_shape(node.x_shape, node.axis)), shape=node.x_shape),)


@formula(Max)  # and Min
def max_graph(node, dout):
    picked = node.picked
    ties = picked.sum(axis=node.axis, keepdims=True, dtype=dout.dtype)
    share = Reshape.apply(dout, shape=kept_shape(picked.shape, node.axis)) / const(ties)
    return (Where.apply(share, zero(dout), cond=picked),)


@formula(Var)
def var_graph(node, dout):
    # node.centered is x - mean: as a tensor of x's node it stands for x up to a shift, which var does not see
    x = saved_input(node, 0, node.centered)
    centered = x - mean_along(x, node.axis)
    return (Reshape.apply(dout, shape=kept_shape(node.centered.shape, node.axis)) * centered * (2 * node.scale),)


@formula(Std)
def std_graph(node, dout):
    y_array = node.y  # with the reduced axes kept
    at_zero = y_array == 0
    y = Reshape.apply(saved_output(node, y_array), shape=y_array.shape)
    two_y = Where.apply(const(backend.get_array_module(y_array).ones((), dtype=y.dtype)), 2 * y, cond=at_zero)
    dvar = Where.apply(zero(dout), Reshape.apply(dout, shape=y_array.shape) / two_y, cond=at_zero)
    return var_graph(node, dvar)


@formula(Prod)
def prod_graph(node, dout):
    # dx_i = dout * (the product of the other x_j): a row of n copies of x per element, its own place set to 1
    xp, x_array, axis = backend.get_array_module(node.x), node.x, node.axis
    x = saved_input(node, 0, x_array)
    kept = tuple(a for a in range(x.ndim) if a not in axis)
    order = kept + axis
    lead, n = tuple(x_array.shape[a] for a in kept), math.prod(x_array.shape[a] for a in axis)
    rows = Reshape.apply(Permute.apply(x, axes=order), shape=(*lead, 1, n))  # (..., 1, n)
    grid = Expand.apply(rows, shape=(*lead, n, n))  # (..., n, n): row i is all of x
    one = xp.ones((), dtype=x.dtype)
    others = Prod.apply(MaskedFillFunction.apply(grid, mask=xp.eye(n, dtype=bool), value=one), axis=(len(lead) + 1,),
                        keepdims=False)  # (..., n)
    others = Reshape.apply(others, shape=tuple(x_array.shape[a] for a in order))
    others = Permute.apply(others, axes=tuple(order.index(a) for a in range(x.ndim)))
    return (Reshape.apply(dout, shape=kept_shape(x_array.shape, axis)) * others,)


@formula(LogSumExp)
def logsumexp_graph(node, dout):
    y = Reshape.apply(saved_output(node, node.y), shape=node.y.shape)
    return (Reshape.apply(dout, shape=node.y.shape) * (saved_input(node, 0, node.x) - y).exp(),)


@formula(Cumsum)
def cumsum_graph(node, dout):
    axis = node.axis
    return (Flip.apply(Cumsum.apply(Flip.apply(dout, dims=(axis,)), axis=axis), dims=(axis,)),)


# ---- shapes and indexing ----

@formula(Reshape)
def reshape_graph(node, dout):
    return (Reshape.apply(dout, shape=node.x_shape),)


@formula(Permute)
def permute_graph(node, dout):
    return (Permute.apply(dout, axes=tuple(node.axes.index(i) for i in range(len(node.axes)))),)


@formula(Expand)
def expand_graph(node, dout):
    return (sum_to(dout, node.x_shape),)


@formula(Repeat)
def repeat_graph(node, dout):
    padded = (1,) * (len(node.repeats) - len(node.x_shape)) + node.x_shape
    copies_and_sizes = tuple(m for r, n in zip(node.repeats, padded, strict=True) for m in (r, n))
    summed = Sum.apply(Reshape.apply(dout, shape=copies_and_sizes), axis=tuple(range(0, len(copies_and_sizes), 2)),
                       keepdims=False)
    return (Reshape.apply(summed, shape=node.x_shape),)


@formula(Flip)
def flip_graph(node, dout):
    return (Flip.apply(dout, dims=node.dims),)


@formula(Triangle)
def triangle_graph(node, dout):
    return (Triangle.apply(dout, diagonal=node.diagonal, upper=node.triangle.__name__ == "triu"),)


class IndexAdd(Function):
    """y = zeros of `shape` with x added at `where` (repeated places accumulate): the backward of x[where] (getitem,
    gather, embedding) as a node of its own;  dx = dout[where]"""

    def forward(self, x, where, shape):
        self.where = where
        y = backend.get_array_module(x).zeros(shape, dtype=x.dtype)
        backend.scatter_add(y, where, x)
        return y

    def backward(self, dout):
        return (dout[self.where],)


@formula(IndexAdd)
def index_add_graph(node, dout):
    return (GetItem.apply(dout, index=node.where),)


@formula(AddAt)
def add_at_graph(node, dout):
    return dout, GetItem.apply(dout, index=node.index)


@formula(GetItem)
def getitem_graph(node, dout):
    return (IndexAdd.apply(dout, where=node.index, shape=node.x_shape),)


@formula(Gather)
def gather_graph(node, dout):
    return (IndexAdd.apply(dout, where=node.where, shape=node.x_shape),)


@formula(EmbeddingFunction)
def embedding_graph(node, dout):
    rows = Reshape.apply(dout, shape=(node.indices.size, node.w_shape[1]))
    dw = IndexAdd.apply(rows, where=(node.indices.reshape(-1),), shape=node.w_shape)
    if node.padding_idx is not None:  # the padding row gets none
        padding = backend.get_array_module(dw.array).arange(node.w_shape[0])[:, None] == node.padding_idx
        dw = MaskedFillFunction.apply(dw, mask=padding, value=zero(dw).array)
    return (dw,)


@formula(SetItem)
def setitem_graph(node, dout):
    need_x, need_v = node.needs_input_grad
    return (SetItem.apply(dout, zero(dout), index=node.index) if need_x else None,
            sum_to(GetItem.apply(dout, index=node.index), node.v_shape) if need_v else None)


@formula(CopySlices)
def copy_slices_graph(node, dout):
    where = node.positions(backend.get_array_module(dout.array))
    flat = Reshape.apply(dout, shape=(-1,))
    dbase = Reshape.apply(SetItem.apply(flat, zero(dout), index=(where.reshape(-1),)), shape=node.base_shape)
    return dbase, GetItem.apply(flat, index=(where,))


def pieces(sizes: Sequence[int], axis: int) -> list[tuple[slice, ...]]:
    ends = itertools.accumulate(sizes)
    return [(slice(None),) * axis + (slice(end - size, end),) for end, size in zip(ends, sizes, strict=True)]


@formula(Cat)
def cat_graph(node, dout):
    return tuple(GetItem.apply(dout, index=piece) for piece in pieces(node.sizes, node.axis))


@formula(Stack)
def stack_graph(node, dout):
    return tuple(GetItem.apply(dout, index=(slice(None),) * node.dim + (i,)) for i in range(dout.shape[node.dim]))


@formula(Split)
def split_graph(node, douts):
    xp = backend.get_array_module(next(d for d in douts if d is not None).array)
    axis = len(node.pieces[0]) - 1
    parts = []
    for piece, d in zip(node.pieces, douts, strict=True):
        shape = list(node.x_shape)
        shape[axis] = piece[axis].stop - piece[axis].start
        parts.append(d if d is not None else const(xp.zeros(shape, dtype=node.x_dtype)))  # a piece not used: zeros
    return (Cat.apply(*parts, axis=axis),)


# ---- products ----

@formula(MatMul)
def matmul_graph(node, dout):
    need_a, need_b = node.needs_input_grad
    return (sum_to(MatMul.apply(dout, swap_last(saved_input(node, 1, node.b))), node.a_shape) if need_a else None,
            sum_to(MatMul.apply(swap_last(saved_input(node, 0, node.a)), dout), node.b_shape) if need_b else None)


@formula(LinearFunction)
def linear_graph(node, dout):
    need_x, need_w, *need_b = node.needs_input_grad
    d2 = Reshape.apply(dout, shape=(-1, dout.shape[-1]))  # (N, out)
    dx = MatMul.apply(dout, saved_input(node, 1, node.w)) if need_x else None
    dw = None
    if need_w:
        x = saved_input(node, 0, node.x)
        dw = MatMul.apply(swap_last(d2), Reshape.apply(x, shape=(-1, x.shape[-1])))
    db = (Sum.apply(d2, axis=(0,), keepdims=False),) if need_b else ()
    return (dx, dw, *db)


# ---- activations ----

@formula(SoftmaxFunction)
def softmax_graph(node, dout):
    y = saved_output(node, node.y)
    return (y * (dout - Sum.apply(dout * y, axis=(y.ndim - 1,), keepdims=True)),)


@formula(LogSoftmaxFunction)
def log_softmax_graph(node, dout):
    y = saved_output(node, node.y)
    return (dout - y.exp() * Sum.apply(dout, axis=(y.ndim - 1,), keepdims=True),)


_GELU_C, _GELU_K = math.sqrt(2 / math.pi), 0.044715


@formula(GeluFunction)
def gelu_tanh_graph(node, dout):
    x = saved_input(node, 0, node.x)
    h = ((x + x * x * x * _GELU_K) * _GELU_C).tanh() * 0.5 + 0.5
    slope = h + x * h * (1 - h) * (x * x * (6 * _GELU_K * _GELU_C) + 2 * _GELU_C)
    return (dout * slope,)


@formula(GeluErfFunction)
def gelu_erf_graph(node, dout):
    x = saved_input(node, 0, node.x)
    cdf = (x * math.sqrt(0.5)).erf() * 0.5 + 0.5
    pdf = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
    return (dout * (cdf + x * pdf),)


@formula(ReluFunction)
def relu_graph(node, dout):
    return (Where.apply(dout, zero(dout), cond=node.positive),)


@formula(LeakyReluFunction)
def leaky_relu_graph(node, dout):
    return (dout * const(node.slope),)


@formula(DropoutFunction)
def dropout_graph(node, dout):
    return (dout * const(node.scale),)


@formula(SiluFunction)
def silu_graph(node, dout):
    x = saved_input(node, 0, node.x)
    s = x.sigmoid()
    return (dout * s * (1 + x * (1 - s)),)


# ---- normalisation: xhat and rstd as nodes of their own ----

class InverseStd(Function):
    """rstd = 1 / sqrt(mean(c^2) + eps) over the normalised axes, c = x - mean (layer norm) or x (RMS norm): the
    rstd a normalisation saved, as a node of its own (made by made_node, never by apply);
    drstd/dx = -rstd^2 xhat / D, D the number of elements normalised together. `xhat` is a tensor (of xhat's own
    node), in the shape that rstd broadcasts against."""

    def backward(self, dout):
        d = self.xhat.array.size // self.rstd.size
        return ((dout * self.rstd * self.rstd * self.xhat.array * (-1 / d)).reshape(self.x_shape),)


@formula(InverseStd)
def inverse_std_graph(node, dout):
    rstd = saved_output(node, node.rstd)
    d = node.xhat.array.size // node.rstd.size
    return (Reshape.apply(dout * rstd * rstd * node.xhat * (-1 / d), shape=node.x_shape),)


@formula(LayerNormFunction)
def layer_norm_graph(node, dout):
    n, c = node.xhat.shape  # (N, C): the rows
    x_edge = node.mg_parents[0]
    xhat_t = made_node(LayerNormFunction, (x_edge,), node.xhat.reshape(node.mg_shape), xhat=node.xhat, rstd=node.rstd,
                       w=None)  # xhat = layer norm without its affine part
    xhat = Reshape.apply(xhat_t, shape=(n, c))
    rstd = made_node(InverseStd, (x_edge,), node.rstd, xhat=xhat, rstd=node.rstd, x_shape=node.mg_shape)
    d2 = Reshape.apply(dout, shape=(n, c))
    dxhat = d2 if node.w is None else d2 * saved_input(node, 1, node.w)
    dx = rstd * (dxhat - mean_along(dxhat, (1,)) - xhat * mean_along(dxhat * xhat, (1,)))
    dx = Reshape.apply(dx, shape=node.mg_shape)
    if node.w is None:
        return (dx,)
    return (dx, Sum.apply(d2 * xhat, axis=(0,), keepdims=False),
            Sum.apply(d2, axis=(0,), keepdims=False))[: len(node.needs_input_grad)]


@formula(RMSNormFunction)
def rms_norm_graph(node, dout):
    x_edge, axes = node.mg_parents[0], node.axes
    xhat = made_node(RMSNormFunction, (x_edge,), node.xhat, xhat=node.xhat, rstd=node.rstd, axes=axes, w=None)
    rstd = made_node(InverseStd, (x_edge,), node.rstd, xhat=xhat, rstd=node.rstd, x_shape=node.xhat.shape)
    dxhat = dout if node.w is None else dout * saved_input(node, 1, node.w)
    dx = (dxhat - xhat * mean_along(dxhat * xhat, axes)) * rstd
    if node.w is None:
        return (dx,)
    leading = tuple(range(dout.ndim - len(axes)))
    return dx, Sum.apply(dout * xhat, axis=leading, keepdims=False) if node.needs_input_grad[1] else None


# ---- attention: its weights P as a node of their own ----

class AttentionWeights(Function):
    """P = softmax(Q K^T * scale + mask) along the keys: the weights attention saved, as a node of their own (made
    by made_node, never by apply), inputs (q, k) or (q, k, float mask);
    dS = P * (dP - rowsum(dP * P)),  dQ = dS K * scale,  dK = dS^T Q * scale,  dmask = dS"""

    def backward(self, dout):
        ds = ScaledDotProductAttentionFunction.softmax_backward(dout.copy(), self.p)
        dq = unbroadcast((ds @ self.k) * self.scale, self.q.shape)
        dk = unbroadcast((ds.swapaxes(-1, -2) @ self.q) * self.scale, self.k.shape)
        return (dq, dk) if len(self.mg_parents) == 2 else (dq, dk, unbroadcast(ds, self.mask_shape))


@formula(AttentionWeights)
def attention_weights_graph(node, dout):
    p = saved_output(node, node.p)
    q, k = saved_input(node, 0, node.q), saved_input(node, 1, node.k)
    ds = p * (dout - Sum.apply(dout * p, axis=(p.ndim - 1,), keepdims=True))
    dq = sum_to(MatMul.apply(ds, k) * node.scale, node.q.shape) if node.needs_input_grad[0] else None
    dk = sum_to(MatMul.apply(swap_last(ds), q) * node.scale, node.k.shape) if node.needs_input_grad[1] else None
    return (dq, dk) if len(node.mg_parents) == 2 else (dq, dk, sum_to(ds, node.mask_shape))


@formula(ScaledDotProductAttentionFunction)
def sdpa_graph(node, dout):
    which = (0, 1) if len(node.mg_parents) == 3 else (0, 1, 3)  # q, k (and a float mask): what P depends on
    p = made_node(AttentionWeights, [node.mg_parents[i] for i in which], node.p,
                  [node.mg_versions[i] for i in which] if node.mg_versions else (), q=node.q, k=node.k, p=node.p,
                  scale=node.scale, mask_shape=getattr(node, "mask_shape", None))
    weights = p if node.drop is None else p * const(node.drop)
    dv = sum_to(MatMul.apply(swap_last(weights), dout), node.v.shape) if node.needs_input_grad[2] else None
    dd = MatMul.apply(dout, swap_last(saved_input(node, 2, node.v)))
    dp = dd if node.drop is None else dd * const(node.drop)
    if not p.requires_grad:
        return (None, None, dv, *(None,) * (len(node.mg_parents) - 3))
    dq, dk, *dmask = attention_weights_graph(p.grad_fn, dp)
    return (dq, dk, dv, *dmask)


# ---- losses ----

def row_weights(dout: Tensor, reduction: str, n: Any, rows: int) -> Tensor:
    """d loss / d loss_i for each row, a column (rows, 1), as losses.py's, in tensor ops."""
    if reduction == "none":
        return Reshape.apply(dout, shape=(-1, 1))
    w = dout / const(backend.get_array_module(n).maximum(n, 1)) if reduction == "mean" else dout
    return Expand.apply(Reshape.apply(w, shape=(1, 1)), shape=(rows, 1))


@formula(CrossEntropyFunction)
def cross_entropy_graph(node, dout):
    xp = backend.get_array_module(node.probs)
    n, v = node.probs.shape
    probs = made_node(SoftmaxFunction, (node.mg_parents[0],), node.probs.reshape(node.logits_shape), y=node.probs)
    w = Where.apply(row_weights(dout, node.reduction, node.n, n), zero(dout), cond=node.counted[:, None] > 0)
    q = xp.full((n, v), node.smoothing / v, dtype=node.probs.dtype)  # the target distribution, a constant
    q[node.rows, node.targets] += 1 - node.smoothing
    return (Reshape.apply((Reshape.apply(probs, shape=(n, v)) - const(q)) * w, shape=node.logits_shape),)


@formula(SoftCrossEntropyFunction)
def soft_cross_entropy_graph(node, dout):
    n, v = node.q.shape
    eps = node.smoothing
    log_probs = made_node(LogSoftmaxFunction, (node.mg_parents[0],), node.log_probs.reshape(node.logits_shape),
                          y=node.log_probs.reshape(node.logits_shape))
    log_probs = Reshape.apply(log_probs, shape=(n, v))
    undone = node.q if eps in (0, 1) else (node.q - eps / v) / (1 - eps)  # the target's values (eps = 1: none count)
    target = saved_input(node, 1, undone.reshape(node.logits_shape))
    q = Reshape.apply(target, shape=(n, v)) * (1 - eps) + eps / v
    w = row_weights(dout, node.reduction, node.n, n)
    need_logits, need_target = node.needs_input_grad
    dx = dp = None
    if need_logits:
        dx = Reshape.apply(w * (log_probs.exp() * Sum.apply(q, axis=(1,), keepdims=True) - q), shape=node.logits_shape)
    if need_target:
        dp = Reshape.apply(log_probs * (w * -(1 - eps)), shape=node.logits_shape)
    return dx, dp


@formula(NLLLossFunction)
def nll_loss_graph(node, dout):
    xp = backend.get_array_module(node.rows)
    n, v = node.rows.shape[0], node.input_shape[-1]
    w = Where.apply(row_weights(dout, node.reduction, node.n, n), zero(dout), cond=node.counted[:, None] > 0)
    picked = xp.zeros((n, v), dtype=dout.dtype)
    picked[node.rows, node.targets] = 1
    return (Reshape.apply(-(w * const(picked)), shape=node.input_shape),)


@formula(MSELossFunction)
def mse_loss_graph(node, dout):
    need_input, need_target = node.needs_input_grad
    diff = made_node(Sub, node.mg_parents, node.diff, a_shape=node.diff.shape, b_shape=node.diff.shape)  # x - y
    w = Reshape.apply(row_weights(dout, node.reduction, node.n, node.diff.size), shape=node.diff.shape)
    dx = 2 * w * diff
    return (dx if need_input else None), (-dx if need_target else None)


@formula(BCEWithLogitsFunction)
def bce_with_logits_graph(node, dout):
    need_x, need_target = node.needs_input_grad
    x, t = saved_input(node, 0, node.x), saved_input(node, 1, node.target)
    u = Reshape.apply(row_weights(dout, node.reduction, node.n, node.x.size), shape=node.x.shape)
    if node.weight is not None:
        u = u * const(node.weight)
    p = 1 if node.pos_weight is None else const(node.pos_weight)
    dx = dt = None
    if need_x:
        l_ = 1 if node.pos_weight is None else (p - 1) * t + 1
        dx = u * (l_ * x.sigmoid() - p * t)
    if need_target:
        softplus = (-x).relu() + ((-x.abs()).exp() + 1).log()  # softplus(-x), finite for any x
        dt = u * ((p - 1) * softplus - x)
    return dx, dt


@formula(Custom)
def custom_function_graph(node, dout):
    """A PyTorch-style Function (minigrad/custom_function.py): its own backward, run on tensors of the graph, with
    the inputs and the output it saved back in the graph (saved_input, saved_output), as PyTorch's double backward."""
    if node.mg_n_outputs is not None and "output" in node.mg_saved_as:
        raise NotImplementedError(f"create_graph=True: {node.mg_fn.__name__} saved one of its several outputs, which "
                                  "cannot be brought back into the graph here; save its inputs instead")
    saved = [None if a is None else saved_input(node, where, a) if isinstance(where, int)
             else saved_output(node, a) if where == "output" else Tensor.wrap(a)
             for a, where in zip(node.mg_saved, node.mg_saved_as, strict=True)]
    return tuple(node.run_backward(list(dout) if node.mg_n_outputs is not None else [dout], saved, in_graph=True))

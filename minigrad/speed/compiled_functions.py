"""The compiled implementations that `with mg.compiled():` runs (the optional extra `pip install -e '.[compiled]'`):
each is a subclass of a teaching Function (or of its twin in minigrad/speed/twins.py) whose forward or backward calls a
kernel of minigrad/speed/kernels.py on float32 CPU arrays, and the code it subclasses on anything else (tensors, under
create_graph=True). IMPLEMENTATIONS is the table that
core.Function.apply chooses from, `modes.implementations.get(cls, cls)`, while mg.compiled() is on (on that thread).
The teaching Functions stay the definition: tests/test_kernels.py checks every kernel against them.
"""

from __future__ import annotations

from typing import Any

from minigrad.array import backend
from minigrad.array.arrays import as_rows
from minigrad.core import Function
from minigrad.ops.activations import GeluErfFunction, GeluFunction, SoftmaxFunction
from minigrad.ops.losses import CrossEntropyFunction
from minigrad.ops.matmul import LinearFunction, MatMul
from minigrad.ops.matmul import product as numpy_product
from minigrad.ops.normalization import LayerNormFunction
from minigrad.ops.sdpa import ScaledDotProductAttentionFunction
from minigrad.ops.shapes import EmbeddingFunction
from minigrad.speed import kernels
from minigrad.speed.twins import FastAttention, FastGelu, FastGeluErf, SlopeFunction


def product(a: Any, b: Any) -> Any:
    """a @ b on the kernels' threads (kernels.product: the BLAS's sgemm, one call a thread) for float32 CPU arrays;
    matmul.product otherwise."""
    return kernels.product(a, b) if kernels.multiplies(a, b) else numpy_product(a, b)


class CompiledMatMul(MatMul):
    product = staticmethod(product)


class CompiledLinear(LinearFunction):
    product = staticmethod(product)


class CompiledSlope(SlopeFunction):
    """GELU (tanh or erf, `kernel`): y and dy/dx in one pass over x; backward's product on every core."""

    kernel: str  # the name of its kernel in minigrad.speed.kernels

    def forward(self, x):
        if not kernels.takes(x):
            return super().forward(x)
        y, self.slope = getattr(kernels, self.kernel)(x, slope=bool(self.needs_input_grad))
        return y

    def backward(self, dout):
        if kernels.takes(dout) and kernels.takes(self.slope):
            return (kernels.multiply(dout, self.slope),)
        return super().backward(dout)


class CompiledGelu(CompiledSlope, FastGelu):
    kernel = "gelu_tanh"


class CompiledGeluErf(CompiledSlope, FastGeluErf):
    kernel = "gelu_erf"


class CompiledSoftmax(SoftmaxFunction):
    """Softmax's forward and backward row by row, each row in one pass (its exps by exp32, on every core)."""

    def forward(self, x):
        x_rows = as_rows(x)
        if not kernels.takes(x_rows):
            return super().forward(x)
        self.y = kernels.softmax(x_rows)[0].reshape(x.shape)
        return self.y

    def backward(self, dout):
        dout_rows, y = as_rows(dout), as_rows(self.y)
        if kernels.takes(dout_rows) and kernels.takes(y):
            dx = kernels.softmax_backward(dout_rows, y,
                                          out=backend.get_array_module(dout_rows).empty_like(dout_rows))
            return (dx.reshape(dout.shape),)
        return super().backward(dout)


class CompiledCrossEntropy(CrossEntropyFunction):
    """Cross-entropy's softmax row by row, each row in one pass (its exps by exp32, on every core); label smoothing
    runs the NumPy code."""

    @staticmethod
    def losses_and_probs(x, rows, targets, smoothing):
        if smoothing or not kernels.takes(x):
            return CrossEntropyFunction.losses_and_probs(x, rows, targets, smoothing)
        probs, most, log_sums = kernels.softmax(x)
        return log_sums - (x[rows, targets] - most), probs  # -log softmax(x)[t] = log(sum) - (x - max)[t]


class CompiledLayerNorm(LayerNormFunction):
    """Layer norm's forward and backward row by row, each row in one pass."""

    def forward(self, x, *affine, eps):
        x_rows = as_rows(x)
        self.compiled = all(kernels.takes(a) for a in (x_rows, *affine))  # kept for backward
        if not self.compiled:
            return super().forward(x, *affine, eps=eps)
        w, b = (*affine, None, None)[:2]
        y, self.xhat, self.rstd = kernels.layer_norm_forward(x_rows, w, b, eps)
        self.w = w
        return y.reshape(x.shape)

    def backward(self, dout):
        dout_rows = as_rows(dout)
        if not (self.compiled and kernels.takes(dout_rows)):
            return super().backward(dout)
        dx, dw, db = kernels.layer_norm_backward(dout_rows, self.xhat, self.rstd, self.w)
        dx = dx.reshape(dout.shape)
        return (dx,) if self.w is None else (dx, dw, db)[: len(self.needs_input_grad)]


class CompiledAttention(FastAttention):
    """Attention's weights row by row, each row's steps in one pass; softmax's backward likewise; the products on the
    kernels' threads."""

    product = staticmethod(product)

    def weights(self, qk, float_mask, allowed, scale):
        if kernels.takes(qk) and not float_mask and (allowed is None or allowed.shape == qk.shape[-2:]):
            return kernels.attention_weights(as_rows(qk), allowed, scale).reshape(qk.shape)
        return super().weights(qk, float_mask, allowed, scale)

    @staticmethod
    def softmax_backward(dp, p):
        if kernels.takes(dp) and kernels.takes(p):
            return kernels.softmax_backward(as_rows(dp), as_rows(p), out=as_rows(dp)).reshape(dp.shape)
        return FastAttention.softmax_backward(dp, p)


class CompiledEmbedding(EmbeddingFunction):
    """The embedding's backward adds the rows in place, one by one, where scatter_add sorts them first."""

    def backward(self, dout):
        rows = as_rows(dout) if kernels.takes(dout) else None  # (N, C): one row of dout per index
        if rows is None or rows.shape[0] != self.indices.size:
            return super().backward(dout)
        dw = backend.get_array_module(rows).zeros(self.w_shape, dtype=rows.dtype)
        kernels.add_rows(dw, self.indices.reshape(-1), rows)
        if self.padding_idx is not None:
            dw[self.padding_idx] = 0  # the padding row: as if it were a constant
        return (dw,)


IMPLEMENTATIONS: dict[type[Function], type[Function]] = {
    MatMul: CompiledMatMul,
    LinearFunction: CompiledLinear,
    GeluFunction: CompiledGelu,
    GeluErfFunction: CompiledGeluErf,
    SoftmaxFunction: CompiledSoftmax,
    CrossEntropyFunction: CompiledCrossEntropy,
    LayerNormFunction: CompiledLayerNorm,
    ScaledDotProductAttentionFunction: CompiledAttention,
    EmbeddingFunction: CompiledEmbedding,
}

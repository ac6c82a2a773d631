"""Named twins of teaching Functions that compute in place, reusing their buffers (speed: docs/performance.md):
softmax, the GELUs, layer norm, attention and cross-entropy's forward. mg.fused() and mg.compiled() run them,
chosen where core.Function.apply chooses (FUSED); tests/test_fused.py checks each against its teaching Function.
Each saves what its teaching backward needs and runs that backward under create_graph=True; the GELUs, which save
dy/dx instead of x, refuse create_graph=True in one line. Shapes: N = all leading dimensions flattened.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_rows, column_sums, in_blocks, row_max, row_sums, unbroadcast
from minigrad.ops.activations import GeluErfFunction, GeluFunction, SoftmaxFunction
from minigrad.ops.losses import CrossEntropyFunction, row_weights
from minigrad.ops.normalization import LayerNormFunction
from minigrad.ops.sdpa import ScaledDotProductAttentionFunction
from minigrad.tensor import Function

_GELU_C, _GELU_K = math.sqrt(2 / math.pi), 0.044715
_SQRT_HALF = math.sqrt(0.5)
_ONE_OVER_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


# ---- softmax ----

class FastSoftmax(SoftmaxFunction):
    """SoftmaxFunction computed in place in y and dx, with the row maxima and sums of arrays.row_max and
    arrays.row_sums."""

    def forward(self, x):
        xp = backend.get_array_module(x)
        x_rows = as_rows(x)  # (N, L)
        shifted = xp.subtract(x_rows, row_max(x_rows))  # x - max: changes nothing, but exp() can no longer overflow
        exps = xp.exp(shifted, out=shifted)  # exp(x - max), in shifted's memory
        y = xp.divide(exps, row_sums(exps), out=exps)  # y = exp(x - max) / sum(exp(x - max)), in the exps' memory
        self.y = y.reshape(x.shape)
        return self.y

    def backward(self, dout):
        if core.modes.graph:
            return super().backward(dout)
        # in the forward pass this was: y = exp(x) / sum(exp(x)), so dy_i/dx_j = y_i * (delta_ij - y_j)
        xp = backend.get_array_module(dout)
        dout_rows, y = as_rows(dout), as_rows(self.y)  # (N, L)
        dout_y = xp.multiply(dout_rows, y)  # dout * y
        centred = xp.subtract(dout_rows, row_sums(dout_y), out=dout_y)  # dout - sum(dout * y), in dout_y's memory
        dx = xp.multiply(centred, y, out=centred)  # dx = y * (dout - sum(dout * y)), in the same memory
        return (dx.reshape(dout.shape),)


# ---- GELU: dy/dx computed in forward, block by block in cache ----

class SlopeFunction(Function):
    """An elementwise y = f(x) whose derivative dy/dx is computed in forward beside y and saved instead of x, so that
    backward is one multiplication, dx = dout * dy/dx. A subclass names `block`, its formula in NumPy, which
    arrays.in_blocks hands x to block by block while the block is in cache. Without x, create_graph=True is refused
    (graph_backward False): its teaching Function runs it."""

    block: Callable[[Any, Any, Any], None]
    graph_backward = False

    def forward(self, x):
        y, self.slope = in_blocks(self.block, x, slope=bool(self.needs_input_grad))  # under no_grad: no dy/dx
        return y

    def backward(self, dout):
        return (dout * self.slope,)


def _gelu_tanh_block(x, y, slope) -> None:
    xp = backend.get_array_module(x)
    x_sq = xp.multiply(x, x)  # x^2
    # u = c (x + k x^3), built in place as (ck x^2 + c) x
    u = xp.multiply(x_sq, _GELU_K * _GELU_C)
    u += _GELU_C
    u *= x
    # h = 0.5 (1 + tanh(u)), in u's memory
    h = xp.tanh(u, out=u)
    h *= 0.5
    h += 0.5
    xp.multiply(x, h, out=y)  # y = x h
    if slope is not None:
        two_du_dx = xp.multiply(x_sq, 6 * _GELU_K * _GELU_C, out=x_sq)  # 2 du/dx = 2c + 6ck x^2, in x^2's memory
        two_du_dx += 2 * _GELU_C
        # dy/dx = h + y (1 - h) (2c + 6ck x^2), built in place in slope
        xp.subtract(1, h, out=slope)
        slope *= y
        slope *= two_du_dx
        slope += h


class FastGelu(SlopeFunction, GeluFunction):
    """GeluFunction (tanh form) with y and dy/dx computed in place in _gelu_tanh_block, dy/dx saved."""

    block = staticmethod(_gelu_tanh_block)


def _gelu_erf_block(x, y, slope) -> None:
    xp = backend.get_array_module(x)
    # Phi(x) = 0.5 erfc(-x / sqrt(2)); in float32 backend.erfc is one formula in place (Cody's erf runs three in
    # float64)
    cdf = backend.erfc(x * -_SQRT_HALF)
    cdf *= 0.5  # Phi(x)
    xp.multiply(x, cdf, out=y)  # y = x Phi(x)
    if slope is not None:
        # phi(x) = exp(-x^2 / 2) / sqrt(2 pi), built in place in slope
        pdf = xp.multiply(x, x, out=slope)
        pdf *= -0.5
        xp.exp(pdf, out=pdf)
        pdf *= _ONE_OVER_SQRT_2PI
        # dy/dx = Phi(x) + x phi(x), in slope, where phi(x) was
        xp.multiply(pdf, x, out=slope)
        slope += cdf


class FastGeluErf(SlopeFunction, GeluErfFunction):
    """GeluErfFunction with y and dy/dx computed in place in _gelu_erf_block, dy/dx saved."""

    block = staticmethod(_gelu_erf_block)


# ---- layer norm ----

class FastLayerNorm(LayerNormFunction):
    """LayerNormFunction with row and column sums through arrays.row_sums and column_sums, the work done in place:
    each quantity has its name where it is computed, and shares the memory of one computed before it."""

    def forward(self, x, *affine, eps):
        xp = backend.get_array_module(x)
        x_rows = as_rows(x)  # (N, C)
        w, b = (*affine, None, None)[:2]  # (C,) each, or None
        inv_c = 1 / max(x_rows.shape[1], 1)
        mean = row_sums(x_rows) * inv_c  # (N, 1)
        centred = xp.subtract(x_rows, mean)  # x - mean, (N, C)
        squares = xp.multiply(centred, centred)  # (x - mean)^2, (N, C): y is computed in its memory below
        var = row_sums(squares) * inv_c  # mean((x - mean)^2), (N, 1)
        rstd = 1 / xp.sqrt(var + eps)  # (N, 1)
        xhat = xp.multiply(centred, rstd, out=centred)  # xhat = (x - mean) * rstd, in centred's memory
        if w is not None:
            y = xp.multiply(xhat, w, out=squares)  # y = xhat * w + b, (N, C) * (C,), in the squares' memory
            if b is not None:
                y += b
        else:
            y = xhat
        self.xhat, self.rstd, self.w = xhat, rstd, w
        return y.reshape(x.shape)

    def backward(self, dout):
        if core.modes.graph:
            return super().backward(dout)
        xp = backend.get_array_module(dout)
        xhat, dout_rows, w = self.xhat, as_rows(dout), self.w  # (N, C), (N, C), (C,)
        dw = db = None
        inv_c = 1 / max(xhat.shape[1], 1)
        # in the forward pass this was: y = xhat * w + b
        dout_xhat = xp.multiply(dout_rows, xhat)  # dout * xhat, (N, C)
        if w is not None:
            dw, db = column_sums(dout_xhat), column_sums(dout_rows)  # (C,) each: summed over the rows
            dxhat = xp.multiply(dout_rows, w)  # dxhat = dout * w, (N, C)
            dxhat_xhat = xp.multiply(dxhat, xhat, out=dout_xhat)  # dxhat * xhat, in dout_xhat's memory
        else:
            dxhat = dout_rows.copy()  # dxhat = dout, copied: dx is computed in its memory below
            dxhat_xhat = dout_xhat
        # and before that: xhat = (x - mean) * rstd, where x enters three ways, one term each
        mean_dxhat_xhat = row_sums(dxhat_xhat) * inv_c  # (N, 1)
        mean_dxhat = row_sums(dxhat) * inv_c  # (N, 1)
        # dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), in place:
        terms = xp.multiply(xhat, mean_dxhat_xhat, out=dxhat_xhat)  # the terms through rstd and mean, summed in
        terms += mean_dxhat  # dxhat_xhat's memory: mean(dxhat) + xhat * mean(dxhat * xhat)
        inner = xp.subtract(dxhat, terms, out=dxhat)  # dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)
        dx = xp.multiply(inner, self.rstd, out=inner)  # both in dxhat's memory
        dx = dx.reshape(dout.shape)
        return (dx,) if w is None else (dx, dw, db)[: len(self.needs_input_grad)]


# ---- attention ----

class FastAttention(ScaledDotProductAttentionFunction):
    """ScaledDotProductAttentionFunction with S computed in Q K^T's memory (with a float mask, in the sum's), and
    S - max, its exps and P in S's: one (..., L, S) array; softmax's backward in dP's memory."""

    def weights(self, qk, float_mask, allowed, scale):
        xp = backend.get_array_module(qk)
        s = xp.multiply(qk, scale, out=qk)  # S = Q K^T * scale (+ mask, -inf where not allowed)
        if float_mask:
            s = s + float_mask[0]
            self.mask_shape = float_mask[0].shape
        if allowed is not None:
            xp.copyto(s, s.dtype.type(-math.inf), where=~allowed)  # a scalar: no array for it
        rows = s.shape[:-1] + (1,)  # row_max and row_sums: the fast reductions along a short last axis
        m = row_max(as_rows(s)).reshape(rows) if s.shape[-1] else xp.zeros(rows, dtype=s.dtype)
        masked = allowed is not None or bool(float_mask)
        if masked:  # a query that may see no key: its row is all -inf; exp(-inf - 0) = 0, not NaN
            xp.copyto(m, 0, where=m == -math.inf)
        shifted = xp.subtract(s, m, out=s)  # S - max
        exps = xp.exp(shifted, out=shifted)  # exp(S - max)
        sums = row_sums(as_rows(exps)).reshape(rows)
        if masked:  # and its weights stay 0 (0 / 1)
            xp.copyto(sums, 1, where=sums == 0)
        return xp.divide(exps, sums, out=exps)  # P = exp(S - max) / sum

    def backward(self, dout):
        if core.modes.graph:
            return super().backward(dout)
        xp = backend.get_array_module(dout)
        q, k, v, p, scale, drop = self.q, self.k, self.v, self.p, self.scale, self.drop
        need_q, need_k, need_v, *need_mask = self.needs_input_grad
        # in the forward pass this was: out = softmax(q @ k^T * scale + mask) @ v
        weights = p if drop is None else p * drop  # D, what multiplied V in forward
        dv = unbroadcast(self.product(weights.swapaxes(-1, -2), dout), v.shape) if need_v else None
        dd = self.product(dout, v.swapaxes(-1, -2))  # dD = dO V^T (dP itself without dropout)
        dp = dd if drop is None else xp.multiply(dd, drop, out=dd)  # dP = dD * keep / (1 - p), in dD's memory
        ds = self.softmax_backward(dp, p)  # dS = P * (dP - rowsum(dP * P))
        dq = unbroadcast(self.product(ds, k) * scale, q.shape) if need_q else None
        dk = unbroadcast(self.product(ds.swapaxes(-1, -2), q) * scale, k.shape) if need_k else None
        if not need_mask:
            return dq, dk, dv
        return dq, dk, dv, unbroadcast(ds, self.mask_shape) if need_mask[0] else None

    @staticmethod
    def softmax_backward(dp, p):
        """dS = P * (dP - rowsum(dP * P)), softmax's backward along each row, in dP's memory."""
        xp = backend.get_array_module(p)
        centred = dp - row_sums(as_rows(dp * p)).reshape(dp.shape[:-1] + (1,))  # dP - rowsum(dP * P)
        return xp.multiply(centred, p, out=centred)  # dS = P * (dP - rowsum(dP * P)), in centred's memory


# ---- cross-entropy ----

class FastCrossEntropy(CrossEntropyFunction):
    """CrossEntropyFunction with x - max, its exps and probs in one (N, V) array, the row maxima and sums of
    arrays.row_max and row_sums; dx built in place in w * probs."""

    @staticmethod
    def losses_and_probs(x, rows, targets, smoothing):
        xp = backend.get_array_module(x)
        shifted = xp.subtract(x, row_max(x))  # x - max: the same softmax, and exp can no longer overflow
        target_shifted = shifted[rows, targets]  # (x - max)[t], (N,): a copy, taken before exp overwrites shifted
        if smoothing:
            mean_shifted = row_sums(shifted)[:, 0] * (1 / x.shape[1])
        exps = xp.exp(shifted, out=shifted)  # exp(x - max), in shifted's memory
        sums = row_sums(exps)  # (N, 1)
        log_sums = xp.log(sums[:, 0])
        losses = log_sums - target_shifted  # -log softmax(x)[t] = log(sum) - (x - max)[t]
        if smoothing:
            losses = (1 - smoothing) * losses - smoothing * (mean_shifted - log_sums)
        probs = xp.divide(exps, sums, out=exps)  # softmax(x) = exp(x - max) / sum, in the exps' memory
        return losses, probs

    def backward(self, dout):
        if core.modes.graph:
            return super().backward(dout)
        xp = backend.get_array_module(dout)
        counted = self.counted[:, None] > 0  # (N, 1)
        w = xp.where(counted, row_weights(dout, self.reduction, self.n, self.probs.shape[0]), 0)  # (N, 1)
        dx = self.probs * w  # dx = w (probs - q), built in place
        dx[self.rows, self.targets] -= (1 - self.smoothing) * w[:, 0]
        if self.smoothing:
            dx -= (self.smoothing / dx.shape[1]) * w
        return (dx.reshape(self.logits_shape),)


FUSED: dict[type[Function], type[Function]] = {
    SoftmaxFunction: FastSoftmax,
    GeluFunction: FastGelu,
    GeluErfFunction: FastGeluErf,
    LayerNormFunction: FastLayerNorm,
    ScaledDotProductAttentionFunction: FastAttention,
    CrossEntropyFunction: FastCrossEntropy,
}

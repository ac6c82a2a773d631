"""Named twins of teaching Functions that compute in place, reusing their buffers (speed: docs/performance.md):
the GELUs and attention, the twins that measured paying 3% of a step or more (`python -m benchmarks.twins`).
mg.fused() and mg.compiled() run them, chosen where core.Function.apply chooses (FUSED); tests/test_twins.py checks
each against its teaching Function.
Each saves what its teaching backward needs and runs that backward under create_graph=True; the GELUs, which save
dy/dx instead of x, refuse create_graph=True in one line. Shapes: N = all leading dimensions flattened.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import as_rows, in_blocks, row_max, row_sums, unbroadcast
from minigrad.ops.activations import GeluErfFunction, GeluFunction
from minigrad.ops.sdpa import ScaledDotProductAttentionFunction
from minigrad.tensor import Function

_GELU_C, _GELU_K = math.sqrt(2 / math.pi), 0.044715
_SQRT_HALF = math.sqrt(0.5)
_ONE_OVER_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


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


FUSED: dict[type[Function], type[Function]] = {
    GeluFunction: FastGelu,
    GeluErfFunction: FastGeluErf,
    ScaledDotProductAttentionFunction: FastAttention,
}

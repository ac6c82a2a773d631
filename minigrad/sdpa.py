"""F.scaled_dot_product_attention (SDPA): softmax(Q K^T * scale + mask) V as one Function with a closed-form
backward. models/attention.py writes the same steps out, six nodes, to teach them.
Shapes: ... batch axes (they broadcast), L queries, S keys and values, E query and key size, Ev value size.
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import backend
from minigrad.arrays import as_rows, broadcasts_to, dropout_scale, index_array, row_max, row_sums, unbroadcast
from minigrad.dtypes import check_float
from minigrad.matmul import product
from minigrad.shapes import allowed_keys
from minigrad.tensor import Function, Tensor

# ---- scaled dot-product attention ----

class ScaledDotProductAttentionFunction(Function):
    """out = P V,  P = softmax(S) along the keys,  S = Q K^T * scale + mask  (S = -inf where a key is not allowed)

    dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P))  (softmax's backward, row by row),
    dQ = dS K * scale,  dK = dS^T Q * scale,  dmask = dS  (a float mask is added to S).
    With dropout, out = D V, D = P * keep / (1 - p): dV = D^T dO, and dD = dO V^T gives dP = dD * keep / (1 - p).
    A query that sees no key has P = 0 in its row, so its output and its dS are 0 (docs/backward.md derives all
    of this). Each gradient is summed back over the axes its input was broadcast along.
    """

    product = staticmethod(product)  # a @ b, arranged for BLAS (matmul.py)

    def forward(self, q, k, v, *float_mask, allowed, scale, dropout_p):
        qk = self.product(q, k.swapaxes(-1, -2))  # Q K^T, (..., L, S)
        p = self.weights(qk, float_mask, allowed, scale)  # P = softmax(S), S = Q K^T * scale + mask, in qk's memory
        self.q, self.k, self.v, self.p, self.scale, self.drop = q, k, v, p, scale, None
        if dropout_p:
            self.drop = dropout_scale(p, dropout_p)
            return self.product(p * self.drop, v)
        return self.product(p, v)

    def weights(self, qk, float_mask, allowed, scale):
        """P = softmax(S) along the keys, S = Q K^T * scale + mask, -inf where not allowed (allowed: True = may
        attend); a row that sees no key is all 0. Speed: in place here and below, S is computed in qk's memory (with
        a float mask, in the sum's), and S - max, its exps and P in S's: one (..., L, S) array."""
        xp = backend.get_array_module(qk)
        s = xp.multiply(qk, scale, out=qk)  # S = Q K^T * scale (+ mask, -inf where not allowed)
        if float_mask:
            s = s + float_mask[0]
            self.mask_shape = float_mask[0].shape
        if allowed is not None:
            xp.copyto(s, s.dtype.type(-math.inf), where=~allowed)  # a scalar: no array for it
        # each row's largest score; with no keys (S = 0) there is none, and the output is zeros, as in PyTorch
        # (row_max and row_sums: the fast reductions along a short last axis, as F.softmax's)
        rows = s.shape[:-1] + (1,)
        m = row_max(as_rows(s)).reshape(rows) if s.shape[-1] else xp.zeros(rows, dtype=s.dtype)
        masked = allowed is not None or bool(float_mask)
        if masked:  # a query that may see no key: its row is all -inf; exp(-inf - 0) = 0, not NaN
            xp.copyto(m, 0, where=m == -math.inf)
        shifted = xp.subtract(s, m, out=s)  # S - max
        exps = xp.exp(shifted, out=shifted)  # exp(S - max)
        sums = row_sums(as_rows(exps)).reshape(rows)
        if masked:  # and its weights stay 0 (0 / 1), so its output and its gradients are 0, as in PyTorch
            xp.copyto(sums, 1, where=sums == 0)
        return xp.divide(exps, sums, out=exps)  # P = exp(S - max) / sum

    def backward(self, dout):
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
        """dS = P * (dP - rowsum(dP * P)), softmax's backward along each row (dP's memory may be reused)."""
        xp = backend.get_array_module(p)
        centred = dp - row_sums(as_rows(dp * p)).reshape(dp.shape[:-1] + (1,))  # dP - rowsum(dP * P)
        return xp.multiply(centred, p, out=centred)  # dS = P * (dP - rowsum(dP * P)), in centred's memory


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(query key^T * scale + mask) value in one graph node, as torch.nn.functional.scaled_dot_product_attention
    (same arguments): query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev), batch axes broadcast.
    attn_mask: boolean, True where a query may attend, or float, added to the scores (F.causal_mask is one); a query
    that may attend to no key gets zeros (F.softmax of the steps written out gives NaN there, as in PyTorch: see
    docs/backward.md, which derives the backward). is_causal: query i sees keys 0..i, the mask aligned top left as
    PyTorch's (a key/value cache, whose L queries are the last L of S positions, passes F.causal_mask(L, S)).
    scale: 1 / sqrt(E) by default. enable_gqa: grouped-query attention, heads on axis -3: key and value have Hkv
    heads, each serving Hq / Hkv consecutive query heads (as torch's, LLaMA 2 and 3's)."""
    op = "scaled_dot_product_attention"
    check_float(op, query)
    if not isinstance(enable_gqa, bool):
        raise TypeError(f"{op}: enable_gqa must be True or False, got {enable_gqa!r:.40}")
    if enable_gqa:
        key, value = _shared_heads(op, query, key, value)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2 or query.shape[-1] != key.shape[-1] \
            or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{op}: query {query.shape}, key {key.shape}, value {value.shape} do not fit "
                         "(..., L, E), (..., S, E), (..., S, Ev)")
    L, S = query.shape[-2], key.shape[-2]
    try:
        scores = backend.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (L, S)
        backend.broadcast_shapes(scores[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the batch axes of query {query.shape}, key {key.shape} and value {value.shape} "
                         "do not broadcast") from None
    if not 0 <= dropout_p <= 1:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")
    allowed, float_mask = None, ()
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{op}: pass attn_mask or is_causal=True, not both")
        n = max(L, S)  # query i sees keys 0..i, aligned top left as PyTorch's (the square's first L rows, S columns)
        allowed = allowed_keys(n, n, query.device)[:L, :S]  # True: a key no later than the query, j <= i
    elif attn_mask is not None:
        allowed, float_mask = _mask(op, attn_mask, query, scores)
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    return ScaledDotProductAttentionFunction.apply(query, key, value, *float_mask, allowed=allowed, scale=scale,
                                                   dropout_p=dropout_p)


def _shared_heads(op: str, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
    """key and value (..., Hkv, S, *) with each head repeated Hq / Hkv times, side by side, as query's Hq heads
    use them: (..., Hq, S, *); their gradients sum back over the copies (Expand's backward)."""
    if min(query.ndim, key.ndim, value.ndim) < 3:
        raise ValueError(f"{op}: enable_gqa needs a head axis (-3): query {query.shape}, key {key.shape}, "
                         f"value {value.shape}")
    hq, hk = query.shape[-3], key.shape[-3]
    if value.shape[-3] != hk or hq % hk:
        raise ValueError(f"{op}: enable_gqa: {hq} query heads for key {key.shape} and value {value.shape}: key and "
                         "value need one number of heads, which divides the query's")
    if hk == hq:
        return key, value
    return tuple(t.unsqueeze(-3).expand(*t.shape[:-2], hq // hk, *t.shape[-2:]).reshape(*t.shape[:-3], hq,
                                                                                          *t.shape[-2:])
                 for t in (key, value))


def _mask(op: str, attn_mask: Any, query: Tensor, scores: tuple[int, ...]) -> tuple[Any, tuple[Tensor, ...]]:
    """(allowed, ()) for a boolean mask, True where a query may attend; (None, (mask,)) for a float mask."""
    if not (isinstance(attn_mask, Tensor) and attn_mask.dtype.kind == "f"):  # a Tensor keeps its graph edge
        mask = index_array(op, attn_mask, query.device, "biuf")
        if mask.dtype.kind not in "bf":
            raise TypeError(f"{op}: attn_mask must be boolean (True: may attend) or float (added to the scores), "
                            f"got dtype {mask.dtype}")
        attn_mask = mask if mask.dtype.kind == "b" else Tensor.wrap(mask.astype(query.dtype, copy=False), False)
    if not broadcasts_to(attn_mask.shape, scores):
        raise ValueError(f"{op}: attn_mask of shape {attn_mask.shape} does not broadcast to the scores' shape {scores}")
    return (None, (attn_mask,)) if isinstance(attn_mask, Tensor) else (attn_mask, ())

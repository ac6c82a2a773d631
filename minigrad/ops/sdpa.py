"""F.scaled_dot_product_attention (SDPA): softmax(Q K^T * scale + mask) V as one Function with a closed-form
backward. models/attention.py writes the same steps out, six nodes, to teach them.
Shapes: ... batch axes (they broadcast), T queries, T_k keys and values, hs the query's and key's head size, hs_v
the value's (PyTorch's documentation of this function calls them L, S, E and Ev; S here is the scores).
"""

from __future__ import annotations

import math
from typing import Any

from minigrad import core
from minigrad.array import backend
from minigrad.array.arrays import broadcasts_to, dropout_scale, index_array, unbroadcast
from minigrad.array.dtypes import check_float
from minigrad.core import Tensor, derived, namespace
from minigrad.ops import Primitive
from minigrad.ops.matmul import product
from minigrad.ops.shapes import allowed_keys

# ---- scaled dot-product attention ----

class ScaledDotProductAttentionFunction(Primitive):
    """out = P V,  P = softmax(S) along the keys,  S = Q K^T * scale + mask  (S = -inf where a key is not allowed)

    dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P))  (softmax's backward, row by row),
    dQ = dS K * scale,  dK = dS^T Q * scale,  dmask = dS  (a float mask is added to S).
    With dropout, out = D V, D = P * keep / (1 - p): dV = D^T dO, and dD = dO V^T gives dP = dD * keep / (1 - p).
    A query that sees no key has P = 0 in its row, so its output and its dS are 0 (docs/backward.md derives all
    of this). Each gradient is summed back over the axes its input was broadcast along. (mg.fused() and
    mg.compiled() run a twin that reuses its buffers: minigrad/speed/twins.py.)
    """

    product = staticmethod(product)  # a @ b, arranged for BLAS (matmul.py)

    def forward(self, q, k, v, *float_mask, allowed, scale, dropout_p):
        qk = self.product(q, k.swapaxes(-1, -2))  # Q K^T, (..., T, T_k)
        p = self.weights(qk, float_mask, allowed, scale)  # P = softmax(S), S = Q K^T * scale + mask
        self.q, self.k, self.v, self.p, self.scale, self.drop = q, k, v, p, scale, None
        if dropout_p:
            self.drop = dropout_scale(p, dropout_p)
            return self.product(p * self.drop, v)
        return self.product(p, v)

    def weights(self, qk, float_mask, allowed, scale):
        """P = softmax(S) along the keys, S = Q K^T * scale + mask, -inf where not allowed (allowed: True = may
        attend); a row that sees no key is all 0."""
        xp = backend.get_array_module(qk)
        s = qk * scale  # S = Q K^T * scale (+ mask, -inf where not allowed)
        if float_mask:
            s = s + float_mask[0]
            self.mask_shape = float_mask[0].shape
        if allowed is not None:
            s = xp.where(allowed, s, s.dtype.type(-math.inf))
        # each row's largest score; with no keys (S = 0) there is none, and the output is zeros, as in PyTorch
        m = s.max(axis=-1, keepdims=True) if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), dtype=s.dtype)
        masked = allowed is not None or bool(float_mask)
        if masked:  # a query that may see no key: its row is all -inf; exp(-inf - 0) = 0, not NaN
            m = xp.where(m == -math.inf, 0, m)
        exps = xp.exp(s - m)
        sums = exps.sum(axis=-1, keepdims=True)
        if masked:  # and its weights stay 0 (0 / 1), so its output and its gradients are 0, as in PyTorch
            sums = xp.where(sums == 0, 1, sums)
        return exps / sums  # P = exp(S - max) / sum

    def backward(self, dout):
        xp = namespace(dout)
        need_q, need_k, need_v, *need_mask = self.needs_input_grad
        p = self.saved(self.p, self.weights_in_graph)
        drop = None if self.drop is None else self.saved(self.drop, None)
        # in the forward pass this was: out = D @ v, D = P * keep / (1 - p) (P itself without dropout)
        weights = p if drop is None else p * drop
        dv = unbroadcast(self.product(xp.swapaxes(weights, -1, -2), dout), self.v.shape) if need_v else None
        if not (need_q or need_k or True in need_mask):
            return (None, None, dv, *(None for _ in need_mask))
        dd = self.product(dout, xp.swapaxes(self.saved(self.v, 2), -1, -2))  # dD = dO V^T
        dp = dd if drop is None else dd * drop  # dP
        dq, dk, *dmask = scores_backward(self, dp, p, need_q, need_k, need_mask)
        return (dq, dk, dv, *dmask)

    def weights_in_graph(self) -> Tensor:
        """P under create_graph=True: the output of an AttentionWeights node, whose inputs are q, k (and a float
        mask), what P depends on."""
        which = (0, 1) if len(self.mg_parents) == 3 else (0, 1, 3)
        return derived(AttentionWeights, [self.mg_parents[i] for i in which], self.p, q=self.q, k=self.k, p=self.p,
                       scale=self.scale, mask_shape=getattr(self, "mask_shape", None))


class AttentionWeights(Primitive):
    """P = softmax(Q K^T * scale + mask) along the keys, inputs (q, k) or (q, k, float mask): the weights attention
    saved, as a node of its own under create_graph=True (made by derived, never by apply); its backward is the
    part of attention's that goes through P: scores_backward."""

    product = staticmethod(product)

    def backward(self, dout):
        need_q, need_k, *need_mask = self.needs_input_grad
        return scores_backward(self, dout, self.saved(self.p, "output"), need_q, need_k, need_mask)


def scores_backward(node: Primitive, dp: Any, p: Any, need_q: bool, need_k: bool,
                    need_mask: list[bool]) -> tuple[Any, ...]:
    """The gradients of q, k (and a float mask) from dP, the gradient of the weights P = softmax(S) of `node` (inputs
    q and k first): dS = P * (dP - rowsum(dP * P)),  dQ = dS K * scale,  dK = dS^T Q * scale,  dmask = dS."""
    xp = namespace(dp)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # (..., T, T_k)
    dq = unbroadcast(node.product(ds, node.saved(node.k, 1)) * node.scale, node.q.shape) if need_q else None
    dk = unbroadcast(node.product(xp.swapaxes(ds, -1, -2), node.saved(node.q, 0)) * node.scale,
                     node.k.shape) if need_k else None
    if not need_mask:
        return dq, dk
    return dq, dk, unbroadcast(ds, node.mask_shape) if need_mask[0] else None


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(query key^T * scale + mask) value in one graph node, as torch.nn.functional.scaled_dot_product_attention
    (same arguments): query (..., T, hs), key (..., T_k, hs), value (..., T_k, hs_v) -> (..., T, hs_v), batch axes
    broadcast.
    attn_mask: boolean, True where a query may attend, or float, added to the scores (F.causal_mask is one); a query
    that may attend to no key gets zeros (F.softmax of the steps written out gives NaN there, as in PyTorch: see
    docs/backward.md, which derives the backward). is_causal: query i sees keys 0..i, the mask aligned top left as
    PyTorch's (a key/value cache, whose T queries are the last T of T_k positions, passes F.causal_mask(T, T_k)).
    scale: 1 / sqrt(hs) by default. enable_gqa: grouped-query attention, heads on axis -3: key and value have
    n_kv_head heads, each serving nh / n_kv_head consecutive query heads (as torch's, LLaMA 2 and 3's)."""
    op = "scaled_dot_product_attention"
    check_float(op, query)
    if not isinstance(enable_gqa, bool):
        raise TypeError(f"{op}: enable_gqa must be True or False, got {enable_gqa!r:.40}")
    if enable_gqa:
        key, value = _shared_heads(op, query, key, value)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2 or query.shape[-1] != key.shape[-1] \
            or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{op}: query {query.shape}, key {key.shape}, value {value.shape} do not fit "
                         "(..., T, hs), (..., T_k, hs), (..., T_k, hs_v)")
    T, T_k = query.shape[-2], key.shape[-2]
    try:
        scores = backend.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (T, T_k)
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
        n = max(T, T_k)  # query i sees keys 0..i, aligned top left as PyTorch's: the square's first T rows, T_k columns
        allowed = allowed_keys(n, n, query.device)[:T, :T_k]  # True: a key no later than the query, j <= i
    elif attn_mask is not None:
        allowed, float_mask = _mask(op, attn_mask, query, scores)
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    return ScaledDotProductAttentionFunction.apply(query, key, value, *float_mask, allowed=allowed, scale=scale,
                                                   dropout_p=dropout_p)


def _shared_heads(op: str, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
    """key and value (..., n_kv_head, T_k, *) with each head repeated nh / n_kv_head times, side by side, as query's
    nh heads use them: (..., nh, T_k, *); their gradients sum back over the copies (Expand's backward)."""
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
        attn_mask = mask if mask.dtype.kind == "b" else core.TENSOR.wrap(mask.astype(query.dtype, copy=False), False)
    if not broadcasts_to(attn_mask.shape, scores):
        raise ValueError(f"{op}: attn_mask of shape {attn_mask.shape} does not broadcast to the scores' shape {scores}")
    return (None, (attn_mask,)) if isinstance(attn_mask, Tensor) else (attn_mask, ())

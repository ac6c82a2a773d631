"""Multi-head causal self-attention, written in the order of docs/self-attention.md.

Read it beside that page: project x to Q, K, V with one matrix; split the heads; step 1 scores
Q K^T / sqrt(d_k); step 2 causal mask; step 3 softmax; step 4 weighted sum of V; merge the heads;
output projection. Shapes: B batch, T time, C channels (d_model), nh heads, hs head size (d_k).
The optional `cache` (KVCache) is the one way in and out besides x: see models/decoder.py.

The GPT and the LLaMA-style model (models/llama.py) share this module. The one difference is a
pluggable step between the head split and the scores: `rotary`, which LLaMA sets, turns q and k
by angles that grow with their position (rotary position embeddings); the GPT adds its positions
to the input instead and leaves it None.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import minigrad as mg
from minigrad import functional as F
from minigrad import nn
from minigrad.tensor import Tensor, is_grad_enabled


class KVCache:
    """One attention layer's keys and values of the positions already seen, so that generating a token
    costs one position; `trace` holds the latest call's steps (q, k, v, scores, weights, out). The
    protocol is described once, in models/decoder.py."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.trace: dict[str, Tensor] = {}

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add this step's keys and values (B, nh, T, hs); return all of them (B, nh, T_past + T, hs)."""
        if is_grad_enabled():
            raise RuntimeError("KVCache is for inference (generate, trace_attention): use it under mg.no_grad()")
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = mg.cat([self.k, k], dim=2)
            self.v = mg.cat([self.v, v], dim=2)
        return self.k, self.v


class MultiHeadSelfAttention(nn.Module):
    """rotary: None, or a function (q or k (B, nh, T, hs), position of its first token) -> the same shape,
    applied to q and k after the head split (models/llama.py's RotaryEmbedding)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 rotary: Callable[[Tensor, int], Tensor] | None = None) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"MultiHeadSelfAttention: d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias)  # W_Q, W_K, W_V of every head, side by side
        self.proj = nn.Linear(d_model, d_model, bias)  # mixes the heads' outputs back into C channels
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.rotary = rotary

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x (B, T, C) -> (B, T, C). With a cache, x continues the positions cached before (see models/decoder.py)."""
        B, T, C = x.shape
        nh, hs = self.n_heads, C // self.n_heads

        # Q, K, V are plain projections of x: one (C -> 3C) matrix computes them for all heads at once
        qkv = self.qkv(x)  # (B, T, 3C)
        q, k, v = qkv.split(C, dim=-1)  # each (B, T, C); one node, whose backward writes one (B, T, 3C) gradient

        # multi-head split: head h owns channels [h*hs, (h+1)*hs) of each
        q = q.reshape(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.reshape(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.reshape(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)

        # positions (LLaMA): turn q and k by their position's angles; a cache holds the positions before x
        if self.rotary is not None:
            start = 0 if cache is None else len(cache)
            q, k = self.rotary(q, start), self.rotary(k, start)  # (B, nh, T, hs)
        if cache is not None:  # earlier positions' keys and values come first
            k, v = cache.append(k, v)  # (B, nh, T_k, hs), T_k = positions cached + T
        T_k = k.shape[2]

        # step 1, scores: each query against every key, divided by sqrt(d_k) to keep softmax well scaled
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T_k)

        # step 2, causal mask: a position may not look at later positions (their scores become -inf)
        scores = F.masked_fill(scores, F.causal_mask(T, T_k, device=x.device), float("-inf"))

        # step 3, softmax over each row: weights in [0, 1] that sum to 1
        weights = F.softmax(scores, dim=-1)  # (B, nh, T, T_k)

        # step 4, weighted sum of the values: b_i = sum_j weights_ij v_j
        out = self.attn_dropout(weights) @ v  # (B, nh, T, hs)

        # merge the heads back side by side, then the output projection
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        if cache is not None:  # each step's result, under the names used here (explain prints them)
            cache.trace = {"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "out": out}
        return self.resid_dropout(self.proj(out))  # (B, T, C)

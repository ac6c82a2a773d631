"""The decoder block: pre-LayerNorm attention and feed-forward, each inside a residual connection.

A block maps (B, T, C) to (B, T, C), the same shape it was given, which is why blocks stack.

The cache / trace protocol (the one way, besides x, into and out of attention): a model's
`forward(idx, targets=None, *, caches=None, start=0)` takes an optional list with one KVCache
(models/attention.py) per block, and passes each block its own. Attention then
- appends this call's keys and values to the cache and attends over all of them, so the tokens of
  idx are positions start, ..., start + T - 1 after the cached ones: `generate` runs the prompt once
  with fresh caches (start 0), then each new token alone (start = its position);
- stores the call's intermediate results in `cache.trace`: q, k, v (B, nh, T or T_k, hs), scores
  and weights (B, nh, T, T_k), out (B, T, C, the heads merged, before the output projection).
  A list of fresh caches and one forward pass give every layer's attention steps: that is
  `trace_attention`, which explain.py prints.
Caches are for inference only (they refuse to grow under grad mode). Without caches, forward is
plain training: positions 0, ..., T - 1, nothing kept.
"""

from __future__ import annotations

from minigrad import functional as F
from minigrad import nn
from minigrad.tensor import Tensor
from models.attention import KVCache, MultiHeadSelfAttention


class MLP(nn.Module):
    """The feed-forward network applied to each position on its own: C -> 4C, GELU, 4C -> C."""

    def __init__(self, d_model: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model, bias)
        self.proj = nn.Linear(4 * d_model, d_model, bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x), approximate="tanh")))


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model, bias=bias)
        self.attn = MultiHeadSelfAttention(d_model, n_heads, dropout, bias)
        self.ln_2 = nn.LayerNorm(d_model, bias=bias)
        self.mlp = MLP(d_model, dropout, bias)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache)  # tokens look at each other
        x = x + self.mlp(self.ln_2(x))  # each token thinks on its own
        return x

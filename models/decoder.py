"""The decoder block: pre-LayerNorm attention and feed-forward, each inside a residual connection.

A block maps (B, T, C) to (B, T, C), the same shape it was given, which is why blocks stack.
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

    def forward(self, x: Tensor, cache: KVCache | None = None, trace: dict | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache, trace=trace)  # tokens look at each other
        x = x + self.mlp(self.ln_2(x))  # each token thinks on its own
        return x

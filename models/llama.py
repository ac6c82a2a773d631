"""A LLaMA-style decoder: the GPT of models/gpt.py with LLaMA's three changes, and no biases.

- RMSNorm for LayerNorm (pre-norm as before): divide by the root mean square of the channels and
  scale; no mean subtracted, no bias.
- Rotary position embeddings (RoPE) for the position table: nothing is added to the input. Instead,
  attention turns each head's q and k by angles proportional to their position (RotaryEmbedding, the
  `rotary` step of models/attention.py), so that a score q_m . k_n depends on the tokens and on m - n.
- SwiGLU for the GELU MLP: (silu(x W1) * (x W3)) W2, a gated feed-forward with about the GPT's parameters.

The head is untied, as in LLaMA: a Linear of its own (lm_head), not the token embedding. Attention,
the decoder block's residual layout, the cache / trace protocol, trace_attention and generate are the
GPT's own (models/attention.py, models/decoder.py). Names follow the GPT's where the part is the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import minigrad as mg
from minigrad import backend, nn
from minigrad import functional as F
from minigrad.tensor import Tensor
from models.attention import KVCache, MultiHeadSelfAttention
from models.decoder import IGNORE_INDEX, DecoderConfig, DecoderModel


@dataclass
class LlamaConfig(DecoderConfig):  # vocab_size, block_size, n_layer, n_head, n_embd, dropout; and:
    norm_eps: float = 1e-5  # added to the mean square in RMSNorm
    rope_base: float = 10000.0  # RoPE's angles: position * rope_base ** (-2i / head size), i = 0 .. hs/2 - 1
    multiple_of: int = 16  # the SwiGLU hidden width, 2/3 of 4C, is rounded up to a multiple of this

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"LlamaConfig: rotary embeddings turn channel pairs, so the head size "
                             f"n_embd // n_head = {self.n_embd // self.n_head} must be even")
        if not isinstance(self.multiple_of, int) or self.multiple_of <= 0:
            raise ValueError(f"LlamaConfig: multiple_of must be a positive integer, got {self.multiple_of!r}")
        for field in ("norm_eps", "rope_base"):
            if not (math.isfinite(getattr(self, field)) and getattr(self, field) > 0):
                raise ValueError(f"LlamaConfig: {field} must be a finite number above 0, got {getattr(self, field)}")


class RotaryEmbedding(nn.Module):
    """x (B, nh, T, hs), the positions start, ..., start + T - 1 -> x turned by its positions' angles.

    Channels i and i + hs/2 of a head form a pair (a point in the plane), turned at position p by
    the angle p * theta_i, theta_i = base ** (-2i / hs): x1' = x1 cos - x2 sin, x2' = x1 sin + x2 cos.
    Turning q by m * theta and k by n * theta leaves q' . k' depending on m - n only, so the scores
    see relative positions. No parameters; the angles are computed for the positions asked for.
    """

    def __init__(self, head_size: int, base: float = 10000.0) -> None:
        super().__init__()
        self.head_size, self.base = head_size, base

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        T, hs = x.shape[-2], x.shape[-1]
        if hs != self.head_size:
            raise ValueError(f"RotaryEmbedding: input of shape {x.shape}, expected head size {self.head_size} last")
        xp = backend.get_array_module(x.data)
        theta = self.base ** (-xp.arange(0, hs, 2) / hs)  # (hs/2,): one turning speed per channel pair
        angle = xp.arange(start, start + T)[:, None] * theta  # (T, hs/2)
        cos = Tensor(xp.cos(angle), dtype=x.dtype, device=x.device)  # (T, hs/2), broadcast over B and nh
        sin = Tensor(xp.sin(angle), dtype=x.dtype, device=x.device)
        x1, x2 = x.split(hs // 2, dim=-1)  # (B, nh, T, hs/2) each: the pairs' first and second coordinates
        return mg.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (B, nh, T, hs)


class SwiGLU(nn.Module):
    """The feed-forward network of LLaMA, on each position alone: (silu(x W1) * (x W3)) W2.

    x W1 passes through silu and gates x W3 channel by channel. Three matrices instead of the GPT's two,
    so the hidden width is 2/3 of 4C (rounded up to a multiple of `multiple_of`) for about the same size.
    """

    def __init__(self, d_model: int, multiple_of: int, dropout: float = 0.0) -> None:
        super().__init__()
        hidden = multiple_of * math.ceil(int(2 * 4 * d_model / 3) / multiple_of)
        self.w1 = nn.Linear(d_model, hidden, bias=False)  # the gate
        self.w3 = nn.Linear(d_model, hidden, bias=False)  # the value it gates
        self.w2 = nn.Linear(hidden, d_model, bias=False)  # back to C channels
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))  # (B, T, C)


class LlamaBlock(nn.Module):
    """models/decoder.py's DecoderBlock with RMSNorm, rotary attention without biases, and SwiGLU."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        C, nh = config.n_embd, config.n_head
        self.norm_1 = nn.RMSNorm(C, eps=config.norm_eps)
        self.attn = MultiHeadSelfAttention(C, nh, config.dropout, bias=False,
                                           rotary=RotaryEmbedding(C // nh, config.rope_base))
        self.norm_2 = nn.RMSNorm(C, eps=config.norm_eps)
        self.mlp = SwiGLU(C, config.multiple_of, config.dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        x = x + self.attn(self.norm_1(x), cache)  # tokens look at each other
        x = x + self.mlp(self.norm_2(x))  # each token thinks on its own
        return x


class Llama(DecoderModel):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token -> vector; no position table
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([LlamaBlock(config) for _ in range(config.n_layer)])
        self.norm_f = nn.RMSNorm(config.n_embd, eps=config.norm_eps)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)  # untied, as in LLaMA
        self.scale_residual_projections("attn.proj.weight", "mlp.w2.weight")

    def forward(self, idx: Any, targets: Any = None, *, caches: list[KVCache] | None = None,
                start: int = 0) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, vocab), and given targets (B, T) the mean cross-entropy
        over the targets that are not IGNORE_INDEX (else None).

        caches and start as GPT.forward's: the rotary step reads the position of idx's first token from
        the caches, whose length is start. Without caches start changes nothing: turning every q and k by
        the same extra angle leaves the scores, which see relative positions only, as they were.
        """
        idx = self.token_ids(idx, caches, start)
        x = self.drop(self.wte(idx))  # (B, T, C): positions enter in attention, as rotations of q and k
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])  # (B, T, C)
        logits = self.lm_head(self.norm_f(x))  # (B, T, vocab)
        loss = None if targets is None else F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)
        return logits, loss

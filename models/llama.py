"""A LLaMA-style decoder: the GPT of models/gpt.py with LLaMA's changes and no biases: RMSNorm for LayerNorm,
rotary position embeddings (RoPE) for the position table, a SwiGLU feed-forward, optionally grouped-query
attention, and an untied head (tied where the config says). Attention, the residual layout, the head and generate
are the GPT's own.
"""

from __future__ import annotations

import functools
import math
from dataclasses import InitVar, dataclass
from typing import Any

import minigrad as mg
from minigrad import nn
from minigrad.array import backend
from minigrad.nn import functional as F
from minigrad.tensor import Tensor
from models.attention import KVCache, MultiHeadSelfAttention
from models.gpt import DecoderConfig, DecoderModel, Trace
from models.renamed import WIDTH, renamed_attributes, renamed_keywords, warn


@dataclass
class LlamaConfig(DecoderConfig):  # vocab_size, block_size, n_layer, n_head, n_embd, dropout; and:
    norm_eps: float = 1e-5  # added to the mean square in RMSNorm
    rope_base: float = 10000.0  # RoPE's angles: position * rope_base ** (-2i / head size), i = 0 .. hs/2 - 1
    multiple_of: int = 16  # the SwiGLU hidden width, 2/3 of 4C, is rounded up to a multiple of this
    n_kv_head: int | None = None  # key/value heads (grouped-query attention); None: one per query head
    intermediate_size: int | None = None  # the SwiGLU hidden width as given (a checkpoint's); None: from multiple_of
    head_size: int | None = None  # hs, channels per head (a Hugging Face config's head_dim); None: n_embd // n_head
    tie_word_embeddings: bool = False  # True: the head is the token embedding (one parameter), as in small LLaMAs
    head_dim: InitVar[int | None] = None  # head_size's name before 0.5, taken with a DeprecationWarning

    def __post_init__(self, head_dim: int | None) -> None:
        super().__post_init__()
        if head_dim is not None:
            warn("LlamaConfig(head_dim=)", "head_size=", depth=4)  # past __init__
            self.head_size = head_dim if self.head_size is None else self.head_size
        for field in ("intermediate_size", "head_size"):
            value = getattr(self, field)
            if value is not None and not (isinstance(value, int) and value > 0):
                raise ValueError(f"LlamaConfig: {field} must be a positive integer or None, got {value!r}")
        given = self.head_size is not None
        self.head_size = self.head_size if given else self.n_embd // self.n_head  # as Hugging Face resolves head_dim
        if self.head_size % 2:
            raise ValueError(f"LlamaConfig: rotary embeddings turn channel pairs, so the head size "
                             f"{'head_size' if given else 'n_embd // n_head'} = {self.head_size} must be even")
        if self.n_kv_head is not None and not (isinstance(self.n_kv_head, int) and self.n_kv_head > 0
                                               and self.n_head % self.n_kv_head == 0):
            raise ValueError(f"LlamaConfig: n_kv_head must be a positive integer that divides n_head={self.n_head}, "
                             f"got {self.n_kv_head!r}")
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
    see relative positions. No parameters; the tables of cos and sin are made once per head size, dtype and device
    (rotary_tables), and the positions asked for are a slice of them.
    """

    def __init__(self, head_size: int, base: float = 10000.0) -> None:
        super().__init__()
        self.head_size, self.base = head_size, base

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        T, hs = x.shape[-2], x.shape[-1]
        if hs != self.head_size:
            raise ValueError(f"RotaryEmbedding: input of shape {x.shape}, expected head size {self.head_size} last")
        positions = 1 << max(start + T - 1, 1).bit_length()  # a power of two: few tables as generation goes on
        cos, sin = (Tensor.wrap(table[start:start + T])  # (T, hs/2), broadcast over B and nh
                    for table in rotary_tables(hs, self.base, positions, x.dtype, x.device))
        x1, x2 = x.split(hs // 2, dim=-1)  # (B, nh, T, hs/2) each: the pairs' first and second coordinates
        return mg.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (B, nh, T, hs)


@functools.lru_cache(maxsize=16)
def rotary_tables(head_size: int, base: float, positions: int, dtype: Any, device: str) -> tuple[Any, Any]:
    """cos and sin of the angles p * theta_i for the positions p < `positions`, (positions, hs/2) arrays of `dtype` on
    `device`, computed in float64; made once and kept (speed: q and k of every layer of every step turn by them)."""
    xp = backend.module_for(device)
    theta = base ** (-xp.arange(0, head_size, 2) / head_size)  # (hs/2,): one turning speed per channel pair
    angle = xp.arange(positions)[:, None] * theta  # (positions, hs/2)
    tables = xp.cos(angle).astype(dtype), xp.sin(angle).astype(dtype)
    for table in tables if device == "cpu" else ():
        table.flags.writeable = False  # shared by every call: nothing may write into it
    return tables


class SwiGLU(nn.Module):
    """The feed-forward network of LLaMA, on each position alone: (silu(x W1) * (x W3)) W2.

    x W1 passes through silu and gates x W3 channel by channel. Three matrices instead of the GPT's two,
    so the hidden width is 2/3 of 4C (rounded up to a multiple of `multiple_of`) for about the same size,
    unless `hidden` gives it (a checkpoint's intermediate_size).
    """

    @renamed_keywords(**WIDTH)
    def __init__(self, n_embd: int, multiple_of: int, dropout: float = 0.0, hidden: int | None = None) -> None:
        super().__init__()
        if hidden is None:
            hidden = multiple_of * math.ceil(int(2 * 4 * n_embd / 3) / multiple_of)
        self.w1 = nn.Linear(n_embd, hidden, bias=False)  # the gate
        self.w3 = nn.Linear(n_embd, hidden, bias=False)  # the value it gates
        self.w2 = nn.Linear(hidden, n_embd, bias=False)  # back to C channels
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))  # (B, T, C)


class LlamaBlock(nn.Module, renamed_attributes(norm_1="ln_1", norm_2="ln_2")):
    """models/gpt.py's DecoderBlock with RMSNorm, rotary attention without biases, and SwiGLU."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        C, nh, hs = config.n_embd, config.n_head, config.head_size
        self.ln_1 = nn.RMSNorm(C, eps=config.norm_eps)  # ln_1, ln_2 and ln_f as the GPT's, though RMSNorms
        self.attn = MultiHeadSelfAttention(C, nh, config.dropout, bias=False, n_kv_head=config.n_kv_head,
                                           rotary=RotaryEmbedding(hs, config.rope_base), head_size=hs)
        self.ln_2 = nn.RMSNorm(C, eps=config.norm_eps)
        self.mlp = SwiGLU(C, config.multiple_of, config.dropout, config.intermediate_size)

    def forward(self, x: Tensor, cache: KVCache | None = None, trace: Trace | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache, trace)  # tokens look at each other
        x = x + self.mlp(self.ln_2(x))  # each token thinks on its own
        return x


class Llama(DecoderModel, renamed_attributes(norm_f="ln_f")):
    config_class, model_type = LlamaConfig, "llama"  # what from_pretrained builds, of which Hugging Face model_type

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token -> vector; no position table
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([LlamaBlock(config) for _ in range(config.n_layer)])
        self.ln_f = nn.RMSNorm(config.n_embd, eps=config.norm_eps)
        # untied, as in LLaMA; tied (the token embedding read backwards) where the config says so
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.init_weights("attn.proj.weight", "mlp.w2.weight")  # GPT-2's, with the residual projections smaller

    def forward(self, idx: Any, targets: Any = None, *, caches: list[KVCache] | None = None, start: int = 0,
                trace: Trace | None = None) -> tuple[Tensor, Tensor | None]:
        """As GPT.forward. The rotary step reads the position of idx's first token from the caches (start); without
        caches start changes nothing, as scores see relative positions only."""
        idx = self.token_ids(idx, caches, start)
        x = self.drop(self.wte(idx))  # (B, T, C): positions enter in attention, as rotations of q and k
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i], trace)  # (B, T, C)
        return self.head(self.ln_f(x), targets)  # (B, T, vocab), and the loss

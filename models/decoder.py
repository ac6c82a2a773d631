"""The decoder block (pre-LayerNorm attention and feed-forward, each inside a residual connection), and
DecoderModel: what every decoder-only model here (models/gpt.py, models/llama.py) shares around its blocks.

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

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from minigrad import backend, nn
from minigrad import functional as F
from minigrad.tensor import Tensor, _as_array, no_grad
from models.attention import KVCache, MultiHeadSelfAttention

IGNORE_INDEX = -1  # targets with this value are not scored (prompt tokens, padding)


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


# ---- what every decoder-only model shares around its blocks ----

@dataclass
class DecoderConfig:
    """The sizes of every decoder here; GPTConfig and LlamaConfig add their own fields."""

    vocab_size: int = 64  # number of distinct tokens
    block_size: int = 64  # longest sequence the model reads
    n_layer: int = 2  # decoder blocks stacked
    n_head: int = 4  # attention heads per block
    n_embd: int = 64  # channels C (d_model); each head gets n_embd // n_head
    dropout: float = 0.0

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: {field} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"{name}: n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"{name}: dropout must be in [0, 1), got {self.dropout}")


class DecoderModel(nn.Module):
    """A decoder-only language model: a subclass sets `config` (a DecoderConfig), `wte` (the token
    embedding) and `blocks`, and defines forward(idx, targets=None, *, caches=None, start=0), which
    starts with `token_ids`. This class adds the protocol's two users, trace_attention and generate."""

    def token_ids(self, idx: Any, caches: list[KVCache] | None, start: int) -> Any:
        """idx as a (B, T) integer array, checked with the caches against the protocol. It stays where it
        came from: the token embedding range-checks NumPy ids on the host, then copies them to the device."""
        name = type(self).__name__
        idx = _token_array(idx, name)
        T = idx.shape[1]
        if start + T > self.config.block_size:
            raise ValueError(f"{name}: sequence of length {start + T} is longer than "
                             f"block_size={self.config.block_size}")
        if caches is not None and (len(caches) != len(self.blocks) or any(len(c) != start for c in caches)):
            raise ValueError(f"{name}: need one cache per block ({len(self.blocks)}), each holding the `start`={start} "
                             f"positions before idx; got {len(caches)} holding {[len(c) for c in caches]}")
        return idx

    def scale_residual_projections(self, *suffixes: str) -> None:
        """GPT-2's init: the projections that write into the residual stream (names ending in `suffixes`)
        start smaller, std 0.02 / sqrt(2 n_layer), so the stream's variance does not grow with depth."""
        for name, p in self.named_parameters():
            if name.endswith(suffixes):
                p.data = nn.normal(p.shape, 0.02 / math.sqrt(2 * self.config.n_layer), p.dtype, p.device).data

    @no_grad()
    def trace_attention(self, idx: Any) -> list[dict[str, Tensor]]:
        """Every layer's attention steps for idx (B, T): q, k, v, scores, weights, out (see the protocol above)."""
        caches = [KVCache() for _ in self.blocks]
        self(idx, caches=caches)
        return [cache.trace for cache in caches]

    @no_grad()
    def generate(self, idx: Any, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 use_cache: bool = True) -> np.ndarray:
        """Extend idx (B, T) by max_new_tokens sampled tokens; temperature 0 picks the likeliest (greedy).

        With the cache, each new token runs the model on one position. Past block_size tokens the
        window slides, every position changes, and the cache cannot help: those steps recompute.
        """
        idx = backend.to_numpy(_token_array(idx, type(self).__name__))
        if temperature < 0 or max_new_tokens < 0:
            raise ValueError(f"generate: need temperature >= 0 and max_new_tokens >= 0, got {temperature}, "
                             f"{max_new_tokens}")
        caches = None
        for _ in range(max_new_tokens):
            if not use_cache or idx.shape[1] > self.config.block_size:
                logits, _ = self(idx[:, -self.config.block_size:])
            elif caches is None:  # the prompt, once, filling the caches
                caches = [KVCache() for _ in self.blocks]
                logits, _ = self(idx, caches=caches)
            else:  # only the newest token; earlier keys and values come from the caches
                logits, _ = self(idx[:, -1:], caches=caches, start=idx.shape[1] - 1)
            idx = np.concatenate([idx, _sample(logits[:, -1, :].numpy(), temperature, top_k)], axis=1)
        return idx


def _token_array(idx: Any, name: str) -> Any:
    """idx as a 2-D integer array, on the device it came from (NumPy for a list), or a clear error."""
    data = _as_array(idx, None, None, name)
    if data.ndim != 2 or data.dtype.kind not in "iu" or data.shape[1] == 0:
        raise ValueError(f"{name}: expected token ids of shape (B, T) with T >= 1 and an integer dtype, "
                         f"got shape {data.shape} and dtype {data.dtype}")
    return data


def _sample(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    """One token per row of logits (B, vocab), as a (B, 1) array."""
    if temperature == 0:
        return logits.argmax(axis=-1, keepdims=True)
    logits = logits.astype(np.float64) / temperature
    if top_k is not None:
        kth = np.sort(logits, axis=-1)[:, -min(top_k, logits.shape[-1]), None]
        logits = np.where(logits < kth, -np.inf, logits)
    probs = F.stable_softmax(logits, axis=-1)
    rng = backend.generator("cpu")
    return np.array([[rng.choice(len(p), p=p)] for p in probs])

"""GPT: token and position embeddings, a stack of decoder blocks, a final LayerNorm, and a language
model head tied to the token embedding. Names follow nanoGPT's model.py where they can.

forward(idx, targets) gives logits and the next-token loss; generate() samples with a key/value cache,
and trace_attention() returns every layer's attention steps (the cache / trace protocol: models/decoder.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from minigrad import backend, nn
from minigrad import functional as F
from minigrad.tensor import Tensor, no_grad
from models.attention import KVCache
from models.decoder import DecoderBlock

IGNORE_INDEX = -1  # targets with this value are not scored (prompt tokens, padding)


@dataclass
class GPTConfig:
    vocab_size: int = 64  # number of distinct tokens
    block_size: int = 64  # longest sequence the position embedding covers
    n_layer: int = 2  # decoder blocks stacked
    n_head: int = 4  # attention heads per block
    n_embd: int = 64  # channels C (d_model); each head gets n_embd // n_head
    dropout: float = 0.0
    bias: bool = True  # biases in Linear and LayerNorm layers

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"GPTConfig: {name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout}")


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token -> vector
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # position -> vector
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            [DecoderBlock(config.n_embd, config.n_head, config.dropout, config.bias) for _ in range(config.n_layer)]
        )
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        # GPT-2: the projections that write into the residual stream start smaller, 0.02 / sqrt(2 n_layer),
        # so the stream's variance does not grow with depth
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                p.data = nn.normal(p.shape, 0.02 / math.sqrt(2 * config.n_layer), p.dtype, p.device).data

    def forward(self, idx: Any, targets: Any = None, *, caches: list[KVCache] | None = None,
                start: int = 0) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, vocab), and given targets (B, T) the mean cross-entropy
        over the targets that are not IGNORE_INDEX (else None).

        caches: one KVCache per block; the tokens of idx then sit at positions start, ..., start + T - 1
        (the protocol, for generate and trace_attention, is in models/decoder.py).
        """
        idx = _token_array(idx, self.wte.weight.device)
        B, T = idx.shape
        if start + T > self.config.block_size:
            raise ValueError(f"GPT: sequence of length {start + T} is longer than block_size={self.config.block_size}")
        if caches is not None and (len(caches) != len(self.blocks) or any(len(c) != start for c in caches)):
            raise ValueError(f"GPT: need one cache per block ({len(self.blocks)}), each holding the `start`={start} "
                             f"positions before idx; got {len(caches)} holding {[len(c) for c in caches]}")
        xp = backend.get_array_module(idx)
        x = self.wte(idx) + self.wpe(xp.arange(start, start + T))  # (B, T, C)
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])  # (B, T, C)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # (B, T, vocab): the head shares the token embedding
        loss = None if targets is None else F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)
        return logits, loss

    @no_grad()
    def trace_attention(self, idx: Any) -> list[dict[str, Tensor]]:
        """Every layer's attention steps for idx (B, T): q, k, v, scores, weights, out (see models/decoder.py)."""
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
        idx = backend.to_numpy(_token_array(idx, "cpu"))
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


def _token_array(idx: Any, device: str) -> Any:
    """idx as a 2-D integer array on `device`, or a clear error."""
    data = idx.data if isinstance(idx, Tensor) else idx
    data = backend.to_device(data if hasattr(data, "dtype") else np.asarray(data), device)
    if data.ndim != 2 or data.dtype.kind not in "iu" or data.shape[1] == 0:
        raise ValueError(f"GPT: expected token ids of shape (B, T) with T >= 1 and an integer dtype, "
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

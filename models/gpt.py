"""GPT: token and position embeddings, a stack of decoder blocks, a final LayerNorm, and a language
model head tied to the token embedding. Names follow nanoGPT's model.py where they can.

forward(idx, targets) gives logits and the next-token loss; generate() samples with a key/value cache,
and trace_attention() returns every layer's attention steps (both from DecoderModel, with the cache /
trace protocol: models/decoder.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from minigrad import functional as F
from minigrad import nn
from minigrad.tensor import Tensor
from models.attention import KVCache
from models.decoder import IGNORE_INDEX, DecoderBlock, DecoderConfig, DecoderModel


@dataclass
class GPTConfig(DecoderConfig):  # vocab_size, block_size, n_layer, n_head, n_embd, dropout; and:
    bias: bool = True  # biases in Linear and LayerNorm layers


class GPT(DecoderModel):
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
        self.scale_residual_projections("proj.weight")  # attention's and the MLP's output projections

    def forward(self, idx: Any, targets: Any = None, *, caches: list[KVCache] | None = None,
                start: int = 0) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, vocab), and given targets (B, T) the mean cross-entropy
        over the targets that are not IGNORE_INDEX (else None).

        caches: one KVCache per block; the tokens of idx then sit at positions start, ..., start + T - 1
        (the protocol, for generate and trace_attention, is in models/decoder.py).
        """
        idx = self.token_ids(idx, caches, start)
        T = idx.shape[1]
        # ids and positions from the host are range-checked there by F.embedding, then copied to the device
        x = self.wte(idx) + self.wpe(np.arange(start, start + T))  # (B, T, C)
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])  # (B, T, C)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # (B, T, vocab): the head shares the token embedding
        loss = None if targets is None else F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)
        return logits, loss

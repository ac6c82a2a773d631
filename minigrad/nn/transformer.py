"""Multi-head attention and the Transformer (nn.MultiheadAttention, nn.TransformerEncoderLayer, ...DecoderLayer,
nn.TransformerEncoder, ...Decoder, nn.Transformer), as torch.nn's: the same arguments, submodule names and
state_dict keys (self_attn.in_proj_weight, linear1, norm1, ...), and PyTorch's mask conventions: a boolean
attn_mask or key_padding_mask is True where attention is NOT allowed, a float mask is added to the scores.
Attention reads as the walkthrough: project to q, k, v; split heads; scores / sqrt(hs); mask; softmax; weighted sum
of v; merge heads; output projection. Shapes: B batch, L queries, S keys, E embedding, nh heads, hs head size.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from minigrad.array.dtypes import DType
from minigrad.nn import functional as F
from minigrad.nn.init import constant_, xavier_uniform_
from minigrad.nn.layers import Dropout, LayerNorm, Linear, Module, ModuleList, empty
from minigrad.ops.creation import full
from minigrad.ops.shapes import triu
from minigrad.tensor import Tensor

Mask = Tensor | None


def _as_scores_mask(op: str, mask: Any, like: Tensor) -> Tensor | None:
    """A mask as an additive one broadcastable to the scores: True (may NOT attend) -> -inf, False -> 0; a float mask
    as it is."""
    if mask is None:
        return None
    mask = mask if isinstance(mask, Tensor) else Tensor.leaf(mask, device=like.device)
    if mask.dtype.kind == "b":
        return full(mask.shape, 0.0, dtype=like.dtype, device=like.device).masked_fill(mask.to(like.device), -math.inf)
    if mask.dtype.kind != "f":
        raise TypeError(f"{op}: a mask must be boolean (True: not allowed) or float (added to the scores), got "
                        f"dtype {mask.dtype}")
    return mask.to(like.device).to(like.dtype)


class MultiheadAttention(Module):
    """in_proj_weight (3E, E) holds W_q, W_k, W_v one above the other (q_proj_weight, k_proj_weight, v_proj_weight
    instead where kdim or vdim differs from E), in_proj_bias (3E,), out_proj a Linear(E, E); init as PyTorch's
    (xavier_uniform_ projections, zero biases). forward(query, key, value) takes (L, B, E) ((B, L, E) if
    batch_first; (L, E) unbatched) and gives (output, weights averaged over heads (B, L, S), or None)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, *, dtype: DType = np.float32,
                 device: str = "cpu") -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be a positive multiple of num_heads "
                             f"({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.head_dim = embed_dim // num_heads
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = xavier_uniform_(empty((3 * embed_dim, embed_dim), dtype, device))
        else:
            self.q_proj_weight = xavier_uniform_(empty((embed_dim, embed_dim), dtype, device))
            self.k_proj_weight = xavier_uniform_(empty((embed_dim, self.kdim), dtype, device))
            self.v_proj_weight = xavier_uniform_(empty((embed_dim, self.vdim), dtype, device))
        self.in_proj_bias = constant_(empty((3 * embed_dim,), dtype, device), 0.0) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype, device=device)
        if bias:
            constant_(self.out_proj.bias, 0.0)

    def projections(self) -> tuple[list[Tensor], list[Tensor | None]]:
        """[W_q, W_k, W_v] and [b_q, b_k, b_v]: views of in_proj_weight's (and in_proj_bias's) thirds."""
        E = self.embed_dim
        weights = [self.in_proj_weight[i * E:(i + 1) * E] for i in range(3)] if self._qkv_same_embed_dim else \
            [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        biases = [None] * 3 if self.in_proj_bias is None else [self.in_proj_bias[i * E:(i + 1) * E] for i in range(3)]
        return weights, biases

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Mask = None,
                need_weights: bool = True, attn_mask: Mask = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: is_causal is a hint that attn_mask is causal; give the attn_mask "
                               "too (nn.Transformer.generate_square_subsequent_mask(L))")
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        B, L, E = query.shape
        S, nh, hs = key.shape[1], self.num_heads, self.head_dim
        if E != self.embed_dim or key.shape[0] != B or value.shape[:2] != key.shape[:2]:
            raise ValueError(f"MultiheadAttention: query {query.shape}, key {key.shape} and value {value.shape} (as "
                             f"(B, L, E)) do not fit embed_dim={self.embed_dim} or one another")
        # project to q, k, v and split heads: (B, L, E) -> (B, nh, L, hs)
        (w_q, w_k, w_v), (b_q, b_k, b_v) = self.projections()
        q = F.linear(query, w_q, b_q).reshape(B, L, nh, hs).transpose(1, 2)
        k = F.linear(key, w_k, b_k).reshape(B, S, nh, hs).transpose(1, 2)  # (B, nh, S, hs)
        v = F.linear(value, w_v, b_v).reshape(B, S, nh, hs).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, L, S)
        if attn_mask is not None:
            if attn_mask.shape not in ((L, S), (B * nh, L, S)):
                raise ValueError(f"MultiheadAttention: attn_mask of shape {attn_mask.shape} must be {(L, S)} or "
                                 f"{(B * nh, L, S)}")
            mask = _as_scores_mask("MultiheadAttention", attn_mask, scores)
            scores = scores + mask.reshape(-1, nh, L, S) if mask.ndim == 3 else scores + mask
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, S):
                raise ValueError(f"MultiheadAttention: key_padding_mask of shape {key_padding_mask.shape} must be "
                                 f"{(B, S)}")
            scores = scores + _as_scores_mask("MultiheadAttention", key_padding_mask, scores).reshape(B, 1, 1, S)
        weights = F.dropout(scores.softmax(-1), self.dropout, self.training)  # (B, nh, L, S)
        y = (weights @ v).transpose(1, 2).reshape(B, L, E)  # merge heads: (B, nh, L, hs) -> (B, L, E)
        y = self.out_proj(y)
        if need_weights:
            weights = weights.mean(1) if average_attn_weights else weights
        if unbatched:
            return y.squeeze(0), (weights.squeeze(0) if need_weights else None)
        return (y if self.batch_first else y.transpose(0, 1)), (weights if need_weights else None)


def _activation(layer: str, activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation not in ("relu", "gelu"):
        raise ValueError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return F.relu if activation == "relu" else F.gelu


class TransformerEncoderLayer(Module):
    """x = norm1(x + sa(x)); x = norm2(x + ff(x))   (norm_first: x = x + sa(norm1(x)); x = x + ff(norm2(x))),
    sa the self-attention, ff linear2(dropout(activation(linear1(x)))), each block's output through a dropout."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, *,
                 dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(type(self).__name__, activation)

    def forward(self, src: Tensor, src_mask: Mask = None, src_key_padding_mask: Mask = None,
                is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, attn_mask: Mask, key_padding_mask: Mask, is_causal: bool) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, key_padding_mask, False, attn_mask, is_causal=is_causal)[0])

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """x = norm1(x + sa(x)); x = norm2(x + mha(x, memory)); x = norm3(x + ff(x))   (norm_first: each block on its
    norm of x, added to x), mha the attention of x's queries to the encoder's memory."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, *,
                 dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.activation = _activation(type(self).__name__, activation)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Mask = None, memory_mask: Mask = None,
                tgt_key_padding_mask: Mask = None, memory_key_padding_mask: Mask = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, attn_mask: Mask, key_padding_mask: Mask, is_causal: bool) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, key_padding_mask, False, attn_mask, is_causal=is_causal)[0])

    def _mha_block(self, x: Tensor, memory: Tensor, attn_mask: Mask, key_padding_mask: Mask,
                   is_causal: bool) -> Tensor:
        return self.dropout2(self.multihead_attn(x, memory, memory, key_padding_mask, False, attn_mask,
                                                 is_causal=is_causal)[0])

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (layers.0, layers.1, ...), then `norm` if given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, mask: Mask = None, src_key_padding_mask: Mask = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer (layers.0, ...), each reading the encoder's memory, then `norm` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Mask = None, memory_mask: Mask = None,
                tgt_key_padding_mask: Mask = None, memory_key_padding_mask: Mask = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                      bool(tgt_is_causal), memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder of "Attention Is All You Need": encoder (layers + final LayerNorm) over src, decoder
    (layers + final LayerNorm) over tgt reading the encoder's output; every weight matrix xavier_uniform_, as
    PyTorch's."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, *, dtype: DType = np.float32,
                 device: str = "cpu") -> None:
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(*layer_args, **kw), num_encoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias, **kw))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(*layer_args, **kw), num_decoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias, **kw))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Mask = None, tgt_mask: Mask = None,
                memory_mask: Mask = None, src_key_padding_mask: Mask = None, tgt_key_padding_mask: Mask = None,
                memory_key_padding_mask: Mask = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        memory = self.encoder(src, src_mask, src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                            tgt_is_causal, memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: str = "cpu", dtype: DType = np.float32) -> Tensor:
        """(sz, sz): 0 on and below the diagonal, -inf above (position i may attend to positions <= i), a float mask
        to add to the scores, as PyTorch's."""
        return triu(full((sz, sz), -math.inf, dtype=dtype, device=device), diagonal=1)

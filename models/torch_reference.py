"""The GPT and LLaMA-style model in PyTorch: the oracles the tests compare with and the GPT the benchmark times.
from_minigrad(model) copies a minigrad model's parameters in, under the same names; TorchLlama is written with PyTorch's
own pieces (nn.RMSNorm, complex rotations, SDPA with enable_gqa). Needs torch; models/__init__.py does not import it.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

IGNORE_INDEX = -100  # as models.gpt: targets with this value are not scored


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, C: int, nh: int, dropout: float, bias: bool) -> None:
        super().__init__()
        self.n_head = nh
        self.q_proj = nn.Linear(C, C, bias)  # weight (C, C), laid out (out, in) as minigrad's Linear
        self.k_proj = nn.Linear(C, C, bias)
        self.v_proj = nn.Linear(C, C, bias)
        self.proj = nn.Linear(C, C, bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.sdpa = False  # True: PyTorch's fused F.scaled_dot_product_attention (as nanoGPT), for the benchmark

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # each (B, T, C)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        if self.sdpa:  # the four steps below in PyTorch's fused kernel
            p = self.attn_dropout.p if self.training else 0.0
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
            allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))  # True: may attend
            scores = scores.masked_fill(~allowed, float("-inf"))  # masked_fill's True = fill
            weights = F.softmax(scores, dim=-1)  # (B, nh, T, T)
            out = self.attn_dropout(weights) @ v  # (B, nh, T, hs)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.proj(out))


class MLP(nn.Module):
    def __init__(self, C: int, dropout: float, bias: bool, gelu: str) -> None:
        super().__init__()
        self.fc = nn.Linear(C, 4 * C, bias)
        self.proj = nn.Linear(4 * C, C, bias)  # the down projection
        self.dropout = nn.Dropout(dropout)
        self.approximate = gelu  # F.gelu's: "tanh", GPT-2's GELU, or "none", the exact one (nanoGPT's nn.GELU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x), approximate=self.approximate)))


class DecoderBlock(nn.Module):
    def __init__(self, C: int, nh: int, dropout: float, bias: bool, gelu: str) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5, bias=bias)
        self.attn = MultiHeadSelfAttention(C, nh, dropout, bias)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5, bias=bias)
        self.mlp = MLP(C, dropout, bias, gelu)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(nn.Module):
    """models.gpt.GPT in PyTorch; `config` is a models.gpt.GPTConfig (or anything with its fields)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        C = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, C)
        self.wpe = nn.Embedding(config.block_size, C)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            [DecoderBlock(C, config.n_head, config.dropout, config.bias, config.gelu) for _ in range(config.n_layer)]
        )
        self.ln_f = nn.LayerNorm(C, eps=1e-5, bias=config.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx (B, T) -> logits (B, T, V) and, given targets (B, T), the mean cross-entropy."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"TorchGPT: sequence of length {T} is longer than block_size={self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # (B, T, V): the head is tied to wte
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T), ignore_index=IGNORE_INDEX)
        return logits, loss


class LlamaAttention(nn.Module):
    """Causal self-attention with rotary position embeddings: channel pair (i, i + hs/2) of each head,
    read as the complex number x_i + 1j x_{i+hs/2}, is multiplied by exp(1j * position * theta_i)."""

    def __init__(self, C: int, nh: int, rope_base: float, n_kv_head: int) -> None:
        super().__init__()
        self.n_head, self.n_kv_head, self.rope_base = nh, n_kv_head, rope_base
        self.q_proj = nn.Linear(C, C, bias=False)
        self.k_proj = nn.Linear(C, C // nh * n_kv_head, bias=False)
        self.v_proj = nn.Linear(C, C // nh * n_kv_head, bias=False)
        self.proj = nn.Linear(C, C, bias=False)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        T, hs = x.shape[-2:]
        theta = self.rope_base ** (-torch.arange(0, hs, 2, dtype=torch.float64) / hs)  # (hs/2,)
        angle = torch.outer(torch.arange(T, dtype=torch.float64), theta)  # (T, hs/2)
        turn = torch.polar(torch.ones_like(angle), angle)  # exp(1j * angle)
        z = torch.complex(x[..., :hs // 2], x[..., hs // 2:]) * turn.to(x.device)  # (B, nh, T, hs/2)
        return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, -1).transpose(1, 2)  # (B, nh, T, hs)
        k, v = (p(x).view(B, T, self.n_kv_head, -1).transpose(1, 2)
                for p in (self.k_proj, self.v_proj))  # (B, n_kv_head, T, hs)
        out = F.scaled_dot_product_attention(self.rotate(q), self.rotate(k), v, is_causal=True,
                                             enable_gqa=self.n_kv_head != self.n_head)  # (B, nh, T, hs)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))


class LlamaBlock(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        C, m = config.n_embd, config.multiple_of
        hidden = m * -(-int(8 * C / 3) // m)  # 2/3 of 4C, rounded up to a multiple of m
        self.ln_1 = nn.RMSNorm(C, eps=config.norm_eps)
        self.attn = LlamaAttention(C, config.n_head, config.rope_base, config.n_kv_head or config.n_head)
        self.ln_2 = nn.RMSNorm(C, eps=config.norm_eps)
        self.mlp = nn.ModuleDict({"w1": nn.Linear(C, hidden, bias=False), "w2": nn.Linear(hidden, C, bias=False),
                                  "w3": nn.Linear(C, hidden, bias=False)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        h = self.ln_2(x)
        return x + self.mlp["w2"](F.silu(self.mlp["w1"](h)) * self.mlp["w3"](h))  # SwiGLU


class TorchLlama(nn.Module):
    """models.llama.Llama in PyTorch (without dropout); `config` is a models.llama.LlamaConfig."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList([LlamaBlock(config) for _ in range(config.n_layer)])
        self.ln_f = nn.RMSNorm(config.n_embd, eps=config.norm_eps)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx (B, T) -> logits (B, T, V) and, given targets (B, T), the mean cross-entropy."""
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)


def from_minigrad(model: Any, dtype: torch.dtype = torch.float64, device: str = "cpu", sdpa: bool = False
                  ) -> nn.Module:
    """A TorchGPT or TorchLlama with `model`'s config, parameters and training mode, in `dtype` on `device`; with
    `sdpa` the GPT's attention runs F.scaled_dot_product_attention, not the written-out steps (TorchLlama always)."""
    reference = TorchLlama if type(model).__name__ == "Llama" else TorchGPT
    ref = reference(model.config).to(dtype=dtype, device=device)  # convert first: loading copies into this dtype
    state = {name: torch.from_numpy(p.numpy()) for name, p in model.named_parameters()}
    ref.load_state_dict(state, strict=True)  # strict: every name must match both ways
    for module in ref.modules():
        if isinstance(module, MultiHeadSelfAttention):
            module.sdpa = sdpa
    return ref.train(model.training)

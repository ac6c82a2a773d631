"""Multi-head causal self-attention, in the order of docs/self-attention.md: project x to Q, K and V, split the
heads, step 1 scores Q K^T / sqrt(hs), step 2 causal mask, step 3 softmax, step 4 weighted sum of V, merge the
heads, output projection. Shapes: B batch, T time, C channels (n_embd), nh heads (n_head), n_kv_head key/value
heads, hs head size (head_size; the literature's d_k).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F
from minigrad.tensor import Tensor
from models.renamed import HEADS, KV_HEADS, WIDTH, renamed_attributes, renamed_keywords


class KVCache:
    """One attention layer's keys and values of the positions already seen, so that generating a token costs
    one position (for inference: it refuses to grow under grad mode)."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add this step's keys and values (B, n_kv_head, T, hs); return all of them (B, n_kv_head, T_past + T, hs)."""
        if mg.is_grad_enabled():
            raise RuntimeError("KVCache is for inference (generate): use it under mg.no_grad()")
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = mg.cat([self.k, k], dim=2)
            self.v = mg.cat([self.v, v], dim=2)
        return self.k, self.v


class MultiHeadSelfAttention(nn.Module, renamed_attributes(n_heads="n_head", n_kv_heads="n_kv_head")):
    """n_kv_head: key/value heads, each shared by n_head // n_kv_head query heads (grouped-query attention, as in
    LLaMA 2 and 3); None: one per query head. rotary: None, or a function (q or k (B, heads, T, hs), position of its
    first token) -> the same shape, applied after the head split (models/llama.py's RoPE). head_size: hs; None:
    n_embd // n_head (a checkpoint's may differ)."""

    @renamed_keywords(**WIDTH, **HEADS, **KV_HEADS)
    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0, bias: bool = True,
                 rotary: Callable[[Tensor, int], Tensor] | None = None, n_kv_head: int | None = None,
                 head_size: int | None = None) -> None:
        super().__init__()
        n_kv_head = n_head if n_kv_head is None else n_kv_head
        if head_size is None and n_embd % n_head:
            raise ValueError(f"MultiHeadSelfAttention: n_embd={n_embd} is not divisible by n_head={n_head}")
        if n_kv_head < 1 or n_head % n_kv_head:
            raise ValueError(f"MultiHeadSelfAttention: n_head={n_head} is not divisible by n_kv_head={n_kv_head}")
        self.n_head, self.n_kv_head = n_head, n_kv_head
        self.head_size = hs = n_embd // n_head if head_size is None else head_size
        self.q_proj = nn.Linear(n_embd, n_head * hs, bias)  # W_Q of every head, side by side
        self.k_proj = nn.Linear(n_embd, n_kv_head * hs, bias)  # W_K
        self.v_proj = nn.Linear(n_embd, n_kv_head * hs, bias)  # W_V
        self.proj = nn.Linear(n_head * hs, n_embd, bias)  # the output projection W_O: the heads mixed into C channels
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.rotary = rotary

    def forward(self, x: Tensor, cache: KVCache | None = None, trace: list[dict[str, Tensor]] | None = None) -> Tensor:
        """x (B, T, C) -> (B, T, C). With a cache, x continues the positions cached before; a trace list gets this
        layer's steps appended, as graph tensors (q, k, v, scores before the mask, weights, out; see GPT.forward)."""
        B, T, C = x.shape
        nh, n_kv_head, hs = self.n_head, self.n_kv_head, self.head_size
        one_node = mg.is_fused_enabled() and cache is None and trace is None  # speed: steps 1-4 as one node, SDPA
        heads = self.qkv_heads if one_node and mg.is_compiled_enabled() else self.heads  # speed: Q, K, V one product
        q, k, v = heads(x)  # (B, nh, T, hs), (B, n_kv_head, T, hs) twice
        if self.rotary is not None:  # LLaMA: q and k turned by their positions' angles
            start = 0 if cache is None else len(cache)
            q, k = self.rotary(q, start), self.rotary(k, start)
        if cache is not None:  # the positions cached before come first
            k, v = cache.append(k, v)  # (B, n_kv_head, T_k, hs), T_k = positions cached + T
        if n_kv_head != nh:  # grouped-query attention: each key/value head serves nh // n_kv_head query heads
            k, v = (t.reshape(B, n_kv_head, 1, t.shape[2], hs).expand(B, n_kv_head, nh // n_kv_head, t.shape[2], hs)
                    .reshape(B, nh, t.shape[2], hs) for t in (k, v))  # (B, nh, T_k, hs)
        attend = self.one_node if one_node else self.four_steps
        out = attend(q, k, v, trace)  # (B, nh, T, hs)

        # merge the heads back side by side, then the output projection
        out = out.transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, nh*hs), which is C unless head_size says otherwise
        if trace is not None:
            trace[-1]["out"] = out
        return self.resid_dropout(self.proj(out))  # (B, T, C)

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Q, K, V: plain projections of x (B, T, C), each one matrix for all heads at once, split into the heads."""
        B, T, _ = x.shape
        nh, n_kv_head, hs = self.n_head, self.n_kv_head, self.head_size
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, nh*hs), (B, T, n_kv_head*hs) twice

        # multi-head split: head h owns channels [h*hs, (h+1)*hs) of each
        q = q.reshape(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.reshape(B, T, n_kv_head, hs).transpose(1, 2)  # (B, n_kv_head, T, hs)
        v = v.reshape(B, T, n_kv_head, hs).transpose(1, 2)  # (B, n_kv_head, T, hs)
        return q, k, v

    def four_steps(self, q: Tensor, k: Tensor, v: Tensor, trace: list[dict[str, Tensor]] | None = None) -> Tensor:
        """The walkthrough's four steps: q (B, nh, T, hs) against k and v (B, nh, T_k, hs) -> (B, nh, T, hs)."""
        T, T_k, hs = q.shape[2], k.shape[2], q.shape[3]

        # step 1, scores: each query against every key, divided by sqrt(hs) to keep softmax well scaled
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T_k)

        # step 2, causal mask: a position may not look at later positions (True: may attend; the others become -inf)
        masked = mg.where(F.causal_mask(T, T_k, device=q.device), scores, -math.inf)  # (B, nh, T, T_k)

        # step 3, softmax over each row: weights in [0, 1] that sum to 1
        weights = F.softmax(masked, dim=-1)  # (B, nh, T, T_k)

        # step 4, weighted sum of the values: b_i = sum_j weights_ij v_j
        out = self.attn_dropout(weights) @ v  # (B, nh, T, hs)
        if trace is not None:
            trace.append({"q": q, "k": k, "v": v, "scores": scores, "weights": weights})
        return out

    def one_node(self, q: Tensor, k: Tensor, v: Tensor, trace: None = None) -> Tensor:
        """The four steps as one graph node, F.scaled_dot_product_attention, with its closed-form backward."""
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout.p if self.training else 0.0,
                                              is_causal=True)

    def qkv_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k and v of forward's two steps (projections, head split) from one matrix product: one BLAS call on a
        matrix three times as wide runs faster than three (docs/performance.md). The three weight matrices stay three
        parameters, joined for this product (their gradients are rows of its gradient); its output is cut along the
        heads, as views, so that backward gathers the heads' gradients with one copy. Under mg.compiled() only (with
        the one attention node), whose products read such views where they lie: NumPy's stacked products on them made
        a fused step slower, not faster. The same q, k, v as heads()."""
        B, T, _ = x.shape
        projections = (self.q_proj, self.k_proj, self.v_proj)
        weight = mg.cat([p.weight for p in projections])  # (nh*hs + 2 n_kv_head*hs, C)
        bias = None if self.q_proj.bias is None else mg.cat([p.bias for p in projections])
        heads = F.linear(x, weight, bias).reshape(B, T, -1, self.head_size)  # (B, T, nh + 2 n_kv_head, hs)
        q, k, v = heads.split([self.n_head, self.n_kv_head, self.n_kv_head], dim=2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, nh, T, hs), (B, n_kv_head, T, hs) twice

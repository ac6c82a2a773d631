"""GPT: token and position embeddings, a stack of decoder blocks (each attention and a feed-forward MLP,
pre-LayerNorm, inside residual connections), a final LayerNorm and a head tied to the token embedding.
DecoderModel holds what the LLaMA-style model (models/llama.py) shares: generate. Some parts keep the names of
nanoGPT's model.py (wte, wpe, ln_1, ln_2, ln_f, lm_head), others do not (blocks for transformer.h, q_proj, k_proj
and v_proj for c_attn, fc and proj for c_fc and c_proj): models/huggingface.py maps GPT-2's names onto these.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minigrad import nn
from minigrad.array import backend
from minigrad.array.arrays import as_array, stable_softmax
from minigrad.nn import functional as F
from minigrad.tensor import Tensor, no_grad
from models import huggingface
from models.attention import KVCache, MultiHeadSelfAttention
from models.renamed import WIDTH, renamed_keywords, sizes_as_config

IGNORE_INDEX = -100  # targets with this value are not scored (prompt tokens, padding), as in PyTorch
Trace = list[dict[str, Tensor]]  # one dict per layer: its attention's q, k, v, scores, weights, out


@dataclass
class DecoderConfig:
    """The sizes of every decoder here; GPTConfig and LlamaConfig add their own fields."""

    vocab_size: int = 64  # number of distinct tokens
    block_size: int = 64  # longest sequence the model reads
    n_layer: int = 2  # decoder blocks stacked
    n_head: int = 4  # attention heads per block
    n_embd: int = 64  # channels C; each head gets n_embd // n_head
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


@dataclass
class GPTConfig(DecoderConfig):  # vocab_size, block_size, n_layer, n_head, n_embd, dropout; and:
    bias: bool = True  # biases in Linear and LayerNorm layers
    layer_norm_eps: float = 1e-5  # added to the variance in LayerNorm
    n_inner: int | None = None  # the MLP's hidden width; None: 4 * n_embd
    gelu: str = "tanh"  # the MLP's GELU: "tanh", GPT-2's approximation ("gelu_new"), or "none", the exact erf form
    tie_word_embeddings: bool = True  # the head is the token embedding (one parameter); False: a separate lm_head

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_inner is not None and not (isinstance(self.n_inner, int) and self.n_inner > 0):
            raise ValueError(f"GPTConfig: n_inner must be a positive integer or None, got {self.n_inner!r}")
        if self.gelu not in ("tanh", "none"):
            raise ValueError(f"GPTConfig: gelu must be 'tanh' or 'none', got {self.gelu!r}")
        if not (math.isfinite(self.layer_norm_eps) and self.layer_norm_eps > 0):
            raise ValueError(f"GPTConfig: layer_norm_eps must be a finite number above 0, got {self.layer_norm_eps}")


class MLP(nn.Module):
    """The feed-forward network applied to each position on its own: C -> 4C (or `hidden`), GELU, back to C.
    gelu: F.gelu's `approximate`, "tanh" (GPT-2's) or "none"."""

    @renamed_keywords(**WIDTH)
    def __init__(self, n_embd: int, dropout: float = 0.0, bias: bool = True, hidden: int | None = None,
                 gelu: str = "tanh") -> None:
        super().__init__()
        hidden = 4 * n_embd if hidden is None else hidden
        self.fc = nn.Linear(n_embd, hidden, bias)
        self.proj = nn.Linear(hidden, n_embd, bias)  # the down projection, back to C channels
        self.dropout = nn.Dropout(dropout)
        self.gelu = gelu

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x), approximate=self.gelu)))


class DecoderBlock(nn.Module):
    """(B, T, C) -> (B, T, C), the shape it was given, which is why blocks stack; its sizes from a GPTConfig, as
    LlamaBlock's from a LlamaConfig."""

    @sizes_as_config(GPTConfig)
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        C, eps, bias = config.n_embd, config.layer_norm_eps, config.bias
        self.ln_1 = nn.LayerNorm(C, eps, bias=bias)
        self.attn = MultiHeadSelfAttention(C, config.n_head, config.dropout, bias)
        self.ln_2 = nn.LayerNorm(C, eps, bias=bias)
        self.mlp = MLP(C, config.dropout, bias, config.n_inner, config.gelu)

    def forward(self, x: Tensor, cache: KVCache | None = None, trace: Trace | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache, trace)  # tokens look at each other
        x = x + self.mlp(self.ln_2(x))  # each token thinks on its own
        return x


class DecoderModel(nn.Module):
    """A decoder-only language model: a subclass sets `config`, `wte`, `blocks` and `lm_head` (None: tied to wte),
    and defines forward(idx, targets=None, *, caches=None, start=0, trace=None), which starts with `token_ids`
    and ends with `head`."""

    @classmethod
    def from_pretrained(cls, path: str, dtype: Any = "float32", device: str = "cpu", dropout: float = 0.0
                        ) -> DecoderModel:
        """GPT.from_pretrained: a GPT with the parameters of a local Hugging Face GPT-2 folder (gpt2, distilgpt2, ...);
        Llama.from_pretrained: a Llama of a LlamaForCausalLM folder. In dtype (float32 or float64) on device, `dropout`
        to fine-tune with; models/huggingface.py maps the names and refuses, in one line, a folder it cannot load."""
        return huggingface.load(cls, path, dtype, device, dropout)

    def head(self, x: Tensor, targets: Any) -> tuple[Tensor, Tensor | None]:
        """x (B, T, C) after the final norm -> logits (B, T, vocab) and, given targets, the mean cross-entropy over
        those that are not IGNORE_INDEX. A tied head reads the token embedding backwards: logits = x wte^T."""
        logits = F.linear(x, self.wte.weight) if self.lm_head is None else self.lm_head(x)  # (B, T, vocab)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)),  # (B*T, vocab)
                                                            as_array(targets).reshape(-1), ignore_index=IGNORE_INDEX)
        return logits, loss

    def token_ids(self, idx: Any, caches: list[KVCache] | None, start: int) -> Any:
        """idx as a (B, T) integer array, checked with the caches. It stays where it came from: the token
        embedding range-checks NumPy ids on the host, then copies them to the device."""
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

    def init_weights(self, *residual_projections: str) -> None:
        """GPT-2's init, as nanoGPT's _init_weights (not PyTorch's layer defaults): every Linear and Embedding weight
        ~ N(0, 0.02), biases 0; then the projections that write into the residual stream (names ending in
        `residual_projections`) start smaller, std 0.02 / sqrt(2 n_layer), so the stream's variance does not grow
        with depth. Norm layers keep their ones and zeros."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith(residual_projections):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * self.config.n_layer))

    @no_grad()
    def generate(self, idx: Any, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 use_cache: bool = True, stop_token: int | None = None,
                 on_token: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """Extend idx (B, T) by max_new_tokens sampled tokens; temperature 0 picks the likeliest (greedy). With the
        cache each new token runs one position; past block_size tokens the window slides and every step recomputes.
        Stops early once every row's newest token is stop_token; on_token(idx so far) follows each step (streaming)."""
        idx = backend.to_numpy(_token_array(idx, type(self).__name__))
        _check_sampling(max_new_tokens, temperature, top_k)
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
            if on_token is not None:
                on_token(idx)
            if stop_token is not None and (idx[:, -1] == stop_token).all():
                break
        return idx


def _token_array(idx: Any, name: str) -> Any:
    """idx as a 2-D integer array, on the device it came from (NumPy for a list), or a clear error."""
    data = as_array(idx, None, None, name)
    if data.ndim != 2 or data.dtype.kind not in "iu" or data.shape[1] == 0:
        raise ValueError(f"{name}: expected token ids of shape (B, T) with T >= 1 and an integer dtype, "
                         f"got shape {data.shape} and dtype {data.dtype}")
    return data


def _check_sampling(max_new_tokens: Any, temperature: Any, top_k: Any) -> None:
    """Refuse what generate cannot sample with, naming it: the library checks, not only the command line."""
    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if not is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"generate: temperature must be a finite number >= 0 (0: the likeliest token), got "
                         f"{temperature!r}")
    if top_k is not None and (not is_int(top_k) or top_k < 1):
        raise ValueError(f"generate: top_k must be an integer >= 1 (1: the likeliest token) or None (all), got "
                         f"{top_k!r}")


def _sample(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    """One token per row of logits (B, vocab), as a (B, 1) array. A row whose logits / temperature overflow (a
    temperature as small as 1e-320) is as greedy as temperature 0, the limit it stands for."""
    if np.isnan(logits).any():
        raise ValueError("generate: the model gave NaN logits (are its weights finite?)")
    if temperature == 0:
        return logits.argmax(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        scaled = logits.astype(np.float64) / temperature
    greedy = (np.isinf(scaled) & np.isfinite(logits)).any(axis=-1)  # (B,): rows that overflowed
    if top_k is not None:
        kth = np.sort(scaled, axis=-1)[:, -min(top_k, scaled.shape[-1]), None]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    probs = stable_softmax(np.where(greedy[:, None], 0.0, scaled), axis=-1)  # a greedy row draws nothing
    rng = backend.generator("cpu")
    return np.array([[row.argmax() if g else rng.choice(len(p), p=p)]
                     for row, p, g in zip(logits, probs, greedy, strict=True)])


class GPT(DecoderModel):
    config_class, model_type = GPTConfig, "gpt2"  # what from_pretrained builds, of which Hugging Face model_type

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token -> vector
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # position -> vector
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, config.layer_norm_eps, bias=config.bias)
        # the head shares the token embedding (GPT-2's tie), unless the config unties it
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.init_weights(".proj.weight")  # the residual projections: attention's output and the MLP's down projection

    def forward(self, idx: Any, targets: Any = None, *, caches: list[KVCache] | None = None, start: int = 0,
                trace: Trace | None = None) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, vocab), and given targets (B, T) the mean cross-entropy over the
        targets that are not IGNORE_INDEX (else None). caches: one KVCache per block, the tokens of idx then at
        positions start, ..., start + T - 1. trace: a list that gets every layer's attention steps, in grad mode too."""
        idx = self.token_ids(idx, caches, start)
        T = idx.shape[1]
        # ids and positions from the host are range-checked there by F.embedding, then copied to the device
        x = self.wte(idx) + self.wpe(np.arange(start, start + T))  # (B, T, C)
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i], trace)  # (B, T, C)
        return self.head(self.ln_f(x), targets)  # (B, T, vocab), and the loss

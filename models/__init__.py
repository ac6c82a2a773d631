"""The decoders built on minigrad: attention.py (read it beside docs/self-attention.md), gpt.py, and llama.py
(the GPT with LLaMA's RMSNorm, rotary position embeddings, SwiGLU and grouped-query attention)."""

from models.attention import KVCache, MultiHeadSelfAttention
from models.gpt import GPT, IGNORE_INDEX, MLP, DecoderBlock, DecoderConfig, DecoderModel, GPTConfig
from models.llama import Llama, LlamaConfig

__all__ = ["GPT", "GPTConfig", "IGNORE_INDEX", "DecoderBlock", "DecoderConfig", "DecoderModel", "KVCache", "Llama",
           "LlamaConfig", "MLP", "MultiHeadSelfAttention"]

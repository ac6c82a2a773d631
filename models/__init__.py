"""The decoders built on minigrad: attention.py (read it beside docs/self-attention.md), decoder.py, gpt.py, and
llama.py (the GPT with LLaMA's RMSNorm, rotary position embeddings and SwiGLU)."""

from models.attention import KVCache, MultiHeadSelfAttention
from models.decoder import IGNORE_INDEX, MLP, DecoderBlock, DecoderConfig, DecoderModel
from models.gpt import GPT, GPTConfig
from models.llama import Llama, LlamaConfig

__all__ = ["GPT", "GPTConfig", "IGNORE_INDEX", "DecoderBlock", "DecoderConfig", "DecoderModel", "KVCache", "Llama",
           "LlamaConfig", "MLP", "MultiHeadSelfAttention"]

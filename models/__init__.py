"""The GPT built on minigrad: attention.py (read it beside the walkthrough), decoder.py, gpt.py."""

from models.attention import KVCache, MultiHeadSelfAttention
from models.decoder import MLP, DecoderBlock
from models.gpt import GPT, IGNORE_INDEX, GPTConfig

__all__ = ["GPT", "GPTConfig", "IGNORE_INDEX", "DecoderBlock", "KVCache", "MLP", "MultiHeadSelfAttention"]

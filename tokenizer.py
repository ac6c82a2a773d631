"""Text <-> token ids, one interface for every tokenizer here: encode(text) -> ids, decode(ids) -> text, vocab_size,
token(i) (one token's text, for explain's tables) and to_state() (JSON, kept in a checkpoint), rebuilt by from_state()
from its "kind". HFTokenizer: a Hugging Face folder's tokenizer.json, through the `tokenizers` package.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

TOKENIZER_FILE = "tokenizer.json"


class HFTokenizer:
    """The tokenizer a Hugging Face model was trained with (GPT-2's byte-level BPE, LLaMA's, ...), read from its
    tokenizer.json by the `tokenizers` package, the library the hub's tokenizers are made for, so encode and decode
    are exactly transformers' AutoTokenizer's (encode adds the special tokens the file adds, such as LLaMA's BOS).
    bos_id, eos_id: from the model's config.json (None where it has none); sampling stops at eos_id."""

    kind = "hf"

    def __init__(self, tokenizer: Any, bos_id: int | None = None, eos_id: int | None = None) -> None:
        self.tokenizer = tokenizer  # a tokenizers.Tokenizer
        self.bos_id, self.eos_id = bos_id, eos_id

    @classmethod
    def from_folder(cls, path: str) -> HFTokenizer:
        """The folder's tokenizer.json, with the BOS and EOS ids of its config.json (the first of a list)."""
        file = os.path.join(path, TOKENIZER_FILE)
        if not os.path.isfile(file):
            raise ValueError(f"{path} has no {TOKENIZER_FILE} (only a slow tokenizer's vocab.json / merges.txt or "
                             "tokenizer.model?); write one with transformers: python -c \"from transformers import "
                             f"AutoTokenizer as T; T.from_pretrained('{path}').save_pretrained('{path}')\"")
        tk = tokenizers_package()
        try:
            tokenizer = tk.Tokenizer.from_file(file)
        except Exception as err:  # tokenizers raises its own Exception on a file it cannot read
            raise ValueError(f"{file} cannot be read by the tokenizers package: {err}") from None
        config = {}
        if os.path.isfile(os.path.join(path, "config.json")):
            with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
                config = json.load(f)
        bos, eos = (config.get(key) for key in ("bos_token_id", "eos_token_id"))
        return cls(tokenizer, bos, eos[0] if isinstance(eos, list) and eos else eos)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text of the tokens, special ones included (as AutoTokenizer's decode); bytes that are not whole UTF-8
        characters (a sample cut mid-character) become U+FFFD."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def token(self, i: int) -> str:
        """Token i's text (a byte of a character split across tokens shows as U+FFFD); its name where that is empty."""
        return self.tokenizer.decode([int(i)], skip_special_tokens=False) or self.tokenizer.id_to_token(int(i))

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, "json": self.tokenizer.to_str(), "bos_id": self.bos_id, "eos_id": self.eos_id}


def tokenizers_package() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise ImportError("a Hugging Face tokenizer.json needs tokenizers: pip install -e '.[hf]'") from None
    return tokenizers


def from_state(state: dict[str, Any]) -> HFTokenizer:
    """The tokenizer that to_state() described, by its "kind"; a malformed state is a ValueError."""
    kind = state.get("kind") if isinstance(state, dict) else None
    if kind == "hf" and isinstance(state.get("json"), str):
        try:
            tokenizer = tokenizers_package().Tokenizer.from_str(state["json"])
        except Exception as err:  # tokenizers raises its own Exception on JSON it cannot read
            raise ValueError(f"the stored tokenizer.json cannot be read ({err})") from None
        return HFTokenizer(tokenizer, state.get("bos_id"), state.get("eos_id"))
    raise ValueError(f"not a tokenizer state: kind {kind!r} (known: hf), or its fields missing")

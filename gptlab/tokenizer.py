"""Text <-> token ids, one interface for every tokenizer here: encode(text) -> ids, decode(ids) -> text, vocab_size,
token(i) (one token's text, for explain's tables) and to_state() (JSON, kept in a checkpoint), rebuilt by from_state()
from its "kind". CharTokenizer: one token per character of a text; BPETokenizer: byte-level BPE trained on a text;
HFTokenizer: a Hugging Face folder's tokenizer.json. The last two run on the `tokenizers` package.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from typing import Any

from models.huggingface import CONFIG, check_fields, resave_command

TOKENIZER_FILE = "tokenizer.json"
BPE_VOCAB_SIZE = 1024  # BPETokenizer.train's vocabulary unless told: 256 bytes and 768 merges


def check_text(text: str) -> None:
    """Every tokenizer's encode reads a str of Unicode characters, and refuses anything else alike. Bytes that are not
    UTF-8 on a command line reach Python as lone surrogates (U+DC80 to U+DCFF, its "surrogateescape"): they are named
    as the bytes they were."""
    if not isinstance(text, str):
        raise TypeError(f"encode: expected text (a str), got {type(text).__name__}"
                        + (": decode the bytes first, such as data.decode('utf-8')" if isinstance(text, bytes) else ""))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = text[err.start:err.end]
        try:
            what = f"the bytes {bad.encode('utf-8', 'surrogateescape')!r}"
        except UnicodeEncodeError:  # surrogates made in Python, not bytes escaped
            what = "the lone surrogates " + " ".join(f"U+{ord(c):04X}" for c in bad)
        raise ValueError(f"the text is not valid UTF-8: {what} at character {err.start} of {text!r:.80}; give "
                         "text in UTF-8 (a terminal or file in another encoding?)") from None


class CharTokenizer:
    """One token per distinct character of the text it was made from, in sorted order: "abca" -> a=0, b=1, c=2."""

    kind = "char"

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars = list(chars)
        if not self.chars or any(not isinstance(c, str) or len(c) != 1 for c in self.chars):
            raise ValueError(f"CharTokenizer: expected a non-empty list of single characters, got {self.chars!r:.80}")
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        if len(self.stoi) != len(self.chars):
            raise ValueError("CharTokenizer: a character appears twice in its list")

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        check_text(text)
        try:
            return [self.stoi[c] for c in text]
        except KeyError as err:
            shown = "".join(self.chars) if len(self.chars) <= 60 else f"{len(self.chars)} characters"
            raise ValueError(f"unknown character {err.args[0]!r} (this tokenizer knows {shown!r})") from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def token(self, i: int) -> str:
        return self.chars[i]

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, "chars": self.chars}


class WrappedTokenizer:
    """What BPETokenizer and HFTokenizer share: a `tokenizers.Tokenizer` inside, whose encode and decode they are."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer  # a tokenizers.Tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        check_text(text)
        return self.tokenizer.encode(text).ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text of the tokens, special ones included (as AutoTokenizer's decode; BPETokenizer has none); bytes
        that are not whole UTF-8 characters (a sample cut mid-character) become U+FFFD."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)


class BPETokenizer(WrappedTokenizer):
    """Byte-level BPE, as GPT-2's: the text's UTF-8 bytes, each of the 256 a token to begin with, and then the
    commonest adjacent pairs merged into new tokens until `vocab_size`. Any text encodes, and decodes back exactly."""

    kind = "bpe"

    @classmethod
    def train(cls, text: str, vocab_size: int = BPE_VOCAB_SIZE) -> BPETokenizer:
        """Learn the merges from `text` (the training text, never the held-out part) up to vocab_size tokens."""
        tk = tokenizers_package()
        if vocab_size < 256:
            raise ValueError(f"BPETokenizer: vocab_size must be at least 256 (one token per byte), got {vocab_size}")
        tokenizer = tk.Tokenizer(tk.models.BPE())
        tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)  # bytes, split as GPT-2's
        tokenizer.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=[],
                                         initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())  # all 256 bytes
        tokenizer.train_from_iterator([text], trainer)
        return cls(tokenizer)

    def token(self, i: int) -> str:
        """Token i's bytes as text; a byte that is part of a character split across tokens is shown as \\xNN."""
        to_byte = byte_of_symbol()
        return bytes(to_byte[s] for s in self.tokenizer.id_to_token(i)).decode("utf-8", errors="backslashreplace")

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, "json": self.tokenizer.to_str()}


@functools.cache
def byte_of_symbol() -> dict[str, int]:
    """GPT-2's byte-level alphabet, symbol -> byte: printable bytes stand for themselves, the other 68 (space, control
    characters, ...) for the characters U+0100 onwards, in order; so a token's name is text, "Ġthe" for b" the"."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(0x100 + n): b for n, b in enumerate(others)}}


class HFTokenizer(WrappedTokenizer):
    """The tokenizer a Hugging Face model was trained with (GPT-2's byte-level BPE, LLaMA's, ...), read from its
    tokenizer.json by the `tokenizers` package, the library the hub's tokenizers are made for, so encode and decode
    are exactly transformers' AutoTokenizer's (encode adds the special tokens the file adds, such as LLaMA's BOS).
    bos_id, eos_id: from the model's config.json (None where it has none); sampling stops at eos_id."""

    kind = "hf"

    def __init__(self, tokenizer: Any, bos_id: int | None = None, eos_id: int | None = None) -> None:
        super().__init__(tokenizer)
        self.bos_id, self.eos_id = bos_id, eos_id

    @classmethod
    def from_folder(cls, path: str) -> HFTokenizer:
        """The folder's tokenizer.json, with the BOS and EOS ids of its config.json (the first of a list)."""
        file = os.path.join(path, TOKENIZER_FILE)
        if not os.path.isfile(file):
            raise ValueError(f"{path} has no {TOKENIZER_FILE} (only a slow tokenizer's vocab.json / merges.txt or "
                             "tokenizer.model?); write one with transformers: "
                             + resave_command("AutoTokenizer", path))
        tk = tokenizers_package()
        try:
            tokenizer = tk.Tokenizer.from_file(file)
        except Exception as err:  # tokenizers raises its own Exception on a file it cannot read
            raise ValueError(f"{file} cannot be read by the tokenizers package: {err}") from None
        config, config_file = {}, os.path.join(path, CONFIG)
        if os.path.isfile(config_file):
            try:
                with open(config_file, encoding="utf-8") as f:
                    config = json.load(f)
            except (OSError, ValueError) as err:
                raise ValueError(f"{config_file} cannot be read as JSON: {err}") from None
            if not isinstance(config, dict):
                raise ValueError(f"{config_file} holds a JSON {type(config).__name__}, not an object of settings")
            check_fields(config, config_file)
        bos, eos = (config.get(key) for key in ("bos_token_id", "eos_token_id"))
        eos = (eos[0] if eos else None) if isinstance(eos, list) else eos
        for key, i in (("bos_token_id", bos), ("eos_token_id", eos)):
            if i is not None and not 0 <= i < tokenizer.get_vocab_size():
                raise ValueError(f"{config_file}: {key} {i} is not a token of {file} (it has "
                                 f"{tokenizer.get_vocab_size()})")
        return cls(tokenizer, bos, eos)

    def token(self, i: int) -> str:
        """Token i's text (a byte of a character split across tokens shows as U+FFFD); its name where that is empty."""
        return self.tokenizer.decode([int(i)], skip_special_tokens=False) or self.tokenizer.id_to_token(int(i))

    def to_state(self) -> dict[str, Any]:
        return {"kind": self.kind, "json": self.tokenizer.to_str(), "bos_id": self.bos_id, "eos_id": self.eos_id}


def tokenizers_package() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise ImportError("byte-level BPE and a Hugging Face tokenizer.json need the tokenizers package: "
                          "pip install -e '.[text]' (or '.[hf]')") from None
    return tokenizers


def from_state(state: dict[str, Any]) -> CharTokenizer | BPETokenizer | HFTokenizer:
    """The tokenizer that to_state() described, by its "kind"; a malformed state is a ValueError."""
    kind = state.get("kind") if isinstance(state, dict) else None
    if kind == "char" and isinstance(state.get("chars"), list):
        return CharTokenizer(state["chars"])
    if kind in ("bpe", "hf") and isinstance(state.get("json"), str):
        try:
            tokenizer = tokenizers_package().Tokenizer.from_str(state["json"])
        except Exception as err:  # tokenizers raises its own Exception on JSON it cannot read
            raise ValueError(f"the stored tokenizer.json cannot be read ({err})") from None
        return BPETokenizer(tokenizer) if kind == "bpe" else HFTokenizer(tokenizer, state.get("bos_id"),
                                                                         state.get("eos_id"))
    raise ValueError(f"not a tokenizer state: kind {kind!r} (known: char, bpe, hf), or its fields missing")

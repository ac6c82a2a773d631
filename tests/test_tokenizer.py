"""tokenizer.py: the character tokenizer and byte-level BPE round-trip any text exactly, show each token's text, come
back from their state (as a checkpoint keeps them) encoding the same ids, and refuse text that is not UTF-8 alike."""

from __future__ import annotations

import json

import pytest

from gptlab.tasks import make_task
from gptlab.tokenizer import BPETokenizer, CharTokenizer, byte_of_symbol, from_state

TRAINING = "The quick brown fox jumps over the lazy dog. " * 40 + "the theme of the theatre\n" * 20
UNSEEN = "床前明月光，疑是地上霜。 🌙✨👍🏽 naïve café e\u0301 \t\r\n\x00 ¿qué? Ωμέγα"  # beyond ASCII: not in TRAINING


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    pytest.importorskip("tokenizers", reason="byte-level BPE needs tokenizers (pip install -e '.[text]')")
    return BPETokenizer.train(TRAINING, vocab_size=300)


def test_char_tokenizer_round_trip_and_its_errors():
    tok = CharTokenizer.train("hello, 世界")
    assert tok.vocab_size == 8 and tok.chars == sorted(set("hello, 世界"))
    assert tok.decode(tok.encode("世界, hello")) == "世界, hello"
    assert [tok.token(i) for i in tok.encode("hol")] == ["h", "o", "l"]
    with pytest.raises(ValueError, match="unknown character 'z'"):
        tok.encode("hez")
    again = from_state(json.loads(json.dumps(tok.to_state())))
    assert isinstance(again, CharTokenizer) and again.encode("世界 he") == tok.encode("世界 he")
    with pytest.raises(ValueError, match="single characters"):
        CharTokenizer(["ab"])
    with pytest.raises(ValueError, match="appears twice"):
        CharTokenizer(["a", "a"])


@pytest.mark.parametrize("text", [UNSEEN, TRAINING[:200], "", "😀" * 5, "\U0010ffff\u00e9\u0301"])
def test_bpe_round_trips_any_text_exactly(bpe, text):
    ids = bpe.encode(text)
    assert all(0 <= i < bpe.vocab_size for i in ids)
    assert bpe.decode(ids) == text


def test_bpe_learns_merges_and_each_token_s_text_is_its_bytes(bpe):
    assert 256 < bpe.vocab_size <= 300  # as many merges as the text has pairs for, up to vocab_size
    assert len(bpe.encode("the theme of the theatre")) < len("the theme of the theatre") / 2  # merged, not bytes
    for text in (UNSEEN, TRAINING[:300]):
        ids = bpe.encode(text)
        # token(i) shows a byte of a split character as \xNN: together, the tokens' bytes are the text's UTF-8
        pieces = [bpe.token(i).encode("utf-8").decode("unicode_escape").encode("latin-1") if "\\x" in bpe.token(i)
                  else bpe.token(i).encode("utf-8") for i in ids]
        assert b"".join(pieces) == text.encode("utf-8")
    assert " the" in [bpe.token(i) for i in range(bpe.vocab_size)]


def test_gpt2_byte_alphabet_is_the_one_tokenizers_uses():
    tokenizers = pytest.importorskip("tokenizers", reason="needs tokenizers (pip install -e '.[text]')")
    table = byte_of_symbol()
    assert sorted(table.values()) == list(range(256))  # one symbol per byte
    assert set(table) == set(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    assert table["Ġ"] == ord(" ") and table["a"] == ord("a") and table["Ċ"] == ord("\n")


def test_bpe_state_comes_back_the_same(bpe):
    state = json.loads(json.dumps(bpe.to_state()))  # what a checkpoint holds: JSON
    again = from_state(state)
    assert isinstance(again, BPETokenizer) and again.vocab_size == bpe.vocab_size
    assert again.encode(UNSEEN + TRAINING) == bpe.encode(UNSEEN + TRAINING)
    assert BPETokenizer.train(TRAINING, vocab_size=300).to_state() == bpe.to_state(), "training is deterministic"


def test_bpe_refuses_a_vocabulary_below_the_bytes_and_bad_states():
    pytest.importorskip("tokenizers", reason="needs tokenizers (pip install -e '.[text]')")
    with pytest.raises(ValueError, match="at least 256"):
        BPETokenizer.train(TRAINING, vocab_size=100)
    with pytest.raises(ValueError, match="cannot be read"):
        from_state({"kind": "bpe", "json": "{not json"})
    for state in ({"kind": "wordpiece"}, {"kind": "char"}, "char", {}):
        with pytest.raises(ValueError, match="not a tokenizer state"):
            from_state(state)


def test_every_tokenizer_refuses_text_that_is_not_utf8_alike(bpe):
    """A command line's bytes b'a\\xff' reach Python as 'a\\udcff'; BPE and Hugging Face tokenizers ended in
    `TypeError: TextInputSequence must be str`. Every tokenizer, and a toy task, now refuses it with one message."""
    text = b"a\xff".decode("utf-8", "surrogateescape")
    char = CharTokenizer.train("a\xff")  # knows both characters: the refusal is not an unknown one
    for encode in (char.encode, bpe.encode, make_task("sentences").encode):
        with pytest.raises(ValueError, match=r"not valid UTF-8: the bytes b'\\xff' at character 1 of 'a\\udcff'"):
            encode(text)
        with pytest.raises(ValueError, match=r"lone surrogates U\+D800"):
            encode("x\ud800")
        with pytest.raises(TypeError, match=r"expected text \(a str\), got bytes: decode the bytes first"):
            encode(b"a")

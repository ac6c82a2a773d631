"""Toy next-token tasks for train.py, and your own text; read this file to see what the model learns: each example is
`seq_len` token ids and a `scored` mask marking the answer (the model reads tokens[:, :-1], predicts tokens[:, 1:], and
only the targets where scored[:, 1:] is True count). Pure NumPy, from seeded generators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gptlab.tokenizer import BPE_VOCAB_SIZE, BPETokenizer, CharTokenizer, HFTokenizer, check_text

TASKS = {  # name: what it teaches (train.py's --help lists these)
    "sort": "digits, then the same digits sorted: compare every earlier digit, not just the last one",
    "reverse": "digits, then the same digits reversed: copy from a position that moves back each step",
    "add": "a+b=c with the sum written least significant digit first: align digits and carry",
    "sentences": "我 吃 蘋果 ， 蘋果 被 我 吃 了: repeat the object, subject and verb from several tokens back",
    "text": "language modelling on a UTF-8 text file you bring (--data FILE), as characters or BPE tokens",
}
TEXT_CONTEXT = 64  # --block-size of the text task unless given: nanoGPT's CPU recipe (shakespeare_char on a laptop)


class Task:
    """A token vocabulary, a fixed length, and a generator of examples (subclasses define `sample`). Its text is tokens
    separated by spaces (the text task's tokenizer reads and writes plain text)."""

    def __init__(self, name: str, vocab: list[str], seq_len: int, prompt_len: int,
                 n_distinct: int | None = None, focus: tuple[str, str] | None = None):
        self.name = name
        self.vocab = vocab            # token strings; a token's id is its index
        self.seq_len = seq_len        # every example has exactly this many tokens
        self.prompt_len = prompt_len  # the first prompt_len tokens are the question, the rest the answer
        self.n_distinct = n_distinct  # how many different examples exist (None: too many to matter)
        self.focus = focus            # (token, why): where explain.py looks by default, and why it is interesting
        self.stoi = {s: i for i, s in enumerate(vocab)}

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n examples: tokens (n, seq_len) int64, scored (n, seq_len) bool (True on answer tokens)."""
        raise NotImplementedError

    def encode(self, text: str) -> list[int]:
        check_text(text)  # as every tokenizer refuses it
        pieces = text.split()
        for p in pieces:
            if p not in self.stoi:
                known = " ".join(self.vocab) if len(self.vocab) <= 60 else f"{len(self.vocab)} tokens"
                raise ValueError(f"unknown token {p!r} for task {self.name!r} (vocabulary: {known})")
        return [self.stoi[p] for p in pieces]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.vocab[int(i)] for i in ids)

    def split_prompt(self, tokens: Iterable[int]) -> tuple[list[int], list[int]]:
        """One example -> (prompt ids, answer ids); for sample completions."""
        ids = [int(i) for i in tokens]
        return ids[:self.prompt_len], ids[self.prompt_len:]

    def _pack(self, n: int, *columns: np.ndarray | int) -> np.ndarray:
        """(n,) or (n, k) id arrays and constant ids, side by side, as one (n, seq_len) int64 array."""
        tokens = np.empty((n, self.seq_len), dtype=np.int64)
        at = 0
        for c in columns:
            width = 1 if isinstance(c, int) else np.asarray(c).reshape(n, -1).shape[1]
            tokens[:, at:at + width] = c if isinstance(c, int) else np.asarray(c).reshape(n, width)
            at += width
        assert at == self.seq_len
        return tokens

    def _answer_mask(self, n: int) -> np.ndarray:
        scored = np.zeros((n, self.seq_len), dtype=bool)
        scored[:, self.prompt_len:] = True
        return scored


# ---- digit tasks ----

class ListTask(Task):
    """sort: `3 1 4 1 5 9 = 1 1 3 4 5 9`. reverse: `3 1 4 1 5 9 = 9 5 1 4 1 3`.

    The answer (after `=`) is scored. reverse teaches copying from a position that moves back by two each
    step (the previous token says nothing about the next); sort teaches finding the smallest digit not yet
    written, which means looking over the whole list and counting repeats.
    """

    def __init__(self, name: str, length: int = 6, n_digits: int = 10):
        if not (1 <= n_digits <= 10 and length >= 1):
            raise ValueError(f"{name}: need length >= 1 and 1 <= n_digits <= 10, got {length}, {n_digits}")
        self.length, self.n_digits = length, n_digits
        vocab = [str(d) for d in range(n_digits)] + ["="]
        why = ("after = comes the smallest digit: only a look at every digit finds it" if name == "sort"
               else "after = come the digits in reverse order, each from further back")
        super().__init__(name, vocab, seq_len=2 * length + 1, prompt_len=length + 1,
                         n_distinct=n_digits ** length, focus=("=", why))

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        xs = rng.integers(0, self.n_digits, size=(n, self.length))  # (n, length)
        ys = np.sort(xs, axis=1) if self.name == "sort" else xs[:, ::-1]
        return self._pack(n, xs, self.stoi["="], ys), self._answer_mask(n)


class AddTask(Task):
    """add: `1 2 3 + 4 5 6 = 9 7 5 0` is 123 + 456 = 579, the sum written REVERSED, least significant first.

    Operands have exactly `digits` digits (leading zeros), the sum digits + 1 (a trailing zero here, since it
    is reversed). Least significant first is the usual trick for small transformers: each answer digit then
    depends on two operand digits and the carry from the digit just written, so it can be produced left to
    right. Teaches digit alignment (attend to two positions per output) and carrying. The sum is scored.
    """

    def __init__(self, name: str = "add", digits: int = 3, reverse_answer: bool = True):
        if digits < 1:
            raise ValueError(f"add: digits must be >= 1, got {digits}")
        self.digits, self.reverse_answer = digits, reverse_answer
        vocab = [str(d) for d in range(10)] + ["+", "="]
        super().__init__(name, vocab, seq_len=3 * digits + 3, prompt_len=2 * digits + 2, n_distinct=100 ** digits,
                         focus=("=", "after = comes the sum's last digit, from the last digit of each number"))

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        a = rng.integers(0, 10 ** self.digits, size=n)
        b = rng.integers(0, 10 ** self.digits, size=n)
        msd_first = 10 ** np.arange(self.digits - 1, -1, -1)     # place values 100, 10, 1
        lsd_first = 10 ** np.arange(self.digits + 1)             # place values 1, 10, 100, 1000
        c = ((a + b)[:, None] // lsd_first) % 10                 # (n, digits + 1)
        if not self.reverse_answer:
            c = c[:, ::-1]
        tokens = self._pack(n, (a[:, None] // msd_first) % 10, self.stoi["+"], (b[:, None] // msd_first) % 10,
                            self.stoi["="], c)
        return tokens, self._answer_mask(n)


# ---- a tiny language ----

SUBJECTS = ["我", "你", "他", "她", "我們", "你們", "他們", "老師", "媽媽", "爸爸", "小明", "小華"]
OBJECTS = {  # verb: the objects it may take
    "吃": ["蘋果", "香蕉", "麵包", "米飯", "蛋糕"],  # eat: foods
    "喝": ["茶", "咖啡", "牛奶", "果汁", "水"],  # drink: drinks
    "讀": ["書", "報紙", "小說", "詩", "雜誌"],  # read: things to read
    "看": ["電影", "電視", "比賽", "照片", "新聞"],  # watch / look at
    "寫": ["信", "日記", "作業", "文章", "卡片"],  # write
    "買": ["衣服", "鞋子", "手機", "雨傘", "花"],  # buy
}


class SentencesTask(Task):
    """sentences: `我 吃 蘋果 ， 蘋果 被 我 吃 了` ("I eat an apple, the apple was eaten by me"): subject, verb, object
    (the verb picks the objects it takes), then the same event in the passive (被). From `，` on everything is
    scored; the passive clause repeats the object from 2 tokens back and the subject and verb from 6, and the
    token before says nothing about which (被 precedes every subject), so only attention gets them right."""

    def __init__(self, name: str = "sentences"):
        pairs = [(v, o) for v, objs in OBJECTS.items() for o in objs]
        vocab = SUBJECTS + list(OBJECTS) + [o for _, o in pairs] + ["，", "被", "了"]
        super().__init__(name, vocab, seq_len=9, prompt_len=3, n_distinct=len(SUBJECTS) * len(pairs),
                         focus=("被", "after 被 comes the subject, at position 0; only attention can fetch it"))
        self.subject_ids = np.array([self.stoi[s] for s in SUBJECTS])
        self.pair_ids = np.array([(self.stoi[v], self.stoi[o]) for v, o in pairs])  # (n_pairs, 2)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        subj = self.subject_ids[rng.integers(len(self.subject_ids), size=n)]
        verb, obj = self.pair_ids[rng.integers(len(self.pair_ids), size=n)].T
        s = self.stoi
        tokens = self._pack(n, subj, verb, obj, s["，"], obj, s["被"], subj, verb, s["了"])
        return tokens, self._answer_mask(n)


# ---- your own text ----

class TextTask(Task):
    """text: random windows of `seq_len` tokens (--block-size + 1) from a UTF-8 file; every next token is scored.

    Teaches whatever the file holds: spelling first, then common words. As nanoGPT splits its texts, the first 90% of
    the characters are for training, the last 10% are held out (see split()). The tokenizer ("char": one token per
    character of the whole file; "bpe": byte-level BPE of vocab_size tokens, trained on the training part) is trained
    here, or given: a checkpoint's, so that ids keep their meaning, or the one a pretrained model was trained with.
    """

    def __init__(self, path: str, name: str = "text", seq_len: int = TEXT_CONTEXT + 1,
                 tokenizer: str | CharTokenizer | BPETokenizer | HFTokenizer = "char", vocab_size: int | None = None):
        p = Path(path)
        if not p.is_file():
            why = "is a folder, not a file" if p.is_dir() else "not found"
            raise FileNotFoundError(f"text task: data file {str(p)!r} {why}")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"text task: {str(p)!r} is not UTF-8 text ({e})") from None
        if not text:
            raise ValueError(f"text task: {str(p)!r} is empty")
        if seq_len < 2:
            raise ValueError(f"text task: seq_len must be at least 2 (a token and the next), got {seq_len}")
        if vocab_size is not None and tokenizer != "bpe":
            raise ValueError("text task: vocab_size is for the bpe tokenizer (char: the file's characters)")
        cut = int(0.9 * len(text))  # text[:cut] trains, text[cut:] is held out
        if tokenizer == "char":
            tokenizer = CharTokenizer.train(text)  # every character of the file, so the held-out part encodes too
        elif tokenizer == "bpe":
            tokenizer = BPETokenizer.train(text[:cut], BPE_VOCAB_SIZE if vocab_size is None else vocab_size)
        elif isinstance(tokenizer, str):
            raise ValueError(f"text task: tokenizer must be 'char' or 'bpe', got {tokenizer!r}")
        self.tokenizer = tokenizer
        try:
            self.train_ids, self.heldout_ids = (np.array(tokenizer.encode(part), dtype=np.int64)  # each (N,)
                                                for part in (text[:cut], text[cut:]))
        except ValueError as e:  # a given tokenizer that lacks one of the file's characters
            raise ValueError(f"text task: {str(p)!r} does not fit the tokenizer: {e}") from None
        for part, ids in (("training part (the first 90%)", self.train_ids),
                          ("held-out part (the last 10%)", self.heldout_ids)):
            if len(ids) < seq_len:
                raise ValueError(f"text task: {str(p)!r} is too short for seq_len={seq_len}: its {part} has "
                                 f"{len(ids)} tokens, fewer than one window; use a longer file or a smaller "
                                 "--block-size")
        vocab = [tokenizer.token(i) for i in range(tokenizer.vocab_size)]
        super().__init__(name, vocab, seq_len=seq_len, prompt_len=seq_len // 2)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(ids)

    def windows(self, ids: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The windows ids[s : s + seq_len] for each s in starts: tokens and scored (n, seq_len), all but the first."""
        tokens = ids[starts[:, None] + np.arange(self.seq_len)]  # (n, seq_len)
        scored = np.ones_like(tokens, dtype=bool)
        scored[:, 0] = False  # nothing before the first token to predict it from
        return tokens, scored

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n training windows at random starts, as nanoGPT's get_batch("train")."""
        return self.windows(self.train_ids, rng.integers(0, len(self.train_ids) - self.seq_len + 1, size=n))


def make_task(name: str, *, data: str | None = None, **options: Any) -> Task:
    """Build a task by name ("sort", "reverse", "add", "sentences", "text"); options go to its constructor."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(TASKS)}")
    if (name == "text") != (data is not None):
        raise ValueError("the text task needs a UTF-8 file: --data FILE in train.py, data=path here" if name == "text"
                         else f"task {name!r} generates its own data; --data (data=) is only for the text task")
    build = {"sort": ListTask, "reverse": ListTask, "add": AddTask, "sentences": SentencesTask}
    try:
        return TextTask(data, **options) if name == "text" else build[name](name=name, **options)
    except TypeError as e:  # an option the task does not have
        raise ValueError(f"task {name!r}: {e}") from None


# ---- train / held-out ----

@dataclass
class Split:
    """A task's fixed held-out examples; train_batch(rng, n): n training examples, never one of them; heldout_batch(rng,
    n): n examples drawn from the held-out ones (nanoGPT's get_batch("val"), for estimates during training)."""

    task: Task
    heldout: tuple[np.ndarray, np.ndarray]  # (tokens, scored), each (n_heldout, seq_len)
    train_batch: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
    heldout_batch: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def split(task: Task, n_heldout: int | None = None, seed: int = 0) -> Split:
    """Hold out n_heldout examples (default 256, fewer for small tasks), the same for the same task and seed: distinct
    examples that training batches never contain. For text, the whole held-out part of the file, each of its tokens
    scored once (but the first): windows side by side, the last one shifted back to end with the text."""
    if isinstance(task, TextTask):
        if n_heldout is not None:
            raise ValueError("the text task holds out the last tenth of its file, all of it; n_heldout is for the "
                             "generated tasks")
        ids, L = task.heldout_ids, task.seq_len
        starts = np.arange(0, len(ids) - L + 1, L - 1)  # a window predicts ids[s + 1 : s + L]; the next one goes on
        tail = len(ids) - (starts[-1] + L)  # targets after the last of these windows
        tokens, scored = task.windows(ids, np.append(starts, len(ids) - L) if tail else starts)
        if tail:
            scored[-1, :L - tail] = False  # the window shifted back to the end scores only the targets not yet scored
        return Split(task, (tokens, scored), task.sample,
                     lambda r, k: task.windows(ids, r.integers(0, len(ids) - L + 1, size=k)))

    if n_heldout is None:
        n_heldout = 256 if task.n_distinct is None else min(256, task.n_distinct // 5)
    if n_heldout < 1 or (task.n_distinct is not None and n_heldout > task.n_distinct // 2):
        raise ValueError(f"n_heldout={n_heldout} is out of range for task {task.name!r}"
                         f" ({task.n_distinct} distinct examples; hold out at most half)")
    rng = np.random.default_rng(seed)
    found: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # held-out example as bytes -> (tokens, scored)
    for _ in range(1000):
        for t, s in zip(*task.sample(rng, n_heldout), strict=True):
            if len(found) < n_heldout:
                found.setdefault(t.tobytes(), (t, s))
        if len(found) == n_heldout:
            break
    else:
        raise ValueError(f"task {task.name!r}: could not find {n_heldout} distinct examples")
    heldout = (np.stack([t for t, _ in found.values()]), np.stack([s for _, s in found.values()]))

    def sampler(r: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        tokens, scored = task.sample(r, k)
        while True:
            # which rows are held-out examples (map and fromiter: no Python function per row)
            bad = np.fromiter(map(found.__contains__, map(np.ndarray.tobytes, tokens)), bool, len(tokens))
            if not bad.any():
                return tokens, scored
            tokens[bad], scored[bad] = task.sample(r, int(bad.sum()))

    def heldout_sampler(r: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        rows = r.integers(0, len(heldout[0]), size=k)
        return heldout[0][rows], heldout[1][rows]

    return Split(task, heldout, sampler, heldout_sampler)


def previous_token_baseline(task: Task, data: Split | None = None, n_samples: int = 20_000, seed: int = 0) -> float:
    """Held-out accuracy of the best guess that sees only the previous token (the most frequent next token after it
    in n_samples training examples): a task needs attention to the extent a model beats this number."""
    data = split(task, seed=seed) if data is None else data
    V = len(task.vocab)
    tokens, scored = data.train_batch(np.random.default_rng(seed + 1), n_samples)
    m = scored[:, 1:]  # which targets count
    counts = np.zeros((V, V), dtype=np.int64)  # counts[prev, next]
    np.add.at(counts, (tokens[:, :-1][m], tokens[:, 1:][m]), 1)
    guess = counts.argmax(axis=1)  # (V,) best next token for each previous token
    tokens, scored = data.heldout
    m = scored[:, 1:]
    return float((guess[tokens[:, :-1][m]] == tokens[:, 1:][m]).mean())

"""Tests for tasks.py: the toy tasks' formats, answers, held-out split and previous-token baseline."""

import numpy as np
import pytest

from gptlab.tasks import OBJECTS, SUBJECTS, TASKS, make_task, previous_token_baseline, split

GENERATED = ["sort", "reverse", "add", "sentences"]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "poem.txt"
    lines = [f"{i} 床前明月光，疑是地上霜。" if i % 2 else f"{i} The quick brown fox." for i in range(40)]
    path.write_text("\n".join(lines), encoding="utf-8")  # numbered, so every window occurs once
    return str(path)


def task_of(name, text_file):
    return make_task(name, data=text_file, seq_len=17) if name == "text" else make_task(name)


def rows(task, n=500, seed=0):
    """n decoded examples as lists of token strings."""
    tokens, _ = task.sample(np.random.default_rng(seed), n)
    return [[task.vocab[i] for i in row] for row in tokens]


@pytest.mark.parametrize("name", list(TASKS))
def test_shapes_dtypes_and_determinism(name, text_file):
    task = task_of(name, text_file)
    tokens, scored = task.sample(np.random.default_rng(1), 7)
    assert tokens.shape == scored.shape == (7, task.seq_len)
    assert tokens.dtype == np.int64 and scored.dtype == bool
    assert tokens.min() >= 0 and tokens.max() < len(task.vocab)
    assert task.seq_len <= 32
    assert not scored[:, 0].any()  # nothing precedes the first token
    again, again_scored = task.sample(np.random.default_rng(1), 7)
    np.testing.assert_array_equal(tokens, again)
    np.testing.assert_array_equal(scored, again_scored)
    assert not np.array_equal(tokens, task.sample(np.random.default_rng(2), 7)[0])


@pytest.mark.parametrize("name", GENERATED)
def test_scored_is_exactly_the_answer(name):
    task = make_task(name)
    tokens, scored = task.sample(np.random.default_rng(0), 50)
    expected = np.zeros(task.seq_len, dtype=bool)
    expected[task.prompt_len:] = True
    assert (scored == expected).all()
    prompt, answer = task.split_prompt(tokens[0])
    assert prompt + answer == tokens[0].tolist()
    assert len(answer) == scored[0].sum()


def test_sort_and_reverse_answers():
    for name, answer in [("sort", sorted), ("reverse", lambda xs: xs[::-1])]:
        task = make_task(name, length=7)
        assert task.seq_len == 15
        for row in rows(task):
            assert row[7] == "=" and row[8:] == answer(row[:7])


def test_add_answers_are_reversed_sums():
    task = make_task("add")
    for row in rows(task):
        a, b = int("".join(row[0:3])), int("".join(row[4:7]))
        assert row[3] == "+" and row[7] == "="
        assert "".join(row[8:]) == f"{a + b:04d}"[::-1]  # least significant digit first, padded to 4 digits
    for row in rows(make_task("add", digits=2, reverse_answer=False)):
        assert int("".join(row[6:])) == int("".join(row[0:2])) + int("".join(row[3:5]))


def test_sentences_obey_grammar_and_refer_back():
    task = make_task("sentences")
    seen_verbs = set()
    for subj, verb, obj, comma, obj2, bei, subj2, verb2, le in rows(task, n=2000):
        assert subj in SUBJECTS and obj in OBJECTS[verb]  # the verb decides which objects may follow
        assert (comma, bei, le) == ("，", "被", "了")
        assert (obj2, subj2, verb2) == (obj, subj, verb)  # the passive clause repeats them
        seen_verbs.add(verb)
    assert seen_verbs == set(OBJECTS)
    prompt = task.encode("我 吃 蘋果")  # train.py's explain prompt is the unscored start of an example
    assert len(prompt) == task.prompt_len
    assert task.decode(prompt) == "我 吃 蘋果"


@pytest.mark.parametrize("name", GENERATED)
def test_heldout_never_in_training(name):
    task = make_task(name)
    data = split(task, n_heldout=40, seed=3)
    tokens, scored = data.heldout
    assert tokens.shape == scored.shape == (40, task.seq_len)
    again = split(task, n_heldout=40, seed=3)
    np.testing.assert_array_equal(tokens, again.heldout[0])
    train, _ = data.train_batch(np.random.default_rng(0), 3000)
    assert len({r.tobytes() for r in tokens}) == 40  # distinct
    assert not {r.tobytes() for r in tokens} & {r.tobytes() for r in train}
    drawn, drawn_scored = data.heldout_batch(np.random.default_rng(0), 100)  # estimates draw from the held-out ones
    assert drawn.shape == (100, task.seq_len) and {r.tobytes() for r in drawn} <= {r.tobytes() for r in tokens}


@pytest.mark.parametrize("seq_len", [5, 17, 40])
def test_text_heldout_is_the_last_tenth_each_token_scored_once(text_file, seq_len):
    """As nanoGPT splits a text: the first 90% of the characters train, the last 10% are held out, and the held-out
    loss is over all of it: every held-out token but the first is a scored target exactly once."""
    task = make_task("text", data=text_file, seq_len=seq_len)
    text = open(text_file, encoding="utf-8").read()
    cut = int(0.9 * len(text))
    assert task.decode(task.train_ids) == text[:cut] and task.decode(task.heldout_ids) == text[cut:]
    data = split(task)
    tokens, scored = data.heldout
    assert tokens.shape[1] == seq_len
    targets = tokens[scored]  # row by row, in the order of the text
    np.testing.assert_array_equal(targets, task.heldout_ids[1:])
    again = split(task)
    np.testing.assert_array_equal(tokens, again.heldout[0])
    train, _ = data.train_batch(np.random.default_rng(0), 300)
    train_text = task.decode(task.train_ids)
    assert all(task.decode(row) in train_text for row in train)
    drawn, drawn_scored = data.heldout_batch(np.random.default_rng(0), 50)
    assert all(task.decode(row) in text[cut:] for row in drawn) and drawn_scored[:, 1:].all()
    with pytest.raises(ValueError, match="holds out the last tenth"):
        split(task, n_heldout=40)


def test_sentences_heldout_is_unseen_combinations():
    task = make_task("sentences")
    data = split(task)  # default size for a 360-example task
    assert len(data.heldout[0]) == 72
    train, _ = data.train_batch(np.random.default_rng(0), 5000)
    assert len({r.tobytes() for r in train}) == 360 - 72  # every other sentence is still trained on


def test_split_rejects_bad_sizes():
    with pytest.raises(ValueError, match="n_heldout"):
        split(make_task("sentences"), n_heldout=300)
    with pytest.raises(ValueError, match="n_heldout"):
        split(make_task("sort"), n_heldout=0)


@pytest.mark.parametrize("name", list(TASKS))
def test_encode_decode_round_trip(name, text_file):
    task = task_of(name, text_file)
    tokens, _ = task.sample(np.random.default_rng(0), 20)
    for row in tokens:
        assert task.encode(task.decode(row)) == row.tolist()


def test_unknown_token_is_named():
    with pytest.raises(ValueError, match="'貓'"):
        make_task("sentences").encode("我 吃 貓")
    with pytest.raises(ValueError, match="'x'"):
        make_task("sort").encode("1 2 x")


def test_text_task(text_file, tmp_path):
    task = make_task("text", data=text_file, seq_len=16)
    assert task.seq_len == 16 and "明" in task.vocab and "\n" in task.vocab
    assert task.encode("明月") == [task.vocab.index("明"), task.vocab.index("月")]
    tokens, scored = task.sample(np.random.default_rng(0), 10)
    assert scored[:, 1:].all()
    text = task.decode(task.train_ids)
    assert all(task.decode(row) in text for row in tokens)
    assert make_task("text", data=text_file).seq_len == 65  # the default context, 64 tokens, and the next one
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        make_task("text", data=str(tmp_path / "missing.txt"))
    short = tmp_path / "short.txt"
    short.write_text("abc" * 100, encoding="utf-8")
    with pytest.raises(ValueError, match="too short for seq_len=65: its held-out part .* has 30 tokens"):
        make_task("text", data=str(short))
    with pytest.raises(ValueError, match="vocab_size is for the bpe tokenizer"):
        make_task("text", data=text_file, vocab_size=300)


def test_text_task_with_a_given_tokenizer_keeps_its_ids(text_file, tmp_path):
    """A checkpoint's tokenizer reads the file as in training; a character it never saw is refused, by name."""
    from gptlab.tokenizer import CharTokenizer

    task = make_task("text", data=text_file, seq_len=16)
    again = make_task("text", data=text_file, seq_len=16, tokenizer=CharTokenizer(task.vocab))
    np.testing.assert_array_equal(again.train_ids, task.train_ids)
    other = tmp_path / "other.txt"
    other.write_text(open(text_file, encoding="utf-8").read() + "貓", encoding="utf-8")
    with pytest.raises(ValueError, match="does not fit the tokenizer: unknown character '貓'"):
        make_task("text", data=str(other), seq_len=16, tokenizer=CharTokenizer(task.vocab))


def test_bpe_text_task(text_file):
    pytest.importorskip("tokenizers", reason="--tokenizer bpe needs tokenizers (pip install -e '.[text]')")
    task = make_task("text", data=text_file, seq_len=9, tokenizer="bpe", vocab_size=300)
    assert len(task.vocab) == task.tokenizer.vocab_size <= 300 and task.vocab[task.encode("a")[0]] == "a"
    text = open(text_file, encoding="utf-8").read()
    assert task.decode(task.train_ids) + task.decode(task.heldout_ids) == text
    assert len(task.train_ids) < len(text[:int(0.9 * len(text))])  # merges: fewer tokens than characters
    tokens, _ = task.sample(np.random.default_rng(0), 20)
    assert tokens.max() < len(task.vocab)
    assert task.encode("The quick") == task.tokenizer.encode("The quick")


def test_make_task_errors(text_file):
    with pytest.raises(ValueError, match="unknown task"):
        make_task("multiply")
    with pytest.raises(ValueError, match="data="):
        make_task("text")
    with pytest.raises(ValueError, match="data="):
        make_task("sort", data=text_file)
    with pytest.raises(ValueError, match="sort"):
        make_task("sort", colour="red")


def test_previous_token_baseline(text_file):
    baselines = {name: previous_token_baseline(task_of(name, text_file), n_samples=5000) for name in TASKS}
    print(baselines)
    assert baselines["sentences"] < 0.6  # the copies need attention
    assert baselines["reverse"] < 0.3
    assert all(0.0 <= b <= 1.0 for b in baselines.values())

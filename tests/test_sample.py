"""train.py sample (sample.py): a trained checkpoint of either architecture, of a word task or the text
task, continues a prompt; it prints the prompt in [brackets], then what the model's generate() gives for the
same seed; bad values are refused in one line with exit status 2. Real processes, as a user runs them, on
tiny checkpoints trained once per module.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
import train
from gptlab import sample as sample_module
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.tasks import TextTask
from gptlab.tokenizer import BPETokenizer

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--batch-size", "16", "--samples", "0",
         "--no-explain", "--eval-interval", "20"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny checkpoints: the sentences task with each architecture, the text task with llama, and with BPE tokens."""
    root = tmp_path_factory.mktemp("runs")
    text = root / "data.txt"
    text.write_text("the cat sat on the mat. the dog sat on the log. 貓坐在墊子上。🐈 " * 10, encoding="utf-8")
    argvs = {"gpt": ["--arch", "gpt"], "llama": ["--arch", "llama"],
             "text": ["--arch", "llama", "--task", "text", "--data", str(text), "--block-size", "16"]}
    if importlib.util.find_spec("tokenizers"):
        argvs["bpe"] = ["--task", "text", "--data", str(text), "--block-size", "16", "--tokenizer", "bpe",
                        "--vocab-size", "280"]
    for name, argv in argvs.items():
        assert train.main([*argv, "--steps", "40", "--out", str(root / name), *SMALL]) == 0
    return {name: root / name for name in argvs}


def sample(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", "sample", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def printed(out: Path, prompt: str, continuation: str) -> str:
    """What sample prints: the prompt (cropped to the block) in brackets, then the continuation, a space between for
    a toy task's words."""
    task, model = restore(load_checkpoint(str(out)), "cpu")
    shown = task.decode(task.encode(prompt)[-model.config.block_size:])
    return f"[{shown}]" + (" " if continuation and not isinstance(task, TextTask) else "") + continuation + "\n"


def expected(out: Path, prompt: str, new: int, temperature: float, top_k: int | None, seed: int) -> str:
    """The continuation generate() gives in this process, for comparison with the command's."""
    task, model = restore(load_checkpoint(str(out)), "cpu")
    ids = task.encode(prompt)[-model.config.block_size:]
    mg.manual_seed(seed)
    tokens = model.eval().generate(np.array([ids]), new, temperature=temperature, top_k=top_k)
    return task.decode(tokens[0, len(ids):])


def test_a_temperature_too_small_to_divide_by_samples_greedily(runs):
    """--temperature 1e-320 printed a traceback (the division overflowed): it is the likeliest token each time."""
    common = ["--out", str(runs["gpt"]), "--prompt", "我 吃 蘋果", "--max-new-tokens", "5"]
    tiny, greedy = sample(*common, "--temperature", "1e-320"), sample(*common, "--top-k", "1")
    assert tiny.returncode == greedy.returncode == 0 and tiny.stderr == "", tiny.stderr
    want = printed(runs["gpt"], "我 吃 蘋果", expected(runs["gpt"], "我 吃 蘋果", 5, 0.0, None, 0))
    assert tiny.stdout == greedy.stdout == want and want.startswith("[我 吃 蘋果] ")


@pytest.mark.parametrize("name, prompt", [("gpt", "我 吃 蘋果"), ("llama", "我 吃 蘋果"), ("text", "the c"),
                                          ("bpe", "貓坐")])
def test_sample_prints_what_generate_gives(runs, name, prompt):
    if name not in runs:
        pytest.skip("--tokenizer bpe needs tokenizers (pip install -e '.[text]')")
    result = sample("--out", str(runs[name]), "--prompt", prompt, "--max-new-tokens", "7", "--temperature", "0.8",
                    "--top-k", "5", "--seed", "7")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    want = expected(runs[name], prompt, 7, 0.8, 5, 7)
    assert result.stdout == printed(runs[name], prompt, want)
    if name != "bpe":  # a BPE token is one to four bytes
        pieces = list(want) if name == "text" else want.split()
        assert len(pieces) == 7


def recorded_prints(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """What sample.py prints, call by call: (text, end, flush)."""
    writes: list[tuple] = []
    monkeypatch.setattr(sample_module, "print", lambda *a, end="\n", flush=False: writes.append((*a, end, flush)),
                        raising=False)
    return writes


def test_sample_streams_each_piece_as_it_is_sampled(runs, monkeypatch):
    """A text checkpoint: the prompt, then one write per new character, each flushed; together, the whole
    continuation."""
    writes = recorded_prints(monkeypatch)
    assert sample_module.sample_main(["--out", str(runs["text"]), "--prompt", "the c", "--max-new-tokens", "6",
                                      "--top-k", "1"]) == 0
    assert writes[0] == ("[the c]", "", False) and len(writes) == 8 and writes[7] == ("\n", True)
    assert all(flush and end == "" for _, end, flush in writes[1:7])
    assert "".join(piece for piece, _, _ in writes[1:7]) == expected(runs["text"], "the c", 6, 1.0, 1, 1337)


def test_a_text_model_samples_a_paragraph_by_default(runs):
    result = sample("--out", str(runs["text"]), "--prompt", "the c", "--top-k", "1")
    assert result.returncode == 0, result.stderr
    prompt, text = result.stdout.split("]", 1)
    assert prompt == "[the c" and len(text) == sample_module.TEXT_NEW_TOKENS + 1  # characters, and the newline


def test_a_character_split_over_bpe_tokens_waits_until_it_is_whole(monkeypatch):
    pytest.importorskip("tokenizers", reason="needs tokenizers (pip install -e '.[text]')")
    bpe = BPETokenizer.train("plain ascii text only " * 20, vocab_size=260)
    ids = bpe.encode("a貓🐈b")  # no merges for these: a byte each, 1 + 3 + 4 + 1 tokens
    assert len(ids) == 9
    for upto, pieces in ((9, ["a", "貓", "🐈", "b", ""]), (3, ["a", "\ufffd", ""])):  # 3: 貓 never completed
        writes = recorded_prints(monkeypatch)
        stream = sample_module.Stream(bpe.decode, [], None, in_context=False)
        for n in range(1, upto + 1):
            stream(np.array([ids[:n]]))  # as generate calls it: the ids so far
        stream.end()
        assert [w[0] if len(w) == 3 else "" for w in writes] == pieces


def test_greedy_sentences_complete_the_passive_clause(runs):
    """40 steps are enough for the easy part: after `我 吃 蘋果` comes `，`."""
    for name in ("gpt", "llama"):
        result = sample("--out", str(runs[name]), "--prompt", "我 吃 蘋果", "--top-k", "1")
        assert result.returncode == 0, result.stderr
        prompt, words = result.stdout.split("] ")[0], result.stdout.split("] ")[1].split()
        assert prompt == "[我 吃 蘋果" and len(words) == 6 and words[0] == "，", (name, words)  # an answer's length


def test_sampling_is_seeded(runs):
    argv = ["--out", str(runs["llama"]), "--prompt", "我", "--max-new-tokens", "8", "--temperature", "3"]
    first = sample(*argv, "--seed", "1").stdout
    assert sample(*argv, "--seed", "1").stdout == first
    assert any(sample(*argv, "--seed", str(s)).stdout != first for s in (2, 3, 4))


def test_a_prompt_longer_than_the_block_is_cropped_to_its_last_block_size_tokens(runs):
    words = "我 吃 蘋果 ， 蘋果 被 我 吃 了 他 喝 茶".split()  # 12 tokens; the block holds 8
    argv = ["--out", str(runs["gpt"]), "--max-new-tokens", "4", "--top-k", "1"]
    cropped = sample(*argv, "--prompt", " ".join(words[-8:]))
    assert cropped.returncode == 0
    assert sample(*argv, "--prompt", " ".join(words)).stdout == cropped.stdout  # shown cropped, as it was read
    assert cropped.stdout.startswith("[" + " ".join(words[-8:]) + "] ")


def test_no_new_tokens_prints_the_prompt_alone(runs):
    result = sample("--out", str(runs["gpt"]), "--prompt", "我", "--max-new-tokens", "0")
    assert result.returncode == 0 and result.stdout == "[我]\n"


@pytest.mark.parametrize("name, prompt, bad", [("gpt", "我 吃 火車", "token '火車'"),
                                               ("text", "the zebra", "character 'z'")])
def test_a_token_outside_the_vocabulary_is_refused_by_name(runs, name, prompt, bad):
    result = sample("--out", str(runs[name]), "--prompt", prompt)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and result.stdout == "" and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"train.py sample: error: --prompt: unknown {bad}")


@pytest.mark.parametrize("argv, message", [
    (["--temperature", "0"], "--temperature must be a finite number above 0, got 0.0"),
    (["--temperature", "-1"], "--temperature must be a finite number above 0, got -1.0"),
    (["--temperature", "nan"], "--temperature must be a finite number above 0, got nan"),
    (["--temperature", "inf"], "--temperature must be a finite number above 0, got inf"),
    (["--top-k", "0"], "--top-k must be 1 or more, got 0"),
    (["--max-new-tokens", "-1"], "--max-new-tokens must be 0 or more, got -1"),
    (["--seed", "-3"], "--seed must be 0 or more, got -3"),
    (["--prompt", ""], "--prompt has no tokens"),
    (["--prompt", "   "], "--prompt has no tokens"),
])
def test_bad_values_exit_2_in_one_line(runs, argv, message):
    result = sample("--out", str(runs["gpt"]), *argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and result.stdout == "" and len(lines) == 1, result.stderr
    assert message in lines[0]


def test_a_folder_without_a_checkpoint_is_refused(tmp_path):
    result = sample("--out", str(tmp_path))
    assert result.returncode == 2 and "no checkpoint at" in result.stderr and "Traceback" not in result.stderr


def test_sample_py_runs_on_its_own(runs):
    result = subprocess.run([sys.executable, "sample.py", "--out", str(runs["llama"]), "--top-k", "1"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and len(result.stdout.split("] ", 1)[1].split()) == 6, result.stderr

"""The command line never ends in a traceback: every value that cannot work is refused in one line with
exit status 2 before any work starts; a diverging run stops with the last good checkpoint kept; every command the
docs show runs from the repository root. (Two runs into one folder: tests/test_train.py, with the killed run.) Real
processes where the point is what a user sees (stderr, exit status, pipes), train.main in-process where that is
enough.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
import train
from gptlab import checkpoint, run
from gptlab.checkpoint import load_checkpoint
from gptlab.settings import CHECKPOINT
from gptlab.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--batch-size", "16", "--samples", "0",
         "--no-explain", "--eval-interval", "20"]


def run_main(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = train.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_script(*argv: str, script: str = "train.py") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- arguments that cannot work: one line, exit status 2, nothing written ----

@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "--seed must be 0 or more, got -1"),
    (["--lr", "nan"], "--lr must be a finite number above 0, got nan"),
    (["--lr", "inf"], "--lr must be a finite number above 0, got inf"),
    (["--lr", "-1"], "--lr must be a finite number above 0"),
    (["--weight-decay", "nan"], "--weight-decay must be a finite number, 0 or more, got nan"),
    (["--weight-decay", "-0.1"], "--weight-decay must be a finite number, 0 or more"),
    (["--grad-clip", "0"], "--grad-clip must be a finite number above 0"),
    (["--warmup", "-5"], "--warmup must be 0 or more"),
    (["--samples", "-1"], "--samples must be 0 or more, got -1"),
    (["--n-embd", "16777216", "--n-head", "1"], "GiB available"),  # 3e15 parameters
    (["--block-size", "64"], "--block-size 64 is more than task 'sentences' can use: its sequences are 8 tokens"),
    (["--batch-size", str(10**10)], "GiB available"),  # activations
])
def test_bad_values_exit_2_before_any_work(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    code, stdout, err = run_main(capsys, *argv, "--out", str(out))
    assert code == 2 and message in one_line(err)
    assert stdout == "" and not out.exists(), "a refused run must not create --out"


def test_memory_refusal_states_the_estimate(tmp_path, capsys):
    code, _, err = run_main(capsys, "--n-embd", "16777216", "--n-head", "1", "--out", str(tmp_path / "run"))
    C, vocab, block = 2**24, len(make_task("sentences").vocab), 8  # the default task and preset (2 layers)
    params = (vocab + block) * C + 2 * (12 * C * C + 13 * C) + 2 * C
    assert code == 2 and f"{params:,} parameters" in err


def test_out_that_is_a_file_or_cannot_be_created(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("not a folder")
    code, _, err = run_main(capsys, "--steps", "1", "--out", str(a_file), *SMALL)
    assert code == 2 and "is a file, not a folder" in one_line(err)
    code, _, err = run_main(capsys, "--steps", "1", "--out", str(a_file / "run"), *SMALL)
    assert code == 2 and "cannot be created" in one_line(err)
    assert a_file.read_text() == "not a folder"


def test_resume_of_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / CHECKPOINT).write_bytes(b"not a zip file at all")
    code, _, err = run_main(capsys, "--resume", "--out", str(tmp_path))
    assert code == 2 and "not a readable minigrad checkpoint" in one_line(err)

    mg.save({"weights": np.zeros(3)}, tmp_path / CHECKPOINT)  # a valid file, but not train.py's
    code, _, err = run_main(capsys, "--resume", "--out", str(tmp_path))
    assert code == 2 and "is not a checkpoint of this train.py: model, optim, step, settings" in one_line(err)
    code, _, err = run_main(capsys, "explain", "--out", str(tmp_path))
    assert code == 2 and "is not a checkpoint of this train.py" in one_line(err)


def test_resume_of_a_checkpoint_with_settings_that_cannot_work(tmp_path, capsys):
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    ckpt = load_checkpoint(str(tmp_path))
    ckpt["settings"]["lr"] = float("nan")
    mg.save(ckpt, tmp_path / CHECKPOINT)
    code, _, err = run_main(capsys, "--resume", "--out", str(tmp_path))
    assert code == 2 and "is not a usable checkpoint: --lr must be a finite number" in one_line(err)
    ckpt["settings"]["lr"], ckpt["settings"]["preset"] = 1e-3, "huge"
    mg.save(ckpt, tmp_path / CHECKPOINT)
    code, _, err = run_main(capsys, "explain", "--out", str(tmp_path))
    assert code == 2 and "--preset 'huge' is not one of tiny, small, medium" in one_line(err)


def test_help_names_the_data_flag():
    text = run.build_parser().format_help()
    assert "(--data FILE)" in text and "data=path" not in text


# ---- a diverging run ----

def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    result = run_script("--lr", "1e6", "--steps", "50", "--checkpoint-interval", "1", "--out", str(tmp_path), *SMALL)
    line = one_line(result.stderr)  # no NumPy overflow warnings either
    assert result.returncode == 1 and "final:" not in result.stdout
    failed = int(re.search(r"at step (\d+)", line).group(1))
    kept = int(re.search(r"the last good checkpoint, step (\d+), is kept", line).group(1))
    assert "training diverged" in line and kept == failed - 1
    ckpt = load_checkpoint(str(tmp_path))
    assert ckpt["step"] == kept
    assert all(np.isfinite(w).all() for w in ckpt["model"].values())


def test_diverging_resume_leaves_the_checkpoint_untouched(tmp_path, capsys):
    assert run_main(capsys, "--steps", "3", "--out", str(tmp_path), *SMALL)[0] == 0
    before = (tmp_path / CHECKPOINT).read_bytes()
    code, out, err = run_main(capsys, "--resume", "--lr", "1e6", "--steps", "40", "--out", str(tmp_path))
    assert code == 1 and "final:" not in out
    assert "diverged" in one_line(err) and "the last good checkpoint, step 3, is kept" in err
    assert (tmp_path / CHECKPOINT).read_bytes() == before


def test_a_checkpoint_that_cannot_be_written_ends_in_one_line(tmp_path, capsys, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.mg, "save", disk_full)
    code, _, err = run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)
    assert code == 1 and "cannot write the checkpoint" in one_line(err) and "No space left" in err


@pytest.mark.parametrize("error, code, message", [
    (KeyboardInterrupt, 130, "train.py: interrupted"),  # a second Ctrl-C: stop at once
    (MemoryError("Unable to allocate 9 GiB"), 1, "out of memory (Unable to allocate 9 GiB)"),
])
def test_interrupts_and_memory_errors_end_in_one_line(tmp_path, capsys, monkeypatch, error, code, message):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(train, "train_step", fail)
    result, _, err = run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)
    assert result == code and message in one_line(err)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---- the text task's tokenizer ----

def test_resume_after_the_data_file_changed_is_refused(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text("the cat sat on the mat. " * 20, encoding="utf-8")
    out = str(tmp_path / "run")
    argv = ["--task", "text", "--data", str(data), "--block-size", "16", "--out", out, *SMALL]
    assert run_main(capsys, *argv, "--steps", "2")[0] == 0
    data.write_text("the bat sat on the mat. " * 20, encoding="utf-8")  # a character the tokenizer never saw
    before = (tmp_path / "run" / CHECKPOINT).read_bytes()
    code, _, err = run_main(capsys, "--resume", "--steps", "4", "--out", out)
    assert code == 2 and "does not fit the tokenizer: unknown character 'b'" in one_line(err)
    assert f"was --data {data} changed since? Start a new run with another --out" in err
    code, _, err = run_main(capsys, "explain", "--out", out)
    assert code == 2 and "unknown character 'b'" in one_line(err)
    assert (tmp_path / "run" / CHECKPOINT).read_bytes() == before
    data.write_text("the sat on the mat. " * 25, encoding="utf-8")  # no new character (one fewer): the ids hold
    assert run_main(capsys, "--resume", "--steps", "4", "--out", out)[0] == 0


# ---- explain ----

def test_explain_png_into_a_missing_folder_or_a_folder(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    files = sorted(os.listdir(tmp_path))
    code, out, err = run_main(capsys, "explain", "--out", str(tmp_path), "--png", str(tmp_path / "no" / "a.png"))
    assert code == 2 and "does not exist" in one_line(err) and out == ""  # refused before printing anything
    code, out, err = run_main(capsys, "explain", "--out", str(tmp_path), "--png", str(tmp_path))
    assert code == 2 and "is a folder" in one_line(err) and out == ""
    assert sorted(os.listdir(tmp_path)) == files


def test_explain_html_into_a_missing_folder_or_a_folder(tmp_path, capsys):
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    files = sorted(os.listdir(tmp_path))
    code, out, err = run_main(capsys, "explain", "--out", str(tmp_path), "--html", str(tmp_path / "no" / "a.html"))
    assert code == 2 and "--html" in one_line(err) and "does not exist" in err and out == ""
    code, out, err = run_main(capsys, "explain", "--out", str(tmp_path), "--html", str(tmp_path))
    assert code == 2 and "is a folder" in one_line(err) and "attention.html" in err and out == ""
    assert sorted(os.listdir(tmp_path)) == files


def test_explain_html_that_fails_to_write_leaves_no_file(tmp_path, capsys, monkeypatch):
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    page = tmp_path / "a.html"
    page.write_text("the page of an earlier run", encoding="utf-8")
    files = sorted(os.listdir(tmp_path))

    def half_written(self, text, **kwargs):
        open(self, "w", encoding="utf-8").write(text[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_written)
    code, _, err = run_main(capsys, "explain", "--out", str(tmp_path), "--html", str(page))
    assert code == 2 and "cannot write --html" in one_line(err) and "No space left" in err
    assert sorted(os.listdir(tmp_path)) == files  # no temporary file
    assert page.read_text(encoding="utf-8") == "the page of an earlier run"  # the old page, whole


def test_explain_png_that_fails_to_write_leaves_no_file(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    from matplotlib.figure import Figure

    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    files = sorted(os.listdir(tmp_path))

    def half_written(self, fname, **kwargs):
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half_written)
    code, _, err = run_main(capsys, "explain", "--out", str(tmp_path), "--png", str(tmp_path / "a.png"))
    assert code == 2 and "cannot write --png" in one_line(err)
    assert sorted(os.listdir(tmp_path)) == files  # neither a.png nor its temporary file


# ---- nothing written over a file the command reads or the run keeps; prompts that are not UTF-8 ----

@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> tuple[Path, Path]:
    """--out of a BPE text run trained twice (the first checkpoint kept as ckpt-<date>.npz), and its --data."""
    pytest.importorskip("tokenizers", reason="byte-level BPE needs tokenizers (pip install -e '.[text]')")
    root = tmp_path_factory.mktemp("text_run")
    data, out = root / "data.txt", root / "run"
    data.write_text("the cat sat on the mat. " * 20, encoding="utf-8")
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()):
            assert train.main(["--task", "text", "--data", str(data), "--tokenizer", "bpe", "--vocab-size", "260",
                               "--block-size", "16", "--steps", "2", "--out", str(out), *SMALL]) == 0
    return out, data


def contents(*paths: Path) -> dict[Path, bytes]:
    """Every file of the folders or files given, by path: what a refused command must leave as it was."""
    files = [f for p in paths for f in (sorted(p.iterdir()) if p.is_dir() else [p])]
    return {f: f.read_bytes() for f in files}


@pytest.mark.parametrize("flag", ["--html", "--png"])
def test_explain_writes_over_no_file_it_reads_and_no_file_of_the_run(text_run, tmp_path, capsys, flag):
    """`explain --out d --html d/ckpt.npz` replaced the run's only checkpoint with the page, and exited 0."""
    if flag == "--png":
        pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    out, data = text_run
    [kept] = out.glob("ckpt-*.npz")
    (tmp_path / "link").symlink_to(out / CHECKPOINT)
    before = contents(out, data, tmp_path)
    for target, what in [(out / CHECKPOINT, "the checkpoint of the run"), (out / ".." / "run" / CHECKPOINT,
                         "the checkpoint of the run"), (tmp_path / "link", "the checkpoint of the run"),
                         (kept, "a checkpoint the run in"), (out / "train.lock", "the lock of the run"),
                         (data, "--data of the run, the text explain reads")]:
        code, stdout, err = run_main(capsys, "explain", "--out", str(out), flag, str(target))
        assert code == 2 and stdout == "" and f"{flag} {target} is {what}" in one_line(err)
        assert "writing there would replace it: choose another file name, or give --overwrite" in err
    assert contents(out, data, tmp_path) == before and (tmp_path / "link").is_symlink()


def test_explain_overwrite_replaces_on_purpose_and_two_flags_never_share_a_file(text_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(text_run[0], out)
    [kept] = out.glob("ckpt-*.npz")
    code, _, err = run_main(capsys, "explain", "--out", str(out), "--html", str(kept), "--overwrite")
    assert code == 0 and kept.read_text(encoding="utf-8").startswith("<!doctype html>"), err
    before = contents(out)
    for flags in (["--html", str(tmp_path / "a")], ["--html", str(tmp_path / "a"), "--overwrite"]):
        code, stdout, err = run_main(capsys, "explain", "--out", str(out), "--png", str(tmp_path / "a"), *flags)
        assert code == 2 and stdout == "" and f"--html {tmp_path / 'a'} is also the file of --png" in one_line(err)
    assert contents(out) == before and not (tmp_path / "a").exists()


def test_training_never_writes_its_checkpoint_over_its_data(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    data = out / CHECKPOINT  # the text a fresh run would have moved aside as an earlier checkpoint
    data.write_text("the cat sat on the mat. " * 20, encoding="utf-8")
    code, stdout, err = run_main(capsys, "--task", "text", "--data", str(data), "--block-size", "16", "--out",
                                 str(out), *SMALL)
    assert code == 2 and stdout == ""
    assert f"the checkpoint {data} is --data, the text the run reads" in one_line(err) and "another --out" in err
    assert contents(out) == {data: b"the cat sat on the mat. " * 20}  # no lock, no checkpoint


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy_run")
    with contextlib.redirect_stdout(io.StringIO()):
        assert train.main(["--steps", "2", "--out", str(out), *SMALL]) == 0
    return out


NOT_UTF8 = b"\xe6\x88\x91 a\xff".decode("utf-8", "surrogateescape")  # 我 and a byte that is no UTF-8: 'a\udcff'


@pytest.mark.parametrize("command", ["sample", "explain"])
@pytest.mark.parametrize("which", ["toy", "bpe"])
def test_a_prompt_that_is_not_utf8_is_refused_alike_by_every_tokenizer(toy_run, text_run, capsys, command, which):
    """BPE and Hugging Face tokenizers ended in `TypeError: TextInputSequence must be str`."""
    out = toy_run if which == "toy" else text_run[0]
    code, stdout, err = run_main(capsys, command, "--out", str(out), "--prompt", NOT_UTF8)
    assert code == 2 and stdout == ""
    assert one_line(err).endswith("error: --prompt: the text is not valid UTF-8: the bytes b'\\xff' at character 3 "
                                  "of '我 a\\udcff'; give text in UTF-8 (a terminal or file in another encoding?)")


def test_a_prompt_s_bytes_from_the_command_line(text_run):
    result = run_script("sample", "--out", str(text_run[0]), "--prompt", b"the \xff")  # as a shell passes them
    assert result.returncode == 2 and "the bytes b'\\xff' at character 4" in one_line(result.stderr)


@pytest.mark.parametrize("argv", [["sample"], ["explain", "--html"], ["--resume", "--steps", "4"]])
def test_a_checkpoint_with_non_finite_weights_is_refused(toy_run, tmp_path, capsys, argv):
    """train.py never saves such weights; a crafted or damaged file ended in tracebacks where they were used."""
    out = tmp_path / "run"
    shutil.copytree(toy_run, out)
    ckpt = mg.load(out / CHECKPOINT)
    ckpt["model"]["blocks.0.mlp.fc.weight"][1, 2] = np.inf
    mg.save(ckpt, out / CHECKPOINT)
    before = contents(out)
    page = [str(tmp_path / "page.html")] if argv[-1] == "--html" else []
    code, stdout, err = run_main(capsys, *argv[:1], "--out", str(out), *argv[1:], *page)
    assert code == 2 and "tensor 'blocks.0.mlp.fc.weight' has 1 non-finite values (inf or NaN)" in one_line(err)
    assert contents(out) == before and not (tmp_path / "page.html").exists()


def test_train_py_explain_runs_in_a_real_process(tmp_path, capsys):
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    result = run_script("explain", "--out", str(tmp_path), "--prompt", "我 吃 蘋果", "--layer", "0")
    assert result.returncode == 0 and "Attention in layer 0" in result.stdout, result.stderr
    result = run_script("explain", "--out", str(tmp_path), "--layer", "9")
    assert result.returncode == 2 and one_line(result.stderr).startswith("train.py explain: error: --layer 9")


DOCUMENTED = re.compile(r"python ([\w/]+\.py)(?: ([a-z]+)\b)?|python -m ([\w.]+)")  # `python train.py sample ...`


def documented_commands() -> tuple[set[tuple[str, ...]], set[str]]:
    """The scripts (with their subcommand) and the modules that README.md and docs/*.md tell a reader to run."""
    scripts, modules = set(), set()
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for script, subcommand, module in DOCUMENTED.findall(doc.read_text(encoding="utf-8")):
            if module:
                modules.add(module)
            else:
                scripts.add((script, subcommand) if subcommand else (script,))
    return scripts, modules


def test_the_docs_name_the_root_s_commands():
    scripts, modules = documented_commands()
    assert {("train.py",), ("train.py", "explain"), ("train.py", "sample"), ("sample.py",)} <= scripts
    assert {"benchmarks.bench", "minigrad.gradcheck_cases"} <= modules


@pytest.mark.parametrize("command", sorted(documented_commands()[0]), ids=" ".join)
def test_every_documented_command_runs_from_the_root(command):
    result = run_script(*command[1:], "--help", script=command[0])
    assert result.returncode == 0 and result.stdout.startswith(f"usage: {' '.join(command)} "), result.stderr


@pytest.mark.parametrize("module", sorted(documented_commands()[1]))
def test_every_documented_module_is_there(module):
    assert importlib.util.find_spec(module) is not None, f"the docs run python -m {module}, which is not there"


def test_a_reader_that_goes_away_is_not_a_traceback(tmp_path, capsys):
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    proc = subprocess.Popen([sys.executable, "train.py", "explain", "--out", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # as `| head` does, before the first line is written
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 1 and err == ""

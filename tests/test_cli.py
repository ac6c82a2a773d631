"""The command line never ends in a traceback: every value that cannot work is refused in one line with
exit status 2 before any work starts; a diverging run stops with the last good checkpoint kept; every command the
docs show runs from the repository root. (Two runs into one folder: tests/test_train.py, with the killed run.) Real
processes where the point is what a user sees (stderr, exit status, pipes), train.main in-process where that is
enough.
"""

from __future__ import annotations

import contextlib
import hashlib
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


# ---- a run that dies, for any reason, leaves the last good checkpoint where sample and --resume look ----

def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def fail_on_write(monkeypatch: pytest.MonkeyPatch, nth: int, error: BaseException) -> None:
    """mg.save's nth array written raises `error`, half way through a checkpoint file (a full disk, a second Ctrl-C)."""
    write_array, calls = np.lib.format.write_array, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            raise error
        return write_array(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing)


@pytest.mark.parametrize("error, code, said", [
    (OSError(28, "No space left on device"), 1, "cannot write the checkpoint"),
    (KeyboardInterrupt(), 130, "train.py: interrupted"),
    (RuntimeError("a bug"), None, None),  # an error nobody foresaw: a traceback, and the file as it was
])
def test_a_save_that_fails_half_way_keeps_the_earlier_checkpoint_in_place(tmp_path, capsys, monkeypatch, error, code,
                                                                        said):
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    before = md5(tmp_path / CHECKPOINT)
    fail_on_write(monkeypatch, 5, error)
    if code is None:
        with pytest.raises(RuntimeError, match="a bug"):
            train.main(["--task", "sort", "--steps", "3", "--out", str(tmp_path), *SMALL])
    else:
        result, out, err = run_main(capsys, "--task", "sort", "--steps", "3", "--out", str(tmp_path), *SMALL)
        assert result == code and said in one_line(err) and "was kept as" not in out
        if code == 1:
            assert f"no checkpoint of this run was written, and {tmp_path / CHECKPOINT} still holds the earlier " \
                   "run's" in err
    monkeypatch.undo()
    assert md5(tmp_path / CHECKPOINT) == before  # byte for byte the earlier run's
    # no temporary file, no kept copy of it; the earlier run's metrics log stays beside it
    assert sorted(os.listdir(tmp_path)) == sorted([CHECKPOINT, run.LOCK, run.METRICS])
    assert load_checkpoint(str(tmp_path))["step"] == 2
    assert run_main(capsys, "sample", "--out", str(tmp_path), "--max-new-tokens", "4")[0] == 0
    assert run_main(capsys, "--resume", "--steps", "3", "--out", str(tmp_path))[0] == 0


def test_the_earlier_checkpoint_goes_aside_when_the_first_new_one_is_saved(tmp_path, capsys, monkeypatch):
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    before, log_before = md5(tmp_path / CHECKPOINT), (tmp_path / run.METRICS).read_text()
    arrays = len(np.load(tmp_path / CHECKPOINT).files)  # one write_array call per entry of a checkpoint
    fail_on_write(monkeypatch, arrays + 3, OSError(28, "No space left on device"))  # in the second new checkpoint
    code, out, err = run_main(capsys, "--task", "sort", "--steps", "4", "--checkpoint-interval", "1", "--out",
                              str(tmp_path), *SMALL)
    monkeypatch.undo()
    [kept] = re.findall(r"note: the earlier \S+ was kept as (ckpt-[\d-]+\.npz)", out)
    assert code == 1 and f"the last good checkpoint, step 1, is kept in {tmp_path / CHECKPOINT}" in one_line(err)
    [kept_log] = tmp_path.glob("metrics-*.csv")  # the earlier run's log goes aside with its checkpoint
    assert md5(tmp_path / kept) == before and kept_log.read_text() == log_before
    assert sorted(os.listdir(tmp_path)) == sorted([CHECKPOINT, kept, run.LOCK, run.METRICS, kept_log.name])
    assert load_checkpoint(str(tmp_path))["step"] == 1


def test_a_pipe_closed_by_its_reader_stops_the_run_in_one_line_and_keeps_the_checkpoint(tmp_path, capsys):
    """`python train.py | head -2` exited 1 with nothing on stderr, the earlier checkpoint already moved aside."""
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    before = md5(tmp_path / CHECKPOINT)
    proc = subprocess.Popen([sys.executable, "train.py", "--task", "sort", "--steps", "400", "--out", str(tmp_path),
                             *SMALL, "--eval-interval", "1", "--eval-iters", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = [proc.stdout.readline() for _ in range(2)]  # as `| head -2` reads
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert head[0].startswith("task sort") and head[1].startswith("model: ")
    assert proc.returncode == 1 and "Traceback" not in err
    line = one_line(err.split("\r")[-1])  # after the progress bar, if it drew
    assert "the output was closed by its reader (a pipe such as `| head`), so the run stopped" in line
    if md5(tmp_path / CHECKPOINT) == before:  # stopped before its first checkpoint: the earlier one is in place
        assert f"{tmp_path / CHECKPOINT} still holds the earlier run's" in line
    else:
        assert "the last good checkpoint, step" in line
    assert load_checkpoint(str(tmp_path))["step"] >= 1
    assert run_main(capsys, "sample", "--out", str(tmp_path), "--max-new-tokens", "4")[0] == 0


def test_sigterm_saves_a_fresh_run_and_keeps_the_earlier_checkpoint(tmp_path, capsys):
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    before = md5(tmp_path / CHECKPOINT)
    proc = subprocess.Popen([sys.executable, "train.py", "--task", "sort", "--steps", "100000", "--out", str(tmp_path),
                             *SMALL], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    while not proc.stdout.readline().startswith("model: "):  # training has begun
        pass
    proc.send_signal(signal.SIGTERM)
    out = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, out
    [kept] = re.findall(r"note: the earlier \S+ was kept as (ckpt-[\d-]+\.npz)", out)
    step = int(re.search(r"stopped at step (\d+); checkpoint saved", out).group(1))
    assert md5(tmp_path / kept) == before and load_checkpoint(str(tmp_path))["step"] == step


# ---- resuming, flags and --data as a new user meets them ----

def test_resume_to_fewer_steps_than_the_checkpoint_is_refused_and_to_as_many_trains_nothing(tmp_path, capsys):
    assert run_main(capsys, "--task", "sort", "--steps", "3", "--out", str(tmp_path), *SMALL)[0] == 0
    before = md5(tmp_path / CHECKPOINT)
    code, out, err = run_main(capsys, "--resume", "--steps", "1", "--out", str(tmp_path))
    assert code == 2 and out == "" and one_line(err) == (
        "train.py: error: --steps 1 is fewer than the checkpoint's 3 steps: --steps counts every step of the run, "
        "those before --resume too; to train 1 more, give --steps 4")
    code, out, err = run_main(capsys, "--resume", "--steps", "3", "--out", str(tmp_path))
    assert code == 0 and err == "" and "nan" not in out and "final:" not in out
    assert out.strip() == f"resumed from {tmp_path / CHECKPOINT} at step 3: --steps 3 is already reached, nothing " \
                          "to train; a larger --steps trains on"
    assert md5(tmp_path / CHECKPOINT) == before


def test_a_flag_is_taken_only_as_written(tmp_path, capsys):
    """argparse's prefix matching took --step 5 as --steps 5 (and --n 5 would be ambiguous, --dat x --data x)."""
    for command in ([], ["sample"], ["explain"]):
        with pytest.raises(SystemExit) as stop:
            train.main([*command, "--out", str(tmp_path), "--step" if not command else "--promp", "5"])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert stop.value.code == 2 and "unrecognized arguments: " in err
        assert f"(did you mean {'--steps' if not command else '--prompt'}? flags are taken only as written)" in err
    assert not os.listdir(tmp_path)


def test_resume_names_what_the_checkpoint_had_where_a_model_flag_differs(tmp_path, capsys):
    out = str(tmp_path / "run")
    small = SMALL[SMALL.index("--n-layer"):]  # the preset's width and heads
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", out, *small)[0] == 0
    code, _, err = run_main(capsys, "--resume", "--n-embd", "128", "--out", out)
    assert code == 2 and one_line(err) == ("train.py: error: --n-embd 128 differs from the checkpoint's 64 (--preset "
                                           "tiny); drop the flag to resume, or start a new run with another --out")
    code, _, err = run_main(capsys, "--resume", "--block-size", "9", "--out", out)
    assert code == 2 and "--block-size 9 differs from the checkpoint's none (the task's length)" in one_line(err)
    assert run_main(capsys, "--resume", "--n-embd", "64", "--steps", "3", "--out", out)[0] == 0  # the same width


@pytest.mark.parametrize("data, message", [
    ("folder", "--data {tmp}/folder is a folder; give a text file, such as {tmp}/folder/input.txt"),
    ("empty.txt", "--data {tmp}/empty.txt is empty; give a file with the text to learn from"),
    (None, "--task text needs --data FILE: the UTF-8 text to learn from (nanoGPT's input.txt)"),
])
def test_data_that_cannot_be_learnt_from_is_named_with_its_flag(tmp_path, capsys, data, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.txt").write_bytes(b"")
    argv = ["--task", "text", *(["--data", str(tmp_path / data)] if data else []), "--out", str(tmp_path / "run")]
    code, out, err = run_main(capsys, *argv)
    assert code == 2 and out == "" and one_line(err) == f"train.py: error: {message.format(tmp=tmp_path)}"
    assert not (tmp_path / "run").exists()


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
    assert {("train.py",), ("train.py", "explain"), ("train.py", "sample"), ("train.py", "plot"), ("sample.py",)} \
        <= scripts
    assert {"benchmarks.bench", "minigrad.check.gradcheck_cases"} <= modules


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

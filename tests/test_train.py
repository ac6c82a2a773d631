"""train.py end to end: learning, CLI errors, checkpoints and resume, interruption, explain mode."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
import train
from gptlab import checkpoint, run
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.explain import explain_example
from gptlab.settings import CHECKPOINT, build_model, build_task, model_config
from gptlab.tasks import make_task
from minigrad.optim import decay_groups

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--batch-size", "16", "--samples", "0",
         "--no-explain", "--eval-interval", "20"]


def final_line(text: str) -> dict[str, float]:
    line = [ln for ln in text.splitlines() if ln.startswith("final: ")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e+na]+)", line)}


def run_main(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = train.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("arch", ["gpt", "llama"])
def test_training_lowers_the_loss(tmp_path, capsys, arch):
    code, out, _ = run_main(capsys, "--arch", arch, "--steps", "60", "--out", str(tmp_path), *SMALL)
    assert code == 0
    at_20 = float(re.search(r"step\s+20\s+train loss ([\d.]+)", out).group(1))
    result = final_line(out)
    uniform = np.log(len(make_task("sentences").vocab))  # what an untrained model scores
    assert result["step"] == 60
    assert result["train_loss"] < 0.75 * uniform and result["val_loss"] < 0.75 * uniform
    assert result["train_loss"] < at_20 - 0.5
    assert result["tokens_per_s"] > 0
    assert (tmp_path / CHECKPOINT).exists()


def test_default_run_prints_samples_and_explanation(tmp_path, capsys):
    code, out, _ = run_main(capsys, "--steps", "10", "--out", str(tmp_path), "--samples", "2")
    assert code == 0
    assert "held-out completions" in out and "Attention in layer" in out
    assert out.strip().splitlines()[-1].startswith("final: step=10 ")


@pytest.mark.parametrize("argv, message", [
    (["--n-embd", "30", "--n-head", "4"], "not divisible"),
    (["--n-head", "0"], "n_head must be a positive integer"),
    (["--arch", "llama", "--n-embd", "12", "--n-head", "4"], "head size n_embd // n_head = 3 must be even"),
    (["--dropout", "1.5"], "dropout must be in [0, 1)"),
    (["--task", "text", "--data", "/no/such/file.txt"], "--data /no/such/file.txt: no such file"),
    (["--task", "text"], "--task text needs --data FILE: the UTF-8 text to learn from"),
    (["--data", "README.md"], "--data README.md: --data is for --task text; task 'sentences' makes its own examples"),
    (["--block-size", "3"], "too small"),
    (["--device", "cuda"], "cuda"),
    (["--steps", "0"], "must be positive"),
    (["--resume"], "no checkpoint"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message):
    if argv == ["--device", "cuda"] and mg.cuda_available():
        pytest.skip("this machine has a GPU, so --device cuda is valid")
    code, out, err = run_main(capsys, *argv, "--out", str(tmp_path / "run"))
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_explain_errors_exit_2_in_a_real_process(tmp_path):
    """As a script, train.py explain and gptlab/explain.py must agree on the error class (no traceback)."""
    result = subprocess.run([sys.executable, "train.py", "explain", "--out", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no checkpoint" in result.stderr and "Traceback" not in result.stderr


def test_argparse_errors_exit_2():
    result = subprocess.run([sys.executable, "train.py", "--steps", "many"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "invalid int value" in result.stderr


def test_interrupted_run_resumes_to_the_same_result(tmp_path, capsys, monkeypatch):
    common = ["--task", "sort", "--steps", "30", "--dropout", "0.1", "--checkpoint-interval", "100", *SMALL]
    code, out, _ = run_main(capsys, *common, "--out", str(tmp_path / "whole"))
    assert code == 0
    whole = final_line(out)

    # the same run, sent a real SIGINT (Ctrl-C) during step 15: it finishes the step, saves, and exits 130
    calls = {"n": 0}
    clip = train.clip_grad_norm_

    def clip_then_interrupt(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 15:
            os.kill(os.getpid(), signal.SIGINT)
        return clip(*args, **kwargs)

    monkeypatch.setattr(train, "clip_grad_norm_", clip_then_interrupt)
    code, out, _ = run_main(capsys, *common, "--out", str(tmp_path / "split"))
    assert code == 130 and "stopped at step 15" in out
    monkeypatch.setattr(train, "clip_grad_norm_", clip)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the handler must be restored"

    code, out, _ = run_main(capsys, "--resume", "--out", str(tmp_path / "split"))
    assert code == 0 and "resumed from" in out
    resumed = final_line(out)
    assert resumed["step"] == whole["step"] == 30
    for key in ("train_loss", "val_loss", "val_acc"):
        assert resumed[key] == whole[key], key


def run_whole_and_old(capsys, tmp_path: Path, rewrite, task: tuple[str, ...] = ("--task", "sort")) -> dict:
    """A 12-step run into tmp_path/whole, and its first 6 steps into tmp_path/old, that checkpoint rewritten in an older
    format by `rewrite`: the whole run's final line. All 12 steps are in the warmup: the learning rate does not
    depend on --steps, which the first half runs with 6."""
    common = [*task, "--steps", "12", "--warmup", "12", "--checkpoint-interval", "6", *SMALL]
    code, out, _ = run_main(capsys, *common, "--out", str(tmp_path / "whole"))
    assert code == 0
    assert run_main(capsys, *common, "--steps", "6", "--out", str(tmp_path / "old"))[0] == 0
    rewrite(tmp_path / "old" / CHECKPOINT)
    return final_line(out)


def resume_old_as_whole(capsys, tmp_path: Path, whole: dict) -> str:
    """Resume tmp_path/old to step 12: it ends as the whole run did. What it printed."""
    code, out, _ = run_main(capsys, "--resume", "--steps", "12", "--out", str(tmp_path / "old"))
    assert code == 0
    resumed = final_line(out)
    for key in ("train_loss", "val_loss", "val_acc"):
        assert resumed[key] == whole[key], key
    return out


def as_format_5(path: Path) -> None:
    """Rewrite a checkpoint as minigrad 0.4 wrote it, before format 6: a Llama's norms named norm_1, norm_2 and norm_f,
    its config's head size head_dim (None where it is n_embd // n_head)."""
    ckpt = mg.load(path)
    assert ckpt["format"] == 6
    ckpt["format"] = 5
    old = {"ln_1": "norm_1", "ln_2": "norm_2", "ln_f": "norm_f"} if ckpt["settings"]["arch"] == "llama" else {}
    ckpt["model"] = {".".join(old.get(part, part) for part in name.split(".")): value
                     for name, value in ckpt["model"].items()}
    config = ckpt["config"]
    if "head_size" in config:
        head_size = config.pop("head_size")
        config["head_dim"] = None if head_size == config["n_embd"] // config["n_head"] else head_size
    mg.save(ckpt, path)


def test_a_llama_checkpoint_of_format_5_is_migrated_with_a_message_and_gives_the_same_logits(tmp_path, capsys):
    assert run_main(capsys, "--arch", "llama", "--steps", "3", "--out", str(tmp_path), *SMALL)[0] == 0
    _, model = restore(load_checkpoint(str(tmp_path)), "cpu")
    as_format_5(tmp_path / CHECKPOINT)
    assert {"blocks.0.norm_1.weight", "norm_f.weight"} <= set(mg.load(tmp_path / CHECKPOINT)["model"])
    capsys.readouterr()
    ckpt = load_checkpoint(str(tmp_path))
    message = capsys.readouterr().err.strip()
    assert "checkpoint format 5, read as format 6 (a Llama's norm_1, norm_2, norm_f are ln_1, ln_2, ln_f" in message
    assert len(message.splitlines()) == 1
    _, migrated = restore(ckpt, "cpu")
    assert migrated.config == model.config
    idx = np.random.default_rng(0).integers(0, model.config.vocab_size, (2, 5))
    with mg.no_grad():
        np.testing.assert_array_equal(migrated(idx)[0].numpy(), model(idx)[0].numpy())


def as_format_4(path: Path) -> None:
    """Rewrite a checkpoint as minigrad wrote it before format 5: no model config (the model was built from the
    settings) and no setting init_from."""
    as_format_5(path)
    ckpt = mg.load(path)
    assert ckpt["format"] == 5
    ckpt["format"] = 4
    del ckpt["config"], ckpt["settings"]["init_from"]
    mg.save(ckpt, path)


def test_a_checkpoint_of_format_4_resumes_and_samples_as_it_would_have(tmp_path, capsys):
    whole = run_whole_and_old(capsys, tmp_path, as_format_4)
    code, sampled, _ = run_main(capsys, "sample", "--out", str(tmp_path / "old"), "--max-new-tokens", "6")
    assert code == 0 and len(sampled.split("] ", 1)[1].split()) == 6  # after the prompt, in [brackets]
    resume_old_as_whole(capsys, tmp_path, whole)
    ckpt = mg.load(tmp_path / "old" / CHECKPOINT)  # written again by the resumed run: this format, with the config
    assert ckpt["format"] == checkpoint.FORMAT and ckpt["settings"]["init_from"] is None
    assert ckpt["config"] == mg.load(tmp_path / "whole" / CHECKPOINT)["config"]
    assert {s["step"] for s in ckpt["optim"]["state"].values()} == {12}  # format 4's optimizer state, as it was


def as_format_3(path: Path) -> None:
    """Rewrite a checkpoint as minigrad wrote it before format 4: the optimizer's state by position, {"step": one step
    for all, "lr": each group's, "buffers": {"0": {"m": exp_avg, "v": exp_avg_sq}, ...}}, no other group setting."""
    as_format_4(path)
    ckpt = mg.load(path)
    assert ckpt["format"] == 4
    optim_state = ckpt["optim"]
    steps = {s["step"] for s in optim_state["state"].values()}
    assert len(steps) == 1  # every parameter had a gradient at every step, as in train.py: one step for all
    ckpt["format"] = 3
    ckpt["optim"] = {"step": steps.pop(), "lr": [g["lr"] for g in optim_state["param_groups"]],
                     "buffers": {str(i): {"m": s["exp_avg"], "v": s["exp_avg_sq"]}
                                 for i, s in sorted(optim_state["state"].items())}}
    mg.save(ckpt, path)


def as_format_1(path: Path) -> None:
    """Rewrite a checkpoint as minigrad wrote it before format 2: no "format" entry, and each attention's W_Q, W_K,
    W_V as one (3C, C) matrix qkv, in the model and in the optimizer's buffers (which sat where q_proj sat)."""
    as_format_3(path)
    ckpt = mg.load(path)
    del ckpt["format"]
    model = ckpt["model"]
    names = [n for n in model if n.endswith(("weight", "bias"))]
    settings = ckpt["settings"]
    built = build_model(settings, model_config(settings, build_task(settings)), "cpu")
    order = [n for group in decay_groups(built.named_parameters(), 0.1) for n, q in built.named_parameters()
             if any(q is p for p in group["params"])]  # the optimizer's parameters, by name
    buffers, merged, i = ckpt["optim"]["buffers"], {}, 0
    while i < len(order):
        if ".attn.q_proj." in order[i]:
            merged[str(len(merged))] = {b: np.concatenate([buffers[str(i + k)][b] for k in range(3)])
                                        for b in buffers[str(i)]}
            i += 3
        else:
            merged[str(len(merged))] = buffers[str(i)]
            i += 1
    ckpt["optim"]["buffers"] = merged
    for name in [n for n in names if ".attn.q_proj." in n]:
        model[name.replace(".q_proj.", ".qkv.")] = np.concatenate(
            [model.pop(name.replace(".q_proj.", f".{part}.")) for part in ("q_proj", "k_proj", "v_proj")])
    mg.save(ckpt, path)


def test_a_checkpoint_of_format_1_resumes_and_explains_as_it_would_have(tmp_path, capsys):
    whole = run_whole_and_old(capsys, tmp_path, as_format_1)
    assert "qkv" in " ".join(mg.load(tmp_path / "old" / CHECKPOINT)["model"])
    resume_old_as_whole(capsys, tmp_path, whole)
    code, out, _ = run_main(capsys, "explain", "--out", str(tmp_path / "old"))
    assert code == 0 and "Attention in layer" in out


def as_format_2(path: Path) -> None:
    """Rewrite a checkpoint as minigrad wrote it in format 2: without the tokenizer, the best estimate and the settings
    added in format 3; the text task's block size unset (its windows were then always 32 characters)."""
    as_format_3(path)
    ckpt = mg.load(path)
    ckpt["format"] = 2
    del ckpt["tokenizer"], ckpt["best_val"]
    for key in checkpoint.NEW_IN_3:
        del ckpt["settings"][key]
    if ckpt["settings"]["task"] == "text":
        assert ckpt["settings"]["block_size"] == 31
        ckpt["settings"]["block_size"] = None
    mg.save(ckpt, path)


@pytest.mark.parametrize("task", ["sort", "text"])
def test_a_checkpoint_of_format_2_resumes_and_samples_as_it_would_have(tmp_path, capsys, task):
    data = tmp_path / "data.txt"
    data.write_text("".join(f"line {i}: the cat sat on the mat.\n" for i in range(60)), encoding="utf-8")
    argv = ("--task", "text", "--data", str(data), "--block-size", "31") if task == "text" else ("--task", "sort")
    whole = run_whole_and_old(capsys, tmp_path, as_format_2, argv)
    out = resume_old_as_whole(capsys, tmp_path, whole)
    assert "context 31 tokens" in out or task != "text"  # 32-character windows, as the run had
    ckpt = load_checkpoint(str(tmp_path / "old"))
    assert ckpt["format"] == checkpoint.FORMAT and ckpt["settings"]["grad_accum"] == 1
    for out_dir in ("old", "whole"):
        code, out, _ = run_main(capsys, "sample", "--out", str(tmp_path / out_dir), "--max-new-tokens", "8")
        assert code == 0
    assert run_main(capsys, "sample", "--out", str(tmp_path / "old"), "--max-new-tokens", "8")[1] == out


def test_a_checkpoint_of_format_3_resumes_as_it_would_have(tmp_path, capsys):
    """Format 3 kept one step for all parameters and only each group's lr: each parameter takes that step, each
    group the other settings of the optimizer train.py builds, and the run goes on as if never stopped."""
    whole = run_whole_and_old(capsys, tmp_path, as_format_3)
    assert set(mg.load(tmp_path / "old" / CHECKPOINT)["optim"]) == {"step", "lr", "buffers"}
    resume_old_as_whole(capsys, tmp_path, whole)
    ckpt = mg.load(tmp_path / "old" / CHECKPOINT)  # written again by the resumed run: in this format now
    assert ckpt["format"] == checkpoint.FORMAT and {s["step"] for s in ckpt["optim"]["state"].values()} == {12}
    assert [g["betas"] for g in ckpt["optim"]["param_groups"]] == [(0.9, 0.95)] * 2  # a tuple, as saved


def test_fresh_runs_into_one_out_keep_every_earlier_checkpoint(tmp_path, capsys):
    """Three fresh runs into one --out left no trace of the first run's checkpoint (each moved the last one to
    ckpt-previous.npz, over the one before). Each earlier checkpoint is kept, under the date it was written."""
    written = []
    for seed in ("1", "2", "3"):
        code, out, _ = run_main(capsys, "--task", "sort", "--steps", "1", "--seed", seed, *SMALL, "--out",
                                str(tmp_path))
        assert code == 0
        written.append(mg.load(tmp_path / CHECKPOINT)["model"]["wte.weight"])
        if seed != "1":
            [kept] = re.findall(r"note: the earlier \S+ was kept as (ckpt-[\d-]+\.npz)", out)
            np.testing.assert_array_equal(mg.load(tmp_path / kept)["model"]["wte.weight"], written[-2])
    names = sorted(p.name for p in tmp_path.glob("ckpt*.npz"))
    assert len(names) == 3 and CHECKPOINT in names
    kept = sorted((tmp_path / n for n in names if n != CHECKPOINT), key=os.path.getmtime)
    for path, weights in zip([*kept, tmp_path / CHECKPOINT], written, strict=True):
        np.testing.assert_array_equal(mg.load(path)["model"]["wte.weight"], weights)
    assert run_main(capsys, "--resume", "--steps", "2", "--out", str(tmp_path))[0] == 0  # resume: nothing moved
    assert sorted(p.name for p in tmp_path.glob("ckpt*.npz")) == names


def test_a_checkpoint_of_a_newer_format_is_refused(tmp_path, capsys):
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    ckpt = mg.load(tmp_path / CHECKPOINT)
    ckpt["format"] = 99
    mg.save(ckpt, tmp_path / CHECKPOINT)
    code, _, err = run_main(capsys, "--resume", "--out", str(tmp_path))
    assert code == 2 and f"has checkpoint format 99; this train.py reads formats 1 to {checkpoint.FORMAT}" in err


def test_resume_refuses_a_different_model(tmp_path, capsys):
    assert run_main(capsys, "--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    code, _, err = run_main(capsys, "--resume", "--n-embd", "32", "--out", str(tmp_path))
    assert code == 2 and "differs from the checkpoint" in err
    code, _, err = run_main(capsys, "--resume", "--arch", "llama", "--out", str(tmp_path))
    assert code == 2 and "--arch llama differs from the checkpoint's gpt" in err


def test_killed_run_leaves_the_last_checkpoint_readable_and_its_folder_free(tmp_path):
    """SIGKILL cannot be caught: what protects the checkpoint is the atomic write. While the run lives, a
    second run into its --out is refused; once it is dead, the lock file it left behind blocks nobody."""
    cmd = [sys.executable, "train.py", "--task", "sort", "--steps", "100000", "--checkpoint-interval", "1",
           "--out", str(tmp_path), *SMALL]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (tmp_path / CHECKPOINT).exists() and time.time() < deadline:
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "train.py", "--steps", "5", "--out", str(tmp_path), *SMALL],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        proc.kill()  # wherever it is, a few checkpoints later
    finally:
        proc.kill()
        proc.wait()
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert second.stderr.strip() == (f"train.py: error: --out {tmp_path} is in use by another train.py "
                                     f"(pid {proc.pid}); wait for it to end, or choose another --out")
    ckpt = load_checkpoint(str(tmp_path))
    assert ckpt["step"] >= 1 and "model" in ckpt
    assert (tmp_path / run.LOCK).read_text().strip() == str(proc.pid)  # left behind, but no longer locked
    third = subprocess.run([sys.executable, "train.py", "--resume", "--steps", str(ckpt["step"]), "--out",
                            str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0 and "already reached" in third.stdout, third.stderr


def test_ctrl_c_in_a_real_process_saves_and_exits_130(tmp_path):
    cmd = [sys.executable, "train.py", "--task", "sort", "--steps", "100000", "--checkpoint-interval", "5",
           "--out", str(tmp_path), *SMALL]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (tmp_path / CHECKPOINT).exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    step = int(re.search(r"stopped at step (\d+)", out).group(1))
    assert load_checkpoint(str(tmp_path))["step"] == step


def test_explain_weights_sum_to_one_and_are_zero_when_masked(tmp_path, capsys):
    assert run_main(capsys, "--steps", "20", "--out", str(tmp_path), *SMALL)[0] == 0
    code, out, _ = run_main(capsys, "explain", "--out", str(tmp_path), "--prompt", "我 吃 蘋果", "--query", "1",
                            "--layer", "0", "--head", "1")
    assert code == 0
    rows = re.findall(r"^\s+(\d+)\s+\S+\s+(-?[\d.]+)\s+(kept|-inf)\s+([\d.]+)%", out, flags=re.M)
    assert [int(r[0]) for r in rows] == [0, 1, 2]
    weights = {int(r[0]): float(r[3]) / 100 for r in rows}
    assert [r[2] for r in rows] == ["kept", "kept", "-inf"]
    assert weights[2] == 0.0
    assert abs(weights[0] + weights[1] - 1) < 2e-3  # printed to 0.1%
    assert "Attention in layer 0, head 1, for position 1 (吃)" in out


@pytest.mark.parametrize("arch", ["gpt", "llama"])
def test_explain_uses_the_model_s_own_weights(tmp_path, capsys, arch):
    """The printed step 3 is softmax(step 1) over the kept positions: the two computations agree."""
    assert run_main(capsys, "--arch", arch, "--steps", "20", "--out", str(tmp_path), *SMALL)[0] == 0
    task, model = restore(load_checkpoint(str(tmp_path)), "cpu")
    ids = make_task("sentences").encode("我 吃 蘋果 ， 蘋果")
    explain_example(model, task, ids, layer=0, head=0, query=3)
    out = capsys.readouterr().out
    rows = re.findall(r"^\s+(\d+)\s+\S+\s+(-?[\d.]+)\s+(kept|-inf)\s+([\d.]+)%", out, flags=re.M)
    scores = np.array([float(r[1]) for r in rows if r[2] == "kept"])
    softmax = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    printed = np.array([float(r[3]) / 100 for r in rows if r[2] == "kept"])
    np.testing.assert_allclose(printed, softmax, atol=2e-3)


@pytest.mark.parametrize("argv, message", [
    (["--prompt", "我 吃 火車"], "unknown token"),
    (["--layer", "7"], "out of range"),
])
def test_explain_errors(tmp_path, capsys, argv, message):
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    code, _, err = run_main(capsys, "explain", "--out", str(tmp_path), *argv)
    assert code == 2 and message in err


def test_explain_png(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    assert run_main(capsys, "--steps", "2", "--out", str(tmp_path), *SMALL)[0] == 0
    png = tmp_path / "attention.png"
    code, out, _ = run_main(capsys, "explain", "--out", str(tmp_path), "--png", str(png))
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""train.py --init-from DIR fine-tunes a Hugging Face folder on a text file: it starts from the folder's weights (its
first loss is transformers' on the same batch), learns, records the folder, the model's config and the tokenizer in
its checkpoint, so that sample, explain and --resume work with the folder gone, and refuses in one line what the
folder fixes (the architecture flags), a block size past the model's context, a folder it cannot read, a run too big.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

# hf_folders skips this module, with the reason, where torch, transformers, tokenizers or safetensors is missing
from hf_folders import reference_loss, torch

import minigrad as mg
import train
from gptlab.checkpoint import FORMAT, load_checkpoint, restore
from gptlab.settings import CHECKPOINT
from gptlab.tokenizer import HFTokenizer
from minigrad.array import runtime
from models import pretrained

QUIET = ["--samples", "0", "--no-explain", "--eval-interval", "100", "--eval-iters", "1"]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A repeated sentence, made of the words the folders' tokenizers were trained on."""
    path = tmp_path / "data.txt"
    path.write_text("The quick brown fox jumps over the lazy dog. " * 100, encoding="utf-8")
    return path


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = train.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fine_tune(capsys, monkeypatch, folder: Path, data: Path, out: Path, *argv: str) -> list[tuple]:
    """train.py --init-from folder; returns each step's (model, inputs, targets, loss), as train_step saw them."""
    steps = []
    train_step = train.train_step

    def recording(model, opt, x, y, *args):
        loss = train_step(model, opt, x, y, *args)
        steps.append((model, x.copy(), y.copy(), loss))
        return loss

    monkeypatch.setattr(train, "train_step", recording)
    code, out_text, err = run_main(capsys, "--task", "text", "--data", str(data), "--init-from", str(folder),
                                   "--block-size", "16", "--batch-size", "4", "--out", str(out), *QUIET, *argv)
    monkeypatch.setattr(train, "train_step", train_step)
    assert code == 0, err
    assert f"from {folder}" in out_text
    return steps


def copy_folder(folders, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    shutil.copytree(folders[name][0], path)
    return path


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_fine_tuning_starts_from_the_folder_s_model_and_lowers_the_loss(folders, name, data, tmp_path, capsys,
                                                                        monkeypatch, float64_reference):
    path, hf = folders[name]
    steps = fine_tune(capsys, monkeypatch, path, data, tmp_path / "out", "--dtype", "float64", "--steps", "8",
                      "--lr", "1e-2", "--warmup", "0")
    model, x, y, first = steps[0]
    assert all(p.dtype == np.float64 for p in model.parameters())
    tokenizer = HFTokenizer.from_folder(str(path))
    assert x[0].tolist() in [tokenizer.encode(data.read_text())[i:i + 16] for i in range(40)]  # its own tokens
    with torch.no_grad():
        _, expected = reference_loss(hf, x, y)  # the first batch, before any update
    assert abs(first - expected.item()) < 1e-10
    losses = [loss for *_, loss in steps]
    assert len(losses) == 8 and losses[-1] < losses[0] - 1, losses  # in nats per token


@pytest.mark.parametrize("name", ["gpt2-untied", "llama-gqa"])
def test_the_checkpoint_holds_the_folder_s_config_and_tokenizer_so_sample_and_explain_need_no_folder(
        folders, name, data, tmp_path, capsys, monkeypatch):
    path = copy_folder(folders, name, tmp_path)
    out = tmp_path / "out"
    trained = fine_tune(capsys, monkeypatch, path, data, out, "--steps", "3")[-1][0]
    loaded = pretrained.load(str(path))  # float32, the default
    tokenizer = HFTokenizer.from_folder(str(path))
    ckpt = load_checkpoint(str(out))
    assert ckpt["format"] == FORMAT and ckpt["settings"]["init_from"] == str(path)
    assert (ckpt["settings"]["arch"], ckpt["settings"]["tokenizer"]) == (name.split("-")[0].replace("2", ""), "hf")
    assert ckpt["config"] == json.loads(json.dumps(asdict(loaded.config)))  # every field: n_inner, eps, GQA, rope...
    assert ckpt["tokenizer"] == tokenizer.to_state()
    shutil.rmtree(path)

    task, restored = restore(load_checkpoint(str(out)), "cpu")
    assert restored.config == loaded.config and type(restored) is type(loaded)
    ids = np.array([tokenizer.encode("The lazy dog jumps")])
    np.testing.assert_array_equal(restored(ids)[0].numpy(), trained.eval()(ids)[0].numpy())

    code, sampled, err = run_main(capsys, "sample", "--out", str(out), "--prompt", "The lazy", "--top-k", "1",
                                  "--max-new-tokens", "6")
    assert code == 0 and err == "", err
    prompt = tokenizer.encode("The lazy")
    shown = f"[{tokenizer.decode(prompt)}]"  # the prompt first, as the model read it (LLaMA's: after <s>), marked off
    assert sampled.startswith(shown)
    sampled = sampled.removeprefix(shown)
    new = [int(i) for i in trained.generate(np.array([prompt]), 6, temperature=0)[0, len(prompt):]]
    if tokenizer.eos_id in new:  # sampling stops at the end-of-text token, as with --init-from
        new = new[:new.index(tokenizer.eos_id)]
    text = tokenizer.decode(prompt + new)[len(tokenizer.decode(prompt)):]
    assert new and sampled.endswith("\n")
    if name.startswith("gpt2"):  # byte-level BPE: the text only grows as tokens come
        assert sampled == text + "\n"
    else:  # byte tokens: where later bytes complete a character shown as U+FFFD, what was printed stays
        assert sampled.rstrip("\n").replace("\ufffd", "") == text.replace("\ufffd", "")

    code, explained, err = run_main(capsys, "explain", "--out", str(out), "--prompt", "The quick brown fox")
    assert code == 0 and err == "", err
    ids = tokenizer.encode("The quick brown fox")
    assert f"for position {len(ids) - 1}" in explained
    rows = [line.split() for line in explained.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(len(ids)))


def test_a_fine_tuned_run_resumes_without_its_folder_as_if_never_stopped(folders, data, tmp_path, capsys,
                                                                         monkeypatch):
    # every step in the warmup: the learning rate does not depend on --steps, which the first half runs with 3;
    # dropout: its masks' random stream must resume too
    common = ["--steps", "6", "--warmup", "6", "--dropout", "0.1"]
    fine_tune(capsys, monkeypatch, folders["llama-gqa"][0], data, tmp_path / "whole", *common)
    path = copy_folder(folders, "llama-gqa", tmp_path)
    fine_tune(capsys, monkeypatch, path, data, tmp_path / "split", *common, "--steps", "3")
    shutil.rmtree(path)
    code, _, err = run_main(capsys, "--resume", "--out", str(tmp_path / "split"), "--n-layer", "3")
    assert code == 2 and f"--n-layer cannot be given with --init-from {path}" in err
    code, out, err = run_main(capsys, "--resume", "--steps", "6", "--out", str(tmp_path / "split"))
    assert code == 0 and "resumed from" in out, err
    whole, split = (mg.load(tmp_path / run / CHECKPOINT) for run in ("whole", "split"))
    assert split["step"] == whole["step"] == 6 and split["config"]["dropout"] == 0.1
    for name, value in whole["model"].items():
        np.testing.assert_array_equal(split["model"][name], value, err_msg=name)


def break_config(path: Path) -> None:
    (path / "config.json").write_text("{not json")


@pytest.mark.parametrize("argv, message", [
    (["--n-layer", "3"], "--n-layer cannot be given with --init-from"),
    (["--arch", "gpt"], "--arch cannot be given with --init-from"),
    (["--preset", "small"], "--preset cannot be given"),
    (["--n-embd", "32"], "--n-embd cannot be given"),
    (["--n-head", "4"], "--n-head cannot be given"),
    (["--no-bias"], "--bias / --no-bias cannot be given"),
    (["--gelu", "exact"], "--gelu cannot be given"),
    (["--tokenizer", "bpe"], "--tokenizer cannot be given"),
    (["--vocab-size", "300"], "--vocab-size cannot be given"),
    (["--block-size", "49"], r"--block-size 49 is more than the model of \S+ reads: its context is 48 tokens"),
    (["--dropout", "1.5"], r"dropout must be in \[0, 1\), got 1.5"),
    (["--task", "sort"], "fine-tunes a language model on text: give --task text --data FILE"),
    (["--init-from", "/no/such/folder"], r"/no/such/folder is not a folder"),
    (break_config, r"config\.json cannot be read as JSON"),
])
def test_what_the_folder_fixes_and_a_folder_that_cannot_load_are_refused_in_one_line(folders, data, tmp_path, capsys,
                                                                                      argv, message):
    path = copy_folder(folders, "gpt2", tmp_path)
    if callable(argv):
        argv, _ = [], argv(path)
    out = tmp_path / "out"
    code, stdout, err = run_main(capsys, "--task", "text", "--data", str(data), "--init-from", str(path), *argv,
                                 "--out", str(out))
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and err.startswith("train.py: error: "), err
    assert re.search(message, err), err
    assert not out.exists(), "a refused run must not create --out"


def test_memory_is_estimated_from_the_folder_s_parameters_before_loading(folders, data, tmp_path, capsys, monkeypatch):
    path, hf = folders["gpt2"]
    monkeypatch.setattr(runtime, "available_memory", lambda device: 10_000)
    code, _, err = run_main(capsys, "--task", "text", "--data", str(data), "--init-from", str(path), "--out",
                            str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1
    # 48 tokens: the model's context, shorter than the text task's 64 (the block size unless given)
    assert f"({hf.num_parameters():,} parameters, kept 4 times, and the activations of 32 x 48 tokens)" in err
    assert "choose a smaller --block-size or --batch-size, or a smaller model" in err

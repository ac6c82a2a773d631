"""The settings nanoGPT users know, as train.py runs them: gradient accumulation gives one large batch's weights, the
loss estimates are over --eval-iters batches of each part, --keep-best keeps the best checkpoint, --beta2, --min-lr,
--bias and --gelu reach the model and optimizer, and the text task trains on windows of --block-size tokens."""

from __future__ import annotations

import os
import re
import signal
import sys

import numpy as np
import pytest

import minigrad as mg
import train
from gptlab import run
from gptlab.checkpoint import load_checkpoint
from minigrad.optim import SGD
from models import GPT, IGNORE_INDEX, GPTConfig

SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--samples", "0", "--no-explain"]


def run_main(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = train.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("".join(f"{i}: the quick brown fox jumps over the lazy dog; 狐狸跳過懶狗。\n" for i in range(80)),
                    encoding="utf-8")
    return str(path)


# ---- gradient accumulation ----

def fresh_model() -> GPT:
    mg.manual_seed(3)
    return GPT(GPTConfig(vocab_size=7, block_size=5, n_embd=8, n_head=2, n_layer=1)).to(mg.float64)


def test_accumulated_passes_give_the_gradient_and_step_of_one_pass():
    """Rows scoring 1, 1, 5 and 5 targets: each pass's mean loss weighted by its share of all the targets, not equally;
    SGD, whose step is as large as the gradient, so that a wrong scale would show in the weights."""
    def step(micro_batch: int | None) -> tuple[float, list[np.ndarray]]:
        model = fresh_model()
        loss = train.train_step(model, SGD(model.parameters(), lr=0.1), x, y, 1e9, micro_batch)
        return loss, [a.numpy().copy() for p in model.parameters() for a in (p.grad, p.data)]

    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 7, (4, 5)), rng.integers(0, 7, (4, 5))
    y[:2, 1:] = IGNORE_INDEX
    assert (y != IGNORE_INDEX).sum(axis=1).tolist() == [1, 1, 5, 5]
    one_loss, one_pass = step(None)
    for micro_batch in (1, 3):
        loss, passes = step(micro_batch)
        assert abs(loss - one_loss) < 1e-12
        for got, want in zip(passes, one_pass, strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    model = fresh_model()
    mean_of_means = np.mean([model(x[i:i + 1], y[i:i + 1])[1].item() for i in range(4)])
    assert abs(mean_of_means - one_loss) > 1e-3, "the batch must tell the two weightings apart"


def test_grad_accum_4_of_3_gives_the_weights_of_a_batch_of_12(tmp_path, capsys):
    common = ["--task", "sort", "--steps", "2", "--dtype", "float64", "--warmup", "0", *SMALL]
    code, out, _ = run_main(capsys, *common, "--grad-accum", "4", "--batch-size", "3", "--out", str(tmp_path / "a"))
    assert code == 0 and "2 steps of 12 sequences (4 passes of 3) on cpu" in out
    assert run_main(capsys, *common, "--batch-size", "12", "--out", str(tmp_path / "b"))[0] == 0
    accumulated, large = load_checkpoint(str(tmp_path / "a")), load_checkpoint(str(tmp_path / "b"))
    assert accumulated["rng"]["data"] == large["rng"]["data"], "the same sequences were drawn"
    for name, weight in large["model"].items():
        np.testing.assert_allclose(accumulated["model"][name], weight, rtol=0, atol=1e-10, err_msg=name)
    assert accumulated["settings"]["grad_accum"] == 4


def test_grad_accum_passes_are_of_batch_size_sequences(tmp_path, capsys, monkeypatch):
    shapes = []
    forward = GPT.forward

    def spy(self, idx, *args, **kwargs):
        shapes.append(np.shape(idx))
        return forward(self, idx, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", spy)
    assert run_main(capsys, "--task", "sort", "--steps", "1", "--grad-accum", "3", "--batch-size", "5",
                    "--eval-iters", "1", "--out", str(tmp_path), *SMALL)[0] == 0
    assert shapes[:3] == [(5, 12)] * 3  # the step; then the estimates and the final evaluation


# ---- estimates and checkpoints ----

def test_estimates_are_over_eval_iters_batches_of_each_part(tmp_path, capsys, monkeypatch):
    calls = []
    evaluate = train.evaluate

    def spy(model, tokens, scored, batch_size=256):
        calls.append((len(tokens), batch_size))
        return evaluate(model, tokens, scored, batch_size)

    monkeypatch.setattr(train, "evaluate", spy)
    code, out, _ = run_main(capsys, "--task", "sort", "--steps", "4", "--eval-interval", "2", "--eval-iters", "3",
                            "--batch-size", "4", "--out", str(tmp_path), *SMALL)
    assert code == 0
    assert calls == [(12, 4), (12, 4)] * 2 + [(256, 4)]  # train and val at steps 2 and 4, then every held-out one
    lines = re.findall(r"step\s+(\d+)\s+train loss ([\d.]+)\s+val loss ([\d.]+)", out)
    assert [int(s) for s, _, _ in lines] == [2, 4]
    final = re.search(r"final: step=4 train_loss=([\d.]+) val_loss=([\d.]+)", out)
    assert final.group(1) == lines[-1][1], "the final train loss is the last estimate"


def scripted_estimates(monkeypatch: pytest.MonkeyPatch, vals: list[float]) -> None:
    """estimate_loss gives these held-out losses, one per evaluation, in turn."""
    left = iter(vals)
    monkeypatch.setattr(train, "estimate_loss", lambda *a: {"train": (1.0, 0.5), "val": (next(left), 0.5)})


def test_keep_best_saves_only_when_the_estimate_improves(tmp_path, capsys, monkeypatch):
    scripted_estimates(monkeypatch, [3.0, 2.0, 2.5])
    code, out, _ = run_main(capsys, "--task", "sort", "--steps", "6", "--eval-interval", "2", "--keep-best",
                            "--checkpoint-interval", "1", "--out", str(tmp_path), *SMALL)
    assert code == 0 and "checkpoint: step 4's, the best held-out estimate (2.0000)" in out
    ckpt = load_checkpoint(str(tmp_path))
    assert ckpt["step"] == 4 and ckpt["best_val"] == 2.0 and ckpt["settings"]["always_save"] is False

    scripted_estimates(monkeypatch, [2.2, 1.5])  # resumed from step 4: 2.2 is not better than the 2.0 kept
    code, out, _ = run_main(capsys, "--resume", "--steps", "8", "--out", str(tmp_path))
    assert code == 0 and "resumed from" in out and "checkpoint: step 8's" in out
    assert load_checkpoint(str(tmp_path))["best_val"] == 1.5


def test_always_save_is_the_default_and_saves_the_last_step(tmp_path, capsys, monkeypatch):
    scripted_estimates(monkeypatch, [3.0, 2.0, 2.5])
    assert run_main(capsys, "--task", "sort", "--steps", "6", "--eval-interval", "2", "--out", str(tmp_path),
                    *SMALL)[0] == 0
    ckpt = load_checkpoint(str(tmp_path))
    assert ckpt["step"] == 6 and ckpt["best_val"] == 2.0 and ckpt["settings"]["always_save"] is True


def test_keep_best_stopped_by_ctrl_c_keeps_the_best_and_says_so(tmp_path, capsys, monkeypatch):
    scripted_estimates(monkeypatch, [3.0, 2.0, 2.5])
    calls = []
    clip = train.clip_grad_norm_

    def clip_then_interrupt(*args, **kwargs):  # a real SIGINT (Ctrl-C) during step 5
        calls.append(1)
        if len(calls) == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return clip(*args, **kwargs)

    monkeypatch.setattr(train, "clip_grad_norm_", clip_then_interrupt)
    code, out, _ = run_main(capsys, "--task", "sort", "--steps", "9", "--eval-interval", "2", "--keep-best", "--out",
                            str(tmp_path), *SMALL)
    assert code == 130
    assert f"stopped at step 5; {tmp_path / 'ckpt.npz'} holds step 4, the best held-out estimate (--keep-best)" in out
    assert load_checkpoint(str(tmp_path))["step"] == 4


# ---- nanoGPT's knobs reach the run ----

def test_beta2_min_lr_bias_and_gelu_reach_the_optimizer_and_the_model(tmp_path, capsys, monkeypatch):
    seen = {}
    cosine = train.cosine_lr

    def spy(step, max_lr, max_steps, warmup, min_lr):
        seen["min_lr"] = min_lr
        return cosine(step, max_lr, max_steps, warmup, min_lr)

    monkeypatch.setattr(train, "cosine_lr", spy)

    def loop(r: run.Run) -> int:
        seen["betas"] = {g["betas"] for g in r.opt.param_groups}
        seen["config"] = r.model.config
        seen["names"] = [name for name, _ in r.model.named_parameters()]
        return train.train(r)

    argv = ["--task", "sort", "--steps", "2", "--out", str(tmp_path), *SMALL]
    assert run.main([*argv, "--beta2", "0.99", "--min-lr", "1e-4", "--no-bias", "--gelu", "exact"], loop) == 0
    assert seen["betas"] == {(0.9, 0.99)} and seen["min_lr"] == 1e-4
    assert seen["config"].bias is False and seen["config"].gelu == "none"  # F.gelu's name for the exact GELU
    assert not any(name.endswith(".bias") for name in seen["names"])
    assert run.main(argv, loop) == 0  # the defaults
    assert seen["betas"] == {(0.9, 0.95)} and seen["min_lr"] == pytest.approx(3e-4)
    assert seen["config"].bias is True and seen["config"].gelu == "tanh"
    assert load_checkpoint(str(tmp_path))["settings"]["gelu"] is None  # the architecture's own, as it is


@pytest.mark.parametrize("argv, message", [
    (["--grad-accum", "0"], "--grad-accum must be positive, got 0"),
    (["--eval-iters", "0"], "--eval-iters must be positive, got 0"),
    (["--beta2", "1"], "--beta2 must be in [0, 1), got 1.0"),
    (["--min-lr", "0.1"], "--min-lr must be between 0 and --lr 0.003, got 0.1"),
    (["--min-lr", "nan"], "--min-lr must be between 0 and --lr"),
    (["--tokenizer", "bpe"], "--tokenizer and --vocab-size are for --task text; task 'sentences' has its own"),
    (["--arch", "llama", "--gelu", "exact"], "--gelu: for --arch gpt; llama has no biases and a SwiGLU"),
    (["--arch", "llama", "--no-bias"], "--bias: for --arch gpt"),
    (["--block-size", "0"], "--block-size must be positive, got 0"),
])
def test_bad_settings_exit_2_with_one_line(tmp_path, capsys, argv, message):
    code, out, err = run_main(capsys, *argv, "--out", str(tmp_path / "run"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, message", [
    (["--vocab-size", "512"], "--vocab-size is for --tokenizer bpe"),
    (["--tokenizer", "bpe", "--vocab-size", "100"], "--vocab-size must be at least 256"),
    (["--block-size", "2000"], "is too short for seq_len=2001: its held-out part (the last 10%) has 455 tokens"),
])
def test_bad_text_settings_exit_2_with_one_line(tmp_path, capsys, text_file, argv, message):
    code, _, err = run_main(capsys, "--task", "text", "--data", text_file, *argv, "--out", str(tmp_path / "run"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_bpe_without_the_tokenizers_package_says_what_to_install(tmp_path, capsys, text_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # as if it were not installed
    code, _, err = run_main(capsys, "--task", "text", "--data", text_file, "--tokenizer", "bpe", "--out",
                            str(tmp_path / "run"))
    assert code == 2 and "--tokenizer bpe needs the tokenizers package: pip install -e '.[text]'" in err


# ---- the text task's context ----

@pytest.mark.parametrize("block_size", [None, 24])
def test_the_text_task_trains_on_windows_of_block_size_tokens(tmp_path, capsys, text_file, monkeypatch, block_size):
    batches = []
    get_batch = train.get_batch

    def spy(data, rng, n):
        batches.append(get_batch(data, rng, n))
        return batches[-1]

    monkeypatch.setattr(train, "get_batch", spy)
    argv = [] if block_size is None else ["--block-size", str(block_size)]
    code, out, _ = run_main(capsys, "--task", "text", "--data", text_file, *argv, "--steps", "2", "--batch-size",
                            "12", "--eval-iters", "1", "--out", str(tmp_path), *SMALL)
    context = 64 if block_size is None else block_size  # nanoGPT's CPU recipe, unless given
    assert code == 0 and f"context {context} tokens" in out
    x, y = batches[0]
    assert x.shape == y.shape == (12, context) and (y != IGNORE_INDEX).all()  # 12 x 64 = 768 scored tokens
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # every next token is a target
    assert load_checkpoint(str(tmp_path))["model"]["wpe.weight"].shape == (context, 16)


def test_a_bpe_run_resumes_samples_and_explains_with_its_own_tokenizer(tmp_path, capsys, text_file):
    pytest.importorskip("tokenizers", reason="--tokenizer bpe needs tokenizers (pip install -e '.[text]')")
    out = str(tmp_path / "run")
    argv = ["--task", "text", "--data", text_file, "--tokenizer", "bpe", "--vocab-size", "300", "--block-size", "12",
            "--batch-size", "8", "--out", out, *SMALL]
    code, printed, _ = run_main(capsys, *argv, "--steps", "3")
    assert code == 0 and "bpe tokenizer, 300 tokens" in printed
    ckpt = load_checkpoint(out)
    assert ckpt["tokenizer"]["kind"] == "bpe" and len(ckpt["vocab"]) == 300
    with open(text_file, "a", encoding="utf-8") as f:  # resume does not train the tokenizer anew: its ids stay
        f.write("新的字 ✨\n" * 50)
    code, printed, _ = run_main(capsys, "--resume", "--steps", "5", "--out", out)
    assert code == 0 and "resumed from" in printed
    assert load_checkpoint(out)["tokenizer"] == ckpt["tokenizer"]
    code, printed, _ = run_main(capsys, "sample", "--out", out, "--prompt", "狐狸", "--max-new-tokens", "5")
    assert code == 0 and printed.endswith("\n")
    code, printed, _ = run_main(capsys, "explain", "--out", out, "--prompt", "fox 貓")  # 貓: bytes e8 b2 93, unseen
    assert code == 0 and "Attention in layer" in printed
    rows = re.findall(r"^\s+(\d+)\s+(.*?)\s+-?[\d.]+\s+(?:kept|-inf)", printed, flags=re.M)
    assert [token for _, token in rows][-3:] == ["\\xe8", "\\xb2", "\\x93"], rows  # token(): a byte apiece

"""benchmarks/nanogpt.py: the PyTorch re-implementation of nanoGPT's CPU recipe is nanoGPT's (its init, learning-rate
schedule and model settings), runs on train.py's split, and train.py's command for the recipe sets what nanoGPT sets.
Nothing here is timed."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from benchmarks import nanogpt
from gptlab import run

torch = pytest.importorskip("torch", reason="the nanoGPT reference needs torch (pip install -e '.[torch]')")


def test_learning_rate_is_nanogpt_s_get_lr():
    lr, low = 1e-3, 1e-4
    assert nanogpt.nanogpt_lr(0, 2000) == pytest.approx(lr / 101)  # (it + 1) / (warmup_iters + 1)
    assert nanogpt.nanogpt_lr(99, 2000) == pytest.approx(lr * 100 / 101)
    assert nanogpt.nanogpt_lr(100, 2000) == pytest.approx(lr)
    assert nanogpt.nanogpt_lr(1050, 2000) == pytest.approx((lr + low) / 2)
    assert nanogpt.nanogpt_lr(2000, 2000) == pytest.approx(low)
    assert nanogpt.nanogpt_lr(2001, 2000) == low


def test_the_model_is_built_and_initialised_as_nanogpt_s():
    torch.manual_seed(0)
    model = nanogpt.nanogpt_model(vocab_size=65)
    params = dict(model.named_parameters())
    assert not any(name.endswith(".bias") for name in params), "bias=False: no biases in Linear or LayerNorm"
    assert sum(p.numel() for p in params.values()) == 65 * 128 + 64 * 128 + 4 * (12 * 128 * 128 + 2 * 128) + 128
    assert params["wte.weight"].std().item() == pytest.approx(0.02, rel=0.05)
    assert params["wpe.weight"].std().item() == pytest.approx(0.02, rel=0.05)
    assert params["blocks.0.attn.q_proj.weight"].std().item() == pytest.approx(0.02, rel=0.05)
    for name in ("blocks.0.attn.proj.weight", "blocks.3.mlp.proj.weight"):
        assert params[name].std().item() == pytest.approx(0.02 / math.sqrt(8), rel=0.05)
    assert all(block.mlp.approximate == "none" and block.attn.sdpa for block in model.blocks)  # nn.GELU(), flash


def test_a_short_run_on_the_split_train_py_uses_is_seeded_and_finite(tmp_path):
    data = tmp_path / "text.txt"
    data.write_text("".join(f"{i}: to be, or not to be, that is the question.\n" for i in range(60)), encoding="utf-8")
    first = nanogpt.torch_run(str(data), steps=3, seed=1337)
    again = nanogpt.torch_run(str(data), steps=3, seed=1337)
    assert first["val_loss"] == again["val_loss"]
    vocab = len(set(data.read_text(encoding="utf-8")))
    assert 0 < first["val_loss"] < 1.2 * np.log(vocab) and first["ms_per_step"] > 0


def test_train_py_s_command_sets_the_recipe():
    args = run.build_parser().parse_args(nanogpt.train_py_argv("text.txt", 2000, 1337, "out"))
    s = run.resolve_settings(args, None)
    r = nanogpt.RECIPE
    assert (s["task"], s["data"], s["tokenizer"], s["steps"], s["seed"]) == ("text", "text.txt", "char", 2000, 1337)
    for ours, theirs in (("block_size", "block_size"), ("batch_size", "batch_size"), ("n_layer", "n_layer"),
                         ("n_head", "n_head"), ("n_embd", "n_embd"), ("dropout", "dropout"), ("bias", "bias"),
                         ("lr", "learning_rate"), ("min_lr", "min_lr"), ("warmup", "warmup_iters"),
                         ("beta2", "beta2"), ("weight_decay", "weight_decay"), ("grad_clip", "grad_clip"),
                         ("eval_interval", "eval_interval"), ("eval_iters", "eval_iters")):
        assert s[ours] == r[theirs], ours
    assert s["gelu"] == "exact" and s["grad_accum"] == 1 and s["always_save"] is False  # always_save_checkpoint=False


def test_the_report_says_whether_the_losses_agree_and_how_near_the_peak_each_runs():
    flops = nanogpt.recipe_flops(65)
    medians = {"minigrad": {"val_loss": 1.90, "ms_per_step": 30.0, "gflops": flops / 30.0 / 1e6},
               "nanoGPT (PyTorch)": {"val_loss": 1.88, "ms_per_step": 20.0, "gflops": flops / 20.0 / 1e6}}
    results = {"steps": 2000, "seeds": [1, 2, 3], "medians": medians}
    peak = flops / 10.0 / 1e6  # the step of a run at the peak would take 10 ms
    text = nanogpt.report(results, peak)
    assert "+0.0200 (within 0.03)" in text and "minigrad / PyTorch: 1.50" in text
    assert f"| 30.0 | {flops / 30.0 / 1e6:.1f} | 33% |" in text and "| 20.0 |" in text and "| 50% |" in text
    results["medians"]["minigrad"]["val_loss"] = 1.92
    assert "NOT within 0.03" in nanogpt.report(results, peak)


def test_train_py_s_step_is_nanogpt_s_step_from_the_same_weights_on_the_same_batches(tmp_path):
    """What the recipe's two sides share once their random draws are made equal: train.py's train_step (clip, AdamW
    with decay on the matrices) and nanoGPT's loop as torch_run writes it, from the same float64 weights on the same
    batches with nanoGPT's schedule, give the same losses and weights to rounding, step after step. (On the
    benchmark the two draw their own weights and batches, so their held-out losses differ by what seeds do.)"""
    import minigrad as mg
    from gptlab.tasks import make_task, split
    from minigrad.optim import AdamW, decay_groups
    from models import GPT, GPTConfig
    from models.torch_reference import from_minigrad
    from train import get_batch, train_step

    text = tmp_path / "text.txt"
    text.write_text("".join(f"{i}: to be, or not to be, that is the question.\n" for i in range(60)), encoding="utf-8")
    task = make_task("text", data=str(text), seq_len=17)
    data = split(task)
    mg.manual_seed(0)
    config = GPTConfig(vocab_size=len(task.vocab), block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                       bias=False, gelu="none")
    model = GPT(config).to(mg.float64)
    ref = from_minigrad(model, dtype=torch.float64, sdpa=True)
    r = nanogpt.RECIPE
    opt = AdamW(decay_groups(model.named_parameters(), r["weight_decay"]), lr=r["learning_rate"],
                betas=(0.9, r["beta2"]))
    params = list(ref.parameters())
    ref_opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": r["weight_decay"]},
                                 {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                lr=r["learning_rate"], betas=(0.9, r["beta2"]))
    rng = np.random.default_rng(1)
    for it in range(30):
        lr = nanogpt.nanogpt_lr(it, 30)
        for group in (*opt.param_groups, *ref_opt.param_groups):
            group["lr"] = lr
        x, y = get_batch(data, rng, 4)
        ours = train_step(model, opt, x, y, r["grad_clip"])
        _, loss = ref(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), r["grad_clip"])
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
        assert ours == pytest.approx(loss.item(), rel=1e-12, abs=1e-12), f"step {it}"
    theirs = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.numpy(), theirs[name].detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_the_pytorch_side_can_start_where_train_py_starts(tmp_path):
    """--same-start: PyTorch begins from train.py's weights for the seed and draws train.py's batches, so the two
    held-out losses differ only by rounding and the warmup (train.py's rate (step + 1) / 100 of the peak, nanoGPT's
    (step + 1) / 101: over these 4 warmup steps, about 1% of the loss's fall, 0.002); without it each side draws its
    own weights and batches, and the losses differ by what the seeds drew (0.08 here)."""
    data = tmp_path / "text.txt"
    data.write_text("".join(f"{i}: to be, or not to be, that is the question.\n" for i in range(60)), encoding="utf-8")
    ours = nanogpt.minigrad_run(str(data), 4, 1337, str(tmp_path / "out"), dict(os.environ))
    same = nanogpt.torch_run(str(data), steps=4, seed=1337, same_start=True)
    own = nanogpt.torch_run(str(data), steps=4, seed=1337)
    assert abs(same["val_loss"] - ours["val_loss"]) < 0.005
    assert abs(own["val_loss"] - ours["val_loss"]) > 5 * abs(same["val_loss"] - ours["val_loss"])

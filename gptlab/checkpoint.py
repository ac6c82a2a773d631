"""The checkpoint file of a training run: its settings, weights, optimizer state, vocabulary, tokenizer and random
states, written atomically; read back, checked, older formats migrated; and turned back into the run's task and model
(explain, sample, resume).
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import Any

import numpy as np

import minigrad as mg
from gptlab.settings import (
    ARCHITECTURES,
    CHECKPOINT,
    DEFAULTS,
    RunFailed,
    UsageError,
    build_model,
    build_task,
    check_settings,
    model_config,
)
from gptlab.tasks import Task, TextTask
from gptlab.tokenizer import CharTokenizer, from_state
from minigrad import nn
from minigrad.array import backend
from minigrad.optim import Optimizer
from models.huggingface import check_finite

FORMAT = 6  # 6: one name per quantity (0.5): a Llama's norms are ln_1, ln_2 and ln_f (norm_1, norm_2 and norm_f
# before), its config's head size is head_size (head_dim before). 5: the model's config, every field (a model from
# --init-from has sizes no flag gives), and the setting init_from; 4 and before: the model built from the settings.
# 4: the optimizer's state per parameter, as its state_dict() gives it (PyTorch's layout); 3 and before: by
# position, with one step for all. 3: the text task's tokenizer, the best held-out estimate, and the settings of
# grad_accum, beta2, ...; 2: without those; each attention's W_Q, W_K, W_V as q_proj, k_proj, v_proj. 1 (no
# "format" entry): one matrix, qkv
RENAMED_IN_6 = {"norm_1": "ln_1", "norm_2": "ln_2", "norm_f": "ln_f"}  # parts of a Llama's state_dict keys
NEW_IN_3 = ("tokenizer", "vocab_size", "bias", "gelu", "grad_accum", "min_lr", "beta2", "eval_iters", "always_save")


def save_checkpoint(path: str, model: nn.Module, opt: Optimizer, step: int, settings: dict[str, Any], task: Task,
                    data_rng: np.random.Generator, best_val: float | None = None) -> None:
    """Everything needed to continue exactly: weights, the model's config, optimizer, step, settings, the task's
    vocabulary (token id i is vocab[i]) and the text task's tokenizer, the best held-out estimate so far (for
    --keep-best) and the random-number states. Written atomically by mg.save."""
    tokenizer = task.tokenizer.to_state() if isinstance(task, TextTask) else None
    try:
        mg.save({"format": FORMAT, "model": model.state_dict(), "config": asdict(model.config),
                 "optim": opt.state_dict(), "step": step, "settings": settings, "vocab": task.vocab,
                 "tokenizer": tokenizer, "best_val": best_val,
                 "rng": {"data": data_rng.bit_generator.state, "cpu": backend.generator("cpu").bit_generator.state}},
                path)
    except OSError as err:
        raise RunFailed(f"cannot write the checkpoint {path}: {err}") from None


def load_checkpoint(out: str) -> dict[str, Any]:
    """The checkpoint in the folder `out`, checked to be one that train.py wrote, with usable settings; one of an
    older format is brought up to this one (its "format" entry still says which it was)."""
    path = os.path.join(out, CHECKPOINT)
    if not os.path.exists(path):
        raise UsageError(f"no checkpoint at {path}; train one first: python train.py --out {out}")
    try:
        ckpt = mg.load(path)
    except ValueError as err:
        raise UsageError(str(err)) from None
    version = ckpt.setdefault("format", 1)
    if version not in range(1, FORMAT + 1) or isinstance(version, bool):
        raise UsageError(f"{path} has checkpoint format {version!r}; this train.py reads formats 1 to {FORMAT} "
                         "(was it written by a newer minigrad?)")
    kinds = {"model": dict, "optim": dict, "step": int, "settings": dict, "vocab": list, "rng": dict}
    wrong = [key for key, kind in kinds.items() if not isinstance(ckpt.get(key), kind)]
    if not wrong and version < 3:
        _add_format_3_entries(ckpt)
    if not wrong and version < 5:
        ckpt["settings"].setdefault("init_from", None)  # format 5's: such runs started from random weights
        ckpt["config"] = None  # their model is built from the settings, as then
    wrong += [f"settings/{key}" for key in DEFAULTS if "settings" not in wrong and key not in ckpt["settings"]]
    wrong += [key for key in ("tokenizer", "best_val", "config") if key not in ckpt]
    if wrong:
        raise UsageError(f"{path} is not a checkpoint of this train.py: {', '.join(wrong)} missing or malformed")
    if version == 1:
        _split_qkv_weights(ckpt["model"])
    if version < 6:
        _rename_to_format_6(ckpt)
        print(f"{path}: checkpoint format {version}, read as format {FORMAT} (a Llama's norm_1, norm_2, norm_f are "
              "ln_1, ln_2, ln_f; head_dim is head_size); train.py writes it in format 6 when it next saves",
              file=sys.stderr)
    try:
        check_settings(ckpt["settings"])
        if ckpt["step"] < 0:
            raise UsageError(f"step {ckpt['step']} is negative")
    except (UsageError, TypeError) as err:
        raise UsageError(f"{path} is not a usable checkpoint: {err}") from None
    return ckpt


def _add_format_3_entries(ckpt: dict[str, Any]) -> None:
    """Formats 1 and 2 to 3, in place: the settings added since, as those runs had them (the text task's windows were
    32 characters, so its block size is 31 unless one was given), its character tokenizer, and no best estimate."""
    settings = ckpt["settings"]
    text = settings.get("task") == "text"
    if text and settings.get("block_size") is None:
        settings["block_size"] = 31
    settings.update({key: DEFAULTS[key] for key in NEW_IN_3 if key not in settings})
    ckpt["tokenizer"] = CharTokenizer(ckpt["vocab"]).to_state() if text else None
    ckpt["best_val"] = None


def restore_task(ckpt: dict[str, Any], settings: dict[str, Any] | None = None) -> Task:
    """The checkpoint's task (with `settings`, default its own), the text task's file read with the checkpoint's own
    tokenizer, so that every token id means what it meant in training; a task whose vocabulary changed is refused."""
    settings = ckpt["settings"] if settings is None else settings
    try:
        tokenizer = None if ckpt["tokenizer"] is None else from_state(ckpt["tokenizer"])
    except ValueError as err:
        raise UsageError(f"the checkpoint's tokenizer: {err}") from None
    try:
        task = build_task(settings, tokenizer)
    except UsageError as err:
        if tokenizer is None:
            raise
        raise UsageError(f"{err}; was --data {settings['data']} changed since? Start a new run with another "
                         "--out") from None
    if task.vocab != ckpt["vocab"]:  # a task of this code whose tokens are not the ones the checkpoint knew
        saved = ckpt["vocab"]
        added, gone = sorted(set(task.vocab) - set(saved)), sorted(set(saved) - set(task.vocab))
        raise UsageError(f"the vocabulary of task {task.name!r} is not the one the checkpoint was trained on "
                         f"({len(saved)} tokens then, {len(task.vocab)} now; new {' '.join(added[:20])!r}, "
                         f"gone {' '.join(gone[:20])!r}); start a new run with another --out")
    return task


def restore(ckpt: dict[str, Any], device: str) -> tuple[Task, nn.Module]:
    """The task and the model of a checkpoint from load_checkpoint, with its weights, on `device`."""
    settings = ckpt["settings"]
    task = restore_task(ckpt)
    model = build_model(settings, checkpoint_config(ckpt, settings, task), device)
    load_weights(model, ckpt)
    return task, model


def checkpoint_config(ckpt: dict[str, Any], settings: dict[str, Any], task: Task) -> Any:
    """The model config of a checkpoint: its "config" entry, with the dropout of `settings` (a resumed run may change
    it); for a format before 5, the one its settings and task make, as train.py made it then."""
    if ckpt["config"] is None:
        return model_config(settings, task)
    _, config_class = ARCHITECTURES[settings["arch"]]
    try:
        return config_class(**{**ckpt["config"], "dropout": settings["dropout"]})
    except (TypeError, ValueError) as err:
        raise UsageError(f"the checkpoint's model config does not make a {config_class.__name__}: {err}") from None


def _rename_to_format_6(ckpt: dict[str, Any]) -> None:
    """Formats 1 to 5 to 6, in place: a Llama's norm weights under the GPT's names (ln_1, ln_2, ln_f), and format 5's
    config's head_dim as head_size."""
    ckpt["model"] = {".".join(RENAMED_IN_6.get(part, part) for part in name.split(".")): value
                     for name, value in ckpt["model"].items()}
    if ckpt["config"] is not None and "head_dim" in ckpt["config"]:
        ckpt["config"]["head_size"] = ckpt["config"].pop("head_dim")


def _split_qkv_weights(state: dict[str, Any]) -> None:
    """Format 1 to 2, in place: each attention's (3C, C) qkv weight (and (3C,) bias) becomes q_proj, k_proj, v_proj."""
    for name in [n for n in state if ".attn.qkv." in n]:
        for part, value in zip(("q_proj", "k_proj", "v_proj"), np.split(state.pop(name), 3), strict=True):
            state[name.replace(".qkv.", f".{part}.")] = value


def _split_qkv_buffers(saved: dict[str, Any], model: nn.Module, opt: Optimizer) -> dict[str, Any]:
    """Format 1 to 2 for the optimizer: a qkv parameter's buffers, one entry then, become three, those of q_proj,
    k_proj and v_proj, which sit where qkv sat in the optimizer's order (then formats 2 and 3 to 4:
    _per_parameter_state)."""
    names = {id(p): name for name, p in model.named_parameters()}
    params, buffers, old = list(opt.parameters()), {}, 0
    i = 0
    while i < len(params):
        entry = saved["buffers"][str(old)]
        if ".attn.q_proj." in names[id(params[i])]:
            pieces = {b: np.split(value, 3) for b, value in entry.items()}
            buffers.update({str(i + k): {b: pieces[b][k] for b in entry} for k in range(3)})
            i += 3
        else:
            buffers[str(i)] = entry
            i += 1
        old += 1
    return {**saved, "buffers": buffers}


def _per_parameter_state(saved: dict[str, Any], opt: Optimizer) -> dict[str, Any]:
    """Formats 1 to 3 to 4 for the optimizer: {"step", "lr": one per group, "buffers": {"i": {"m", "v"}}}, one step
    for every parameter, as AdamW's state_dict() now gives it: each parameter's own step (the old shared one),
    exp_avg, exp_avg_sq, and each group's settings: lr as saved, the rest (not saved then) as this run's optimizer
    has them."""
    groups, first = [], 0
    for group, lr in zip(opt.param_groups, saved["lr"], strict=True):
        settings = {k: v for k, v in group.items() if k != "params"}
        groups.append({**settings, "lr": lr, "params": list(range(first, first + len(group["params"])))})
        first += len(group["params"])
    state = {int(i): {"step": saved["step"], "exp_avg": buffers["m"], "exp_avg_sq": buffers["v"]}
             for i, buffers in saved["buffers"].items()}
    return {"state": state, "param_groups": groups}


def load_weights(model: nn.Module, ckpt: dict[str, Any]) -> None:
    """The checkpoint's weights into `model`: each checked to fit, and to be finite (train.py never saves others)."""
    try:
        model.load_state_dict(ckpt["model"])
    except (ValueError, TypeError) as err:
        raise UsageError(f"the checkpoint's weights do not fit its model: {err}") from None
    for name, value in ckpt["model"].items():
        try:
            check_finite("the checkpoint", name, np.asarray(value))
        except ValueError as err:
            raise UsageError(str(err)) from None


def resume_training(ckpt: dict[str, Any], model: nn.Module, opt: Optimizer, data_rng: np.random.Generator) -> int:
    """What save_checkpoint saved, put back into a model and optimizer built from its settings and task (restore_task):
    the weights, the optimizer's state and the random-number states. Returns the step to continue from."""
    load_weights(model, ckpt)
    try:
        saved = _split_qkv_buffers(ckpt["optim"], model, opt) if ckpt["format"] == 1 else ckpt["optim"]
        opt.load_state_dict(saved if ckpt["format"] >= 4 else _per_parameter_state(saved, opt))  # 4: per parameter
        data_rng.bit_generator.state = ckpt["rng"]["data"]
        backend.generator("cpu").bit_generator.state = ckpt["rng"]["cpu"]
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise UsageError(f"cannot restore the checkpoint's optimizer and random states ({err})") from None
    return ckpt["step"]

"""The checkpoint file of a training run: its settings, weights, optimizer state, vocabulary and random states,
written atomically; read back and checked; and turned back into the run's task and model (explain, sample, resume).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import minigrad as mg
from minigrad import backend, nn
from minigrad.optim import Optimizer
from settings import CHECKPOINT, DEFAULTS, RunFailed, UsageError, build_model, build_task, check_settings, model_config
from tasks import Task

FORMAT = 2  # 2: each attention's W_Q, W_K, W_V as q_proj, k_proj, v_proj; 1 (no "format" entry): one matrix, qkv


def save_checkpoint(path: str, model: nn.Module, opt: Optimizer, step: int, settings: dict[str, Any],
                    vocab: list[str], data_rng: np.random.Generator) -> None:
    """Everything needed to continue exactly: weights, optimizer, step, settings, the task's vocabulary
    (token id i is vocab[i]) and the random-number states. Written atomically by mg.save."""
    try:
        mg.save(path, {"format": FORMAT, "model": model.state_dict(), "optim": opt.state_dict(), "step": step,
                       "settings": settings,
                       "vocab": vocab, "rng": {"data": data_rng.bit_generator.state,
                                               "cpu": backend.generator("cpu").bit_generator.state}})
    except OSError as err:
        raise RunFailed(f"cannot write the checkpoint {path}: {err}") from None


def load_checkpoint(out: str) -> dict[str, Any]:
    """The checkpoint in the folder `out`, checked to be one that train.py wrote, with usable settings."""
    path = os.path.join(out, CHECKPOINT)
    if not os.path.exists(path):
        raise UsageError(f"no checkpoint at {path}; train one first: python train.py --out {out}")
    try:
        ckpt = mg.load(path)
    except ValueError as err:
        raise UsageError(str(err)) from None
    kinds = {"model": dict, "optim": dict, "step": int, "settings": dict, "vocab": list, "rng": dict}
    wrong = [key for key, kind in kinds.items() if not isinstance(ckpt.get(key), kind)]
    wrong += [f"settings/{key}" for key in DEFAULTS if "settings" not in wrong and key not in ckpt["settings"]]
    if wrong:
        raise UsageError(f"{path} is not a checkpoint of this train.py: {', '.join(wrong)} missing or malformed")
    version = ckpt.setdefault("format", 1)
    if version not in (1, FORMAT):
        raise UsageError(f"{path} has checkpoint format {version!r}; this train.py reads formats 1 and {FORMAT} "
                         "(was it written by a newer minigrad?)")
    if version == 1:
        _split_qkv_weights(ckpt["model"])
    try:
        check_settings(ckpt["settings"])
        if ckpt["step"] < 0:
            raise UsageError(f"step {ckpt['step']} is negative")
    except (UsageError, TypeError) as err:
        raise UsageError(f"{path} is not a usable checkpoint: {err}") from None
    return ckpt


def check_vocab(ckpt: dict[str, Any], task: Task) -> None:
    """Refuse a task whose token ids would mean other tokens than the checkpoint's (a changed --data file)."""
    saved = ckpt["vocab"]
    if task.vocab != saved:
        data = ckpt["settings"]["data"]
        source = f"task {task.name!r}" if data is None else f"--data {data}"
        added, gone = sorted(set(task.vocab) - set(saved)), sorted(set(saved) - set(task.vocab))
        raise UsageError(f"the vocabulary of {source} is not the one the checkpoint was trained on "
                         f"({len(saved)} tokens then, {len(task.vocab)} now; new {''.join(added[:20])!r}, "
                         f"gone {''.join(gone[:20])!r}); start a new run with another --out")


def restore(ckpt: dict[str, Any], device: str) -> tuple[Task, nn.Module]:
    """The task and the model of a checkpoint from load_checkpoint, with its weights, on `device`."""
    settings = ckpt["settings"]
    task = build_task(settings)
    check_vocab(ckpt, task)
    model = build_model(settings, model_config(settings, task), device)
    load_weights(model, ckpt)
    return task, model


def _split_qkv_weights(state: dict[str, Any]) -> None:
    """Format 1 to 2, in place: each attention's (3C, C) qkv weight (and (3C,) bias) becomes q_proj, k_proj, v_proj."""
    for name in [n for n in state if ".attn.qkv." in n]:
        for part, value in zip(("q_proj", "k_proj", "v_proj"), np.split(state.pop(name), 3), strict=True):
            state[name.replace(".qkv.", f".{part}.")] = value


def _split_qkv_buffers(saved: dict[str, Any], model: nn.Module, opt: Optimizer) -> dict[str, Any]:
    """Format 1 to 2 for the optimizer: a qkv parameter's buffers, one entry then, become three, those of q_proj,
    k_proj and v_proj, which sit where qkv sat in the optimizer's order."""
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


def load_weights(model: nn.Module, ckpt: dict[str, Any]) -> None:
    try:
        model.load_state_dict(ckpt["model"])
    except (ValueError, TypeError) as err:
        raise UsageError(f"the checkpoint's weights do not fit its model: {err}") from None


def resume_training(ckpt: dict[str, Any], task: Task, model: nn.Module, opt: Optimizer,
                    data_rng: np.random.Generator) -> int:
    """What save_checkpoint saved, put back into a model and optimizer built from its settings: the
    weights, the optimizer's state and the random-number states. Returns the step to continue from."""
    check_vocab(ckpt, task)
    load_weights(model, ckpt)
    try:
        saved = ckpt["optim"] if ckpt["format"] == FORMAT else _split_qkv_buffers(ckpt["optim"], model, opt)
        opt.load_state_dict(saved)
        data_rng.bit_generator.state = ckpt["rng"]["data"]
        backend.generator("cpu").bit_generator.state = ckpt["rng"]["cpu"]
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise UsageError(f"cannot restore the checkpoint's optimizer and random states ({err})") from None
    return ckpt["step"]

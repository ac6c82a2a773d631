"""A training run as it is saved and opened again: what train.py and explain.py share (and any other
command that opens a run, such as a `sample` command).

A checkpoint is a run's settings plus its weights, and every command but a fresh training run starts
by turning one back into a task and a model; the settings, the model they build, the file and its
checks therefore live together here:

    check_settings(settings)            refuse any value that cannot work, naming its flag
    build_task(settings)                the task (tasks.py) the settings name
    model_config(settings, task)        the --arch's config: sizes from the preset and the flags
    build_model(settings, config, dev)  a freshly initialised, seeded model; ARCHITECTURES names each one
    save_checkpoint / load_checkpoint   the file, written atomically; read back and checked
    restore(ckpt, device)               its task and model, with its weights, ready to run
    prompt_ids(task, prompt)            a --prompt as token ids, refused in one line if a token is unknown
    run_cli(main, argv, prog)           a UsageError ends in one line and exit status 2, never a traceback
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import minigrad as mg
from minigrad import backend, nn
from minigrad.optim import Optimizer
from models import GPT, GPTConfig, Llama, LlamaConfig
from tasks import TASKS, Task, make_task, split

ARCHITECTURES = {  # --arch: model class and config class. A config takes vocab_size, block_size, n_layer,
    "gpt": (GPT, GPTConfig),  # n_head, n_embd and dropout; the model has forward, generate, trace_attention
    "llama": (Llama, LlamaConfig),  # RMSNorm, rotary position embeddings, SwiGLU: models/llama.py
}
PRESETS = {  # model sizes: n_embd, n_head, n_layer
    "tiny": {"n_embd": 64, "n_head": 4, "n_layer": 2},
    "small": {"n_embd": 128, "n_head": 4, "n_layer": 4},
    "medium": {"n_embd": 256, "n_head": 8, "n_layer": 4},
}
DEFAULTS = {  # a run's settings, as `python train.py` runs them; flags override, --resume restores the saved ones
    "arch": "gpt", "task": "sentences", "data": None, "preset": "tiny", "n_embd": None, "n_head": None,
    "n_layer": None, "block_size": None, "dropout": 0.0, "steps": 300, "batch_size": 32, "lr": 3e-3, "warmup": 20,
    "weight_decay": 0.1, "grad_clip": 1.0, "seed": 1337, "eval_interval": 100, "checkpoint_interval": 100,
    "dtype": "float32",
}
DTYPES = ("float32", "float64")
MODEL_KEYS = ("arch", "task", "data", "preset", "n_embd", "n_head", "n_layer", "block_size", "dtype")  # fixed on resume
CHECKPOINT = "ckpt.npz"
HELDOUT_SEED = 0  # the held-out examples do not change with --seed, so runs compare on the same ones


class UsageError(Exception):
    """A bad argument or setup: reported in one line, exit status 2."""


class RunFailed(Exception):
    """The run cannot go on (its loss diverged, its checkpoint cannot be written): one line, exit status 1."""


def run_cli(main: Callable[[list[str]], int], argv: Sequence[str], prog: str) -> int:
    """Run a command's main(argv) and end each failure it can foresee in one line on stderr."""
    try:
        return main(list(argv))
    except (UsageError, RunFailed) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2 if isinstance(err, UsageError) else 1
    except MemoryError as err:
        print(f"{prog}: error: out of memory ({err}); try a smaller model or --batch-size", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C during training, or one before it starts
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # whoever read our output has gone (`| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit fails no more
        return 1


# ---- settings -> task and model ----

def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse any setting that cannot work, naming its flag, before anything is built or written.
    (Model sizes and dropout are checked by the model's config, the task and --data by make_task.)"""
    for key, choices in (("arch", ARCHITECTURES), ("task", TASKS), ("preset", PRESETS),
                         ("dtype", DTYPES)):
        if settings[key] not in choices:
            raise UsageError(f"{flag(key)} {settings[key]!r} is not one of {', '.join(choices)}")
    for key in ("steps", "batch_size", "eval_interval", "checkpoint_interval"):
        if settings[key] <= 0:
            raise UsageError(f"{flag(key)} must be positive, got {settings[key]}")
    for key in ("warmup", "seed"):
        if settings[key] < 0:
            raise UsageError(f"{flag(key)} must be 0 or more, got {settings[key]}")
    for key in ("lr", "grad_clip"):  # NaN passes `lr <= 0`: ask for what works instead
        if not (math.isfinite(settings[key]) and settings[key] > 0):
            raise UsageError(f"{flag(key)} must be a finite number above 0, got {settings[key]}")
    if not (math.isfinite(settings["weight_decay"]) and settings["weight_decay"] >= 0):
        raise UsageError(f"--weight-decay must be a finite number, 0 or more, got {settings['weight_decay']}")


def build_task(settings: dict[str, Any]) -> Task:
    try:
        return make_task(settings["task"], data=settings["data"])
    except (ValueError, FileNotFoundError) as err:
        raise UsageError(str(err)) from None


def model_config(settings: dict[str, Any], task: Task) -> Any:
    """The config of settings["arch"] for this task: sizes from the preset, overridden by the flags given."""
    needed = task.seq_len - 1  # the model reads all tokens but the last
    block_size = needed if settings["block_size"] is None else settings["block_size"]
    if block_size < needed:
        raise UsageError(f"--block-size {block_size} is too small for task {task.name!r}, "
                         f"whose sequences need {needed}")
    preset = PRESETS[settings["preset"]]
    sizes = {k: preset[k] if settings[k] is None else settings[k] for k in ("n_embd", "n_head", "n_layer")}
    _, config_class = ARCHITECTURES[settings["arch"]]
    try:
        return config_class(vocab_size=len(task.vocab), block_size=block_size, dropout=settings["dropout"], **sizes)
    except ValueError as err:
        raise UsageError(str(err)) from None


def check_device(device: str) -> None:
    try:
        backend.check_device(device)
    except (ValueError, RuntimeError) as err:
        raise UsageError(str(err)) from None


def build_model(settings: dict[str, Any], config: Any, device: str) -> nn.Module:
    """A freshly initialised model of settings["arch"] (seeded by settings["seed"]) in settings["dtype"] on `device`."""
    check_device(device)
    model_class, _ = ARCHITECTURES[settings["arch"]]
    mg.manual_seed(settings["seed"])
    return model_class(config).to(settings["dtype"]).to(device)


# ---- the checkpoint file ----

def save_checkpoint(path: str, model: nn.Module, opt: Optimizer, step: int, settings: dict[str, Any],
                    vocab: list[str], data_rng: np.random.Generator) -> None:
    """Everything needed to continue exactly: weights, optimizer, step, settings, the task's vocabulary
    (token id i is vocab[i]) and the random-number states. Written atomically by mg.save."""
    try:
        mg.save(path, {"model": model.state_dict(), "optim": opt.state_dict(), "step": step, "settings": settings,
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


def prompt_ids(task: Task, prompt: str | None) -> list[int]:
    """A --prompt as the task's token ids (space-separated tokens, or characters for the text task); a
    token outside the vocabulary is refused, by name. None: the prompt of the first held-out example."""
    if prompt is None:
        return task.split_prompt(split(task, seed=HELDOUT_SEED).heldout[0][0])[0]
    try:
        return task.encode(prompt)
    except ValueError as err:
        raise UsageError(str(err)) from None


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
        opt.load_state_dict(ckpt["optim"])
        data_rng.bit_generator.state = ckpt["rng"]["data"]
        backend.generator("cpu").bit_generator.state = ckpt["rng"]["cpu"]
    except (ValueError, TypeError, KeyError) as err:
        raise UsageError(f"cannot restore the checkpoint's optimizer and random states ({err})") from None
    return ckpt["step"]

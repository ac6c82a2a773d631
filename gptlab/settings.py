"""A run's settings, as train.py, explain.py and sample.py share them: the defaults, model presets and
architectures, their checks, the task and model they build, and UsageError / run_cli, which end a bad one in
one line on stderr.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, NoReturn

import minigrad as mg
from gptlab.tasks import TASKS, TEXT_CONTEXT, Task, make_task, split
from gptlab.tokenizer import TOKENIZER_FILE, BPETokenizer, CharTokenizer, HFTokenizer
from minigrad import nn
from minigrad.array import backend
from models import GPT, GPTConfig, Llama, LlamaConfig, pretrained

ARCHITECTURES = {  # --arch: model class and config class. A config takes vocab_size, block_size, n_layer,
    "gpt": (GPT, GPTConfig),  # n_head, n_embd and dropout; the model has forward (with trace=) and generate
    "llama": (Llama, LlamaConfig),  # RMSNorm, rotary position embeddings, SwiGLU: models/llama.py
}
PRESETS = {  # model sizes: n_embd, n_head, n_layer
    "tiny": {"n_embd": 64, "n_head": 4, "n_layer": 2},
    "small": {"n_embd": 128, "n_head": 4, "n_layer": 4},
    "medium": {"n_embd": 256, "n_head": 8, "n_layer": 4},
}
DEFAULTS = {  # a run's settings, as `python train.py` runs them; flags override, --resume restores the saved ones
    "arch": "gpt", "task": "sentences", "data": None, "tokenizer": "char", "vocab_size": None, "preset": "tiny",
    "n_embd": None, "n_head": None, "n_layer": None, "block_size": None, "bias": None, "gelu": None, "dropout": 0.0,
    "steps": 300, "batch_size": 32, "grad_accum": 1, "lr": 3e-3, "min_lr": None, "warmup": 20, "weight_decay": 0.1,
    "beta2": 0.95, "grad_clip": 1.0, "seed": 1337, "eval_interval": 100, "eval_iters": 10, "checkpoint_interval": 100,
    "always_save": True, "dtype": "float32", "init_from": None,
}  # None: the task's block size, the architecture's bias and GELU (gpt: biases, tanh), a min_lr of lr / 10, no folder
DTYPES = ("float32", "float64")
TOKENIZERS = ("char", "bpe")
GELUS = {"tanh": "tanh", "exact": "none"}  # --gelu -> GPTConfig.gelu, as F.gelu's `approximate` names them
MODEL_KEYS = ("arch", "task", "data", "tokenizer", "vocab_size", "preset", "n_embd", "n_head", "n_layer", "block_size",
              "bias", "gelu", "dtype", "init_from")  # fixed on resume
# what an --init-from folder fixes, so their flags are refused with it; its run records the folder's arch, tokenizer
# "hf" and no preset (pretrained_task), and the model's config in the checkpoint
FOLDER_KEYS = ("arch", "preset", "n_embd", "n_head", "n_layer", "bias", "gelu", "tokenizer", "vocab_size")
CHECKPOINT = "ckpt.npz"
LOCK = "train.lock"  # in --out, while a run writes there
METRICS = "metrics.csv"  # in --out: the run's losses as it goes (gptlab/metrics.py)
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
        tell(f"{prog}: error: {err}")
        return 2 if isinstance(err, UsageError) else 1
    except MemoryError as err:
        tell(f"{prog}: error: out of memory ({err}); try a smaller model or --batch-size")
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C during training, or one before it starts
        tell(f"{prog}: interrupted")
        return 130
    except BrokenPipeError:  # whoever read our output has gone (`explain | head`): stop quietly, as Python's docs say
        silence(sys.stdout)
        return 1


def tell(line: str) -> None:
    """One line on stderr, unless its reader has gone too (`2>&1 | head`): then there is no one to tell."""
    try:
        print(line, file=sys.stderr, flush=True)
    except BrokenPipeError:
        silence(sys.stderr)


def silence(stream: Any) -> None:
    """stdout or stderr into os.devnull, once its reader has gone: the flush at exit fails no more (Python's docs,
    "Note on SIGPIPE")."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


class FlagParser(argparse.ArgumentParser):
    """The commands' argparse parser, with prefix matching off: a flag is taken only as written, so a typo of one
    (--step) is refused, naming the flags it is close to, never taken as another (--steps)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            flags = [option for action in self._actions for option in action.option_strings]
            unknown = [word for word in message.split()[2:] if word.startswith("--")]
            meant = [close for word in unknown for close in difflib.get_close_matches(word.split("=")[0], flags, n=1)]
            message += f" (did you mean {' or '.join(meant)}? flags are taken only as written)" if meant else ""
        super().error(message)


# ---- settings -> task and model ----

def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


UNSET = {  # what a model setting saved as None meant for the run, in the user's terms
    "data": "none (task {task} makes its own examples)", "vocab_size": "none (--tokenizer {tokenizer})",
    "block_size": "none (the task's length)", "bias": "none (the architecture's: biases for gpt)",
    "gelu": "none (the architecture's: tanh for gpt)", "init_from": "none (random initial weights)",
    "preset": "none (the --init-from folder's sizes)",
}


def as_saved(saved: dict[str, Any], key: str) -> tuple[Any, str]:
    """A model setting of a checkpoint's run as it was in effect (a width of None is its preset's) and as a message
    shows it: (64, "64 (--preset tiny)"), (None, "none (the task's length)")."""
    value = saved[key]
    if value is None and key in ("n_embd", "n_head", "n_layer") and saved["preset"] in PRESETS:
        value = PRESETS[saved["preset"]][key]
        return value, f"{value} (--preset {saved['preset']})"
    if value is None:
        return None, UNSET.get(key, "none").format(**saved)
    return value, str(value)


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse any setting that cannot work, naming its flag, before anything is built or written.
    (Model sizes and dropout are checked by the model's config, the task and --data by make_task.)"""
    folder = settings["init_from"]
    for key, choices in (("arch", ARCHITECTURES), ("task", TASKS), ("preset", PRESETS), ("dtype", DTYPES),
                         ("tokenizer", TOKENIZERS)):
        if settings[key] not in choices and not (folder is not None and key in ("preset", "tokenizer")):
            raise UsageError(f"{flag(key)} {settings[key]!r} is not one of {', '.join(choices)}")
    if folder is not None and settings["task"] != "text":
        raise UsageError(f"--init-from {folder} fine-tunes a language model on text: give --task text --data FILE "
                         f"(task {settings['task']!r} has its own vocabulary)")
    if settings["gelu"] not in (None, *GELUS):
        raise UsageError(f"--gelu {settings['gelu']!r} is not one of {', '.join(GELUS)}")
    for key in ("steps", "batch_size", "grad_accum", "eval_interval", "eval_iters", "checkpoint_interval"):
        if settings[key] <= 0:
            raise UsageError(f"{flag(key)} must be positive, got {settings[key]}")
    if settings["block_size"] is not None and settings["block_size"] <= 0:
        raise UsageError(f"--block-size must be positive, got {settings['block_size']}")
    for key in ("warmup", "seed"):
        if settings[key] < 0:
            raise UsageError(f"{flag(key)} must be 0 or more, got {settings[key]}")
    for key in ("lr", "grad_clip"):  # NaN passes `lr <= 0`: ask for what works instead
        if not (math.isfinite(settings[key]) and settings[key] > 0):
            raise UsageError(f"{flag(key)} must be a finite number above 0, got {settings[key]}")
    if not (math.isfinite(settings["weight_decay"]) and settings["weight_decay"] >= 0):
        raise UsageError(f"--weight-decay must be a finite number, 0 or more, got {settings['weight_decay']}")
    if not 0 <= settings["beta2"] < 1:
        raise UsageError(f"--beta2 must be in [0, 1), got {settings['beta2']}")
    if settings["min_lr"] is not None and not 0 <= settings["min_lr"] <= settings["lr"]:
        raise UsageError(f"--min-lr must be between 0 and --lr {settings['lr']:g}, got {settings['min_lr']}")
    check_tokenizer(settings)


def check_tokenizer(settings: dict[str, Any]) -> None:
    """--tokenizer and --vocab-size: for the text task; BPE's vocabulary starts from the 256 bytes."""
    if settings["task"] != "text" and (settings["tokenizer"] != "char" or settings["vocab_size"] is not None):
        raise UsageError(f"--tokenizer and --vocab-size are for --task text; task {settings['task']!r} has its own "
                         "vocabulary")
    if settings["vocab_size"] is not None and settings["tokenizer"] != "bpe":
        raise UsageError("--vocab-size is for --tokenizer bpe (char: one token per character of the file)")
    if settings["vocab_size"] is not None and settings["vocab_size"] < 256:
        raise UsageError(f"--vocab-size must be at least 256 (byte-level BPE starts from one token per byte), got "
                         f"{settings['vocab_size']}")
    if settings["tokenizer"] == "bpe" and importlib.util.find_spec("tokenizers") is None:
        raise UsageError("--tokenizer bpe needs the tokenizers package: pip install -e '.[text]'")


def build_task(settings: dict[str, Any], tokenizer: CharTokenizer | BPETokenizer | HFTokenizer | None = None) -> Task:
    """The task of the settings; for text, windows of --block-size + 1 tokens, with a tokenizer trained on the file
    (--tokenizer, --vocab-size) or the one given, a checkpoint's or an --init-from folder's."""
    check_data(settings["task"], settings["data"])
    options: dict[str, Any] = {}
    if settings["task"] == "text":
        block_size = TEXT_CONTEXT if settings["block_size"] is None else settings["block_size"]
        options = {"seq_len": block_size + 1, "tokenizer": tokenizer or settings["tokenizer"],
                   "vocab_size": None if tokenizer else settings["vocab_size"]}
    try:
        return make_task(settings["task"], data=settings["data"], **options)
    except (ValueError, FileNotFoundError) as err:
        raise UsageError(str(err)) from None


def check_data(task: str, data: str | None) -> None:
    """--data, before the text task reads it: what is wrong with it, in the flags' terms."""
    if task != "text":
        if data is not None:
            raise UsageError(f"--data {data}: --data is for --task text; task {task!r} makes its own examples")
        return
    if data is None:
        raise UsageError("--task text needs --data FILE: the UTF-8 text to learn from (nanoGPT's input.txt)")
    if os.path.isdir(data):
        raise UsageError(f"--data {data} is a folder; give a text file, such as {os.path.join(data, 'input.txt')}")
    if not os.path.exists(data):
        raise UsageError(f"--data {data}: no such file")
    if os.path.getsize(data) == 0:
        raise UsageError(f"--data {data} is empty; give a file with the text to learn from")


def model_config(settings: dict[str, Any], task: Task) -> Any:
    """The config of settings["arch"] for this task: sizes from the preset, overridden by the flags given."""
    needed = task.seq_len - 1  # the model reads all tokens but the last
    block_size = needed if settings["block_size"] is None else settings["block_size"]
    if block_size < needed:
        raise UsageError(f"--block-size {block_size} is too small for task {task.name!r}, "
                         f"whose sequences need {needed}")
    preset = PRESETS[settings["preset"]]
    sizes = {k: preset[k] if settings[k] is None else settings[k] for k in ("n_embd", "n_head", "n_layer")}
    chosen = {k: settings[k] for k in ("bias", "gelu") if settings[k] is not None}  # else the config's own
    if "gelu" in chosen:
        chosen["gelu"] = GELUS[chosen["gelu"]]
    if chosen and settings["arch"] != "gpt":
        raise UsageError(f"{' and '.join(flag(k) for k in chosen)}: for --arch gpt; {settings['arch']} has no "
                         "biases and a SwiGLU feed-forward")
    _, config_class = ARCHITECTURES[settings["arch"]]
    try:
        return config_class(vocab_size=len(task.vocab), block_size=block_size, dropout=settings["dropout"], **sizes,
                            **chosen)
    except ValueError as err:
        raise UsageError(str(err)) from None


def check_block_size(settings: dict[str, Any], task: Task) -> None:
    """A new run's --block-size: only the text task takes any; another task's sequences have one length, and the
    positions past it would never be trained. (A checkpoint of an older train.py keeps the block size it has.)"""
    needed = task.seq_len - 1
    if settings["block_size"] is not None and settings["block_size"] > needed:
        raise UsageError(f"--block-size {settings['block_size']} is more than task {task.name!r} can use: its "
                         f"sequences are {needed} tokens, so positions {needed} to {settings['block_size'] - 1} would "
                         "never be trained; drop --block-size (the text task takes any)")


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


def initial_model(settings: dict[str, Any], config: Any, device: str) -> nn.Module:
    """A fresh run's model: the weights of the --init-from folder (with config's dropout), or seeded random ones."""
    if settings["init_from"] is None:
        return build_model(settings, config, device)
    check_device(device)
    mg.manual_seed(settings["seed"])  # as build_model: the dropout masks follow from --seed
    with folder_errors():
        return pretrained.load(settings["init_from"], settings["dtype"], device, dropout=config.dropout)


def pretrained_task(settings: dict[str, Any]) -> tuple[Task, Any, int]:
    """--init-from DIR, before any weight is read: the text task encoded with the folder's tokenizer, the model's
    config (with the run's dropout) and its parameter count, from config.json, tokenizer.json and the weights'
    headers. settings get what the folder fixes: its arch, tokenizer "hf", no preset, and the block size (default:
    the text task's, or the model's context if shorter), checked against the model's context."""
    path = settings["init_from"]
    with folder_errors():
        model_class, config, tensors = pretrained.read_folder(path)
        tokenizer = HFTokenizer.from_folder(path)
    check_vocabulary(path, tokenizer, config)
    block_size = min(TEXT_CONTEXT, config.block_size) if settings["block_size"] is None else settings["block_size"]
    if block_size > config.block_size:
        raise UsageError(f"--block-size {block_size} is more than the model of {path} reads: its context is "
                         f"{config.block_size} tokens (config.json); choose {config.block_size} or fewer")
    arch = next(name for name, (cls, _) in ARCHITECTURES.items() if cls is model_class)
    settings.update(arch=arch, tokenizer=tokenizer.kind, preset=None, block_size=block_size)
    try:
        config = replace(config, dropout=settings["dropout"])
    except ValueError as err:
        raise UsageError(str(err)) from None
    n_params = sum(math.prod(shape) for _, _, shape, _ in tensors.values())
    return build_task(settings, tokenizer), config, n_params


def prompt_ids(task: Task | HFTokenizer, prompt: str | None) -> list[int]:
    """A --prompt as the token ids of a task (space-separated tokens, or text for the text task) or of a loaded model's
    tokenizer; a token (a character) outside the vocabulary, or bytes that are not UTF-8, are refused by name. None:
    the prompt of the task's first held-out example."""
    if prompt is None:
        return task.split_prompt(split(task, seed=HELDOUT_SEED).heldout[0][0])[0]
    try:
        return task.encode(prompt)
    except ValueError as err:
        raise UsageError(f"--prompt: {err}") from None


def load_pretrained(path: str, dtype: str, device: str) -> tuple[nn.Module, HFTokenizer]:
    """--init-from DIR of explain and sample: the model and the tokenizer of a Hugging Face folder."""
    check_device(device)
    with folder_errors():
        tokenizer = HFTokenizer.from_folder(path)
        model = pretrained.load(path, dtype, device)
    check_vocabulary(path, tokenizer, model.config)
    return model, tokenizer


@contextmanager
def folder_errors() -> Iterator[None]:
    """Why a Hugging Face folder cannot load, as a UsageError: one line (a missing or misshapen tensor by name, .bin
    weights only, another architecture, a package to install, too little memory)."""
    try:
        yield
    except (ValueError, ImportError, MemoryError) as err:
        raise UsageError(str(err)) from None


def run_files(out: str) -> dict[str, str]:
    """The files of the run in the folder `out` that nothing else may write over (path -> what it is): its checkpoint
    and metrics log, the earlier ones a fresh run kept beside them (ckpt-<date>.npz, metrics-<date>.csv) and its
    lock."""
    files = {os.path.join(out, LOCK): f"the lock of the run in {out}"}
    for name, what in ((CHECKPOINT, "checkpoint"), (METRICS, "metrics log")):
        stem, ext = os.path.splitext(name)
        files[os.path.join(out, name)] = f"the {what} of the run in {out}"
        files.update({path: f"a {what} the run in {out} kept"
                      for path in sorted(glob.glob(os.path.join(glob.escape(out), f"{stem}-*{ext}")))})
    return files


def dated_name(path: str) -> str:
    """A free name beside `path` for the file there, dated by when it was written: ckpt-2025-01-31-142501.npz, with
    -2, -3, ... for two written in one second."""
    folder, name = os.path.split(path)
    stem, ext = os.path.splitext(name)
    dated = f"{stem}-{time.strftime('%Y-%m-%d-%H%M%S', time.localtime(os.path.getmtime(path)))}"
    kept, n = dated + ext, 1
    while os.path.exists(os.path.join(folder, kept)):
        n += 1
        kept = f"{dated}-{n}{ext}"
    return os.path.join(folder, kept)


def write_atomically(path: str, flag: str, write: Callable[[str], object]) -> None:
    """write(tmp) fills a temporary file beside `path`, which then replaces `path`: the file is whole or not
    there. A failure to write is a UsageError naming `flag`, and leaves no temporary file."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as err:
        raise UsageError(f"cannot write {flag} {path}: {err}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)



def folder_files(path: str) -> dict[str, str]:
    """The files of a Hugging Face folder that --init-from reads (path -> what it is): config.json, tokenizer.json,
    and the weights, model.safetensors or its index and shards."""
    with folder_errors():
        weights = pretrained.weight_files(path)
    names = (pretrained.CONFIG, TOKENIZER_FILE, pretrained.INDEX)
    return {file: f"a file of --init-from {path}" for file in [*(os.path.join(path, n) for n in names), *weights]}


def check_writes(writes: dict[str, str], keep: dict[str, str], overwrite: bool = False,
                 remedy: str = "choose another file name") -> None:
    """The one check of the files a command writes (flag -> path), before it writes any: no two flags write one file,
    and none writes over a file the command reads or the run keeps (keep: path -> what it is), which would be lost.
    A refusal is one line ending in `remedy`; overwrite (explain's --overwrite) lets a kept file be replaced on
    purpose. Paths are one file if they are one inode (a link, another spelling) or resolve to one path."""
    for i, (flag_, path) in enumerate(writes.items()):
        for other, other_path in list(writes.items())[:i]:
            if same_file(path, other_path):
                raise UsageError(f"{flag_} {path} is also the file of {other}; give each its own file")
        for kept, what in keep.items():
            if not overwrite and os.path.exists(kept) and same_file(path, kept):
                shown = "" if os.path.abspath(path) == os.path.abspath(kept) else f" ({kept})"  # a link, ..
                raise UsageError(f"{flag_} {path} is {what}{shown}; writing there would replace it: {remedy}")


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there yet
        return os.path.realpath(a) == os.path.realpath(b)


def check_vocabulary(path: str, tokenizer: HFTokenizer, config: Any) -> None:
    if tokenizer.vocab_size > config.vocab_size:
        raise UsageError(f"{path}: its tokenizer.json has {tokenizer.vocab_size} tokens, more than the model's "
                         f"vocab_size {config.vocab_size} (the tokenizer of another model?)")

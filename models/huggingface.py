"""Weights trained elsewhere: a Hugging Face GPT-2 or LLaMA folder (config.json, and model.safetensors or the shards of
model.safetensors.index.json), read with the safetensors package's NumPy API, never pickle, into a model of
minigrad's under minigrad's names. It imports no model: GPT.from_pretrained and Llama.from_pretrained (models/gpt.py)
call load(cls, ...) with their own class, whose `config_class` and `model_type` say what to build;
models/pretrained.py, above both, picks the class a folder holds. docs/gpt2.md shows it run.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import replace
from typing import Any

import numpy as np

from minigrad.array import runtime

CONFIG, WEIGHTS, INDEX = "config.json", "model.safetensors", "model.safetensors.index.json"
MODEL_TYPES = {"gpt2": "GPT", "llama": "Llama"}  # config.json's model_type -> the minigrad model that loads it
GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}  # HF's activation_function -> F.gelu's
# Plan: each tensor of the file (its name without the "transformer." or "model." prefix) -> the minigrad parameters
# it fills, stacked along their first axis, and whether it is stored (in, out) as HF's Conv1D does (so transposed).
Plan = dict[str, tuple[list[str], bool]]
Tensors = dict[str, tuple[str, str, tuple[int, ...], str]]  # a tensor's name -> (its file, full name, shape, dtype)
# the JSON type of each config.json field that minigrad reads (a number may be written as an integer; true and false
# are not numbers, though Python's bool is an int), checked before any is used
JSON_TYPES = {
    "an integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "a number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "a string": lambda v: isinstance(v, str),
    "true or false": lambda v: isinstance(v, bool),
    "an object": lambda v: isinstance(v, dict),
    "a list of strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "an integer or a list of integers": lambda v: all(JSON_TYPES["an integer"](x) for x in
                                                      (v if isinstance(v, list) else [v])),
}
FIELDS = {  # top level; in GPT-2's and LLaMA's configs, then the tokenizer's ids
    "model_type": "a string", "architectures": "a list of strings", "vocab_size": "an integer",
    "tie_word_embeddings": "true or false",
    "n_positions": "an integer", "n_layer": "an integer", "n_head": "an integer", "n_embd": "an integer",
    "n_inner": "an integer", "layer_norm_epsilon": "a number", "activation_function": "a string",
    "scale_attn_weights": "true or false", "scale_attn_by_inverse_layer_idx": "true or false",
    "add_cross_attention": "true or false",
    "max_position_embeddings": "an integer", "num_hidden_layers": "an integer", "num_attention_heads": "an integer",
    "hidden_size": "an integer", "num_key_value_heads": "an integer", "intermediate_size": "an integer",
    "head_dim": "an integer", "rms_norm_eps": "a number", "rope_theta": "a number", "rope_parameters": "an object",
    "rope_scaling": "an object", "hidden_act": "a string", "attention_bias": "true or false",
    "mlp_bias": "true or false",
    "bos_token_id": "an integer", "eos_token_id": "an integer or a list of integers",
}
ROPE_FIELDS = {"rope_type": "a string", "type": "a string", "rope_theta": "a number"}  # in rope_parameters


class PretrainedError(ValueError):
    """A folder that cannot be loaded, in one line naming the file, setting or tensor at fault."""


def load(model_class: type, path: str, dtype: Any = "float32", device: str = "cpu", dropout: float = 0.0) -> Any:
    """The `model_class` (GPT or Llama) of the Hugging Face folder `path`, its parameters in `dtype` (float32, or
    float64) on `device`; a folder of another architecture is refused. dropout: for fine-tuning (a config.json has
    none)."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise PretrainedError(f"dtype {dtype} is not one minigrad computes in: choose float32 or float64")
    config, tensors = read_folder(path, model_class)
    check_memory(path, list(tensors.values()), dtype, device)

    plan = PLANS[model_class.model_type](config)
    model = model_class(replace(config, dropout=dropout)).to(dtype)  # on the host, then filled from the file
    params = dict(model.named_parameters())
    for name, (targets, conv1d) in plan.items():  # every shape checked before any tensor is read
        file, full, shape, _ = tensors[name]
        parts = [params[t].shape for t in targets]
        expected = (sum(s[0] for s in parts), *parts[0][1:])
        expected = expected[::-1] if conv1d else expected
        if shape != expected:
            raise PretrainedError(f"{file}: tensor {full!r} has shape {shape}, but config.json makes it {expected}")
    for name, (targets, conv1d) in plan.items():
        file, full, _, kind = tensors[name]
        value = read_tensor(file, full, kind)
        check_finite(file, full, value)
        value = value.T if conv1d else value  # HF's Conv1D keeps (in, out); minigrad's Linear (out, in)
        sizes = np.cumsum([params[t].shape[0] for t in targets])[:-1]
        for target, part in zip(targets, np.split(value, sizes), strict=True):  # GPT-2's c_attn: W_Q, W_K, W_V
            params[target].data = np.array(part, dtype=dtype, order="C")
    return model.to(device)


def read_folder(path: str, model_class: type) -> tuple[Any, Tensors]:
    """The config (a `model_class.config_class`) and weight tensors of a folder that holds a `model_class`, from
    config.json and the weight files' headers (no weight is read): every tensor the config calls for, checked to be
    there, and no tensor it has no place for; a folder of another architecture is refused."""
    hf = read_config(path)
    model_type = model_class.model_type
    if hf["model_type"] != model_type:
        raise PretrainedError(f"{path} holds a {hf['model_type']} model; load it with {MODEL_TYPES[hf['model_type']]}"
                              f".from_pretrained, not {model_class.__name__}.from_pretrained")
    fields = gpt2_config(hf, path) if model_type == "gpt2" else llama_config(hf, path)
    config = make_config(model_class.config_class, path, **fields)
    tensors = read_header(path, "transformer." if model_type == "gpt2" else "model.")
    if config.n_layer > len(tensors):  # before the plan, which names each layer's tensors: a billion would not end
        raise PretrainedError(f"{os.path.join(path, CONFIG)}: {config.n_layer:,} layers, more than the weights' "
                              f"{len(tensors)} tensors could hold")
    plan = PLANS[model_type](config)
    missing = [name for name in plan if name not in tensors]
    if missing:
        raise PretrainedError(f"{path}: tensor {missing[0]!r} is missing from the weights"
                              + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    unexpected = sorted(set(tensors) - set(plan) - ignored(config, model_type))
    if unexpected:
        file, full, _, _ = tensors[unexpected[0]]
        raise PretrainedError(f"{file}: tensor {full!r} is not part of a {hf['model_type']} model with this "
                              "config.json (another architecture, or a setting minigrad does not have?)")
    return config, {name: tensors[name] for name in plan}


def read_config(path: str) -> dict[str, Any]:
    """config.json of the folder, checked to describe a model_type minigrad loads."""
    file = os.path.join(path, CONFIG)
    if not os.path.isdir(path):
        raise PretrainedError(f"{path} is not a folder (expected a Hugging Face model folder with {CONFIG})")
    try:
        with open(file, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        raise PretrainedError(f"{path} has no {CONFIG}: not a Hugging Face model folder") from None
    except (OSError, ValueError) as err:
        raise PretrainedError(f"{file} cannot be read as JSON: {err}") from None
    if isinstance(config, dict):
        check_fields(config, file)
    kind = config.get("model_type") if isinstance(config, dict) else None
    if kind not in MODEL_TYPES:
        names = ", ".join(config.get("architectures") or []) if isinstance(config, dict) else ""
        raise PretrainedError(f"{file}: model_type {kind!r}" + (f" ({names})" if names else "") +
                              f" is not one minigrad loads: {', '.join(MODEL_TYPES)}")
    return config


def check_fields(values: dict[str, Any], where: str, fields: dict[str, str] = FIELDS) -> None:
    """Refuse a field of `values` (of those in `fields` that are present and not null) whose JSON type is not the one
    minigrad reads it as, naming the field and its value: "1e-5" as an epsilon would fail later, in a traceback."""
    for key, kind in fields.items():
        value = values.get(key)
        if value is not None and not JSON_TYPES[kind](value):
            raise PretrainedError(f"{where}: {key} must be {kind}, got {value!r:.80} ({type(value).__name__})")


def setting(hf: dict[str, Any], key: str, path: str, default: Any = None) -> Any:
    """hf[key], or `default`; without a default, a missing key is refused by name."""
    if key in hf and hf[key] is not None:
        return hf[key]
    if default is None:
        raise PretrainedError(f"{os.path.join(path, CONFIG)} has no {key!r}")
    return default


def refuse_unless(hf: dict[str, Any], path: str, **supported: Any) -> None:
    """Refuse a config whose keys (those present) differ from the values minigrad's model computes with."""
    for key, value in supported.items():
        if hf.get(key, value) not in (value, None):
            raise PretrainedError(f"{os.path.join(path, CONFIG)}: {key}={hf[key]!r} is not supported "
                                  f"(minigrad's model computes with {key}={value!r})")


def make_config(config_class: type, path: str, **fields: Any) -> Any:
    try:
        return config_class(**fields)
    except ValueError as err:
        raise PretrainedError(f"{os.path.join(path, CONFIG)}: {err}") from None


def gpt2_config(hf: dict[str, Any], path: str) -> dict[str, Any]:
    """GPTConfig's fields of a GPT-2 config.json (GPT2LMHeadModel): the sizes, layer_norm_epsilon, the GELU, the
    tie."""
    refuse_unless(hf, path, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False, add_cross_attention=False)
    act = setting(hf, "activation_function", path, "gelu_new")
    if act not in GELU:
        raise PretrainedError(f"{os.path.join(path, CONFIG)}: activation_function {act!r} is not supported "
                              f"(minigrad has {', '.join(GELU)})")
    return dict(vocab_size=setting(hf, "vocab_size", path),
                block_size=setting(hf, "n_positions", path), n_layer=setting(hf, "n_layer", path),
                n_head=setting(hf, "n_head", path), n_embd=setting(hf, "n_embd", path), dropout=0.0, bias=True,
                layer_norm_eps=setting(hf, "layer_norm_epsilon", path, 1e-5), n_inner=hf.get("n_inner"),
                gelu=GELU[act], tie_word_embeddings=setting(hf, "tie_word_embeddings", path, True))


def llama_config(hf: dict[str, Any], path: str) -> dict[str, Any]:
    """LlamaConfig's fields of a LLaMA config.json (LlamaForCausalLM): the sizes, grouped key/value heads,
    rms_norm_eps, and rope_theta, from rope_parameters (newer configs) or the top level (older ones, which have no
    head_dim either)."""
    refuse_unless(hf, path, hidden_act="silu", attention_bias=False, mlp_bias=False)
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    check_fields(rope, f"{os.path.join(path, CONFIG)}: rope_parameters", ROPE_FIELDS)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise PretrainedError(f"{os.path.join(path, CONFIG)}: rope_type {rope_type!r} (rescaled rotary angles) is not "
                              "supported; minigrad's RotaryEmbedding turns by the plain angles (rope_type 'default')")
    n_head = setting(hf, "num_attention_heads", path)
    return dict(vocab_size=setting(hf, "vocab_size", path),
                block_size=setting(hf, "max_position_embeddings", path, 2048),
                n_layer=setting(hf, "num_hidden_layers", path), n_head=n_head,
                n_embd=setting(hf, "hidden_size", path), dropout=0.0,
                norm_eps=setting(hf, "rms_norm_eps", path, 1e-6),
                rope_base=float(rope.get("rope_theta", setting(hf, "rope_theta", path, 10000.0))),
                n_kv_head=setting(hf, "num_key_value_heads", path, n_head),
                intermediate_size=setting(hf, "intermediate_size", path), head_size=hf.get("head_dim"),
                tie_word_embeddings=setting(hf, "tie_word_embeddings", path, False))


def gpt2_plan(config: Any) -> Plan:
    """GPT-2's tensor names -> minigrad's. c_attn holds W_Q, W_K, W_V side by side; Conv1D matrices are (in, out)."""
    plan: Plan = {"wte.weight": (["wte.weight"], False), "wpe.weight": (["wpe.weight"], False)}
    for i in range(config.n_layer):
        h, b = f"h.{i}.", f"blocks.{i}."
        for part in ("weight", "bias"):
            plan[f"{h}ln_1.{part}"] = ([f"{b}ln_1.{part}"], False)
            plan[f"{h}attn.c_attn.{part}"] = ([f"{b}attn.{x}_proj.{part}" for x in "qkv"], True)
            plan[f"{h}attn.c_proj.{part}"] = ([f"{b}attn.proj.{part}"], True)
            plan[f"{h}ln_2.{part}"] = ([f"{b}ln_2.{part}"], False)
            plan[f"{h}mlp.c_fc.{part}"] = ([f"{b}mlp.fc.{part}"], True)
            plan[f"{h}mlp.c_proj.{part}"] = ([f"{b}mlp.proj.{part}"], True)
    plan.update({"ln_f.weight": (["ln_f.weight"], False), "ln_f.bias": (["ln_f.bias"], False)})
    if not config.tie_word_embeddings:
        plan["lm_head.weight"] = (["lm_head.weight"], False)
    return plan


def llama_plan(config: Any) -> Plan:
    """LlamaForCausalLM's tensor names -> minigrad's (the same (out, in) layout; gate_proj is W1, up_proj W3)."""
    plan: Plan = {"embed_tokens.weight": (["wte.weight"], False), "norm.weight": (["ln_f.weight"], False)}
    names = {"input_layernorm": "ln_1", "post_attention_layernorm": "ln_2", "self_attn.q_proj": "attn.q_proj",
             "self_attn.k_proj": "attn.k_proj", "self_attn.v_proj": "attn.v_proj", "self_attn.o_proj": "attn.proj",
             "mlp.gate_proj": "mlp.w1", "mlp.up_proj": "mlp.w3", "mlp.down_proj": "mlp.w2"}
    for i in range(config.n_layer):
        for theirs, ours in names.items():
            plan[f"layers.{i}.{theirs}.weight"] = ([f"blocks.{i}.{ours}.weight"], False)
    if not config.tie_word_embeddings:
        plan["lm_head.weight"] = (["lm_head.weight"], False)
    return plan


PLANS = {"gpt2": gpt2_plan, "llama": llama_plan}  # config.json's model_type -> its names' plan


def ignored(config: Any, model_type: str) -> set[str]:
    """Tensors a folder may hold that are not parameters: older files' causal masks and rotary tables, and the head
    of a tied model saved beside the embedding it equals."""
    if model_type == "gpt2":
        extra = {f"h.{i}.attn.{buffer}" for i in range(config.n_layer) for buffer in ("bias", "masked_bias")}
    else:
        extra = {f"layers.{i}.self_attn.rotary_emb.inv_freq" for i in range(config.n_layer)}
    return extra | ({"lm_head.weight"} if config.tie_word_embeddings else set())


def weight_files(path: str) -> list[str]:
    """The safetensors files of the folder: model.safetensors, or the shards its index lists. PyTorch's .bin files
    are pickles, which can run code when read: refused, with the command that converts them."""
    single, index = os.path.join(path, WEIGHTS), os.path.join(path, INDEX)
    if os.path.isfile(single):
        return [single]
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as f:
                shards = set(json.load(f)["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise PretrainedError(f"{index} is not a safetensors index (a JSON weight_map): {err}") from None
        if not all(isinstance(shard, str) for shard in shards):
            raise PretrainedError(f"{index}: its weight_map names {next(s for s in shards if not isinstance(s, str))!r}"
                                  ", not a file name")
        files = [shard_file(path, index, shard) for shard in sorted(shards)]
        absent = [f for f in files if not os.path.isfile(f)]
        if absent:
            raise PretrainedError(f"{index} lists {absent[0]}, which is not there (an unfinished download?)")
        return files
    if any(name.endswith(".bin") for name in os.listdir(path)):
        raise PretrainedError(f"{path} has PyTorch .bin weights only; minigrad reads safetensors, never pickle. "
                              "Convert once (needs transformers and torch): "
                              + resave_command("AutoModelForCausalLM", path))
    raise PretrainedError(f"{path} has no {WEIGHTS} (nor {INDEX} for a sharded checkpoint)")


def shard_file(path: str, index: str, shard: str) -> str:
    """The file of a shard the index names: in the folder, once links are resolved, so that an index naming
    "../elsewhere/x" or "/x" (or a link to such a place) never has a file read from outside it. Where the index is
    itself a link, as in the hub's cache (each file of a snapshot links to its blobs folder), beside what it links to
    is in the folder too."""
    file = os.path.join(path, shard)
    real = os.path.realpath(file)
    roots = {os.path.realpath(path), os.path.dirname(os.path.realpath(index))}
    if not any(os.path.commonpath([real, root]) == root for root in roots):
        raise PretrainedError(f"{index} names the shard {shard!r}, which is {real}, outside {path}: a shard must be "
                              "a file of the folder")
    return file


def read_header(path: str, prefix: str) -> Tensors:
    """Every tensor of the folder's weight files, by its name less `prefix`: (file, full name, shape, dtype)."""
    safe_open = safetensors_open()
    tensors = {}
    for file in weight_files(path):
        try:
            with safe_open(file, framework="np") as f:
                for full in f.keys():
                    piece = f.get_slice(full)
                    name = full[len(prefix):] if full.startswith(prefix) else full
                    tensors[name] = (file, full, tuple(piece.get_shape()), piece.get_dtype())
        except Exception as err:  # safetensors raises its own SafetensorError on a broken file
            raise PretrainedError(f"{file} cannot be read as safetensors: {err}") from None
    return tensors


def check_finite(file: str, name: str, value: np.ndarray) -> None:
    """Refuse a tensor holding inf or NaN, by name: a model computes nothing but NaN from it, and the failures that
    would come later (sampling, the explain page) do not say where it came from."""
    bad = int(np.count_nonzero(~np.isfinite(value)))
    if bad:
        raise PretrainedError(f"{file}: tensor {name!r} has {bad:,} non-finite values (inf or NaN) among its "
                              f"{value.size:,}: a damaged or diverged model?")


def read_tensor(file: str, name: str, kind: str) -> np.ndarray:
    """One tensor as a NumPy array. bfloat16, which NumPy lacks, is read from the file's bytes: a bfloat16 is the
    top 16 bits of the float32 of the same value, so shifting them up gives that float32 exactly."""
    if kind not in ("F64", "F32", "F16", "BF16"):
        raise PretrainedError(f"{file}: tensor {name!r} has dtype {kind}, not floating point (a quantized file?)")
    if kind != "BF16":
        with safetensors_open()(file, framework="np") as f:
            return f.get_tensor(name)
    with open(file, "rb") as f:  # the format: 8 bytes of header length, the JSON header, then the raw data
        size = int.from_bytes(f.read(8), "little")
        entry = json.loads(f.read(size))[name]
        begin, end = entry["data_offsets"]
        f.seek(8 + size + begin)
        bits = np.frombuffer(f.read(end - begin), dtype="<u2").reshape(entry["shape"])
    return (bits.astype(np.uint32) << 16).view(np.float32)


def resave_command(auto_class: str, path: str) -> str:
    """The command that has transformers' `auto_class` read the folder `path` and save it again beside what it read
    (model.safetensors, a tokenizer.json). The path is a string literal inside one shell-quoted argument, so that
    whatever it holds (quotes, spaces, $) is read as a path, never as code."""
    literal = json.dumps(path)  # a double-quoted string that Python reads back as `path`
    return "python -c " + shlex.quote(f"from transformers import {auto_class} as A; "
                                      f"A.from_pretrained({literal}).save_pretrained({literal})")


def safetensors_open() -> Any:
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError("loading a Hugging Face folder needs safetensors: pip install -e '.[hf]'") from None
    return safe_open


def check_memory(path: str, tensors: list[tuple[str, str, tuple[int, ...], str]], dtype: np.dtype, device: str) -> None:
    """Refuse, before allocating, parameters that cannot fit: every parameter in `dtype`, and room to read and convert
    the largest tensor beside them. Sampling adds a few activations of one sequence (a few percent for GPT-2)."""
    sizes = [int(np.prod(shape)) for _, _, shape, _ in tensors]
    need = sum(sizes) * dtype.itemsize + max(sizes) * (dtype.itemsize + 8)
    for where in dict.fromkeys(["cpu", device]):  # the host reads the file; a GPU then holds the parameters too
        free = runtime.available_memory(where)
        if need > free:
            raise MemoryError(f"loading {path} needs about {need / 2**30:,.2f} GiB ({sum(sizes):,} parameters in "
                              f"{dtype}), more than the {free / 2**30:,.2f} GiB available on {where}"
                              + ("; float32 takes half" if dtype == np.float64 else ""))

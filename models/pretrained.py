"""A Hugging Face GPT-2 or LLaMA folder loaded as the model it holds: `load(path)` reads config.json's model_type and
runs that model's from_pretrained (GPT.from_pretrained, Llama.from_pretrained), which builds itself with
models/huggingface.py. Above both models, the one module that knows them both; docs/gpt2.md shows it run.
"""

from __future__ import annotations

from typing import Any

from models import huggingface
from models.gpt import GPT, GPTConfig
from models.huggingface import (  # noqa: F401  (pretrained's names before 0.5: the folder's files, its errors)
    CONFIG,
    FIELDS,
    INDEX,
    WEIGHTS,
    PretrainedError,
    check_fields,
    check_finite,
    read_config,
    resave_command,
    weight_files,
)
from models.llama import Llama, LlamaConfig

MODEL_TYPES = {"gpt2": GPT, "llama": Llama}  # config.json's model_type -> the minigrad model that loads it


def load(path: str, dtype: Any = "float32", device: str = "cpu", expect: type | None = None,
         dropout: float = 0.0) -> GPT | Llama:
    """The GPT or Llama of the Hugging Face folder `path`, its parameters in `dtype` (float32, or float64) on `device`.
    expect: the model class the caller wants; a folder of the other architecture is refused. dropout: for fine-tuning
    (a config.json has none)."""
    model_class = expect or MODEL_TYPES[read_config(path)["model_type"]]
    return model_class.from_pretrained(path, dtype, device, dropout=dropout)


def read_folder(path: str, expect: type | None = None) -> tuple[type, GPTConfig | LlamaConfig, huggingface.Tensors]:
    """The model class, config and weight tensors of a folder, from config.json and the weight files' headers (no
    weight is read): every tensor the config calls for, checked to be there, and no tensor it has no place for.
    expect: the model class the caller wants; a folder of the other architecture is refused."""
    model_class = expect or MODEL_TYPES[read_config(path)["model_type"]]
    config, tensors = huggingface.read_folder(path, model_class)
    return model_class, config, tensors


def plan_of(config: GPTConfig | LlamaConfig) -> huggingface.Plan:
    """The plan of a model's config: each tensor of the folder -> the parameters it fills."""
    return huggingface.gpt2_plan(config) if isinstance(config, GPTConfig) else huggingface.llama_plan(config)

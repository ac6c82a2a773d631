"""The names the models had before 0.5 (issue 47: one name per quantity, nanoGPT's), still taken for one release
with a DeprecationWarning naming the new one: keyword arguments (d_model=, n_heads=, n_kv_heads=), DecoderBlock's
sizes given one by one, and attributes read (attn.n_heads, a Llama's norm_1, norm_2, norm_f). models/attention.py,
gpt.py and llama.py use it; nothing else should.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

WIDTH, HEADS, KV_HEADS = {"d_model": "n_embd"}, {"n_heads": "n_head"}, {"n_kv_heads": "n_kv_head"}


def warn(old: str, new: str, depth: int = 3) -> None:
    """The DeprecationWarning, pointed at the caller `depth` frames up (3: the caller of a decorated function)."""
    warnings.warn(f"{old} is deprecated since minigrad 0.5 and goes in the next release: use {new}",
                  DeprecationWarning, stacklevel=depth)


def renamed_keywords(**renames: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: the function also takes each keyword by its old name (renames: old="new"), with a warning."""
    def wrap(init: Callable[..., Any]) -> Callable[..., Any]:
        owner = init.__qualname__.split(".")[0]

        @functools.wraps(init)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{owner}: got both {old}= and {new}=; {old}= is {new}='s old name")
                    warn(f"{owner}({old}=)", f"{new}=")
                    kwargs[new] = kwargs.pop(old)
            return init(*args, **kwargs)
        return call
    return wrap


def sizes_as_config(config_class: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator of DecoderBlock.__init__(self, config): it also takes the sizes before 0.5, (d_model, n_heads,
    dropout, bias, eps, hidden, gelu), as the config_class (GPTConfig) that holds them, with a warning."""
    fields = {"d_model": "n_embd", "n_heads": "n_head", "dropout": "dropout", "bias": "bias", "eps": "layer_norm_eps",
              "hidden": "n_inner", "gelu": "gelu"}

    def wrap(init: Callable[..., Any]) -> Callable[..., Any]:
        owner = init.__qualname__.split(".")[0]

        @functools.wraps(init)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if len(args) == 1 and not kwargs or "config" in kwargs:
                return init(self, *args, **kwargs)
            sizes = dict(zip(fields, args, strict=False))
            for name, value in kwargs.items():
                if name not in fields or name in sizes:
                    raise TypeError(f"{owner}: unexpected or repeated argument {name}=")
                sizes[name] = value
            warn(f"{owner}({', '.join(sizes)})", f"{owner}({config_class.__name__}(n_embd=..., n_head=..., ...))")
            return init(self, config_class(**{fields[name]: value for name, value in sizes.items()}))
        return call
    return wrap


def renamed_attributes(**renames: str) -> type:
    """A base class whose attribute `old` reads `new` with a warning (renames: old="new"), for the attributes a
    program may have read: attn.n_heads, a Llama's norm_1, norm_2 and norm_f."""
    def read(old: str, new: str) -> property:
        def get(self: Any) -> Any:
            warn(f"{type(self).__name__}.{old}", f".{new}")
            return getattr(self, new)
        return property(get, doc=f"{new}'s name before 0.5 (deprecated)")
    return type("RenamedAttributes", (), {old: read(old, new) for old, new in renames.items()})

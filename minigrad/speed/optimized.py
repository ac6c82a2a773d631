"""torch.compile(model) as minigrad answers it: the same model, run under mg.compiled() (the Numba kernels of
minigrad/speed/compiled_functions.py, for its forward and, through the nodes they record, its backward) where Numba is
installed, else the model unchanged. Nothing is traced or generated: the values are the same as without it.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

from minigrad.nn import Module
from minigrad.speed import compiled

__all__ = ["OptimizedModule", "compile"]


class OptimizedModule(Module):
    """What compile(module) returns, as PyTorch's: the module as `_orig_mod` (so its state_dict keys start with
    '_orig_mod.', as there), each call run under mg.compiled(), and any other attribute read from the module."""

    def __init__(self, module: Module) -> None:
        super().__init__()
        self._orig_mod = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with compiled():
            return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        modules = self.__dict__.get("_modules", {})
        if "_orig_mod" in modules and name != "_orig_mod":
            return getattr(modules["_orig_mod"], name)
        return super().__getattr__(name)


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: bool | None = None, backend: str = "inductor",
            mode: str | None = None, options: dict[str, Any] | None = None, disable: bool = False) -> Any:
    """torch.compile: a Module becomes an OptimizedModule, a function one that runs under mg.compiled(); without
    Numba (or with disable=True) the model or function itself. PyTorch's other arguments are accepted and change
    nothing. Called without a model, a decorator, as PyTorch's (@mg.compile(mode=...))."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if disable or importlib.util.find_spec("numba") is None:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model)
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return functools.wraps(model)(_under_compiled(model))


def _under_compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        with compiled():
            return fn(*args, **kwargs)
    return run

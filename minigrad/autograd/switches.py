"""The per-thread switches of the core, as context managers and decorators: grad mode (no_grad, enable_grad,
set_grad_enabled, as in PyTorch) and intercept (a hook around every forward and backward); `Switch`, which the
speed switches of minigrad/speed/__init__.py are made of too. Each entry saves what it found for its own thread and
its own call, so one object may be used on several threads, nested, or by a function that calls itself.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from minigrad import core


class Switch(contextlib.ContextDecorator):
    """A per-thread setting, `_state.name`, for the block it guards; each exit restores what its own entry found on
    its own thread."""

    _state: Any = core.modes
    name = ""

    def __init__(self, value: Any) -> None:
        self.value, self.entries = value, threading.local()  # entries.saved: this thread's stack of found values

    def _saved(self) -> list[Any]:
        if not hasattr(self.entries, "saved"):
            self.entries.saved = []
        return self.entries.saved

    def __enter__(self) -> None:
        self._saved().append(getattr(self._state, self.name))
        setattr(self._state, self.name, self.value)

    def __exit__(self, *exc: object) -> None:
        setattr(self._state, self.name, self._saved().pop())

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """As a decorator: the function runs inside the block; a generator function's body too, each time it resumes
        (its caller keeps its own setting in between), as PyTorch's decorators do."""
        if not inspect.isgeneratorfunction(func):
            return super().__call__(func)

        @functools.wraps(func)
        def resumed_inside(*args: Any, **kwargs: Any) -> Any:
            gen, sent, thrown = func(*args, **kwargs), None, None
            while True:
                with self:
                    try:
                        value = gen.send(sent) if thrown is None else gen.throw(thrown)
                    except StopIteration as stop:
                        return stop.value
                try:
                    sent, thrown = (yield value), None
                except GeneratorExit:
                    with self:
                        gen.close()
                    raise
                except BaseException as err:  # thrown into the generator: its body handles it inside the block
                    sent, thrown = None, err

        return resumed_inside


class GradSwitch(Switch):
    """no_grad and enable_grad: a with-block, or a decorator with or without parentheses (@mg.no_grad), as in
    PyTorch."""

    name = "grad"
    value = True

    def __new__(cls, func: Callable[..., Any] | None = None) -> Any:
        if func is None:
            return super().__new__(cls)
        if not callable(func):
            raise TypeError(f"{cls.__name__}() takes no arguments; as a decorator it is @mg.{cls.__name__} or "
                            f"@mg.{cls.__name__}(), got {type(func).__name__} {func!r:.40}")
        return cls()(func)  # @mg.no_grad without parentheses: the decorated function

    def __init__(self, func: Callable[..., Any] | None = None) -> None:
        super().__init__(self.value)


class no_grad(GradSwitch):
    """`with mg.no_grad():` (or as a decorator): nothing inside is recorded for backward."""

    value = False


class enable_grad(GradSwitch):
    """`with mg.enable_grad():` (or as a decorator): grad mode on inside, also within a no_grad block."""

    value = True


class inference_mode(GradSwitch):
    """As torch.inference_mode: here no_grad (minigrad has no inference tensors to make faster), a with-block or a
    decorator, with or without parentheses; inference_mode(False) turns grad mode on, as PyTorch's does."""

    value = False

    def __new__(cls, mode: bool | Callable[..., Any] = True) -> Any:
        if isinstance(mode, bool):
            return Switch.__new__(cls)
        return super().__new__(cls, mode)  # @mg.inference_mode without parentheses; refuses what is not callable

    def __init__(self, mode: bool = True) -> None:
        Switch.__init__(self, not mode)


class set_grad_enabled(Switch):
    """Grad mode on or off, as torch.set_grad_enabled: at once, as a function call (mg.set_grad_enabled(False)), or
    for a with-block, which then restores the mode found at the call; as a decorator only for the function."""

    name = "grad"

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: mode must be True or False, got {type(mode).__name__} {mode!r:.40}")
        super().__init__(mode)
        self.found, core.modes.grad = core.modes.grad, mode  # restored by the first exit (None once entered)

    def __enter__(self) -> None:
        if self.found is None:
            return super().__enter__()
        self._saved().append(self.found)  # `with mg.set_grad_enabled(m):` the call switched already; the exit restores
        self.found, core.modes.grad = None, self.value

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        if self.found is not None:  # as a decorator, the call's switch is undone: only the function runs in `mode`
            self.found, core.modes.grad = None, self.found
        return super().__call__(func)


class intercept(Switch):
    """`with intercept(hook):` every Function.forward and .backward this thread runs is called as
    hook(node, "forward" or "backward", run), which must return run(): a way in for profilers and checks."""

    name = "hook"

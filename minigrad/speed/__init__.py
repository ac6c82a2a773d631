"""The speed switches, per thread: mg.fused() (the models' attention as one node, F.scaled_dot_product_attention,
and the in-place twins of minigrad/speed/twins.py) and mg.compiled() (the compiled implementations of
minigrad/speed/compiled_functions.py), each chosen where core.Function.apply chooses. Neither changes what is computed;
each says, in one visible place, that something faster runs.
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any

from minigrad import core
from minigrad.autograd.switches import Switch


class Modes(threading.local):
    """This thread's switches beyond the core's: the fused attention, and the compiled kernels' module."""

    def __init__(self) -> None:
        self.fused = False
        self.kernels: Any = None  # minigrad.speed.kernels while mg.compiled() is on (Adam(fused=True) reads it)


modes = Modes()


class fused(Switch):
    """`with mg.fused():` the models' attention runs as one node, F.scaled_dot_product_attention, instead of its
    four steps written out (models/attention.py, where the choice is made), and the primitives that have a twin
    computing in place (minigrad/speed/twins.py: the GELUs and attention) run it,
    chosen where core.Function.apply chooses (beside mg.compiled()'s, which win); mg.fused(False) turns both off
    again."""

    _state, name = modes, "fused"

    def __init__(self, enabled: bool = True) -> None:
        from minigrad.speed.twins import FUSED  # only here: twins.py imports the op modules, which import this package
        super().__init__(bool(enabled))
        self.twins = FUSED

    def __enter__(self) -> None:
        super().__enter__()
        found = core.modes.implementations
        self._saved().append(found)
        core.modes.implementations = {**self.twins, **found} if self.value else without(found, self.twins)

    def __exit__(self, *exc: object) -> None:
        core.modes.implementations = self._saved().pop()
        super().__exit__(*exc)


def without(found: dict[Any, Any], table: dict[Any, Any]) -> dict[Any, Any]:
    """The core's implementation table `found` without the entries of `table` (a switch turned off inside another)."""
    return {cls: implementation for cls, implementation in found.items() if table.get(cls) is not implementation}


def is_fused_enabled() -> bool:
    return modes.fused


class compiled(Switch):
    """`with mg.compiled():` the Functions that have a compiled implementation (minigrad/speed/compiled_functions.py:
    GELU, layer norm, softmax, cross-entropy, attention, the matrix products, the embedding's backward; and
    Adam(W)(fused=True)'s step) run it instead of their NumPy code, chosen where Function.apply chooses, on float32
    CPU arrays, on every core; NumPy's own BLAS runs on one thread meanwhile, whatever cap was set before
    (process-wide, until the last block on any thread exits, which gives back the count it found). The optional
    extra `pip install -e '.[compiled]'` (Numba) must be installed. mg.compiled(False) turns it off (mg.fused()'s
    twins stay, where that is on)."""

    name = "implementations"

    def __init__(self, enabled: bool = True) -> None:
        self.compiled: Any = None
        if enabled:
            try:  # only here: the extra is optional, and Numba takes a while to import
                from minigrad.speed import compiled_functions
            except ImportError as e:
                raise ImportError(f"mg.compiled() needs Numba, the optional extra: pip install -e '.[compiled]' "
                                  f"(or pip install numba): {e}") from None
            self.compiled = compiled_functions
        super().__init__(None)

    def __enter__(self) -> None:
        if self.compiled is not None:  # first: a refusal (a wrong MINIGRAD_SGEMM) leaves every setting as it was
            self.compiled.kernels.take_cores()
        found = core.modes.implementations  # restored by Switch.__exit__
        self._saved().append(found)
        loaded = sys.modules.get("minigrad.speed.compiled_functions")  # off: what an outer block may have put in
        core.modes.implementations = {**found, **self.compiled.IMPLEMENTATIONS} if self.compiled is not None else \
            found if loaded is None else without(found, loaded.IMPLEMENTATIONS)
        self._saved().append(modes.kernels)
        modes.kernels = None if self.compiled is None else self.compiled.kernels
        if self.compiled is not None:  # the cores are the kernels' (and the matrix products run on their threads)
            tell_once(self.compiled.kernels)

    def __exit__(self, *exc: object) -> None:
        if self.compiled is not None:
            self.compiled.kernels.give_cores()
        modes.kernels = self._saved().pop()
        super().__exit__(*exc)


told: list[str] = []  # what tell_once said, once per process


def tell_once(kernels: Any) -> None:
    """Say, the first time mg.compiled() is switched on, what it runs on (stderr), and warn where it falls back."""
    if told:
        return
    told.append(kernels.describe())
    print(told[0], file=sys.stderr)
    for reason in kernels.fallbacks():
        warnings.warn(reason, RuntimeWarning, stacklevel=3)


def is_compiled_enabled() -> bool:
    return modes.kernels is not None



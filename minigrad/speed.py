"""The speed switches, per thread: mg.fused() (the models' attention as one node, F.scaled_dot_product_attention)
and mg.compiled() (the compiled implementations of minigrad/compiled_functions.py, chosen where core.Function.apply
chooses). Neither changes what is computed; each says, in one visible place, that something faster runs.
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any

from minigrad.switches import Switch


class Modes(threading.local):
    """This thread's switches beyond the core's: the fused attention, and the compiled kernels' module."""

    def __init__(self) -> None:
        self.fused = False
        self.kernels: Any = None  # minigrad.kernels while mg.compiled() is on (Adam(fused=True) reads it)


modes = Modes()


class fused(Switch):
    """`with mg.fused():` the models' attention runs as one node, F.scaled_dot_product_attention, instead of its
    four steps written out (models/attention.py, where the choice is made); mg.fused(False) turns it off again."""

    _state, name = modes, "fused"

    def __init__(self, enabled: bool = True) -> None:
        super().__init__(bool(enabled))


def is_fused_enabled() -> bool:
    return modes.fused


class compiled(Switch):
    """`with mg.compiled():` the Functions that have a compiled implementation (minigrad/compiled_functions.py:
    GELU, layer norm, softmax's backward, attention, the matrix products, the embedding's backward; and
    Adam(W)(fused=True)'s step) run it instead of their NumPy code, chosen where Function.apply chooses, on float32
    CPU arrays, on every core; NumPy's own BLAS runs on one thread meanwhile, whatever cap was set before
    (process-wide, until the last block on any thread exits, which gives back the count it found). The optional
    extra `pip install -e '.[compiled]'` (Numba) must be installed. mg.compiled(False) turns it off."""

    name = "implementations"

    def __init__(self, enabled: bool = True) -> None:
        self.compiled: Any = None
        if enabled:
            try:  # only here: the extra is optional, and Numba takes a while to import
                from minigrad import compiled_functions
            except ImportError as e:
                raise ImportError(f"mg.compiled() needs Numba, the optional extra: pip install -e '.[compiled]' "
                                  f"(or pip install numba): {e}") from None
            self.compiled = compiled_functions
        super().__init__(self.compiled.IMPLEMENTATIONS if enabled else {})

    def __enter__(self) -> None:
        super().__enter__()
        self._saved().append(modes.kernels)
        modes.kernels = None if self.compiled is None else self.compiled.kernels
        if self.compiled is not None:  # the cores are the kernels' (and the matrix products run on their threads)
            self.compiled.kernels.take_cores()
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



"""The per-thread switches keep what each entry found on its own thread: one function decorated with a switch (as
generate and evaluate are with mg.no_grad()) running on two threads, the first to enter leaving first, leaves each
thread in its own mode, as in PyTorch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import minigrad as mg
from minigrad.core import modes
from minigrad.tensor import intercept

try:
    import numba
except ImportError:
    numba = None


def _hook(node: Any, method: str, run: Callable[[], Any]) -> Any:
    return run()


def _hook_now() -> Any:
    return modes.hook


# name -> (the switch both threads run a function under, a block that puts thread B in another mode, the mode now)
CASES = {
    "no_grad": (mg.no_grad, mg.no_grad, mg.is_grad_enabled),
    "enable_grad": (mg.enable_grad, mg.no_grad, mg.is_grad_enabled),
    "set_grad_enabled": (lambda: mg.set_grad_enabled(True), mg.no_grad, mg.is_grad_enabled),
    "fused": (lambda: mg.fused(False), mg.fused, mg.is_fused_enabled),
    "intercept": (lambda: intercept(None), lambda: intercept(_hook), _hook_now),
    "compiled": (lambda: mg.compiled(False), mg.compiled, mg.is_compiled_enabled),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_function_under_a_switch_on_two_threads_restores_each_thread_s_mode(name):
    if name == "compiled" and numba is None:
        pytest.skip("Numba is not installed: pip install -e '.[compiled]'")
    make, other_mode, mode = CASES[name]
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    found = {}

    @make()
    def inside(entered: threading.Event, wait_for: threading.Event) -> None:
        entered.set()
        assert wait_for.wait(5)

    def a() -> None:
        found["a before"] = mode()
        inside(a_in, b_in)  # enters first, leaves first
        found["a after"] = mode()
        a_out.set()

    def b() -> None:
        with other_mode():
            found["b before"] = mode()
            assert a_in.wait(5)
            inside(b_in, a_out)
            found["b after"] = mode()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert found["a before"] != found["b before"]  # the two threads were in different modes
    assert (found["a after"], found["b after"]) == (found["a before"], found["b before"]), found

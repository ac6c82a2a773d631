"""check: run a learner's Function on an exercise's cases, smallest first: its forward against the engine's, its
backward against the engine's (the engine's own Function, or autograd of the same composition) and against central
finite differences, with a random upstream gradient, in float64; on the first failing case, say which input's
gradient is wrong and by what pattern (diagnose), and print that case.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import numpy as np

import minigrad as mg
from gptlab.exercises.exercise import Exercise
from minigrad.array.arrays import unbroadcast
from minigrad.tensor import Function

STEP, RTOL, ATOL = 1e-6, 1e-5, 1e-7  # finite differences in float64


def load(exercise: Exercise, path: Path) -> type[Function]:
    """The learner's Function in the file: the class the stub named, else the one Function the file defines."""
    spec = importlib.util.spec_from_file_location(f"exercise_{exercise.name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise SystemExit(f"{path}, line {err.lineno}: {err.msg}") from None
    except Exception as err:  # the learner's file, run on import
        raise SystemExit(f"{path}: importing it raised {type(err).__name__}: {err}") from None
    if isinstance(getattr(module, exercise.cls_name, None), type):
        return getattr(module, exercise.cls_name)
    found = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, Function)
             and c.__module__ == module.__name__]
    if len(found) != 1:
        raise SystemExit(f"{path}: expected a class {exercise.cls_name} (a Function), found {len(found)} Functions")
    return found[0]


def run(fn: type[Function], arrays: list[np.ndarray], options: dict[str, Any], dout: np.ndarray | None = None
        ) -> tuple[np.ndarray, tuple[Any, ...] | None, Function]:
    """fn's forward on copies of the arrays, and with an upstream gradient dout its backward (first order, on arrays:
    a fresh node, every input wanting a gradient); and the node, which holds what backward left on it."""
    node = fn()
    node.needs_input_grad = (True,) * len(arrays)
    y = np.asarray(node.forward(*[a.copy() for a in arrays], **options))
    if dout is None:
        return y, None, node
    dxs = node.backward(dout)
    return y, tuple(dxs) if isinstance(dxs, (tuple, list)) else (dxs,), node


def reference(exercise: Exercise, arrays: list[np.ndarray], options: dict[str, Any], dout: np.ndarray
              ) -> tuple[np.ndarray, list[np.ndarray], dict[str, np.ndarray]]:
    """The engine's output and, by its autograd, each input's gradient under dout (and each named step's, for a
    composition with intermediates)."""
    tensors = [mg.tensor(a, requires_grad=True) for a in arrays]
    keep: dict[str, Any] = {}
    y = exercise.reference(*tensors, **options, **({"keep": keep} if exercise.intermediates else {}))
    y.backward(mg.tensor(dout))
    return y.numpy(), [t.grad.numpy() for t in tensors], {name: t.grad.numpy() for name, t in keep.items()}


def finite_differences(fn: type[Function], arrays: list[np.ndarray], options: dict[str, Any], dout: np.ndarray,
                       i: int) -> np.ndarray:
    """d sum(dout * y) / d arrays[i] by central differences (the masked -inf outputs count as constants)."""
    def contracted(xs: list[np.ndarray]) -> float:
        y = run(fn, xs, options)[0]
        return float(np.where(np.isfinite(y), dout * y, 0).sum())
    grad = np.zeros_like(arrays[i])
    for j in np.ndindex(arrays[i].shape):
        xs = [a.copy() for a in arrays]
        xs[i][j] += STEP
        up = contracted(xs)
        xs[i][j] -= 2 * STEP
        grad[j] = (up - contracted(xs)) / (2 * STEP)
    return grad


def close(a: Any, b: np.ndarray) -> bool:
    return a is not None and np.shape(a) == b.shape and np.allclose(a, b, rtol=RTOL, atol=ATOL)


def broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, to) == to
    except ValueError:
        return False


def swapped(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2) if a.ndim >= 2 else a


def diagnose(exercise: Exercise, name: str, g: Any, r: np.ndarray, shape: tuple[int, ...], masked: np.ndarray,
             again: Any) -> str | None:
    """None where g, the learner's gradient of `name` (an input, or a step of a composition), is right (r); else what
    is wrong, in a learner's words. masked: where the output is -inf; again: the learner's gradient with dout
    zeroed there."""
    d = f"d{name}"
    if g is None:
        return f"{d} is None: backward must give a gradient for {name}"
    g = np.asarray(g)
    if g.shape != r.shape:
        if g.ndim >= 2 and g.shape == swapped(r).shape and close(swapped(g), r):
            return f"{d} is transposed: it has shape {g.shape}, the transpose of {name}'s {shape}: " \
                   "swap the two factors of the product (and transpose each), or the last two axes"
        if broadcasts(shape, g.shape) and close(unbroadcast(g, shape), r):
            return f"{d} has shape {g.shape} but {name} has shape {shape}: it was broadcast in " \
                   "forward, and the adjoint of a copy is a sum: sum over the broadcast axes (a missing sum over a " \
                   "broadcast axis; minigrad.array.arrays.unbroadcast)"
        return f"{d} has shape {g.shape}, but {name} has shape {shape}"
    if close(g, r):
        return None
    if g.ndim >= 2 and g.shape[-1] == g.shape[-2] and close(swapped(g), r):
        return f"{d} is transposed: swap the two factors of the product (and transpose each), or the last two axes"
    if close(-g, r):
        return f"{d} has the wrong sign: check the minus signs of the derivative"
    scale = float((g * r).sum() / (r * r).sum()) if (r * r).sum() else 0.0
    if scale and close(g, scale * r):
        return f"{d} is off by a constant factor: yours is {scale:.4g} times the right one (1/{1 / scale:.4g}); " \
               "look for a scale, a 1/N of a mean, or a 2 that the derivative brings down"
    if masked.any() and close(again, r):
        return f"{d}: the masked positions are not zero: your {d} changes with the upstream gradient at the " \
               "positions forward set to -inf, which do not depend on any input; zero dout there first"
    if name in exercise.rows_sum_to_zero and np.allclose(r.sum(-1), 0, atol=1e-9) and \
            not np.allclose(g.sum(-1), 0, atol=1e-6):
        return f"{d} is wrong: {exercise.rows_sum_to_zero[name]}"
    j = np.unravel_index(np.argmax(np.abs(g - r)), g.shape)
    return f"{d} is wrong: the largest difference is at index {tuple(map(int, j))}: yours {g[j]:.6g}, " \
           f"expected {r[j]:.6g}"


def second_derivatives(exercise: Exercise, fn: type[Function], arrays: list[np.ndarray], options: dict[str, Any],
                       dout: np.ndarray, v: list[np.ndarray]) -> str:
    """Whether fn's backward, run on tensors under create_graph=True (the one formula on minigrad's names), gives the
    engine's second derivatives: d sum(v * dx) / d inputs for a random v, against the same through the reference."""
    def of(apply: Any) -> list[np.ndarray]:
        ts = [mg.tensor(a, requires_grad=True) for a in arrays]
        grads = mg.autograd.grad(apply(*ts, **options), ts, mg.tensor(dout), create_graph=True)
        terms = [(g * mg.tensor(w)).sum() for g, w in zip(grads, v, strict=True) if g.requires_grad]
        if not terms:
            return [np.zeros_like(a) for a in arrays]
        return [g.numpy() for g in mg.autograd.grad(sum(terms[1:], terms[0]), ts, materialize_grads=True)]
    want = of(exercise.reference)
    if not any(w.any() for w in want):
        return "no second derivatives to check (the gradient does not depend on the inputs)"
    try:
        mine = of(fn.apply)
    except Exception as err:  # the learner's formula on tensors: any error is an answer
        return f"your backward does not run on tensors ({type(err).__name__}: {err}); first order is this " \
               "exercise's, but written with xp's names and self.saved it would give second derivatives too"
    if all(close(m, w) for m, w in zip(mine, want, strict=True)):
        return "your backward, run on tensors, gives the engine's second derivatives too"
    return "yours differ from the engine's: first order is this exercise's, but for second derivatives take " \
           "everything forward kept through self.saved(...) (--solution shows how the engine does it)"


def show(name: str, a: Any) -> str:
    a = np.asarray(a)
    body = np.array2string(a, precision=4, suppress_small=True, max_line_width=100) if a.size <= 40 else "..."
    return f"  {name} {a.shape}:\n    " + body.replace("\n", "\n    ")


def check(exercise: Exercise, fn: type[Function], seed: int = 0) -> tuple[bool, str]:
    """(passed, what to tell the learner)."""
    rng = np.random.default_rng(seed)
    cases = exercise.cases(rng)
    for n, (arrays, options) in enumerate(cases, 1):
        shapes = ", ".join(f"{name} {a.shape}" for name, a in zip(exercise.inputs, arrays, strict=True))
        head = f"case {n} of {len(cases)} ({shapes})"
        try:
            y = run(fn, arrays, options)[0]
        except Exception as err:  # the learner's code: any error is an answer to report
            return False, f"{head}: forward raised {type(err).__name__}: {err}"
        dout = rng.standard_normal(y.shape)
        want_y, want, steps = reference(exercise, arrays, options, dout)
        if y.shape != want_y.shape or not np.allclose(y, want_y, rtol=RTOL, atol=ATOL):
            return False, f"{head}: forward differs from the engine's\n{show('yours', y)}\n{show('expected', want_y)}"
        try:
            grads, node = run(fn, arrays, options, dout)[1:]
        except NotImplementedError:
            return False, f"backward is not written yet: fill it in (hints: python -m gptlab.exercises " \
                          f"{exercise.name} --hint)"
        except Exception as err:
            return False, f"{head}: backward raised {type(err).__name__}: {err}"
        if len(grads) != len(arrays):
            return False, f"{head}: backward returned {len(grads)} gradients; it must return one per input: " \
                          f"{exercise.returns}"
        masked = ~np.isfinite(want_y)
        again = run(fn, arrays, options, np.where(masked, 0, dout))[1] if masked.any() else grads
        mine = getattr(node, "grads", {})
        for name in exercise.intermediates:  # backward's order: the first wrong step is where the mistake entered
            problem = diagnose(exercise, name, mine.get(name), steps[name], steps[name].shape, masked, mine.get(name))
            if problem:
                keep = f" (keep it in backward: self.grads[{name!r}] = d{name})" if name not in mine else ""
                return False, f"{head}: the first wrong step is {name}: {problem}{keep}\n" \
                              f"{show(f'your d{name}', mine.get(name))}\n{show('expected', steps[name])}"
        for i, (name, g, r) in enumerate(zip(exercise.inputs, grads, want, strict=True)):
            problem = diagnose(exercise, name, g, r, arrays[i].shape, masked, again[i])
            if problem is None and not close(finite_differences(fn, arrays, options, dout, i), np.asarray(g)):
                problem = f"d{name} agrees with the engine's but not with finite differences"
            if problem:
                inputs = "\n".join(show(n, a) for n, a in zip(exercise.inputs, arrays, strict=True))
                return False, f"{head}: {problem}\nthe smallest failing case:\n{inputs}\n{show('dout', dout)}\n" \
                              f"{show(f'your d{name}', g)}\n{show('expected', r)}"
    second = second_derivatives(exercise, fn, arrays, options, dout, [rng.standard_normal(a.shape) for a in arrays]) \
        if not exercise.intermediates else "not checked for a composition"
    return True, f"all {len(cases)} cases pass: forward equals the engine's, and every gradient equals the engine's " \
                 f"and central finite differences (float64, random upstream gradient). Second derivatives: {second}"

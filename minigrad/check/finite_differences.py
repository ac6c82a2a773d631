"""gradcheck: is a backward pass right? Each input's gradient from backward() is compared with central
finite differences in float64. Users call it as mg.gradcheck(fn, *inputs); the table of every primitive
that the tests and `python -m minigrad.check.gradcheck_cases` run is in gradcheck_cases.py. gradgradcheck does the same
for the gradient itself, computed with create_graph=True: second derivatives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minigrad.array import backend
from minigrad.autograd import grad
from minigrad.ops.shapes import cat
from minigrad.tensor import Tensor, enable_grad, no_grad


class GradcheckError(AssertionError):
    """An analytic gradient disagrees with the finite-difference estimate."""


@dataclass
class InputReport:
    index: int  # position among fn's inputs
    shape: tuple[int, ...]
    max_abs_err: float
    max_rel_err: float
    worst: tuple[int, ...]  # element where the check fails by most (or comes closest to failing)
    analytic: float  # both gradients at `worst`
    numeric: float
    passed: bool

    def describe(self) -> str:
        return (f"input {self.index} (shape {self.shape}), element {self.worst}: analytic {self.analytic:.10g}, "
                f"numeric {self.numeric:.10g} (abs err {self.max_abs_err:.3g}, rel err {self.max_rel_err:.3g})")


@dataclass
class GradcheckResult:
    """What gradcheck found, input by input. Its truth value is the verdict, as PyTorch's gradcheck
    returns True or False: `assert mg.gradcheck(fn, x, raise_exception=False)` fails on a wrong backward."""

    inputs: list[InputReport]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.inputs)

    def failures(self) -> list[str]:
        return [r.describe() for r in self.inputs if not r.passed]

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        if not self.passed:
            return "gradcheck FAILED: " + "; ".join(self.failures())
        return (f"gradcheck passed: {len(self.inputs)} input(s), max abs err {self.max_abs_err:.3g}, "
                f"max rel err {self.max_rel_err:.3g}")

    @property
    def max_abs_err(self) -> float:
        return max(r.max_abs_err for r in self.inputs)

    @property
    def max_rel_err(self) -> float:
        return max(r.max_rel_err for r in self.inputs)


def gradcheck(fn: Callable[..., Tensor], *inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, seed: int = 0, raise_exception: bool = True) -> GradcheckResult:
    """Check d fn / d input for every float64 input that requires grad, contracting the output with a random upstream
    gradient (a plain sum would pass a zero backward for softmax or layer norm); element k passes when |analytic -
    numeric| <= atol + rtol |numeric|. Raises GradcheckError naming the worst element, or returns a falsy result.
    The inputs are left as they were, values and .grad, even when fn raises."""
    inputs = tuple(t.detach().requires_grad_() if isinstance(t, Tensor) and t.requires_grad and not t.is_leaf else t
                   for t in inputs)  # a computed input (x.to(mg.float64)) as a leaf, where backward() leaves .grad
    checked = [(i, t) for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input is a tensor with requires_grad=True")
    for i, t in checked:
        if t.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {t.dtype}; finite differences need float64 (use .to(mg.float64))")
    kept = [t.grad for _, t in checked]  # the callers' gradients: backward below would add to them
    try:
        for _, t in checked:
            t.grad = None
        out = fn(*inputs)
        if not isinstance(out, Tensor) or out.dtype != np.float64:
            raise TypeError(f"gradcheck: fn must return a float64 Tensor, got {out!r:.80}")
        upstream = backend.to_device(np.random.default_rng(seed).standard_normal(out.shape), out.device)
        out.backward(upstream)
        reports = [_compare(i, t.grad.numpy() if t.grad is not None else np.zeros(t.shape),
                            _numeric(fn, inputs, t, upstream, eps), atol, rtol) for i, t in checked]
    finally:
        for (_, t), grad in zip(checked, kept, strict=True):
            t.grad = grad
    result = GradcheckResult(reports)
    if raise_exception and not result.passed:
        raise GradcheckError("gradient check failed:\n  " + "\n  ".join(result.failures()))
    return result


def gradgradcheck(fn: Callable[..., Tensor], *inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, seed: int = 0, raise_exception: bool = True) -> GradcheckResult:
    """Check the second derivatives of fn, as torch.autograd.gradgradcheck: gradcheck of the function that maps the
    inputs and an upstream gradient v (random, a float64 input of its own) to the gradients d(sum(fn(inputs) * v)) /
    d(input), computed with create_graph=True. Its last report is v's (what the gradient's formula does with dout);
    an input the gradient does not reach counts as a zero gradient."""
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradgradcheck: no input is a tensor with requires_grad=True")
    with no_grad():
        shape, device = fn(*inputs).shape, inputs[checked[0]].device
    v = Tensor.leaf(np.random.default_rng(seed + 1).standard_normal(shape), requires_grad=True, device=device)

    def gradients(*args: Any) -> Tensor:
        *xs, upstream = args
        with enable_grad():  # gradcheck's finite differences run under no_grad
            gs = grad(fn(*xs), [xs[i] for i in checked], upstream, create_graph=True, materialize_grads=True)
        return cat([g.reshape(-1) for g in gs])

    return gradcheck(gradients, *inputs, v, eps=eps, atol=atol, rtol=rtol, seed=seed, raise_exception=raise_exception)


def _numeric(fn: Callable[..., Tensor], inputs: tuple[Any, ...], t: Tensor, upstream: Any, eps: float) -> np.ndarray:
    """d sum(fn(inputs) * upstream) / d t by central differences, one element of t at a time, each written back as
    it was, also when fn raises; under no_grad."""
    numeric = np.zeros(t.shape)
    with no_grad():
        for k in np.ndindex(*t.shape):  # an index per element, whatever the array's strides
            original = t.array[k].item()
            try:
                t.array[k] = original + eps
                plus = float((fn(*inputs).array * upstream).sum())
                t.array[k] = original - eps
                minus = float((fn(*inputs).array * upstream).sum())
            finally:
                t.array[k] = original
            numeric[k] = (plus - minus) / (2 * eps)
    return numeric


def _compare(index: int, analytic: np.ndarray, numeric: np.ndarray, atol: float, rtol: float) -> InputReport:
    err = np.abs(analytic - numeric)
    allowed = atol + rtol * np.abs(numeric)
    rel = err / np.maximum(np.abs(numeric), 1e-12)
    if err.size == 0:
        return InputReport(index, analytic.shape, 0.0, 0.0, (), 0.0, 0.0, True)
    worst = np.unravel_index(np.argmax(err - allowed), err.shape)
    return InputReport(index, analytic.shape, float(err.max()), float(rel.max()), tuple(int(w) for w in worst),
                       float(analytic[worst]), float(numeric[worst]), bool((err <= allowed).all()))

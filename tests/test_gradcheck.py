"""Every primitive's backward against finite differences (the CASES table, on each device), the
checker itself (it must catch a wrong backward and say where), its command line, and the fused ops
checked three ways: forward against NumPy, backward against the same op built from small primitives.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad.array import backend
from minigrad.check import gradcheck_cases
from minigrad.check.finite_differences import GradcheckError, gradcheck
from minigrad.check.gradcheck_cases import CASES, Case
from minigrad.nn import functional as F
from minigrad.tensor import Function

REPO = Path(__file__).resolve().parents[1]


# ---- the table ----

@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_gradcheck(case: Case, device: str) -> None:
    inputs = case.inputs(device)
    result = gradcheck(case.fn, *inputs)  # float64, random upstream gradient; raises on failure
    assert result.passed
    assert len(result.inputs) == len(case.shapes)  # every input was checked, none skipped


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


# ---- the checker catches wrong backward passes ----

class ZeroGradSoftmax(Function):
    """softmax over the last axis whose backward wrongly returns zeros."""

    def forward(self, x):
        xp = backend.get_array_module(x)
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def backward(self, dout):
        return (backend.get_array_module(dout).zeros_like(dout),)


class MulWrongAt12(Function):
    """z = a * b, but db is off by exactly 1 at element (1, 2)."""

    def forward(self, a, b):
        self.a, self.b = a, b
        return a * b

    def backward(self, dout):
        db = dout * self.a
        db[1, 2] += 1.0
        return dout * self.b, db


def test_zero_softmax_backward_is_caught(rand) -> None:
    x = rand(2, 5)
    with pytest.raises(GradcheckError, match=r"input 0 \(shape \(2, 5\)\), element \(\d, \d\): analytic 0, numeric"):
        gradcheck(lambda t: ZeroGradSoftmax.apply(t), x)


def test_zero_softmax_backward_would_pass_a_sum_based_check(rand) -> None:
    """Why gradcheck contracts with a random upstream gradient: d sum(softmax(x)) / dx is zero, so
    a check of the sum alone cannot tell a zero backward from the right one."""
    x = rand(2, 5)
    eps = 1e-6
    data = x.numpy()
    numeric = np.zeros(data.shape)
    for k in range(data.size):
        plus, minus = data.copy(), data.copy()
        plus.flat[k] += eps
        minus.flat[k] -= eps
        f = [ZeroGradSoftmax.apply(mg.tensor(v, device=x.device)).sum().item() for v in (plus, minus)]
        numeric.flat[k] = (f[0] - f[1]) / (2 * eps)
    np.testing.assert_allclose(numeric, 0.0, atol=1e-8)


def test_error_names_input_element_and_both_values(rand) -> None:
    a, b = rand(2, 3), rand(2, 3)
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda a, b: MulWrongAt12.apply(a, b), a, b)
    message = str(info.value)
    assert "input 1 (shape (2, 3)), element (1, 2)" in message
    assert "input 0" not in message  # da is right and must not be blamed
    analytic, numeric = (float(v) for v in re.search(r"analytic (\S+), numeric (\S+) ", message).groups())
    assert analytic - numeric == pytest.approx(1.0, abs=1e-6)


def test_report_without_raising(rand) -> None:
    a, b = rand(2, 3), rand(2, 3)
    result = gradcheck(lambda a, b: MulWrongAt12.apply(a, b), a, b, raise_exception=False)
    assert not result.passed
    assert [r.passed for r in result.inputs] == [True, False]
    assert result.inputs[1].worst == (1, 2)
    assert result.max_abs_err == pytest.approx(1.0, abs=1e-6)


def test_result_is_falsy_when_the_check_fails(rand) -> None:
    """Its truth value is the verdict, so `assert gradcheck(..., raise_exception=False)` can fail."""
    a, b = rand(2, 3), rand(2, 3)
    wrong = gradcheck(lambda a, b: MulWrongAt12.apply(a, b), a, b, raise_exception=False)
    right = gradcheck(lambda a, b: a * b, a, b, raise_exception=False)
    assert bool(wrong) is False and bool(right) is True
    with pytest.raises(AssertionError):
        assert gradcheck(lambda a, b: MulWrongAt12.apply(a, b), a, b, raise_exception=False)


def test_result_says_its_verdict_in_a_repl(rand) -> None:
    a, b = rand(2, 3), rand(2, 3)
    right = repr(gradcheck(lambda a, b: a * b, a, b))
    assert right.startswith("gradcheck passed: 2 input(s), max abs err ")
    wrong = repr(gradcheck(lambda a, b: MulWrongAt12.apply(a, b), a, b, raise_exception=False))
    assert wrong.startswith("gradcheck FAILED: input 1 (shape (2, 3)), element (1, 2)")


def test_refuses_float32(rand) -> None:
    x = rand(2, 3, dtype=mg.float32)
    with pytest.raises(TypeError, match="input 0 is float32.*float64"):
        gradcheck(lambda t: t * t, x)


def test_refuses_inputs_without_grad(rand) -> None:
    with pytest.raises(ValueError, match="no input is a tensor with requires_grad=True"):
        gradcheck(lambda t: t * t, rand(2, 3, requires_grad=False))


def test_checks_only_inputs_that_require_grad(rand) -> None:
    a, b = rand(2, 3), rand(2, 3, requires_grad=False)
    result = gradcheck(lambda a, b: a * b, a, b)
    assert [r.index for r in result.inputs] == [0]


# ---- python -m minigrad.check.gradcheck_cases ----

def _table_rows(stdout: str) -> dict[str, str]:
    """op name -> verdict ("pass" or "FAIL ...") from the printed table."""
    rows = {}
    for line in stdout.splitlines()[1:]:
        if not line.strip():  # the table ends at the first blank line, before the summary
            break
        rows[line[:38].strip()] = "pass" if line.rstrip().endswith("  pass") else "FAIL" if "  FAIL" in line else "?"
    return rows


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minigrad.check.gradcheck_cases", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_every_case_and_exits_0() -> None:
    done = _run_cli()
    assert done.returncode == 0, done.stdout + done.stderr
    header = done.stdout.splitlines()[0]
    for column in ("op", "input shapes", "max abs err", "max rel err", "result"):
        assert column in header
    assert _table_rows(done.stdout) == {c.name: "pass" for c in CASES}
    assert f"{len(CASES)} checks on cpu: all passed" in done.stdout


def test_cli_k_filters_by_name() -> None:
    done = _run_cli("-k", "softmax")
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {c.name for c in CASES if "softmax" in c.name}
    assert len(expected) >= 2
    assert set(_table_rows(done.stdout)) == expected


def test_cli_exits_1_on_a_failure(monkeypatch, capsys) -> None:
    wrong = Case("mul wrong at (1, 2)", lambda a, b: MulWrongAt12.apply(a, b), ((2, 3), (2, 3)))
    monkeypatch.setattr(gradcheck_cases, "CASES", [CASES[0], wrong])
    assert gradcheck_cases.main([]) == 1
    out = capsys.readouterr().out
    assert _table_rows(out) == {CASES[0].name: "pass", wrong.name: "FAIL"}
    assert "input 1 (shape (2, 3)), element (1, 2)" in out
    assert "2 checks on cpu: SOME FAILED" in out


def test_cli_refuses_a_filter_that_matches_no_case() -> None:
    """-k typo reported "0 checks: all passed", exit 0: a check that checks nothing must not pass."""
    done = _run_cli("-k", "typo")
    assert done.returncode == 2 and done.stdout == ""
    assert "error: -k 'typo' matches no case" in done.stderr


def test_gradcheck_leaves_the_inputs_gradient_as_it_was(rand) -> None:
    """It overwrote .grad that the caller had accumulated; torch's gradcheck leaves it too."""
    x = rand(2, 3)
    (x * x).sum().backward()
    accumulated = x.grad.numpy().copy()
    assert gradcheck(lambda t: (t * 3.0).tanh(), x)
    np.testing.assert_array_equal(x.grad.numpy(), backend.to_numpy(accumulated))
    fresh = rand(2, 3)
    assert gradcheck(lambda t: t.exp(), fresh) and fresh.grad is None


def test_gradcheck_leaves_the_input_unperturbed_when_fn_raises(rand) -> None:
    """A function that raises during finite differences left the element it was at moved by eps."""
    x = rand(3, 4)
    before = x.numpy().copy()
    calls = {"n": 0}

    def flaky(t):
        calls["n"] += 1
        if calls["n"] == 4:  # the first call is the backward pass; this one a finite difference
            raise ArithmeticError("flaky")
        return t * 2.0

    with pytest.raises(ArithmeticError, match="flaky"):
        gradcheck(flaky, x)
    np.testing.assert_array_equal(x.numpy(), before)
    assert x.grad is None


def test_gradcheck_perturbs_a_view_in_place_without_replacing_its_array(rand) -> None:
    base = rand(4, 3)
    x = base.detach().T.requires_grad_()  # not C-contiguous
    array = x.array
    assert gradcheck(lambda t: t.sin() * t, x)
    assert x.array is array and not x.array.flags.c_contiguous
    np.testing.assert_array_equal(x.numpy(), base.numpy().T)


def test_cli_prints_no_warning() -> None:
    """`python -m` on a module its package already imported warns (runpy); the package does not import it."""
    done = _run_cli("-k", "relu")
    assert done.returncode == 0 and done.stderr == ""


MG_GRADCHECK = ("import types\n"
                "import minigrad.check.finite_differences\n"
                "assert isinstance(mg.gradcheck, types.FunctionType), type(mg.gradcheck)\n"
                "x = mg.tensor([1.0, 2.0], requires_grad=True, dtype=mg.float64)\n"
                "assert mg.gradcheck(lambda t: t * t, x)\n"
                "assert mg.GradcheckError is minigrad.check.finite_differences.GradcheckError\n")


@pytest.mark.parametrize("imports", [
    "import minigrad as mg",
    "from minigrad.check.gradcheck_cases import CASES\nimport minigrad as mg",
    "import minigrad.check.gradcheck_cases\nimport minigrad.check.finite_differences\nimport minigrad as mg",
], ids=["package only", "table first", "submodules first"])
def test_mg_gradcheck_is_the_plain_function_in_any_import_order(imports: str) -> None:
    """mg.gradcheck(fn, x) is public API: a plain function, whichever module was imported first."""
    done = subprocess.run([sys.executable, "-c", imports + "\n" + MG_GRADCHECK], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.skipif(backend.cuda_available(), reason="tests the error shown where no GPU is found")
def test_cli_cuda_without_gpu_exits_2() -> None:
    done = _run_cli("--device", "cuda")
    assert done.returncode == 2
    assert "CuPy" in done.stderr


# ---- fused ops, three ways: forward vs NumPy, backward vs finite differences (the table above),
# ---- backward vs the same op composed from smaller primitives

def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_cross_entropy(logits, targets, ignore_index=None):
    V = logits.shape[-1]
    lp = np_log_softmax(logits.reshape(-1, V), axis=1)
    t = targets.reshape(-1)
    keep = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
    return -lp[np.arange(t.size)[keep], t[keep]].mean()


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def composed_softmax(x, axis):
    e = x.exp()
    return e / e.sum(axis=axis, keepdims=True)


def composed_log_softmax(x, axis):
    return x - x.exp().sum(axis=axis, keepdims=True).log()


def composed_layer_norm(x, w=None, b=None, eps=1e-5):
    d = x - x.mean(axis=-1, keepdims=True)
    var = (d * d).mean(axis=-1, keepdims=True)
    y = d / (var + eps).sqrt()
    return y if w is None else y * w + b


def composed_cross_entropy(logits, targets, ignore_index=None):
    V = logits.shape[-1]
    lp = composed_log_softmax(logits.reshape(-1, V), axis=1)  # (N, V)
    t = targets.reshape(-1)
    keep = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
    return -lp[np.arange(t.size)[keep], t[keep]].mean()


def composed_gelu(x):
    return 0.5 * x * (1 + ((x + 0.044715 * x**3) * math.sqrt(2 / math.pi)).tanh())


TARGETS = np.array([[1, 0, 4], [2, 2, 3]])
IGNORED = np.array([[1, -100, 4], [-100, 2, 3]])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_forward_matches_numpy(rand, axis) -> None:
    x = rand(3, 4, 5)
    np.testing.assert_allclose(F.softmax(x, axis).numpy(), np_softmax(x.numpy(), axis), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax_forward_matches_numpy(rand, axis) -> None:
    x = rand(3, 4, 5)
    np.testing.assert_allclose(F.log_softmax(x, axis).numpy(), np_log_softmax(x.numpy(), axis), rtol=1e-12)


def test_layer_norm_forward_matches_numpy(rand) -> None:
    x, w, b = rand(2, 3, 8), rand(8), rand(8)
    expected = np_layer_norm(x.numpy(), w.numpy(), b.numpy())
    np.testing.assert_allclose(F.layer_norm(x, w.shape, w, b).numpy(), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(F.layer_norm(x, x.shape[-1]).numpy(), np_layer_norm(x.numpy(), 1.0, 0.0), rtol=1e-12,
                               atol=1e-14)


@pytest.mark.parametrize("targets, ignore_index", [(TARGETS, None), (IGNORED, -100)], ids=["plain", "ignore_index"])
def test_cross_entropy_forward_matches_numpy(rand, targets, ignore_index) -> None:
    x = rand(2, 5, 3)  # (N, C, d1): the classes on axis 1, as PyTorch's
    loss = F.cross_entropy(x, targets, ignore_index=ignore_index)
    assert loss.shape == ()
    expected = np_cross_entropy(np.moveaxis(x.numpy(), 1, -1), targets, ignore_index)
    assert loss.item() == pytest.approx(expected, rel=1e-12)


def test_gelu_forward_matches_numpy(rand) -> None:
    x = rand(2, 3, 4)
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").numpy(), np_gelu(x.numpy()), rtol=1e-12, atol=1e-15)


FUSED_VS_COMPOSED = {
    "softmax axis -1": (lambda x: F.softmax(x), lambda x: composed_softmax(x, -1), [(2, 3, 5)]),
    "softmax axis 0": (lambda x: F.softmax(x, 0), lambda x: composed_softmax(x, 0), [(4, 3)]),
    "log_softmax axis -1": (lambda x: F.log_softmax(x), lambda x: composed_log_softmax(x, -1), [(2, 3, 5)]),
    "log_softmax axis 1": (lambda x: F.log_softmax(x, 1), lambda x: composed_log_softmax(x, 1), [(2, 4, 3)]),
    "layer_norm affine": (lambda x, w, b: F.layer_norm(x, w.shape, w, b), composed_layer_norm, [(2, 3, 8), (8,), (8,)]),
    "layer_norm no affine": (lambda x: F.layer_norm(x, x.shape[-1]), composed_layer_norm, [(4, 6)]),
    "cross_entropy": (lambda x: F.cross_entropy(x.reshape(6, 5), TARGETS.reshape(6)),
                      lambda x: composed_cross_entropy(x, TARGETS), [(2, 3, 5)]),
    "cross_entropy ignore_index": (lambda x: F.cross_entropy(x.reshape(6, 5), IGNORED.reshape(6), ignore_index=-100),
                                   lambda x: composed_cross_entropy(x, IGNORED, ignore_index=-100), [(2, 3, 5)]),
    "gelu tanh": (lambda x: F.gelu(x, approximate="tanh"), composed_gelu, [(2, 3, 4)]),
}


@pytest.mark.parametrize("name", list(FUSED_VS_COMPOSED))
def test_fused_backward_matches_composed(rand, name) -> None:
    fused, composed, shapes = FUSED_VS_COMPOSED[name]
    inputs = [rand(*s) for s in shapes]
    twins = [mg.tensor(t.numpy().copy(), requires_grad=True, device=t.device) for t in inputs]
    y_fused, y_composed = fused(*inputs), composed(*twins)
    np.testing.assert_allclose(y_fused.numpy(), y_composed.numpy(), rtol=1e-12, atol=1e-14)
    g = np.random.default_rng(7).standard_normal(y_fused.shape)
    y_fused.backward(g)
    y_composed.backward(g)
    for i, (a, b) in enumerate(zip(inputs, twins, strict=True)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name}: gradient of input {i}")


def test_fused_ops_are_single_graph_nodes(rand) -> None:
    """The fused primitives record one node, not a chain of exp/sum/div nodes."""
    x, w, b = rand(2, 5), rand(5), rand(5)
    for y, inputs in ((F.softmax(x), [x]), (F.log_softmax(x), [x]), (F.layer_norm(x, w.shape, w, b), [x, w, b]),
                      (F.cross_entropy(x, [1, 3]), [x]), (F.gelu(x), [x])):
        parents = y.grad_fn.mg_parents
        assert len(parents) == len(inputs) and all(p is t for p, t in zip(parents, inputs, strict=True))

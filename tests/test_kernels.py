"""The compiled kernels (minigrad/speed/kernels.py, under mg.compiled()) against the NumPy code they compile: every
kernel's outputs and gradients equal the NumPy path's in float32 (to float32's rounding), on awkward inputs too;
exp32 within its stated error; and where a kernel does not apply (float64, a view, amsgrad, the GPU) the NumPy
code runs, bit for bit. Without Numba only the switch's refusal is tested."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as F
from minigrad.optim import Adam, AdamW
from minigrad.tensor import intercept

try:
    import numba

    from minigrad.speed import kernels
    from minigrad.speed.compiled_functions import IMPLEMENTATIONS
except ImportError:
    numba = kernels = None
    IMPLEMENTATIONS = {}
needs_numba = pytest.mark.skipif(numba is None, reason="Numba is not installed: pip install -e '.[compiled]' to test "
                                                       "the compiled kernels")


def _without_numba(monkeypatch):
    """From here on `from minigrad.speed import kernels` fails, as it does where Numba is not installed."""
    for name in ("kernels", "compiled_functions"):  # the kernels, and the implementations that call them
        monkeypatch.delattr(mg.speed, name, raising=False)
        monkeypatch.setitem(sys.modules, f"minigrad.speed.{name}", None)


def test_compiled_without_numba_says_what_to_install(monkeypatch):
    _without_numba(monkeypatch)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[compiled\]'"):
        mg.compiled()
    assert not mg.is_compiled_enabled()
    with mg.compiled(False):  # turning it off needs nothing
        assert not mg.is_compiled_enabled()


def test_train_py_compiled_without_numba_is_one_line(monkeypatch, tmp_path, capsys):
    import train

    _without_numba(monkeypatch)
    assert train.main(["--compiled", "--steps", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--compiled" in err and ".[compiled]" in err


@needs_numba
def test_exp32_is_within_about_one_ulp_of_exp_over_float32s_range():
    @numba.njit
    def _exp_all(x, out):
        for i in range(x.size):
            out[i] = kernels.exp32(x[i])

    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-104, 88.72, 2_000_001), rng.uniform(-110, 90, 1_000_000)]).astype(np.float32)
    y = np.empty_like(x)
    _exp_all(x, y)
    exact = np.exp(x.astype(np.float64))
    normal = (exact > np.finfo(np.float32).tiny) & (exact < np.finfo(np.float32).max)
    ulps = np.abs(y[normal] - exact[normal]) / np.spacing(exact[normal].astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.1
    subnormal = (exact <= np.finfo(np.float32).tiny) & (x >= -104)  # within a few of float32's smallest steps
    assert np.abs(y[subnormal] - exact[subnormal]).max() <= 4 * np.finfo(np.float32).smallest_subnormal
    assert (y[x < -104] == 0).all() and (y[exact >= np.finfo(np.float32).max] == np.inf).all()
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, -87.3], np.float32)
    out = np.empty_like(special)
    _exp_all(special, out)
    np.testing.assert_array_equal(out[:5], [np.nan, np.inf, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(out[5:], np.exp(special[5:].astype(np.float64)), rtol=2e-7)


def _values(shape, seed=0):
    """Normal values, wide ones, and the corners: infinities, NaN, signed zeros, tiny and huge."""
    x = np.random.default_rng(seed).standard_normal(shape) * 4
    flat = x.reshape(-1)
    corners = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0, 1e4, -1e4]
    flat[: min(len(corners), flat.size)] = corners[: flat.size]
    return x


def _run(fn, shapes, compiled, values, seed=0, fused=False):
    """fn's output and its inputs' gradients in float32, for a random upstream gradient, with or without the
    kernels (or with the in-place twins they compile, fused=True); also the Functions that ran."""
    rng = np.random.default_rng(seed)
    mg.manual_seed(seed)  # the same dropout masks on both paths
    xs = [mg.tensor(v, dtype=mg.float32, requires_grad=True) for v in values(shapes, seed)]
    ran = []

    def record(node, method, run):
        ran.append(type(node))
        return run()

    with np.errstate(invalid="ignore"), mg.compiled(compiled), mg.fused(fused), intercept(record):
        out = fn(*xs)
    with np.errstate(invalid="ignore"):  # inf * 0 in the corners: NaN, on both paths alike
        out.backward(rng.standard_normal(out.shape).astype(np.float32))
    return [out.numpy()] + [x.grad.numpy() for x in xs], ran


def _normal(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _corners(shapes, seed):
    return [_values(s, seed) for s in shapes]


CASES = {  # name: (fn, input shapes, input values)
    "gelu": (F.gelu, [(6, 7, 31)], _corners),
    "gelu, tanh": (lambda x: F.gelu(x, approximate="tanh"), [(6, 7, 31)], _corners),
    "gelu, 0-d": (F.gelu, [()], _normal),
    "gelu, empty": (lambda x: F.gelu(x, approximate="tanh"), [(0, 3)], _normal),
    "gelu, exact, empty": (F.gelu, [(2, 0)], _normal),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, 24, w, b), [(5, 7, 24), (24,), (24,)], _normal),
    "layer_norm, weight only": (lambda x, w: F.layer_norm(x, 24, w), [(9, 24), (24,)], _normal),
    "layer_norm, no affine": (lambda x: F.layer_norm(x, 24), [(3, 4, 24)], _normal),
    "layer_norm, one channel": (lambda x, w, b: F.layer_norm(x, 1, w, b), [(6, 1), (1,), (1,)], _normal),
    "layer_norm, constant rows": (lambda x, w, b: F.layer_norm(x * 0 + 3, 8, w, b), [(4, 8), (8,), (8,)], _normal),
    "layer_norm, no rows": (lambda x, w, b: F.layer_norm(x, 8, w, b), [(0, 8), (8,), (8,)], _normal),
    "layer_norm, no channels": (lambda x, w, b: F.layer_norm(x, 0, w, b), [(3, 0), (0,), (0,)], _normal),
    "layer_norm, corners": (lambda x: F.layer_norm(x, 16), [(4, 16)], _corners),
    "softmax": (F.softmax, [(3, 5, 70)], _normal),
    "softmax, along axis 1": (lambda x: F.softmax(x, dim=1), [(4, 6, 3)], _normal),
    "softmax, corners": (F.softmax, [(6, 11)], _corners),
    "softmax, one wide row": (F.softmax, [(1, 300)], _normal),
    "cross_entropy": (lambda x: F.cross_entropy(x, np.array([3, 0, 10, 7, 7, 1])), [(6, 11)], _normal),
    "cross_entropy, ignored rows, sum": (
        lambda x: F.cross_entropy(x, np.array([3, -100, 10, -100, 2]), reduction="sum"), [(5, 65)], _normal),
    "cross_entropy, per row": (lambda x: F.cross_entropy(x, np.array([1, 2, 0]), reduction="none"), [(3, 4)], _normal),
    "cross_entropy, corners": (lambda x: F.cross_entropy(x, np.array([3, 0, 10, 7, 7, 1])), [(6, 11)], _corners),
    "cross_entropy, label smoothing": (lambda x: F.cross_entropy(x, np.array([3, 0, 5]), label_smoothing=0.1),
                                       [(3, 11)], _normal),
    "attention, causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                          [(2, 3, 9, 4)] * 3, _normal),
    "attention, no mask": (F.scaled_dot_product_attention, [(2, 3, 9, 4), (2, 3, 7, 4), (2, 3, 7, 5)], _normal),
    "attention, causal, fewer queries than keys": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(2, 5, 4), (2, 9, 4), (2, 9, 3)], _normal),
    "attention, causal, corners": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                   [(3, 11, 2)] * 3, _corners),
    "attention, broadcast batch axes": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                        [(2, 3, 6, 4), (1, 3, 6, 4), (2, 1, 6, 4)], _normal),
    "attention, no keys": (F.scaled_dot_product_attention, [(2, 3, 4), (2, 0, 4), (2, 0, 4)], _normal),
    "attention, a query that sees no key": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=np.tril(np.ones((9, 9), bool), -1)),
        [(2, 3, 9, 4)] * 3, _normal),
    "embedding": (lambda w: F.embedding(np.array([[3, 1, 3], [0, 3, 4]]), w), [(5, 6)], _normal),
    "embedding, padding row": (lambda w: F.embedding(np.array([2, 2, 0, 1]), w, padding_idx=2), [(3, 4)], _normal),
    "matmul, a matrix b": (lambda a, b: a @ b, [(3, 40, 9), (9, 70)], _normal),
    "matmul, stacks, b transposed": (lambda a, b: a @ b.transpose(-1, -2), [(2, 3, 5, 7), (2, 3, 4, 7)], _normal),
    "matmul, a vector": (lambda a, b: a @ b, [(7,), (7, 3)], _normal),
    "matmul, broadcast batch axes": (lambda a, b: a @ b, [(2, 3, 5, 7), (3, 7, 4)], _normal),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(4, 33, 16), (24, 16), (24,)], _normal),
    "attention, a float mask, dropout": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=0.3),
        [(2, 3, 9, 4)] * 3 + [(9, 9)], _normal),
}


@needs_numba
@pytest.mark.parametrize("case", list(CASES))
def test_each_kernel_equals_the_numpy_code_it_compiles(case):
    fn, shapes, values = CASES[case]
    _, ran_plain = _run(fn, shapes, compiled=False, values=values)
    plain, _ = _run(fn, shapes, compiled=False, values=values, fused=True)  # the NumPy code the kernels compile
    compiled, ran_compiled = _run(fn, shapes, compiled=True, values=values)
    # the same graph, each teaching Function replaced by its compiled implementation where it has one
    assert ran_compiled == [IMPLEMENTATIONS.get(cls, cls) for cls in ran_plain]
    for name, p, c in zip(["output"] + [f"grad {i}" for i in range(len(shapes))], plain, compiled, strict=True):
        assert c.dtype == np.float32 and c.shape == p.shape, name
        assert np.array_equal(np.isnan(p), np.isnan(c)), f"{case}: {name}: NaN in other places"
        assert np.array_equal(np.isinf(p), np.isinf(c)) and np.array_equal(p[np.isinf(p)], c[np.isinf(c)]), name
        finite = np.isfinite(p)
        np.testing.assert_allclose(c[finite], p[finite], rtol=2e-5, atol=2e-6 * np.abs(p[finite]).max(initial=1),
                                   err_msg=f"{case}: {name}")


@needs_numba
@pytest.mark.parametrize("blas", ["OpenBLAS", "MKL"])
def test_the_products_on_the_kernels_threads_equal_numpy_s(blas, monkeypatch):
    """Each layout BLAS can read as it lies (a matrix, or a transposed view) and those it cannot (copied first),
    stacks of matrices, a vector, empty sizes and no inner dimension: kernels.product is numpy.matmul, with the
    sgemm of each BLAS it may call."""
    if blas not in kernels.SGEMMS:
        pytest.skip(f"{blas}'s sgemm is not here: OpenBLAS needs NumPy's wheel and a thread-safe Numba threading layer "
                    "(OpenMP or TBB); MKL the extra, pip install -e '.[mkl]'")
    monkeypatch.setenv(kernels.FORCE_SGEMM, blas)
    rng = np.random.default_rng(5)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    cases = [(arr(70, 33), arr(33, 9)), (arr(33, 70).T, arr(33, 9)), (arr(70, 33), arr(9, 33).T),
             (arr(4, 5, 33), arr(33, 9)), (arr(33,), arr(33, 9)), (arr(70, 66)[:, ::2], arr(33, 9)),
             (arr(2, 3, 40, 8), arr(2, 3, 8, 40)), (arr(2, 3, 8, 40).swapaxes(-1, -2), arr(2, 3, 8, 40)),
             (arr(2, 3, 40, 8), arr(2, 3, 40, 8).swapaxes(-1, -2)), (arr(3, 2, 40, 8).swapaxes(0, 1), arr(2, 3, 8, 5)),
             (arr(2, 40, 24)[..., 8:16].reshape(2, 40, 2, 4).swapaxes(1, 2), arr(2, 2, 4, 40)),  # heads of a view
             (arr(2, 2, 3, 5, 7), arr(2, 2, 3, 7, 4)),
             (arr(0, 5), arr(5, 3)), (arr(4, 0), arr(0, 3)), (arr(4, 5), arr(5, 0)), (arr(1, 1), arr(1, 1))]
    with mg.compiled():
        for a, b in cases:
            assert kernels.multiplies(a, b)
            got, want = kernels.product(a, b), a @ b
            assert got.shape == want.shape and got.dtype == np.float32, (a.shape, b.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{a.shape} @ {b.shape}")
    # what it leaves to NumPy: float64, batch axes that broadcast, a scalar
    assert not kernels.multiplies(arr(3, 4).astype(np.float64), arr(4, 2).astype(np.float64))
    assert not kernels.multiplies(arr(2, 3, 4), arr(1, 4, 2))


@needs_numba
def test_inside_compiled_numpy_s_blas_runs_on_one_thread_and_gets_its_threads_back():
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl reads the BLAS's threads")
    if "OpenBLAS" not in kernels.SGEMMS:
        pytest.skip("no thread-safe Numba threading layer or no OpenBLAS here: the BLAS keeps its threads")

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"]

    before = blas_threads()
    with mg.compiled():
        assert blas_threads() == [1] * len(before)
        with mg.compiled():  # nested: still one, and the inner exit gives nothing back yet
            pass
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before



@needs_numba
@pytest.mark.parametrize("nested", [False, True])
def test_a_users_blas_cap_is_set_aside_inside_compiled_and_given_back_after(nested):
    """threadpool_limits(limits=2) before mg.compiled() (as benchmark scripts and scikit-learn pipelines cap the BLAS)
    made the main thread threadpoolctl's controller of OpenBLAS, and mg.compiled()'s setting, from a thread of its
    own, was skipped: OpenBLAS stayed on the cap's two threads beside the kernels' (issue 53)."""
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl sets and reads the BLAS's threads")
    if "OpenBLAS" not in kernels.SGEMMS:
        pytest.skip("no thread-safe Numba threading layer or no OpenBLAS here: the BLAS keeps its threads")

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"]

    before = blas_threads()
    cap = threadpoolctl.threadpool_limits(limits=2, user_api="blas")  # no `with`: the cap stays, as a script sets it
    try:
        assert blas_threads() == [2] * len(before)
        with mg.compiled() if nested else contextlib.nullcontext():  # inside an enclosing switch
            with mg.compiled():
                assert blas_threads() == [1] * len(before)  # the BLAS at its intended count, the cap set aside
                if not nested:
                    assert "NumPy's OpenBLAS set from 2 threads to 1 meanwhile" in kernels.describe()
            assert blas_threads() == ([1] if nested else [2]) * len(before)
        assert blas_threads() == [2] * len(before)  # back at the user's cap, exactly
    finally:
        cap.restore_original_limits()
    assert blas_threads() == before  # and the user's own restore still takes


TWO_THREADS = """
import sys
import threading
import minigrad as mg
from threadpoolctl import threadpool_info, threadpool_limits

if sys.argv[1:] == ["capped"]:
    threadpool_limits(limits=2, user_api="blas")  # by the main thread, which stays alive: threadpoolctl's controller
inside = []

def blas():
    return [i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas"]

def a(a_in, b_in, a_out):
    with mg.compiled():  # the first, in a fresh process: the kernels are imported and first launched on this thread
        a_in.set()
        b_in.wait(5)
    a_out.set()

def b(a_in, b_in, a_out):
    a_in.wait(5)
    with mg.compiled():
        inside.append(blas())
        b_in.set()
        a_out.wait(5)

before, restored = blas(), 0
for _ in range(10):
    events = (threading.Event(), threading.Event(), threading.Event())
    threads = [threading.Thread(target=f, args=events) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    restored += blas() == before
print(all(count == [1] * len(before) for count in inside), restored)
"""


@needs_numba
def test_blas_threads_come_back_when_the_last_of_two_threads_leaves_compiled():
    """Thread A enters mg.compiled(), thread B too, A leaves first, B last: the BLAS's threads come back with B's
    exit. Restored from B itself, OpenBLAS's count stayed at one for the whole process in most tries (0 to 7 of 10
    were restored, in a fresh process whose kernels first ran on a thread of their own): ten tries, all restored."""
    pytest.importorskip("threadpoolctl", reason="threadpoolctl reads the BLAS's threads")
    if "OpenBLAS" not in kernels.SGEMMS:
        pytest.skip("no thread-safe Numba threading layer or no OpenBLAS here: the BLAS keeps its threads")
    import subprocess

    # as it is; after a cap set by the main thread; under a cap set by the environment (issue 53)
    for cap, env in (([], {}), (["capped"], {}), ([], {"OPENBLAS_NUM_THREADS": "2"})):
        run = subprocess.run([sys.executable, "-c", TWO_THREADS, *cap], capture_output=True, text=True, timeout=120,
                             env={**os.environ, **env})
        assert run.returncode == 0, run.stderr
        assert run.stdout.split()[-2:] == ["True", "10"], (cap, env, run.stdout)  # one BLAS thread inside, all back


@needs_numba
def test_gelu_kernels_match_the_float64_formula():
    """Both paths against the float64 NumPy code: the kernels are as accurate as the NumPy float32 code."""
    x = np.random.default_rng(3).standard_normal(100_000) * 5
    for approximate in ("none", "tanh"):
        wide = F.gelu(mg.tensor(x, dtype=mg.float64), approximate=approximate).numpy()
        with mg.compiled():
            narrow = F.gelu(mg.tensor(x, dtype=mg.float32), approximate=approximate).numpy()
        np.testing.assert_allclose(narrow, wide, rtol=1e-6, atol=1e-7)


@needs_numba
def test_compiled_layer_norm_of_a_row_whose_variance_overflows_is_numpy_s_and_torch_s():
    """var of [1.5e19, -1.5e19, 0, 0] overflows float32 to inf, and 1 / sqrt(inf) = 0 makes the row 0 (NumPy's code
    and PyTorch); the kernel's approximate reciprocal square root made NaN of it."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: it is the reference here")
    x = np.array([[1.5e19, -1.5e19, 0, 0], [1, 2, 3, 4], [np.nan, 1, 2, 3]], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        plain = F.layer_norm(mg.tensor(x), 4).numpy()
        with mg.compiled():
            compiled = F.layer_norm(mg.tensor(x), 4).numpy()
    expected = torch.nn.functional.layer_norm(torch.tensor(x), (4,)).numpy()
    np.testing.assert_allclose(plain, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(compiled, expected, rtol=1e-6, atol=1e-6)  # NaN where torch has NaN, 0 on row 0


@needs_numba
def test_compiled_layer_norm_keeps_the_digits_of_rows_far_from_zero():
    """Rows of 1e4 + N(0, 1) in float32: both paths against float64 on the same float32 values; the kernel sums the
    mean from each row's first value, NumPy's code from 0."""
    x = (np.random.default_rng(0).standard_normal((64, 32)) + 1e4).astype(np.float32)
    exact = F.layer_norm(mg.tensor(x.astype(np.float64)), 32).numpy()
    errors = []
    for compiled in (False, True):
        with mg.compiled(compiled):
            errors.append(np.abs(F.layer_norm(mg.tensor(x), 32).numpy() - exact).max())
    assert errors[0] > 1e-4 and errors[1] < 1e-5  # NumPy's float32 loses digits here; the kernel keeps them


@needs_numba
def test_gelu_under_no_grad_saves_no_slope():
    x = mg.randn(4, 8, requires_grad=True)
    with mg.compiled(), mg.no_grad():
        y = F.gelu(x)
    assert y.grad_fn is None
    with mg.compiled():
        y = F.gelu(mg.randn(4, 8))  # no input needs a gradient
    assert y.grad_fn is None


@needs_numba
@pytest.mark.parametrize("kind, options", [
    (AdamW, {}), (AdamW, {"weight_decay": 0.1, "maximize": True}), (Adam, {"weight_decay": 0.1}),
    (Adam, {"maximize": True}), (Adam, {"amsgrad": True}), (AdamW, {"amsgrad": True, "weight_decay": 0.05}),
])
def test_the_adam_kernel_equals_the_fused_numpy_step(kind, options):
    def run(compiled):
        rng = np.random.default_rng(0)
        params = [mg.tensor(rng.standard_normal(s), dtype=mg.float32, requires_grad=True) for s in [(5, 7), (300,), ()]]
        opt = kind(params, lr=1e-2, fused=True, **options)
        for _ in range(6):
            for p in params:
                p.grad = mg.tensor(rng.standard_normal(p.shape), dtype=mg.float32)
            with mg.compiled(compiled):
                opt.step()
        return [p.numpy() for p in params], [opt.state[p] for p in params]

    (plain, plain_state), (compiled, compiled_state) = run(False), run(True)
    for p, c, sp, sc in zip(plain, compiled, plain_state, compiled_state, strict=True):
        assert c.dtype == np.float32 and sp["step"] == sc["step"] == 6
        if options.get("amsgrad"):  # no kernel for amsgrad: the NumPy step runs, exactly
            np.testing.assert_array_equal(c, p)
            continue
        np.testing.assert_allclose(c, p, rtol=1e-5, atol=1e-6)
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(sc[key], sp[key], rtol=1e-5, atol=1e-7)


@needs_numba
def test_where_no_kernel_applies_the_numpy_code_runs_bit_for_bit(monkeypatch):
    # the products are a kernel of their own: on NumPy's BLAS's sgemm they are NumPy's to the bit; MKL's (the mkl
    # extra) sums in another order, and from mkl 2026 that shows in float32's last bit even at these sizes
    monkeypatch.setenv(kernels.FORCE_SGEMM, "OpenBLAS")
    rng = np.random.default_rng(1)
    wide = rng.standard_normal((4, 6, 16))
    cases = [
        (mg.tensor(wide, dtype=mg.float64), lambda x: F.layer_norm(F.gelu(x), 16)),  # float64: no kernel
        (mg.tensor(wide, dtype=mg.float32).transpose(0, 2), F.gelu),  # a view that is not C-contiguous
        (mg.tensor(wide, dtype=mg.float64), lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True)),
        (mg.tensor(wide, dtype=mg.float32),  # a boolean mask with a batch axis: attention's weights in NumPy
         lambda x: F.scaled_dot_product_attention(x, x, x, attn_mask=np.tril(np.ones((4, 6, 6), bool)))),
    ]
    for x, fn in cases:
        with mg.fused():  # the in-place twins, whose NumPy code the kernels compile and fall back to
            plain = fn(x).numpy()
        with mg.compiled():
            compiled = fn(x).numpy()
        np.testing.assert_array_equal(compiled, plain)
    # a float64 weight beside a float32 input is refused the same way on both paths
    with pytest.raises((TypeError, ValueError)) as plain_error:
        F.layer_norm(mg.randn(2, 4), 4, mg.randn(4, dtype=mg.float64))
    with mg.compiled(), pytest.raises(type(plain_error.value)):
        F.layer_norm(mg.randn(2, 4), 4, mg.randn(4, dtype=mg.float64))


@needs_numba
def test_a_training_step_under_compiled_follows_the_plain_one():
    from models import GPT, GPTConfig

    def losses(compiled):
        mg.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=20, n_embd=32, n_head=4, n_layer=2, block_size=16, bias=False, gelu="none"))
        opt = AdamW(model.parameters(), lr=3e-3, fused=True)
        rng = np.random.default_rng(0)
        out = []
        with mg.fused(), mg.compiled(compiled):
            for _ in range(8):
                x = rng.integers(0, 20, (4, 16))
                _, loss = model(x, (x + 1) % 20)
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        return np.array(out)

    plain, compiled = losses(False), losses(True)
    assert plain[-1] < plain[0]  # it learns at all
    np.testing.assert_allclose(compiled, plain, rtol=1e-4)


@needs_numba
@pytest.mark.parametrize("gelu", ["none", "tanh"])
def test_every_kernel_runs_in_a_training_step_under_compiled_backward_included(monkeypatch, gelu):
    """The choice is made in forward, where mg.compiled() is on, and remembered for backward, which a training loop
    may call outside the block."""
    from models import GPT, GPTConfig

    calls = []
    for name in ("gelu_erf", "gelu_tanh", "layer_norm_forward", "layer_norm_backward", "attention_weights",
                 "softmax", "softmax_backward", "adam", "product", "multiply", "add_rows"):
        kernel = getattr(kernels, name)
        monkeypatch.setattr(kernels, name, lambda *a, _k=kernel, _n=name, **kw: calls.append(_n) or _k(*a, **kw))
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, n_embd=32, n_head=4, n_layer=2, block_size=16, bias=True, gelu=gelu))
    opt = AdamW(model.parameters(), lr=1e-3, fused=True)
    x = np.random.default_rng(0).integers(0, 20, (2, 16))
    for fused in (False, True):  # attention written out (F.softmax) and as one node (SDPA)
        with mg.fused(fused), mg.compiled():
            _, loss = model(x, x)
        loss.backward()
        with mg.compiled():
            opt.step()
    products = {"product"} if kernels.PRODUCTS else set()
    assert set(calls) == {"gelu_erf" if gelu == "none" else "gelu_tanh", "layer_norm_forward", "layer_norm_backward",
                          "attention_weights", "softmax", "softmax_backward", "adam", "multiply", "add_rows"} | products
    assert calls.count("softmax_backward") == 2 * 2  # each layer's attention weights, on both paths
    assert calls.count("attention_weights") == 2  # each layer's, in one node (SDPA)


@needs_numba
def test_train_py_compiled_trains_as_fused_does(tmp_path, capsys):
    import train

    finals = {}
    for flag in ("--fused", "--compiled"):
        argv = [flag, "--steps", "6", "--out", str(tmp_path / flag), "--samples", "0", "--no-explain"]
        assert train.main(argv) == 0
        line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("final: ")][-1]
        finals[flag] = dict(kv.split("=") for kv in line.split()[1:])
    for key in ("train_loss", "val_loss"):  # the same run, to float32's rounding over six steps
        assert float(finals["--compiled"][key]) == pytest.approx(float(finals["--fused"][key]), rel=1e-3)


@needs_numba
def test_the_switch_is_per_thread_and_nests():
    import threading

    seen = []
    with mg.compiled():
        assert mg.is_compiled_enabled()
        with mg.compiled(False):
            assert not mg.is_compiled_enabled()
        assert mg.is_compiled_enabled()
        thread = threading.Thread(target=lambda: seen.append(mg.is_compiled_enabled()))
        thread.start()
        thread.join()
    assert seen == [False] and not mg.is_compiled_enabled()


@needs_numba
def test_compiled_says_once_what_it_runs_on_and_warns_where_it_falls_back(monkeypatch, capsys):
    from minigrad import speed

    monkeypatch.setattr(speed, "told", [])
    with mg.compiled():
        pass
    with mg.compiled():
        pass
    said = capsys.readouterr().err.splitlines()
    assert said == [kernels.describe()] and "thread" in said[0] and "matrix products" in said[0]
    monkeypatch.setattr(speed, "told", [])
    monkeypatch.setattr(kernels, "THREADED", False)  # as where neither OpenMP nor TBB loads
    with pytest.warns(RuntimeWarning, match="no threading layer .* one thread"), mg.compiled():
        pass
    monkeypatch.setattr(speed, "told", [])
    monkeypatch.setattr(kernels, "THREADED", True)
    monkeypatch.setattr(kernels, "_BLAS", None)  # as where NumPy's BLAS is not its wheel's OpenBLAS
    with pytest.warns(RuntimeWarning, match="not the OpenBLAS of NumPy's wheels"), mg.compiled():
        pass

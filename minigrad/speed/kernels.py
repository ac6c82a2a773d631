"""Compiled kernels: the optional extra `pip install -e '.[compiled]'` (Numba), chosen by `with mg.compiled():`.

Each kernel is the formula of one Function's NumPy code, for float32 arrays on the CPU, compiled by Numba and
written as one loop over the elements (or the rows): where NumPy makes one pass over memory per operation (a
GELU's erf is about thirty), a kernel makes one, its loop spread over the cores (numba.prange). The matrix
products run on the same threads (`product`, at the end): NumPy's BLAS, whose own threads would spin on the cores
the kernels want, runs on one thread inside mg.compiled() (docs/performance.md, which also measures what each
kernel buys). The Functions that call them are minigrad/speed/compiled_functions.py's, subclasses of the teaching
Functions (or of their in-place twins, minigrad/speed/twins.py) that core.Function.apply runs instead under
mg.compiled(); the NumPy code they compile stays the definition, and tests/test_kernels.py checks every kernel
against it.

Numba's own exp is the C library's, one element at a time; `exp32` below is Cephes' expf in plain arithmetic,
which the compiler turns into vector instructions, 8 or 16 elements at a time.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import math
import os
import threading
import time
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from minigrad.array import backend, blas_threads, machine, runtime
from minigrad.array.arrays import as_rows

F = np.float32
FASTMATH = {"contract", "reassoc", "nsz", "arcp"}  # fused multiply-add and reordered sums; inf and NaN keep meaning
# error_model="numpy": x / 0 is inf, as in NumPy, not a ZeroDivisionError checked for at every division (a check
# that keeps the compiler from vector instructions); cache: compiled once, into __pycache__, then loaded
jit = numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True)

# Numba's threads: OpenMP's or TBB's, which two Python threads may both launch kernels on ("threadsafe"; Numba's
# own fallback, "workqueue", ends the process then), unless NUMBA_THREADING_LAYER chooses
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "threadsafe"


@numba.njit(parallel=True, cache=True)
def _first_launch(n):
    total = 0
    for i in numba.prange(n):
        total += i
    return total


try:
    _first_launch(2)
    THREADED = numba.threading_layer() in ("omp", "tbb")
except ValueError:  # neither is installed (OpenMP's library is missing): the kernels run on one thread
    THREADED = False
# pjit: a loop over numba.prange is spread over the threads (`take_cores` below); without them, a plain loop, not
# cached (Numba's cache does not tell the two apart)
pjit = numba.njit(fastmath=FASTMATH, error_model="numpy", cache=THREADED, parallel=THREADED)


def takes(a: np.ndarray) -> bool:
    """Whether the kernels run on array a: float32, in the CPU's memory, C-contiguous."""
    return isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous


# ---- exp in vector instructions ----

@intrinsic
def _float_with_bits(typingctx, i):
    """The float32 whose 32 bits are those of the int32 i (2^n is the float with bits (n + 127) << 23)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _bits_of_float(typingctx, x):
    """The int32 whose 32 bits are those of the float32 x."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@numba.njit(inline="always")
def _flip(b):
    """A float32's bits b (an int32) with the 31 low ones flipped where the sign bit is set: as integers these
    order as the floats do (a more negative float, a smaller integer); flipping again gives b back. A row's max
    taken over them is an integer max, which the compiler turns into vector instructions (a float max, which must
    keep NaN, it does not)."""
    return b ^ ((b >> 31) & np.int32(0x7FFFFFFF))


_LOG2E, _LN2_HI, _LN2_LO = F(1.4426950408889634), F(0.693359375), F(-2.12194440e-4)  # ln 2 = hi + lo
_EXP_P = tuple(F(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                              1.6666665459e-1, 5.0000001201e-1))  # Cephes' expf, highest power first


@numba.njit(fastmath=FASTMATH, error_model="numpy", inline="always")
def exp32(x):
    """exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln 2 / 2, ln 2 / 2] (subtracted in two parts,
    ln 2's leading bits exactly), exp(r) = 1 + r + r^2 P(r): within 1.1 ulp of float32 (tests/test_kernels.py);
    0 below -104 (where exp is under float32's smallest number), inf above 88.72, NaN stays NaN."""
    # below -104, where exp is 0, the arithmetic runs on 0 instead: on -104 it would make subnormal numbers, which
    # the CPU computes through a slow microcode path (a causal mask's -inf scores, half of attention's: 4x slower)
    c = min(x, F(88.72283)) if x >= F(-104.0) else F(0.0)
    n = np.floor(c * _LOG2E + F(0.5))  # a float32 (math.floor's int would turn what follows into float64)
    r = c - n * _LN2_HI
    r = r - n * _LN2_LO
    p = _EXP_P  # Horner's rule, written out: a loop over a tuple is not turned into vector instructions
    y = (((((p[0] * r + p[1]) * r + p[2]) * r + p[3]) * r + p[4]) * r + p[5]) * (r * r) + r + F(1)
    half = np.int32(n) >> 1  # 2^n as 2^half 2^(n - half): each in float32's range down to 2^-150
    y = y * _float_with_bits((half + 127) << 23) * _float_with_bits((np.int32(n) - half + 127) << 23)
    if x < F(-104.0):
        y = F(0.0)
    if x > F(88.72283):
        y = F(math.inf)
    return x if x != x else y


# ---- GELU: y and dy/dx in one pass (twins.py's _gelu_erf_block and _gelu_tanh_block) ----

_ERFC_P = tuple(F(c) for c in backend.ERFC_CHEBYSHEV)
_SQRT_HALF, _ONE_OVER_SQRT_2PI = F(math.sqrt(0.5)), F(1 / math.sqrt(2 * math.pi))
_GELU_C, _GELU_K = F(math.sqrt(2 / math.pi)), F(0.044715)


def gelu_erf(x: np.ndarray, slope: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The exact GELU's y and, where `slope`, dy/dx (FastGeluErf: _gelu_erf_block's formula)."""
    return _elementwise(_gelu_erf, x, slope)


def gelu_tanh(x: np.ndarray, slope: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The tanh GELU's y and, where `slope`, dy/dx (FastGelu: _gelu_tanh_block's formula)."""
    return _elementwise(_gelu_tanh, x, slope)


def _elementwise(kernel, x: np.ndarray, slope: bool) -> tuple[np.ndarray, np.ndarray | None]:
    y = np.empty_like(x)
    s = np.empty_like(x) if slope else None
    kernel(x.reshape(-1), y.reshape(-1), None if s is None else s.reshape(-1))
    return y, s


@pjit
def _gelu_erf(x, y, slope):
    """y = x Phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2), erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2) for z >= 0
    (backend.erfc's formula), erfc(-z) = 2 - erfc(z);  slope = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi)."""
    for i in numba.prange(x.size):
        v = x[i]
        z = abs(v) * _SQRT_HALF
        t = F(1.0) / (F(1.0) + F(0.5) * z)
        c = _ERFC_P  # Horner's rule, written out (as in exp32)
        p = ((((((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) * t + c[6]) * t + c[7]) * t
             + c[8]) * t + c[9]
        half_erfc = F(0.5) * t * exp32(p - z * z)  # 0.5 erfc(|x| / sqrt 2)
        cdf = half_erfc if v < 0 else F(1.0) - half_erfc
        y[i] = v * cdf
        if slope is not None:
            slope[i] = cdf + v * exp32(F(-0.5) * v * v) * _ONE_OVER_SQRT_2PI


@pjit
def _gelu_tanh(x, y, slope):
    """y = x h, h = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), u = c (x + 0.044715 x^3);
    slope = h + y (1 - h) (2c + 6 * 0.044715 c x^2)."""
    for i in numba.prange(x.size):
        v = x[i]
        v2 = v * v
        h = F(1.0) / (F(1.0) + exp32(F(-2.0) * _GELU_C * v * (F(1.0) + _GELU_K * v2)))
        y[i] = v * h
        if slope is not None:
            slope[i] = h + v * h * (F(1.0) - h) * (F(2.0) * _GELU_C + F(6.0) * _GELU_K * _GELU_C * v2)


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b for arrays of one shape (SlopeFunction.backward's dout * dy/dx), spread over the threads."""
    out = np.empty_like(a)
    _multiply(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return out


@pjit
def _multiply(a, b, out):
    for i in numba.prange(a.size):
        out[i] = a[i] * b[i]


# ---- an embedding's backward (shapes.py's EmbeddingFunction) ----

def add_rows(target: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> None:
    """target[indices[i]] += rows[i] for each i in turn, repeated indices accumulating (backend.scatter_add's
    sums, in the same order), on one thread: two rows may go to one place."""
    _add_rows(target, indices, rows)


@jit
def _add_rows(target, indices, rows):
    for i in range(len(indices)):
        target[indices[i]] += rows[i]


# ---- layer norm, row by row (normalization.py's LayerNormFunction) ----

def layer_norm_forward(x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y, xhat and rstd of LayerNormFunction.forward for rows x (N, C)."""
    xhat, rstd = np.empty_like(x), np.empty((x.shape[0], 1), x.dtype)
    y = xhat if w is None else np.empty_like(x)
    _layer_norm_rows(x, w, b, eps, y, xhat, rstd)
    return y, xhat, rstd


def layer_norm_backward(dout: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, w: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """dx, dw and db (None without w) of LayerNormFunction.backward for rows dout (N, C)."""
    dx = np.empty_like(dout)
    dw, db = (None, None) if w is None else (np.empty_like(w), np.empty_like(w))
    _layer_norm_backward_rows(dout, xhat, rstd, w, dx, dw, db, min(_threads, max(len(dout), 1)))
    return dx, dw, db


@pjit
def _layer_norm_rows(x, w, b, eps, y, xhat, rstd):
    """Each row of x (N, C): xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), y = xhat * w + b (w, b: (C,)
    or None, y then xhat itself); rstd (N, 1). x - mean is computed as (x - x0) - mean(x - x0), x0 the row's first
    value, so that a row far from 0 keeps its digits (rows of 1e4 + N(0, 1): 6e-7 against NumPy's 1e-3 from
    float64; tests/test_kernels.py)."""
    n, c = x.shape
    inv_c, eps = F(1.0) / F(max(c, 1)), F(eps)
    for i in numba.prange(n):
        shift = x[i, 0] if c else F(0.0)
        mean = F(0.0)  # of x - shift
        for j in range(c):
            xhat[i, j] = x[i, j] - shift  # through memory: the compiler may not fold it into x - (shift + mean)
            mean += xhat[i, j]
        mean *= inv_c
        var = F(0.0)
        for j in range(c):
            d = xhat[i, j] - mean
            xhat[i, j] = d
            var += d * d
        v = var * inv_c + eps
        # 1 / sqrt(v), and 0 where the variance overflowed to inf, as NumPy's 1 / sqrt(inf): fastmath's approximate
        # reciprocal square root, refined by a Newton step, would make 0 * inf = NaN of it
        r = F(1.0) / math.sqrt(v) if v < F(math.inf) else F(0.0)
        rstd[i, 0] = r
        for j in range(c):
            xhat[i, j] *= r
            if w is not None:
                y[i, j] = xhat[i, j] * w[j] + (b[j] if b is not None else F(0.0))


@pjit
def _layer_norm_backward_rows(dout, xhat, rstd, w, dx, dw, db, blocks):
    """Each row: dxhat = dout * w (dout without w), dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat));
    with w, dw = sum over the rows of dout * xhat and db = sum of dout (dw, db: (C,), written): each of `blocks`
    blocks of rows (one a thread) is summed into a row of its own, then the blocks' sums are added."""
    n, c = dout.shape
    inv_c = F(1.0) / F(max(c, 1))
    dw_blocks, db_blocks = np.zeros((blocks, c), F), np.zeros((blocks, c), F)
    for block in numba.prange(blocks):
        for i in range(n * block // blocks, n * (block + 1) // blocks):
            centre, proj = F(0.0), F(0.0)
            for j in range(c):
                g = dout[i, j] * w[j] if w is not None else dout[i, j]
                dx[i, j] = g
                centre += g
                proj += g * xhat[i, j]
            centre *= inv_c
            proj *= inv_c
            for j in range(c):
                dx[i, j] = (dx[i, j] - centre - xhat[i, j] * proj) * rstd[i, 0]
            if w is not None:
                for j in range(c):
                    dw_blocks[block, j] += dout[i, j] * xhat[i, j]
                    db_blocks[block, j] += dout[i, j]
    if w is not None:
        for j in range(c):
            dw[j], db[j] = F(0.0), F(0.0)
            for block in range(blocks):
                dw[j] += dw_blocks[block, j]
                db[j] += db_blocks[block, j]


# ---- attention's weights by rows (twins.py's FastAttention.weights) ----

def attention_weights(s: np.ndarray, allowed: np.ndarray | None, scale: float) -> np.ndarray:
    """softmax(s * scale) along each row of s (N, S), -inf where allowed (L, S) is False for row r's query r % L
    (None: no mask), in place; a row that sees no key gets zeros (the forward's NumPy code, step by step)."""
    _attention_rows(s, allowed, F(scale))
    return s


@pjit
def _attention_rows(s, allowed, scale):
    n, m = s.shape
    queries = allowed.shape[0] if allowed is not None else 1
    for r in numba.prange(n):
        # the row's max, as _flip orders floats (a NaN score has a NaN exp, so the row's total and every weight
        # are NaN, as in NumPy, whatever the max)
        row, top = s[r], np.int32(-2**31)
        # two loops, not one asking `allowed is None` per element: that one was not vectorised (1.8 against 0.4 ms)
        if allowed is None:
            for j in range(m):
                row[j] *= scale
                top = max(top, _flip(_bits_of_float(row[j])))
        else:
            sees = allowed[r % queries]
            for j in range(m):
                row[j] = row[j] * scale if sees[j] else F(-math.inf)
                top = max(top, _flip(_bits_of_float(row[j])))
        most = _float_with_bits(_flip(top))
        if allowed is not None and most == -math.inf:  # sees no key: exp(-inf - 0) = 0, not NaN
            most = F(0.0)
        total = _exps(row, row, most)
        if allowed is not None and total == 0:  # and its weights stay 0 (0 / 1)
            total = F(1.0)
        _divide(row, total)


@numba.njit(fastmath=FASTMATH, error_model="numpy", inline="always")
def _exps(x, y, most):
    """y = exp(x - most) along one row (y may be x), by exp32; returns their sum."""
    total = F(0.0)
    for j in range(x.size):
        y[j] = exp32(x[j] - most)
        total += y[j]
    return total


@numba.njit(fastmath=FASTMATH, error_model="numpy", inline="always")
def _divide(y, total):
    for j in range(y.size):
        y[j] /= total


# ---- softmax by rows (SoftmaxFunction's forward, CrossEntropyFunction.losses_and_probs) ----

def softmax(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, most, log_sums) for rows x (N, M): y = exp(x - most) / sum, most each row's max and log_sums the log of
    each row's sum of exp(x - most), both (N,): softmax's forward, and cross-entropy's -log softmax(x)[t] =
    log_sums - (x[t] - most)."""
    y = np.empty_like(x)
    most, log_sums = np.empty(x.shape[0], F), np.empty(x.shape[0], F)
    _softmax_rows(x, y, most, log_sums)
    return y, most, log_sums


@pjit
def _softmax_rows(x, y, most, log_sums):
    """Each row: its max (as _flip orders floats: an integer max, in vector instructions), y = exp(x - max) by
    exp32, the sum, y /= sum. A NaN gives a NaN sum, and a row of NaN, as in NumPy; so do +inf and a row of -inf
    (inf - inf)."""
    n, m = x.shape
    for r in numba.prange(n):
        top = np.int32(-2**31)
        for j in range(m):
            top = max(top, _flip(_bits_of_float(x[r, j])))
        row_max = _float_with_bits(_flip(top))
        total = _exps(x[r], y[r], row_max)
        _divide(y[r], total)
        most[r], log_sums[r] = row_max, math.log(total)


# ---- softmax's backward by rows (SoftmaxFunction's and FastAttention.softmax_backward) ----

def softmax_backward(dout: np.ndarray, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = y * (dout - sum(dout * y)) along each row of y (N, M), softmax's output (out may be dout)."""
    _softmax_backward_rows(dout, y, out)
    return out


@pjit
def _softmax_backward_rows(dout, y, out):
    n, m = dout.shape
    for r in numba.prange(n):
        dot = F(0.0)
        for j in range(m):
            dot += dout[r, j] * y[r, j]
        for j in range(m):
            out[r, j] = y[r, j] * (dout[r, j] - dot)


# ---- Adam and AdamW, element by element (optim.py's Adam.fused_update) ----

def adam(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, lr: float, betas: tuple[float, float],
         eps: float, weight_decay: float, maximize: bool, t: int, decoupled: bool) -> None:
    """Adam.fused_update's rule (not amsgrad) for one parameter p, in place in p, m and v: AdamW's decay
    p *= 1 - lr wd (decoupled) or Adam's g + wd p; m += (1 - b1) (g - m), v = b2 v + (1 - b2) g^2;
    p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps sqrt(1 - b2^t))."""
    (b1, b2), root = betas, math.sqrt(1 - betas[1] ** t)
    shrink, l2 = (1 - lr * weight_decay, 0.0) if decoupled else (1.0, weight_decay)
    _adam_elements(p.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), F(1 - b1), F(b2), F(1 - b2),
                   F(eps * root), F(lr * root / (1 - b1 ** t)), F(shrink), F(l2), maximize)


@pjit
def _adam_elements(p, g, m, v, rest1, b2, rest2, eps, step, shrink, l2, maximize):
    for i in numba.prange(p.size):
        gi = -g[i] if maximize else g[i]
        gi += l2 * p[i]
        mi = m[i] + rest1 * (gi - m[i])  # rest1 = 1 - b1, rest2 = 1 - b2
        vi = b2 * v[i] + rest2 * gi * gi
        m[i], v[i] = mi, vi
        p[i] = p[i] * shrink - step * (mi / (math.sqrt(vi) + eps))


# ---- the cores, and matrix products on them (matmul.py's product) ----
# NumPy's BLAS keeps a pool of threads of its own, whose workers spin on the other cores for a while after each
# product: a kernel's second thread then waits for a core (docs/performance.md). So under mg.compiled() the BLAS
# runs on one thread, and `product` makes the threads of the kernels (Numba's) share its products out: one BLAS
# call per thread, on a block of rows, or on some of a stack of matrices. The kernels and the products then take
# turns on the same threads.

def _numpy_blas() -> tuple[Any, int]:
    """NumPy's OpenBLAS (threadpoolctl's controller for it) and the address of its cblas_sgemm with 64-bit
    integers (NumPy's wheels), or (None, 0) for another BLAS: its products stay NumPy's, and the kernels one
    thread."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None, 0
    blas = ThreadpoolController().select(internal_api="openblas")
    for lib in blas.lib_controllers:
        for name in ("scipy_cblas_sgemm64_", "cblas_sgemm64_"):
            sgemm = getattr(ctypes.CDLL(lib.filepath), name, None)
            if sgemm is not None:
                return blas, ctypes.cast(sgemm, ctypes.c_void_p).value
    return None, 0


def _mkl_sgemm() -> int:
    """The address of MKL's cblas_sgemm with 64-bit integers, MKL set to run each call on the thread that makes
    it, where the optional extra `mkl` is installed (PyPI's mkl package); else 0."""
    try:
        files = importlib.metadata.files("mkl") or []
    except importlib.metadata.PackageNotFoundError:
        return 0
    for file in files:
        if file.name.startswith(("libmkl_rt.so", "mkl_rt")) and not file.name.endswith(".lib"):
            try:
                mkl = ctypes.CDLL(str(file.locate()))
            except OSError:
                continue
            mkl.MKL_Set_Threading_Layer(1)  # MKL_THREADING_SEQUENTIAL: the kernels' threads are the threads
            return ctypes.cast(mkl.cblas_sgemm_64, ctypes.c_void_p).value
    return 0


_BLAS, _OPENBLAS = _numpy_blas() if THREADED else (None, 0)
# the cblas_sgemm (64-bit integers) of each BLAS found, by name; NumPy's OpenBLAS is the one set to a thread inside
# mg.compiled() either way
SGEMMS = {name: address for name, address in (("OpenBLAS", _OPENBLAS), ("MKL", _OPENBLAS and _mkl_sgemm()))
          if address}
FORCE_SGEMM = "MINIGRAD_SGEMM"  # OpenBLAS, MKL or NumPy: whose products run, instead of the measured choice
# whose sgemm `product` calls (None: the products stay NumPy's) and how many threads the kernels run on, chosen at
# the first take_cores by what runs faster here (choose_products), and how that was decided (describe() says it)
PRODUCTS: str | None = None
CHOSEN_BY = ""
_cores_lock, _cores_taken, _blas_limit, _threads, _blas_found = threading.Lock(), 0, None, 1, None
_chosen: tuple[tuple[str | None, int], int] | None = None  # ((MINIGRAD_SGEMM, threads allowed), threads chosen)


def take_cores() -> None:
    """mg.compiled()'s entry: NumPy's BLAS on one thread, whatever limit was set before (threadpoolctl's, an
    environment variable), the kernels on as many threads as the BLAS had (at most runtime.threads();
    OPENBLAS_NUM_THREADS, a threadpoolctl cap and runtime.share_cores count) or fewer where fewer measured faster
    (choose_products), until give_cores; calls nest. Process-wide, as the BLAS's setting is: NumPy's own products
    are single-threaded meanwhile."""
    global _cores_taken, _blas_limit, _threads, _blas_found, _chosen, PRODUCTS, CHOSEN_BY
    forced_sgemm()  # a wrong MINIGRAD_SGEMM is refused before anything is set
    with _cores_lock:
        if _cores_taken == 0 and _BLAS is not None:
            _blas_found = min(lib.num_threads for lib in _BLAS.lib_controllers)
            _threads = max(1, min(_blas_found, runtime.threads(), numba.config.NUMBA_NUM_THREADS))
            _blas_limit = as_the_blas_controller(lambda: _BLAS.limit(limits=1))
            asked = (os.environ.get(FORCE_SGEMM), _threads)
            if _chosen is None or _chosen[0] != asked:  # chosen once, again where the override or the cap changed
                PRODUCTS, threads, CHOSEN_BY = choose_products(_threads)
                _chosen = (asked, threads)
            _threads = _chosen[1]
        _cores_taken += 1
    numba.set_num_threads(_threads)


def choose_products(allowed: int) -> tuple[str | None, int, str]:
    """(whose sgemm `product` calls, the kernels' threads, how that was chosen): MINIGRAD_SGEMM where set; else the
    fastest of each sgemm found at 1 and at `allowed` threads (at `allowed` only where OMP_NUM_THREADS,
    OPENBLAS_NUM_THREADS or MKL_NUM_THREADS is set) on a transformer step's products and GELU
    (representative_work), measured once per machine and kept in minigrad.array.machine's cache."""
    forced = forced_sgemm()
    if forced is not None:
        return (None if forced == "NumPy" else forced), allowed, f"{FORCE_SGEMM}={os.environ[FORCE_SGEMM]}"
    if not SGEMMS:
        return None, allowed, "no sgemm found to call"
    fixed = blas_threads.fixed_by_environment()
    counts = sorted({allowed} if fixed else {1, allowed})  # a user's count: kept
    candidates = [(name, n) for name in SGEMMS for n in counts]
    if len(candidates) == 1:
        threads = f", {fixed} keeping the threads" if fixed else ""
        return candidates[0][0], candidates[0][1], f"the only sgemm found{threads}"
    label = f"compiled products ({', '.join(f'{name} on {n}' for name, n in candidates)} threads)"
    times, cached = machine.remembered(label, lambda: {f"{name} {n}": _time_work(name, n) for name, n in candidates})
    best = min(candidates, key=lambda c: times[f"{c[0]} {c[1]}"])
    said = ", ".join(f"{name} on {n}: {times[f'{name} {n}']:.2f} ms" for name, n in candidates)
    return best[0], best[1], (f"measurement on this machine's representative products and GELU ({said}; "
                              f"{'cached in ' + str(machine.cache_path()) if cached else 'measured now'})")


def forced_sgemm() -> str | None:
    """The sgemm MINIGRAD_SGEMM names (one of SGEMMS, or "NumPy"; any case), None where it is not set; a name not
    found here is a ValueError naming those that are."""
    forced = os.environ.get(FORCE_SGEMM)
    if forced is None:
        return None
    names = {name.lower(): name for name in [*SGEMMS, "NumPy"]}
    if forced.lower() not in names:
        raise ValueError(f"{FORCE_SGEMM}={forced!r}: expected one of {', '.join(names.values())} (the sgemms found "
                         "here, or NumPy for NumPy's own products)")
    return names[forced.lower()]


def representative_work(rows: int = 2048, width: int = 128) -> list[tuple[np.ndarray, np.ndarray]]:
    """A transformer step's products at `rows` tokens and `width` channels (benchmarks.bench's small): the
    attention and MLP projections, a weight gradient (a transposed view, as the backward's), attention's stacked
    products (B, nh, T, hs) @ (B, nh, hs, T)."""
    rng = np.random.default_rng(0)

    def arr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=F)

    heads, seq = 4, 64
    batch, hs = rows // seq, width // heads
    return [(arr(rows, width), arr(width, 3 * width)), (arr(rows, width), arr(width, 4 * width)),
            (arr(rows, 4 * width), arr(4 * width, width)), (arr(rows, 4 * width).T, arr(rows, width)),
            (arr(batch, heads, seq, hs), arr(batch, heads, hs, seq))]


def _time_work(name: str, threads: int, repeats: int = 3) -> float:
    """ms of representative_work's products through `name`'s sgemm and a GELU over its widest array, on `threads`
    of the kernels' threads, the best of `repeats` after one untimed."""
    work = representative_work()
    wide = work[1][0] @ work[1][1]
    numba.set_num_threads(threads)

    def run() -> None:
        for a, b in work:
            product(a, b, SGEMMS[name])
        gelu_tanh(wide, slope=True)

    run()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return round(best * 1e3, 3)


def give_cores() -> None:
    """mg.compiled()'s exit: the BLAS's threads as take_cores found them (a user's cap included), once the last
    taker is out."""
    global _cores_taken, _blas_limit
    with _cores_lock:
        _cores_taken -= 1
        if _cores_taken == 0 and _blas_limit is not None:
            as_the_blas_controller(_blas_limit.restore_original_limits)
            _blas_limit = None


def as_the_blas_controller(task: Any) -> Any:
    """task() on a new thread, waited for, that first takes the control of OpenBLAS's thread count. threadpoolctl
    (3.6 and after) lets one thread at a time set it: the first that did and is still alive, such as the main thread
    after a user's threadpool_limits(limits=2); another's setting is skipped without a word, so mg.compiled() left
    the BLAS on the user's two threads beside the kernels' (a step twice as long). Set from a thread that has run
    nothing else, which then ends, the count always took (tests/test_kernels.py), and the user's own threads can set
    it again afterwards."""
    def take_control_and_run() -> None:
        for lib in _BLAS.lib_controllers:
            clear = getattr(type(lib), "clear_controlling_thread", None)  # threadpoolctl < 3.6 has no such control
            if clear is not None:
                clear(force=True)
        done.append(task())

    done: list[Any] = []
    thread = threading.Thread(target=take_control_and_run)
    thread.start()
    thread.join()
    return done[0]


def describe() -> str:
    """What mg.compiled() runs on, in one line: the kernels' threads, and whose sgemm the matrix products call."""
    threads = f"{_threads} thread{'s' if _threads > 1 else ''} ({numba.threading_layer() if THREADED else 'serial'})"
    products = f"{PRODUCTS}'s sgemm on those threads" if PRODUCTS else "NumPy (its BLAS)"
    products += f", chosen by {CHOSEN_BY}" if CHOSEN_BY else ""
    blas = ("" if _blas_found is None else "; NumPy's OpenBLAS on the 1 thread it had" if _blas_found == 1 else
            f"; NumPy's OpenBLAS set from {_blas_found} threads to 1 meanwhile, given back on exit")
    return f"mg.compiled(): the kernels on {threads}, the matrix products by {products}{blas}"


def fallbacks() -> list[str]:
    """Why the kernels run on fewer cores than they could, one sentence each (none where nothing falls back)."""
    if not THREADED:
        return ["mg.compiled(): Numba finds no threading layer (OpenMP or TBB: pip install tbb), so the kernels run "
                "on one thread and the matrix products stay NumPy's"]
    if _BLAS is None:
        return ["mg.compiled(): NumPy's BLAS is not the OpenBLAS of NumPy's wheels, whose threads minigrad knows how "
                "to set aside, so the kernels run on one thread and the matrix products stay NumPy's"]
    return []


def multiplies(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether `product` takes a @ b: float32 arrays in the CPU's memory, b a matrix (K, N), or both stacks of
    matrices with the same batch axes, and a BLAS found (PRODUCTS)."""
    return (PRODUCTS is not None and isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
            and a.dtype == b.dtype == F and a.ndim >= 1
            and (b.ndim == 2 or (a.ndim == b.ndim and a.shape[:-2] == b.shape[:-2])))


def product(a: np.ndarray, b: np.ndarray, sgemm: int | None = None) -> np.ndarray:
    """a @ b, as NumPy's (a (..., M, K) or (..., K) rows against b (K, N); or stacks (..., M, K) @ (..., K, N)),
    each matrix handed to BLAS as it lies in memory, or transposed: a view such as attention's heads (B, nh, T, hs)
    of a (B, T, C) array, or its K^T, is read where it is, not copied. sgemm: the address of the cblas_sgemm to call
    (default: PRODUCTS')."""
    sgemm = SGEMMS[PRODUCTS] if sgemm is None else sgemm
    if b.ndim == 2:
        return _products(as_rows(a)[None, None], b[None, None], sgemm).reshape(*a.shape[:-1], b.shape[1])
    out = _products(_four_axes(a), _four_axes(b), sgemm)
    return out.reshape(*a.shape[:-1], b.shape[-1])


def _four_axes(m: np.ndarray) -> np.ndarray:
    """A stack (..., R, C) as (n1, n2, R, C): (1, 1, R, C) for a matrix, and so on; more batch axes are merged into
    the first (a copy where their strides do not allow a view)."""
    return m.reshape((1,) * (4 - m.ndim) + m.shape) if m.ndim <= 4 else m.reshape(-1, *m.shape[-3:])


_ROW_MAJOR, _AS_IS, _TRANSPOSED = 101, 111, 112  # CBLAS's constants


def _layout(m: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(m, how BLAS reads each matrix of the stack m (n1, n2, R, C), its leading dimension): as is, or transposed
    where m is a transposed view; copied first where neither fits."""
    step = m.itemsize
    rows, cols = m.shape[2:]
    if m.strides[3] == step and m.strides[2] % step == 0 and m.strides[2] >= step * max(cols, 1):
        return m, _AS_IS, m.strides[2] // step
    if m.strides[2] == step and m.strides[3] % step == 0 and m.strides[3] >= step * max(rows, 1):
        return m, _TRANSPOSED, m.strides[3] // step
    m = np.ascontiguousarray(m)
    return m, _AS_IS, max(cols, 1)


def _products(a: np.ndarray, b: np.ndarray, sgemm: int) -> np.ndarray:
    """The stacks a (n1, n2, M, K) @ b (n1, n2, K, N) -> (n1, n2, M, N), b's batch axes of size 1 broadcast."""
    n1, n2, M, K = a.shape
    N = b.shape[3]
    out = np.empty((n1, n2, M, N), F)
    if out.size == 0:
        return out
    if K == 0:
        out[...] = 0
        return out
    a, how_a, lda = _layout(a)
    b, how_b, ldb = _layout(b)
    blocks = max(1, min(M // 32, -(-_threads // (n1 * n2))))  # blocks of rows, so that every thread has work
    _sgemms(sgemm, how_a, how_b, blocks, a, lda, b, ldb, out)
    return out


@intrinsic
def _sgemm(typingctx, address, how_a, how_b, m, n, k, a, lda, b, ldb, c, ldc):
    """cblas_sgemm(row-major, how_a, how_b, m, n, k, 1, a, lda, b, ldb, 0, c, ldc) at `address` (its 64-bit
    integer interface), pointers as integers: c = op(a) op(b)."""
    i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
    ptr = f32.as_pointer()
    fn_type = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64])

    def codegen(context, builder, signature, args):
        address, how_a, how_b, m, n, k, a, lda, b, ldb, c, ldc = args
        fn = builder.inttoptr(address, fn_type.as_pointer())
        how_a, how_b = builder.trunc(how_a, i32), builder.trunc(how_b, i32)  # CBLAS's enums are C ints
        a, b, c = (builder.inttoptr(v, ptr) for v in (a, b, c))
        one, zero = ir.Constant(f32, 1.0), ir.Constant(f32, 0.0)
        builder.call(fn, [ir.Constant(i32, _ROW_MAJOR), how_a, how_b, m, n, k, one, a, lda, b, ldb, zero, c, ldc])
        return context.get_dummy_value()
    return types.void(*[types.int64] * 12), codegen


@pjit
def _sgemms(address, how_a, how_b, blocks, a, lda, b, ldb, out):
    """out[i, j] = op(a[i, j]) op(b[i, j]) (b's axes of size 1 broadcast), each product in `blocks` blocks of rows:
    n1 * n2 * blocks BLAS calls spread over the threads (pointers as integers, 4 bytes a float)."""
    n1, n2, M, N = out.shape
    K = b.shape[2]
    a1, a2 = a.strides[0] // 4 if n1 > 1 else 0, a.strides[1] // 4 if n2 > 1 else 0
    b1, b2 = b.strides[0] // 4 if b.shape[0] > 1 else 0, b.strides[1] // 4 if b.shape[1] > 1 else 0
    for w in numba.prange(n1 * n2 * blocks):
        i, j, part = w // (n2 * blocks), w // blocks % n2, w % blocks
        first, last = M * part // blocks, M * (part + 1) // blocks
        row = first * lda if how_a == _AS_IS else first  # where row `first` of op(a) starts in a
        _sgemm(address, how_a, how_b, last - first, N, K, a.ctypes.data + 4 * (i * a1 + j * a2 + row), lda,
               b.ctypes.data + 4 * (i * b1 + j * b2), ldb, out.ctypes.data + 4 * (((i * n2 + j) * M + first) * N), N)

"""The one module that knows NumPy (device "cpu") and CuPy (device "cuda") apart: everything else asks
`get_array_module(array)` for its inputs' array module, so one code path serves both. What the two spell
differently lives here too: scatter_add, erf (CuPy has one, NumPy does not), the seeded generators; and `namespace`,
the names backward formulas compute with on arrays (the module's, with erf, erfc, added_at, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # CuPy is an optional extra: pip install 'minigrad[cuda12]' or 'minigrad[cuda13]'
    import cupy
    import cupyx
    import cupyx.scipy.special
except ImportError:
    cupy = None
    cupyx = None

DEVICES = ("cpu", "cuda")
Array = Any  # numpy.ndarray or cupy.ndarray


def cuda_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    if cupy is None:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError:
        return False


class device(str):
    """A device as torch.device: mg.device("cpu"), mg.device("cuda"), mg.device("cuda:0") or mg.device("cuda", 0).
    It is the string of its type ("cpu", "cuda"), so it goes wherever a device string does; `.type` and `.index` as
    PyTorch's. Only device 0 is used here: another index is refused."""

    index: int | None

    def __new__(cls, type: str, index: int | None = None) -> device:  # `type`: PyTorch's argument name
        if isinstance(type, device):
            return type
        name, _, number = str(type).partition(":")
        if number:
            if index is not None or not number.isdigit():
                raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {type!r} with index {index!r}")
            index = int(number)
        if name not in DEVICES:
            raise ValueError(f"device: unknown device type {name!r}: expected one of {DEVICES}")
        if index not in (None, 0) or (name == "cpu" and index is not None):
            raise ValueError(f"device: index {index} of {name!r} is not available here (one GPU, index 0, at most)")
        self = super().__new__(cls, name)
        self.index = index
        return self

    @property
    def type(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


def check_device(device: str) -> str:
    """Return `device` if this machine can use it, else raise a clear error saying why not."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: expected one of {DEVICES}")
    if device == "cuda" and not cuda_available():
        why = "CuPy is not installed" if cupy is None else "CuPy finds no GPU"
        raise RuntimeError(
            f"device 'cuda' requested but {why}; "
            "install the extra matching your CUDA (pip install 'minigrad[cuda12]' or '[cuda13]')"
        )
    return device


def get_array_module(array: Array):
    """numpy or cupy, whichever owns `array` (as DeZero's cuda.get_array_module)."""
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return np


def is_array(value: Any) -> bool:
    """Whether `value` is a NumPy or a CuPy array."""
    return isinstance(value, np.ndarray) or (cupy is not None and isinstance(value, cupy.ndarray))


ARRAY_TYPES = frozenset((np.ndarray,) if cupy is None else (np.ndarray, cupy.ndarray))  # exact types, as arrays are


CPU, CUDA = device("cpu"), device("cuda")  # what x.device gives: a device, so that x.device.type works


def device_of(array: Array) -> device:
    return CUDA if get_array_module(array) is not np else CPU


def module_for(device: str):
    """The array module that allocates on `device`."""
    return np if device == "cpu" else cupy if check_device(device) == "cuda" else np


def to_device(array: Array, device: str) -> Array:
    """`array` on `device`, copied only when it lives elsewhere."""
    if device_of(array) == device:
        return array
    return cupy.asarray(array) if check_device(device) == "cuda" else cupy.asnumpy(array)


def synchronize(device: str) -> None:
    """Wait until the device has finished the work queued so far (for timings); a no-op on the CPU."""
    if device == "cuda":
        cupy.cuda.Device().synchronize()


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that broadcasting gives (ValueError if none): arithmetic on shapes, the same on every
    device, so NumPy's serves CuPy arrays too."""
    return np.broadcast_shapes(*shapes)


def to_numpy(array: Array) -> np.ndarray:
    """A NumPy array, copied from the GPU where needed."""
    return cupy.asnumpy(array) if device_of(array) == "cuda" else np.asarray(array)


def scatter_add(target: Array, indices: Any, values: Array) -> None:
    """target[indices] += values, with repeated indices accumulating (unlike plain `+=`). On the GPU the additions
    are atomic, in whatever order the threads run, so sums over repeated indices can differ in the last bits."""
    if isinstance(indices, tuple) and len(indices) == 1:  # (rows,) is rows: the same places
        indices = indices[0]
    if device_of(target) == "cuda":
        cupy.add.at(target, indices, values)  # not cupyx.scatter_add: deprecated in CuPy 14
    elif getattr(indices, "ndim", None) == 1 and indices.dtype.kind in "iu" and indices.size:
        # speed: rows of an embedding. np.add.at goes row by row, so sort the indices instead and sum
        # each run of equal ones with a single reduceat
        order = np.argsort(indices, kind="stable")
        rows = indices[order]
        starts = np.flatnonzero(np.diff(rows, prepend=rows[0] - 1))
        target[rows[starts]] += np.add.reduceat(values[order], starts, axis=0)
    else:
        np.add.at(target, indices, values)


def added_at(values: Array, index: tuple, shape: tuple[int, ...]) -> Array:
    """Zeros of `shape` with `values` added at `index` (repeated places accumulating): the backward of x[index], out
    of place. A basic index (ints, slices, None, Ellipsis) names each place at most once: values are assigned."""
    target = get_array_module(values).zeros(shape, dtype=values.dtype)
    if all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index):
        target[index] = values
    else:
        scatter_add(target, index, values)
    return target


def products_of_others(rows: Array) -> Array:
    """(..., n) -> (..., n): at i, the product of the row's other values, prod_{j != i} x_j, as the product of those
    before i times the product of those after it (two cumulative products): no division, so a zero (only its place
    gets a nonzero product), two zeros (none does) and a product that overflows need no special case."""
    xp = get_array_module(rows)
    ones = xp.ones(rows.shape[:-1] + (1,), dtype=rows.dtype)
    before = xp.cumprod(xp.concatenate([ones, rows[..., :-1]], axis=-1), axis=-1)
    after = xp.flip(xp.cumprod(xp.flip(xp.concatenate([rows[..., 1:], ones], axis=-1), -1), axis=-1), -1)
    return before * after


def permute_dims(x: Array, axes: tuple[int, ...]) -> Array:
    """x with its axes in the order `axes` (NumPy 2's and the array API's name, for a CuPy without it)."""
    return x.transpose(axes)


def astype(x: Array, dtype: Any) -> Array:
    """x as `dtype` (NumPy 2's and the array API's function, for a CuPy without it)."""
    return x.astype(dtype)


# ---- the error function ----

# W. J. Cody's rational Chebyshev approximations, as in netlib's specfun CALERF ("Rational Chebyshev
# approximations for the error function", Math. Comp. 23, 1969), highest power first
_ERF_SMALL = ((1.85777706184603153e-1, 3.16112374387056560e0, 1.13864154151050156e2, 3.77485237685302021e2,
               3.20937758913846947e3),
              (1.0, 2.36012909523441209e1, 2.44024637934444173e2, 1.28261652607737228e3, 2.84423683343917062e3))
_ERFC_MIDDLE = ((2.15311535474403846e-8, 5.64188496988670089e-1, 8.88314979438837594e0, 6.61191906371416295e1,
                 2.98635138197400131e2, 8.81952221241769090e2, 1.71204761263407058e3, 2.05107837782607147e3,
                 1.23033935479799725e3),
                (1.0, 1.57449261107098347e1, 1.17693950891312499e2, 5.37181101862009858e2, 1.62138957456669019e3,
                 3.29079923573345963e3, 4.36261909014324716e3, 3.43936767414372164e3, 1.23033935480374942e3))
_ERFC_LARGE = ((1.63153871373020978e-2, 3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
                1.60837851487422766e-2, 6.58749161529837803e-4),
               (1.0, 2.56852019228982242e0, 1.87295284992346047e0, 5.27905102951428412e-1, 6.05183413124413191e-2,
                2.33520497626869185e-3))
_ONE_OVER_SQRT_PI = 5.6418958354775628695e-1


def erf(x: Array) -> Array:
    """The error function in x's dtype: CuPy's own on the GPU; on the CPU (NumPy has none) Cody's rational functions,
    within a few ulps of float64: x P(x^2) / Q(x^2) for |x| <= 0.46875, beyond it 1 - erfc(|x|) (_cody_erfc)."""
    if device_of(x) == "cuda":
        return cupyx.scipy.special.erf(x)
    x = np.asarray(x)
    a = np.abs(x)
    y = np.empty_like(x, dtype=np.result_type(x.dtype, np.float32))
    small = a <= 0.46875  # NaN is not: it goes through erfc and stays NaN
    y[small] = x[small] * _rational(_ERF_SMALL, a[small] ** 2)
    y[~small] = np.copysign(1 - _cody_erfc(a[~small]), x[~small])
    return y


def erfc(x: Array) -> Array:
    """1 - erf(x), without the cancellation: CuPy's own on the GPU; on the CPU, in float64 Cody's functions, in a
    lower precision one formula to that precision, computed in x's dtype block by block (speed and memory: the exact
    GELU reads it; _erfc_block): erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), for z = |x|, relative error below
    1.2e-7 (Numerical Recipes' Chebyshev fit, "erfcc"), and erfc(-z) = 2 - erfc(z)."""
    if device_of(x) == "cuda":
        return cupyx.scipy.special.erfc(x)
    x = np.asarray(x)
    if x.dtype == np.float64:  # 1 - erf(x) cancels only where erf(x) nears 1: there Cody's erfc itself
        y = erf(x)
        np.subtract(1, y, out=y)
        far = x > 0.46875  # NaN is not: 1 - NaN stays NaN
        y[far] = _cody_erfc(x[far])
        return y
    flat = x.reshape(-1)  # in place works on a 0-d x too (NumPy makes scalars of 0-d results)
    y = np.empty(flat.shape, dtype=np.result_type(x.dtype, np.float32))
    for start in range(0, flat.size, BLOCK):
        _erfc_block(flat[start:start + BLOCK], y[start:start + BLOCK])
    return y.reshape(x.shape)


BLOCK = 1 << 16  # elements per block on the CPU: a block and a few temporaries of its size stay in cache


def _erfc_block(x: np.ndarray, p: np.ndarray) -> None:
    """p = erfc(x), the formula of erfc() above, in place in p and two temporaries of x's size."""
    z = np.abs(x)
    t = np.multiply(z, 0.5, dtype=p.dtype)
    t += 1
    np.reciprocal(t, out=t)  # t = 1 / (1 + z/2), in (0, 1]
    np.multiply(t, ERFC_CHEBYSHEV[0], out=p)
    for c in ERFC_CHEBYSHEV[1:-1]:  # Horner's rule, highest power first
        p += c
        p *= t
    p += ERFC_CHEBYSHEV[-1]
    z *= z
    p -= z  # -z^2 + P(t)
    np.exp(p, out=p)
    p *= np.copysign(t, x, out=t)  # erfc(|x|), negated where x < 0 (or -0)
    p += np.multiply(np.signbit(x), p.dtype.type(2), out=z)  # erfc(-z) = 2 - erfc(z) (no branch, no mask; in z)


# Numerical Recipes (Press et al., 2nd ed., section 6.2, erfcc), highest power of t first
ERFC_CHEBYSHEV = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
                   0.37409196, 1.00002368, -1.26551223)


def _cody_erfc(a: np.ndarray) -> np.ndarray:
    """Cody's erfc(a) for a > 0.46875: exp(-a^2) P(a) / Q(a) up to 4 and exp(-a^2) (1/sqrt(pi) - t P(t) / Q(t)) / a,
    t = 1 / a^2, past 4 (a NaN stays NaN)."""
    y = np.empty_like(a)
    middle = a <= 4
    y[middle] = np.exp(-a[middle] ** 2) * _rational(_ERFC_MIDDLE, a[middle])
    b = np.minimum(a[~middle], 28.0)  # erfc(28) rounds to 0 in float64 (so does all beyond), and 28^2 cannot overflow
    t = 1 / (b * b)
    y[~middle] = np.exp(-b * b) * (_ONE_OVER_SQRT_PI - t * _rational(_ERFC_LARGE, t)) / b
    return y


def _rational(coefficients: tuple[tuple[float, ...], tuple[float, ...]], t: np.ndarray) -> np.ndarray:
    """P(t) / Q(t) for the coefficient lists (P, Q), highest power first (Horner's rule)."""
    p, q = (np.polyval(c, t) for c in coefficients)
    return p / q


# ---- random numbers: one seeded generator per device ----

_generators: dict[str, Any] = {}


_seed: list[int | None] = [None]  # manual_seed's, for the generators made after it


def manual_seed_device(device: str, seed: int) -> None:
    """Seed the generator of one device only (mg.cuda.manual_seed_all: the GPU's, the CPU's untouched)."""
    _generators[device] = module_for(device).random.default_rng(seed)


def manual_seed(seed: int) -> None:
    """Seed the generators behind randn, dropout and parameter initialisation on every device. A device's generator
    is made when first used, so a CPU run makes none on the GPU (a CuPy generator would start a CUDA context)."""
    _generators.clear()
    _seed[0] = seed


def generator(device: str, chosen: Generator | None = None):
    """The random number source of `device`: `chosen`'s where one is passed (a `generator=` argument, which must live
    on that device), else the device's own, seeded by manual_seed."""
    if chosen is not None:
        if chosen.device != device:
            raise RuntimeError(f"a generator on {chosen.device!r} cannot make numbers on {device!r}: "
                               f"make it with mg.Generator(device={device!r})")
        return chosen.rng
    if device not in _generators:
        _generators[device] = module_for(device).random.default_rng(_seed[0])
    return _generators[device]


class Generator:
    """A random number generator of its own, as torch.Generator: pass it as `generator=` to randn, randint, randperm,
    multinomial or a DataLoader, and its stream is apart from the global one (mg.manual_seed)."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = check_device(str.__str__(device))  # "cpu", "cuda", or an mg.device
        self.manual_seed(int(np.random.SeedSequence().entropy % 2**63))  # unseeded: fresh, as PyTorch's

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream from `seed`; the generator itself, as PyTorch's (`mg.Generator().manual_seed(42)`)."""
        self.seed_value = int(seed)
        self.rng = module_for(self.device).random.default_rng(self.seed_value)
        return self

    def initial_seed(self) -> int:
        return self.seed_value


# ---- the names backward formulas compute with ----

class Names:
    """An array namespace: `module`'s names (each looked up once, then kept here), with `extras` beside or instead of
    them. A backward formula's xp is one: NumPy's or CuPy's (namespace below), or minigrad's under create_graph."""

    def __init__(self, module: Any, **extras: Any) -> None:
        self.module = module
        vars(self).update(extras)

    def __getattr__(self, name: str) -> Any:  # a name not looked up yet: the module's, kept for the next time
        value = getattr(self.module, name)
        setattr(self, name, value)
        return value


_NAMESPACES: dict[Any, Names] = {}


def namespace(array: Array) -> Names:
    """The names a backward formula computes with on `array` (first order): its module's, NumPy's or CuPy's, with
    what NumPy lacks or CuPy may lack under NumPy's names: erf, erfc, added_at, products_of_others, permute_dims,
    astype."""
    module = get_array_module(array)
    names = _NAMESPACES.get(module)
    if names is None:
        extras = {"erf": erf, "erfc": erfc, "added_at": added_at, "products_of_others": products_of_others}
        for name, function in (("permute_dims", permute_dims), ("astype", astype)):
            if not hasattr(module, name):
                extras[name] = function
        names = _NAMESPACES[module] = Names(module, **extras)
    return names

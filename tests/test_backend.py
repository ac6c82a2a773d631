"""The backend boundary. A static rule, checked on the source with `ast`: outside backend.py no engine
file creates arrays with NumPy or mentions CuPy, so every op takes its array module from its inputs
(or from backend.module_for(device)) and one code path serves both devices. Then the backend's own
helpers: check_device, to_numpy, to_device, scatter_add.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import minigrad
from minigrad.array import backend

ENGINE = Path(minigrad.__file__).parent

# Files that may use NumPy freely, and why. None of them is an op: ops get arrays from their inputs.
NUMPY_ALLOWED_IN = {
    "array/backend.py": "the one module that knows NumPy and CuPy apart",
    "array/machine.py": "measures NumPy's own float32 sgemm on the CPU (the peak the benchmarks compare a step with) "
                        "and names NumPy's version in the machine's key; no tensor's array is made there",
    "check/finite_differences.py": "compares gradients on the CPU in float64, moving arrays with backend.to_device / "
                             "to_numpy",
    "speed/kernels.py": "the compiled kernels (mg.compiled) run only on C-contiguous float32 NumPy arrays in the CPU's "
                  "memory (kernels.takes); a Function picks one only for such an array and allocates its results so",
    "check/gradcheck_cases.py": "draws float64 test inputs on the CPU; Case.inputs places them on the device",
    "pytorch/serialization.py": "reads and writes .npz files on the CPU; arrays leave through backend.to_numpy and "
                        "load() returns NumPy arrays for the caller to place on a device",
}
# Files that may name CuPy, and why: only the backend makes arrays with it.
CUPY_ALLOWED_IN = {
    "array/backend.py": "the one module that knows NumPy and CuPy apart",
    "array/machine.py": "measures NumPy's own float32 sgemm on the CPU (the peak the benchmarks compare a step with) "
                        "and names NumPy's version in the machine's key; no tensor's array is made there",
    "pytorch/distributed.py": "sends GPU arrays through CuPy's NCCL and gives each rank its GPU; it makes no arrays",
}

# What other engine files may take from NumPy: dtypes and type names, which never allocate an array.
NUMPY_NAMES = {"dtype", "float16", "float32", "float64", "int32", "int64", "integer", "floating", "bool_",
               "ndarray", "generic", "number"}

# Named exceptions, (file, enclosing function, numpy attribute) -> why it creates no device array.
EXCEPTIONS = {
    ("optim/__init__.py", "_norm", "errstate"): "silences NumPy's overflow warning on the powers of a gradient's norm "
                                       "(clip_grad_norm_ then computes it again, scaled); makes no array",
    ("tensor.py", "__repr__", "array2string"): "formats the NumPy copy that .numpy() returned",
    ("autograd/picture.py", "_values", "array2string"): "formats the NumPy copy that backend.to_numpy returned, for "
                                                        "a label",
    ("array/dtypes.py", "own_dtype", "asarray"): "asks which dtype NumPy gives Python data (a list, a float); "
                                            "the array is dropped and _as_array builds the real one with the "
                                            "device's array module",
    ("pytorch/distributions.py", "_limits", "finfo"): "reads a float dtype's epsilon and lowest value; makes no array",
    ("array/dtypes.py", "own_dtype", "errstate"): "silences NumPy's float-to-int warning while own_dtype asks, with a "
                                             "dropped int64 conversion, whether Python data holds an int beyond int64",
}

HOW_TO_FIX = ("take the array module from an input (backend.get_array_module(x)) or from the device "
              "(backend.module_for(device)); use math for Python scalars; or add a named entry to EXCEPTIONS "
              "in tests/test_backend.py saying why no device array is made")


def violations(source: str, filename: str) -> tuple[list[str], set[tuple[str, str, str]]]:
    """Backend-boundary breaches in one file's source, and the EXCEPTIONS entries it used."""
    tree = ast.parse(source, filename)
    numpy_ok, cupy_ok = filename in NUMPY_ALLOWED_IN, filename in CUPY_ALLOWED_IN
    owner = _enclosing_functions(tree)
    found: list[str] = []
    used: set[tuple[str, str, str]] = set()

    def report(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{node.lineno}: {what}")

    numpy_aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in ("cupy", "cupyx") and not cupy_ok:
                    report(node, f"import {alias.name}")
                if root == "numpy" and not numpy_ok:
                    if alias.name != "numpy":
                        report(node, f"import {alias.name}")
                    numpy_aliases.add(alias.asname or "numpy")
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in ("cupy", "cupyx") and not cupy_ok:
                report(node, f"from {node.module} import ...")
            if root == "numpy" and not numpy_ok:
                for alias in node.names:
                    if node.module != "numpy" or alias.name not in NUMPY_NAMES:
                        report(node, f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Name) and node.id in ("cupy", "cupyx") and not cupy_ok:
            report(node, f"name {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ("np", "_np", "cupy", "cupyx") and not cupy_ok:
            report(node, f"reaches an array library through .{node.attr}")  # e.g. backend.np.zeros
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            target = str(node.args[0].value).split(".")[0]
            allowed = numpy_ok if target == "numpy" else cupy_ok if target in ("cupy", "cupyx") else True
            if name in ("__import__", "import_module") and not allowed:
                report(node, f"{name}({node.args[0].value!r})")

    for node in ast.walk(tree):  # every use of a NumPy alias: a dtype name, a named exception, or a breach
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in numpy_aliases:
            key = (filename, owner[node], node.attr)
            if node.attr in NUMPY_NAMES:
                continue
            if key in EXCEPTIONS:
                used.add(key)
            else:
                report(node, f"{node.value.id}.{node.attr} in {owner[node]}")
    return found, used


def _enclosing_functions(tree: ast.AST) -> dict[ast.AST, str]:
    """node -> name of the innermost function around it ("<module>" at top level)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            owner[child] = name
            visit(child, child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name)

    visit(tree, "<module>")
    return owner


def engine_files() -> list[Path]:
    return sorted(ENGINE.rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ENGINE).as_posix()


# ---- the rule, on the engine as it is ----

def test_engine_files_are_found() -> None:
    names = {rel(p) for p in engine_files()}
    assert {"tensor.py", "ops/elementwise.py", "nn/functional.py", "array/backend.py",
            "check/finite_differences.py"} <= names


@pytest.mark.parametrize("path", [p for p in engine_files() if rel(p) not in CUPY_ALLOWED_IN], ids=rel)
def test_no_array_created_behind_the_backends_back(path: Path) -> None:
    found, _ = violations(path.read_text(), rel(path))
    assert not found, "\n".join(found) + "\n" + HOW_TO_FIX


def test_every_exception_is_still_needed() -> None:
    used = set()
    for path in engine_files():
        used |= violations(path.read_text(), rel(path))[1]
    assert set(EXCEPTIONS) - used == set(), "remove the EXCEPTIONS that no engine file needs any more"


PRIMITIVE_FILES = ("ops/elementwise.py", "ops/reductions.py", "ops/shapes.py", "ops/matmul.py", "ops/activations.py",
                   "ops/normalization.py", "ops/losses.py", "ops/sdpa.py")


def test_primitives_do_not_import_numpy() -> None:
    """The primitives (and the CuPy-agnostic code path) need no NumPy name at all."""
    for name in PRIMITIVE_FILES:
        tree = ast.parse((ENGINE / name).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in imported if m.split(".")[0] in ("numpy", "cupy", "cupyx")}, name


# ---- the rule catches what it should (so a green run means something) ----

BREACHES = {
    "np.zeros in a Function": "import numpy as np\nclass Add:\n    def backward(self, dout):\n"
                              "        return np.zeros(dout.shape)\n",
    "np.random in an op": "import numpy as _np\ndef dropout(x):\n    return _np.random.default_rng().random(3)\n",
    "np.asarray outside its exception": "import numpy as np\ndef _as_array(d):\n    return np.asarray(d)\n",
    "numpy ufunc": "import numpy\ndef exp(x):\n    return numpy.exp(x)\n",
    "from numpy import zeros": "from numpy import zeros\n",
    "import numpy.random": "import numpy.random\n",
    "import cupy": "import cupy\n",
    "from cupyx import scatter_add": "from cupyx import scatter_add\n",
    "backend.np": "from minigrad import backend\ndef f(x):\n    return backend.np.ones(3)\n",
    "backend.cupy": "from minigrad import backend\ndef f(x):\n    return backend.cupy.ones(3)\n",
    "__import__": "def f():\n    return __import__('numpy').ones(3)\n",
    "nested function": "import numpy as np\ndef own_dtype(d):\n    def inner():\n"
                       "        return np.asarray(d)\n    return inner\n",
}


@pytest.mark.parametrize("source", BREACHES.values(), ids=BREACHES.keys())
def test_rule_catches(source: str) -> None:
    found, _ = violations(source, "array/dtypes.py")
    assert found


ALLOWED = {
    "dtype names": "import numpy as np\nDT = np.dtype(np.float32)\ndef f(x: np.ndarray, d=np.int64):\n"
                   "    return isinstance(d, np.integer)\n",
    "named exception": "import numpy as np\ndef own_dtype(d):\n    return np.asarray(d).dtype\n",
    "array module of an input": "from minigrad import backend\ndef f(x):\n"
                                "    return backend.get_array_module(x).zeros(3)\n",
}


@pytest.mark.parametrize("source", ALLOWED.values(), ids=ALLOWED.keys())
def test_rule_allows(source: str) -> None:
    found, _ = violations(source, "array/dtypes.py")
    assert found == []


def test_backend_itself_may_use_both() -> None:
    found, _ = violations("import numpy as np\nimport cupy\nx = np.zeros(3)\ny = cupy.ones(3)\n", "array/backend.py")
    assert found == []


# ---- backend helpers ----

def test_check_device() -> None:
    assert backend.check_device("cpu") == "cpu"
    with pytest.raises(ValueError, match=r"unknown device 'gpu'.*'cpu', 'cuda'"):
        backend.check_device("gpu")


@pytest.mark.skipif(backend.cuda_available(), reason="tests the error shown where no GPU is found")
def test_check_device_cuda_without_gpu() -> None:
    why = "CuPy is not installed" if backend.cupy is None else "CuPy finds no GPU"
    with pytest.raises(RuntimeError, match=f"device 'cuda' requested but {why}.*minigrad\\[cuda12\\]"):
        backend.check_device("cuda")
    with pytest.raises(RuntimeError, match="CuPy"):
        backend.module_for("cuda")


@pytest.mark.cuda
def test_check_device_cuda_with_gpu() -> None:
    assert backend.check_device("cuda") == "cuda"


def test_array_module_and_device(device) -> None:
    xp = backend.module_for(device)
    a = xp.arange(6.0).reshape(2, 3)
    assert backend.get_array_module(a) is xp
    assert backend.device_of(a) == device
    assert backend.get_array_module(np.zeros(2)) is np


def test_to_numpy_and_to_device(device) -> None:
    values = np.arange(6.0).reshape(2, 3)
    on_device = backend.to_device(values, device)
    assert backend.device_of(on_device) == device
    assert backend.to_device(on_device, device) is on_device  # no copy when already there
    back = backend.to_numpy(on_device)
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, values)
    assert backend.to_numpy(values) is values  # a NumPy array is returned as is


def test_scatter_add_accumulates_repeated_indices(device) -> None:
    xp = backend.module_for(device)
    rows = np.array([0, 2, 0, 0, 4])
    values = np.arange(15.0).reshape(5, 3)
    expected = np.zeros((5, 3))
    for i, r in enumerate(rows):
        expected[r] += values[i]
    target = xp.zeros((5, 3))
    backend.scatter_add(target, backend.to_device(rows, device), backend.to_device(values, device))
    np.testing.assert_array_equal(backend.to_numpy(target), expected)
    naive = np.zeros((5, 3))
    naive[rows] += values  # plain fancy-index += keeps one of the repeated rows: the case scatter_add exists for
    assert not np.array_equal(naive, expected)


def test_scatter_add_with_index_pairs(device) -> None:
    xp = backend.module_for(device)
    rows, cols = np.array([1, 1, 0, 1]), np.array([2, 2, 0, 2])
    target = xp.ones((2, 3))
    backend.scatter_add(target, (backend.to_device(rows, device), backend.to_device(cols, device)),
                        backend.to_device(np.array([1.0, 2.0, 3.0, 4.0]), device))
    np.testing.assert_array_equal(backend.to_numpy(target), [[4.0, 1.0, 1.0], [1.0, 1.0, 8.0]])

"""The layers of minigrad/ and models/, read from the imports of every module (at its top and inside its functions):
no module imports from a layer above its own, no import goes through a path of 0.4 (minigrad.elementwise, ...), and
there is no import circle. The order, lowest first, is declared once, in LAYERS; docs/layout.md draws it.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# lowest first; a module may import from its own layer and those before it, never from one after it. A module's
# layer is that of the longest prefix of its name listed here (minigrad.ops.shapes: minigrad.ops).
LAYERS = [
    ("array", ["minigrad.array"]),  # NumPy or CuPy, dtypes, helpers on raw arrays: nothing of minigrad above them
    ("core", ["minigrad.core"]),  # Tensor, Function, the sweep: on the array layer alone
    ("autograd", ["minigrad.autograd"]),  # PyTorch's contract around the core: versions, hooks, grad(), switches
    ("ops", ["minigrad.ops"]),  # the teaching primitives, on the core's Tensor: never tensor.py
    ("tensor", ["minigrad.tensor", "minigrad.legacy"]),  # mg.Tensor assembled from the core, its layers and the ops
    ("pytorch", ["minigrad.pytorch"]),  # PyTorch's namespaces beside the engine: amp, cuda, utils.data, ...
    ("nn, optim, speed", ["minigrad.nn", "minigrad.optim", "minigrad.speed"]),  # layers, optimizers, fast paths
    ("check", ["minigrad.check"]),  # gradcheck and its table of every primitive: above all it checks
    ("minigrad", ["minigrad"]),  # minigrad/__init__.py: the mg.X names
    ("model parts", ["models.renamed", "models.attention", "models.huggingface", "models.torch_reference"]),
    ("models", ["models.gpt", "models.llama"]),  # each model builds itself, from_pretrained included
    ("pretrained", ["models.pretrained", "models"]),  # what knows both models: the folder's loader, the package
]
PACKAGES = ("minigrad", "models")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    found = [(len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
             if module == prefix or module.startswith(prefix + ".")]
    assert found, f"{module} is in no layer: add it to LAYERS"
    return max(found)[1]


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(module: str, source: str) -> list[tuple[int, str]]:
    """(line, module) for every import of minigrad or models in `source`, at any depth: `from a.b import c` is a.b.c
    where c is a module, else a.b."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{module}:{node.lineno}: a relative import (the project writes them whole)"
            base = node.module
            found += [(node.lineno, f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base) for a in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def project_imports() -> dict[str, list[tuple[int, str]]]:
    """Every module of minigrad/ and models/ -> its imports of either."""
    paths = [*(ROOT / "minigrad").rglob("*.py"), *(ROOT / "models").glob("*.py")]
    return {module_name(p): imports_of(module_name(p), p.read_text(encoding="utf-8")) for p in sorted(paths)}


def upward_imports(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """Each import of a module that does not exist (an old path) or lies in a layer above the importer's."""
    wrong = []
    for module, imports in graph.items():
        for line, target in imports:
            if not is_module(target):
                wrong.append(f"{module}:{line} imports {target}, which is no module (a path of 0.4?)")
            elif layer_of(target) > layer_of(module):
                wrong.append(f"{module}:{line} imports {target}: layer {LAYERS[layer_of(module)][0]!r} may not "
                             f"import from {LAYERS[layer_of(target)][0]!r}, above it")
    return wrong


def circle(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """One import circle (module, ..., the same module), or [] where there is none: a depth-first search."""
    edges = {m: sorted({t for _, t in imports if t != m and t in graph}) for m, imports in graph.items()}
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(m: str, path: list[str]) -> list[str]:
        state[m] = "open"
        for t in edges[m]:
            if state.get(t) == "open":
                return [*path[path.index(t):], t]
            if t not in state and (found := visit(t, [*path, t])):
                return found
        state[m] = "done"
        return []

    for m in edges:
        if m not in state and (found := visit(m, [m])):
            return found
    return []


def test_every_import_goes_down_the_layers():
    wrong = upward_imports(project_imports())
    assert not wrong, "\n".join(wrong)


def test_there_is_no_import_circle_in_minigrad_or_models():
    found = circle(project_imports())
    assert not found, "import circle: " + " -> ".join(found)


def test_the_core_imports_the_array_layer_alone():
    imports = project_imports()["minigrad.core"]
    assert imports and all(target.startswith("minigrad.array.") for _, target in imports), imports


def test_functional_is_a_face_of_the_ops():
    """minigrad/nn/functional.py re-exports the ops' functions under torch.nn.functional's names, nothing more."""
    imports = project_imports()["minigrad.nn.functional"]
    assert imports and all(target.startswith("minigrad.ops.") for _, target in imports), imports
    tree = ast.parse((ROOT / "minigrad" / "nn" / "functional.py").read_text(encoding="utf-8"))
    assert not [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


@pytest.mark.parametrize("where, source, caught", [
    ("minigrad.ops.elementwise", "from minigrad.tensor import Tensor\n", "may not import from 'tensor'"),
    ("minigrad.core", "def f():\n    from minigrad.autograd import grad\n", "may not import from 'autograd'"),
    ("minigrad.array.backend", "import minigrad.nn\n", "may not import from 'nn, optim, speed'"),
    ("models.gpt", "from models import pretrained\n", "may not import from 'pretrained'"),
    ("minigrad.nn.conv", "from minigrad.shapes import cat\n", "which is no module"),
])
def test_the_check_catches_an_upward_import(where, source, caught):
    """The checks above fail where someone adds an upward import, in a function too, or an import of an old path."""
    graph = project_imports()
    graph[where] = graph[where] + imports_of(where, source)
    assert any(caught in line for line in upward_imports(graph))


def test_the_check_catches_a_circle():
    graph = project_imports()
    graph["minigrad.array.dtypes"] = graph["minigrad.array.dtypes"] + [(1, "minigrad.array.arrays")]
    assert circle(graph)[0] == circle(graph)[-1]


# ---- the import paths of 0.4: the moved modules warn until 0.5, PyTorch's paths stay ----

def forget(monkeypatch: pytest.MonkeyPatch, old: str) -> None:
    """As if `old` had never been imported in this process (a warning is given on the first import only)."""
    import minigrad as mg

    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        monkeypatch.delitem(sys.modules, name)
    if old.split(".")[1] in vars(mg):  # (hasattr would import it)
        monkeypatch.delattr(mg, old.split(".")[1])


@pytest.mark.parametrize("old", sorted(__import__("minigrad").MOVED))
def test_a_moved_module_imports_by_its_old_path_with_a_warning_naming_the_new(monkeypatch, old):
    import minigrad as mg

    if old in ("minigrad.kernels", "minigrad.compiled_functions"):
        pytest.importorskip("numba", reason="Numba is not installed: the compiled kernels' module needs it")
    forget(monkeypatch, old)
    with pytest.warns(DeprecationWarning, match=rf"^{old} moved to {mg.MOVED[old]}; the old path goes in 0.5$") as w:
        module = importlib.import_module(old)
    assert module is importlib.import_module(mg.MOVED[old])  # the module itself, not a second copy
    assert module.__name__ == module.__spec__.name == mg.MOVED[old]
    assert w[0].filename == __file__ or w[0].filename.endswith("importlib/__init__.py")


def test_the_warning_names_the_line_of_the_import_and_each_form_works(monkeypatch):
    import minigrad as mg

    for form, old in (("import minigrad.elementwise", "minigrad.elementwise"),
                      ("from minigrad.sdpa import scaled_dot_product_attention", "minigrad.sdpa"),
                      ("from minigrad import backend", "minigrad.backend"), ("mg.shapes.cat", "minigrad.shapes")):
        forget(monkeypatch, old)
        with pytest.warns(DeprecationWarning, match=f"{old} moved to") as w:
            exec(compile(form, __file__, "eval" if form.startswith("mg.") else "exec"), {"mg": mg})
        assert [r.filename for r in w] == [__file__], form


@pytest.mark.parametrize("old", sorted(__import__("minigrad").SECOND_NAMES))
def test_pytorchs_paths_and_the_mg_modules_stay_without_a_warning(monkeypatch, old):
    import minigrad as mg

    forget(monkeypatch, old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(old)
    assert module is importlib.import_module(mg.SECOND_NAMES[old])
    assert getattr(mg, old.split(".")[1]) is module


def test_pytorchs_submodule_paths_name_the_same_modules():
    import minigrad.utils.data.dataloader as dataloader
    import minigrad.utils.tensorboard as tensorboard
    from minigrad.utils.data.dataset import Dataset

    from minigrad.pytorch.utils import data

    assert dataloader is data and Dataset is data.Dataset
    assert tensorboard is importlib.import_module("minigrad.pytorch.utils.tensorboard")


def test_the_gradcheck_command_runs_by_its_old_name_with_the_warning():
    command = [sys.executable, "-W", "always::DeprecationWarning", "-m", "minigrad.gradcheck_cases", "--help"]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0 and "usage" in run.stdout
    assert "minigrad.gradcheck_cases moved to minigrad.check.gradcheck_cases" in run.stderr

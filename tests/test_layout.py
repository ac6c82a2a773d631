"""The layout's promises, read from the code itself: imports run one way down except for the Tensor <-> op modules
tie, no module takes another's private name, and one training iteration of the default run stays a short walk
through few files, none of them there only for speed.
"""

from __future__ import annotations

import ast
import os
import site
import sys
import tempfile
from pathlib import Path

import train

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "minigrad"
OP_MODULES = {"elementwise", "reductions", "shapes", "matmul", "activations"}  # what Tensor's operators call
PROJECT = [*ENGINE.glob("*.py"), *(ROOT / "models").glob("*.py"), *ROOT.glob("*.py"),
           *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "examples").glob("*.py")]


def engine_imports() -> dict[str, set[str]]:
    """minigrad module -> the minigrad modules it imports, at any depth of its code."""
    graph = {}
    for path in ENGINE.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("minigrad"):
                found |= {node.module.split(".")[1]} if "." in node.module else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("minigrad.")}
        graph[path.stem] = found & {p.stem for p in ENGINE.glob("*.py")} - {path.stem, "__init__"}
    return graph


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for m in graph[todo.pop()] - seen:
            seen.add(m)
            todo.append(m)
    return seen


def test_the_only_import_cycle_is_the_tensor_op_modules_tie():
    graph = engine_imports()
    in_cycles = {m for m in graph if m in reaches(graph, m)}
    assert in_cycles == {"tensor"} | OP_MODULES
    assert graph["tensor"] & in_cycles == OP_MODULES
    for m in OP_MODULES:  # an op module reaches back up only to tensor.py, never through another op module
        assert not graph[m] & OP_MODULES, f"{m} imports {graph[m] & OP_MODULES}"
    assert not graph["functional"] - {"activations", "elementwise", "losses", "matmul", "normalization", "sdpa",
                                      "shapes"}, "functional.py is a face: it re-exports, nothing more"
    assert "functional" not in set().union(*(graph[m] for m in graph if m not in ("__init__", "nn", "gradcheck_cases")))


def test_no_module_imports_another_module_s_private_name():
    project_modules = {p.stem for p in PROJECT} | {"minigrad", "models"}
    offenders = []
    for path in PROJECT:
        tree = ast.parse(path.read_text())
        imported_modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1] in project_modules:
                offenders += [f"{path.name}: from {node.module} import {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
                imported_modules |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                imported_modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.value.id in imported_modules & project_modules):
                offenders.append(f"{path.name}: {node.value.id}.{node.attr}")
    assert not offenders


def test_no_class_is_patched_in_the_engine_or_the_benchmark():
    for path in [*ENGINE.glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
                target = ast.unparse(node.args[0])
                # instances only: a module's child (nn.ModuleList) and this thread's switches (tensor.py)
                assert target in ("self", "modes"), f"{path.name}: setattr({target}, ...)"


# installed packages (NumPy, ...) are not the project's, even in a virtual environment inside the checkout (.venv)
INSTALLED = tuple({os.path.join(p, "") for p in (sys.prefix, sys.base_prefix, *site.getsitepackages())})


def trace_second_iteration(argv: list[str]) -> set[tuple[str, str]]:
    """(file, function) of every project function called in the second iteration of a 3-step run: from the
    second call of get_batch to the third."""
    calls: dict[int, set[tuple[str, str]]] = {}
    iteration = [0]

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code is train.get_batch.__code__:
            iteration[0] += 1
        if code.co_filename.startswith(str(ROOT) + os.sep) and not code.co_filename.startswith(INSTALLED):
            calls.setdefault(iteration[0], set()).add((os.path.relpath(code.co_filename, ROOT), code.co_qualname))

    with tempfile.TemporaryDirectory() as out:
        sys.setprofile(profile)
        try:
            assert train.main(["--steps", "3", "--out", out, "--samples", "0", "--no-explain", *argv]) == 0
        finally:
            sys.setprofile(None)
    return calls[2]


def test_a_training_iteration_is_a_short_walk_through_few_files(capsys):
    """Batch sampling included; a function counts once however often it is called."""
    called = trace_second_iteration([])
    files = {f for f, _ in called}
    assert len(called) <= 115, sorted(called)
    assert len(files) <= 16, sorted(files)
    assert "minigrad/runtime.py" not in files and not any(q.startswith("ScaledDotProduct") for _, q in called)
    assert {"train.py", "models/attention.py", "minigrad/tensor.py"} <= files


def test_the_fast_paths_run_only_when_asked_for(capsys):
    called = {q for _, q in trace_second_iteration(["--fused"])}
    assert {"ScaledDotProductAttentionFunction.forward", "ScaledDotProductAttentionFunction.backward",
            "Adam.fused_step"} <= called
    assert "SoftmaxFunction.forward" not in called and "Adam.update" not in called

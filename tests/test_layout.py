"""The layout's promises, read from the code itself: no module takes another's private name or patches a class, and a
training step runs the teaching Functions unless a speed switch asks for their compiled implementations (the
layers and their one-way imports: tests/test_layering.py).
"""

from __future__ import annotations

import ast
import os
import site
import sys
import tempfile
from pathlib import Path

import pytest

import train

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "minigrad"
PROJECT = [*ENGINE.rglob("*.py"), *(ROOT / "models").glob("*.py"), *(ROOT / "gptlab").glob("*.py"), *ROOT.glob("*.py"),
           *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "examples").glob("*.py")]


def test_no_module_imports_another_module_s_private_name():
    project_modules = {p.stem for p in PROJECT} | {"minigrad", "models", "gptlab"}
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


def test_the_root_holds_what_a_user_runs():
    """train.py and sample.py, the documented commands; what runs them is the package gptlab/."""
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["sample.py", "train.py"]
    assert (ROOT / "gptlab" / "__init__.py").exists()


def test_no_class_is_patched_in_the_engine_or_the_benchmark():
    for path in [*ENGINE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
                target = ast.unparse(node.args[0])
                # instances only: a module's child (nn.ModuleList; a slice of a Sequential, `part`) and this thread's
                # switches (switches.py)
                assert target in ("self", "self._state", "part"), f"{path.name}: setattr({target}, ...)"


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


# the teaching Functions of the default run's step (GPT, tanh GELU, attention written out), each forward and backward
TEACHING = {f"{cls}.{method}" for cls in ("EmbeddingFunction", "LayerNormFunction", "LinearFunction", "MatMul",
                                          "SoftmaxFunction", "GeluFunction", "CrossEntropyFunction", "Add", "Mul",
                                          "Where", "Reshape", "Permute")
            for method in ("forward", "backward")}
SPEED_FILES = {"minigrad/speed/kernels.py", "minigrad/speed/compiled_functions.py", "minigrad/speed/twins.py"}


def test_the_default_step_enters_every_teaching_function_and_no_kernel(capsys):
    """A breakpoint in a teaching Function is hit whenever no speed option was asked for."""
    called = trace_second_iteration([])
    assert TEACHING <= {q for _, q in called}, sorted(TEACHING - {q for _, q in called})
    assert not {f for f, _ in called} & SPEED_FILES
    assert {("minigrad/ops/matmul.py", "product"), ("minigrad/core.py", "Sweep.visit")} <= called


def test_the_reading_routes_name_only_what_a_default_run_or_the_walkthrough_runs(capsys):
    """Every function and class the README's reading routes name (docs/layout.md's block reads them) is entered by a
    default `python train.py` (a short one: its steps, evaluation, sample and explain) or by the walkthrough's code,
    so that a breakpoint there is hit; and the routes stay under 1,000 lines, as the README says."""
    from test_docs import blocks

    counting = next(b for b in blocks(ROOT / "docs" / "layout.md") if "named = []" in b.code)
    route = {"__name__": "layout"}
    exec(compile(counting.code, "docs/layout.md", "exec"), route)
    assert route["named"] and sum(map(len, route["both"].values())) < 1000
    entered: set[tuple[str, str]] = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(str(ROOT) + os.sep):
            entered.add((os.path.relpath(frame.f_code.co_filename, ROOT), frame.f_code.co_qualname))

    walkthrough = {"__name__": "walkthrough"}
    with tempfile.TemporaryDirectory() as out:
        sys.setprofile(profile)
        try:
            assert train.main(["--steps", "3", "--out", out]) == 0
            for block in blocks(ROOT / "docs" / "self-attention.md"):
                if block.info == "python" and block.quote is None:
                    exec(compile(block.code, "docs/self-attention.md", "exec"), walkthrough)
        finally:
            sys.setprofile(None)
    never = [f"{file}: {name}" for file, name in route["named"]
             if not any(f == file and (q == name or q.startswith(name + ".")) for f, q in entered)]
    assert not never, f"the reading routes name what neither a default run nor the walkthrough enters: {never}"


def test_the_compiled_step_runs_the_compiled_implementations_instead(capsys):
    """The reverse under --compiled (which also asks for attention as one node): the Functions with a compiled
    implementation run it, on the kernels, and their teaching code is not entered; NumPy's products are not called."""
    pytest.importorskip("numba", reason="Numba is not installed: pip install -e '.[compiled]' for the compiled step")
    called = trace_second_iteration(["--compiled"])
    names = {q for _, q in called}
    assert {"CompiledLayerNorm.forward", "CompiledLayerNorm.backward", "CompiledSlope.forward",
            "CompiledSlope.backward", "CompiledAttention.weights", "CompiledAttention.softmax_backward",
            "CompiledEmbedding.backward"} <= names
    assert {("minigrad/speed/kernels.py", k) for k in ("layer_norm_forward", "layer_norm_backward", "gelu_tanh",
                                                  "multiply", "attention_weights", "softmax_backward", "add_rows",
                                                  "adam")} <= called
    replaced = {"LayerNormFunction.forward", "LayerNormFunction.backward", "GeluFunction.forward",
                "GeluFunction.backward", "SlopeFunction.forward",
                "SlopeFunction.backward", "ScaledDotProductAttentionFunction.weights", "FastAttention.weights",
                "ScaledDotProductAttentionFunction.backward", "FastAttention.softmax_backward",
                "SoftmaxFunction.backward", "EmbeddingFunction.backward"}
    assert not names & replaced, sorted(names & replaced)
    assert ("minigrad/ops/matmul.py", "product") not in called  # every product on the kernels' threads


def test_the_fused_path_runs_only_when_asked_for(capsys):
    called = {q for _, q in trace_second_iteration(["--fused"])}
    assert {"ScaledDotProductAttentionFunction.forward", "FastAttention.weights", "FastAttention.backward",
            "LayerNormFunction.forward", "LayerNormFunction.backward", "SlopeFunction.forward",
            "Adam.fused_step"} <= called
    assert "SoftmaxFunction.forward" not in called and "Adam.update" not in called
    assert "Adam.update" in {q for _, q in trace_second_iteration([])}


# ---- one sweep, in the core: the core's classes are extended at the points it declares, nothing else ----

# The methods a subclass (or a layer of mg.Tensor) may define again, as core.py's docstring lists them
DECLARED = {"Function": {"forward", "backward", "arrays_of", "made", "apply", "__init_subclass__"}, "Tensor": set(),
            "Sweep": set()}


def project_modules() -> list[str]:
    """minigrad and every module of it and of its subpackages, imported (those needing a missing extra left out)."""
    import importlib
    import pkgutil

    import minigrad

    imported = ["minigrad"]
    for info in pkgutil.walk_packages(minigrad.__path__, "minigrad."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as err:  # an optional extra (numba for the kernels) that this venv lacks
            if err.name.startswith("minigrad"):
                raise
            continue
        imported.append(info.name)
    return imported


def subclasses(cls: type) -> set[type]:
    found, todo = set(), [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_no_method_of_the_core_is_defined_again_outside_its_declared_points():
    """Walk every subclass of core.Tensor, core.Function and core.Sweep in minigrad, through its bases (mg.Tensor's
    layers included): a method of the core's class defined again is one of the points the core declares."""
    from minigrad import core

    assert "minigrad.tensor" in project_modules()
    overridden, walked = [], 0
    for base in (core.Tensor, core.Function, core.Sweep):
        methods = {name for name, value in vars(base).items()
                   if callable(value) or isinstance(value, (property, classmethod, staticmethod))}
        for sub in subclasses(base):
            if not sub.__module__.startswith("minigrad"):
                continue
            walked += 1
            for layer in sub.__mro__[:sub.__mro__.index(base)]:  # the subclass and the layers it takes before base
                overridden += [f"{layer.__module__}.{layer.__qualname__}.{name} (of core.{base.__name__})"
                               for name in methods & vars(layer).keys() - DECLARED[base.__name__]]
    assert walked > 60  # every op's Function, mg.Tensor, nn.Parameter, ...
    assert not overridden, sorted(set(overridden))
    assert all(f"`{name}`" in core.__doc__ for name in set().union(*DECLARED.values()))  # listed in its docstring


def test_every_point_of_the_contract_is_provided_by_the_module_that_implements_it():
    from minigrad import core

    project_modules()
    provider = {name: getattr(core.contract, name).__module__ for name in core.Contract.__slots__}
    assert provider == {"run_hooks": "minigrad.autograd.hooks", "capture": "minigrad.autograd",
                        "check_versions": "minigrad.autograd.versions", "count_write": "minigrad.autograd.versions",
                        "saved_version": "minigrad.autograd.versions",
                        "node_of": "minigrad.autograd.versions", "share_version": "minigrad.autograd.versions",
                        "chosen_inputs": "minigrad.autograd"}
    for name in provider:  # each called on a line of the core
        assert f"contract.{name}(" in Path(core.__file__).read_text()


def test_the_sweep_that_runs_a_gpt_s_backward_is_the_core_s():
    """loss.backward() of a small GPT, traced: every node's backward is called from core.py, and every frame between
    loss.backward() and it (the loop and the per-edge dispatch) is core.py's, Sweep.run and Sweep.visit among them;
    the Sweep is core.Sweep itself."""
    import minigrad as mg
    from minigrad import core
    from models.gpt import GPT, GPTConfig

    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, n_embd=8))
    idx = mg.tensor([[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]])
    _, loss = model(idx, idx)
    chains, sweeps, here = set(), set(), sys._getframe()

    def profile(frame, event, arg):
        if event != "call":
            return
        me = frame.f_locals.get("self")
        if frame.f_code.co_name == "backward" and isinstance(me, core.Function):
            chain, f = [], frame.f_back
            while f is not None and f is not here:
                chain.append((os.path.relpath(f.f_code.co_filename, ROOT), f.f_code.co_qualname))
                f = f.f_back
            chains.add(tuple(chain))
        elif isinstance(me, core.Sweep):
            sweeps.add(type(me))

    sys.setprofile(profile)
    try:
        loss.backward()
    finally:
        sys.setprofile(None)
    assert len(chains) >= 1 and all(p.grad is not None for p in model.parameters())
    files = {file for chain in chains for file, _ in chain}
    assert files == {"minigrad/core.py"}, files
    names = {name for chain in chains for _, name in chain}
    assert {"Tensor.backward", "Sweep.run", "Sweep.visit", "Sweep.input_grads"} <= names
    assert sweeps == {core.Sweep}

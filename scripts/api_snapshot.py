"""The public API as text, one name per line with its signature: mg, mg.Tensor, F, nn, optim, mg.lr_scheduler,
mg.init, mg.autograd, mg.distributions, the import paths the docs teach, the models' constructors and train.py's flags.
tests/api_snapshot.txt holds the reviewed copy; tests/test_api.py compares the two, so that every change of the
API is seen, and lands with its CHANGELOG line:

    python scripts/api_snapshot.py > tests/api_snapshot.txt
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import minigrad as mg  # noqa: E402
from minigrad import autograd, nn, optim  # noqa: E402
from minigrad.nn import functional, init  # noqa: E402
from minigrad.optim import lr_scheduler  # noqa: E402
from models import gpt, llama  # noqa: E402

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPTIONAL = {"numba", "llvmlite", "torch", "graphviz", "matplotlib", "mpi4py", "safetensors", "tokenizers"}  # extras
IMPORT = re.compile(r"^\s*(from (minigrad[\w.]*) import ([\w, ]+)|import (minigrad[\w.]*))", re.M)


def signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def public(names: Any) -> list[str]:
    return sorted(n for n in names if not n.startswith("_"))


def describe(prefix: str, obj: Any) -> Iterator[str]:
    """One line for obj; for a class, one more per public attribute it defines or inherits from the project."""
    if inspect.isclass(obj):
        yield f"{prefix} class{signature(obj)}"
        for name in public(dir(obj)):
            attr = inspect.getattr_static(obj, name)
            owner = next(c for c in obj.__mro__ if name in vars(c))
            if not owner.__module__.startswith(("minigrad", "models")):
                continue  # object's, or the standard library's
            if isinstance(attr, property):
                yield f"{prefix}.{name} property{' (settable)' if attr.fset else ''}"
            elif isinstance(attr, (staticmethod, classmethod)) or inspect.isfunction(attr):
                yield f"{prefix}.{name}{signature(getattr(obj, name))}"
            elif not inspect.isclass(attr):
                yield f"{prefix}.{name} = {type(attr).__name__}"
    elif callable(obj):
        yield f"{prefix}{signature(obj)}"
    elif isinstance(obj, ModuleType):
        yield f"{prefix} module"
    else:
        yield f"{prefix} = {type(obj).__name__}"


def defined_in(obj: Any, module: ModuleType) -> bool:
    """Whether obj is defined in the module or in one of its submodules (nn.Conv2d, in minigrad/nn/conv.py)."""
    where = getattr(obj, "__module__", None) or ""
    return where == module.__name__ or where.startswith(module.__name__ + ".")


def module_names(prefix: str, module: ModuleType) -> Iterator[str]:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if defined_in(vars(module)[n], module)]
    for name in public(names):
        obj = getattr(module, name)
        yield from ([f"{prefix}.{name} module"] if isinstance(obj, ModuleType)
                    else describe(f"{prefix}.{name}", obj))


def taught_imports() -> Iterator[str]:
    """Every `from minigrad... import ...` and `import minigrad...` line of the docs, each name checked to exist."""
    seen = set()
    for path in DOCS:
        for m in IMPORT.finditer(path.read_text()):
            module = m.group(2) or m.group(4)
            names = [n.strip() for n in (m.group(3) or "").split(",") if n.strip()]
            for line in ([f"from {module} import {n}" for n in names] if names else [f"import {module}"]):
                if line not in seen:
                    seen.add(line)
                    try:
                        exec(line, {})  # an import the docs teach that no longer works fails here
                    except ModuleNotFoundError as e:  # where an optional extra is missing (numba: mg.compiled)
                        if e.name not in OPTIONAL:
                            raise
                    yield line


def flags() -> Iterator[str]:
    from gptlab import run

    for action in run.build_parser()._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                yield f"train.py {option}"


def snapshot() -> list[str]:
    lines = [*module_names("mg", mg)]
    for prefix, module in (("F", functional), ("nn", nn), ("optim", optim), ("mg.lr_scheduler", lr_scheduler),
                           ("mg.init", init), ("mg.autograd", autograd), ("mg.cuda", mg.cuda),
                           ("mg.backends", mg.backends), ("mg.utils.data", mg.utils.data),
                           ("mg.distributions", mg.distributions)):
        lines += module_names(prefix, module)
    lines += describe("mg.Tensor", mg.Tensor)
    lines += [f"mg.Tensor.{name} (attribute)" for name in public(vars(mg.tensor(0.0)))]
    for module, names in ((gpt, ("GPT", "GPTConfig")), (llama, ("Llama", "LlamaConfig"))):
        lines += [f"models.{module.__name__.split('.')[-1]}.{n}{signature(getattr(module, n))}" for n in names]
    return sorted(set(lines)) + sorted(taught_imports()) + list(flags())


if __name__ == "__main__":
    print("\n".join(snapshot()))

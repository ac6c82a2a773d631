"""How much of PyTorch's namespace minigrad has, name by name: the public names of torch (its __all__),
torch.Tensor (its public methods), torch.nn (its classes), torch.nn.functional (its functions), torch.optim,
torch.optim.lr_scheduler, torch.utils.data and torch.distributions (their __all__) in the installed torch, each said
to be the same (with the first test file that names it beside torch), refused in one line (and why), or missing. It
writes
docs/torch-coverage.md and the README's line of figures, which tests/test_torch_coverage.py keeps current:

    python scripts/torch_coverage.py            # writes docs/torch-coverage.md and the README's line
    python scripts/torch_coverage.py --counts   # prints the counts per namespace only
"""

from __future__ import annotations

import argparse
import functools
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:  # the reference it counts against; without it, --help still answers and the rest says what to install
    import torch
    import torch.distributions
    import torch.utils.data
except ModuleNotFoundError:
    torch = None

import minigrad as mg  # noqa: E402

PAGE, README = ROOT / "docs" / "torch-coverage.md", ROOT / "README.md"

# names minigrad has that refuse in one line, by namespace, with why (the rest of a namespace's names it has work);
# tests/test_torch_coverage.py checks that each is a name minigrad has
REFUSED: dict[str, dict[str, str]] = {}
_HELPERS = {"torch._jit_internal", "torch.overrides", "torch._C"}  # what torch.nn.functional imports for itself


def _functional_names() -> list[str]:
    F = torch.nn.functional
    return [n for n in dir(F) if not n.startswith("_") and (inspect.isfunction(getattr(F, n))
                                                            or inspect.isbuiltin(getattr(F, n)))
            and getattr(getattr(F, n), "__module__", "") not in _HELPERS]


def namespaces() -> list[tuple[str, list[str], Any]]:
    """(torch's name for it, its public names, minigrad's counterpart or None)."""
    return [
        ("torch", sorted(torch.__all__), mg),
        ("torch.Tensor", sorted(n for n in dir(torch.Tensor) if not n.startswith("_")
                                and callable(getattr(torch.Tensor, n))), mg.Tensor),
        ("torch.nn", sorted(n for n in dir(torch.nn) if not n.startswith("_")
                            and inspect.isclass(getattr(torch.nn, n))), mg.nn),
        ("torch.nn.functional", sorted(_functional_names()), mg.nn.functional),
        ("torch.optim", sorted(torch.optim.__all__), mg.optim),
        ("torch.optim.lr_scheduler", sorted(torch.optim.lr_scheduler.__all__), mg.optim.lr_scheduler),
        ("torch.utils.data", sorted(torch.utils.data.__all__), mg.utils.data),
        ("torch.distributions", sorted(torch.distributions.__all__), getattr(mg, "distributions", None)),
    ]


def _test_texts() -> dict[str, str]:
    """The test files that compare with torch (they import it), by name."""
    texts = {p.name: p.read_text() for p in sorted((ROOT / "tests").glob("test_*.py"))}
    return {name: text for name, text in texts.items() if re.search(r"import torch\b|importorskip\(\s*\"torch\"", text)}


def _test_naming(name: str, tests: dict[str, str]) -> str | None:
    """The first test file (by name) that names `name` as an attribute, a call or a string."""
    pattern = re.compile(rf"[.\"']{re.escape(name)}\b")
    return next((file for file, text in tests.items() if pattern.search(text)), None)


@functools.cache
def table() -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Per namespace, (name, "same" / "refused" / "missing", the test file or why)."""
    tests = _test_texts()
    rows = []
    for label, names, mine in namespaces():
        found = []
        for name in names:
            if mine is None or not hasattr(mine, name):
                found.append((name, "missing", ""))
            elif name in REFUSED.get(label, {}):
                found.append((name, "refused", REFUSED[label][name]))
            else:
                found.append((name, "same", _test_naming(name, tests) or "no test names it"))
        rows.append((label, found))
    return rows


def counts(rows: list[tuple[str, list[tuple[str, str, str]]]]) -> list[tuple[str, int, int, int, int]]:
    return [(label, len(found), *(sum(status == s for _, status, _ in found) for s in ("same", "refused", "missing")))
            for label, found in rows]


def render() -> str:
    rows = table()
    lines = [
        "# PyTorch's namespace in minigrad, name by name",
        "",
        f"Made by `python scripts/torch_coverage.py` against torch {torch.__version__.split('+')[0]}; "
        "`tests/test_torch_coverage.py` keeps it current. Each public name of the namespaces below is the same here "
        "(with the first test file that names it beside torch), refused in one line (and why), or missing. "
        "\"The same\" means that minigrad has the name; the test named is where to see it compared.",
        "",
        "| namespace | names | the same | refused | missing |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| `{label}` | {n} | {same} | {refused} | {missing} |"
              for label, n, same, refused, missing in counts(rows)]
    for label, found in rows:
        lines += ["", f"## `{label}`", ""]
        present = [(name, status, note) for name, status, note in found if status != "missing"]
        if present:
            lines += ["| name | here | test or why |", "|---|---|---|"]
            lines += [f"| `{name}` | {status} | {note} |" for name, status, note in present]
            lines.append("")
        missing = [f"`{name}`" for name, status, _ in found if status == "missing"]
        lines.append(f"Missing ({len(missing)}): " + (", ".join(missing) if missing else "none") + ".")
    return "\n".join(lines) + "\n"


README_LINE = "- Torch's names we have (`docs/torch-coverage.md`): "  # the README's line starts so


def readme_line() -> str:
    """The README's one line of figures: how many of each namespace's names minigrad has."""
    short = {"torch.nn.functional": "F", "torch.optim.lr_scheduler": "lr_scheduler"}
    figures = [f"{short.get(label, label.removeprefix('torch.'))} {same + refused}/{n}"
               for label, n, same, refused, _ in counts(table())]
    return README_LINE + ", ".join(figures) + "."


def readme_with_figures(readme: str) -> str:
    return "\n".join(readme_line() if line.startswith(README_LINE) else line for line in readme.split("\n"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/torch_coverage.py", description="Write docs/torch-coverage.md and "
                                     "the README's line of figures from the installed torch (2.13).")
    parser.add_argument("--counts", action="store_true", help="only print the counts per namespace")
    args = parser.parse_args(argv)
    if torch is None:
        parser.error("it counts torch's names, and torch is not installed: pip install -e '.[torch]'")
    if args.counts:
        for label, n, same, refused, missing in counts(table()):
            print(f"{label}: {same} of {n} the same, {refused} refused, {missing} missing")
        return 0
    PAGE.write_text(render())
    README.write_text(readme_with_figures(README.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

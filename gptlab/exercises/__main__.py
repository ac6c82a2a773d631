"""python -m gptlab.exercises: list the exercises, `start NAME [DIR]` writes a stub to fill in, `check NAME [FILE]`
checks it, `NAME --hint [N]` gives the derivation a line at a time, `NAME --solution` prints the engine's own.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from gptlab.exercises.catalog import BY_NAME, EXERCISES
from gptlab.exercises.check import check, load
from gptlab.exercises.exercise import Exercise

STUB = '''"""Exercise {name}: {title}. Write backward, then check it:
    python -m gptlab.exercises check {name} {path}
Stuck? python -m gptlab.exercises {name} --hint   (again for the next line)
"""

import math  # noqa: F401

from minigrad.array import backend  # noqa: F401
from minigrad.tensor import Primitive, namespace
{imports}


class {cls}(Primitive):
    """{docstring}"""

{forward}
    def backward(self, dout):
        xp = namespace(dout)  # NumPy's names on arrays (and minigrad's under create_graph=True: one formula for both)
        # what forward kept: self.saved(self.y, "output") for its output, self.saved(self.x, 0) for input 0, ...
        # TODO: return {returns}
        raise NotImplementedError("backward: yours to write")
'''


def exercise(name: str) -> Exercise:
    if name not in BY_NAME:
        raise SystemExit(f"no exercise {name!r}; the exercises: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def listing() -> str:
    lines = ["The exercises, in the reading route's order (start one: python -m gptlab.exercises start NAME):"]
    lines += [f"  {n:2}. {e.name:14} {e.title}" for n, e in enumerate(EXERCISES, 1)]
    return "\n".join(lines)


def start(e: Exercise, folder: Path) -> str:
    """Write the stub into the learner's folder (never into the package), refusing to overwrite."""
    path = folder / f"{e.name}.py"
    if Path(__file__).parent.resolve() in path.resolve().parents:
        raise SystemExit(f"{path}: that is inside the package; start writes into a folder of yours")
    if path.exists():
        raise SystemExit(f"{path} exists: start does not overwrite it (check it: python -m gptlab.exercises check "
                         f"{e.name} {path})")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(STUB.format(name=e.name, title=e.title, path=path, imports=e.imports, cls=e.cls_name,
                                docstring=e.docstring, forward=e.forward, returns=e.returns))
    return f"wrote {path}: fill in {e.cls_name}.backward, then: python -m gptlab.exercises check {e.name} {path}"


def hint(e: Exercise, n: int | None, folder: Path) -> str:
    """Hint n (from 1), or without n the one after the last asked for (counted in the learner's folder)."""
    counter = folder / f".{e.name}.hints"
    if n is None:
        n = min(int(counter.read_text()) + 1 if counter.exists() else 1, len(e.hints))
        if folder.is_dir():
            counter.write_text(str(n))
    if not 1 <= n <= len(e.hints):
        raise SystemExit(f"{e.name} has hints 1 to {len(e.hints)}")
    more = f"  (next: --hint {n + 1})" if n < len(e.hints) else "  (the last hint; then --solution)"
    return f"hint {n} of {len(e.hints)}: {e.hints[n - 1]}\n{more}"


def solution(e: Exercise) -> str:
    sources = "\n".join(inspect.getsource(s) for s in e.solution)
    return f"{sources}\nDerived in docs/backward.md, \"{e.section}\"."


def checked(e: Exercise, file: Path) -> tuple[bool, str]:
    if not file.exists():
        raise SystemExit(f"{file} does not exist: write it with python -m gptlab.exercises start {e.name}")
    passed, words = check(e, load(e, file))
    if not passed:
        return False, f"{e.name}: not yet. {words}"
    n = EXERCISES.index(e)
    after = f"next: python -m gptlab.exercises start {EXERCISES[n + 1].name}" if n + 1 < len(EXERCISES) else \
        "that was the last one: read models/attention.py and models/gpt.py, which these Functions run"
    return True, f"{e.name}: passed. {words}.\nRead how the engine writes it: docs/backward.md, \"{e.section}\" " \
                 f"(or --solution); {after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gptlab.exercises", description=__doc__.split("\n\n")[0])
    parser.add_argument("words", nargs="*", help="list | start NAME [DIR] | check NAME [FILE] | NAME")
    parser.add_argument("--hint", nargs="?", type=int, const=0, help="the derivation's next line (or line N)")
    parser.add_argument("--solution", action="store_true", help="the engine's own Function, and where it is derived")
    parser.add_argument("--dir", type=Path, default=Path("exercises"), help="your folder (default ./exercises)")
    args = parser.parse_args(argv)
    words = args.words or ["list"]
    if words[0] == "list":
        print(listing())
        return 0
    command, rest = (words[0], words[1:]) if words[0] in ("start", "check") else ("", words)
    if not rest:
        raise SystemExit(f"which exercise? {', '.join(BY_NAME)}")
    e = exercise(rest[0])
    if args.hint is not None:
        print(hint(e, args.hint or None, args.dir))
    elif args.solution:
        print(solution(e))
    elif command == "start":
        print(start(e, Path(rest[1]) if len(rest) > 1 else args.dir))
    elif command == "check":
        passed, words = checked(e, Path(rest[1]) if len(rest) > 1 else args.dir / f"{e.name}.py")
        print(words)
        return 0 if passed else 1
    else:
        raise SystemExit(f"what to do with {e.name}? start, check, --hint or --solution")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Nine programs of the kind people learn from (examples/pytorch_programs/: nanoGPT, makemore's six models, minGPT's
adder, the lecture's bigram.py and gpt.py, PyTorch's tutorials polynomial_nn, polynomial_custom_function, the
quickstart classifier and char_rnn_generation), each written once for PyTorch. Each runs as it is under torch over
five seeds, then once with only its import lines changed to minigrad (`import torch` -> `import minigrad as torch`,
`from torch.nn import functional as F` -> `from minigrad.nn import functional as F`; no module of the test's own),
and minigrad's final loss lands within the range of PyTorch's, or within 5% of their median.
"""

from __future__ import annotations

import contextlib
import io
import re
import statistics
import sys
from pathlib import Path

import pytest

import minigrad

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the programs' reference runs need it")
threadpoolctl = pytest.importorskip("threadpoolctl", reason="both libraries run on one BLAS thread, for a fair time")

PROGRAMS_DIR = Path(__file__).resolve().parents[1] / "examples" / "pytorch_programs"
SEEDS = range(5)
# name: (file, its arguments, how it takes a seed)
PROGRAMS = {
    "nanoGPT": ("nanogpt.py", [], "--seed={}"),
    "makemore bigram": ("makemore.py", ["--type=bigram"], "--seed={}"),
    "makemore mlp": ("makemore.py", ["--type=mlp"], "--seed={}"),
    "makemore rnn": ("makemore.py", ["--type=rnn"], "--seed={}"),
    "makemore gru": ("makemore.py", ["--type=gru"], "--seed={}"),
    "makemore bow": ("makemore.py", ["--type=bow"], "--seed={}"),
    "makemore transformer": ("makemore.py", ["--type=transformer"], "--seed={}"),
    "minGPT adder": ("mingpt_adder.py", [], "--system.seed={}"),
    "lecture bigram.py": ("bigram.py", [], "--seed={}"),
    "lecture gpt.py": ("gpt.py", [], "--seed={}"),
    "tutorial polynomial_nn": ("polynomial_nn.py", [], "--seed={}"),
    "tutorial polynomial_custom_function": ("polynomial_custom_function.py", [], "--seed={}"),
    "tutorial quickstart": ("quickstart.py", [], "--seed={}"),
    "tutorial char_rnn_generation": ("char_rnn_generation.py", [], "--seed={}"),
}
IMPORT_LINE = re.compile(r"\s*(import|from) torch\b")


def under_minigrad(line: str) -> str:
    """An import line of torch as minigrad's ("import torch" keeps the name torch); any other line as it is."""
    if not IMPORT_LINE.match(line):
        return line
    if line.strip() == "import torch":
        return line.replace("import torch", "import minigrad as torch")
    return re.sub(r"\btorch\b", "minigrad", line)


def run(file: str, args: list[str], library: str) -> tuple[float, dict]:
    """Run the program as a script under `library` ("torch" or "minigrad"): its final_loss and its globals."""
    path = PROGRAMS_DIR / file
    source = path.read_text()
    if library == "minigrad":
        source = "\n".join(under_minigrad(line) for line in source.splitlines())
    namespace = {"__name__": "__main__", "__file__": str(path)}
    argv = sys.argv
    sys.argv = [str(path), *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, str(path), "exec"), namespace)
    finally:
        sys.argv = argv
    return namespace["final_loss"], namespace


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Both libraries on one thread (the BLAS's and torch's): small products on a busy machine run faster so."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpoolctl.threadpool_limits(1):
        yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def global_flags_restored():
    """nanoGPT sets torch.backends' allow_tf32 flags, process-wide: both libraries get theirs back afterwards."""
    flags = [f for library in (torch, minigrad) for f in (library.backends.cuda.matmul, library.backends.cudnn)]
    saved = [flag.allow_tf32 for flag in flags]
    yield
    for flag, value in zip(flags, saved, strict=True):
        flag.allow_tf32 = value


def test_only_the_import_lines_change():
    """The rewrite touches the lines that import torch and nothing else, and each program imports torch."""
    for file in sorted({file for file, _, _ in PROGRAMS.values()}):
        lines = (PROGRAMS_DIR / file).read_text().splitlines()
        changed = [(a, b) for a, b in zip(lines, map(under_minigrad, lines), strict=True) if a != b]
        assert changed and all(IMPORT_LINE.match(a) and "minigrad" in b for a, b in changed), file
        assert ("import torch", "import minigrad as torch") in changed, file
    assert under_minigrad("from torch.nn import functional as F") == "from minigrad.nn import functional as F"
    assert under_minigrad("import torch.nn as nn") == "import minigrad.nn as nn"
    assert under_minigrad("x = torch.zeros(3)  # import torch") == "x = torch.zeros(3)  # import torch"


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_program_trains_under_minigrad_as_under_torch(name):
    file, args, seed = PROGRAMS[name]
    theirs = [run(file, [*args, seed.format(s)], "torch")[0] for s in SEEDS]
    ours, namespace = run(file, [*args, seed.format(SEEDS[0])], "minigrad")
    assert namespace["torch"] is minigrad  # the program ran on minigrad, not on torch
    low, high, median = min(theirs), max(theirs), statistics.median(theirs)
    assert low <= ours <= high or abs(ours - median) <= 0.05 * median, (ours, sorted(theirs))

"""The code in README.md, docs/*.md and docs/zh-TW/*.md runs here, so that every number a reader sees is checked.

docs/zh-TW/ holds Traditional Chinese translations, checked here as the English pages are (tests/test_translations.py
keeps them in step with their sources). Their prose quotes code as the English does, "(`path.py`, `Name`):" included.

How those files mark their code blocks (GitHub shows them as ordinary code):
- ```python blocks run, in order, sharing one namespace per file. A ```text block right after one is
  what it prints.
- A quote of the code, not to be run, is fenced ```python excerpt (GitHub colours it as Python, and a reader who
  runs a page's ```python blocks in order skips it), right after a line that ends in "(`path.py`,
  `Name.method`):": each of its lines must appear in that function of that file (a trailing comment may be left
  out), in the same order and at the same depths relative to each other (lines may be left out between them).
- ```console blocks: a line starting with "$ " is a command, the lines after it what it prints. Only
  `python train.py` (the default run, trained once per test session) and `python train.py explain ...`
  are run; other commands belong in plain ``` blocks, which are not run. The ```python blocks after such a
  block run in a folder where `out` holds what `python train.py` saved, as in a checkout after the command.
- Expected output: a line "..." stands for any number of lines, "..." inside a line for any text, and
  blank lines are ignored; the rest matches exactly, so a block prints what does not depend on the BLAS's last
  bit (fewer digits, or values that are exact). One tolerance is kept, for the model that `python train.py` trains
  in a ```console block: its float32 training rounds differently with another CPU, BLAS or thread count, so in what
  that command prints, and in what a later ```python block that reads its model (the folder "out") prints, numbers
  with a decimal point match to 1% plus two units of their last digit.
A block imports only what `pip install -e .` installs (minigrad, models, gptlab), so that it runs from any folder.
Every `folder/file` in backticks must exist, and every "`path.py`, `Name`" pair, "`path.py: Name`" and
`module.name` (a module of minigrad/ or models/, as `shapes.allowed_keys` or `minigrad.array.runtime.run_parallel`) must
name something defined or imported in that file; the comments and docstrings of minigrad/ and models/ are held to
the same `module.name` rule. Inline code that quotes a line (an assignment, `y = f(x)`, or a statement, `for ...:`) or
names a method (`self.name`) in a sentence that names one such pair, or in a table whose header names one, must
be in that definition (spaces aside).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shlex
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

import train

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "zh-TW").glob("*.md"))]
EXCERPT = "python excerpt"  # the fence of a quote, not run
QUOTE_SOURCE = re.compile(r"\(`([\w/.-]+\.py)`,\s+`([A-Za-z_][\w.]*)`\):\s*$")
NAMED_CODE = re.compile(r"`([\w/.-]+\.py)`,\s+`(?![\w/.-]+\.(?:py|md|ipynb|toml|sh)`)([A-Za-z_][\w.]*)(?:\(\))?`")
PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|ipynb|toml|png|sh))`")  # paths with a folder
INLINE = re.compile(r"`([^`\n]+)`")
FILE_COLON_NAME = re.compile(r"`([\w/.-]+\.py):\s*([A-Za-z_][\w.]*)`")  # `minigrad/ops/shapes.py: allowed_keys`
SOURCES = sorted([*(ROOT / "minigrad").rglob("*.py"), *(ROOT / "models").glob("*.py")])
# `cuda.X` and `tensor.X` are as often CuPy's cuda or a tensor's attribute: those are checked only as `minigrad.cuda.X`;
# nn's and utils' own modules (loss, transformer, data, ...) are as often words: checked as `minigrad/nn/loss.py` only
MODULES = {p.stem: p for p in SOURCES if p.stem != "__init__"
           and (p.parent.name not in ("nn", "utils") or p.stem in ("functional", "init"))}
MODULE_NAME = re.compile(r"(?<![\w./-])(minigrad\.(?:[a-z]+\.)*|models\.)?(" + "|".join(MODULES) + r")\.([A-Za-z_]\w*)")
EXTENSIONS = {"py", "md", "html", "svg", "png", "ipynb", "txt", "json", "toml", "sh", "npz", "pt"}
READS_OUT = re.compile(r"""["']out["'/]""")  # a block that reads the model `python train.py` saved in out/
NUMBER = re.compile(r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Block:
    info: str  # the fence's info string: python, text, console, ...
    code: str
    line: int  # where the code starts in the file, for messages
    quote: tuple[str, str] | None = None  # (path, qualified name) for a quoted source block
    output: Block | None = None  # the ```text block after a python block


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        info, start = lines[i][3:].strip(), i + 1
        end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
        paragraph = []  # the text just before the block, for a quote's "(`path.py`, `Name`):"
        for ln in reversed(lines[:i]):
            if not ln.strip() and paragraph:
                break
            paragraph.insert(0, ln)
        before = " ".join(paragraph)
        block = Block(info, "\n".join(lines[start:end]) + "\n", start + 1)
        if info in ("python", EXCERPT) and (m := QUOTE_SOURCE.search(before)):
            block.quote = m.groups()
        previous = found[-1] if found else None
        if (info == "text" and previous and previous.info == "python" and previous.quote is None
                and all(not ln.strip() for ln in lines[previous.line + previous.code.count("\n"):i])):
            previous.output = block
        found.append(block)
        i = end + 1
    return found


# ---- comparing output ----

def _number_tolerance(text: str, trained: bool) -> float:
    """For what a training run prints (trained): 1% plus two units of the last printed digit for numbers with a point
    or exponent, 0 for integers. Otherwise 0: a number is printed as the file shows it."""
    mantissa, _, exponent = text.lower().partition("e")
    if not trained:
        return 0.0
    if "." not in mantissa and not exponent:
        return 0.0
    decimals = len(mantissa.partition(".")[2])
    return 0.01 * abs(float(text.replace(",", ""))) + 2 * 10.0 ** (int(exponent or 0) - decimals)


def _line_matches(expected: str, actual: str, trained: bool) -> bool:
    pattern, numbers = [], []
    for piece in re.split(r"(\.\.\.|" + NUMBER.pattern + r"|\s+)", expected.strip()):
        if not piece:
            continue
        if piece == "...":
            pattern.append(".*?")
        elif piece.isspace():
            pattern.append(r"\s+")
        elif NUMBER.fullmatch(piece):
            pattern.append(f"({NUMBER.pattern})")
            numbers.append(piece)
        else:
            pattern.append(re.escape(piece))
    m = re.fullmatch("".join(pattern), actual.strip())
    if m is None:
        return False
    for want, got in zip(numbers, m.groups(), strict=True):
        w, g = float(want.replace(",", "")), float(got.replace(",", ""))
        if abs(w - g) > _number_tolerance(want, trained):
            return False
    return True


def output_matches(expected: str, actual: str, trained: bool = False) -> bool:
    want = [ln for ln in expected.splitlines() if ln.strip()]
    got = [ln for ln in actual.splitlines() if ln.strip()]

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and _line_matches(want[i], got[j], trained) and match(i + 1, j + 1)

    return match(0, 0)


def test_output_matching_rules() -> None:
    assert output_matches("loss 0.1632  acc 97.22%", "loss 0.1641  acc 97.50%", trained=True)
    assert not output_matches("loss 0.1632", "loss 0.1641") and output_matches("loss 0.1632", "loss 0.1632")
    assert not output_matches("loss 0.1632", "loss 0.1700", trained=True)
    assert not output_matches("position 5", "position 6", trained=True)  # integers match exactly
    assert output_matches("a\n...\nz", "a\nb\nc\nz") and output_matches("a\n...\nz", "a\nz")
    assert not output_matches("a\n...\nz", "a\nb")
    assert output_matches("tokens_per_s=...", "tokens_per_s=19225")
    assert not output_matches("weight 99.7%", "weight 97.1%")
    assert output_matches("-0.0%", "0.0%") and output_matches("1.2e-10", "1.21e-10", trained=True)
    assert not output_matches("1.2e-10", "1.21e-10")


# ---- running a file's blocks ----

@pytest.fixture(scope="session")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`python train.py` once per session: (the folder it saved its model in, `out` as by default; what it printed)."""
    out = tmp_path_factory.mktemp("default_run") / "out"
    return out, run_train_py([], out)


def run_train_py(args: list[str], out: Path) -> str:
    """train.main(args) in this process (no interpreter start-up), with --out pointing at `out`."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = train.main([*args, "--out", str(out)])
    assert status == 0, f"python train.py {shlex.join(args)} ended with status {status}:\n{printed.getvalue()}"
    return printed.getvalue()


def run_console(block: Block, where: str, default_run: tuple[Path, str]) -> None:
    commands: list[tuple[str, list[str]]] = []  # (command, expected output lines)
    for line in block.code.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"{where}: a console block starts with `$ command`"
            commands[-1][1].append(line)
    out, trained = default_run
    for command, expected in commands:
        argv = shlex.split(command)
        assert argv[:2] == ["python", "train.py"] and argv[2:3] in ([], ["explain"]), (
            f"{where}: only `python train.py` and `python train.py explain` run here; "
            f"put `{command}` in a plain ``` block")
        actual = trained if len(argv) == 2 else run_train_py(argv[2:], out)
        assert output_matches("\n".join(expected), actual, trained=True), (
            f"{where}: `{command}` printed\n{actual}\nwhich does not match the file's\n" + "\n".join(expected))


OPTIONAL = {"numba", "llvmlite", "torch", "graphviz", "matplotlib", "mpi4py", "safetensors", "tokenizers"}
INSTALLED = {"minigrad", "models", "gptlab"}  # what `pip install -e .` installs (pyproject.toml); the rest of
# the checkout (scripts/, examples/, train.py, ...) imports only from its root, as pytest's pythonpath hides


def checkout_imports(code: str) -> list[str]:
    """The modules of the checkout that `code` imports but `pip install -e .` does not install."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names - INSTALLED if (ROOT / n).is_dir() or (ROOT / f"{n}.py").is_file())


def test_checkout_imports_are_found() -> None:
    assert checkout_imports("from scripts.graph_lesson import lesson\nimport train") == ["scripts", "train"]
    assert checkout_imports("from gptlab.graph_lesson import lesson\nimport numpy as np\nimport minigrad") == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_code_blocks_run_and_print_what_the_file_shows(path: Path, request: pytest.FixtureRequest,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict = {"__name__": f"doc:{path.name}"}
    not_run: list[str] = []  # blocks that need an optional extra missing here
    trained_here = False  # after a console block, whose model later blocks may read from "out"
    for block in blocks(path):
        where = f"{path.relative_to(ROOT)}, line {block.line}"
        if block.info == "python" and block.quote is None:
            outside = checkout_imports(block.code)
            assert not outside, f"{where}: imports {outside}, which `pip install -e .` does not install: the block " \
                "must run from any folder"
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    exec(compile(block.code, where, "exec"), namespace)
            except ImportError as e:  # a block of an optional extra's (numba for mg.compiled()): CI installs them all
                if e.name not in OPTIONAL and "the optional extra" not in str(e):
                    raise
                not_run.append(f"{where} ({e})")
                continue
            if block.output is not None:
                reads_trained = trained_here and READS_OUT.search(block.code) is not None
                assert output_matches(block.output.code, printed.getvalue(), reads_trained), (
                    f"{where} printed\n{printed.getvalue()}\nwhich does not match the file's\n{block.output.code}")
        elif block.info == "console":
            trained = request.getfixturevalue("default_run")
            run_console(block, where, trained)
            monkeypatch.chdir(trained[0].parent)  # later blocks find the trained model in ./out
            trained_here = True
    if not_run:
        pytest.skip("every other block ran and printed what the file shows; these need an optional extra: "
                    + "; ".join(not_run))


# ---- code quoted and named ----

def _definition(path: Path, qualname: str) -> ast.AST | None:
    """The function or class `qualname` ("Class.method", "function", "Class") defined in `path`."""
    node: ast.AST = ast.parse(path.read_text(encoding="utf-8"))
    for name in qualname.split("."):
        node = next((n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                     and n.name == name), None)
        if node is None:
            return None
    return node


def _without_comment(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_quoted_code_is_in_the_function_named(path: Path) -> None:
    for block in blocks(path):
        if block.quote is None:
            continue
        file, qualname = block.quote
        where = f"{path.relative_to(ROOT)}, line {block.line}"
        assert (ROOT / file).is_file(), f"{where}: quotes {file}, which does not exist"
        node = _definition(ROOT / file, qualname)
        assert node is not None, f"{where}: {file} defines no {qualname}"
        source = (ROOT / file).read_text(encoding="utf-8").splitlines()[node.lineno - 1:node.end_lineno]
        known = {ln.strip() for ln in source} | {_without_comment(ln) for ln in source}
        for line in block.code.splitlines():
            assert not line.strip() or line.strip() in known, (
                f"{where}: `{line.strip()}` is not (any longer) in {qualname} in {file}")
        assert _in_order_and_nesting(block.code, source), (
            f"{where}: the quoted lines are all in {qualname} in {file}, but not in this order or not at these "
            "depths relative to each other; quote a block as it stands (lines left out are fine)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _in_order_and_nesting(quote: str, source: list[str]) -> bool:
    """The quote's lines appear in the source in the same order, each indented relative to the first one as there."""
    wanted = [ln for ln in quote.splitlines() if ln.strip()]
    found = []  # source line numbers, matched greedily from the top
    start = 0
    for line in wanted:
        match = next((i for i in range(start, len(source))
                      if line.strip() in (source[i].strip(), _without_comment(source[i]))), None)
        if match is None:
            return False
        found.append(match)
        start = match + 1
    return all(_indent(q) - _indent(wanted[0]) == _indent(source[i]) - _indent(source[found[0]])
               for q, i in zip(wanted, found, strict=True))


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_quotes_are_fenced_as_excerpts_and_excerpts_name_their_source(path: Path) -> None:
    """A reader who runs a page's ```python blocks in order must not meet a quote: it would raise NameError."""
    for block in blocks(path):
        where = f"{path.relative_to(ROOT)}, line {block.line}"
        if block.quote is not None:
            assert block.info == EXCERPT, f"{where}: a quote of {block.quote[0]}: fence it ```{EXCERPT}, not run"
        elif block.info == EXCERPT:
            raise AssertionError(f'{where}: an excerpt must follow a line ending in "(`path.py`, `Name`):"')


def test_quote_rules() -> None:
    source = ["def f(x):", "    if x:", "        a = 1  # one", "    b = 2", "    return a"]
    assert _in_order_and_nesting("if x:\n    a = 1\nb = 2\n", source)
    assert _in_order_and_nesting("a = 1  # one\n", source) and _in_order_and_nesting("if x:\nb = 2\n", source)
    assert not _in_order_and_nesting("a = 1\nb = 2\n", source)  # spliced from two depths
    assert not _in_order_and_nesting("b = 2\nif x:\n", source)  # out of order


def _top_level_names(path: Path) -> set[str]:
    """What `module.name` may name in the module at `path`: its functions, classes, assignments and imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def unknown_module_names(text: str) -> list[str]:
    """The `module.name` references in `text` (a module of minigrad/ or models/) whose module defines no such name."""
    unknown = []
    for m in MODULE_NAME.finditer(text):
        package, module, name = m.groups()
        if name in EXTENSIONS or (module in ("cuda", "tensor") and package is None):
            continue
        if name not in _top_level_names(MODULES[module]):
            unknown.append(f"{m.group(0)}: {MODULES[module].relative_to(ROOT)} defines no {name}")
    return unknown


def missing_names(text: str) -> list[str]:
    """The folders/files, "`path.py`, `Name`" pairs, `path.py: Name` and `module.name` of a markdown text that name
    nothing (any longer)."""
    missing = [f"`{name}` does not exist" for name in PATH.findall(text) if not (ROOT / name).exists()]
    for file, qualname in [*NAMED_CODE.findall(text), *FILE_COLON_NAME.findall(text)]:
        if not (ROOT / file).is_file() or _definition(ROOT / file, qualname) is None:
            missing.append(f"{file} defines no {qualname}")
    for code in INLINE.findall(text):
        missing += unknown_module_names(code)
    return missing


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_files_and_functions_named_exist(path: Path) -> None:
    missing = missing_names(path.read_text(encoding="utf-8"))
    assert not missing, f"{path.relative_to(ROOT)}: " + "; ".join(missing)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_comments_and_docstrings_name_what_exists(path: Path) -> None:
    """A comment or docstring that points at `module.name` (dtypes.py's "see promotion.operands") is checked as the
    docs are: a function that moved leaves no pointer to where it was."""
    with path.open(encoding="utf-8") as f:
        texts = [(t.start[0], t.string) for t in tokenize.generate_tokens(f.readline)
                 if t.type in (tokenize.COMMENT, tokenize.STRING)]
    unknown = [f"line {line}: {u}" for line, text in texts for u in unknown_module_names(text)]
    assert not unknown, f"{path.relative_to(ROOT)}: " + "; ".join(unknown)


def test_stale_names_are_caught_in_every_form() -> None:
    """A name that moved or was renamed (shapes.future_keys became allowed_keys) is caught in each form a doc uses;
    the same sentences naming what exists pass."""
    forms = ["(`minigrad/ops/shapes.py`, `{}`)", "`minigrad/ops/shapes.py: {}`", "`shapes.{}`",
             "`minigrad.ops.shapes.{}()`"]
    for form in forms:
        assert not missing_names(f"The triangle is made once {form.format('allowed_keys')}."), form
        assert missing_names(f"The triangle is made once {form.format('future_keys')}."), form
    assert missing_names("see `minigrad/gone.py` and `docs/gone.md`") == ["`minigrad/gone.py` does not exist",
                                                                          "`docs/gone.md` does not exist"]
    assert unknown_module_names("# see elementwise.as_operands") and not unknown_module_names("# promotion.operands")
    assert not unknown_module_names("`docs/self-attention.md`, attention.html, cupy.cuda.runtime, tensor.shape")


# ---- code quoted inline ----

QUOTED_LINE = re.compile(r"(?:for|if|elif|while|return|with)\s.+|[\w.\[\], ()*]+\s[-+*/@]?=\s.+|self\.\w+.*")


def _sentences(lines: list[str]) -> list[tuple[int, str, str | None]]:
    """(line, sentence, table header) for the prose of a markdown file, outside fenced blocks: each sentence of a
    paragraph, each row of a table (with the table's header row, which names what its columns quote)."""
    found: list[tuple[int, str, str | None]] = []
    paragraph: list[str] = []
    start, fenced, header = 0, False, None

    def close() -> None:
        text = " ".join(paragraph)
        masked = INLINE.sub(lambda m: "`" + "x" * len(m.group(1)) + "`", text)  # no cut inside inline code
        cuts = [m.end() for m in re.finditer(r"[.!?;]\s+(?=[A-Z(`])|[。！？；]", masked)]  # English, Chinese
        found.extend((start, text[a:b], None) for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True))
        paragraph.clear()

    for i, line in enumerate([*lines, ""], start=1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("|"):
            header = header or line
            found.append((i, line, header))
            continue
        elif not fenced and line.strip():
            start = i if not paragraph else start
            paragraph.append(line)
            continue
        header = None
        if paragraph:
            close()
    return found


def _named(text: str) -> set[tuple[str, str]]:
    """The (path, qualified name) pairs a sentence names: "`path.py`, `Name`" or "`path.py: Name`"."""
    return set(NAMED_CODE.findall(text)) | set(FILE_COLON_NAME.findall(text))


def stale_inline_quotes(lines: list[str]) -> list[str]:
    """The inline quotes (see the module docstring) that are not in the definition their sentence names."""
    stale = []
    for line, sentence, header in _sentences(lines):
        pairs = _named(sentence) or (_named(header) if header else set())
        if len(pairs) != 1:
            continue
        file, qualname = pairs.pop()
        node = _definition(ROOT / file, qualname)
        if node is None:
            continue  # test_files_and_functions_named_exist says so
        source = "".join((ROOT / file).read_text(encoding="utf-8").splitlines()[node.lineno - 1:node.end_lineno])
        for code in INLINE.findall(sentence):
            if QUOTED_LINE.fullmatch(code) and re.sub(r"\s+", "", code) not in re.sub(r"\s+", "", source):
                stale.append(f"line {line}: `{code}` is not (any longer) in {qualname} in {file}")
    return stale


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_inline_quotes_are_in_the_function_named(path: Path) -> None:
    stale = stale_inline_quotes(path.read_text(encoding="utf-8").splitlines())
    assert not stale, f"{path.relative_to(ROOT)}: " + "; ".join(stale)


def test_inline_quote_rules() -> None:
    named = "(`minigrad/ops/activations.py`, `SoftmaxFunction.forward`)"
    assert not stale_inline_quotes([f"The forward keeps `self.y = y` {named}.", "",
                                    f"Here `y = other(x)`. The next sentence, {named}, quotes nothing."])
    assert stale_inline_quotes([f"The forward runs `y = other(x)` {named}."])  # a stale line
    assert stale_inline_quotes([f"It keeps `self.saved` {named}."])  # a stale attribute
    assert stale_inline_quotes([f"| step | {named} |", "|---|---|", "| one | `y = other(x)` |"])  # a table
    assert not stale_inline_quotes([f"| step | {named} |", "|---|---|", "| one | `self.y = y` |"])
    assert not stale_inline_quotes([f"前向保留 `self.y = y` {named}。這裡的 `y = other(x)` 不是引用。"])  # 。 ends it
    assert stale_inline_quotes([f"前向執行 `y = other(x)` {named}。"])
    colon = "(`minigrad/ops/activations.py: SoftmaxFunction.forward`)"
    assert not stale_inline_quotes([f"The forward keeps `self.y = y` {colon}."])
    assert stale_inline_quotes([f"The forward runs `y = other(x)` {colon}."])  # the one-backtick form too


def test_readme_stays_under_12_kb() -> None:
    """The README is the learner's first page; the rest has its own page in docs/, with a one-line pointer."""
    size = (ROOT / "README.md").stat().st_size
    assert size < 12 * 1024, f"README.md has {size} bytes, over 12 KB: move a section to docs/ and point to it"


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_stored_without_outputs(path: Path) -> None:
    """A reader runs them; stored outputs would go stale and hide what the code computes now."""
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None, f"{path.name}: cell {i} has outputs"

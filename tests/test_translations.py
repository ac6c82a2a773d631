"""Each page in docs/zh-TW/ follows its English source, so that the two languages cannot drift apart.

A test cannot judge a translation, but it can see drift. A translation keeps four things of its source, and a
change made on one side only (a new section, an edited code block, a new number from the trained model) shows in one
of them:
- the headings: how many, at which levels, in which order (their words are translated);
- the fenced code blocks: the same info string and the same text, byte for byte, in the same order;
- the numbers in the prose (everything outside fenced blocks, inline code included), section by section: the
  multiset of ASCII numbers such as 4096, 6.801, 1,212 and 98.65% (a % is part of its number). Order does not count,
  since a translation reorders a sentence, and neither does the text around a number, so Chinese characters
  touching a digit change nothing. A link's target, `](../gpt2.md)`, is an address, not prose, and is left out.
  Numbers written as words (English "eight", Chinese 八) are not numbers here: a translation keeps digits as digits
  and words as words, and full-width digits are not taken for ASCII ones;
- the files named in inline code, section by section (`models/attention.py`, `docs/backward.md`): a file moved or
  renamed in the English must be renamed in the translation too. A set this time: a translation may name a file
  once where its source names it twice.
docs/zh-TW/README.md translates part of README.md: the opening (up to the first `## `) and README_SECTIONS.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ZH_TW = ROOT / "docs" / "zh-TW"
PAGES = sorted(ZH_TW.glob("*.md"))
README_SECTIONS = ("## Quick start", "## Reading order")
NUMBER = re.compile(r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?%?")  # [0-9], not \d: \d takes full-width digits too
HEADING = re.compile(r"(#{1,6})\s")
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
FILE = re.compile(r"`([\w/.-]+\.(?:py|md|ipynb|toml|png|sh))(?:`|:\s)")  # `path.py` or `path.py: Name`


def readme_sections(text: str) -> str:
    """The parts of README.md that docs/zh-TW/README.md translates: the opening and README_SECTIONS."""
    kept, keep, fenced = [], True, False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            keep = line.rstrip() in README_SECTIONS
        if keep:
            kept.append(line)
    return "".join(kept)


def source(page: Path) -> str:
    """The English text that a docs/zh-TW page translates."""
    if page.name == "README.md":
        return readme_sections((ROOT / "README.md").read_text(encoding="utf-8"))
    return (ROOT / "docs" / page.name).read_text(encoding="utf-8")


def parse(text: str) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """(sections, code): the prose lines of each section, the first one before any heading, each later one starting
    with its heading; and the fenced blocks as (info string, text), in order."""
    sections: list[list[str]] = [[]]
    code: list[tuple[str, str]] = []
    fence: list[str] | None = None  # the open block: its info string, then its lines
    for line in text.splitlines():
        if fence is not None and line.startswith("```"):
            code.append((fence[0], "\n".join(fence[1:])))
            fence = None
        elif fence is not None:
            fence.append(line)
        elif line.startswith("```"):
            fence = [line[3:].strip()]
        elif HEADING.match(line):
            sections.append([line])
        else:
            sections[-1].append(line)
    if fence is not None:
        raise ValueError(f"a ```{fence[0]} block is never closed")
    return sections, code


def numbers(prose: str) -> Counter[str]:
    return Counter(NUMBER.findall(LINK_TARGET.sub("]", prose)))


def _level(section: list[str]) -> int:
    return len(HEADING.match(section[0]).group(1))


def differences(english: str, chinese: str) -> list[str]:
    """How a translation departs from its source, in words; empty when the two agree."""
    en_sections, en_code = parse(english)
    zh_sections, zh_code = parse(chinese)
    found = []
    en_headings, zh_headings = [s[0] for s in en_sections[1:]], [s[0] for s in zh_sections[1:]]
    if [_level(s) for s in en_sections[1:]] != [_level(s) for s in zh_sections[1:]]:
        at = next(i for i, (a, b) in enumerate(itertools.zip_longest(en_headings, zh_headings))
                  if a is None or b is None or HEADING.match(a).group(1) != HEADING.match(b).group(1))
        found.append(f"headings differ from heading {at + 1} on: English {en_headings[at:at + 1] or 'has no more'}, "
                     f"zh-TW {zh_headings[at:at + 1] or 'has no more'} ({len(en_headings)} against "
                     f"{len(zh_headings)} headings)")
    else:  # the sections pair up: compare the numbers and the files of each pair
        for en, zh in zip(en_sections, zh_sections, strict=True):
            where = f"section {en[0]!r}" if en and HEADING.match(en[0]) else "the opening"
            en_numbers, zh_numbers = numbers("\n".join(en)), numbers("\n".join(zh))
            if en_numbers != zh_numbers:
                found.append(f"{where}: numbers only in English {sorted((en_numbers - zh_numbers).elements())}, "
                             f"only in zh-TW {sorted((zh_numbers - en_numbers).elements())}")
            en_files, zh_files = set(FILE.findall("\n".join(en))), set(FILE.findall("\n".join(zh)))
            if en_files != zh_files:
                found.append(f"{where}: files named only in English {sorted(en_files - zh_files)}, "
                             f"only in zh-TW {sorted(zh_files - en_files)}")
    for i, (en, zh) in enumerate(itertools.zip_longest(en_code, zh_code)):
        if en != zh:
            if en is None or zh is None:
                found.append(f"code block {i + 1}: only {'zh-TW' if en is None else 'English'} has it "
                             f"({len(en_code)} against {len(zh_code)} blocks)")
            else:
                line = next((a, b) for a, b in itertools.zip_longest(
                    [f"```{en[0]}", *en[1].splitlines()], [f"```{zh[0]}", *zh[1].splitlines()]) if a != b)
                found.append(f"code block {i + 1} differs: English {line[0]!r}, zh-TW {line[1]!r}")
            break  # the blocks after a missing one are all shifted: the first difference says where to look
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_translation_keeps_its_sources_sections_code_and_numbers(page: Path) -> None:
    found = differences(source(page), page.read_text(encoding="utf-8"))
    assert not found, (f"{page.relative_to(ROOT)} no longer follows its English source; bring the side that did not "
                       "change along:\n" + "\n".join(found))


def test_every_translated_page_has_its_english_source() -> None:
    assert {p.name for p in PAGES} >= {"README.md", "self-attention.md"}
    for page in PAGES:
        assert page.name == "README.md" or (ROOT / "docs" / page.name).is_file(), (
            f"docs/zh-TW/{page.name} translates docs/{page.name}, which does not exist")
    readme = readme_sections((ROOT / "README.md").read_text(encoding="utf-8"))
    for heading in README_SECTIONS:
        assert heading in readme.splitlines(), (
            f"README.md has no section {heading!r} any longer: name the sections docs/zh-TW/README.md translates "
            "in README_SECTIONS, and translate them")


def test_the_readme_links_every_translation_in_its_first_lines() -> None:
    first_lines = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:5])
    for page in PAGES:
        assert f"]({page.relative_to(ROOT).as_posix()})" in first_lines, f"README.md's first lines do not link {page}"


def test_number_rules() -> None:
    assert numbers("位置 6（我）的分數 6.801，比位置 1 的 6.422 高；e^7.1 ≈ 1,212 倍，權重 99.2%") == Counter(
        ["6", "6.801", "1", "6.422", "7.1", "1,212", "99.2%"])
    assert numbers("見 [執行 GPT-2](../gpt2.md)") == numbers("see [run GPT-2](gpt2.md)") == Counter(["2"])
    assert numbers("八個分數、全形數字 ３２") == numbers("eight scores") == Counter()
    assert numbers("98.65%") != numbers("98.65") and numbers("1.1, 8.2") == Counter(["1.1", "8.2"])


ENGLISH = ("# Title\n\nAbout 11.3 for d_k = 128 (`tasks.py`).\n\n```python\nprint(1)\n```\n\n"
           "## Step 1\n\nWeights 10% and 70%.\n")
CHINESE = ("# 標題\n\nd_k = 128 時大約是 11.3（`tasks.py`）。\n\n```python\nprint(1)\n```\n\n"
           "## 步驟 1\n\n權重 10% 和 70%。\n")


def test_the_parity_check_on_a_small_pair() -> None:
    assert differences(ENGLISH, CHINESE) == []
    assert differences(ENGLISH, CHINESE.replace("print(1)", "print(2)")) == [
        "code block 1 differs: English 'print(1)', zh-TW 'print(2)'"]
    assert differences(ENGLISH.replace("```python", "```text"), CHINESE) == [
        "code block 1 differs: English '```text', zh-TW '```python'"]
    assert differences(ENGLISH.replace("11.3", "11.4"), CHINESE) == [
        "section '# Title': numbers only in English ['11.4'], only in zh-TW ['11.3']"]
    assert differences(ENGLISH, CHINESE.replace("70%", "75%")) == [
        "section '## Step 1': numbers only in English ['70%'], only in zh-TW ['75%']"]
    assert differences(ENGLISH, CHINESE.replace("權重 10%", "權重 10%、10%")) != []  # a multiset: twice is not once
    assert differences(ENGLISH + "\n## Step 2\n\nMore.\n", CHINESE) == [
        "headings differ from heading 3 on: English ['## Step 2'], zh-TW has no more (3 against 2 headings)"]
    assert differences(ENGLISH, CHINESE.replace("## 步驟 1", "### 步驟 1"))[0].startswith("headings differ")
    assert differences(ENGLISH.replace("`tasks.py`", "`gptlab/tasks.py`"), CHINESE) == [
        "section '# Title': files named only in English ['gptlab/tasks.py'], only in zh-TW ['tasks.py']"]
    twice = CHINESE.replace("（`tasks.py`）", "（`tasks.py`，`tasks.py: make_task`）")
    assert differences(ENGLISH, twice) == []  # a set, and `path.py: Name` names path.py
    assert differences(ENGLISH + "\n```text\n1\n```\n", CHINESE) == [
        "code block 2: only English has it (2 against 1 blocks)"]


def _change_code(text: str, info: str) -> str:
    """The text with one line added to its first block of this info string."""
    return text.replace(f"```{info}\n", f"```{info}\none line more\n", 1)


def _change_number(text: str) -> str:
    """The text with the first number of its prose made one digit longer (link targets dropped, as they count for
    nothing)."""
    lines, fenced = text.splitlines(keepends=True), False
    for i, line in enumerate(lines):
        fenced = fenced != line.startswith("```")
        prose = LINK_TARGET.sub("]", line)
        if not fenced and not line.startswith(("```", "#")) and (m := NUMBER.search(prose)):
            longer = m.group().rstrip("%") + "7" + "%" * m.group().endswith("%")
            lines[i] = prose[:m.start()] + longer + prose[m.end():]
            return "".join(lines)
    raise AssertionError("no number in the prose")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_change_on_one_side_only_fails(page: Path) -> None:
    english, chinese = source(page), page.read_text(encoding="utf-8")
    assert not differences(english, chinese)
    changed = 0
    for info in ("python", "console", "text"):  # code, a command and what it prints, the output of code
        if f"```{info}\n" in english:
            assert "code block" in " ".join(differences(_change_code(english, info), chinese))
            assert "code block" in " ".join(differences(english, _change_code(chinese, info)))
            changed += 1
    assert changed, "the page has none of these blocks"
    assert "numbers only in" in " ".join(differences(_change_number(english), chinese))
    assert "numbers only in" in " ".join(differences(english, _change_number(chinese)))
    assert "headings differ" in " ".join(differences(english + "\n## One more section\n", chinese))

"""The public API against its reviewed snapshot (tests/api_snapshot.txt): a name or signature that changes fails
here until the snapshot is made again (python scripts/api_snapshot.py > tests/api_snapshot.txt) and CHANGELOG.md
says how to migrate."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_public_api_is_the_reviewed_snapshot():
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "api_snapshot.py")], capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout.splitlines()
    reviewed = (ROOT / "tests" / "api_snapshot.txt").read_text().splitlines()
    diff = "\n".join(difflib.unified_diff(reviewed, made, "tests/api_snapshot.txt", "now", lineterm="", n=0))
    assert made == reviewed, ("the public API changed; if on purpose, say how to migrate in CHANGELOG.md and run "
                              f"python scripts/api_snapshot.py > tests/api_snapshot.txt\n{diff}")

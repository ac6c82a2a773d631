"""docs/torch-coverage.md and the README's line of figures are what scripts/torch_coverage.py makes now (regenerate
them with that script), and its refusals are names minigrad has."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed: the coverage table lists its names")

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("torch_coverage", ROOT / "scripts" / "torch_coverage.py")
coverage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coverage)


def test_the_coverage_page_and_the_readmes_figures_are_current():
    assert coverage.PAGE.read_text() == coverage.render(), (
        "docs/torch-coverage.md is out of date: run python scripts/torch_coverage.py")
    assert coverage.readme_line() in coverage.README.read_text().splitlines(), (
        "README.md's line of figures is out of date: run python scripts/torch_coverage.py")


def test_the_refusals_are_names_minigrad_has_and_the_counts_add_up():
    mine = {label: counterpart for label, _, counterpart in coverage.namespaces()}
    for label, names in coverage.REFUSED.items():
        for name in names:
            assert hasattr(mine[label], name), (label, name)
    for label, n, same, refused, missing in coverage.counts(coverage.table()):
        assert same + refused + missing == n and n > 0, label
    assert dict((label, same) for label, _, same, _, _ in coverage.counts(coverage.table()))["torch.Tensor"] >= 150

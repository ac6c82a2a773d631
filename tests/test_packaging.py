"""What `pip install` puts into site-packages: the minigrad package alone, with its subpackages (models/, train.py
and the other scripts run from the checkout, so no top-level `models` collides with another project's), under
the MIT license file that pyproject.toml names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")


def test_only_the_minigrad_package_and_each_of_its_subpackages_is_installed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    subpackages = sorted(".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "minigrad").glob("*/__init__.py"))
    assert config["tool"]["setuptools"]["packages"] == ["minigrad", *subpackages]
    assert "minigrad.utils" in subpackages  # minigrad.utils.data, torch.utils.data's names


def test_the_license_file_pyproject_names_exists_and_is_mit() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    for name in project["license-files"]:
        assert (REPO / name).read_text().startswith("MIT License\n")

"""What `pip install` puts into site-packages: the engine (minigrad), the models (models) and the lab around them
(gptlab), each with every subpackage, so that the README's snippets run from any folder; train.py and sample.py, the
commands, run from the checkout; all under the MIT license file that pyproject.toml names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
PACKAGES = ("minigrad", "models", "gptlab")


def test_the_engine_the_models_and_gptlab_are_installed_with_every_subpackage() -> None:
    setuptools = pytest.importorskip("setuptools")
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    installed = setuptools.find_packages(str(REPO), include=find["include"])
    assert find.get("namespaces") is False  # else any folder would do, __pycache__ too
    expected = {".".join(init.parent.relative_to(REPO).parts)
                for top in PACKAGES for init in (REPO / top).rglob("__init__.py")}
    assert sorted(installed) == sorted(expected)
    assert {"minigrad.pytorch.utils", "minigrad.ops", *PACKAGES} <= expected  # torch.utils.data's names, the ops


def test_the_license_file_pyproject_names_exists_and_is_mit() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    for name in project["license-files"]:
        assert (REPO / name).read_text().startswith("MIT License\n")


def test_the_version_is_one_number_in_pyproject_mg_and_the_changelog() -> None:
    import minigrad as mg

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert mg.__version__ == version
    releases = [line for line in (REPO / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    assert releases[0] == "## Unreleased"  # what follows the release collects here
    assert releases[1].startswith(f"## {version} (")  # the newest release is the one pyproject.toml names

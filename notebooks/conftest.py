"""Where nbmake is installed (the test extra), `pytest` and `pytest notebooks` run each notebook here top to bottom,
as a test; without it they are left out. The hook sits here so that it is loaded whenever this folder is collected."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("nbmake"):
        config.option.nbmake = True

"""Every test folder is in the mypy override for test modules: a new folder
left out would be checked with the strict settings of ``src`` and fail
``make test`` for missing annotations, not for a type error."""

from __future__ import annotations

import pytest
from helpers import ROOT

TESTS = ROOT / "tests"


def _test_module_patterns() -> set[str]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for override in config["tool"]["mypy"]["overrides"]:
        if override.get("disallow_untyped_defs") is False:
            return set(override["module"])
    raise AssertionError("no mypy override relaxes disallow_untyped_defs for the test modules")


def test_every_test_folder_is_in_the_override() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert {f"{name}.*" for name in folders} <= _test_module_patterns()

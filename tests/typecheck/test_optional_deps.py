"""mypy gives the same answer whether or not the optional dependencies
(torch for ``collect``, matplotlib for ``--plot``, Ray for ``--ray``) are
installed. Without one, its imports are ``Any`` (``ignore_missing_imports``),
so a ``# type: ignore`` that only torch's types make necessary is an unused
ignore there, an error under ``warn_unused_ignores`` (one was, in
``collect/distributed.py``). ``make typecheck`` installs them all; this runs
mypy as on a machine that has none: a stub of each that makes every name
``Any``, found first on the search path, stands in for the package."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

# The top-level packages of pyproject's optional dependencies that the code imports.
OPTIONAL = ("torch", "matplotlib", "ray")
# A package none of whose names is typed: what mypy makes of a missing one.
ANY_STUB = "from typing import Any\n\ndef __getattr__(name: str) -> Any: ...\n"
PLANTED = "import torch\n\ntorch.nn.Linear(1, 1).no_such_method()  # type: ignore[operator]\n"


def _mypy_without_optional(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           *files: str) -> list[str]:
    """The errors mypy reports on ``files`` (default: the project's) with
    every optional package replaced by ``ANY_STUB``."""
    api = pytest.importorskip("mypy.api")
    stubs = tmp_path / "stubs"
    for package in OPTIONAL:
        (stubs / package).mkdir(parents=True)
        (stubs / package / "__init__.pyi").write_text(ANY_STUB)
    monkeypatch.setenv("MYPYPATH", str(stubs))
    monkeypatch.chdir(ROOT)  # the config's files and mypy_path are relative to it
    stdout, _stderr, _status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                        "--cache-dir", str(tmp_path / "cache"),
                                        "--no-error-summary", *files])
    return [line for line in stdout.splitlines() if ": error:" in line]


@pytest.mark.slow
def test_mypy_is_clean_without_the_optional_dependencies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    errors = _mypy_without_optional(tmp_path, monkeypatch)
    assert not errors, "\n".join(errors)


def test_the_stubs_hide_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: an ignore only torch's types need is
    reported unused (whether torch is installed here or not)."""
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    errors = _mypy_without_optional(tmp_path, monkeypatch, str(planted))
    assert len(errors) == 1 and 'Unused "type: ignore"' in errors[0]

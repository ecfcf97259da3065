"""Shared test fixtures.

The real traces live outside the repository (``../shared/traces`` relative to
the project root, read-only, same place in CI); tests read them in place and
never copy them into the repo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = (ROOT / ".." / "shared" / "traces").resolve()


@pytest.fixture(scope="session")
def traces() -> Path:
    """Directory of the real traces; skips the test when it is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}")
    return TRACES

"""Shared fixtures. The real traces are read in place from ``../shared/traces``
(see ``helpers.py``); tests that need them skip where they are absent."""

from __future__ import annotations

import fcntl
import gzip
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ALL, REFERENCE_SOURCES, ROOT, TRACES

# Tests that read the real traces (converted once per session, or by the
# reference converter) belong to the slow tier: ``make test-fast`` leaves them out.
REAL_TRACE_FIXTURES = frozenset({"traces", "converted", "reference"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``slow`` every test that uses a real-trace fixture."""
    for item in items:
        if REAL_TRACE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def one_ray_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Held by the tests that start a local Ray cluster: under ``make test``'s
    ``pytest -n 2`` (pytest-xdist) two of them never run at once, on their two
    workers. A lock file in the run's own temporary folder (the workers'
    folders are inside it); without xdist, tests run one at a time anyway."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def traces() -> Path:
    """Directory of the real traces; skips the test when it is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}")
    return TRACES


@pytest.fixture(scope="session")
def converted(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> .et converted by pt2chakra from ../shared/traces, once per session."""
    from pt2chakra import convert

    work = tmp_path_factory.mktemp("converted")
    out = {}
    for name, (host, kineto) in ALL.items():
        target = work / f"{name}.et"
        convert(traces / host, traces / kineto if kineto else None, target)
        out[name] = target
    return out


def _chakra_converter() -> str | None:
    venv_bin = Path(sys.executable).parent
    for candidate in (venv_bin / "chakra_converter", ROOT / ".venv-ref" / "bin" / "chakra_converter"):
        if candidate.exists():
            return str(candidate)
    return shutil.which("chakra_converter")


@pytest.fixture(scope="session")
def reference(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> .et written by mlc-chakra's converter; skips when it is not installed."""
    tool = _chakra_converter()
    if tool is None:
        pytest.skip("mlc-chakra's chakra_converter is not installed")
    work = tmp_path_factory.mktemp("reference")
    out = {}
    for name in REFERENCE_SOURCES:
        plain = work / f"{name}.host.json"
        plain.write_bytes(gzip.decompress((traces / name / "host_et.json.gz").read_bytes()))
        target = work / f"ref_{name}.et"
        subprocess.run([tool, "PyTorch", "--input", str(plain), "--output", str(target)],
                       check=True, capture_output=True, timeout=300,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
        out[name] = target
    return out

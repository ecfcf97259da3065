"""Shared setup of the companion-tool tests (imported by test_tools_*.py).

Converts every trace of ../shared/traces once per test session (cached in a
temporary folder, shared by all tool test modules) and, when mlc-chakra's
``chakra_converter`` is available, one reference ``.et`` of a host-only trace.
"""

from __future__ import annotations

import functools
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = (ROOT / ".." / "shared" / "traces").resolve()

PAIRS = {"linear_1gpu": ("linear_1gpu/host_et.json.gz", "linear_1gpu/kineto.json.gz"),
         "hta_simple_add": ("hta_simple_add/host_et.json.gz", "hta_simple_add/kineto.json.gz")}
PAIRS.update({f"dlrm_rank{r}": (f"dlrm_8gpu/rank{r}.host_et.json.gz",
                                f"dlrm_8gpu/rank{r}.kineto.json.gz") for r in range(8)})
HOST_ONLY = {name: (f"{name}/host_et.json.gz", None)
             for name in ("resnet_2gpu_host", "resnet_1gpu_host", "gpt2_host", "chakra_pg_host")}
ALL = {**PAIRS, **HOST_ONLY}
REFERENCE_SOURCES = ("chakra_pg_host", "resnet_1gpu_host")


@functools.lru_cache(maxsize=1)
def _workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pt2chakra-tools-"))


@functools.lru_cache(maxsize=1)
def converted_all() -> dict[str, Path]:
    """name -> .et converted by pt2chakra.api.convert from ../shared/traces."""
    from pt2chakra.conversion.api import convert

    out = {}
    for name, (host, kineto) in ALL.items():
        target = _workdir() / f"{name}.et"
        convert(TRACES / host, TRACES / kineto if kineto else None, target)
        out[name] = target
    return out


def _chakra_converter() -> str | None:
    venv_bin = Path(sys.executable).parent
    for candidate in (venv_bin / "chakra_converter", ROOT / ".venv-ref" / "bin" / "chakra_converter"):
        if candidate.exists():
            return str(candidate)
    return shutil.which("chakra_converter")


@functools.lru_cache(maxsize=1)
def reference_all() -> dict[str, Path]:
    """name -> .et written by mlc-chakra's converter (empty if not installed)."""
    tool = _chakra_converter()
    if tool is None:
        return {}
    out = {}
    for name in REFERENCE_SOURCES:
        plain = _workdir() / f"{name}.host.json"
        plain.write_bytes(gzip.decompress((TRACES / name / "host_et.json.gz").read_bytes()))
        target = _workdir() / f"ref_{name}.et"
        subprocess.run([tool, "PyTorch", "--input", str(plain), "--output", str(target)],
                       check=True, capture_output=True, timeout=300,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
        out[name] = target
    return out


@pytest.fixture(scope="session")
def converted() -> dict[str, Path]:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}")
    return converted_all()


@pytest.fixture(scope="session")
def reference() -> dict[str, Path]:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}")
    ref = reference_all()
    if not ref:
        pytest.skip("mlc-chakra's chakra_converter is not installed")
    return ref


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pt2chakra", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_failure(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]

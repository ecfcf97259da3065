"""``scripts/astra_sim_cache.py`` (``make astra-sim``) on a stand-in ``../shared``:
a fake build script that writes the two binaries, so the cache's rules are tested
in a second, not in the real 6-17 minute build."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest
from helpers import ROOT

SCRIPT = ROOT / "scripts" / "astra_sim_cache.py"
FAKE_BUILD = """#!/usr/bin/env bash
# stand-in for build_astra_sim.sh: counts its runs, writes the binaries to $ASTRA_OUT
set -e
echo run >> "{count}"
[ -n "{fail}" ] && exit 3
mkdir -p "$ASTRA_OUT"
for b in AstraSim_Analytical_Congestion_Unaware AstraSim_Analytical_Congestion_Aware; do
  printf '#!/bin/sh\\n' > "$ASTRA_OUT/$b"; chmod +x "$ASTRA_OUT/$b"
done
"""


class Cache(NamedTuple):
    script: ModuleType
    folder: Path  # where the build for the stand-in tarball must land


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("astra_sim_cache", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The script pointed at a stand-in shared folder and an empty cache."""
    module = _load()
    shared = tmp_path / "shared"
    (shared / "astra-sim-src").mkdir(parents=True)
    (shared / "scripts").mkdir()
    tarball = shared / "astra-sim-src" / "astra-sim-0123abcd.tar.gz"
    tarball.write_bytes(b"not really a tarball")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (shared / "astra-sim-src" / "SHA256SUMS").write_text(f"{digest}  {tarball.name}\n")
    monkeypatch.setattr(module, "SOURCE_DIR", shared / "astra-sim-src")
    monkeypatch.setattr(module, "SUMS_FILE", shared / "astra-sim-src" / "SHA256SUMS")
    monkeypatch.setattr(module, "BUILD_SCRIPT", shared / "scripts" / "build_astra_sim.sh")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return Cache(module, tmp_path / "xdg" / "pt2chakra" / f"astra-sim-{digest[:12]}")


def _fake_build(module: ModuleType, tmp_path: Path, fail: bool = False) -> Path:
    count = tmp_path / "builds"
    module.BUILD_SCRIPT.write_text(FAKE_BUILD.format(count=count, fail="yes" if fail else ""))
    return count


def test_builds_once_into_the_key_folder_then_reuses(cache, tmp_path, capsys):
    script, folder = cache
    count = _fake_build(script, tmp_path)
    assert script.main(["--find"]) == 1  # nothing yet
    assert script.main([]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(folder / "AstraSim_Analytical_Congestion_Unaware")
    assert (folder / "BUILD_INFO.json").is_file()
    assert script.main([]) == 0 and script.main(["--find"]) == 0
    assert count.read_text().count("run") == 1  # reused, not rebuilt
    assert [p.name for p in folder.parent.iterdir() if not p.name.endswith(".lock")] \
        == [folder.name]  # no staging folder left


def test_a_failed_build_leaves_nothing_that_counts(cache, tmp_path, capsys):
    script = cache.script
    _fake_build(script, tmp_path, fail=True)
    assert script.main([]) == 2
    assert "failed" in capsys.readouterr().err
    assert script.main(["--find"]) == 1
    root = tmp_path / "xdg" / "pt2chakra"
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []


def test_a_half_copied_folder_is_rebuilt(cache, tmp_path):
    script, folder = cache
    count = _fake_build(script, tmp_path)
    folder.mkdir(parents=True)
    (folder / "AstraSim_Analytical_Congestion_Unaware").write_text("")  # no aware, not +x
    assert script.main(["--find"]) == 1
    assert script.main([]) == 0 and count.read_text().count("run") == 1


def test_a_tarball_that_differs_from_its_checksum_is_refused(cache, tmp_path, capsys):
    script = cache.script
    count = _fake_build(script, tmp_path)
    (script.SOURCE_DIR / "astra-sim-0123abcd.tar.gz").write_bytes(b"changed")
    assert script.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SHA256SUMS" in err
    assert not count.exists()


def test_without_shared_one_line_and_exit_2(tmp_path):
    """A copy of the script whose ``../shared`` does not exist."""
    lone = tmp_path / "clone" / "scripts" / "astra_sim_cache.py"
    lone.parent.mkdir(parents=True)
    lone.write_text(SCRIPT.read_text())
    proc = subprocess.run([sys.executable, str(lone)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "shared" in proc.stderr and "Traceback" not in proc.stderr

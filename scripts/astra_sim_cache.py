#!/usr/bin/env python3
"""Build ASTRA-sim's two analytical binaries once, into a cache outside the clone.

ASTRA-sim is on no package registry: its public source is one tarball in
``../shared/astra-sim-src/`` (checked against its ``SHA256SUMS``), and
``../shared/scripts/build_astra_sim.sh`` builds it offline (6 minutes on a quiet
2-core machine, up to 17 on a busy one; root, for its apt-get). This script calls
it once per tarball and keeps the binaries in

    ${XDG_CACHE_HOME:-~/.cache}/pt2chakra/astra-sim-<first 12 hex of the tarball's sha256>/

so that every clone and every later run reuses them in seconds. The build goes to
a temporary folder renamed at the end: a half-finished build never counts.

    python3 scripts/astra_sim_cache.py          # build if absent; print the binary's path
    python3 scripts/astra_sim_cache.py --find   # print it if built (exit 1 if not)

The path printed is the congestion-unaware binary, what ``ASTRA_SIM_BIN`` takes
(the congestion-aware one is next to it). Standard library only: it runs before
the project is installed. Exit 2, in one line, where ``../shared`` is missing.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SOURCE_DIR = SHARED / "astra-sim-src"
SUMS_FILE = SOURCE_DIR / "SHA256SUMS"
BUILD_SCRIPT = SHARED / "scripts" / "build_astra_sim.sh"
TARBALL_PREFIX = "astra-sim-"
TARBALL_SUFFIX = ".tar.gz"
KEY_HEX_CHARS = 12
"""Hex digits of the sha256 in the cache folder's name: enough to tell tarballs
apart, short enough to read (and the key earlier caches were made with)."""
BINARIES = ("AstraSim_Analytical_Congestion_Unaware", "AstraSim_Analytical_Congestion_Aware")
BUILD_INFO = "BUILD_INFO.json"
HASH_CHUNK = 1 << 20
STDERR_FD = 2
"""The build script's output (its log's tail on failure) goes to stderr: stdout
carries only the path, for ``$(...)``."""
WHERE_FROM = (f"ASTRA-sim is built from the source in {SOURCE_DIR} (not found: clone this "
              "repository next to ../shared, see docs/GETTING_ASTRA_SIM.md)")


class Source(NamedTuple):
    """The tarball to build and the cache folder its checksum names."""

    tarball: Path
    sha256: str

    @property
    def key(self) -> str:
        return f"astra-sim-{self.sha256[:KEY_HEX_CHARS]}"


class Refused(Exception):
    """A one-line reason to stop (exit 2)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "pt2chakra"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def find_source() -> Source:
    """The one ASTRA-sim tarball ``SHA256SUMS`` lists, checked against it."""
    if not SUMS_FILE.is_file() or not BUILD_SCRIPT.is_file():
        raise Refused(WHERE_FROM)
    listed = {}
    for line in SUMS_FILE.read_text().splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].startswith(TARBALL_PREFIX) \
                and fields[1].endswith(TARBALL_SUFFIX):
            listed[fields[1].lstrip("*")] = fields[0].lower()
    if len(listed) != 1:
        raise Refused(f"{SUMS_FILE}: expected one {TARBALL_PREFIX}*{TARBALL_SUFFIX} line, "
                      f"found {len(listed)}")
    name, want = next(iter(listed.items()))
    tarball = SOURCE_DIR / name
    if not tarball.is_file():
        raise Refused(f"{tarball}: listed in {SUMS_FILE.name} but missing")
    have = _sha256(tarball)
    if have != want:
        raise Refused(f"{tarball}: sha256 {have[:KEY_HEX_CHARS]}... differs from "
                      f"{SUMS_FILE.name} ({want[:KEY_HEX_CHARS]}...)")
    return Source(tarball, have)


def built(folder: Path) -> bool:
    """Both binaries present and executable (a renamed, finished build)."""
    return all(os.access(folder / name, os.X_OK) for name in BINARIES)


def build(source: Source, target: Path) -> None:
    """Run the shared build script into a temporary folder beside ``target``,
    then rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{source.key}.building-", dir=target.parent))
    scratch = Path(tempfile.mkdtemp(prefix="astra-build-"))
    started = time.monotonic()
    try:
        print(f"astra-sim: building {source.tarball.name} (6-17 minutes on 2 cores) ...",
              file=sys.stderr, flush=True)
        done = subprocess.run(["bash", str(BUILD_SCRIPT), "--tarball", str(source.tarball),
                               str(scratch / "tree")],
                              env={**os.environ, "ASTRA_OUT": str(staging)},
                              stdout=STDERR_FD, check=False)
        if done.returncode != 0 or not built(staging):
            raise Refused(f"{BUILD_SCRIPT} failed (exit {done.returncode}); nothing cached")
        info = {"tarball": source.tarball.name, "sha256": source.sha256,
                "build_seconds": round(time.monotonic() - started),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (staging / BUILD_INFO).write_text(json.dumps(info, indent=1) + "\n")
        staging.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    print(f"astra-sim: built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def ensure(source: Source) -> Path:
    """The cached folder, built first when absent (one build at a time per key)."""
    target = cache_root() / source.key
    if built(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{source.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run waits, then finds it built
        if not built(target):
            shutil.rmtree(target, ignore_errors=True)  # an unfinished copy by other means
            build(source, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--find", action="store_true",
                        help="only print the cached binary's path (exit 1 when not built)")
    args = parser.parse_args(argv)
    try:
        source = find_source()
        if args.find:
            folder = cache_root() / source.key
            if not built(folder):
                return 1
        else:
            folder = ensure(source)
    except Refused as exc:
        print(f"astra_sim_cache: {exc}", file=sys.stderr)
        return 2
    print(folder / BINARIES[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Simulator memory as ranks grow: the 8 DLRM ranks replicated to 16, 32, 64.

Converts ``../shared/traces/dlrm_8gpu`` (all ranks in one command), then
writes copies whose metadata names ranks 8..63 (``rank`` and ``world_size``
renumbered; nodes unchanged, so every copy joins the same collectives, which
become 64-way), and simulates 8, 16, 32 and 64 ranks together, each in its own
child process. Prints CPU-s, wall and peak MB per run, and the bytes per node
that the peak grows by from 8 to 64 ranks (the slope, which leaves out the
interpreter and the imports).

    .venv/bin/python scripts/bench_many_ranks.py [--ranks 8,16,32,64]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DLRM = (ROOT / ".." / "shared" / "traces" / "dlrm_8gpu").resolve()
SOURCE_RANKS = 8
KIB = 1024
MIB = 1 << 20
PT2CHAKRA = [sys.executable, "-m", "pt2chakra"]


def renumbered(src: Path, dst: Path, rank: int, world: int) -> int:
    """Copy of ``src`` whose metadata says ``rank`` of ``world``; returns its node count."""
    from pt2chakra.chakra.io import read_et, write_et
    from pt2chakra.chakra.records import GlobalMetadata

    md, nodes = read_et(src)
    new = {"rank": rank, "world_size": world}
    attrs = [(n, m, new.get(n, v)) for n, m, v in md.attrs]
    return write_et(dst, GlobalMetadata(md.version, attrs), list(nodes))


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(CPU-s, wall s, peak MB) of one child, from its own rusage."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / KIB


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="8,16,32,64", help="rank counts to simulate")
    args = p.parse_args(argv)
    counts = sorted(int(x) for x in args.ranks.split(","))
    with tempfile.TemporaryDirectory(prefix="bench_ranks.") as tmp:
        work = Path(tmp)
        subprocess.run([*PT2CHAKRA, "convert", "-q", "--ranks", f"0-{SOURCE_RANKS - 1}",
                        "--host-trace", f"{DLRM}/rank{{rank}}.host_et.json.gz",
                        "--device-trace", f"{DLRM}/rank{{rank}}.kineto.json.gz",
                        "-o", f"{work}/src.{{rank}}.et"], check=True)
        files, nodes = [], []
        for r in range(max(counts)):
            dst = work / f"rank{r}.et"
            nodes.append(renumbered(work / f"src.{r % SOURCE_RANKS}.et", dst, r, max(counts)))
            files.append(str(dst))
        print(f"{'ranks':>5} {'nodes':>9} {'CPU-s':>7} {'wall s':>7} {'peak MB':>8}")
        peaks = {}
        for n in counts:
            cpu, wall, peak = measure([*PT2CHAKRA, "simulate", "-q", *files[:n]])
            peaks[n] = (sum(nodes[:n]), peak)
            print(f"{n:>5} {sum(nodes[:n]):>9} {cpu:>7.2f} {wall:>7.2f} {peak:>8.1f}", flush=True)
    (n0, p0), (n1, p1) = peaks[counts[0]], peaks[counts[-1]]
    if n1 > n0:
        print(f"peak grows by {(p1 - p0) * MIB / (n1 - n0):.0f} bytes per node "
              f"from {counts[0]} to {counts[-1]} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""``make bench``: convert and simulate at 25k, 100k and 1M ops, one matrix.

Rows: each sample pair found in ``bench_data/`` (recorded by
``scripts/make_large_sample.py``: ``--layers 32`` -> gpt_25k/, the default ->
the 100k pair at the top, ``--layers 1320`` -> gpt_1m/) x (convert = link with
Kineto + convert, simulate = replay of that ``.et``). Columns: CPU seconds
(user + sys of the child process and what it waited for), wall seconds, peak
MB (the child's max RSS), all from ``os.wait4`` of that one child. CPU time is
the figure to compare on a shared machine; wall time moves with its load.

Where mlc-chakra's converter is installed (``--ref-venv``, default ``.venv``,
then ``.venv-ref``) and the sample is at most ``--ref-max-ops`` host ops, the
same run also converts the host ET alone with it and with pt2chakra, and
prints pt2chakra's ratios (host-only vs its converter; its linker cannot run
from PyPI, see bench_convert.py). Both read the uncompressed JSON then.

    .venv/bin/python scripts/bench_matrix.py [--ref-max-ops N] [--only 25k,100k]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench_data"
# label -> (folder under bench_data, approximate host ops) of each sample pair.
SAMPLES = {"25k": ("gpt_25k", 25_000), "100k": (".", 100_000), "1M": ("gpt_1m", 1_000_000)}
STEM = "gpt_large_cpu"
KIB_PER_MB = 1024  # ru_maxrss is in KiB on Linux
# mlc-chakra's converter needs about 10x our memory and time; past this many
# host ops it would take minutes and gigabytes on a 2-core machine.
DEFAULT_REF_MAX_OPS = 200_000
PT2CHAKRA = [sys.executable, "-m", "pt2chakra"]


@dataclass(frozen=True, slots=True)
class Measured:
    """One child process: CPU seconds (user + sys), wall seconds, peak MB, exit status."""

    cpu_s: float
    wall_s: float
    peak_mb: float
    rc: int

    def cells(self) -> str:
        if self.rc != 0:
            return f"{'failed (exit ' + str(self.rc) + ')':>28}"
        return f"{self.cpu_s:>9.2f} {self.wall_s:>9.2f} {self.peak_mb:>9.0f}"


def measure(cmd: list[str], log: Path) -> Measured:
    """Run ``cmd`` with its output in ``log``; its own rusage via ``wait4``."""
    with log.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    return Measured(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / KIB_PER_MB,
                    os.waitstatus_to_exitcode(status))


def plain(path: Path, work: Path) -> Path:
    """Uncompressed copy of a gzipped JSON (mlc-chakra reads plain JSON only)."""
    dst = work / path.name.removesuffix(".gz")
    with gzip.open(path, "rb") as fin, dst.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return dst


def reference_converter(venvs: list[Path]) -> Path | None:
    for venv in venvs:
        tool = venv / "bin" / "chakra_converter"
        if tool.exists():
            return tool
    return None


def bench_sample(label: str, host: Path, kineto: Path, work: Path, ref: Path | None,
                 ref_max_ops: int, ops: int) -> list[str]:
    """The matrix rows of one sample, and its mlc-chakra ratio line."""
    et = work / f"{label}.et"
    conv = measure([*PT2CHAKRA, "convert", "-q", "--host-trace", str(host),
                    "--device-trace", str(kineto), "-o", str(et)], work / f"{label}.convert.log")
    rows = [f"{label:>5} convert   {conv.cells()}"]
    sim = (measure([*PT2CHAKRA, "simulate", "-q", str(et)], work / f"{label}.simulate.log")
           if conv.rc == 0 else Measured(0, 0, 0, -1))
    rows.append(f"{label:>5} simulate  {sim.cells()}")
    if ref is not None and ops <= ref_max_ops:
        rows.append(_ratio_line(label, host, work, ref))
    et.unlink(missing_ok=True)
    return rows


def _ratio_line(label: str, host: Path, work: Path, ref: Path) -> str:
    """pt2chakra host-only vs mlc-chakra's converter on the same plain host ET."""
    plain_host = plain(host, work)
    ours = measure([*PT2CHAKRA, "convert", "-q", "--host-trace", str(plain_host),
                    "-o", str(work / "ours.et")], work / f"{label}.ours_host.log")
    theirs = measure([str(ref), "PyTorch", "--input", str(plain_host),
                      "--output", str(work / "ref.et")], work / f"{label}.ref_host.log")
    plain_host.unlink()
    if ours.rc or theirs.rc:
        return f"      mlc-chakra host-only: failed (ours exit {ours.rc}, theirs exit {theirs.rc})"
    return (f"      host-only vs mlc-chakra converter: ours {ours.cpu_s:.2f} CPU-s / "
            f"{ours.peak_mb:.0f} MB, theirs {theirs.cpu_s:.2f} CPU-s / {theirs.peak_mb:.0f} MB: "
            f"{theirs.cpu_s / max(ours.cpu_s, 1e-9):.1f}x less CPU, "
            f"{theirs.peak_mb / max(ours.peak_mb, 1e-9):.1f}x less memory")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref-venv", type=Path, action="append",
                   help="venv holding mlc-chakra (default: .venv, then .venv-ref)")
    p.add_argument("--ref-max-ops", type=int, default=DEFAULT_REF_MAX_OPS,
                   help="run mlc-chakra only on samples up to this many host ops")
    p.add_argument("--only", help="comma-separated labels, e.g. 25k,100k")
    args = p.parse_args(argv)
    ref = reference_converter(args.ref_venv or [ROOT / ".venv", ROOT / ".venv-ref"])
    wanted = set(args.only.split(",")) if args.only else set(SAMPLES)
    print(f"{'ops':>5} {'job':<9} {'CPU-s':>9} {'wall s':>9} {'peak MB':>9}")
    with tempfile.TemporaryDirectory(prefix="bench_matrix.") as tmp:
        work = Path(tmp)
        for label, (folder, ops) in SAMPLES.items():
            host = BENCH / folder / f"{STEM}.host_et.json.gz"
            kineto = BENCH / folder / f"{STEM}.kineto.json.gz"
            if label not in wanted:
                continue
            if not (host.exists() and kineto.exists()):
                print(f"{label:>5} (no sample: scripts/make_large_sample.py, see this script)")
                continue
            for row in bench_sample(label, host, kineto, work, ref, args.ref_max_ops, ops):
                print(row, flush=True)
    if ref is None:
        print("mlc-chakra's chakra_converter not found: no ratios")
    return 0


if __name__ == "__main__":
    sys.exit(main())

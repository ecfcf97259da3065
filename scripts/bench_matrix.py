#!/usr/bin/env python3
"""``make bench``: convert and simulate at 25k, 100k and 1M ops, one matrix.

Rows: each sample pair found in ``bench_data/`` (recorded by
``scripts/make_large_sample.py``: ``--layers 32`` -> gpt_25k/, the default ->
the 100k pair at the top, ``--layers 1320`` -> gpt_1m/) x (convert = link with
Kineto + convert, simulate = replay of that ``.et``). Columns: CPU seconds
(user + sys of the child process and what it waited for), wall seconds, peak
MB (the child's max RSS), all from ``os.wait4`` of that one child. CPU time is
the figure to compare on a shared machine; wall time moves with its load.

Where mlc-chakra's converter is installed (``--ref-venv``, default
``.venv-ref``, then ``.venv``) and the sample is at most ``--ref-max-ops`` host
ops, the same run also prints pt2chakra's ratios against it, each on the same
uncompressed files (``--runs N`` times):

* host-only: ``pt2chakra convert --host-trace H`` vs ``chakra_converter``;
* link + convert, where its linker runs (``make bench-ref-setup``: the reference
  venv ``.venv-ref`` with PARAM's et_replay; see bench_ref.py):
  ``pt2chakra convert --host-trace H --device-trace K`` vs
  ``chakra_trace_link`` then ``chakra_converter`` on what it linked, their CPU
  seconds summed. K carries one ``ProfilerStep#0`` annotation, which their
  linker needs and our samples lack (bench_ref.kineto_with_step).

pt2chakra is byte-compiled first (bench_ref.compile_ours), as an installed copy is.

    .venv/bin/python scripts/bench_matrix.py [--ref-max-ops N] [--only 25k,100k]
                                             [--runs N] [--ratios-only]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ref import Reference, compile_ours, find_reference, kineto_with_step, plain_copy  # noqa: E402

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


def bench_sample(label: str, host: Path, kineto: Path, work: Path) -> list[str]:
    """The matrix rows of one sample: convert (link with Kineto) and simulate."""
    et = work / f"{label}.et"
    conv = measure([*PT2CHAKRA, "convert", "-q", "--host-trace", str(host),
                    "--device-trace", str(kineto), "-o", str(et)], work / f"{label}.convert.log")
    rows = [f"{label:>5} convert   {conv.cells()}"]
    sim = (measure([*PT2CHAKRA, "simulate", "-q", str(et)], work / f"{label}.simulate.log")
           if conv.rc == 0 else Measured(0, 0, 0, -1))
    rows.append(f"{label:>5} simulate  {sim.cells()}")
    et.unlink(missing_ok=True)
    return rows


def ratio_lines(label: str, host: Path, kineto: Path, work: Path, ref: Reference,
                runs: int) -> list[str]:
    """pt2chakra vs mlc-chakra on the same plain files, ``runs`` times each."""
    plain_host = plain_copy(host, work)
    step_kineto = kineto_with_step(kineto, work) if ref.linker is not None else None
    lines = []
    for run in range(1, runs + 1):
        lines.append(_host_only(label, run, plain_host, work, ref))
        if step_kineto is not None:
            lines.append(_link_convert(label, run, plain_host, step_kineto, work, ref))
    plain_host.unlink()
    if step_kineto is not None:
        step_kineto.unlink()
    return lines


def _host_only(label: str, run: int, host: Path, work: Path, ref: Reference) -> str:
    ours = measure([*PT2CHAKRA, "convert", "-q", "--host-trace", str(host),
                    "-o", str(work / "ours.et")], work / f"{label}.ours_host.log")
    theirs = measure(ref.convert_cmd(host, work / "ref.et"), work / f"{label}.ref_host.log")
    return _ratio(f"{label:>5} run {run} host-only vs mlc-chakra converter", ours, [theirs])


def _link_convert(label: str, run: int, host: Path, kineto: Path, work: Path,
                  ref: Reference) -> str:
    ours = measure([*PT2CHAKRA, "convert", "-q", "--host-trace", str(host), "--device-trace",
                    str(kineto), "-o", str(work / "ours.et")], work / f"{label}.ours_link.log")
    linked = work / "ref_linked.json"
    link = measure(ref.link_cmd(host, kineto, linked), work / f"{label}.ref_link.log")
    conv = (measure(ref.convert_cmd(linked, work / "ref.et"), work / f"{label}.ref_linked.log")
            if link.rc == 0 else Measured(0, 0, 0, -1))
    linked.unlink(missing_ok=True)
    return _ratio(f"{label:>5} run {run} link+convert vs chakra_trace_link + converter",
                  ours, [link, conv])


def _ratio(what: str, ours: Measured, theirs: list[Measured]) -> str:
    """One line: CPU-s and peak MB of each side (theirs: steps summed, the larger peak)."""
    if ours.rc or any(t.rc for t in theirs):
        return f"{what}: failed (ours exit {ours.rc}, theirs exit {[t.rc for t in theirs]})"
    cpu = sum(t.cpu_s for t in theirs)
    peak = max(t.peak_mb for t in theirs)
    steps = " + ".join(f"{t.cpu_s:.2f}" for t in theirs)
    return (f"{what}: ours {ours.cpu_s:.2f} CPU-s / {ours.peak_mb:.0f} MB, theirs "
            f"{steps + ' = ' if len(theirs) > 1 else ''}{cpu:.2f} CPU-s / {peak:.0f} MB: "
            f"{cpu / max(ours.cpu_s, 1e-9):.1f}x less CPU, "
            f"{peak / max(ours.peak_mb, 1e-9):.1f}x less memory")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref-venv", type=Path, action="append",
                   help="venv holding mlc-chakra (default: .venv-ref, then .venv)")
    p.add_argument("--ref-max-ops", type=int, default=DEFAULT_REF_MAX_OPS,
                   help="run mlc-chakra only on samples up to this many host ops")
    p.add_argument("--only", help="comma-separated labels, e.g. 25k,100k")
    p.add_argument("--runs", type=int, default=1, help="times each ratio is measured")
    p.add_argument("--ratios-only", action="store_true",
                   help="only the mlc-chakra ratios, not the convert/simulate matrix")
    args = p.parse_args(argv)
    ref = find_reference(args.ref_venv) if args.ref_venv else find_reference()
    compile_ours()
    wanted = set(args.only.split(",")) if args.only else set(SAMPLES)
    if ref is not None and ref.linker is None:
        print(f"mlc-chakra's linker cannot run ({ref.why}): host-only ratios only; "
              "make bench-ref-setup gives it one")
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
            rows = [] if args.ratios_only else bench_sample(label, host, kineto, work)
            for row in rows:
                print(row, flush=True)
            if ref is not None and ops <= args.ref_max_ops:
                for line in ratio_lines(label, host, kineto, work, ref, args.runs):
                    print(line, flush=True)
    if ref is None:
        print("mlc-chakra's chakra_converter not found: no ratios")
    return 0


if __name__ == "__main__":
    sys.exit(main())

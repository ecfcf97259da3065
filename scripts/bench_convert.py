#!/usr/bin/env python3
"""Benchmark pt2chakra against the reference converter (mlc-chakra) on one input.

Each tool runs in its own child process; wall time is measured around it and
peak memory is the child's own ``ru_maxrss`` from ``os.wait4`` (per child, so
one run cannot hide another's peak, unlike RUSAGE_CHILDREN).

    .venv/bin/python scripts/bench_convert.py --host-trace H.json.gz [--device-trace K.json.gz]

The reference linker (``chakra_trace_link``) needs PARAM's et_replay, which
PyPI lacks (``make bench-ref-setup`` installs it from a PARAM checkout into
``.venv-ref``; see bench_ref.py); when it cannot even import, only the
reference converter runs, and the apples-to-apples pair is pt2chakra
host-only vs that converter. Both tools get the same uncompressed host ET
(the reference reads plain JSON only) and the same uncompressed Kineto trace,
with the ``ProfilerStep#0`` annotation the reference linker needs
(bench_ref.kineto_with_step); decompression is not timed. pt2chakra is
byte-compiled first, as an installed copy is. A tool that crashes is
reported, not fatal.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ref import LINK_RANK, compile_ours, kineto_with_step, linker_error  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF_VENV = ROOT / ".venv-ref"
DEFAULT_PT2CHAKRA = f"{shlex.quote(sys.executable)} -m pt2chakra convert"
KIB_PER_MB = 1024  # ru_maxrss is in KiB on Linux; we print MiB
TAIL_CHARS = 4000
MAX_ERROR_CHARS = 200
ERROR_LINE = re.compile(r"\b\w*(Error|Exception)\b")
LINKER_UNAVAILABLE = (
    "reference linker unavailable: et_replay not installable from PyPI; "
    "comparing against its converter alone"
)


@dataclass
class Result:
    """One timed child run; ``error`` is set when the tool failed."""

    tool: str
    mode: str
    wall_s: float
    peak_mb: float
    error: str | None = None


def run_measured(cmd: list[str], cwd: Path, label: str) -> tuple[int, float, float, str]:
    """Run ``cmd``, output to ``<label>.log``; return (exit code, wall s, peak RSS MiB, tail)."""
    log = cwd / f"{label}.log"
    with log.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    tail = log.read_text(errors="replace")[-TAIL_CHARS:]
    return proc.returncode, wall, usage.ru_maxrss / KIB_PER_MB, tail


def measure(tool: str, mode: str, cmd: list[str], cwd: Path, output: Path) -> Result:
    """Time one tool run and turn a crash or a missing output into a reported error."""
    output.unlink(missing_ok=True)
    rc, wall, peak, tail = run_measured(cmd, cwd, f"{tool}.{mode}".replace(" ", "_"))
    error = None
    if rc != 0:
        error = f"exit {rc}: {last_line(tail)}"
    elif not output.exists() or output.stat().st_size == 0:
        error = f"exit 0 but no output at {output.name}: {last_line(tail)}"
    return Result(tool, mode, wall, peak, error)


def last_line(text: str) -> str:
    """The last line naming an error, else the last line: what a reader needs from a crash."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ERROR_LINE.search(ln)]
    line = (errors or lines or ["(no output)"])[-1]
    return line[:MAX_ERROR_CHARS]


def plain_json(path: Path, work: Path) -> Path:
    """Uncompressed copy of ``path`` in ``work`` (the reference cannot read gzip)."""
    with path.open("rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path
    dst = work / path.name.removesuffix(".gz")
    with gzip.open(path, "rb") as fin, dst.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return dst


def pt2chakra_runs(
    args: argparse.Namespace, host: Path, device: Path | None, work: Path
) -> list[Result]:
    base = shlex.split(args.pt2chakra_cmd)
    out = work / "pt2chakra.host-only.et"
    results = [
        measure(
            "pt2chakra", "host-only", [*base, "--host-trace", str(host), "-o", str(out)], work, out
        )
    ]
    if device is not None:
        out = work / "pt2chakra.host+device.et"
        cmd = [*base, "--host-trace", str(host), "--device-trace", str(device), "-o", str(out)]
        results.append(measure("pt2chakra", "host+device", cmd, work, out))
    return results


def reference_runs(
    ref_bin: Path, host: Path, device: Path | None, work: Path
) -> tuple[list[Result], str | None]:
    """Reference converter on the host ET; link+convert too when its linker imports."""
    out = work / "reference.et"
    conv = [str(ref_bin / "chakra_converter"), "PyTorch", "--output", str(out), "--input"]
    results = [measure("mlc-chakra", "host-only", [*conv, str(host)], work, out)]
    if device is None:
        return results, None
    link_error = linker_error(ref_bin / "chakra_trace_link")
    if link_error:
        return results, f"{LINKER_UNAVAILABLE} ({link_error})"
    linked = work / "reference_linked.json"
    link = [
        str(ref_bin / "chakra_trace_link"),
        "--rank",
        LINK_RANK,
        "--chakra-host-trace",
        str(host),
        "--chakra-device-trace",
        str(device),
        "--output-file",
        str(linked),
    ]
    linked_result = measure("mlc-chakra", "link", link, work, linked)
    results.append(linked_result)
    if linked_result.error is None:
        results.append(measure("mlc-chakra", "convert linked", [*conv, str(linked)], work, out))
    return results, None


def ratio_text(ours: Result, ref: Result | None) -> str:
    if ref is None or ref.error or ours.error or ref.wall_s == 0 or ref.peak_mb == 0:
        return "n/a"
    return f"time x{ours.wall_s / ref.wall_s:.2f}, mem x{ours.peak_mb / ref.peak_mb:.2f}"


def print_table(results: list[Result]) -> None:
    """Ratios are pt2chakra / reference converter on the same host ET."""
    ref = next((r for r in results if r.tool == "mlc-chakra" and r.mode == "host-only"), None)
    print(f"{'tool':<11} {'mode':<15} {'wall s':>8} {'peak MB':>9}  ratio vs mlc-chakra host-only")
    for r in results:
        ratio = ratio_text(r, ref) if r.tool == "pt2chakra" else ""
        status = f"FAILED ({r.error})" if r.error else ratio
        print(f"{r.tool:<11} {r.mode:<15} {r.wall_s:>8.2f} {r.peak_mb:>9.1f}  {status}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host-trace", type=Path, required=True)
    p.add_argument("--device-trace", type=Path)
    p.add_argument("--ref-venv", type=Path, default=DEFAULT_REF_VENV, help="venv with mlc-chakra")
    p.add_argument(
        "--pt2chakra-cmd",
        default=DEFAULT_PT2CHAKRA,
        help="command prefix taking --host-trace/--device-trace/-o (default: %(default)s)",
    )
    p.add_argument("--skip", choices=("pt2chakra", "reference"), action="append", default=[])
    p.add_argument("--keep", type=Path, help="keep outputs in this folder instead of a temp one")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ref_bin = args.ref_venv / "bin"
    compile_ours()
    with tempfile.TemporaryDirectory(prefix="bench_convert.") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        host = plain_json(args.host_trace.resolve(), work)
        device = kineto_with_step(args.device_trace.resolve(), work) if args.device_trace else None
        print(
            f"input: {args.host_trace} ({host.stat().st_size / 2**20:.1f} MiB uncompressed)"
            + (f" + {args.device_trace}" if device else "")
        )
        results: list[Result] = []
        if "pt2chakra" not in args.skip:
            results += pt2chakra_runs(args, host, device, work)
        if "reference" not in args.skip:
            if not (ref_bin / "chakra_converter").exists():
                print(
                    f"reference converter not found in {args.ref_venv}; "
                    "install mlc-chakra there (see this script's docs)"
                )
            else:
                ref_results, note = reference_runs(ref_bin, host, device, work)
                results += ref_results
                if note:
                    print(note)
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

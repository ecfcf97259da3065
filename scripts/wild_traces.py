#!/usr/bin/env python3
"""Run the public traces "from the wild" through every command and print the
docs/REAL_WORLD.md table: per trace, nodes, the step definition, predicted vs measured.

The traces themselves are not in this repository (they belong to their
authors and are fetched, not committed): ``tests/real_traces/wild_traces.json``
names each file's repository, commit, path and sha256. Point ``--dir`` (or
``PT2CHAKRA_WILD_TRACES``) at a folder laid out as ``<folder>/<file>``;
the default is ``../shared/traces/wild``.

    python scripts/wild_traces.py [--dir DIR] [--markdown table.md] [--jobs 2]

For each trace: ``convert`` each rank's Kineto trace alone (and with its host
ET where there is one), ``validate``, ``simulate --json`` (each rank alone,
and the ranks together where the entry says so) and ``report``. Exits 1 when
any command fails, or when a replay misses its measured step by more than
``MAX_ERROR_PCT`` without the entry's ``expected_outside_5pct`` reason.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tests" / "real_traces" / "wild_traces.json"
DEFAULT_DIR = ROOT.parent / "shared" / "traces" / "wild"
ENV_DIR = "PT2CHAKRA_WILD_TRACES"
# The target: a steady-state step replays within 5 % of the measured one.
MAX_ERROR_PCT = 5.0


def traces_dir(given: str | None = None) -> Path:
    return Path(given or os.environ.get(ENV_DIR) or DEFAULT_DIR)


def load_manifest() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(MANIFEST.read_text())
    return entries


@dataclass
class Outcome:
    """What the commands did on one trace."""

    name: str
    failures: list[str] = field(default_factory=list)  # "command: last stderr line"
    nodes: int = 0
    step: str = ""
    predicted_us: float | None = None
    measured_us: float | None = None
    error_pct: float | None = None
    accounted: bool = True
    note: str = ""


def _run(cmd: list[str], out: Outcome, what: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "pt2chakra", *cmd], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0 or "Traceback" in proc.stderr:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        out.failures.append(f"{what} (exit {proc.returncode}): {last}")
    return proc


def _checked_files(entry: dict[str, Any], folder: Path) -> str | None:
    """Why the trace cannot be used (a missing or altered file), or None."""
    for name, digest in entry["sha256"].items():
        path = folder / name
        if not path.is_file():
            return f"missing {path}"
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return f"{path}: sha256 differs from the manifest"
    return None


def run_trace(entry: dict[str, Any], root: str) -> Outcome:
    """Every command on one trace, in a scratch folder."""
    out = Outcome(entry["name"], note=entry.get("expected_outside_5pct", ""))
    folder = Path(root) / entry["folder"]
    problem = _checked_files(entry, folder)
    if problem is not None:
        out.failures.append(problem)
        return out
    with tempfile.TemporaryDirectory() as tmp:
        ets = [_convert_rank(entry, folder, rank, Path(tmp), out) for rank in entry["ranks"]]
        ets = [et for et in ets if et is not None]
        if not ets:
            return out
        sims = [ets] if entry.get("together") else [[et] for et in ets]
        for group in sims:  # validate checks the ranks against each other too
            _run(["validate", *group], out, "validate")
        for group in sims:
            proc = _run(["simulate", "--json", *group], out, "simulate")
            if proc.returncode == 0:
                _read_simulation(json.loads(proc.stdout), out)
        _run(["report", *sims[0], "-o", str(Path(tmp) / "r.html"), "--no-what-if"], out,
             "report")
    return out


def run_all(entries: list[dict[str, Any]], root: str, jobs: int) -> list[Outcome]:
    """``run_trace`` on each entry, ``jobs`` at a time (threads suffice: every
    command runs in a process of its own). Used by ``main`` and the tests."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(run_trace, entries, [root] * len(entries)))


def _convert_rank(entry: dict[str, Any], folder: Path, rank: dict[str, Any], tmp: Path,
                  out: Outcome) -> str | None:
    """Kineto alone (and with the host ET where there is one); the .et the
    replay uses (the pair's where there is one)."""
    kineto = str(folder / rank["kineto"])
    alone = tmp / f"k{rank['rank']}.et"
    report = tmp / f"k{rank['rank']}.json"
    proc = _run(["convert", "--device-trace", kineto, "-o", str(alone), "--report", str(report)],
                out, f"convert rank {rank['rank']}")
    if proc.returncode != 0:
        return None
    doc = json.loads(report.read_text())
    out.nodes += doc["nodes"]
    out.step = out.step or doc.get("step", "")
    out.accounted &= _accounted(doc)
    if not rank.get("host_et"):
        return str(alone)
    pair = tmp / f"p{rank['rank']}.et"
    proc = _run(["convert", "--host-trace", str(folder / rank["host_et"]), "--device-trace",
                 kineto, "-o", str(pair)], out, f"convert rank {rank['rank']} with host ET")
    return str(pair) if proc.returncode == 0 else None


def _accounted(doc: dict[str, Any]) -> bool:
    """The report's promise: every op and activity kept or dropped with a reason."""
    host = doc["host_ops_in"] == doc["host_ops_kept"] + sum(doc["host_ops_dropped"].values())
    gpu = doc["gpu_activities_in"] == (doc["gpu_activities_kept"]
                                       + sum(doc["gpu_activities_dropped"].values()))
    return bool(host and gpu)


def _read_simulation(doc: dict[str, Any], out: Outcome) -> None:
    """Keep the worst error of the trace's replays."""
    err = doc.get("error_pct")
    if err is None:
        return
    if out.error_pct is None or abs(err) > abs(out.error_pct):
        out.predicted_us, out.measured_us, out.error_pct = (
            doc["predicted_step_us"], doc["measured_step_us"], err)


def problems(outcome: Outcome) -> list[str]:
    """What makes a trace's row a failure."""
    found = list(outcome.failures)
    if not outcome.accounted:
        found.append("accounting: an op or activity is neither kept nor dropped with a reason")
    if outcome.error_pct is not None and abs(outcome.error_pct) > MAX_ERROR_PCT \
            and not outcome.note:
        found.append(f"replay {outcome.error_pct:+.2f} % from the measured step, no reason given")
    return found


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def markdown(entries: list[dict[str, Any]], outcomes: list[Outcome]) -> str:
    rows = ["| trace | kinds | source | nodes | step | predicted µs | measured µs | error | note |",
            "|---|---|---|---|---|---|---|---|---|"]
    for entry, o in zip(entries, outcomes):
        err = "–" if o.error_pct is None else f"{o.error_pct:+.2f} %"
        step = o.step.split(": ")[0].split(";")[0]
        note = "; ".join(problems(o)) or o.note
        rows.append(f"| {o.name} | {', '.join(entry['kinds'])} | [{entry['repo']}]"
                    f"({entry['source_url']}) | {o.nodes} | {step} | {_fmt(o.predicted_us)} | "
                    f"{_fmt(o.measured_us)} | {err} | {note} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help=f"the traces (default ${ENV_DIR} or {DEFAULT_DIR})")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="these traces only")
    args = parser.parse_args(argv)
    root = traces_dir(args.dir)
    if not root.is_dir():
        print(f"no traces at {root}: see {MANIFEST.name} for where each comes from",
              file=sys.stderr)
        return 2
    entries = [e for e in load_manifest() if not args.only or e["name"] in args.only]
    outcomes = run_all(entries, str(root), args.jobs)
    table = markdown(entries, outcomes)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)
    return 1 if any(problems(o) for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())

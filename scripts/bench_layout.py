"""Parallel layouts checked against measurements (``make bench-layout``).

Records the small transformer of ``pt2chakra collect --tp/--pp/--dp`` under
each layout (TP 2 and 4, PP 2 and 4 with GPipe and 1F1B, TP2 x DP2, PP2 x
DP2) over gloo on CPU, every rank in its own network namespace on a shaped
veth link (``scripts/bench_machine.py``, the bed of ``make bench-scale``),
each rank started alone with ``collect --rank``. Each recorded step is
converted with ``convert --ranks`` and replayed with ``simulate``; the table
gives the profiled step (from the trace) and the real unprofiled step
(``meta.json``), the replay's error on the step and its worst rank, ``simulate
--without-profiler`` against the real step and, where ``$ASTRA_SIM_BIN`` is
set, ASTRA-sim's on the job ``astra-sim`` writes (``astra-sim --check``).

The machine may be shared: each run notes the cores other processes used
meanwhile; a run above ``--max-other`` is recorded again (at most
``--retries`` times), else the least contaminated is kept and flagged.
Without root, ``ip``, ``tc`` or torch it prints one line and exits 0.
``--reuse`` prints the table from the recordings kept in ``--out`` (no root).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_machine as machine  # noqa: E402
from bench_scale import (  # noqa: E402
    ASTRA_BIN_ENV,
    Spread,
    astra_step_us,
    err_pct,
    real_step_us,
)

ROOT = Path(__file__).resolve().parent.parent
PT2CHAKRA = [sys.executable, "-m", "pt2chakra"]
DEFAULT_OUT = ROOT / "bench_data" / "layout"


@dataclass(frozen=True)
class Job:
    """One layout: its folder's name and ``collect``'s options for it."""

    label: str
    options: tuple[str, ...]
    world_size: int


# The layouts the issue asks for; 4 ranks at most (8 processes on 2 cores
# would be a benchmark of the scheduler). PP2 x DP2 runs 1F1B, torchtitan's
# default schedule.
JOBS = (
    Job("tp2", ("--tp", "2"), 2),
    Job("tp4", ("--tp", "4"), 4),
    Job("pp2-gpipe", ("--pp", "2", "--schedule", "gpipe"), 2),
    Job("pp2-1f1b", ("--pp", "2", "--schedule", "1f1b"), 2),
    Job("pp4-gpipe", ("--pp", "4", "--schedule", "gpipe"), 4),
    Job("pp4-1f1b", ("--pp", "4", "--schedule", "1f1b"), 4),
    Job("tp2xdp2", ("--tp", "2", "--dp", "2"), 4),
    Job("pp2xdp2-gpipe", ("--pp", "2", "--dp", "2", "--schedule", "gpipe"), 4),
    Job("pp2xdp2-1f1b", ("--pp", "2", "--dp", "2", "--schedule", "1f1b"), 4),
)
# Each rank's link, both directions. At 1 Gbit/s TP2's eight 512 KB
# all-reduces take ~60 ms of a ~190 ms step (at 200 Mbit/s: ~180 of 300 ms)
# and PP's 128 KB sends a few ms each; TP2 x DP2's FSDP2 gathers and
# reductions (~30 MB per rank and step) still take most of its step, as data
# parallel over a slow link does (measured 2026-12-07 on the 2-core machine).
RATE_MBIT = 1000.0
# collect's defaults (4 blocks of width 512, 8 sequences of 32 tokens, 4
# micro-batches): a step of 0.2-0.5 s per rank on the 2-core machine.
STEPS = 2  # recorded steps per run
NAME = "l"
MASTER_PORT = 29621  # inside the namespaces: no other process listens there
RECORD_TIMEOUT_S = 600.0
RETRIES = 1  # the whole bench stays under ~15 min on the 2-core machine
RUN_NOTE = "run.json"


@dataclass
class Step:
    """One recorded step of every rank, converted and replayed."""

    ets: list[str]
    profiled_us: float = 0.0  # the step in the trace (span over the ranks)
    replay_us: float = 0.0
    rank_errors: list[float] = field(default_factory=list)
    without_profiler_us: float | None = None
    astra_us: float | None = None
    failure: str = ""


@dataclass
class Row:
    job: Job
    steps: list[Step] = field(default_factory=list)
    real_us: float | None = None
    other_cores: float = 0.0
    flagged: bool = False


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------


def collect_command(job: Job, rank: int, out: Path, steps: int) -> list[str]:
    return [*PT2CHAKRA, "collect", *job.options, "--rank", str(rank),
            "--master-addr", machine.rank_addr(0), "--master-port", str(MASTER_PORT),
            "--out-dir", str(out), "--name", NAME, "--steps", str(steps), "-q"]


def record_run(job: Job, out: Path, args: argparse.Namespace) -> float:
    """One run of the job's ranks on the bed; returns the cores other
    processes used meanwhile. Raises on a failed rank."""
    cmds = [machine.rank_command(r, collect_command(job, r, out, args.steps), args.nice)
            for r in range(job.world_size)]
    machine.fresh_run_dir(out)
    other = machine.record_on_bed(cmds, args.rate, out / "logs", RECORD_TIMEOUT_S, job.label)
    (out / RUN_NOTE).write_text(json.dumps({"job": job.label, "options": list(job.options),
                                            "world_size": job.world_size,
                                            "rate_mbit": args.rate, "steps": args.steps,
                                            "other_cores": other, "niceness": args.nice,
                                            "host_cores": os.cpu_count()}))
    return other


def measure(job: Job, folder: Path, args: argparse.Namespace) -> Path:
    """A clean run of ``job`` (a contaminated one recorded again, at most
    ``args.retries`` times; else the least contaminated); its folder."""
    tried: list[tuple[float, Path]] = []
    for attempt in range(1 + args.retries):
        quiet = machine.wait_quiet(args.max_other, args.patience)
        out = folder / f"run{attempt}"
        t0 = time.monotonic()
        other = record_run(job, out, args)
        tried.append((other, out))
        print(f"  {job.label}: recorded in {time.monotonic() - t0:.0f} s, others used "
              f"{other:.2f} cores (quiet check {quiet:.2f})"
              + ("" if other <= args.max_other else " (contaminated)"), flush=True)
        if other <= args.max_other:
            break
    return min(tried)[1]


def kept_run(folder: Path) -> Path | None:
    """The run an earlier bench kept in ``folder``: the least contaminated."""
    notes = [(json.loads(n.read_text())["other_cores"], n.parent)
             for n in folder.glob(f"*/{RUN_NOTE}")]
    return min(notes)[1] if notes else None


# --------------------------------------------------------------------------
# Converting and replaying (through the CLI: what a user runs)
# --------------------------------------------------------------------------


def _cli(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PT2CHAKRA, *args], capture_output=True, text=True)


def step_prefixes(run_dir: Path, steps: int) -> list[Path]:
    """Each recorded step's file prefix (``collect``'s names: NAME.rankN, or
    NAME.stepS.rankN for several steps)."""
    if steps == 1:
        return [run_dir / NAME]
    return [run_dir / f"{NAME}.step{s}" for s in range(steps)]


def convert_step(prefix: Path, world_size: int) -> tuple[list[str], str]:
    """``convert --ranks`` once per recorded step; the .et per rank, or why not."""
    ets = [f"{prefix}.{r}.et" for r in range(world_size)]
    if all(os.path.exists(et) for et in ets):
        return ets, ""
    done = _cli(["convert", "--ranks", f"0-{world_size - 1}", "-q",
                 "--host-trace", f"{prefix}.rank{{rank}}.host_et.json.gz",
                 "--device-trace", f"{prefix}.rank{{rank}}.kineto.json.gz",
                 "-o", f"{prefix}.{{rank}}.et"])
    return ets, "" if done.returncode == 0 else f"convert: {done.stderr.strip()}"


def replay(ets: list[str], work: Path) -> Step:
    """``simulate`` (step, every rank), ``simulate --without-profiler``
    (meta.json beside the traces) and ASTRA-sim (with ``$ASTRA_SIM_BIN``)."""
    step = Step(ets)
    sim = _cli(["simulate", *ets, "--json"])
    if sim.returncode != 0:
        step.failure = f"simulate: {sim.stderr.strip()}"
        return step
    doc = json.loads(sim.stdout)
    step.profiled_us, step.replay_us = doc["measured_step_us"], doc["predicted_step_us"]
    step.rank_errors = [r["error_pct"] or 0.0 for r in doc["ranks"]]
    real = _cli(["simulate", *ets, "--without-profiler", "--json"])
    if real.returncode == 0:
        step.without_profiler_us = float(json.loads(real.stdout)["predicted_step_us"])
    step.astra_us = astra_step_us(ets, work / "job")
    return step


def evaluate(job: Job, run_dir: Path, work: Path) -> Row:
    note = json.loads((run_dir / RUN_NOTE).read_text())
    row = Row(job, real_us=real_step_us(run_dir), other_cores=float(note["other_cores"]))
    for s, prefix in enumerate(step_prefixes(run_dir, int(note["steps"]))):
        ets, failure = convert_step(prefix, job.world_size)
        step = replay(ets, work / f"{job.label}{s}") if not failure else Step(ets)
        step.failure = step.failure or failure
        row.steps.append(step)
    return row


# --------------------------------------------------------------------------
# The table (no root, no torch: unit-tested)
# --------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return f"{value:+8.2f}%" if value is not None else f"{'n/a':>9s}"


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def format_row(row: Row) -> str:
    """One job: the profiled step (median [min-max] over its recorded steps),
    the real step, the replay's error (median step; worst rank of any step),
    --without-profiler against the real step, ASTRA-sim's error, others' cores."""
    ok = [s for s in row.steps if not s.failure]
    head = f"  {row.job.label:14s} {row.job.world_size:5d}"
    if not ok:
        why = row.steps[0].failure if row.steps else "no recordings"
        return f"{head}  {why.splitlines()[0] if why else 'failed'}"
    prof = Spread.of([s.profiled_us for s in ok])
    assert prof is not None
    replay = _median([err_pct(s.replay_us, s.profiled_us) for s in ok])
    worst = max((e for s in ok for e in s.rank_errors), key=abs, default=None)
    real = row.real_us
    wo = _median([s.without_profiler_us for s in ok if s.without_profiler_us is not None])
    astra = _median([err_pct(s.astra_us, s.profiled_us) for s in ok if s.astra_us is not None])
    real_s = f"{real / 1e3:9.1f}" if real else f"{'n/a':>9s}"
    return (f"{head} {prof.ms():>26s} {real_s} {_pct(replay)} {_pct(worst)} "
            f"{_pct(err_pct(wo, real) if wo is not None and real else None)} {_pct(astra)} "
            f"{row.other_cores:6.2f}" + ("  (contaminated run kept)" if row.flagged else "")
            + (f"  ({len(row.steps) - len(ok)} step(s) failed)" if len(ok) < len(row.steps)
               else ""))


def format_table(rows: Sequence[Row]) -> list[str]:
    return [
        "profiled step: median [min-max] over the recorded steps (ms); real: the unprofiled "
        "step (meta.json, the slowest rank's, median); replay: simulate vs the profiled step "
        "(median; worst rank of any step); w/o prof: simulate --without-profiler vs the real "
        "step; ASTRA-sim: astra-sim --check's step vs the profiled step; others: cores other "
        "processes used",
        f"  {'job':14s} {'ranks':>5s} {'profiled ms':>26s} {'real ms':>9s} {'replay':>9s} "
        f"{'worst rank':>9s} {'w/o prof':>9s} {'ASTRA-sim':>9s} {'others':>6s}",
        *(format_row(r) for r in rows),
    ]


def job_row(job: Job, args: argparse.Namespace, work: Path) -> Row:
    """The job's row: recorded now (or kept, with ``--reuse``), converted and
    replayed; a job that failed to record is a row saying so."""
    folder = args.out / job.label
    try:
        run_dir = kept_run(folder) if args.reuse else measure(job, folder, args)
    except RuntimeError as exc:
        print(f"  {exc}", flush=True)
        return Row(job, [Step([], failure=f"not recorded: {exc}")])
    if run_dir is None:
        print(f"  {job.label}: no recording in {folder}")
        return Row(job, [Step([], failure=f"no recording in {folder}")])
    row = evaluate(job, run_dir, work)
    row.flagged = row.other_cores > args.max_other
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="recordings go (and stay) here: OUT/<job>/run<k>/")
    labels = [j.label for j in JOBS]
    ap.add_argument("--jobs", nargs="+", choices=labels, default=labels, metavar="JOB",
                    help=f"the layouts to record (default all: {' '.join(labels)})")
    ap.add_argument("--steps", type=int, default=STEPS, help="recorded steps per run")
    ap.add_argument("--retries", type=int, default=RETRIES,
                    help="extra runs of a job when contaminated")
    ap.add_argument("--rate", type=float, default=RATE_MBIT, help="each link's Mbit/s")
    machine.add_bed_options(ap)
    ap.add_argument("--reuse", action="store_true",
                    help="print the table from the runs kept in --out (no recording, no root)")
    args = ap.parse_args(argv)
    if not args.reuse:
        reason = machine.why_not()
        if reason:
            print(f"bench-layout: skipped: {reason}")
            return 0
        machine.unwind_on_signals()
    t0 = time.monotonic()
    rows = []
    print(f"bench-layout: {args.rate:g} Mbit/s links, {args.steps} recorded step(s) per job; "
          f"ASTRA-sim: {os.environ.get(ASTRA_BIN_ENV) or 'not set ($' + ASTRA_BIN_ENV + ')'}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_layout.") as tmp:
        try:
            for job in (j for j in JOBS if j.label in args.jobs):
                rows.append(job_row(job, args, Path(tmp)))
        except KeyboardInterrupt:
            print("bench-layout: interrupted; namespaces removed")
            return 130
    print()
    print("\n".join(format_table(rows)))
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

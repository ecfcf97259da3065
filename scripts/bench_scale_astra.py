"""ASTRA-sim against ``simulate`` and the profiled step, per rank, on the
scale-out benchmark's recordings (``scripts/bench_scale.py``; no root).

For each recorded job (mode, world size; each kept recorded step) it writes
the ``astra-sim`` job, runs it (``$ASTRA_SIM_BIN``; without it the consumer
model, which gives the binary's cycles exactly) and prints ASTRA-sim's step
beside ``simulate``'s and the profiled one; then the same for each
extrapolated job (3, 4, 8 from 2; 8 from 4, on the bed's hosts as
``bench_scale.py`` predicts them), where the goal is ASTRA-sim within 3 % of
``simulate`` on the same files (issues 27, 32). ``--ranks`` adds every
rank's finish (on the ranks' shared clock: ASTRA-sim's time 0 is the
earliest rank's start).

    python scripts/bench_scale_astra.py --out bench_data/scale_run4 --sources 1 [--ranks]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_machine as machine  # noqa: E402
import bench_scale as bench  # noqa: E402

from pt2chakra.astra.job import BINARY_ENV, check_job, write_job  # noqa: E402
from pt2chakra.rules.conventions import error_pct  # noqa: E402
from pt2chakra.simulation import simulate  # noqa: E402

NS_PER_US = 1000.0


@dataclass(frozen=True)
class Compared:
    """One job: per rank, its finish on the ranks' shared clock (us)."""

    label: str
    profiled: list[float] | None  # None: an extrapolated job (no measurement)
    simulated: list[float]
    astra: list[float]
    binary: bool  # ASTRA-sim itself ran (else the consumer model)

    def step(self, finishes: list[float] | None) -> float | None:
        return max(finishes) if finishes else None


def compare(ets: list[str], work: Path, label: str, measured: bool) -> Compared:
    """``simulate`` and the ``astra-sim`` job of ``ets``, per rank."""
    sim = simulate(ets)
    simulated = [r.start_offset_us + r.predicted_step_us for r in sim.ranks]
    profiled = [r.start_offset_us + r.measured_step_us for r in sim.ranks] if measured else None
    job = work / "job" / "j"
    write_job(ets, job)
    binary = os.environ.get(BINARY_ENV)
    check = check_job(job, binary)
    if check.binary is not None:
        astra = [check.binary.finished[r] / NS_PER_US for r in sorted(check.binary.finished)]
    else:
        astra = [r.finished_ns / NS_PER_US for r in check.model.ranks]
    return Compared(label, profiled, simulated, astra, check.binary is not None)


def _pct(a: float | None, b: float | None) -> str:
    e = error_pct(a, b) if a is not None and b is not None else None
    return f"{e:+7.2f} %" if e is not None else f"{'n/a':>9s}"


def _ms(us: float | None) -> str:
    """A step in ms for the tables (nan where a job has none: no ranks)."""
    return f"{us / 1e3 if us is not None else float('nan'):8.1f}"


def print_job(c: Compared, ranks: bool) -> None:
    prof, sim, astra = c.step(c.profiled), c.step(c.simulated), c.step(c.astra)
    print(f"  {c.label:28s} profiled {_ms(prof)} ms  "
          f"simulate {_ms(sim)} ms ({_pct(sim, prof)})  ASTRA-sim {_ms(astra)} ms "
          f"(vs profiled {_pct(astra, prof)}, vs simulate {_pct(astra, sim)})"
          + ("" if c.binary else "  [consumer model]"))
    if not ranks:
        return
    for r, (s, a) in enumerate(zip(c.simulated, c.astra)):
        p = c.profiled[r] if c.profiled else None
        print(f"      rank {r:2d}: profiled {_ms(p)}  simulate "
              f"{_ms(s)}  ASTRA-sim {_ms(a)} ms  (ASTRA-sim vs simulate "
              f"{_pct(a, s)})")


def summary(rows: list[Compared], label: str, measured: bool) -> str:
    """The median over a job's recorded steps, as the benchmark's tables give it."""
    vs_prof = [error_pct(max(c.astra), max(c.profiled)) for c in rows if c.profiled]
    vs_sim = [error_pct(max(c.astra), max(c.simulated)) for c in rows]
    sim = [error_pct(max(c.simulated), max(c.profiled)) for c in rows if c.profiled]
    worst = max((error_pct(a, s) or 0.0 for c in rows for a, s in zip(c.astra, c.simulated)),
                key=abs)
    med = statistics.median
    head = f"  => {label:24s} median over {len(rows)}: "
    if measured:
        return (head + f"simulate {med(e for e in sim if e is not None):+6.2f} %, ASTRA-sim "
                f"{med(e for e in vs_prof if e is not None):+6.2f} % of profiled; ASTRA-sim vs "
                f"simulate {med(e for e in vs_sim if e is not None):+6.2f} % (worst rank "
                f"{worst:+.2f} %)")
    return head + (f"ASTRA-sim vs simulate {med(e for e in vs_sim if e is not None):+6.2f} % "
                   f"(worst rank {worst:+.2f} %)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=bench.DEFAULT_OUT,
                    help="a bench_scale.py output folder (OUT/<job>/w<ranks>/run<k>/)")
    ap.add_argument("--modes", nargs="+", choices=bench.MODES, default=list(bench.MODES))
    ap.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--runs", type=int, default=bench.RUNS)
    ap.add_argument("--steps", type=int, default=bench.STEPS)
    ap.add_argument("--max-other", type=float, default=machine.MAX_OTHER_CORES)
    ap.add_argument("--retries", type=int, default=bench.RETRIES)
    ap.add_argument("--sources", type=int, default=0, metavar="K",
                    help="the first K recorded steps of each job (0: all)")
    ap.add_argument("--no-predict", action="store_true", help="the recorded jobs only")
    ap.add_argument("--ranks", action="store_true", help="every rank's finish too")
    args = ap.parse_args(argv)
    results = {(mode, size): bench.reuse(args.out, mode, size, args)
               for mode in args.modes for size in args.world_sizes}
    with tempfile.TemporaryDirectory(prefix="bench_astra.") as tmp:
        print("recorded jobs: ASTRA-sim's job of each recorded step, against the profiled "
              "step and simulate")
        for (mode, size), m in sorted(results.items()):
            rows = []
            for i, rec in enumerate(m.recordings[:args.sources or None]):
                c = compare(rec.ets, Path(tmp) / f"{mode}{size}_{i}", f"{mode} x{size} #{i}",
                            True)
                print_job(c, args.ranks)
                rows.append(c)
            if rows:
                print(summary(rows, f"{mode} x{size}", True))
        if args.no_predict:
            return 0
        hosts = bench.bed_hosts(results)
        print("\nextrapolated jobs (" + " ".join(hosts) + "): ASTRA-sim against simulate on "
              "the same files")
        for (mode, size), m in sorted(results.items()):
            for src, dst in bench.PREDICTIONS:
                if size != src or (mode, dst) not in results:
                    continue
                rows = []
                for i, rec in enumerate(m.recordings[:args.sources or None]):
                    work = Path(tmp) / f"{mode}_{src}to{dst}_{i}"
                    work.mkdir(parents=True)
                    wrote = bench._cli(["extrapolate", *rec.ets, "--world-size", str(dst),
                                        "-o", str(work / "x"), "-q", *hosts])
                    if wrote.returncode != 0:
                        print(f"  extrapolate: {wrote.stderr.strip()}")
                        continue
                    ets = [str(work / f"x.{r}.et") for r in range(dst)]
                    c = compare(ets, work, f"{mode} {src}->{dst} #{i}", False)
                    print_job(c, args.ranks)
                    rows.append(c)
                if rows:
                    print(summary(rows, f"{mode} {src}->{dst}", False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

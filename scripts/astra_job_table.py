#!/usr/bin/env python3
"""docs/ASTRA_SIM.md's job table: jobs written by ``pt2chakra astra-sim -o
DIR/job`` (network fitted to the recorded collectives) run in real ASTRA-sim.

    ASTRA_SIM_BIN=/path/AstraSim_Analytical_Congestion_Unaware \\
        python scripts/astra_job_table.py [--traces ../shared/traces/dlrm_8gpu] \\
        [--whatif DIR]

1. The bundled gloo DDP sample and DLRM x8: the job's step in ASTRA-sim
   against the measured step.
2. With ``--whatif DIR`` (recordings kept by ``scripts/bench_whatif.py --out
   DIR``, gloo DDP at shaped loopback rates): per recorded step at rate A,
   the job as written (ASTRA-sim vs that step), and the job with network.yml's
   bandwidth scaled by B/A (latency as fitted) against the steps measured at
   rate B; medians over the recorded steps, as ``bench_whatif`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pt2chakra.astra.job import JobCheck, NetworkChoice, check_job, write_job

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"
RUN_NOTE = "run.json"  # bench_whatif's note per run folder: its rate and the neighbours' load
WHATIF_BATCH, WHATIF_ACCUMULATE = 64, 1  # bench_whatif's network settings


def convert_ranks(host: str, device: str, ranks: int, out: Path) -> list[str]:
    """``pt2chakra convert`` of each rank (``{rank}`` in the templates)."""
    files = []
    for rank in range(ranks):
        target = out / f"full.{rank}.et"
        subprocess.run([sys.executable, "-m", "pt2chakra", "convert", "-q", "--host-trace",
                        host.format(rank=rank), "--device-trace", device.format(rank=rank),
                        "-o", str(target)], check=True)
        files.append(str(target))
    return files


def job_row(label: str, files: list[str], prefix: Path, binary: str) -> str:
    job = write_job(files, prefix)
    check = check_job(job.prefix, binary)
    net = job.fit.network
    fitted = f"{net.topology}, {net.bandwidth_gbps:.4g} GB/s, {net.latency_ns / 1000:.4g} µs"
    residual = f"{job.fit.rms_error_pct:.2f} %" if job.fit.rms_error_pct is not None else "-"
    return (f"| {label} | {fitted} | {residual} | {check.astra_sim_step_us:,.0f} µs | "
            f"{check.model.predicted_step_us:,.0f} µs | {check.model.measured_step_us:,.0f} µs "
            f"| **{check.error_pct:+.2f} %** |")


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recorded step of one bench_whatif run."""

    rate_gbit: float
    other_cores: float
    ets: list[str]


def whatif_steps(folder: Path) -> dict[float, list[Recorded]]:
    """The network settings' recorded steps per rate (converted .et files, as
    bench_whatif left them)."""
    out: dict[float, list[Recorded]] = {}
    for note in sorted(folder.glob(f"*/{RUN_NOTE}")):
        d = json.loads(note.read_text())
        if (int(d["batch"]), int(d.get("accumulate", 1))) != (WHATIF_BATCH, WHATIF_ACCUMULATE):
            continue
        steps: dict[str, list[str]] = {}
        for et in sorted(note.parent.glob("w.*rank*.et")):
            steps.setdefault(et.name.split(".rank")[0], []).append(str(et))
        for ets in steps.values():
            out.setdefault(float(d["rate_gbit"]), []).append(
                Recorded(float(d["rate_gbit"]), float(d["other_cores"]), ets))
    return out


def run_job(rec: Recorded, prefix: Path, binary: str,
            choice: NetworkChoice | None = None) -> tuple[JobCheck, NetworkChoice]:
    """The job of one recorded step; returns its check and its network as
    a choice (to scale)."""
    job = write_job(rec.ets, prefix, choice=choice or NetworkChoice())
    net = job.fit.network
    return check_job(job.prefix, binary), NetworkChoice(net.topology, net.bandwidth_gbps,
                                                        net.latency_ns / 1000)


def whatif_rows(steps: dict[float, list[Recorded]], out: Path, binary: str) -> list[str]:
    measured = {rate: statistics.median(
        check_job(write_job(r.ets, out / f"m{rate:g}_{k}" / "job").prefix).model.measured_step_us
        or 0.0 for k, r in enumerate(recs)) for rate, recs in steps.items()}
    rows = []
    for src, recs in steps.items():
        same, scaled = {}, {}
        for k, rec in enumerate(recs):
            check, net = run_job(rec, out / f"s{src:g}_{k}" / "job", binary)
            same[k] = check.astra_sim_step_us or 0.0
            for dst in steps:
                if dst == src:
                    continue
                bandwidth = (net.bandwidth_gbps or 0.0) * dst / src
                choice = NetworkChoice(net.topology, bandwidth, net.latency_us)
                other, _ = run_job(rec, out / f"s{src:g}_{k}_to{dst:g}" / "job", binary, choice)
                scaled.setdefault(dst, []).append(other.astra_sim_step_us or 0.0)
        loads = sorted({r.other_cores for r in recs})
        load = ", ".join(f"{x:.2f}" for x in loads)
        med = statistics.median(same.values())
        rows.append(f"| {src:g} Gbit/s | {src:g} Gbit/s | as written | {measured[src] / 1000:.1f} ms "
                    f"| {med / 1000:.1f} ms | {_pct(med, measured[src])} | {len(recs)} | {load} |")
        for dst, values in scaled.items():
            med = statistics.median(values)
            rows.append(f"| {src:g} Gbit/s | {dst:g} Gbit/s | bandwidth ×{dst / src:g} | "
                        f"{measured[dst] / 1000:.1f} ms | {med / 1000:.1f} ms | "
                        f"{_pct(med, measured[dst])} | {len(recs)} | {load} |")
    return rows


def _pct(predicted: float, measured: float) -> str:
    return f"**{(predicted - measured) / measured * 100:+.1f} %**"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.environ.get("ASTRA_SIM_BIN"),
                        help="the unaware binary (default: $ASTRA_SIM_BIN)")
    parser.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces" / "dlrm_8gpu"))
    parser.add_argument("--whatif", type=Path, metavar="DIR",
                        help="recordings kept by scripts/bench_whatif.py --out DIR")
    args = parser.parse_args()
    if not args.bin:
        print("astra_job_table: set ASTRA_SIM_BIN or pass --bin", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="astrajob") as tmp:
        out = Path(tmp)
        print("| trace | network.yml (fitted) | fit: ASTRA-sim vs calibrated, rms | ASTRA-sim "
              "| consumer model | measured | ASTRA-sim vs measured |")
        print("|---|---|---|---|---|---|---|")
        (out / "gloo").mkdir()
        gloo = convert_ranks(f"{SAMPLE}.rank{{rank}}.host_et.json.gz",
                             f"{SAMPLE}.rank{{rank}}.kineto.json.gz", 2, out / "gloo")
        print(job_row("gloo DDP sample ×2", gloo, out / "gloo" / "job" / "job", args.bin))
        (out / "dlrm").mkdir()
        dlrm = convert_ranks(f"{args.traces}/rank{{rank}}.host_et.json.gz",
                             f"{args.traces}/rank{{rank}}.kineto.json.gz", 8, out / "dlrm")
        print(job_row("DLRM ×8", dlrm, out / "dlrm" / "job" / "job", args.bin))
        if args.whatif:
            steps = whatif_steps(args.whatif)
            if len(steps) < 2:
                print(f"astra_job_table: {args.whatif} holds recordings at "
                      f"{len(steps)} rate(s); two are needed", file=sys.stderr)
                return 2
            print()
            print("| recorded at | predicted for | network.yml | measured (median) | ASTRA-sim "
                  "(median) | error | recorded steps | others' cores per run |")
            print("|---|---|---|---|---|---|---|---|")
            print("\n".join(whatif_rows(steps, out / "whatif", args.bin)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

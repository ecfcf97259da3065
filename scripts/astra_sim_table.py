#!/usr/bin/env python3
"""Print what real ASTRA-sim predicts for our export in every mode, next to
our consumer model (``simulate --consumer astra-sim``) and the measured step.

    ASTRA_SIM_BIN=/path/AstraSim_Analytical_Congestion_Unaware \\
        python scripts/astra_sim_table.py [--traces ../shared/traces/dlrm_8gpu]

Converts the DLRM x8 pairs, exports them with each ``--cpu`` mode, runs the
unaware and the aware binary (the aware one sits next to the unaware one) on
the reference network (Ring, 8 NPUs, 50 GB/s, 500 ns; ``../shared/ASTRA_SIM.md``)
and on slower networks, and also a ``microbench`` and a ``from-text`` workload.
The ASTRA-sim tables of docs/ASTRA_SIM.md come from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pt2chakra.astra.binary import run_workload
from pt2chakra.astra.choices import CPU_MODES
from pt2chakra.astra.collective_time import AstraNetwork, AstraSystem
from pt2chakra.astra.consumer import consume

ROOT = Path(__file__).resolve().parents[1]
TEXT_WORKLOAD = """HYBRID_DATA_MODEL
4
conv1 -1 10 ALLTOALL 100 11 REDUCESCATTER 200 12 ALLREDUCE 300 5
conv2 -1 20 ALLTOALL 400 21 ALLGATHER 500 22 ALLREDUCE 600 5
fc1 -1 30 ALLREDUCE 700 31 ALLTOALL 800 32 ALLREDUCE 900 5
fc2 -1 40 ALLGATHER 110 41 ALLREDUCE 120 42 ALLTOALL 130 5
"""


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pt2chakra", args[0], "-q", *args[1:]], check=True)


def row(binary: str, label: str, files: list[str], network: AstraNetwork,
        measured: float | None) -> str:
    """One table row: the binary (unaware, aware), the consumer model, errors."""
    prefix = files[0].rsplit(".", 2)[0]
    groups = f"{prefix}.comm_groups.json"
    groups_arg = groups if os.path.exists(groups) else None
    system = AstraSystem()
    unaware = run_workload(binary, prefix, network, system, groups_arg)
    try:
        aware_net = dataclasses.replace(network, congestion_aware=True)
    except ValueError:  # e.g. a 2-NPU Ring, on which the aware binary aborts
        aware_net = None
    aware = run_workload(binary, prefix, aware_net, system, groups_arg) if aware_net else None
    model = consume(files, network).result
    real = max(unaware.finished.values()) / 1000
    aware_us = f"{max(aware.finished.values()) / 1000:,.0f}" if aware else "(aborts)"
    per_rank = max(abs(model.ranks[r].finished_ns - ns) / ns * 100
                   for r, ns in unaware.finished.items())
    error = f"{(real - measured) / measured * 100:+.2f} %" if measured else "-"
    warnings = len(unaware.warnings) + (len(aware.warnings) if aware else 0)
    return (f"| {label} | {real:,.0f} | {aware_us} | {error} | "
            f"{model.predicted_step_us:,.0f} | {per_rank:.3f} % | {warnings} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.environ.get("ASTRA_SIM_BIN"),
                        help="the unaware binary (default: $ASTRA_SIM_BIN)")
    parser.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces" / "dlrm_8gpu"))
    args = parser.parse_args()
    if not args.bin:
        print("astra_sim_table: set ASTRA_SIM_BIN or pass --bin", file=sys.stderr)
        return 2
    print("| export | ASTRA-sim unaware µs | aware µs | vs measured | consumer model µs "
          "| model vs binary, worst rank | warning lines |")
    print("|---|---|---|---|---|---|---|")
    ring = AstraNetwork("Ring", 8, 50.0, 500.0)
    with tempfile.TemporaryDirectory(prefix="astratable") as tmp:
        out = Path(tmp)
        full = []
        for rank in range(8):
            et = out / f"dlrm.{rank}.et"
            cli("convert", "--host-trace", f"{args.traces}/rank{rank}.host_et.json.gz",
                "--device-trace", f"{args.traces}/rank{rank}.kineto.json.gz", "-o", str(et))
            full.append(str(et))
        measured = 20733.0
        for mode in CPU_MODES:
            prefix = out / mode / "dlrm"
            prefix.parent.mkdir()
            cli("astra-sim", *full, "-o", str(prefix), "--cpu", mode)
            files = [f"{prefix}.{r}.et" for r in range(8)]
            label = f"`--cpu {mode}`" + (" (default)" if mode == CPU_MODES[0] else "")
            print(row(args.bin, f"DLRM ×8, {label}", files, ring, measured))
            if mode == CPU_MODES[0]:
                for bandwidth in (5.0, 0.5, 0.05):
                    slow = dataclasses.replace(ring, bandwidth_gbps=bandwidth)
                    print(row(args.bin, f"DLRM ×8, `--cpu {mode}`, {bandwidth:g} GB/s", files,
                              slow, None))
                fc = AstraNetwork("FullyConnected", 8, 150.0, 500.0)
                print(row(args.bin, f"DLRM ×8, `--cpu {mode}`, FullyConnected 150 GB/s", files,
                          fc, measured))
        micro = out / "micro" / "mb"
        micro.parent.mkdir()
        cli("microbench", "--collective", "ALL_REDUCE", "--size", "1048576", "--npus", "8",
            "--steps", "4", "--compute", "50", "-o", str(micro))
        print(row(args.bin, "microbench ALL_REDUCE 1 MiB, 4 steps of 50 µs + collective",
                  [f"{micro}.{r}.et" for r in range(8)], ring, None))
        gloo = out / "gloo"
        gloo.mkdir()
        sample = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"
        for rank in range(2):
            cli("convert", "--host-trace", f"{sample}.rank{rank}.host_et.json.gz",
                "--device-trace", f"{sample}.rank{rank}.kineto.json.gz",
                "-o", str(gloo / f"full.{rank}.et"))
        cli("astra-sim", str(gloo / "full.0.et"), str(gloo / "full.1.et"), "-o", str(gloo / "g"))
        print(row(args.bin, "gloo DDP sample ×2, `--cpu serial`",
                  [f"{gloo}/g.{r}.et" for r in range(2)], AstraNetwork("Ring", 2, 50.0, 500.0),
                  16382.0))
        text = out / "text"
        text.mkdir()
        (text / "w.txt").write_text(TEXT_WORKLOAD)
        cli("from-text", str(text / "w.txt"), "--npus", "8", "-o", str(text / "w"))
        print(row(args.bin, "from-text HYBRID_DATA_MODEL, 4 layers",
                  [f"{text}/w.{r}.et" for r in range(8)], ring, None))
    return 0


if __name__ == "__main__":
    sys.exit(main())

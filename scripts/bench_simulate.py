"""Simulation throughput (nodes per second) on the largest available sample.

Usage: .venv/bin/python scripts/bench_simulate.py [trace.et | host_et.json.gz kineto.json.gz]

Without arguments: bench_data/gpt_large_cpu (converted to a temporary .et)
if present, else the bundled samples/gpt_tiny_cpu. Loading the .et (protobuf
decoding) is timed apart from the replay itself.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source(argv: list[str], tmp: str) -> str:
    if len(argv) == 1 and argv[0].endswith((".et", ".et.gz")):
        return argv[0]
    if len(argv) == 2:
        host, kineto = argv
    else:
        for stem in ("bench_data/gpt_large_cpu", "samples/gpt_tiny_cpu/gpt_tiny_cpu"):
            host = os.path.join(ROOT, f"{stem}.host_et.json.gz")
            kineto = os.path.join(ROOT, f"{stem}.kineto.json.gz")
            if os.path.exists(host) and os.path.exists(kineto):
                break
    from pt2chakra.conversion.api import convert

    out = os.path.join(tmp, "bench.et")
    convert(host, kineto, out)
    print(f"converted {os.path.relpath(host, ROOT)}")
    return out


def main(argv: list[str]) -> int:
    from pt2chakra.simulation.engine import Simulator, load
    from pt2chakra.simulation.results import SimConfig

    with tempfile.TemporaryDirectory() as tmp:
        path = _source(argv, tmp)
        t0 = time.perf_counter()
        graphs = load([path])
        t1 = time.perf_counter()
        sim = Simulator(graphs, [path])
        sim.prepared(0)
        t2 = time.perf_counter()
        res, _ = sim.run(SimConfig())
        t3 = time.perf_counter()
        sim.predict(SimConfig(compute_scale=0.5))
        t4 = time.perf_counter()
    nodes = sum(len(n) for _, n in graphs)
    edges = sum(len(x.data_deps) for _, n in graphs for x in n)
    print(f"{nodes} nodes, {edges} edges")
    print(f"load .et        {t1 - t0:6.2f} s")
    print(f"prepare         {t2 - t1:6.2f} s")
    print(f"replay + report {t3 - t2:6.2f} s  ({nodes / (t3 - t2):,.0f} nodes/s, with critical path)")
    print(f"what-if replay  {t4 - t3:6.2f} s  ({nodes / (t4 - t3):,.0f} nodes/s)")
    print(f"simulate total  {t3 - t1:6.2f} s  ({nodes / (t3 - t1):,.0f} nodes/s, prepare + replay)")
    print(f"predicted {res.predicted_step_us:.0f} us, measured {res.measured_step_us:.0f} us, "
          f"error {res.error_pct:+.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

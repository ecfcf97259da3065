"""Read throughput (nodes per second) of ``read_et`` on a given ``.et`` file.

Usage: .venv/bin/python scripts/bench_read.py TRACE.et [--repeat N]

Make a 100k-node trace first, e.g.::

    .venv/bin/python -m pt2chakra convert \\
        --host-trace bench_data/gpt_large_cpu.host_et.json.gz \\
        --device-trace bench_data/gpt_large_cpu.kineto.json.gz -o /tmp/read/large.et

Prints the best of N runs (default 3): every node is materialized (the
iterator is drained), nothing else is done with it.
"""

from __future__ import annotations

import argparse
import time

from pt2chakra.chakra.io import read_et


def _one_run(path: str) -> tuple[int, float]:
    start = time.perf_counter()
    _metadata, nodes = read_et(path)
    count = 0
    for _node in nodes:
        count += 1
    return count, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help=".et or .et.gz file")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    args = parser.parse_args()
    best = None
    count = 0
    for _ in range(max(1, args.repeat)):
        count, seconds = _one_run(args.trace)
        best = seconds if best is None else min(best, seconds)
    assert best is not None
    print(f"{args.trace}: {count} nodes in {best:.3f} s = {count / best:,.0f} nodes/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

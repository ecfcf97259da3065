#!/usr/bin/env python3
"""Where convert's and simulate's CPU time goes, stage by stage, against each
stage's floor (docs/PERFORMANCE.md).

Convert: the host ET read (inflate + typed decode + normalise), the Kineto
trace read, the link, the graph (built and checked for cycles), the encoding
and write of the ``.et``. Simulate: the lean read, the preparation, the
replay, the critical path. Floors: inflating each input (zlib, one pass) and
decoding it into the loaders' own typed structs, without the per-op work
that follows; the ``.et`` read's floor is reading its bytes. Each stage is
timed with ``time.process_time`` (this process's user + sys: CPU time, the
figure to compare on a shared machine), the collector paused as the
commands pause it, median of ``--repeat`` runs.

    .venv/bin/python scripts/bench_stages.py HOST.json.gz KINETO.json.gz [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pt2chakra.chakra.io import write_et
from pt2chakra.conversion.graph_builder import build_graph
from pt2chakra.conversion.linker import link
from pt2chakra.files import gc_paused, open_input
from pt2chakra.pytorch.host_decode import SCHEMA_LAYOUTS, decode_doc, schema_version
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.json_input import decode
from pt2chakra.pytorch.kineto_decode import event_types
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.simulation.critical_path import critical_path_of
from pt2chakra.simulation.engine import read_lean
from pt2chakra.simulation.event_loop import run_replay
from pt2chakra.simulation.prepare import prepare_graphs
from pt2chakra.simulation.rank_results import rank_results
from pt2chakra.simulation.results import SimConfig

CHUNK = 1 << 20  # inflate this much at a time, as the streaming readers do


def cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(CPU seconds of ``fn()``, its result), the collector paused."""
    with gc_paused():
        t0 = time.process_time()
        out = fn()
        return time.process_time() - t0, out


def inflate(path: Path) -> bytes:
    """The file's content, inflated as the readers inflate it (``open_input``:
    ISA-L where installed), a chunk at a time."""
    parts = []
    stream, _gzipped = open_input(path)
    with stream:
        while chunk := stream.read(CHUNK):
            parts.append(chunk)
    return b"".join(parts)


def host_typed(data: bytes) -> Any:
    head = data[:4096].decode(errors="replace")
    version = head.split('"schema"', 1)[1].split('"')[1]
    return decode_doc("host", data, SCHEMA_LAYOUTS[schema_version("host", version)])


def kineto_typed(data: bytes) -> Any:
    return decode("kineto", data, event_types(False)[1])


def floors(host: Path, kineto: Path) -> dict[str, float]:
    """Inflating and typed-decoding each input, nothing more."""
    t: dict[str, float] = {}
    t["host read floor: inflate"], host_bytes = cpu(lambda: inflate(host))
    t["host read floor: typed decode"], _ = cpu(lambda: host_typed(host_bytes))
    t["kineto read floor: inflate"], kineto_bytes = cpu(lambda: inflate(kineto))
    t["kineto read floor: typed decode"], _ = cpu(lambda: kineto_typed(kineto_bytes))
    return t


def conversion(host: Path, kineto: Path, out: Path) -> dict[str, float]:
    """``convert`` stage by stage, its ``.et`` written to ``out``."""
    t: dict[str, float] = {}
    t["convert: host read + decode"], h = cpu(lambda: load_host_trace(str(host)))
    t["convert: kineto read + decode"], k = cpu(
        lambda: load_kineto_trace(str(kineto), None, inputs=False))
    t["convert: link"], linked = cpu(lambda: link(h, k))
    t["convert: graph"], graph = cpu(lambda: build_graph(linked))
    t["convert: encode + write"], _ = cpu(
        lambda: write_et(str(out), graph.metadata, graph.framed_nodes()))
    return t


def simulation(et: Path) -> dict[str, float]:
    """``simulate`` of ``et`` stage by stage."""
    t: dict[str, float] = {}
    t["simulate read floor: bytes"], _ = cpu(et.read_bytes)
    t["simulate: read"], g = cpu(lambda: read_lean(str(et)))
    cfg = SimConfig()
    t["simulate: prepare"], p = cpu(lambda: prepare_graphs([g], [str(et)], cfg.link_streams()))
    t["simulate: replay"], (run, _align, _model) = cpu(lambda: run_replay(p, cfg))
    t["simulate: rank results"], _ = cpu(lambda: rank_results(p, run))
    t["simulate: critical path"], _ = cpu(lambda: critical_path_of(p, run))
    return t


def one_run(host: Path, kineto: Path, out: Path) -> dict[str, float]:
    return {**floors(host, kineto), **conversion(host, kineto, out), **simulation(out)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("host", type=Path)
    p.add_argument("kineto", type=Path)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_stages.") as tmp:
        runs = [one_run(args.host, args.kineto, Path(tmp) / "out.et") for _ in range(args.repeat)]
    compiled = "pure Python" if os.environ.get("PT2CHAKRA_PURE_PYTHON") else "compiled if built"
    print(f"{args.host.name}: median CPU-s of {args.repeat} ({compiled}; load {os.getloadavg()[0]:.1f})")
    for name in runs[0]:
        print(f"  {name:<36} {statistics.median(r[name] for r in runs):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

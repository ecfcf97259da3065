"""The Python API: one call per job, used by the CLI and importable by users.

    from pt2chakra.api import convert
    report = convert("rank0.host_et.json.gz", "rank0.kineto.json.gz", "rank0.et")
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TypeVar

import msgspec
import orjson

from pt2chakra.atomic import write_atomic
from pt2chakra.chakra_wire import write_et
from pt2chakra.graph import ChakraGraph, build_graph
from pt2chakra.host_trace import load_host_trace
from pt2chakra.jsonio import gc_paused
from pt2chakra.kineto_trace import load_kineto_trace
from pt2chakra.linker import LinkedTrace, link
from pt2chakra.model import InputError
from pt2chakra.validate import break_cycles_in, describe_cycle, find_cycle_in

log = logging.getLogger(__name__)

T = TypeVar("T")


class ConversionReport(msgspec.Struct):
    """What ``convert`` did, op by op accounted for."""

    host_trace: str
    device_trace: str | None
    output: str
    link_method: str
    host_ops_in: int
    host_ops_linked: int
    host_ops_kept: int
    host_ops_dropped: dict[str, int]
    gpu_activities_in: int
    gpu_activities_kept: int
    gpu_activities_dropped: dict[str, int]
    nodes: int
    nodes_by_type: dict[str, int]
    edges_by_kind: dict[str, int]
    cycles_broken: list[str]
    seconds: float

    def accounted(self) -> bool:
        """Every input op is kept or dropped with a reason."""
        host_ok = self.host_ops_in == self.host_ops_kept + sum(self.host_ops_dropped.values())
        gpu_ok = self.gpu_activities_in == (self.gpu_activities_kept
                                            + sum(self.gpu_activities_dropped.values()))
        return host_ok and gpu_ok

    def summary(self) -> str:
        lines = [
            f"{self.output}: {self.nodes} nodes "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.nodes_by_type.items())),
            f"  host ops: {self.host_ops_in} in, {self.host_ops_linked} linked ({self.link_method}),"
            f" {self.host_ops_kept} kept"
            + "".join(f"; {v} dropped: {k}" for k, v in self.host_ops_dropped.items()),
        ]
        if self.device_trace is not None:
            lines.append(
                f"  GPU activities: {self.gpu_activities_in} in, {self.gpu_activities_kept} kept"
                + "".join(f"; {v} dropped: {k}" for k, v in self.gpu_activities_dropped.items()))
        lines.append("  edges: " + ", ".join(f"{k} {v}" for k, v in sorted(self.edges_by_kind.items())))
        for text in self.cycles_broken:
            lines.append(f"  broke cycle: {text}")
        lines.append(f"  {self.seconds:.2f} s")
        return "\n".join(lines)


class CycleError(InputError):
    """The linked graph has a cycle and the user did not ask to break it."""


class Stages:
    """Progress on stderr for work that takes more than a moment: one line
    per stage when stderr is a terminal (or forced), silent otherwise."""

    def __init__(self, total: int, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.t0 = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        log.debug("stage %d/%d: %s", self.done, self.total, what)
        if self.enabled:
            elapsed = time.perf_counter() - self.t0
            sys.stderr.write(f"\r[{self.done}/{self.total}] {what} ({elapsed:.1f}s)\x1b[K")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def counting(self, items: Iterable[T], total: int, what: str) -> Iterable[T]:
        """``items`` unchanged; with progress on, a bar of ``what`` done so far
        (redrawn at most every PROGRESS_REDRAW_S so that it costs nothing)."""
        if not self.enabled or total <= 0:
            return items
        return self._bar(items, total, what)

    def _bar(self, items: Iterable[T], total: int, what: str) -> Iterator[T]:
        next_draw = time.perf_counter() + PROGRESS_REDRAW_S
        for count, item in enumerate(items, 1):
            if count & 1023 == 0 and time.perf_counter() >= next_draw:
                next_draw += PROGRESS_REDRAW_S
                filled = PROGRESS_WIDTH * count // total
                sys.stderr.write(f"\r[{self.done + 1}/{self.total}] {what} "
                                 f"[{'#' * filled}{'.' * (PROGRESS_WIDTH - filled)}] "
                                 f"{count}/{total}\x1b[K")
                sys.stderr.flush()
            yield item


# A progress bar redraws at most this often (a terminal cannot show more) and
# is this many characters wide.
PROGRESS_REDRAW_S = 0.1
PROGRESS_WIDTH = 30


def link_traces(host_trace: str | os.PathLike[str], device_trace: str | os.PathLike[str] | None,
                stages: Stages | None = None) -> LinkedTrace:
    """Load both traces and link them (host only when ``device_trace`` is None)."""
    stages = stages or Stages(0, enabled=False)
    with gc_paused():
        host = load_host_trace(str(host_trace))
        stages.step("host trace loaded")
        kineto = None
        if device_trace is not None:
            kineto = load_kineto_trace(str(device_trace))
            stages.step("device trace loaded")
        linked = link(host, kineto)
        stages.step("linked")
        return linked


def convert(host_trace: str | os.PathLike[str], device_trace: str | os.PathLike[str] | None,
            output: str | os.PathLike[str], *, rank: int | None = None,
            break_cycles_: bool = False, progress: bool | None = None,
            profile: str | None = None, cpu: str = "drop") -> ConversionReport:
    """Link (when a Kineto trace is given) and convert to a Chakra ``.et``.

    ``profile="astra-sim"`` writes what today's ASTRA-sim runs instead:
    ``output`` is then a prefix for ``<prefix>.<rank>.et`` (see ``astra_sim``);
    ``cpu="drop"`` removes CPU nodes but keeps their time as GPU-side
    ``cpu_gap`` nodes, ``"keep"`` keeps them, ``"drop-no-gaps"`` loses it. Raises ``InputError``
    for bad input and ``CycleError`` when the graph has a cycle (unless
    ``break_cycles_``); no output file is left behind then."""
    t0 = time.perf_counter()
    stages = Stages(5 if device_trace is not None else 4, progress)
    with gc_paused():
        linked = link_traces(host_trace, device_trace, stages)
        graph = build_graph(linked, rank=rank)
        broken = _ensure_acyclic(graph, str(output), break_cycles_)
        stages.step("graph built and checked")
        if profile == "astra-sim":
            from pt2chakra.astra_sim import write_astra_sim

            write_astra_sim(graph.metadata, graph.nodes(), output, rank=rank, cpu=cpu,
                            inputs=[host_trace, device_trace])
        elif profile is None:
            total = graph.host_ops_kept + graph.gpu_kept
            write_et(str(output), graph.metadata,
                     stages.counting(graph.encoded_nodes(), total, "writing nodes"))
        else:
            raise ValueError(f"unknown output profile {profile!r}")
        stages.step(f"wrote {output}")
    report = _report(graph, str(host_trace), device_trace, str(output), broken,
                     time.perf_counter() - t0)
    if not report.accounted():
        raise AssertionError(f"accounting mismatch: {report}")
    return report


def _ensure_acyclic(graph: ChakraGraph, output: str, fix: bool) -> list[str]:
    ids = graph.node_ids()  # unique by construction (host ids, then fresh GPU ids)
    cycle = find_cycle_in(ids, graph.deps)
    if not cycle:
        return []
    if not fix:
        raise CycleError(output, "not written: dependency cycle "
                         + describe_cycle(cycle, graph.node_names())
                         + " (use --break-cycles to drop the least reliable edge kind)")
    return [f"dropped {e.kind} edge {e.src} -> {e.dst}" for e in break_cycles_in(ids, graph.deps)]


def _report(graph: ChakraGraph, host_trace: str, device_trace: object, output: str,
            broken: list[str], seconds: float) -> ConversionReport:
    by_kind = Counter([k for srcs in graph.deps.values() for _, k in srcs])
    return ConversionReport(
        host_trace=host_trace, device_trace=str(device_trace) if device_trace is not None else None,
        output=output, link_method=graph.link_method, host_ops_in=graph.host_ops_in,
        host_ops_linked=graph.linked_ops, host_ops_kept=graph.host_ops_kept,
        host_ops_dropped=graph.host_ops_dropped, gpu_activities_in=graph.gpu_in,
        gpu_activities_kept=graph.gpu_kept, gpu_activities_dropped=graph.gpu_dropped,
        nodes=graph.host_ops_kept + graph.gpu_kept, nodes_by_type=graph.node_type_counts(),
        edges_by_kind={k.name.lower(): v for k, v in by_kind.items()},
        cycles_broken=broken, seconds=round(seconds, 3))


def write_report(report: ConversionReport, path: str | os.PathLike[str]) -> None:
    """Write the report as JSON, atomically."""
    write_atomic(path, orjson.dumps(msgspec.to_builtins(report), option=orjson.OPT_INDENT_2))

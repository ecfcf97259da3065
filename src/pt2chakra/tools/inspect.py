"""``pt2chakra inspect``: what is in an ``.et`` file, in one streaming pass."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

import msgspec

from pt2chakra.chakra.dep_kinds import dep_kinds_of
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType, attr_dict
from pt2chakra.errors import printable
from pt2chakra.rules.conventions import COMM_NODE_TYPES, CPU_LANE, STREAM_LANE, Lane, lane_of
from pt2chakra.rules.layout import Layout, LayoutReader, job_layout
from pt2chakra.simulation.compute_model import ComputeModel, fit_compute_model

TOP_OPS = 10
# Sharded ops named on the text summary's line (all of them in --json).
SHARDED_OPS_SHOWN = 6
# The layout's lines hold group names and descriptions from the trace: cut
# there, past what a two-dimension layout takes (about 300 characters).
DESCRIBE_CHARS = 400


class MetadataSummary(msgspec.Struct):
    version: str
    attrs: dict[str, Any]  # name -> value (bytes as hex)


class CollectiveSummary(msgspec.Struct):
    count: int
    bytes: int


class DependencySummary(msgspec.Struct):
    data_by_kind: dict[str, int]
    ctrl: int


class LaneSummary(msgspec.Struct):
    threads: dict[str, int]  # "thread <tid>" -> CPU nodes
    streams: dict[str, int]  # "device <d> stream <s>" -> GPU nodes


class TimeSpan(msgspec.Struct):
    start: int | None
    end: int | None
    duration: int | None


class OpTime(msgspec.Struct):
    name: str
    total_micros: int
    count: int


class InspectReport(msgspec.Struct, omit_defaults=True):
    """Summary of one trace; field order is the ``--json`` key order."""

    file: str
    metadata: MetadataSummary
    nodes: int
    nodes_by_type: dict[str, int]
    cpu_nodes: int
    gpu_nodes: int
    collectives: dict[str, CollectiveSummary]  # by collective type / SEND / RECV
    dependencies: DependencySummary
    lanes: LaneSummary
    time_span_micros: TimeSpan
    top_ops_by_duration: list[OpTime]
    layout: Layout  # this rank's view of the job's layout (rules/layout.py)
    # time against the work of each op's shapes (inspect --compute-model; absent
    # from --json without it)
    compute_model: ComputeModel | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``inspect --json`` prints)."""
        doc: dict[str, Any] = msgspec.to_builtins(self)
        return doc

    def text(self) -> str:
        """The human-readable summary (what ``inspect`` prints)."""
        return format_inspect(self)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _collective_key(node: ChakraNode, attrs: dict[str, Any]) -> str:
    """Collectives are told apart by ``comm_type`` (a bad one is shown, not
    hidden); point-to-point nodes by their node type."""
    if node.type != NodeType.COMM_COLL_NODE:
        return node.type.name.replace("_NODE", "")
    ctype = attrs.get("comm_type")
    try:
        return CollectiveType(ctype).name if ctype is not None else "UNKNOWN"
    except ValueError:
        return f"INVALID({ctype})"


class _Tally:
    """The counters of one pass over the nodes: nodes are streamed, so
    everything the report needs is gathered as each one goes by."""

    def __init__(self) -> None:
        self.count = self.cpu = self.gpu = self.ctrl_deps = 0
        self.by_type: Counter[str] = Counter()
        self.coll_count: Counter[str] = Counter()
        self.coll_bytes: Counter[str] = Counter()
        self.dep_kinds: Counter[str] = Counter()
        self.threads: Counter[str] = Counter()
        self.streams: Counter[str] = Counter()
        self.op_time: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # total us, count
        self.first: int | None = None
        self.last: int | None = None

    def add(self, node: ChakraNode) -> None:
        self.count += 1
        self.by_type[node.type.name] += 1
        attrs = attr_dict(node.attrs)
        if node.type in COMM_NODE_TYPES:
            self._add_comm(node, attrs)
        self.dep_kinds.update(dep_kinds_of(node.data_deps, attrs))
        self.ctrl_deps += len(node.ctrl_deps)
        self._add_lane(lane_of(node.type, attrs))
        self._add_time(node)

    def _add_comm(self, node: ChakraNode, attrs: dict[str, Any]) -> None:
        key = _collective_key(node, attrs)
        self.coll_count[key] += 1
        size = attrs.get("comm_size", 0)
        self.coll_bytes[key] += size if isinstance(size, int) else 0

    def _add_lane(self, lane: Lane) -> None:
        """CPU nodes count per thread, GPU nodes per stream (when known), as
        ``lane_of`` (the simulator's lanes) places them."""
        if lane.kind == CPU_LANE:
            self.cpu += 1
            self.threads[lane.label] += 1
        else:
            self.gpu += 1
            if lane.kind == STREAM_LANE:
                _gpu, device, stream = lane.key
                self.streams[f"device {device} stream {stream}"] += 1

    def _add_time(self, node: ChakraNode) -> None:
        """The span covers timed nodes only (0 means no recorded start)."""
        if node.start_time_micros:
            start = node.start_time_micros
            end = start + node.duration_micros
            self.first = start if self.first is None else min(self.first, start)
            self.last = end if self.last is None else max(self.last, end)
        entry = self.op_time[node.name]
        entry[0] += node.duration_micros
        entry[1] += 1

    def report(self, path: str, metadata: GlobalMetadata, top: int, layout: Layout,
               ) -> InspectReport:
        tops = sorted(self.op_time.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
        first, last = self.first, self.last
        return InspectReport(
            file=path,
            metadata=MetadataSummary(version=metadata.version,
                                     attrs={n: _jsonable(v) for n, _m, v in metadata.attrs}),
            nodes=self.count,
            nodes_by_type=dict(sorted(self.by_type.items())),
            cpu_nodes=self.cpu,
            gpu_nodes=self.gpu,
            collectives={k: CollectiveSummary(count=self.coll_count[k], bytes=self.coll_bytes[k])
                         for k in sorted(self.coll_count)},
            dependencies=DependencySummary(data_by_kind=dict(sorted(self.dep_kinds.items())),
                                           ctrl=self.ctrl_deps),
            lanes=LaneSummary(threads=dict(sorted(self.threads.items())),
                              streams=dict(sorted(self.streams.items()))),
            time_span_micros=TimeSpan(
                start=first, end=last,
                duration=(last - first) if first is not None and last is not None else None),
            top_ops_by_duration=[OpTime(name=n, total_micros=t, count=c)
                                 for n, (t, c) in tops],
            layout=layout,
        )


def inspect(path: str | os.PathLike[str], top: int = TOP_OPS,
            compute_model: bool = False) -> InspectReport:
    """Summary of one trace (``to_json()`` for plain JSON-able data);
    ``compute_model``: with the fit of its ops' time on their work
    (``simulation.compute_model``), which keeps every node in memory."""
    path = os.fspath(path)
    metadata, nodes = read_et(path)
    tally = _Tally()
    groups = LayoutReader(metadata, path)
    kept: list[ChakraNode] = []
    for node in nodes:
        tally.add(node)
        groups.add(node)
        if compute_model:
            kept.append(node)
    report = tally.report(path, metadata, top, job_layout([groups.result()]))
    if compute_model:
        report.compute_model = fit_compute_model(kept)
    return report


def _short(text: str, width: int = 70) -> str:
    text = printable(text)  # a trace's name, on a terminal
    return text if len(text) <= width else text[: width - 3] + "..."


def format_inspect(info: InspectReport) -> str:
    """The human-readable summary: one header line, then one line per topic."""
    md = info.metadata
    lines = [f"{info.file}: Chakra {md.version or '(no version)'}, {info.nodes} nodes "
             f"({info.cpu_nodes} CPU, {info.gpu_nodes} GPU/device)"]
    for name, value in md.attrs.items():
        lines.append(f"  meta {name}: {_short(str(value))}")
    lines.append("  nodes by type: " + ", ".join(f"{k} {v}" for k, v in info.nodes_by_type.items()))
    if info.collectives:
        lines.append("  collectives: " + ", ".join(
            f"{k} {v.count} ({v.bytes} B)" for k, v in info.collectives.items()))
    lines += _layout_lines(info.layout)
    deps = info.dependencies
    lines.append("  data deps: " + (", ".join(f"{k} {v}" for k, v in deps.data_by_kind.items())
                                    or "none") + f"; ctrl deps: {deps.ctrl}")
    lanes = info.lanes
    if lanes.threads:
        lines.append("  threads: " + ", ".join(f"{k} ({v})" for k, v in lanes.threads.items()))
    if lanes.streams:
        lines.append("  streams: " + ", ".join(f"{k} ({v})" for k, v in lanes.streams.items()))
    lines += _span_and_top_lines(info)
    if info.compute_model is not None:
        lines += [f"  {line}" for line in info.compute_model.lines()]
    return "\n".join(lines)


def _layout_lines(layout: Layout) -> list[str]:
    """Each process group's role, the layout they make, the ops run on shards."""
    if not layout.groups:
        return []
    lines = [f"  process groups: {_short(layout.describe(), DESCRIBE_CHARS)}"]
    lines += [f"    {_short(g.describe(), DESCRIBE_CHARS)}" for g in layout.groups]
    ops = layout.sharded_ops
    if ops:
        shown = ", ".join(f"{_short(o.name, 40)} x{o.count} (1/{o.degree})"
                          for o in ops[:SHARDED_OPS_SHOWN])
        more = f", {len(ops) - SHARDED_OPS_SHOWN} more" if len(ops) > SHARDED_OPS_SHOWN else ""
        lines.append(f"  sharded ops (run on a DTensor's local shard): {shown}{more}")
    return lines


def _span_and_top_lines(info: InspectReport) -> list[str]:
    span = info.time_span_micros
    if span.start is not None:
        lines = [f"  time span: {span.duration} us ({span.start} .. {span.end})"]
    else:
        lines = ["  time span: no recorded start times"]
    if info.top_ops_by_duration:
        lines.append("  top ops by total duration:")
        for op in info.top_ops_by_duration:
            lines.append(f"    {op.total_micros:>10} us  x{op.count:<6} {_short(op.name)}")
    return lines

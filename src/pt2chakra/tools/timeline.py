"""``pt2chakra timeline``: Chrome / Perfetto trace JSON of the nodes' own
recorded start and duration.

Lanes: one process per rank (``pid`` = rank), one thread lane per CPU thread
(``tid`` attribute) and per GPU stream (``device``/``stream`` attributes);
device nodes without a stream share one "device ops" lane. CPU nodes carry
their exclusive duration in pt2chakra's files; the timeline draws the
inclusive one (``inclusive_duration_micros``) so that callees nest inside
callers. Nodes without a recorded start (host-only traces) are left out and
counted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, BinaryIO

import msgspec
import orjson

from pt2chakra.atomic import atomic_output, check_outputs
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.ranks import open_rank_set
from pt2chakra.chakra.records import ChakraNode, NodeType, attr_dict
from pt2chakra.rules.conventions import COMM_LANE, CPU_LANE, INCLUSIVE_ATTR, STREAM_LANE, lane_of

_ARG_ATTRS = ("comm_type", "comm_size", "pg_name", "comm_seq", "stream", "device", "tid",
              "correlation", "rf_id")


# Display order of lanes inside a rank: CPU threads by id, then the device
# lanes, then GPU streams by id.
DEVICE_SORT_INDEX = 999
COMM_SORT_INDEX = 998
STREAM_SORT_BASE = 1000


def _lane(node_type: int, attrs: dict[str, Any]) -> tuple[tuple[Any, ...], str, int]:
    """(key, lane name, sort index) of the node's lane (``lane_of``)."""
    lane = lane_of(node_type, attrs)
    if lane.kind == CPU_LANE:
        tid = lane.key[1]
        return lane.key, f"CPU thread {tid}", tid if isinstance(tid, int) else 0
    if lane.kind == STREAM_LANE:
        _gpu, device, stream = lane.key
        sort = STREAM_SORT_BASE + stream if isinstance(stream, int) else STREAM_SORT_BASE
        return lane.key, f"GPU {device} stream {stream}", sort
    if lane.kind == COMM_LANE:
        return lane.key, lane.label, COMM_SORT_INDEX
    return lane.key, "device ops", DEVICE_SORT_INDEX


class TimelineStats(msgspec.Struct):
    """What ``timeline`` wrote: events drawn, lanes (all ranks together) and
    nodes left out for lack of a recorded start."""

    output: str
    events: int = 0
    lanes: int = 0
    untimed: int = 0

    def summary(self) -> str:
        """The one line ``pt2chakra timeline`` prints."""
        return (f"{self.output}: {self.events} events in {self.lanes} lanes"
                + (f"; {self.untimed} nodes without a start time left out"
                   if self.untimed else ""))


class _EventWriter:
    """Trace events, one per line, comma-separated inside the
    ``traceEvents`` array (streamed: a trace can be large)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.first = True

    def emit(self, event: dict[str, Any]) -> None:
        self.out.write((b"" if self.first else b",\n") + orjson.dumps(event))
        self.first = False

    def metadata(self, name: str, pid: int, tid: int, args: dict[str, Any]) -> None:
        self.emit({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})


def timeline(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
             output: str | os.PathLike[str], force: bool = False) -> TimelineStats:
    """Write the Chrome trace JSON, one process per rank (``chakra.ranks``:
    a set that cannot be one job is refused unless ``force``); returns
    counts (events, lanes, untimed)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    output = os.fspath(output)
    check_outputs(paths, [output])
    ranks = open_rank_set(paths, force)
    stats = TimelineStats(output=output)
    with atomic_output(output) as out:
        out.write(b'{"displayTimeUnit":"ms","traceEvents":[\n')
        events = _EventWriter(out)
        for path, rank in zip(ranks.paths, ranks.ranks):
            _write_rank(events, path, rank, stats)
        out.write(b"\n]}\n")
    return stats


def _write_rank(events: _EventWriter, path: str, pid: int, stats: TimelineStats) -> None:
    """One rank's file as one process, its pid the rank."""
    _metadata, nodes = read_et(path)
    events.metadata("process_name", pid, 0, {"name": f"rank {pid} ({os.path.basename(path)})"})
    events.metadata("process_sort_index", pid, 0, {"sort_index": pid})
    lanes: dict[tuple[Any, ...], int] = {}
    for node in nodes:
        if not node.start_time_micros:
            stats.untimed += 1
            continue
        attrs = attr_dict(node.attrs)
        tid = _lane_tid(events, pid, lanes, node.type, attrs)
        events.emit(_complete_event(node, attrs, pid, tid))
        stats.events += 1
    stats.lanes += len(lanes)


def _lane_tid(events: _EventWriter, pid: int, lanes: dict[tuple[Any, ...], int],
              node_type: int, attrs: dict[str, Any]) -> int:
    """The node's lane as a thread id of its process, numbered in order of
    first use; a new lane is named and sorted by metadata events first."""
    key, lane_name, sort_index = _lane(node_type, attrs)
    tid = lanes.get(key)
    if tid is None:
        tid = lanes[key] = len(lanes) + 1
        events.metadata("thread_name", pid, tid, {"name": lane_name})
        events.metadata("thread_sort_index", pid, tid, {"sort_index": sort_index})
    return tid


def _complete_event(node: ChakraNode, attrs: dict[str, Any], pid: int,
                    tid: int) -> dict[str, Any]:
    """An "X" event; its duration is the inclusive one so callees nest
    inside callers."""
    dur = attrs.get(INCLUSIVE_ATTR, node.duration_micros)
    args: dict[str, Any] = {"id": node.id, "type": NodeType(node.type).name}
    args.update((k, attrs[k]) for k in _ARG_ATTRS if k in attrs)
    if node.data_deps:
        args["data_deps"] = node.data_deps
    return {"ph": "X", "name": node.name, "cat": NodeType(node.type).name,
            "ts": node.start_time_micros, "dur": dur, "pid": pid, "tid": tid, "args": args}

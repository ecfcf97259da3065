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
from typing import Any

import orjson

from pt2chakra.atomic import atomic_output, refuse_overwriting_inputs
from pt2chakra.chakra.conventions import (
    COMM_LANE,
    CPU_LANE,
    STREAM_LANE,
    attr_dict,
    lane_of,
    rank_of,
)
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import NodeType

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


def timeline(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
             output: str | os.PathLike[str]) -> dict[str, int]:
    """Write the Chrome trace JSON; returns counts (events, lanes, untimed)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    output = os.fspath(output)
    refuse_overwriting_inputs(output, list(paths))
    stats = {"events": 0, "lanes": 0, "untimed": 0}
    used_pids: set[int] = set()
    with atomic_output(output) as out:
        out.write(b'{"displayTimeUnit":"ms","traceEvents":[\n')
        first = True

        def emit(event: dict[str, Any]) -> None:
            nonlocal first
            out.write((b"" if first else b",\n") + orjson.dumps(event))
            first = False

        for index, path in enumerate(paths):
            path = os.fspath(path)
            metadata, nodes = read_et(path)
            pid = rank_of(metadata, path, index)
            if pid in used_pids:
                pid = max(used_pids) + 1
            used_pids.add(pid)
            emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                  "args": {"name": f"rank {pid} ({os.path.basename(path)})"}})
            emit({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                  "args": {"sort_index": pid}})
            lanes: dict[tuple[Any, ...], int] = {}
            for node in nodes:
                if not node.start_time_micros:
                    stats["untimed"] += 1
                    continue
                attrs = attr_dict(node.attrs)
                key, lane_name, sort_index = _lane(node.type, attrs)
                tid = lanes.get(key)
                if tid is None:
                    tid = lanes[key] = len(lanes) + 1
                    emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                          "args": {"name": lane_name}})
                    emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                          "args": {"sort_index": sort_index}})
                dur = attrs.get("inclusive_duration_micros", node.duration_micros)
                args: dict[str, Any] = {"id": node.id, "type": NodeType(node.type).name}
                args.update((k, attrs[k]) for k in _ARG_ATTRS if k in attrs)
                if node.data_deps:
                    args["data_deps"] = node.data_deps
                emit({"ph": "X", "name": node.name, "cat": NodeType(node.type).name,
                      "ts": node.start_time_micros, "dur": dur, "pid": pid, "tid": tid,
                      "args": args})
                stats["events"] += 1
            stats["lanes"] += len(lanes)
        out.write(b"\n]}\n")
    return stats

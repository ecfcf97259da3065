"""``pt2chakra inspect``: what is in an ``.et`` file, in one streaming pass."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

from pt2chakra.chakra.conventions import attr_dict, is_gpu
from pt2chakra.chakra.dep_kinds import dep_kinds_of
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, NodeType

TOP_OPS = 10


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def inspect(path: str | os.PathLike[str], top: int = TOP_OPS) -> dict[str, Any]:
    """Summary of one trace as plain JSON-able data."""
    path = os.fspath(path)
    metadata, nodes = read_et(path)
    by_type: Counter[str] = Counter()
    coll_count: Counter[str] = Counter()
    coll_bytes: Counter[str] = Counter()
    dep_kinds: Counter[str] = Counter()
    ctrl_deps = 0
    threads: Counter[str] = Counter()
    streams: Counter[str] = Counter()
    op_time: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    first = last = None
    count = cpu = gpu = 0
    for node in nodes:
        count += 1
        by_type[node.type.name] += 1
        attrs = attr_dict(node.attrs)
        if node.type in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE,
                         NodeType.COMM_RECV_NODE):
            ctype = attrs.get("comm_type")
            if node.type == NodeType.COMM_COLL_NODE:
                try:
                    key = CollectiveType(ctype).name if ctype is not None else "UNKNOWN"
                except ValueError:
                    key = f"INVALID({ctype})"
            else:
                key = node.type.name.replace("_NODE", "")
            coll_count[key] += 1
            size = attrs.get("comm_size", 0)
            coll_bytes[key] += size if isinstance(size, int) else 0
        dep_kinds.update(dep_kinds_of(node.data_deps, attrs))
        ctrl_deps += len(node.ctrl_deps)
        if is_gpu(attrs):
            gpu += 1
            if "stream" in attrs:
                streams[f"device {attrs.get('device', 0)} stream {attrs['stream']}"] += 1
        else:
            cpu += 1
            threads[f"thread {attrs.get('tid', '?')}"] += 1
        if node.start_time_micros:
            end = node.start_time_micros + node.duration_micros
            first = node.start_time_micros if first is None else min(first, node.start_time_micros)
            last = end if last is None else max(last, end)
        entry = op_time[node.name]
        entry[0] += node.duration_micros
        entry[1] += 1
    tops = sorted(op_time.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return {
        "file": path,
        "metadata": {"version": metadata.version,
                     "attrs": {n: _jsonable(v) for n, _m, v in metadata.attrs}},
        "nodes": count,
        "nodes_by_type": dict(sorted(by_type.items())),
        "cpu_nodes": cpu,
        "gpu_nodes": gpu,
        "collectives": {k: {"count": coll_count[k], "bytes": coll_bytes[k]}
                        for k in sorted(coll_count)},
        "dependencies": {"data_by_kind": dict(sorted(dep_kinds.items())), "ctrl": ctrl_deps},
        "lanes": {"threads": dict(sorted(threads.items())), "streams": dict(sorted(streams.items()))},
        "time_span_micros": {"start": first, "end": last,
                             "duration": (last - first) if first is not None else None},
        "top_ops_by_duration": [{"name": n, "total_micros": t, "count": c}
                                for n, (t, c) in tops],
    }


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_inspect(info: dict[str, Any]) -> str:
    md = info["metadata"]
    lines = [f"{info['file']}: Chakra {md['version'] or '(no version)'}, {info['nodes']} nodes "
             f"({info['cpu_nodes']} CPU, {info['gpu_nodes']} GPU/device)"]
    for name, value in md["attrs"].items():
        text = str(value)
        lines.append(f"  meta {name}: {_short(text)}")
    lines.append("  nodes by type: " + ", ".join(f"{k} {v}" for k, v in info["nodes_by_type"].items()))
    if info["collectives"]:
        lines.append("  collectives: " + ", ".join(
            f"{k} {v['count']} ({v['bytes']} B)" for k, v in info["collectives"].items()))
    deps = info["dependencies"]
    lines.append("  data deps: " + (", ".join(f"{k} {v}" for k, v in deps["data_by_kind"].items())
                                    or "none") + f"; ctrl deps: {deps['ctrl']}")
    lanes = info["lanes"]
    if lanes["threads"]:
        lines.append("  threads: " + ", ".join(f"{k} ({v})" for k, v in lanes["threads"].items()))
    if lanes["streams"]:
        lines.append("  streams: " + ", ".join(f"{k} ({v})" for k, v in lanes["streams"].items()))
    span = info["time_span_micros"]
    if span["start"] is not None:
        lines.append(f"  time span: {span['duration']} us ({span['start']} .. {span['end']})")
    else:
        lines.append("  time span: no recorded start times")
    if info["top_ops_by_duration"]:
        lines.append("  top ops by total duration:")
        for op in info["top_ops_by_duration"]:
            lines.append(f"    {op['total_micros']:>10} us  x{op['count']:<6} {_short(op['name'])}")
    return "\n".join(lines)

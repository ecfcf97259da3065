"""Small, valid inputs of every kind, built in a test's folder, and ways to
damage them: the raw material of the malformed-input corpus and fuzzers.

Each builder writes one file and returns its path; ``host_doc`` /
``kineto_doc`` return the JSON documents so that a case can break one field.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType

PID = 4242
OBSERVER_ROOT = "[pytorch|profiler|execution_trace|process]"
OBSERVER_THREAD = "[pytorch|profiler|execution_trace|thread]"
EMPTY_IO = {"values": [], "shapes": [], "types": []}


def attr(name: str, value: Any, type_: str = "uint64") -> dict[str, Any]:
    return {"name": name, "type": type_, "value": value}


def host_node(nid: int, name: str, parent: int, rf_id: int, **extra: Any) -> dict[str, Any]:
    attrs = [attr("rf_id", rf_id), attr("fw_parent", 0), attr("seq_id", -1, "int64"),
             attr("scope", 0), attr("tid", 1), attr("fw_tid", 0),
             attr("op_schema", "", "string")]
    attrs += extra.pop("attrs", [])
    return {"id": nid, "name": name, "ctrl_deps": parent, "inputs": extra.pop("inputs", EMPTY_IO),
            "outputs": extra.pop("outputs", EMPTY_IO), "attrs": attrs, **extra}


def host_doc(*extra_nodes: dict[str, Any], pid: int = PID) -> dict[str, Any]:
    """Schema 1.1.0: the observer's root and thread, then two ops."""
    nodes = [host_node(1, OBSERVER_ROOT, 1, 0), host_node(2, OBSERVER_THREAD, 1, 1),
             host_node(3, "aten::add", 2, 10), host_node(4, "aten::mul", 2, 11), *extra_nodes]
    return {"schema": "1.1.0-chakra.0.0.4", "pid": pid, "time": "2026-01-01 00:00:00",
            "start_ts": 100, "finish_ts": 200, "nodes": nodes}


def kineto_event(name: str, ts: float, rf_id: int, pid: Any = PID, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": 5,
            "args": {"External id": rf_id, "Record function id": rf_id, **args}}


def kineto_doc(*extra_events: dict[str, Any], pid: Any = PID, **top: Any) -> dict[str, Any]:
    events = [kineto_event("aten::add", 1000.0, 10, pid), kineto_event("aten::mul", 1010.0, 11, pid),
              *extra_events]
    return {"schemaVersion": 1, "traceEvents": events, **top}


def write_json(path: Path, doc: Any, gz: bool = False) -> Path:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def comm_node(nid: int, deps: list[int] = (), size: int | None = 1024,  # type: ignore[assignment]
              seq: int = 0) -> ChakraNode:
    attrs = [("is_cpu_op", "bool_val", False), ("comm_type", "int64_val", 0),
             ("pg_name", "string_val", "0"), ("comm_seq", "int64_val", seq)]
    if size is not None:
        attrs.append(("comm_size", "int64_val", size))
    return ChakraNode(id=nid, name=f"nccl:all_reduce_{nid}", type=NodeType.COMM_COLL_NODE,
                      data_deps=list(deps), start_time_micros=10 * nid, duration_micros=5,
                      attrs=attrs)


def comp_node(nid: int, deps: list[int] = ()) -> ChakraNode:  # type: ignore[assignment]
    return ChakraNode(id=nid, name=f"kernel_{nid}", type=NodeType.COMP_NODE,
                      data_deps=list(deps), start_time_micros=10 * nid, duration_micros=5,
                      attrs=[("is_cpu_op", "bool_val", False), ("device", "int64_val", 0),
                             ("stream", "int64_val", 7)])


def write_rank(path: Path, nodes: list[ChakraNode], rank: int = 0) -> Path:
    write_et(path, GlobalMetadata(version="0.0.4", attrs=[("rank", "int64_val", rank)]), nodes)
    return path


def sound_et(path: Path, rank: int = 0) -> Path:
    """A compute node then a collective after it: sound, replays."""
    return write_rank(path, [comp_node(1), comm_node(2, [1])], rank)


def gzip_bomb(path: Path, inflated: int) -> Path:
    """Zeros that inflate about 1000x (deflate's ceiling): ``inflated`` bytes."""
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    with path.open("wb") as out:
        for _ in range(inflated >> 20):
            out.write(compressor.compress(block))
        out.write(compressor.flush())
    return path

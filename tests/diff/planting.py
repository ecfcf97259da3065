"""A planted change: a copy of a trace where one CPU op ran ``factor`` times
longer and everything that started after it ended is pushed back by the
extra time (its callers' inclusive times grow by it, the step ends later),
as if the op really had been that slow."""

from __future__ import annotations

from pathlib import Path

import msgspec

from pt2chakra.chakra.conventions import attr_dict, is_gpu
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata

INCLUSIVE = "inclusive_duration_micros"


def leaf_cpu_ops(path: Path) -> list[ChakraNode]:
    """CPU ops that call nothing, with time, longest first."""
    _md, nodes = read_et(path)
    nodes = list(nodes)
    callers = {n.ctrl_deps[0] for n in nodes if n.ctrl_deps}
    leaves = [n for n in nodes if n.id not in callers and n.duration_micros > 0
              and n.start_time_micros and not is_gpu(attr_dict(n.attrs))]
    return sorted(leaves, key=lambda n: (-n.duration_micros, n.id))


def plant_slowdown(source: Path, target: Path, node_id: int, factor: float) -> int:
    """Write the slowed copy; returns the extra microseconds."""
    metadata, nodes_iter = read_et(source)
    nodes = list(nodes_iter)
    by_id = {n.id: n for n in nodes}
    op = by_id[node_id]
    extra = round(op.duration_micros * (factor - 1))
    end = op.start_time_micros + op.duration_micros
    callers = set()
    cur = op
    while cur.ctrl_deps and cur.ctrl_deps[0] in by_id and cur.ctrl_deps[0] not in callers:
        callers.add(cur.ctrl_deps[0])
        cur = by_id[cur.ctrl_deps[0]]
    out = [_moved(n, op, end, extra, callers) for n in nodes]
    attrs = [(name, member, value + extra if name == "step_end_micros" else value)
             for name, member, value in metadata.attrs]
    write_et(target, GlobalMetadata(version=metadata.version, attrs=attrs), out)
    return extra


def _moved(n: ChakraNode, op: ChakraNode, end: int, extra: int, callers: set[int]) -> ChakraNode:
    if n.id == op.id:
        return _grown(msgspec.structs.replace(n, duration_micros=n.duration_micros + extra), extra)
    if n.id in callers:
        return _grown(n, extra)
    if n.start_time_micros >= end:
        return msgspec.structs.replace(n, start_time_micros=n.start_time_micros + extra)
    return n


def _grown(n: ChakraNode, extra: int) -> ChakraNode:
    attrs = [(name, member, value + extra if name == INCLUSIVE else value)
             for name, member, value in n.attrs]
    return msgspec.structs.replace(n, attrs=attrs)

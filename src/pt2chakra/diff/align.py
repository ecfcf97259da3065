"""Which node of one run is which node of the other: a key per node that is
equal on both runs when they recorded the same step.

* a CPU op: its name, its call path (the names of its callers, from the
  ``caller`` dependencies) and its occurrence among the ops of that name and
  path on its rank;
* a device op (kernel, copy): the key of the op that launched it (the
  ``launch`` dependency), its name and its occurrence under that op;
* a communication node: its rendezvous key (``chakra.rendezvous``: process
  group and sequence number, or position in the group), which is how the
  ranks of one run meet too.

Every key holds the rank: ops on two ranks are two things.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES, EdgeKind
from pt2chakra.chakra.rendezvous import RendezvousKey
from pt2chakra.diff.load import RankTrace

CALLER_KIND = EDGE_KIND_NAMES[EdgeKind.CALLER]
LAUNCH_KIND = EDGE_KIND_NAMES[EdgeKind.LAUNCH]
# Call path levels shown in a label (the full path is in the key).
LABEL_CALLERS = 2

# A node key: (kind, rank, name, path or launcher, occurrence) or
# (kind, rank, name, rendezvous key) for communication.
NodeKey = tuple[Any, ...]


def node_keys(trace: RankTrace) -> list[NodeKey]:
    """A key per node of ``trace`` (see the module docstring)."""
    n = len(trace.ids)
    caller, launcher = _callers_and_launchers(trace)
    paths: list[tuple[str, ...] | None] = [None] * n
    keys: list[NodeKey | None] = [None] * n
    seen: dict[tuple[Any, ...], int] = defaultdict(int)
    rank, names, is_cpu, comm_key = trace.rank, trace.names, trace.is_cpu, trace.comm_key
    for _start, _id, i in sorted(zip(trace.start, trace.ids, range(n))):
        comm = comm_key.get(i)
        if comm is not None:
            keys[i] = ("comm", rank, names[i], tuple(comm))
            continue
        if is_cpu[i]:
            path = paths[i]
            if path is None:
                path = _path(i, caller, names, paths)
            ident: tuple[Any, ...] = ("op", rank, names[i], path)
        else:
            parent = launcher[i]
            above = keys[parent] if parent >= 0 else None
            ident = ("kernel", rank, names[i], above)
        occurrence = seen[ident]
        seen[ident] = occurrence + 1
        keys[i] = (*ident, occurrence)
    return [k if k is not None else ("op", rank, names[i], (), i) for i, k in enumerate(keys)]


def _callers_and_launchers(trace: RankTrace) -> tuple[list[int], list[int]]:
    """Each node's caller and launching op (their index, -1 for none): the
    last dependency of that kind."""
    n = len(trace.ids)
    caller = [-1] * n
    launcher = [-1] * n
    for i, deps in enumerate(trace.deps):
        for d, kind in deps:
            if kind == CALLER_KIND:
                caller[i] = d
            elif kind == LAUNCH_KIND:
                launcher[i] = d
    return caller, launcher


def _path(i: int, caller: list[int], names: list[str],
          paths: list[tuple[str, ...] | None]) -> tuple[str, ...]:
    """Names of ``i``'s callers, outermost first (memoised in ``paths``;
    iterative, for deep stacks; a caller cycle ends the path)."""
    chain: list[int] = []
    cur = i
    while cur >= 0 and paths[cur] is None and len(chain) <= len(names):
        chain.append(cur)
        cur = caller[cur]
    for node in reversed(chain):
        above = caller[node]
        known = paths[above] if above >= 0 else None
        paths[node] = (*known, names[above]) if known is not None else ()
    result = paths[i]
    return result if result is not None else ()


def label_of(key: NodeKey) -> str:
    """A short readable name for a key (rank, name, nearest callers)."""
    kind, rank, name = key[0], key[1], key[2]
    if kind == "comm":
        return f"r{rank} {name} [{RendezvousKey(*key[3]).describe()}]"
    occurrence = key[-1]
    if kind == "kernel":
        above = key[3]
        by = f" <- {above[2]}" if above else ""
        return f"r{rank} {name}{by} #{occurrence}"
    path = key[3]
    callers = " < ".join(reversed(path[-LABEL_CALLERS:])) if path else ""
    where = f" < {callers}" if callers else ""
    return f"r{rank} {name}{where} #{occurrence}"

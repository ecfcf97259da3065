"""The critical path of a replay: from the node that ended the step, follow
what decided each start (or a sync op's end) back to a rank's start, and
charge its time to node types and to the edge kinds that made each step
critical.

Deliberate inlined copies in the walk back (``_walk_back_python``: one step
per node on the path, a million on a million-node path; a change to a rule
changes its copy too, and its compiled twin, ``_fast.walk_back``):

* charging a node type and an edge kind: ``_charge`` (through
  ``_PathTally.charge_type`` / ``charge_kind``), on the tally's lists held
  in locals; the CPU gap and wait sums are locals, stored at the end.
* the bound step's share, ``max(0.0, min(t, end) - start)`` and
  ``max(0.0, start - bind time)``, written as comparisons.
* the tally's ``total`` and ``crossings`` are locals, written back around
  ``_gated_step`` (the one step kind that is a call).
"""

from __future__ import annotations

import heapq
import operator
from array import array
from itertools import compress, repeat
from typing import cast

from pt2chakra.rules.conventions import CPU_GAP_CATEGORY  # a replayed CPU idle gap
from pt2chakra.simulation import compiled
from pt2chakra.simulation.event_loop import (
    INDEX_TYPECODE,
    TIME_TYPECODE,
    ReplayRun,
    ran_flags,
    step_ends_on_cpu,
)
from pt2chakra.simulation.prepared import (
    CPU_OP,
    EDGE_KIND_NAMES,
    K_GPU_SYNC,
    WAIT,
    PreparedGraph,
)
from pt2chakra.simulation.results import CATEGORY_NAMES, CriticalPath

TOP_NODES = 10  # longest nodes of the critical path listed in the report


# What the critical path's time is charged to, by code: the node categories,
# then the two kinds of time no node's duration holds.
_PATH_TYPES = (*CATEGORY_NAMES, CPU_GAP_CATEGORY, WAIT)
_T_GAP, _T_WAIT = len(CATEGORY_NAMES), len(CATEGORY_NAMES) + 1


def _charge(slots: list[float | None], order: list[int], code: int, us: float) -> None:
    """Add ``us`` to slot ``code``, noting the code's first charge in ``order``."""
    got = slots[code]
    if got is None:
        order.append(code)
        got = 0.0
    slots[code] = got + us


class _PathTally:
    """What the critical path is made of, gathered while walking it back:
    time per node type and per edge kind, by code (list slots: cheaper than
    a dict update on each of a million steps; None until first charged),
    with the codes in the order first charged (the report's order at equal times)."""

    def __init__(self) -> None:
        self.type_us: list[float | None] = [None] * len(_PATH_TYPES)
        self.kind_us: list[float | None] = [None] * len(EDGE_KIND_NAMES)
        self.type_order: list[int] = []
        self.kind_order: list[int] = []
        self.path = array(INDEX_TYPECODE)  # the nodes walked, last first
        self.crossings = 0  # moves to another rank (collectives)
        self.total = 0.0

    def charge_type(self, code: int, us: float) -> None:
        _charge(self.type_us, self.type_order, code, us)

    def charge_kind(self, code: int, us: float) -> None:
        _charge(self.kind_us, self.kind_order, code, us)

    def by_type(self) -> dict[str, float]:
        return {_PATH_TYPES[c]: cast(float, self.type_us[c]) for c in self.type_order}

    def by_kind(self) -> dict[str, float]:
        return {EDGE_KIND_NAMES[c]: cast(float, self.kind_us[c]) for c in self.kind_order}


def critical_path_of(p: PreparedGraph, run: ReplayRun) -> tuple[CriticalPath, set[int]]:
    """The chain of nodes that decided the step's end, walked back from the
    first node to end last (of the CPU nodes where the step ends on the CPU
    side), what its time is made of, and its nodes."""
    end = run.end
    ran = ran_flags(end)
    if step_ends_on_cpu(p.step_period):
        ran = map(operator.and_, ran, map(operator.eq, p.cat, repeat(CPU_OP)))
    latest = max(compress(end, ran), default=None)
    if latest is None:
        return CriticalPath(0.0, 0, 0, {}, {}, []), set()
    last = end.index(latest)  # the first node to end last
    tally = _walk_back(p, run, last)
    on_path = set(tally.path)
    return _path_summary(p, run, tally, on_path), on_path


def _walk_back(p: PreparedGraph, run: ReplayRun, last: int) -> _PathTally:
    """From the last node to end, follow what decided each start (or a sync
    op's end) back to a rank's start: by the compiled path where built and
    it takes the input (``_fast.walk_back``), else ``_walk_back_python``."""
    walk = getattr(compiled.FAST, "walk_back", None)
    if walk is None or len(p.nodes) != len(p.cat):  # its guard counts len(p.cat) steps
        return _walk_back_python(p, run, last)
    got = walk(p.cat, p.rank, run.start, run.end, run.bind_time, run.bind_kind, run.bind_pred,
               run.gate_pred, p.late_launch, last, len(p.rank_nodes) > 1, len(_PATH_TYPES),
               len(EDGE_KIND_NAMES), _T_GAP, _T_WAIT, CPU_OP, K_GPU_SYNC)
    if got is None:
        return _walk_back_python(p, run, last)
    tally = _PathTally()
    path, tally.type_us, tally.kind_us, tally.type_order, tally.kind_order, tally.total, \
        tally.crossings = got
    tally.path.frombytes(path)
    return tally


def _walk_back_python(p: PreparedGraph, run: ReplayRun, last: int) -> _PathTally:
    """``_walk_back``'s pure-Python path (the compiled one's twin); the guard
    stops a malformed cycle."""
    tally = _PathTally()
    cur, t = last, run.end[last]
    guard = len(p.nodes) + 5
    gate_pred, end, start, add = run.gate_pred, run.end, run.start, tally.path.append
    # A bound step, inline (a million steps on a million-node path): the
    # node's own time up to ``t`` plus its wait before starting (a CPU gap on
    # a thread, else a wait for a peer or a sync lag), charged to the edge that
    # bound its start; then the path goes on from that edge's source. A child
    # released at a sync op's issue point joins it mid-op: the binding time is
    # the issue time either way. The tally's fields are held in locals (the
    # CPU gap and wait sums too: only these steps charge them).
    cat_of, rank_of, bind_time, bind_kind, bind_pred = p.cat, p.rank, run.bind_time, \
        run.bind_kind, run.bind_pred
    type_us, kind_us, type_order, kind_order = tally.type_us, tally.kind_us, \
        tally.type_order, tally.kind_order
    total, crossings, multi = tally.total, tally.crossings, len(p.rank_nodes) > 1
    late = p.late_launch
    gap: float | None = None
    waited: float | None = None
    while cur >= 0 and guard:
        guard -= 1
        add(cur)
        gp = gate_pred[cur]
        if gp >= 0 and t >= end[cur] and end[gp] > start[cur]:
            tally.total, tally.crossings = total, crossings
            cur, t = _gated_step(p, run, tally, cur, gp, t)
            total, crossings = tally.total, tally.crossings
            continue
        s, e = start[cur], end[cur]
        node_part = (e if e < t else t) - s  # max(0.0, min(t, end) - start)
        if not node_part > 0.0:
            node_part = 0.0
        cat = cat_of[cur]
        got = type_us[cat]
        if got is None:
            type_order.append(cat)
            got = 0.0
        type_us[cat] = got + node_part
        bt = bind_time[cur]
        wait = s - bt  # max(0.0, start - bind time)
        if not wait > 0.0:
            wait = 0.0
        if cat == CPU_OP or (wait and cur in late):  # a late launch waited for its thread
            if gap is None:
                type_order.append(_T_GAP)
                gap = 0.0
            gap += wait
        elif wait:
            if waited is None:
                type_order.append(_T_WAIT)
                waited = 0.0
            waited += wait
        share = node_part + wait
        kind = bind_kind[cur]
        got = kind_us[kind]
        if got is None:
            kind_order.append(kind)
            got = 0.0
        kind_us[kind] = got + share
        total += share
        pred = bind_pred[cur]
        if multi and pred >= 0 and rank_of[pred] != rank_of[cur]:
            crossings += 1
        cur, t = pred, bt
    tally.total, tally.crossings = total, crossings
    type_us[_T_GAP], type_us[_T_WAIT] = gap, waited
    return tally


def _gated_step(p: PreparedGraph, run: ReplayRun, tally: _PathTally, cur: int, gp: int,
                t: float) -> tuple[int, float]:
    """A sync op whose end waited on the GPU: its post-return part counts as
    CPU time on a ``gpu_sync`` edge, then the path goes on from the producer."""
    seg = t - run.end[gp]
    tally.charge_type(CPU_OP, seg)
    tally.charge_kind(K_GPU_SYNC, seg)
    tally.total += seg
    if p.rank[gp] != p.rank[cur]:
        tally.crossings += 1
    return gp, run.end[gp]


def _longest(on_path: list[int], run: ReplayRun) -> list[int]:
    """The ``TOP_NODES`` nodes of ``on_path`` that ran longest, longest first
    (ties in list order): by the compiled path where built and it takes
    them (``_fast.longest``), else ``_longest_python``."""
    fast = compiled.FAST
    got = None if fast is None else fast.longest(on_path, run.start, run.end, TOP_NODES)
    return got if got is not None else _longest_python(on_path, run)


def _longest_python(on_path: list[int], run: ReplayRun) -> list[int]:
    """``sorted(on_path, key=-duration)[:TOP_NODES]`` (nsmallest is that, ties
    in order), without a Python key call per node."""
    # every node's (one sequential pass over the run's arrays: cheaper than
    # reading them at the path's nodes), held as typed arrays (8 bytes a
    # node, not a float object each)
    minus_all = array(TIME_TYPECODE, map(operator.sub, run.start, run.end))
    minus_duration = array(TIME_TYPECODE, map(minus_all.__getitem__, on_path))
    del minus_all
    return [on_path[k] for k in heapq.nsmallest(TOP_NODES, range(len(on_path)),
                                                key=minus_duration.__getitem__)]


def _path_summary(p: PreparedGraph, run: ReplayRun, tally: _PathTally, nodes: set[int]) -> CriticalPath:
    """Shares sorted largest first, and the ten longest nodes on the path
    (ties in the set's order)."""
    top = _longest(list(nodes), run)
    return CriticalPath(
        length_us=tally.total, nodes=len(nodes), rank_crossings=tally.crossings,
        by_node_type=dict(sorted(tally.by_type().items(), key=lambda kv: -kv[1])),
        by_edge_kind=dict(sorted(tally.by_kind().items(), key=lambda kv: -kv[1])),
        top_nodes=[{"rank": p.rank_label[p.rank[i]], "id": p.nodes[i].id, "name": p.nodes[i].name,
                    "category": CATEGORY_NAMES[p.cat[i]],
                    "duration_us": run.end[i] - run.start[i]} for i in top])

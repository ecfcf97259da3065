"""CPU threads' recorded time as the replay holds it: each op's slice of its
thread, the delay before each op (idle gaps, a caller's own time), late
launches released when their thread reaches them, and GPU ops without a
dependency pinned at their recorded offset. Called by ``prepare.py`` per rank.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterator
from itertools import compress, islice, repeat
from operator import lt, sub
from typing import Protocol, TypeVar

from pt2chakra.rules.conventions import LAUNCH_TIME_ATTR, thread_holds
from pt2chakra.simulation.compiled import fast_path
from pt2chakra.simulation.event_loop import TIME_TYPECODE
from pt2chakra.simulation.prepared import (
    K_LAUNCH,
    K_THREAD_ORDER,
    AttrSets,
    Parents,
    PreparedGraph,
    shared_floats,
)

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class _Indexed(Protocol[_T_co]):
    """Read by index (a list, or ``Parents``)."""

    def __getitem__(self, k: int, /) -> _T_co: ...


def cpu_slices(p: PreparedGraph, base: int, cpu_lane_ops: dict[int, list[int]],
               incl: list[float]) -> None:
    """CPU threads: each op holds its thread from its start until its first
    callee starts (or until it ends); every other moment of the thread
    (idle gaps, a caller's time between and after its callees) is replayed
    as a delay before the next op. Replaying an op's whole exclusive time
    up front instead would launch its callees' GPU work late. The compiled
    fast path runs ``_slices_python`` where built."""
    fast = fast_path()
    for ops in cpu_lane_ops.values():
        if fast is None or fast.cpu_slices(ops, p.start, incl, base, p.dur) is None:
            _slices_python(p, base, ops, incl)


def _slices_python(p: PreparedGraph, base: int, ops: list[int], incl: list[float]) -> None:
    """One thread's holds into ``p.dur``, equal values one float object."""
    dur = p.dur
    holds = shared_floats(array(TIME_TYPECODE, thread_holds(_float_starts(p, ops),
                                                            _of_rank(incl, ops, base))))
    if ops and ops[-1] - ops[0] == len(ops) - 1 and all(map(lt, ops, islice(ops, 1, None))):
        dur[ops[0]:ops[-1] + 1] = holds  # a run of nodes, one after the other
        return
    for i, held in zip(ops, holds):
        dur[i] = held


def late_launches(p: PreparedGraph, base: int, sets: AttrSets, parents: Parents,
                  cpu_lane_ops: dict[int, list[int]]) -> None:
    """A late launch (``LAUNCH_TIME_ATTR``) is released when its thread
    reaches it: after the last op its launcher's thread started before the
    launch, and the recorded time from that op's slice end to the launch
    (the caller's own time) as its delay. Without it the launch edge would
    release it at its launcher's first slice end."""
    flagged = {k for k, a in enumerate(sets.checked) if LAUNCH_TIME_ATTR in a}
    if not flagged:
        return  # the usual case: no per-node pass
    starts: dict[int, list[float]] = {}
    for i in compress(range(base, base + len(sets.of_node)), map(flagged.__contains__, sets.of_node)):
        launcher = next((src for src, kind in parents[i - base] if kind == K_LAUNCH), None)
        ops = cpu_lane_ops.get(p.lane[launcher]) if launcher is not None else None
        if launcher is None or not ops:
            continue
        lane = p.lane[launcher]
        launch = float(sets.checked[sets.of_node[i - base]][LAUNCH_TIME_ATTR])
        if lane not in starts:
            starts[lane] = _float_starts(p, ops)
        q = bisect.bisect_left(starts[lane], launch) - 1
        if q < 0 or ops[q] == launcher or p.start[ops[q]] < p.start[launcher]:
            continue  # launched within its launcher's slice: the launch edge holds it
        before = ops[q]
        gap = launch - (p.start[before] + p.dur[before])
        if gap > 0.0:
            parents[i - base] += ((before, K_THREAD_ORDER),)
            p.delay[i] = gap
            p.late_launch[i] = (lane, launch, before)


def _float_starts(p: PreparedGraph, ops: list[int]) -> list[float]:
    """The ops' recorded starts as floats (C-level maps: a million ops)."""
    return list(map(float, map(p.start.__getitem__, ops)))


def _of_rank(values: _Indexed[_T], ops: list[int], base: int) -> Iterator[_T]:
    """The ops' entries of a list indexed from the rank's first node (``base``)."""
    return map(values.__getitem__, ops if not base else map(sub, ops, repeat(base)))


def pin_orphans(p: PreparedGraph, base: int, orphans: list[int], parents: Parents,
                t0: float) -> None:
    """A GPU op with no dependency at all (launcher not linked) stays at its
    recorded offset instead of floating to the start of the step."""
    for i in orphans:
        if not parents[i - base] and p.nodes[i].start_time_micros:
            p.delay[i] = max(0.0, p.nodes[i].start_time_micros - t0)


def cpu_delays(p: PreparedGraph, base: int, cpu_lane_ops: dict[int, list[int]],
               parents: Parents, incl: list[float], t0: float) -> None:
    """The delay before an op is measured from when it could have started in
    the trace: the later of its thread's previous slice and its
    dependencies' ends (a thread handing over to another, a GPU sync). Also
    notes each thread's recorded tail after its last slice (callers returning).
    The compiled fast path runs ``_thread_delays``' loop where built."""
    fast = fast_path() if type(t0) is float else None
    for lane, ops in cpu_lane_ops.items():
        got = None if fast is None else \
            fast.cpu_delays(ops, p.start, p.dur, incl, parents, base, t0, p.delay)
        last, cursor = got if got is not None else \
            _thread_delays(p, base, ops, parents, incl, t0)
        p.lane_tail[lane] = max(0.0, last - cursor)
        p.lane_tail_end[lane] = last


def _thread_delays(p: PreparedGraph, base: int, ops: list[int], parents: Parents,
                   incl: list[float], t0: float) -> tuple[float, float]:
    """One thread's delays; returns its latest recorded end (start +
    inclusive time) and where its last slice ends."""
    starts, dur, delay = p.start, p.dur, p.delay
    cursor = t0
    last = -math.inf
    for i, start, inclusive, plist in zip(ops, _float_starts(p, ops), _of_rank(incl, ops, base),
                                          _of_rank(parents, ops, base)):
        ready = cursor
        for src, _kind in plist:
            e = starts[src] + dur[src]
            if ready < e <= start:
                ready = e
        gap = start - ready  # max(0.0, ...) and max(cursor, ...), inline
        delay[i] = gap if gap > 0.0 else 0.0
        held_to = start + dur[i]
        if held_to > cursor:
            cursor = held_to
        end = start + inclusive
        if end > last:
            last = end
    return last, cursor

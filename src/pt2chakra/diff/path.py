"""Where a run's step went: its critical path on the measured (or replayed)
schedule, cut into charges that tile the step exactly.

The walk starts where the step ends, on the rank that ends last, and goes
back in time. On a CPU thread, each instant belongs to the innermost op
running then (its exclusive time) or to nobody (a CPU gap). Where an op
starts after something on another lane that ended last (a kernel it
synchronised on, another thread, a collective its thread waited for), the
walk moves there; a device op or a collective is charged from its start and
the walk moves to whichever of its dependencies became ready last. A
collective's time is cut at its last peer's arrival: before it, waiting;
after it, the transfer. Whatever the walk cannot explain (time before the
first node, latency between a dependency's end and a start) is a gap, so the
charges always add up to the step.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, NamedTuple

from pt2chakra.diff.load import RankTrace, Run
from pt2chakra.diff.model import COMPUTE, GAP, KERNEL, TRANSFER, WAIT
from pt2chakra.rules.conventions import CPU_LANE
from pt2chakra.simulation.waits import CollectiveEnds

# A dependency counts as ready "at" a start up to this much after it: the
# recorded clocks of two lanes (a launch call's return, the kernel's start)
# disagree by about a microsecond.
READY_TOL_US = 1.0
NONE = -1



class Charge(NamedTuple):
    category: str
    rank: int
    node: int  # index in the rank's columns, NONE for a gap at the step's edge
    us: float


class ThreadTiling(NamedTuple):
    """A CPU thread's time cut where any op starts or ends: each piece is
    owned by the innermost op running then, or NONE (the thread was idle)."""

    starts: list[float]
    ends: list[float]
    owners: list[int]


def thread_tilings(trace: RankTrace) -> dict[tuple[Any, ...], ThreadTiling]:
    """Every CPU thread's tiling (ops are nested by their inclusive spans; a
    callee running past its caller is cut at the caller's end)."""
    by_lane: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, cpu in enumerate(trace.is_cpu):
        if cpu:
            by_lane[trace.lane[i]].append(i)
    start, end = trace.start, trace.end
    return {lane: _tile(sorted(ops, key=lambda k: (start[k], -end[k], k)), start, end)
            for lane, ops in by_lane.items()}


def _tile(ops: list[int], start: list[float], end: list[float]) -> ThreadTiling:
    tiling = ThreadTiling([], [], [])
    stack: list[tuple[int, float]] = []  # (op, its end cut to its caller's)
    cursor = start[ops[0]] if ops else 0.0
    add_start, add_end, add_owner = tiling.starts.append, tiling.ends.append, \
        tiling.owners.append

    def piece(a: float, b: float, owner: int) -> None:
        if b > a:
            add_start(a)
            add_end(b)
            add_owner(owner)

    for op in ops:
        s = start[op]
        while stack and stack[-1][1] <= s:
            top, top_end = stack.pop()
            piece(cursor, top_end, top)
            if top_end > cursor:
                cursor = top_end
        if s > cursor:
            piece(cursor, s, stack[-1][0] if stack else NONE)
            cursor = s
        e = min(end[op], stack[-1][1]) if stack else end[op]
        stack.append((op, e if e > s else s))
    while stack:
        top, top_end = stack.pop()
        piece(cursor, top_end, top)
        if top_end > cursor:
            cursor = top_end
    return tiling


class _Walker:
    """The backward walk over one rank (see the module docstring)."""

    def __init__(self, run: Run, trace: RankTrace) -> None:
        self.run = run
        self.t = trace
        self.tilings = thread_tilings(trace)
        self.thread_of_tid = {lane[1]: lane for lane in self.tilings if lane[0] == "cpu"}
        self.charges: list[Charge] = []
        self.begin = trace.window.start
        self.peers = _last_arrivals(run, trace)
        self.collective_ends = CollectiveEnds(
            (trace.start[i], trace.end[i], i) for i in trace.comm_key if trace.end[i] > trace.start[i])

    def charge(self, category: str, node: int, a: float, b: float) -> None:
        a = max(a, self.begin)
        if b > a:
            self.charges.append(Charge(category, self.t.rank, node, b - a))

    # -- where to start -------------------------------------------------------

    def walk(self) -> list[Charge]:
        """Charges tiling the rank's step window, latest first."""
        end = self.t.window.end
        last = self._last_node(end)
        if last == NONE:
            self.charge(GAP, NONE, self.begin, end)
            return self.charges
        t = min(self.t.end[last], end)
        self.charge(GAP, NONE, t, end)
        steps = 0
        limit = 4 * (len(self.t.ids) + sum(len(x.starts) for x in self.tilings.values())) + 16
        position: tuple[str, Any] = self._position_of(last)
        while t > self.begin and steps < limit:
            steps += 1
            nxt = self._step_thread(position[1], t) if position[0] == CPU_LANE \
                else self._step_node(position[1], t)
            if nxt is None:
                break
            position, t = nxt
        self.charge(GAP, NONE, self.begin, t)
        return self.charges

    def _last_node(self, end: float) -> int:
        """The node that ends last within the window (its end, up to the tolerance)."""
        best, best_end = NONE, -1.0
        for i, e in enumerate(self.t.end):
            if best_end < e <= end + READY_TOL_US:
                best, best_end = i, e
        return best

    def _position_of(self, i: int) -> tuple[str, Any]:
        return (CPU_LANE, self.t.lane[i]) if self.t.is_cpu[i] else ("node", i)

    # -- on a CPU thread ------------------------------------------------------

    def _step_thread(self, lane: tuple[Any, ...], t: float) -> tuple[tuple[str, Any], float] | None:
        """Charge the thread's pieces back from ``t`` (the tiling is
        contiguous) until an op that started there waited for something on
        another lane: move there. None when the thread's first piece is passed."""
        tiling = self.tilings[lane]
        starts, ends, owners = tiling.starts, tiling.ends, tiling.owners
        k = bisect.bisect_left(ends, t)  # first piece ending at or after t
        if k >= len(starts) or starts[k] >= t:
            k -= 1
        if k < 0:
            return None
        if ends[k] < t:
            self.charge(GAP, owners[k], ends[k], t)
            t = ends[k]
        node_start, charges, rank, begin = self.t.start, self.charges, self.t.rank, self.begin
        while k >= 0 and t > begin:
            a, owner = starts[k], owners[k]
            if owner == NONE:
                return self._leave_gap(lane, tiling, k, a, t)
            charges.append(Charge(COMPUTE, rank, owner, t - (a if a > begin else begin)))
            if node_start[owner] == a:
                jump = self._waited_for(owner, a, starts[k - 1], owners[k - 1]) \
                    if k > 0 else self._first_op_waited(owner, a)
                if jump is not None:
                    return jump
            t = a
            k -= 1
        return (CPU_LANE, lane), t

    def _first_op_waited(self, op: int, a: float) -> tuple[tuple[str, Any], float] | None:
        """The thread's first op: it started after whatever it depends on elsewhere."""
        dep = self._cross_dep(op, a)
        if dep is None:
            return None
        ready = min(self.t.end[dep], a)
        self.charge(GAP, op, ready, a)
        return self._position_of(dep), ready

    def _leave_gap(self, lane: tuple[Any, ...], tiling: ThreadTiling, k: int, a: float,
                   b: float) -> tuple[tuple[str, Any], float] | None:
        """An idle piece [a, b): the op after it waited for a dependency on
        another lane, or a collective its thread blocked on, or nothing."""
        after = tiling.owners[k + 1] if k + 1 < len(tiling.owners) else NONE
        dep = self._cross_dep(after, b) if after != NONE else None
        if dep is None:
            dep = self._blocking_collective(a, b)
        if dep is not None and self.t.end[dep] > a:
            ready = min(self.t.end[dep], b)
            self.charge(GAP, after, ready, b)
            return self._position_of(dep), ready
        self.charge(GAP, after, a, b)
        return (CPU_LANE, lane), a

    def _waited_for(self, op: int, a: float, prev_start: float,
                    prev_owner: int) -> tuple[tuple[str, Any], float] | None:
        """``op`` starts at ``a`` right after a busy piece: that piece was a
        wait (a synchronisation, a join with the autograd thread) when a
        dependency of ``op`` on another lane ended during it."""
        if prev_owner == NONE:
            return None
        best = self._cross_dep(op, a, after=prev_start)
        if best is None:
            return None
        ready = min(self.t.end[best], a)
        self.charge(GAP, op, ready, a)
        return self._position_of(best), ready

    def _cross_dep(self, op: int, at: float, after: float = -1.0) -> int | None:
        """The dependency of ``op`` on another lane that ended last before
        ``at`` (up to the tolerance), and after ``after``."""
        lane = self.t.lane[op]
        best, best_end = None, after
        for d, _kind in self.t.deps[op]:
            e = self.t.end[d]
            if self.t.lane[d] != lane and best_end < e <= at + READY_TOL_US:
                best, best_end = d, e
        return best

    def _blocking_collective(self, a: float, b: float) -> int | None:
        """The collective of this rank the thread waited for in the idle piece
        [a, b): the simulator's wake-up rule (``simulation.waits``), so that
        diff and the replay see the same waits."""
        return self.collective_ends.waited(b, a, -math.inf)

    # -- on a device op or a collective ---------------------------------------

    def _step_node(self, i: int, t: float) -> tuple[tuple[str, Any], float] | None:
        """Charge node ``i`` up to ``t``, then move to the dependency that
        became ready last (or the thread that issued it)."""
        s, e = self.t.start[i], self.t.end[i]
        if e < t:
            self.charge(GAP, i, e, t)
            t = e
        if i in self.t.comm_key:
            arrival = min(max(self.peers.get(i, s), s), t)
            self.charge(WAIT, i, s, arrival)
            self.charge(TRANSFER, i, arrival, t)
        else:
            self.charge(KERNEL, i, s, t)
        if s <= self.begin:
            return None
        best, ready = None, -1.0
        for d, _kind in self.t.deps[i]:
            r = min(self.t.end[d], s)
            if r > ready:
                best, ready = d, r
        if best is None:
            lane = self.thread_of_tid.get(self.t.tid[i])
            if lane is None:
                return None
            return (CPU_LANE, lane), s
        self.charge(GAP, i, ready, s)
        if self.t.is_cpu[best]:
            return (CPU_LANE, self.t.lane[best]), ready
        return ("node", best), ready


def _last_arrivals(run: Run, trace: RankTrace) -> dict[int, float]:
    """Each collective of ``trace``: when its last participant started, on
    ``trace``'s clock (ranks placed by their origins on the run's axis)."""
    arrivals = run.arrivals
    shift = trace.window.start - trace.origin
    return {i: arrivals[key].last_at + shift for i, key in trace.comm_key.items()}


def step_charges(run: Run) -> Iterator[Charge]:
    """Charges that add up to the run's step: the time before the step rank
    starts on the common axis (a gap), then its critical path."""
    rank = run.step_rank()
    if rank.origin > 0:
        yield Charge(GAP, rank.rank, NONE, rank.origin)
    yield from _Walker(run, rank).walk()

"""The wake-up rule: which idle gaps of a host thread were waits for a
collective that ran on another thread.

On a rank without GPU work, collectives run on host worker threads (gloo),
and a thread that waits for one (DDP finalising its buckets, a
``work.wait()``) shows an idle gap that ends just after the collective
ends, with no recorded edge. Kept as a fixed gap, that wait would not move
when the collective does; as a dependency on the collective it does. The
replay (``inferred_waits.py``) and the ASTRA-sim export's serial chain
(``astra/serial_chain.py``) both ask this module, so they infer the same
waits.

A thread holds itself from an op's start until its first callee starts (or
until the op ends): ``thread_holds``. The idle gap before an op X runs from
the end of the thread's latest hold to X's start.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass

# A gap shorter than this is not a wait (scheduling noise; the same floor
# the replay uses to infer cross-stream waits).
INFER_MIN_US = 20.0
# A host thread that blocked on a collective run by another host thread
# (gloo's worker threads, CPU-only ranks) wakes up this long after the
# collective ends at most: measured wake-ups on gloo DDP steps are ~0.1 ms,
# loaded machines add scheduling delay.
CPU_WAKE_TOL_US = 500.0
# On a loaded machine it grows (up to ~1.4 ms seen after 20-27 ms waits),
# and the waiter may even wake before the collective's recorded end (the
# worker marks the work done, then closes its record): a gap may end this
# share of its length away from the collective's end, either side. (Not
# more before it: a thread issuing the next collective while one finishes
# is no wait.)
WAKE_TOL_FRACTION = 0.1


@dataclass(frozen=True, slots=True)
class TimedHostOp:
    """One timed op of a host thread, in the thread's order."""

    key: int
    start: float
    held_end: float  # start + the time it holds the thread (``thread_holds``)
    explained: float = -math.inf  # latest end of the collectives its recorded deps name
    # where a recorded dependency on another thread let it go on (``release_point``)
    released: float = -math.inf


def release_point(op_start: float, other_thread_dep_ends: Iterable[float]) -> float:
    """``TimedHostOp.released``: the latest end, at or before the op's start,
    of its recorded dependencies on other threads (a CPU op ends with its
    callees); -inf where none ended by then. The replay and the serial chain
    each find those ends in their own graph, then ask this."""
    return max((e for e in other_thread_dep_ends if e <= op_start), default=-math.inf)


@dataclass(frozen=True, slots=True)
class HostWait:
    """Op ``op`` waited for collective ``collective`` from ``gap_start`` (its
    thread's previous hold end) until its own start."""

    op: int
    collective: int
    gap_start: float


class CollectiveEnds:
    """A rank's collectives by end, to find the one a gap waited for."""

    def __init__(self, spans: Iterable[tuple[float, float, int]]) -> None:
        """``spans``: (start, end, key) of each collective with a duration."""
        ordered = sorted((end, key, start) for start, end, key in spans)  # ties: by key
        self.end_t = [end for end, _key, _start in ordered]
        self.by_end = ordered

    def waited(self, op_start: float, gap_start: float, explained: float,
               released: float = -math.inf) -> int | None:
        """The collective whose end is nearest ``op_start`` among those that
        ended inside the gap ``(gap_start, op_start]`` (after ``explained``),
        at most the wake-up tolerance before ``op_start``, and started before
        the op (so it cannot depend on it: no cycle), or ended at most
        ``WAKE_TOL_FRACTION`` of the gap after ``op_start`` and were already
        running when the gap began (or picked up by a worker within the
        wake-up tolerance of it: the thread issued it, then waited for it; a
        DDP step's one bucket, 2.1 s, started 0.4 ms into the gap and closed
        its record 4 ms after the thread went on). When the op's recorded
        dependency ended
        inside the gap (``released``: the thread could not go on before it),
        the thread's wait is the rest of the gap, and the same tolerances
        hold over it: a collective picked up by then or at most the wake-up
        tolerance after it, and ending at most ``WAKE_TOL_FRACTION`` of that
        wait after ``op_start``, is the wait (the work the dependency had just issued:
        FSDP2's reduce-scatter, whose ``div_`` waits for the gloo all-reduce
        its c10d call queued on another thread and starts before the worker
        closes the record). Nearest, not latest: in a long gap the tolerance
        after ``op_start`` can reach a collective that ended well after the
        thread woke (seen: 33 ms after, with the one it waited for ending 2
        ms after); equally near, the later one."""
        lead = WAKE_TOL_FRACTION * (op_start - gap_start)
        tol = max(CPU_WAKE_TOL_US, lead)
        after = gap_start < released < op_start  # the wait began at ``released``
        waited_lead = WAKE_TOL_FRACTION * (op_start - released) if after else 0.0
        pickup = max(CPU_WAKE_TOL_US, waited_lead)
        best, best_gap = None, math.inf
        k = bisect.bisect_right(self.end_t, op_start + lead) - 1
        while k >= 0 and self.end_t[k] > max(gap_start, explained) \
                and self.end_t[k] >= op_start - tol:
            end, key, start = self.by_end[k]
            if start < op_start and (end <= op_start or start <= gap_start + CPU_WAKE_TOL_US or (
                    after and start <= released + pickup and end <= op_start + waited_lead)):
                if abs(end - op_start) < best_gap:
                    best, best_gap = key, abs(end - op_start)
                if end <= op_start:
                    break  # every earlier end is farther
            k -= 1
        return best


def host_comm_waits(threads: Iterable[Iterable[TimedHostOp]],
                    collectives: CollectiveEnds) -> list[HostWait]:
    """The waits of every thread: an op whose gap (after its thread's latest
    hold) is longer than ``INFER_MIN_US`` and ends near a collective's end
    (``CollectiveEnds.waited``) waited for that collective."""
    waits: list[HostWait] = []
    if not collectives.end_t:
        return waits
    for ops in threads:
        cursor = -math.inf
        for op in ops:
            if op.start - cursor > INFER_MIN_US and cursor > -math.inf:
                key = collectives.waited(op.start, cursor, max(cursor, op.explained),
                                         op.released)
                if key is not None:
                    waits.append(HostWait(op.key, key, cursor))
            cursor = max(cursor, op.held_end)
    return waits

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
    # latest end of anything its recorded deps name, up to its start (inf: not known)
    woken: float = math.inf


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
               woken: float = math.inf) -> int | None:
        """The collective whose end is nearest ``op_start`` among those that
        ended inside the gap ``(gap_start, op_start]`` (after ``explained``),
        at most the wake-up tolerance before ``op_start``, and started before
        the op (so it cannot depend on it: no cycle), or ended at most
        ``WAKE_TOL_FRACTION`` of the gap after ``op_start`` and were already
        running when the gap began or began after everything the op depends
        on had ended (``woken``; nothing else can have woken it: a gloo
        worker's post-processing of the collective it ran, FSDP2's div_
        after its all-reduce, 0.2 - 9.4 ms before the collective's record
        closes on the scale-out bench; a worker starting the next collective
        is woken by its issuing call). Nearest, not latest: in a long gap the
        tolerance after ``op_start`` can reach a collective that ended well
        after the thread woke (seen: 33 ms after, with the one it waited for
        ending 2 ms after); equally near, the later one."""
        lead = WAKE_TOL_FRACTION * (op_start - gap_start)
        tol = max(CPU_WAKE_TOL_US, lead)
        best, best_gap = None, math.inf
        k = bisect.bisect_right(self.end_t, op_start + lead) - 1
        while k >= 0 and self.end_t[k] > max(gap_start, explained) \
                and self.end_t[k] >= op_start - tol:
            end, key, start = self.by_end[k]
            if start < op_start and (end <= op_start or start <= gap_start or woken < start):
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
                key = collectives.waited(op.start, cursor, max(cursor, op.explained), op.woken)
                if key is not None:
                    waits.append(HostWait(op.key, key, cursor))
            cursor = max(cursor, op.held_end)
    return waits

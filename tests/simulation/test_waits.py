"""The wake-up rule (``simulation.waits``), the one home the replay and the
ASTRA-sim serial chain share."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.rules.conventions import thread_holds
from pt2chakra.simulation.waits import (
    CPU_WAKE_TOL_US,
    CollectiveEnds,
    HostWait,
    TimedHostOp,
    host_comm_waits,
    release_point,
)


def test_a_caller_holds_its_thread_only_until_its_first_callee():
    # caller [0, 100) with a callee [10, 20); then an op at 200
    assert list(thread_holds([0.0, 10.0, 200.0], [100.0, 10.0, 5.0])) == [10.0, 10.0, 5.0]


def _thread(wake_at: float) -> list[TimedHostOp]:
    return [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, wake_at, wake_at + 50.0)]


def test_gap_ending_just_after_a_collective_waited_for_it():
    ends = CollectiveEnds([(100.0, 1100.0, 2)])
    assert host_comm_waits([_thread(1120.0)], ends) == [HostWait(3, 2, 100.0)]


def test_gap_ending_far_after_it_did_not():
    ends = CollectiveEnds([(100.0, 1100.0, 2)])
    assert host_comm_waits([_thread(1100.0 + CPU_WAKE_TOL_US + 1000.0)], ends) == []


def test_a_recorded_edge_explains_the_gap():
    ends = CollectiveEnds([(100.0, 1100.0, 2)])
    explained = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 1120.0, 1170.0, explained=1100.0)]
    assert host_comm_waits([explained], ends) == []
    assert ends.waited(1120.0, 100.0, -math.inf) == 2


def test_in_a_long_gap_the_nearest_end_is_the_wait_not_the_latest():
    """A thread idle from 100 to 40,000 us may wake up to 4 ms (a tenth of the
    gap) before the end of a collective it waited for: of two that were
    running as the gap began, ending 2,000 and 35,000 us after it woke, it
    waited for the first (the second ended long after it was running again)."""
    ends = CollectiveEnds([(50.0, 42000.0, 2), (60.0, 75000.0, 4)])
    thread = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 40000.0, 40050.0)]
    assert host_comm_waits([thread], ends) == [HostWait(3, 2, 100.0)]
    # one that ended in the gap, nearer than one ending after the wake-up
    ends = CollectiveEnds([(50.0, 39900.0, 2), (60.0, 41000.0, 4)])
    assert host_comm_waits([thread], ends) == [HostWait(3, 2, 100.0)]


def test_a_wait_for_the_work_a_recorded_dependency_just_issued() -> None:
    """FSDP2's reduce-scatter over gloo: thread 2 idles from 100 us, its
    ``div_`` depends on the c10d call of another thread that returns at
    64,900 us, the all-reduce that call queued is picked up at 65,000 and
    closed at 180,100, and the ``div_`` starts at 179,700 (woken before the
    worker closed the record). The collective started inside the gap, after
    it began: without the release point it is not the wait (the 115 ms would
    stay CPU time, stretched with it); with it, it is."""
    ends = CollectiveEnds([(65000.0, 180100.0, 2)])
    plain = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 179700.0, 179750.0)]
    assert host_comm_waits([plain], ends) == []
    released = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 179700.0, 179750.0, released=64900.0)]
    assert host_comm_waits([released], ends) == [HostWait(3, 2, 100.0)]
    # picked up later than the wake-up tolerance (here a tenth of the gap)
    # after the release: some other work, not the one the dependency issued
    late = CollectiveEnds([(64900.0 + 0.1 * 179600.0 + 100.0, 180100.0, 2)])
    assert host_comm_waits([released], late) == []
    # a release before the gap began adds nothing to the plain rule
    early = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 179700.0, 179750.0, released=50.0)]
    assert host_comm_waits([early], ends) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e5), st.floats(1, 1e5)), min_size=1, max_size=6),
       st.floats(0, 1e5), st.floats(20, 1e5), st.floats(-1e5, 2e5))
def test_a_release_point_only_adds_waits(spans: list[tuple[float, float]], gap_start: float,
                                         idle: float, released: float) -> None:
    """Invariant: a release point never takes away a wait the plain rule
    finds, and one outside the gap changes nothing."""
    ends = CollectiveEnds([(s, s + d, k) for k, (s, d) in enumerate(spans)])
    op_start = gap_start + idle
    plain = ends.waited(op_start, gap_start, -math.inf)
    with_release = ends.waited(op_start, gap_start, -math.inf, released)
    if plain is not None:
        assert with_release is not None
    if not gap_start < released < op_start:
        assert with_release == plain


def test_the_release_point_is_the_latest_dependency_end_by_the_op_start() -> None:
    """A dependency that ended after the op started did not let it go on; one
    ending exactly at its start did; none: no release point."""
    assert release_point(100.0, [40.0, 100.0, 130.0, 70.0]) == 100.0
    assert release_point(100.0, [130.0]) == -math.inf
    assert release_point(100.0, []) == -math.inf


def test_a_collective_the_thread_just_issued_is_its_wait() -> None:
    """DDP's one bucket: the thread issues the all-reduce and waits 2.1 s; the
    worker picked it up 0.4 ms into the gap and closed its record 4 ms after
    the thread went on: that is the wait. One that started 2 ms into the gap
    (issued by another thread meanwhile) is not."""
    from pt2chakra.simulation.waits import CPU_WAKE_TOL_US, CollectiveEnds

    gap_start, op_start = 139_482.0, 2_276_217.0
    picked = CollectiveEnds([(gap_start + 391.0, op_start + 4_324.0, 7)])
    assert picked.waited(op_start, gap_start, gap_start) == 7
    later = CollectiveEnds([(gap_start + 4 * CPU_WAKE_TOL_US, op_start + 4_324.0, 7)])
    assert later.waited(op_start, gap_start, gap_start) is None

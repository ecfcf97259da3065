"""The wake-up rule (``simulation.waits``), the one home the replay and the
ASTRA-sim serial chain share."""

from __future__ import annotations

import math

from pt2chakra.rules.conventions import thread_holds
from pt2chakra.simulation.waits import (
    CPU_WAKE_TOL_US,
    CollectiveEnds,
    HostWait,
    TimedHostOp,
    host_comm_waits,
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


def test_a_worker_post_processing_inside_a_collective_begun_in_its_gap_waited_for_it():
    """A gloo worker idle from 100 us runs a collective issued at 10,000 us
    (its network time shows as the worker's gap) and divides the result at
    60,000 us, 1.4 ms before the collective's record closes (FSDP2's div_
    after its all-reduce). Woken by nothing it depends on (its issuing call
    ended at 9,990 us, before the collective began), it waited for it."""
    ends = CollectiveEnds([(10000.0, 61400.0, 2)])
    div = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 60000.0, 60050.0, woken=9990.0)]
    assert host_comm_waits([div], ends) == [HostWait(3, 2, 100.0)]
    # unknown dependencies (the default) keep the rule as it was: no wait
    assert host_comm_waits([[div[0], TimedHostOp(3, 60000.0, 60050.0)]], ends) == []


def test_a_worker_woken_by_its_issuing_call_did_not_wait_for_a_collective_ending():
    """The worker starts the next collective at 60,000 us, woken by its
    issuing call (a recorded dependency ending at 59,990 us, after the
    running collective began): no wait for the collective that ends 300 us
    later."""
    ends = CollectiveEnds([(10000.0, 60300.0, 2)])
    view = [TimedHostOp(1, 0.0, 100.0), TimedHostOp(3, 60000.0, 60050.0, woken=59990.0)]
    assert host_comm_waits([view], ends) == []

"""Cross-stream waits a trace does not record, inferred from timing: a
collective kernel waits for what its caller had queued on the compute stream
(ProcessGroupNCCL's event), and a kernel waits for the GPU a long kernel of
another stream fills. A trace without runtime sync events shows only that
the kernel started late; seen on HTA's trace_diff ranks."""

from __future__ import annotations

import pytest
from builders import MD, cpu, gpu

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.inferred_waits import COMM_EVENT_TOL_US, HELD_TAIL_FRACTION
from pt2chakra.simulation.results import SimConfig

AR = CollectiveType.ALL_REDUCE


def _rank(lag: int, queued_after: bool = False) -> list:
    """Op 1 (0-10 us) queues a 1000 us kernel on stream 7; op 2 (10-20 us)
    launches an all-reduce on stream 9 that starts ``lag`` us after that
    kernel ends, with no recorded edge to it. ``queued_after``: op 3 queues
    the compute kernel after the launch instead."""
    kernel_launcher = 3 if queued_after else 1
    return [cpu(1, 0, 10), cpu(2, 10, 10, deps=[1]), cpu(3, 20, 10, deps=[2]),
            gpu(4, 10, 1000, deps=[kernel_launcher], kinds=["launch"], stream=7),
            gpu(5, 1010 + lag, 100, deps=[2], kinds=["launch"], comm=AR, seq=1, stream=9)]


def _run(nodes: list, infer: bool = True) -> tuple[float, int, float]:
    """Predicted step, inferred edges, the last node's replayed start."""
    res, sched = Simulator([(MD, nodes)], infer_waits=infer).run(SimConfig())
    return res.predicted_step_us, res.inferred_stream_waits, sched.start[-1]


def test_a_late_collective_waits_for_the_work_queued_before_it() -> None:
    lag = 125  # a V100's event latency under a busy GEMM (HTA trace_diff test)
    step, inferred, start = _run(_rank(lag))
    assert inferred == 1 and start == pytest.approx(1010)
    assert step == pytest.approx(1010 + 100)
    # without the inferred wait it would start at its launch, 1 ms early
    assert _run(_rank(lag), infer=False)[2] == pytest.approx(20)


def test_a_start_too_far_after_the_queued_work_is_no_wait() -> None:
    assert _run(_rank(int(COMM_EVENT_TOL_US) + 50))[1] == 0


def test_work_queued_after_the_launch_is_not_waited_for() -> None:
    _, inferred, start = _run(_rank(30, queued_after=True))
    assert inferred == 0 and start == pytest.approx(20)


def _held(tail: int) -> list:
    """Op 1 queues a 1000 us kernel on stream 7 (0-1000 us); op 2 launches
    a short kernel on stream 8 that starts ``tail`` us before it ends."""
    return [cpu(1, 0, 1), cpu(2, 1, 9, deps=[1]),
            gpu(3, 1, 1000, deps=[1], kinds=["launch"], stream=7),
            gpu(4, 1001 - tail, 5, deps=[2], kinds=["launch"], stream=8)]


def test_a_kernel_held_back_by_a_long_kernel_starts_in_its_tail() -> None:
    tail = int(HELD_TAIL_FRACTION * 1000) // 2
    _, inferred, start = _run(_held(tail))
    assert inferred == 1 and start == pytest.approx(1001)
    assert _run(_held(tail), infer=False)[2] == pytest.approx(10)


def test_a_start_before_the_tail_is_no_wait() -> None:
    _, inferred, start = _run(_held(int(HELD_TAIL_FRACTION * 1000) * 3))
    assert inferred == 0 and start == pytest.approx(10)

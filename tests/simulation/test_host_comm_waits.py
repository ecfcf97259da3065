"""A host thread that waits for a collective run by another host thread
(gloo on CPU-only ranks) shows a gap and no edge: the replay infers the wait,
so that a network what-if moves the step."""

from __future__ import annotations

import pytest
from builders import MD, cpu, gpu

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.results import SimConfig

AR = CollectiveType.ALL_REDUCE


def _rank(wake_at: int, with_gpu_kernel: bool = False) -> list:
    """Issue (0-100 us), all-reduce on a worker (100-1100 us), the main
    thread's next op at ``wake_at`` with no recorded edge to the all-reduce."""
    nodes = [cpu(1, 0, 100), gpu(2, 100, 1000, deps=[1], kinds=["launch"], comm=AR, seq=1,
                                 stream=9),
             cpu(3, wake_at, 50, deps=[1])]
    if with_gpu_kernel:
        nodes.append(gpu(4, 0, 10, stream=7))
    return nodes


def _step(ranks: list, scale: float, infer: bool = True) -> float:
    sim = Simulator([(MD, r) for r in ranks], infer_waits=infer)
    return sim.run(SimConfig(bandwidth_scale=scale, align="together"))[0].predicted_step_us


def test_gap_ending_at_a_collective_end_is_a_wait() -> None:
    ranks = [_rank(1120), _rank(1120)]
    assert _step(ranks, 1.0) == pytest.approx(1170)
    # the all-reduce takes 2000 us; the waiter follows it (20 us wake-up, then 50)
    assert _step(ranks, 0.5) == pytest.approx(100 + 2000 + 20 + 50)
    # replayed as a fixed gap instead, the wait would not move
    assert _step(ranks, 0.5, infer=False) == pytest.approx(100 + 2000)
    assert _step(ranks, 2.0) == pytest.approx(100 + 500 + 20 + 50)


def test_gap_ending_far_from_any_collective_end_stays_a_gap() -> None:
    ranks = [_rank(1900), _rank(1900)]
    assert _step(ranks, 2.0) == pytest.approx(1950)  # 1800 us of recorded gap, unchanged


def test_ranks_with_gpu_work_are_left_alone() -> None:
    """There the host waits on the GPU through sync events the converter records."""
    ranks = [_rank(1120, with_gpu_kernel=True), _rank(1120, with_gpu_kernel=True)]
    assert _step(ranks, 0.5) == pytest.approx(_step(ranks, 0.5, infer=False))


def _issued_by_a_dependency(wake_at: int) -> list:
    """FSDP2's reduce-scatter over gloo: thread 1's c10d call (0-100 us)
    queues the all-reduce, a worker picks it up at 150 and ends it at 1150;
    thread 2, idle since 10 us, runs its next op (recorded edge: the c10d
    call) at ``wake_at``, which may come before the worker closes its record."""
    return [cpu(1, 0, 100),
            cpu(2, 0, 10, tid=2),
            gpu(3, 150, 1000, deps=[1], kinds=["launch"], comm=AR, seq=1, stream=9),
            cpu(4, wake_at, 50, deps=[2, 1], kinds=["thread_order", "inter_thread"], tid=2)]


def _cpu_scaled_step(ranks: list, cpu_scale: float, bandwidth_scale: float = 1.0) -> float:
    sim = Simulator([(MD, r) for r in ranks])
    cfg = SimConfig(cpu_scale=cpu_scale, bandwidth_scale=bandwidth_scale, align="together")
    return sim.run(cfg)[0].predicted_step_us


@pytest.mark.parametrize("wake_at", [1140, 1160])
def test_a_wait_for_work_a_recorded_dependency_issued(wake_at: int) -> None:
    """The gap of thread 2 began before the all-reduce did, but after its
    recorded dependency returned the thread could only wait for the work
    that call had queued: the wait follows the collective, and is not CPU
    time that a CPU stretch multiplies (x4 would add ~3 ms)."""
    ranks = [_issued_by_a_dependency(wake_at) for _ in range(2)]
    base = _cpu_scaled_step(ranks, 1.0)
    assert base == pytest.approx(wake_at + 50, abs=10)
    assert _cpu_scaled_step(ranks, 1.0, bandwidth_scale=0.5) == pytest.approx(base + 1000, abs=20)
    assert _cpu_scaled_step(ranks, 4.0) < base + 4 * 250  # the CPU and wake-up parts only

"""Two rules of the replay that host-run collectives (gloo on CPU) need:
each participant runs from the last arrival to its own recorded end when the
ranks share a clock, and a worker thread's recorded pick-up of a collective
is replayed as a delay."""

from __future__ import annotations

import pytest
from builders import MD, cpu, gpu, metadata
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.rules.conventions import COMM_CHANNEL
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.results import SimConfig

AR = CollectiveType.ALL_REDUCE
WORKER = 9  # the comm lane of the collectives


def _rank(issue_end: int, start: int, end: int, pickup: int = 0, step: int = 0) -> list:
    """Issue op (0..issue_end), then the all-reduce picked up ``pickup`` after
    it on a worker lane and recorded ``start``..``end``, then a 10 us op that
    follows it on the main thread."""
    return [cpu(1, 0, issue_end),
            gpu(2, start + pickup, end - start, deps=[1], kinds=["launch"], comm=AR, seq=1,
                stream=WORKER),
            cpu(3, end + pickup, 10, deps=[2], kinds=["stream_wait"])]


def _ends(ranks: list, align: str, step: tuple[int, int] | None = None) -> list[float]:
    """Each rank's all-reduce end in the replay, from its rank's origin."""
    graphs = [(metadata(rank=r, step=step) if step else MD, nodes)
              for r, nodes in enumerate(ranks)]
    sim = Simulator(graphs, infer_waits=False)
    _result, schedule = sim.run(SimConfig(align=align))
    return [schedule.end[i] - schedule.rank_origin[schedule.rank[i]]
            for i, n in enumerate(schedule.nodes) if n.name == "gpu2"]


def test_on_a_shared_clock_each_rank_ends_as_recorded() -> None:
    """Rank 0 arrives last (at 200) and ends at 700; rank 1 arrived at 100 and
    ended at 900 (its peer's data came last): both ends are kept, where the
    minimum rule would end both at 700."""
    ranks = [_rank(200, 200, 700), _rank(100, 100, 900)]
    assert _ends(ranks, "recorded", step=(0, 910)) == pytest.approx([700, 900])
    assert _ends(ranks, "together") == pytest.approx([700, 700])


def _on_worker(nodes: list) -> list:
    """The collective as gloo's converted traces carry it: run by a host
    worker thread the converter names (``comm_channel``)."""
    coll = nodes[1]
    coll.attrs = [*coll.attrs, (COMM_CHANNEL, "int64_val", WORKER)]
    return nodes


def test_a_host_collective_ending_before_the_last_arrival_does_not_wait_for_it() -> None:
    """A broadcast root on a gloo worker that only queued its send (ended
    at 150, before its peer arrived at 400) runs from its own arrival for
    its own time; its peer still starts at its own (last) arrival. Not so an
    NCCL-like kernel (no worker thread named): it is held to the last arrival."""
    ranks = [_on_worker(_rank(100, 100, 150)), _on_worker(_rank(400, 400, 450))]
    assert _ends(ranks, "recorded", step=(0, 460)) == pytest.approx([150, 450])
    ranks = [_rank(100, 100, 150), _rank(400, 400, 450)]
    assert _ends(ranks, "recorded", step=(0, 460)) == pytest.approx([400, 450])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(1, 1000), st.integers(0, 800)),
                min_size=2, max_size=5))
def test_recorded_ends_come_back_exactly(ranks_spec: list[tuple[int, int, int]]) -> None:
    """Invariant: whatever the arrivals and the per-rank tails after the last
    one, every rank's replayed end is its recorded end when the tail is
    non-negative (a recording replays as recorded)."""
    last = max(a for a, _, _ in ranks_spec)
    ranks = []
    for arrive, _dur, tail in ranks_spec:
        ranks.append(_rank(max(arrive, 1), max(arrive, 1), max(last, 1) + tail + 1))
    ends = _ends(ranks, "recorded", step=(0, 3000))
    assert ends == pytest.approx([max(last, 1) + tail + 1 for _, _, tail in ranks_spec])


def test_a_workers_pickup_is_replayed_as_a_delay() -> None:
    """On a CPU-only rank the worker picked the all-reduce up 300 us after
    it was issued: the replay keeps that, and the step with it."""
    with_pickup = [_rank(100, 100, 600, pickup=300), _rank(100, 100, 600, pickup=300)]
    sim = Simulator([(MD, r) for r in with_pickup], infer_waits=False)
    result, _ = sim.run(SimConfig(align="together"))
    assert result.predicted_step_us == pytest.approx(result.measured_step_us)
    assert result.predicted_step_us == pytest.approx(600 + 300 + 10)


def test_ranks_with_gpu_work_get_no_pickup_delay() -> None:
    """A GPU's collective kernel starts when its stream and peers allow: a
    gap before it is not a host thread waking up."""
    ranks = [[*_rank(100, 100, 600, pickup=300), gpu(4, 0, 10, stream=7)] for _ in range(2)]
    sim = Simulator([(MD, r) for r in ranks], infer_waits=False)
    result, _ = sim.run(SimConfig(align="together"))
    assert result.predicted_step_us == pytest.approx(600 + 10)


def test_a_workers_post_processing_waits_for_the_collective_it_ran() -> None:
    """A gloo worker idle from 60 us runs the all-reduce that the c10d call
    (op 1, another thread) issued at 100 us and divides its result at 9,000
    us, 500 us before the collective's record closes (FSDP2's div_ after its
    all-reduce, which records its dependency on that call). The call released
    it at 100 us and the collective was picked up then, so it waited for it
    (the wake-up rule's release point): the replay starts it at the
    collective's end, not 8,940 us after the worker's previous op (a delay
    the CPU stretch of a scaled-out job would multiply)."""
    def rank() -> list:
        nodes = _on_worker([cpu(1, 0, 100),
                            gpu(2, 100, 9400, deps=[1], kinds=["launch"], comm=AR, seq=1,
                                stream=WORKER)])
        return [*nodes, cpu(4, 40, 20, tid=2), cpu(5, 9000, 10, deps=[4, 1], tid=2)]

    result, schedule = Simulator([(MD, rank()), (MD, rank())]).run(SimConfig(align="together"))
    assert result.inferred_stream_waits == 2  # op 5 of each rank
    starts = [schedule.start[i] for i, n in enumerate(schedule.nodes) if n.name == "cpu5"]
    assert starts == pytest.approx([9500, 9500])

"""The calibration's sample of a collective on ranks that share a clock: each
participant timed from the last arrival to its own end (what the replay runs
it for), the shortest of them the collective's; a participant that ended
before the last arrival left out; without a shared clock, each own span."""

from __future__ import annotations

import pytest
from builders import cpu, gpu, metadata
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.records import ChakraNode, CollectiveType
from pt2chakra.simulation.durations import calibrate, transfer_spans
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.event_loop import participants_of, shares_clock
from pt2chakra.simulation.prepared import PreparedGraph

AG = CollectiveType.ALL_GATHER
STEP_END = 5000  # every rank's step window ends here (the ranks share a clock)


def _rank(start: int, end: int) -> list[ChakraNode]:
    """An op issuing one 1 MiB all-gather recorded ``start``..``end``."""
    return [cpu(1, 0, max(start, 1)), gpu(2, start, end - start, deps=[1], kinds=["launch"],
                                          comm=AG, seq=1)]


def _prepared(spans: list[tuple[int, int]]) -> PreparedGraph:
    graphs = [(metadata(rank=r, step=(0, STEP_END)), _rank(s, e)) for r, (s, e) in enumerate(spans)]
    return Simulator(graphs, infer_waits=False).prepared(1)


def _fitted_us(spans: list[tuple[int, int]], shared_clock: bool) -> float:
    """The calibrated time of the all-gather (one sample: the fit's overhead)."""
    p = _prepared(spans)
    (cal,) = calibrate(p, participants_of(p), "ring", shared_clock=shared_clock).values()
    return cal.time_us(int(AG), 1 << 20, len(spans))


def test_an_early_rank_that_ends_first_times_the_link() -> None:
    """gloo's 2-rank all-gather: rank 0 came at 100 and ends 440 us after
    rank 1 came (at 400: the link time), rank 1 ends 190 us later still.
    From the last arrival the collective took 440 us; the shortest own span
    (rank 1's, 630 us) is the slow direction, and rank 0's own 740 us holds
    its wait."""
    spans = [(100, 840), (400, 1030)]
    assert shares_clock(_prepared(spans))
    assert _fitted_us(spans, shared_clock=True) == pytest.approx(440)
    assert _fitted_us(spans, shared_clock=False) == pytest.approx(630)


def test_a_participant_that_ended_before_the_last_arrival_is_left_out() -> None:
    """A root that only queued its send (100..110, before its peer came at
    400) says nothing about the transfer: the peer's 500 us times it."""
    spans = [(100, 110), (400, 900)]
    p = _prepared(spans)
    got, waited = transfer_spans(p, participants_of(p), shared_clock=True)
    root, peer = sorted(got, key=lambda i: p.rank[i])
    assert root not in waited and got[root] == (100, 110) and got[peer] == (400, 900)
    assert _fitted_us(spans, shared_clock=True) == pytest.approx(500)
    assert _fitted_us(spans, shared_clock=False) == pytest.approx(10)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(2, 2000)), min_size=2, max_size=5))
def test_the_sample_is_the_first_end_after_the_last_arrival(
        ranks_spec: list[tuple[int, int]]) -> None:
    """Invariant: when every participant ends after the last arrival, the
    collective's time is the first end less the last arrival, never more
    than the shortest own span, and the same as it when all came together."""
    last = max(a for a, _ in ranks_spec)
    spans = [(a, last + after) for a, after in ranks_spec]
    on_clock = _fitted_us(spans, shared_clock=True)
    own = _fitted_us(spans, shared_clock=False)
    assert on_clock == pytest.approx(min(e for _, e in spans) - last)
    assert on_clock <= own + 1e-6
    together = [(last, e) for _, e in spans]
    assert _fitted_us(together, shared_clock=True) == pytest.approx(
        _fitted_us(together, shared_clock=False))

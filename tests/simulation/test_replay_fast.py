"""The replay by the compiled path (``_fast.replay_plain``) gives the times
and bindings of the Python replay (``_Replay.replay``, its twin) on any
graph it takes: random DAGs over a few lanes, with ties in times and in
recorded order; inputs it does not take leave the run untouched."""

from __future__ import annotations

import math
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.simulation import compiled
from pt2chakra.simulation.event_loop import ReplayRun, _Replay, replay_compiled
from pt2chakra.simulation.prepared import K_LANE, K_START, PreparedGraph

pytestmark = pytest.mark.skipif(getattr(compiled.FAST, "replay_plain", None) is None,
                                reason="the compiled fast path is not built here")

_times = st.one_of(st.sampled_from([0.0, 1.0, 2.5, 0.5]), st.floats(0, 1e6, allow_nan=False))


@st.composite
def _graph(draw: st.DrawFn) -> tuple[PreparedGraph, list[float], list[float], list[float]]:
    """A graph of n nodes on some lanes of some ranks, edges from lower to
    higher index (acyclic) with kinds, and its durations, delays, origins."""
    n = draw(st.integers(0, 30))
    ranks = draw(st.integers(1, 3))
    lanes = draw(st.integers(1, 4))
    p = PreparedGraph()
    p.nodes = [ChakraNode(i, "op", NodeType.COMP_NODE) for i in range(n)]  # logging only
    p.lane_names = [(draw(st.integers(0, ranks - 1)), "cpu", str(k)) for k in range(lanes)]
    p.lane = [draw(st.integers(0, lanes - 1)) for _ in range(n)]
    p.rank = [p.lane_names[lane][0] for lane in p.lane]
    p.order = [draw(st.integers(0, 5)) for _ in range(n)]  # ties: by index
    children: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    nwait = [0] * n
    for c in range(n):
        for parent in draw(st.sets(st.integers(0, c - 1), max_size=3)) if c else ():
            children[parent].append((c, draw(st.integers(0, 6))))
            nwait[c] += 1
    p.nwait = nwait
    p.child_start = array("q", [0])
    p.child, p.child_kind = array("q"), array("b")
    for kids in children:
        p.child.extend(c for c, _ in kids)
        p.child_kind.extend(k for _, k in kids)
        p.child_start.append(len(p.child))
    dur = [draw(_times) for _ in range(n)]
    delay = [draw(_times) for _ in range(n)]
    origin = [draw(_times) for _ in range(ranks)]
    return p, dur, delay, origin


def _run(p: PreparedGraph, dur: list[float], delay: list[float], origin: list[float],
         fast: bool) -> tuple[Any, ...]:
    run = ReplayRun(len(p.nwait))
    run.origin = origin
    saved = compiled.FAST
    if not fast:
        compiled.FAST = None
    try:
        took = replay_compiled(p, run, dur, delay, {}, False) if fast else False
        if not took:
            _Replay(p, run, dur, delay, {}, False).replay()
    finally:
        compiled.FAST = saved
    # repr: NaN (a node that never ran) equals NaN, and float vs int shows
    return took, repr((run.start, run.end, run.bind_pred, run.bind_kind, run.bind_time))


@settings(max_examples=600, deadline=None)
@given(_graph())
def test_same_replay(case: tuple[PreparedGraph, list[float], list[float], list[float]]) -> None:
    p, dur, delay, origin = case
    took, fast = _run(p, dur, delay, origin, True)
    _, python = _run(p, dur, delay, origin, False)
    assert took or not p.nwait
    assert fast == python


def _untouched(run: ReplayRun) -> bool:
    return math.isnan(run.start[0]) and math.isnan(run.end[0]) and list(run.bind_pred) == [-1]


def test_inputs_it_does_not_take() -> None:
    """An int duration or a NaN: None, and the run's arrays untouched."""
    plain = getattr(compiled.FAST, "replay_plain", None)
    assert plain is not None
    for dur in ([1], [math.nan], [math.inf]):
        run = ReplayRun(1)
        got = plain([0.0], [0], [0.0], [0], [0], array("q", [0, 0]), array("q"), array("b"),
                    dur, [0.0], run.start, run.end, run.bind_pred, run.bind_kind,
                    run.bind_time, K_START, K_LANE)
        assert got is None
        assert _untouched(run)


def test_columns_it_does_not_take() -> None:
    """The run's columns must be arrays of its typecodes and length: a list,
    another typecode or another length gives None, nothing written."""
    plain = getattr(compiled.FAST, "replay_plain", None)
    assert plain is not None
    for column, wrong in ((0, [math.nan]), (1, array("f", [math.nan])), (2, array("q", [-1, -1])),
                          (3, array("q", [K_START]))):
        run = ReplayRun(1)
        cols: list[Any] = [run.start, run.end, run.bind_pred, run.bind_kind, run.bind_time]
        cols[column] = wrong
        got = plain([0.0], [0], [0.0], [0], [0], array("q", [0, 0]), array("q"), array("b"),
                    [1.0], [0.0], *cols, K_START, K_LANE)
        assert got is None
        assert _untouched(run)
    run = ReplayRun(1)
    assert plain([0.0], [0], [0.0], [0], [0], array("q", [0, 0]), array("q"), array("b"),
                 [1.0], [0.0], run.start, run.end, run.bind_pred, run.bind_kind, run.bind_time,
                 K_START, K_LANE) is True
    assert (run.start[0], run.end[0], run.bind_pred[0], run.bind_kind[0]) == (0.0, 1.0, -1, K_START)

"""The critical path's walk back by the compiled path (``_fast.walk_back``)
gives the tally of the Python walk (``_walk_back_python``, its twin) on any
run: arbitrary times (NaN for nodes that never ran), bindings that may loop
(the guard stops both), sync gates, late launches, nodes on several ranks;
inputs it does not take give None."""

from __future__ import annotations

import math
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.simulation import compiled
from pt2chakra.simulation.critical_path import (
    _PATH_TYPES,
    _T_GAP,
    _T_WAIT,
    _PathTally,
    _walk_back,
    _walk_back_python,
)
from pt2chakra.simulation.event_loop import ReplayRun
from pt2chakra.simulation.prepared import (
    CPU_OP,
    EDGE_KIND_NAMES,
    K_GPU_SYNC,
    PreparedGraph,
)
from pt2chakra.simulation.results import CATEGORY_NAMES

pytestmark = pytest.mark.skipif(getattr(compiled.FAST, "walk_back", None) is None,
                                reason="the compiled fast path is not built here")

_times = st.one_of(st.sampled_from([0.0, 1.0, 2.5, 10.0, math.nan]),
                   st.floats(-1e3, 1e6, allow_nan=False))


@st.composite
def _run(draw: st.DrawFn) -> tuple[PreparedGraph, ReplayRun, int]:
    """A prepared graph's columns and a run over them, every field drawn
    independently (the walk must agree on nonsense as on sense)."""
    n = draw(st.integers(1, 25))
    p = PreparedGraph()
    p.nodes = [ChakraNode(i, "op", NodeType.COMP_NODE) for i in range(n)]
    p.cat = [draw(st.integers(0, len(CATEGORY_NAMES) - 1)) for _ in range(n)]
    ranks = draw(st.integers(1, 3))
    p.rank = [draw(st.integers(0, ranks - 1)) for _ in range(n)]
    p.rank_nodes = [range(0)] * ranks
    p.late_launch = {i: (0, 0.0, 0) for i in draw(st.sets(st.integers(0, n - 1), max_size=3))}
    run = ReplayRun(n)
    node = st.integers(-1, n - 1)
    for i in range(n):
        run.start[i], run.end[i], run.bind_time[i] = draw(_times), draw(_times), draw(_times)
        run.bind_pred[i] = draw(node)
        run.bind_kind[i] = draw(st.integers(0, len(EDGE_KIND_NAMES) - 1))
        run.gate_pred[i] = draw(st.one_of(st.just(-1), node))
    return p, run, draw(st.integers(0, n - 1))


def _fields(tally: _PathTally) -> tuple[Any, ...]:
    # repr: NaN equals NaN, and None vs 0.0 shows
    return (list(tally.path), repr(tally.type_us), repr(tally.kind_us), tally.type_order,
            tally.kind_order, repr(tally.total), tally.crossings)


@settings(max_examples=400, deadline=None)
@given(_run())
def test_same_walk(case: tuple[PreparedGraph, ReplayRun, int]) -> None:
    p, run, last = case
    assert _fields(_walk_back(p, run, last)) == _fields(_walk_back_python(p, run, last))


def _args(p: PreparedGraph, run: ReplayRun, last: int) -> list[Any]:
    return [p.cat, p.rank, run.start, run.end, run.bind_time, run.bind_kind, run.bind_pred,
            run.gate_pred, p.late_launch, last, False, len(_PATH_TYPES), len(EDGE_KIND_NAMES),
            _T_GAP, _T_WAIT, CPU_OP, K_GPU_SYNC]


def test_inputs_it_does_not_take() -> None:
    """A node index or code out of range, a list for a column: None."""
    walk = getattr(compiled.FAST, "walk_back", None)
    assert walk is not None
    p = PreparedGraph()
    p.cat, p.rank = [CPU_OP, CPU_OP], [0, 0]
    run = ReplayRun(2)
    run.start[:] = array("d", [0.0, 5.0])
    run.end[:] = array("d", [5.0, 9.0])
    run.bind_pred[1] = 0
    ok = walk(*_args(p, run, 1))
    assert ok is not None
    path = array("q")
    path.frombytes(ok[0])
    assert list(path) == [1, 0] and ok[5] == 9.0
    for k, wrong in ((9, 2), (9, -1), (0, [CPU_OP, _T_GAP]), (2, [0.0, 5.0]),
                     (6, array("q", [-1, 7])), (7, array("q", [2, -1]))):
        args = _args(p, run, 1)
        args[k] = wrong
        assert walk(*args) is None, (k, wrong)

"""A replay's summaries by the compiled path give their pure-Python twins'
results on any input: a lane's busy time and idle gaps
(``rank_results._cover``) and the critical path's longest nodes
(``critical_path._longest``, ties in list order)."""

from __future__ import annotations

import math
from array import array
from typing import Any

import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.simulation import compiled
from pt2chakra.simulation.critical_path import TOP_NODES, _longest, _longest_python
from pt2chakra.simulation.event_loop import ReplayRun
from pt2chakra.simulation.rank_results import _cover

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

# few values: ties and equal starts are common, as integer microseconds make them
_times = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 2.5, 10.0]), st.floats(-10, 1e3),
                   st.just(math.nan))


def _run(starts: list[float], ends: list[float]) -> ReplayRun:
    run = ReplayRun(len(starts))
    run.start[:] = array("d", starts)
    run.end[:] = array("d", ends)
    return run


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_times, _times), max_size=12), st.booleans(),
       st.one_of(st.floats(-5, 50), st.just(0)), st.floats(0, 100))
def test_same_cover(spans: list[tuple[float, float]], in_order: bool, origin: Any,
                    predicted: float) -> None:
    if in_order:  # as a lane's nodes mostly are: starts and ends both ascending
        spans = list(zip(sorted(s for s, _e in spans), sorted(e for _s, e in spans)))
    starts = array("d", [s for s, _e in spans])
    ends = array("d", [e for _s, e in spans])
    fast, python = on_both_paths(lambda: repr(_cover(starts, ends, origin, predicted)))
    assert fast == python


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_times, _times), min_size=1, max_size=30), st.data())
def test_same_longest(times: list[tuple[float, float]], data: st.DataObject) -> None:
    run = _run([s for s, _e in times], [e for _s, e in times])
    n = len(times)
    on_path = data.draw(st.lists(st.integers(-1, n), max_size=3 * TOP_NODES)
                        if data.draw(st.integers(0, 9)) == 0 else
                        st.lists(st.integers(0, n - 1), unique=True, max_size=3 * TOP_NODES))

    def outcome() -> Any:
        try:
            return _longest(on_path, run)
        except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
            return ("error", type(exc).__name__)

    fast, python = on_both_paths(outcome)
    assert fast == python


def test_longest_keeps_list_order_at_ties() -> None:
    run = _run([0.0, 0.0, 0.0, 0.0], [5.0, 7.0, 5.0, 7.0])
    assert _longest([3, 2, 1, 0], run)[:4] == _longest_python([3, 2, 1, 0], run) == [3, 1, 2, 0]

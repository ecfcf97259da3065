"""thread_timing.cpu_delays' and cpu_slices' compiled paths give the
pure-Python ones' delays and thread tails, and held durations, for any
threads, times and dependencies."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.simulation import compiled
from pt2chakra.simulation.prepared import Parents, PreparedGraph
from pt2chakra.simulation.thread_timing import cpu_delays, cpu_slices

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

times = st.one_of(st.floats(-5, 1e6), st.just(math.nan), st.just(math.inf), st.integers(0, 99))


@st.composite
def threads(draw: st.DrawFn) -> tuple[Any, ...]:
    base = draw(st.integers(0, 3))
    n = draw(st.integers(0, 10))
    total = base + n
    starts = draw(st.lists(st.one_of(st.integers(0, 10**6), st.integers(2**62, 2**64)),
                           min_size=total, max_size=total))
    dur = draw(st.lists(times, min_size=total, max_size=total))
    incl = draw(st.lists(times, min_size=n, max_size=n))
    index = st.integers(-1, total) if draw(st.integers(0, 9)) == 0 else \
        st.integers(0, max(total - 1, 0))
    parents = [tuple(draw(st.lists(st.tuples(index, st.integers(0, 5)), max_size=3)))
               for _ in range(n)]
    ops = st.lists(st.integers(base, total - 1), max_size=6) if n else st.just([])
    lanes = {lane: draw(ops) for lane in range(draw(st.integers(1, 3)))}
    t0 = draw(st.one_of(st.floats(0, 1e6), st.integers(0, 10)))
    return base, starts, dur, incl, parents, lanes, t0


def _delays(thread: tuple[Any, ...]) -> Any:
    base, starts, dur, incl, parents, lanes, t0 = thread
    p = PreparedGraph()
    p.start, p.dur, p.delay = list(starts), list(dur), [0.0] * len(starts)
    try:
        cpu_delays(p, base, lanes, Parents.of_lists(parents), list(incl), t0)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    return repr((p.delay, p.lane_tail, p.lane_tail_end))  # repr: NaN-safe


@pytest.mark.slow  # a long property run
@settings(max_examples=400, deadline=None)
@given(threads())
def test_same_delays(thread: tuple[Any, ...]) -> None:
    fast, python = on_both_paths(lambda: _delays(thread))
    assert fast == python


def _slices(thread: tuple[Any, ...]) -> Any:
    base, starts, dur, incl, _parents, lanes, _t0 = thread
    p = PreparedGraph()
    p.start, p.dur = list(starts), list(dur)
    try:
        cpu_slices(p, base, lanes, list(incl))
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    return repr(p.dur)  # repr: NaN-safe


@pytest.mark.slow  # a long property run
@settings(max_examples=400, deadline=None)
@given(threads())
def test_same_slices(thread: tuple[Any, ...]) -> None:
    fast, python = on_both_paths(lambda: _slices(thread))
    assert fast == python

"""prepared.shared_floats' compiled path gives the pure-Python one's list
(every value, NaNs taken from ``absent``, -0.0 kept apart from 0.0) for any
column, and shares equal values."""

from __future__ import annotations

import math
from array import array

import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.simulation import compiled
from pt2chakra.simulation.prepared import shared_floats

values = st.lists(st.one_of(st.sampled_from([0.0, -0.0, 1.0, 2.5, math.nan, math.inf]),
                            st.floats(allow_nan=True)), max_size=30)


def _outcome(column: list[float], absent: list[float] | None) -> str:
    return repr(shared_floats(array("d", column), absent))  # repr: NaN- and sign-safe


@pytest.mark.skipif(compiled.FAST is None, reason="the compiled fast path is not built here")
@settings(max_examples=300, deadline=None)
@given(values, st.one_of(st.none(), st.lists(st.floats(0, 9), max_size=30)))
def test_same_floats(column: list[float], absent: list[float] | None) -> None:
    fast, python = on_both_paths(lambda: _outcome(column, absent))
    assert fast == python


def test_equal_values_are_one_object() -> None:
    out = shared_floats(array("d", [3.0, 1.0, 3.0, -0.0, 0.0, math.nan]), [7.0] * 6)
    assert repr(out) == repr([3.0, 1.0, 3.0, -0.0, 0.0, 7.0])
    assert out[0] is out[2]
    assert math.copysign(1.0, out[3]) == -1.0 and math.copysign(1.0, out[4]) == 1.0

"""Which of several profiled steps ``collect`` keeps (no torch needed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.collect.record import median_index


@given(st.lists(st.floats(min_value=0, max_value=1e3), min_size=1, max_size=50))
def test_the_kept_step_is_the_median(walls: list[float]) -> None:
    kept = walls[median_index(walls)]
    assert kept == sorted(walls)[(len(walls) - 1) // 2]


def test_one_step_is_kept_as_it_is() -> None:
    assert median_index([3.5]) == 0

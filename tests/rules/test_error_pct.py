"""The error percentage: one formula for every report (conventions.error_pct)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.astra.consumer import ConsumerResult
from pt2chakra.rules.conventions import error_pct


def test_error_is_a_share_of_the_measured_step() -> None:
    assert error_pct(110.0, 100.0) == 10.0
    assert error_pct(50.0, 100.0) == -50.0
    assert error_pct(5.0, 0.0) is None and error_pct(5.0, None) is None
    assert error_pct(5.0, -1.0) is None


@given(st.floats(0, 1e12), st.floats(1e-3, 1e12))
def test_the_consumer_reports_the_same_error(predicted: float, measured: float) -> None:
    result = ConsumerResult(ranks=[], predicted_step_us=predicted, measured_step_us=measured)
    assert result.error_pct == error_pct(predicted, measured)

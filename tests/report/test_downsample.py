"""Downsampling keeps a lane within its budget and loses no busy time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.report.downsample import Bar, downsample, share_budget

_bar = st.builds(lambda s, d, c, n: Bar(s, s + d, c, n),
                 st.floats(0, 1e6, allow_nan=False), st.floats(0, 5e4, allow_nan=False),
                 st.integers(0, 4), st.integers(0, 50))


@given(st.lists(_bar, max_size=300), st.integers(1, 100))
def test_within_budget_and_covering(bars: list[Bar], budget: int) -> None:
    out, res = downsample(bars, budget)
    assert len(out) <= budget + 1 or len(out) == len(bars)
    if len(bars) <= budget:
        assert out == sorted(bars) and res == 0.0
        return
    # Every node is counted once, and every bar lies within a drawn bar.
    assert sum(-b.label if b.label < 0 else 1 for b in out) == len(bars)
    for b in bars:
        assert any(o.start <= b.start and b.end <= o.end for o in out)
    starts = [o.start for o in out]
    assert starts == sorted(starts)
    assert all(b - a >= res for a, b in zip(starts, starts[1:]))


def test_dominant_category_colours_a_merged_bar() -> None:
    bars = [Bar(0, 1, 0, 3), Bar(1, 10, 2, 4), Bar(10, 11, 0, 5)]
    out, res = downsample(bars, 1)
    assert res == 11.0
    assert out == [Bar(0, 11, 2, -3)]


def test_one_instant_becomes_one_bar() -> None:
    out, _ = downsample([Bar(5, 5, 1, k) for k in range(10)], 3)
    assert out == [Bar(5, 5, 1, -10)]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=50), st.integers(0, 100_000),
       st.integers(0, 500))
def test_share_budget(counts: list[int], total: int, floor: int) -> None:
    budgets = share_budget(counts, total, floor)
    assert all(0 <= b <= c for b, c in zip(budgets, counts))
    assert all(b == c or b >= floor for b, c in zip(budgets, counts))
    assert sum(budgets) <= max(total, floor * len(counts))
    if sum(counts) <= total:
        assert budgets == counts

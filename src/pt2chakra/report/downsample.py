"""Fewer bars for a lane than it has nodes, so that a page of 64 ranks and
a million nodes stays small and quick to draw.

A lane keeps its bars as they are when they fit its budget. Otherwise bars
are grouped by start time: a group takes every bar that starts less than
one *resolution* (the lane's span / its budget) after the group's first
bar, so group starts are at least a resolution apart and a lane never gets
more than budget + 1 bars. A group is drawn from its first start to its
last end, in the colour of the category that holds most of its time. At
the page's widest zoom one resolution is well under a pixel, so nothing
visible is lost until one zooms in past it; the page says where that is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

# Refine the resolution while a lane uses less than this share of its
# budget, at most this many times (each pass is one sweep over the lane).
REFINE_BELOW = 0.7
REFINE_PASSES = 3


class Bar(NamedTuple):
    """One bar of a lane. ``label`` is an index into the page's name table
    for one node, or minus the number of nodes a merged bar stands for."""

    start: float
    end: float
    cat: int
    label: int


def resolution(bars: Sequence[Bar], budget: int) -> float:
    """The merge resolution of a lane (0: its bars are kept as they are)."""
    if len(bars) <= budget or budget <= 0:
        return 0.0
    lo = min(b.start for b in bars)
    hi = max(b.end for b in bars)
    return max(hi - lo, 0.0) / budget


def downsample(bars: Sequence[Bar], budget: int) -> tuple[list[Bar], float]:
    """At most ``budget + 1`` bars covering what ``bars`` cover (sorted by
    start), and the resolution used (0 when nothing was merged).

    A lane busy in bursts fills few of its windows at the first resolution;
    the resolution is then refined (a few passes) while the result stays
    within budget, so bursts get the detail the budget allows."""
    ordered = sorted(bars)
    res = resolution(ordered, budget)
    if res == 0.0:
        if len(ordered) > max(budget, 1):  # all at one instant: one bar
            return [_merge(ordered)], 0.0
        return ordered, 0.0
    out = _grouped(ordered, res)
    for _ in range(REFINE_PASSES):
        if len(out) >= budget * REFINE_BELOW:
            break
        finer = res * max(len(out), 1) / budget
        again = _grouped(ordered, finer)
        if len(again) > budget + 1:
            break
        out, res = again, finer
    return out, res


def _grouped(ordered: list[Bar], res: float) -> list[Bar]:
    """Bars grouped by start windows of ``res``, each group one bar."""
    out: list[Bar] = []
    group: list[Bar] = []
    for b in ordered:
        if group and b.start >= group[0].start + res:
            out.append(_merge(group))
            group = []
        group.append(b)
    if group:
        out.append(_merge(group))
    return out


def _merge(group: list[Bar]) -> Bar:
    if len(group) == 1:
        return group[0]
    busy: dict[int, float] = {}
    for b in group:
        busy[b.cat] = busy.get(b.cat, 0.0) + (b.end - b.start)
    cat = max(busy, key=lambda c: (busy[c], -c))
    return Bar(group[0].start, max(b.end for b in group), cat,
               -sum(-b.label if b.label < 0 else 1 for b in group))


def share_budget(counts: Sequence[int], total: int, floor: int) -> list[int]:
    """Split ``total`` bars over lanes with ``counts`` bars each: a lane that
    needs less than an even share keeps all of its bars and leaves the rest
    to the others (water filling); every lane may use at least ``floor``."""
    budgets = [0] * len(counts)
    left = total
    order = sorted(range(len(counts)), key=lambda k: counts[k])
    for pos, k in enumerate(order):
        share = max(left // (len(counts) - pos), floor)
        budgets[k] = min(counts[k], share)
        left = max(0, left - budgets[k])
    return budgets

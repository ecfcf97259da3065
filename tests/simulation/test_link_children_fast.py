"""prepare._link_children's compiled path gives the pure-Python one's
children arrays and wait counts, for any parents (or its error)."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.simulation import compiled
from pt2chakra.simulation.prepare import _link_children
from pt2chakra.simulation.prepared import Parents, PreparedGraph

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")


@st.composite
def ranks(draw: st.DrawFn) -> tuple[int, int, list[tuple[Any, ...]], list[int],
                                    dict[int, tuple[Any, ...]]]:
    """(base, children already linked, parents of the rank's nodes, nwait,
    entries replaced afterwards)."""
    base = draw(st.integers(0, 5))
    n = draw(st.integers(0, 12))
    source = st.integers(base - 2, base + n + 1) if draw(st.integers(0, 9)) == 0 else \
        st.integers(base, base + max(n - 1, 0))
    kind = st.one_of(st.integers(0, 9), st.just(-1), st.integers(-200, 200))
    pair = st.one_of(st.tuples(source, kind), st.tuples(source, kind, kind), st.just([1, 2]))
    parents = [tuple(draw(st.lists(pair, max_size=4))) for _ in range(n)]
    if n and draw(st.integers(0, 9)) == 0:
        parents[0] = list(parents[0])  # type: ignore[call-overload]  # not a tuple
    nwait = draw(st.lists(st.integers(0, 3), min_size=base + n, max_size=base + n))
    # entries replaced after the flat arrays were made (edges added, moved)
    replaced = draw(st.dictionaries(st.integers(0, n - 1), st.tuples(st.tuples(source, kind)),
                                    max_size=3)) if n else {}
    return base, draw(st.integers(0, 4)), parents, nwait, replaced


def _linked(base: int, shift: int, lists: list[tuple[Any, ...]], nwait: list[int],
            replaced: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    p = PreparedGraph()
    p.child.extend(array("q", range(shift)))
    p.nwait = list(nwait)
    parents = Parents.of_lists(lists)
    for k, plist in replaced.items():
        parents[k] = plist
    try:
        _link_children(p, base, parents)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    return (list(p.child_start), list(p.child), list(p.child_kind), p.nwait)


@pytest.mark.slow  # a long property run
@settings(max_examples=400, deadline=None)
@given(ranks())
def test_same_children(rank: tuple[int, int, list[tuple[Any, ...]], list[int],
                                  dict[int, tuple[Any, ...]]]) -> None:
    fast, python = on_both_paths(lambda: _linked(*rank))
    assert fast == python

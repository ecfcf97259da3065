"""``prepared.Parents`` reads and replaces like the list of tuples it
stands for: flat arrays for the recorded lists, replaced entries on top."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.simulation.prepared import Parents

pairs = st.tuples(st.integers(-(2**64), 2**64), st.integers(-300, 300))
entries = st.one_of(st.lists(pairs, max_size=3).map(tuple), st.just(()),
                    st.tuples(st.just(True), st.just(1)).map(lambda p: (p,)))


@given(st.lists(entries, max_size=8), st.data())
def test_reads_as_the_list(lists: list[tuple[Any, ...]], data: st.DataObject) -> None:
    parents = Parents.of_lists(lists)
    assert list(parents) == lists and len(parents) == len(lists)
    if lists:
        k = data.draw(st.integers(-len(lists), len(lists) - 1))
        parents[k] += ((7, 3),)
        lists[k] += ((7, 3),)
        assert list(parents) == lists
        assert parents[k] == lists[k] and parents[-1] == lists[-1]


def test_out_of_range_is_an_index_error() -> None:
    parents = Parents.of_lists([((1, 2),)])
    with pytest.raises(IndexError):
        parents[1]
    with pytest.raises(IndexError):
        parents[-2] = ()


def test_iteration_sees_entries_replaced_meanwhile() -> None:
    """As a list's iterator does (sync_ops adds edges to later nodes while it
    walks the lists)."""
    lists: list[tuple[tuple[int, int], ...]] = [((0, 1),), (), ((1, 2), (0, 3))]
    parents = Parents.of_lists(lists)
    seen = []
    for k, plist in enumerate(parents):
        seen.append(plist)
        if k == 0:
            parents[2] += ((9, 9),)
            parents[0] = ()
    assert seen == [((0, 1),), (), ((1, 2), (0, 3), (9, 9))]

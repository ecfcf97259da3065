"""DepTable: the merged dependency table behaves as the dict it replaces."""

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.chakra.dep_kinds import EdgeKind
from pt2chakra.conversion.dep_table import _KINDS, DepTable
from pt2chakra.conversion.deps import EdgeColumns

K = EdgeKind

_edge = st.tuples(st.integers(0, 30), st.integers(0, 30), st.sampled_from(list(EdgeKind)))
_groups = st.lists(st.lists(_edge, max_size=40), max_size=4)


def _reference(groups: list[list[tuple[int, int, EdgeKind]]]) -> dict[int, list[tuple[int, EdgeKind]]]:
    """The merge rule written plainly: per destination, sources in first-seen
    order, each keeping its most reliable kind; self-edges left out."""
    merged: dict[int, dict[int, EdgeKind]] = {}
    for edges in groups:
        for src, dst, kind in edges:
            if src != dst:
                best = merged.setdefault(dst, {})
                best[src] = max(kind, best.get(src, kind))
    return {dst: list(best.items()) for dst, best in merged.items()}


@pytest.mark.slow
@given(_groups)
def test_merged_is_the_plain_merge(groups: list[list[tuple[int, int, EdgeKind]]]) -> None:
    table = DepTable.merged(iter([iter(edges) for edges in groups]))
    expected = _reference(groups)
    assert dict(table.items()) == expected
    assert len(table) == len(expected) and sorted(table) == sorted(expected)
    for dst in range(32):
        assert table.get(dst) == expected.get(dst)
        assert (dst in table) == (dst in expected)
    assert list(table.in_order(range(32))) == [expected.get(dst) for dst in range(32)]
    assert table.kind_counts() == Counter(k for deps in expected.values() for _, k in deps)
    ascending = all(src < dst for dst, deps in expected.items() for src, _ in deps)
    assert table.ascending() == ascending


@pytest.mark.slow
@given(_groups, st.lists(st.booleans(), min_size=4, max_size=4))
def test_groups_as_columns_merge_alike(groups: list[list[tuple[int, int, EdgeKind]]],
                                       as_columns: list[bool]) -> None:
    # Columns that ascend above the table go in whole; any others edge by edge.
    mixed = [EdgeColumns.of(edges) if columns else edges
             for edges, columns in zip(groups, as_columns)]
    table = DepTable.merged(iter(mixed))
    assert dict(table.items()) == _reference(groups) == dict(DepTable.merged(groups).items())


def test_ascending_columns_become_the_arrays() -> None:
    columns = EdgeColumns.of([(1, 2, K.CALLER), (2, 3, K.THREAD_ORDER), (3, 5, K.CALLER)])
    assert columns.ascending
    table = DepTable.merged([columns, [(4, 5, K.LAUNCH), (0, 9, K.LAUNCH)],
                             EdgeColumns.of([(5, 10, K.CALLER)])])
    assert table._dsts is columns.dsts and list(table._dsts) == [2, 3, 5, 9, 10]
    assert table[5] == [(3, K.CALLER), (4, K.LAUNCH)] and table[10] == [(5, K.CALLER)]
    assert not EdgeColumns.of([(2, 2, K.CALLER)]).ascending
    assert not EdgeColumns.of([(1, 3, K.CALLER), (1, 3, K.CALLER)]).ascending


def test_thread_order_edges_are_held_in_the_arrays() -> None:
    # Ascending destinations with one edge each: nothing in the dict.
    table = DepTable.merged([[(1, 2, K.CALLER), (2, 3, K.THREAD_ORDER), (3, 5, K.CALLER)]])
    assert table._rest == {} and list(table._dsts) == [2, 3, 5]
    assert table[3] == [(2, K.THREAD_ORDER)] and table.ascending()


def test_changes_stick_as_in_a_dict() -> None:
    table = DepTable.merged([[(1, 2, K.CALLER), (2, 3, K.THREAD_ORDER), (3, 4, K.CALLER)]])
    table.setdefault(3, []).append((9, K.INTER_THREAD))  # an array entry, changed in place
    assert table[3] == [(2, K.THREAD_ORDER), (9, K.INTER_THREAD)]
    assert not table.ascending()
    table.setdefault(7, []).append((1, K.LAUNCH))  # a new one
    assert table[7] == [(1, K.LAUNCH)]
    table[2] = []
    assert table[2] == [] and 2 in table
    del table[4]
    assert 4 not in table and table.get(4) is None
    assert dict(table.items()) == {2: [], 3: [(2, K.THREAD_ORDER), (9, K.INTER_THREAD)],
                                   7: [(1, K.LAUNCH)]}
    assert len(table) == 3


_ids = st.one_of(st.integers(-3, 33), st.integers(-2**70, 2**70), st.sampled_from([True, 2.0]))


def _chunk_outcome(call: Any) -> tuple[Any, ...]:
    try:
        return ("value", call())
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.slow  # a long property run
@settings(max_examples=300, deadline=None)
@given(_groups, st.lists(st.tuples(st.sampled_from(["set", "del", "default"]),
                                   st.integers(0, 30)), max_size=6),
       st.lists(_ids, max_size=40), st.integers(0, 45), st.booleans(), st.booleans())
def test_same_deps_in_order(groups, changes, ids, at, ascending, corrupt) -> None:
    """``deps_in_order`` (C) gives ``_in_order_chunk``'s entries and position,
    or hands the chunk back (None) and the Python walk gives them or its
    error: over tables with entries moved to the dict or deleted, ids in
    order or not, of any size or type, from any position."""
    fast = compiled.FAST
    if fast is None:
        pytest.skip("the compiled fast path is not built here")
    table = DepTable.merged(groups)
    for change, dst in changes:
        if change == "set":
            table[dst] = [(dst + 1, K.CALLER)]
        elif change == "del" and dst in table:
            del table[dst]
        else:
            table.setdefault(dst)
    if corrupt and len(table._kinds):
        table._kinds[0] = len(_KINDS)  # no EdgeKind: the Python walk raises
    if ascending:
        ids = sorted(ids)
    at = min(at, len(table._dsts))

    def compiled_walk() -> Any:
        found = fast.deps_in_order(ids, table._dsts, table._srcs, table._kinds, table._rest,
                                   _KINDS, at)
        return found if found is not None else table._in_order_chunk(ids, at)

    assert _chunk_outcome(compiled_walk) == _chunk_outcome(lambda: table._in_order_chunk(ids, at))
    plain = all(type(i) is int and -2**63 <= i < 2**63 for i in ids) and not corrupt
    if plain:  # the common case is C's own
        assert fast.deps_in_order(ids, table._dsts, table._srcs, table._kinds, table._rest,
                                  _KINDS, at) is not None


def test_in_order_goes_on_across_chunks(monkeypatch) -> None:
    # Chunks of 3: each walk starts where the one before stopped.
    from pt2chakra.conversion import dep_table

    monkeypatch.setattr(dep_table, "_IN_ORDER_CHUNK", 3)
    table = DepTable.merged([[(d - 1, d, K.THREAD_ORDER) for d in range(1, 20, 2)],
                             [(0, 7, K.CALLER)]])
    expected = [table.get(d) for d in range(22)]
    assert list(table.in_order(range(22))) == expected
    monkeypatch.setattr(compiled, "FAST", None)
    assert list(table.in_order(range(22))) == expected

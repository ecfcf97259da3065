"""prepare._parents' compiled path gives the pure-Python one's dependency
lists (and gpu_sync flag) for any nodes, attribute sets and id index."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES
from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.simulation import compiled
from pt2chakra.simulation.prepare import _parents
from pt2chakra.simulation.prepared import KIND_CODE, AttrSets

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

KINDS = [*EDGE_KIND_NAMES.values(), "made_up"]


@st.composite
def ranks(draw: st.DrawFn) -> tuple[list[ChakraNode], int, list[int], AttrSets]:
    base = draw(st.integers(0, 4))
    n = draw(st.integers(0, 10))
    ids = st.one_of(st.integers(0, 15), st.sampled_from([-1, 2**63, 2**64 - 1, 2**64]))
    node_ids = draw(st.lists(ids, min_size=n, max_size=n))
    if draw(st.booleans()):  # as converters write them: not decreasing (the sorted lookup)
        node_ids.sort()
    dep = st.one_of(ids, st.just(True), st.just(3.0))
    deps = st.one_of(st.lists(dep, max_size=4), st.lists(dep, min_size=1, max_size=1),
                     st.tuples(dep))
    # tuples too: the fast path must take any sequence a caller hands it
    nodes = [ChakraNode(k, "op", NodeType.COMP_NODE, data_deps=draw(deps))  # type: ignore[arg-type]
             for k in node_ids]
    sets = draw(st.lists(st.one_of(
        st.just({}), st.builds(lambda kinds: {"data_dep_kinds": kinds},
                               st.lists(st.sampled_from(KINDS), max_size=4))),
        min_size=1, max_size=4))
    keys = [draw(st.integers(0, len(sets) - 1)) for _ in range(n)]
    return nodes, base, node_ids, AttrSets(keys, sets)


def _outcome(rank: tuple[list[ChakraNode], int, list[int], AttrSets]) -> Any:
    try:
        parents, gpu_sync = _parents(*rank)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    return list(parents), len(parents), gpu_sync


@pytest.mark.slow  # a long property run
@settings(max_examples=400, deadline=None)
@given(ranks())
def test_same_parents(rank: tuple[list[ChakraNode], int, list[int], AttrSets]) -> None:
    fast, python = on_both_paths(lambda: _outcome(rank))
    assert fast == python


def test_sorted_ids_find_the_last_node_of_an_id() -> None:
    """Ids that do not decrease are looked up by bisection, in the compiled
    path and the Python lookup alike: a repeated id means its last node."""
    nodes = [ChakraNode(i, "op", NodeType.COMP_NODE, data_deps=deps)
             for i, deps in [(1, []), (4, [1]), (4, [1]), (9, [4, 1, 7]), (10, [4])]]
    sets = AttrSets([0] * len(nodes), [{}])
    parents, _ = _parents(nodes, 5, [n.id for n in nodes], sets)
    data = KIND_CODE["data"]
    assert list(parents) == [(), ((5, data),), ((5, data),), ((7, data), (5, data)),
                             ((7, data),)]

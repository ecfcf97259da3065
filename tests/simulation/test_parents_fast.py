"""prepare._parents' compiled path gives the pure-Python one's dependency
lists (and gpu_sync flag) for any nodes, attribute sets and id index."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES
from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.simulation.prepare import _parents
from pt2chakra.simulation.prepared import AttrSets

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

KINDS = [*EDGE_KIND_NAMES.values(), "made_up"]


@st.composite
def ranks(draw: st.DrawFn) -> tuple[list[ChakraNode], int, dict[int, int], AttrSets]:
    base = draw(st.integers(0, 4))
    n = draw(st.integers(0, 10))
    ids = st.integers(0, 15)
    deps = st.one_of(st.lists(ids, max_size=4), st.lists(ids, min_size=1, max_size=1),
                     st.tuples(ids))
    # tuples too: the fast path must take any sequence a caller hands it
    nodes = [ChakraNode(k, "op", NodeType.COMP_NODE, data_deps=draw(deps))  # type: ignore[arg-type]
             for k in range(n)]
    sets = draw(st.lists(st.one_of(
        st.just({}), st.builds(lambda kinds: {"data_dep_kinds": kinds},
                               st.lists(st.sampled_from(KINDS), max_size=4))),
        min_size=1, max_size=4))
    keys = [draw(st.integers(0, len(sets) - 1)) for _ in range(n)]
    index = {draw(ids): draw(st.integers(base, base + max(n - 1, 0))) for _ in range(n + 3)}
    return nodes, base, index, AttrSets(keys, sets)


def _outcome(rank: tuple[list[ChakraNode], int, dict[int, int], AttrSets]) -> Any:
    try:
        return _parents(*rank)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)


@pytest.mark.slow  # a long property run
@settings(max_examples=400, deadline=None)
@given(ranks())
def test_same_parents(rank: tuple[list[ChakraNode], int, dict[int, int], AttrSets]) -> None:
    fast, python = on_both_paths(lambda: _outcome(rank))
    assert fast == python

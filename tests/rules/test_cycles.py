"""Cycle detection and breaking."""

import sys

import pytest
from builders import node
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.rules.cycles import break_cycles, check_graph, describe_cycle, find_cycle


def test_acyclic_chain():
    assert find_cycle([node(1), node(2, [1]), node(3, [2])]) == []


def test_cycle_names_nodes_and_edge_kinds():
    nodes = [node(1, [3], ["inter_thread"]), node(2, [1], ["thread_order"]),
             node(3, [2], ["launch"]), node(4, [3], ["stream_order"])]
    cycle = find_cycle(nodes)
    assert {e.src for e in cycle} == {1, 2, 3}
    assert {(e.src, e.dst, e.kind) for e in cycle} == {
        (3, 1, "inter_thread"), (1, 2, "thread_order"), (2, 3, "launch")}
    text = describe_cycle(cycle, {n.id: n.name for n in nodes})
    assert "-[inter_thread]->" in text and "(n1)" in text


def test_self_loop_is_a_cycle():
    assert [(e.src, e.dst) for e in find_cycle([node(5, [5])])] == [(5, 5)]


def test_break_cycles_drops_least_reliable_kind():
    nodes = [node(1, [3], ["inter_thread"]), node(2, [1], ["thread_order"]),
             node(3, [2], ["launch"])]
    removed = break_cycles(nodes)
    assert [(e.src, e.dst, e.kind) for e in removed] == [(3, 1, "inter_thread")]
    assert find_cycle(nodes) == []
    assert nodes[0].data_deps == [] and nodes[0].attrs[0][2] == []


@pytest.mark.slow  # a long property run
def test_long_chain_does_not_recurse():
    n = sys.getrecursionlimit() * 50
    nodes = [node(0)] + [node(i, [i - 1]) for i in range(1, n)]
    assert find_cycle(nodes) == []
    nodes[0].data_deps.append(n - 1)
    assert len(find_cycle(nodes)) == n


def test_dangling_and_duplicates():
    problems = check_graph([node(1), node(2, [9]), node(2)])
    assert problems.dangling == [(2, 9)]
    assert problems.duplicate_ids == [2]


@st.composite
def dags(draw):
    n = draw(st.integers(1, 40))
    nodes = []
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=4, unique=True)) if i else []
        nodes.append(node(i, deps))
    return nodes


@pytest.mark.slow  # a long property run
@given(dags(), st.data())
@settings(max_examples=200, deadline=None)
def test_forward_edges_never_cycle_and_a_back_edge_always_does(nodes, data):
    assert find_cycle(nodes) == []
    if len(nodes) < 2:
        return
    lo = data.draw(st.integers(0, len(nodes) - 2))
    hi = data.draw(st.integers(lo + 1, len(nodes) - 1))
    # make a path lo -> hi, then close it with hi -> lo
    nodes[hi].data_deps.append(lo)
    nodes[lo].data_deps.append(hi)
    cycle = find_cycle(nodes)
    assert cycle
    for e in cycle:  # every reported edge exists
        assert e.src in nodes[e.dst].data_deps
    assert cycle[-1].dst == cycle[0].src
    break_cycles(nodes)
    assert find_cycle(nodes) == []

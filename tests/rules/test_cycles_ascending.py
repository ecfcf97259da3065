"""find_cycle_in's one-pass answer for graphs whose edges all ascend."""

from pt2chakra.chakra.dep_kinds import EdgeKind
from pt2chakra.conversion.dep_table import DepTable
from pt2chakra.rules.cycles import find_cycle_in

K = EdgeKind


def test_ascending_edges_have_no_cycle():
    deps = {2: [(1, K.CALLER)], 3: [(1, K.THREAD_ORDER), (2, K.LAUNCH)]}
    assert find_cycle_in([1, 2, 3], deps) == []


def test_one_descending_edge_still_finds_the_cycle():
    deps = {2: [(1, K.CALLER)], 3: [(2, K.LAUNCH)], 1: [(3, K.GPU_SYNC)]}
    cycle = find_cycle_in([1, 2, 3], deps)
    assert {(e.src, e.dst) for e in cycle} == {(1, 2), (2, 3), (3, 1)}


def test_a_self_edge_is_a_cycle():
    assert find_cycle_in([1], {1: [(1, K.CALLER)]}) != []


def test_merging_groups_is_merging_their_concatenation():
    groups = [[(1, 2, K.THREAD_ORDER), (3, 2, K.LAUNCH)], [], [(1, 2, K.CALLER), (2, 4, K.LAUNCH)]]
    assert DepTable.merged(iter(groups)) == DepTable.merged([[e for g in groups for e in g]])

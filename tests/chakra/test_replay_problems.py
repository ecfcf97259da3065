"""``replay_problems``: the simulator's shortcut past ``check_loaded`` must
give the same replay-blocking errors (none where there are none)."""

from __future__ import annotations

import pytest

from pt2chakra.chakra.checks import (
    _surely_replayable,
    blocks_replay,
    check_loaded,
    refuse_unsound,
    replay_problems,
)
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType
from pt2chakra.errors import InputError

MD = GlobalMetadata("0.0.4")


def _node(i: int, deps: list[int]) -> ChakraNode:
    return ChakraNode(i, f"op{i}", NodeType.COMP_NODE, data_deps=deps)


CASES = {
    "sound, ascending": [_node(1, []), _node(2, [1]), _node(3, [1, 2])],
    "sound, an edge to a larger id": [_node(1, [3]), _node(2, [1]), _node(3, [])],
    "cycle": [_node(1, [3]), _node(2, [1]), _node(3, [2])],
    "self edge": [_node(1, []), _node(2, [2])],
    "dangling": [_node(1, []), _node(2, [7])],
    "duplicate id": [_node(1, []), _node(1, []), _node(2, [1])],
}


@pytest.mark.parametrize("name", CASES)
def test_same_blocking_errors_as_the_full_check(name):
    nodes = CASES[name]
    full = [p for p in check_loaded("f.et", 0, MD, nodes) if blocks_replay(p)]
    fast = [p for p in replay_problems("f.et", 0, MD, nodes) if blocks_replay(p)]
    assert fast == full
    assert bool(full) == name.startswith(("cycle", "self", "dangling", "duplicate"))


def test_the_shortcut_only_where_it_proves_soundness():
    assert _surely_replayable(CASES["sound, ascending"])
    for name in ("sound, an edge to a larger id", "cycle", "self edge", "dangling",
                 "duplicate id"):
        assert not _surely_replayable(CASES[name]), name


def test_an_unsound_file_is_still_refused():
    with pytest.raises(InputError, match=r"not sound: \[cycle\]"):
        refuse_unsound(replay_problems("f.et", 0, MD, CASES["cycle"]), False, replay_only=True)

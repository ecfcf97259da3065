"""``check_before_replay``: the simulator's shortcut past ``check_loaded`` must
give the same replay-blocking errors (none where there are none)."""

from __future__ import annotations

import pytest
from builders import MD, node

from pt2chakra.errors import InputError
from pt2chakra.rules import checks
from pt2chakra.rules.checks import (
    blocks_replay,
    check_before_replay,
    check_loaded,
    refuse_unsound,
)

CASES = {
    "sound, ascending": [node(1, []), node(2, [1]), node(3, [1, 2])],
    "sound, an edge to a larger id": [node(1, [3]), node(2, [1]), node(3, [])],
    "cycle": [node(1, [3]), node(2, [1]), node(3, [2])],
    "self edge": [node(1, []), node(2, [2])],
    "dangling": [node(1, []), node(2, [7])],
    "duplicate id": [node(1, []), node(1, []), node(2, [1])],
}


@pytest.mark.parametrize("name", CASES)
def test_same_blocking_errors_as_the_full_check(name):
    nodes = CASES[name]
    full = [p for p in check_loaded("f.et", 0, MD, nodes) if blocks_replay(p)]
    fast = [p for p in check_before_replay("f.et", 0, MD, nodes) if blocks_replay(p)]
    assert fast == full
    assert bool(full) == name.startswith(("cycle", "self", "dangling", "duplicate"))


def test_the_shortcut_only_where_it_proves_soundness(monkeypatch):
    full_checks: list[str] = []
    real = checks.check_loaded

    def counted(path, rank, metadata, nodes):
        full_checks.append(path)
        return real(path, rank, metadata, nodes)

    monkeypatch.setattr(checks, "check_loaded", counted)
    assert check_before_replay("f.et", 0, MD, CASES["sound, ascending"]) == []
    assert full_checks == []  # proven sound by the linear scan alone
    for name in ("sound, an edge to a larger id", "cycle", "self edge", "dangling",
                 "duplicate id"):
        full_checks.clear()
        check_before_replay("f.et", 0, MD, CASES[name])
        assert full_checks == ["f.et"], name


def test_an_unsound_file_is_still_refused():
    with pytest.raises(InputError, match=r"not sound: \[cycle\]"):
        refuse_unsound(check_before_replay("f.et", 0, MD, CASES["cycle"]), False,
                       blocking_only=True)

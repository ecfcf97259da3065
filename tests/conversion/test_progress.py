"""The progress bar counts what ``total`` counts: nodes, also where the
items are batches of nodes (the converter's ``FramedNodes``)."""

from __future__ import annotations

import re

import pytest

from pt2chakra.chakra.encode import FramedNodes, node_count
from pt2chakra.conversion import progress
from pt2chakra.conversion.progress import Stages


def _drawn(stderr: str) -> list[int]:
    return [int(done) for done in re.findall(r"\] (\d+)/\d+", stderr)]


@pytest.mark.parametrize("weighed", [True, False])
def test_bar_counts_nodes_of_batches(monkeypatch, capsys, weighed) -> None:
    monkeypatch.setattr(progress, "PROGRESS_REDRAW_S", -1.0)  # draw at every check
    items: list[FramedNodes | bytes] = [FramedNodes(b"", 2048)] * 3 + [b"x"] * 2048
    total = sum(map(node_count, items))
    stages = Stages(4, enabled=True)
    counted = stages.counting(items, total, "writing nodes", node_count if weighed else None)
    assert list(counted) == items  # unchanged
    drawn = _drawn(capsys.readouterr().err)
    if weighed:  # a batch counts its nodes; the clock is read once per 1024 of them
        assert drawn == [2048, 4096, 6144, 7168, 8192]
    else:
        assert drawn == [1, 1025, 2049]  # items, where each is one


def test_bar_is_off_without_a_terminal(capsys) -> None:
    items = [FramedNodes(b"", 2048)]
    assert Stages(4, enabled=False).counting(items, 2048, "writing nodes", node_count) is items
    assert capsys.readouterr().err == ""

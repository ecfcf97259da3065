"""Gloo runs a group's transfers on several worker threads at once; the
converter names each one's worker as ``comm_channel`` and the replay gives
each channel its own lane. Read from a file (the simulator's lean reader),
the attribute must survive: on one shared lane, two ranks that reach their
collectives in opposite orders each hold the lane for the one the other has
not reached, and the replay never ends."""

from __future__ import annotations

from pathlib import Path

from builders import IS_GPU, MD, comm_attrs, cpu, node

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, CollectiveType, NodeType
from pt2chakra.simulation import simulate

CHANNELS = (101, 102)  # two gloo worker threads


def _gloo(nid: int, start: int, seq: int, channel: int, issued_by: int) -> ChakraNode:
    """An all-reduce that host thread 1 handed to gloo worker ``channel``."""
    attrs = [IS_GPU, ("tid", "int64_val", 1),
             *comm_attrs(CollectiveType.ALL_REDUCE, 1 << 20, "0", seq),
             ("comm_channel", "int64_val", channel)]
    return node(nid, [issued_by], ["inter_thread"], name="gloo:all_reduce",
                node_type=NodeType.COMM_COLL_NODE, start=start, dur=1000, attrs=attrs)


def _rank(path: Path, first_ready_seq: int) -> str:
    """Collective ``first_ready_seq`` is issued at 10 us, the other at 500 us."""
    late = 3 - first_ready_seq
    nodes = [cpu(1, 0, 10), cpu(2, 500, 10, deps=[1]),
             _gloo(3, 10, first_ready_seq, CHANNELS[first_ready_seq - 1], issued_by=1),
             _gloo(4, 510, late, CHANNELS[late - 1], issued_by=2)]
    write_et(path, MD, nodes)
    return str(path)


def test_collectives_reached_in_opposite_orders_run_on_their_channels(tmp_path: Path) -> None:
    paths = [_rank(tmp_path / "r.0.et", 1), _rank(tmp_path / "r.1.et", 2)]
    result = simulate(paths)
    assert [r.unfinished for r in result.ranks] == [0, 0]
    labels = sorted(lane.lane for lane in result.ranks[0].lanes if "comm" in lane.lane)
    assert labels == [f"gpu comm 0 channel {c}" for c in CHANNELS]


def test_transfers_in_flight_have_lanes_of_their_own_shown_as_one() -> None:
    """Each posted send/receive replays on its own lane (its own channel)
    but is listed with its group's other transfers: a pipeline posts
    hundreds, and a line each would bury the report."""
    from array import array

    from pt2chakra.chakra.records import NodeType
    from pt2chakra.rules.conventions import COMM_CHANNEL, lane_of, own_transfer_channel
    from pt2chakra.simulation.rank_results import _merged

    a, b = (lane_of(NodeType.COMM_SEND_NODE, {"device": 0, "pg_name": "1",
                                              COMM_CHANNEL: own_transfer_channel(i)})
            for i in (7, 8))
    assert a.key != b.key and a.label == b.label == "comm 1 transfers"
    shared = lane_of(NodeType.COMM_SEND_NODE, {"device": 0, "pg_name": "1", COMM_CHANNEL: 4242})
    assert shared.label == "comm 1 channel 4242"
    starts, ends = _merged({1: (array("d", [10.0]), array("d", [30.0])),
                            2: (array("d", [0.0, 20.0]), array("d", [5.0, 40.0]))}, [1, 2])
    assert list(starts) == [0.0, 10.0, 20.0] and list(ends) == [5.0, 30.0, 40.0]

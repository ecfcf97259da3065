"""Issue 45: send/receive pairs as a pipeline's gloo backend runs them.

A host backend's send is buffered (``is_buffered_send``): it waits for no
receive, so a 1F1B schedule's crossed transfers (each stage sends before it
receives) are not a deadlock, while the same order of NCCL sends on one
stream still is. ``p2p_times`` takes each side's time from the two records.
"""

from __future__ import annotations

import pytest
from builders import comm_op
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.records import Attr, ChakraNode, NodeType, attr_dict
from pt2chakra.rules.conventions import COMM_CHANNEL
from pt2chakra.rules.rendezvous import (
    RankComms,
    comm_order,
    find_deadlock,
    is_buffered_send,
    p2p_times,
    rendezvous_keys,
)
from pt2chakra.rules.rendezvous import (
    comm_op as read_comm_op,
)

SEND, RECV = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE


def gloo(nid: int, node_type: NodeType, start: int, peer: int) -> ChakraNode:
    """A gloo send or receive as the converter writes it: on a channel of its
    own (negative: no thread id is)."""
    n = comm_op(nid, node_type, start, peer=peer)
    n.attrs = [a for a in n.attrs if a[0] not in ("stream", "device")]
    extra: Attr = (COMM_CHANNEL, "int64_val", -1 - nid)
    n.attrs.append(extra)
    return n


def crossed(make: object) -> list[RankComms]:
    """1F1B's crossing on two stages: rank 0 sends activation #1 then
    receives gradient #0; rank 1 sends gradient #0 then receives activation
    #1 (program order, the receive depending on the send)."""
    ranks = []
    for rank, (first, second) in enumerate([((SEND, 1), (RECV, 1)), ((SEND, 0), (RECV, 0))]):
        a = make(10, first[0], 100, first[1])  # type: ignore[operator]
        b = make(11, second[0], 200, second[1])  # type: ignore[operator]
        b.data_deps = [10]
        nodes = [a, b]
        ops = [read_comm_op(n, attr_dict(n.attrs)) for n in nodes]
        deps = {n.id: [(d, "data") for d in n.data_deps] for n in nodes}
        ranks.append(RankComms(rank, f"r{rank}.et", rendezvous_keys(ops, rank),
                               comm_order([n.id for n in nodes], deps, ops)))
    return ranks


def nccl(nid: int, node_type: NodeType, start: int, peer: int) -> ChakraNode:
    return comm_op(nid, node_type, start, peer=peer)


def test_crossed_buffered_sends_do_not_deadlock() -> None:
    assert find_deadlock(crossed(gloo)) == []


def test_crossed_nccl_sends_still_deadlock() -> None:
    """An NCCL send waits for its receive: the same order is a real deadlock."""
    steps = find_deadlock(crossed(nccl))
    assert {s.rank for s in steps} == {0, 1}


def test_a_wait_on_a_receive_before_the_send_is_a_real_deadlock() -> None:
    """Each rank waits for its receive before it sends: no buffering helps."""
    ranks = []
    for rank in (0, 1):
        peer = 1 - rank
        r = gloo(10, RECV, 100, peer)
        s = gloo(11, SEND, 200, peer)
        s.data_deps = [10]
        ops = [read_comm_op(n, attr_dict(n.attrs)) for n in (r, s)]
        ranks.append(RankComms(rank, f"r{rank}.et", rendezvous_keys(ops, rank),
                               comm_order([10, 11], {11: [(10, "data")]}, ops)))
    assert find_deadlock(ranks)


def test_what_follows_a_buffered_send_waits_for_what_it_waited_for() -> None:
    """recv X -> buffered send -> recv Y: Y still comes after X."""
    x, s, y = gloo(1, RECV, 0, 1), gloo(2, SEND, 10, 1), gloo(3, RECV, 20, 1)
    s.data_deps, y.data_deps = [1], [2]
    ops = [read_comm_op(n, attr_dict(n.attrs)) for n in (x, s, y)]
    pairs = set(comm_order([1, 2, 3], {2: [(1, "d")], 3: [(2, "d")]}, ops))
    assert (1, 3) in pairs and (1, 2) in pairs and (2, 3) not in pairs


def test_only_a_host_backend_send_is_buffered() -> None:
    assert is_buffered_send(SEND, attr_dict(gloo(1, SEND, 0, 1).attrs))
    assert not is_buffered_send(SEND, attr_dict(nccl(1, SEND, 0, 1).attrs))
    assert not is_buffered_send(RECV, attr_dict(gloo(1, RECV, 0, 1).attrs))


def test_times_of_a_gpipe_pair() -> None:
    """GPipe's first activation: the receive ended 0.35 ms after the send was
    posted; the send's own record runs to its host's late wait 133 ms on."""
    t = p2p_times((49_324, 182_995), (0, 49_670), buffered=True)
    assert t.recv_us == pytest.approx(346)
    assert t.send_us == pytest.approx(133_671)
    both = p2p_times((49_324, 182_995), (0, 49_670), buffered=False)
    assert both.send_us == both.recv_us == pytest.approx(346)


spans = st.tuples(st.floats(0, 1e6), st.floats(0, 1e6)).map(lambda t: (min(t), max(t)))


@given(send=spans, recv=spans, buffered=st.booleans())
def test_times_are_never_negative_nor_longer_than_a_record(
        send: tuple[float, float], recv: tuple[float, float], buffered: bool) -> None:
    t = p2p_times(send, recv, buffered)
    assert 0.0 <= t.recv_us <= max(0.0, recv[1] - recv[0]) + 1e-6
    assert 0.0 <= t.send_us <= max(0.0, send[1] - send[0]) + 1e-6

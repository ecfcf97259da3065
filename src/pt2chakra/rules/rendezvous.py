"""How communication meets across ranks: which nodes of different ranks are
one collective (or one send/receive pair), and whether the ranks can reach
them without waiting on each other forever.

``validate`` and the simulator both ask this module, so a pair of traces
that one calls sound the other can replay, and a pair that deadlocks in
NCCL is refused by both.

The matching rule (:func:`rendezvous_keys`), per process group (``pg_name``;
where a gloo trace names none on a rank of several groups, the rank set
tells which: ``group_resolution.rank_set_keys``):

* a collective (``COMM_COLL_NODE``) is matched by its ``comm_seq`` when it
  has one, else by its position among the group's collectives in the rank's
  recorded order (start time, then id);
* a point-to-point transfer (a ``COMM_SEND_NODE`` and the
  ``COMM_RECV_NODE`` that receives it) is matched by sender, receiver and
  its position among that pair's transfers in the group (``comm_dst`` on
  the send, ``comm_src`` on the receive); when either side names no peer,
  by its position among the group's transfers. ``comm_seq`` is not used for
  transfers: PyTorch numbers them per rank, not per pair.

A rendezvous starts when every rank that has the key reached it, except
that a buffered send (a host backend's, gloo: :func:`is_buffered_send`)
starts when its own rank reaches it and never waits for its receive; a
communication node holds its lane (:func:`~pt2chakra.rules.conventions.lane_of`)
while it waits. So if rank A must finish X before it can reach Y and rank B
must finish Y before X, both wait forever: :func:`find_deadlock` finds such a
cycle over every rank's order (:func:`comm_order`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.rules.conventions import COMM_CHANNEL, is_int, lane_of
from pt2chakra.rules.cycles import find_cycle_in

SEQ, ORDER, P2P = "seq", "order", "p2p"
NO_RANK = -1


class CommOp(NamedTuple):
    """A communication node as the matching rule sees it."""

    node: int  # node id
    node_type: int
    start: int  # recorded start (0 when untimed)
    pg: str
    seq: int | None  # comm_seq
    peer: int | None  # comm_dst of a send, comm_src of a receive
    lane: tuple[Any, ...]  # lane key (lane_of): it is held while waiting
    buffered: bool = False  # a send that waits on nobody (is_buffered_send)
    ctype: int = -1  # comm_type (-1: none)
    size: int = -1  # comm_size in bytes (-1: none)
    end: float = 0.0  # recorded end (start + duration; 0 when untimed)


class RendezvousKey(NamedTuple):
    """Equal keys on different ranks are one rendezvous."""

    pg: str
    kind: str  # SEQ, ORDER or P2P
    position: int  # comm_seq, or the position among its kind in the group
    sender: int = NO_RANK
    receiver: int = NO_RANK

    def describe(self) -> str:
        group = f"process group {self.pg!r}" if self.pg else "no process group"
        if self.kind == SEQ:
            what = f"collective seq {self.position}"
        elif self.kind == ORDER:
            what = f"collective #{self.position}"
        elif self.sender == NO_RANK:
            what = f"transfer #{self.position}"
        else:
            what = f"transfer #{self.position} from rank {self.sender} to rank {self.receiver}"
        return f"{what} of {group}"


def comm_op(node: ChakraNode, attrs: Mapping[str, Any]) -> CommOp:
    """How the matching rule reads a communication node: its process group,
    an integer ``comm_seq``, its peer (``comm_dst`` of a send, ``comm_src``
    of a receive) and its lane; values of another type count as absent."""
    seq = attrs.get("comm_seq")
    peer = attrs.get("comm_dst" if node.type == NodeType.COMM_SEND_NODE else "comm_src")
    ctype, size = attrs.get("comm_type"), attrs.get("comm_size")
    return CommOp(node.id, int(node.type), node.start_time_micros, str(attrs.get("pg_name", "")),
                  seq if is_int(seq) else None, peer if is_int(peer) else None,
                  lane_of(node.type, attrs).key, is_buffered_send(node.type, attrs),
                  ctype if is_int(ctype) else -1, size if is_int(size) else -1,
                  float(node.start_time_micros + node.duration_micros))


def is_collective(key: RendezvousKey) -> bool:
    return key.kind != P2P


def is_buffered_send(node_type: int, attrs: Mapping[str, Any]) -> bool:
    """A send a host backend runs (gloo's ``send``: the converter names its
    channel, ``COMM_CHANNEL``): its bytes go into the peer's connection and
    it completes without waiting for the receive to be posted, so it never
    waits on its peer's rank. An NCCL send kernel waits for its peer."""
    return node_type == NodeType.COMM_SEND_NODE and COMM_CHANNEL in attrs


def on_host_channel(node: ChakraNode) -> bool:
    """A communication node a host backend runs (the converter names its
    channel, ``COMM_CHANNEL``), read from a node whose attributes are not in
    a dict (the replay's lean nodes, an export's)."""
    return any(a[0] == COMM_CHANNEL for a in node.attrs)


def sends_buffered(node: ChakraNode) -> bool:
    """``is_buffered_send`` of a node (``on_host_channel``)."""
    return node.type == NodeType.COMM_SEND_NODE and on_host_channel(node)


class TransferTimes(NamedTuple):
    """How long each side of a send/receive pair runs in a replay."""

    send_us: float  # from the send's post (buffered) or the later post
    recv_us: float  # from the later post


def p2p_times(send: tuple[float, float], recv: tuple[float, float],
              buffered: bool) -> TransferTimes:
    """Each side's time, from the two sides' recorded (start, end) on one
    clock. Every recorded end is no earlier than when its host called
    ``wait()``, so a side that waited late over-states its time (GPipe
    waits on its four activation sends only after the last forward).

    * The receive: its own end less the later post (the bytes cannot come
      before both sides posted).
    * A buffered send (``is_buffered_send``) runs from its own post to its
      own recorded end: it waits for nobody, and its end is when its host's
      ``wait()`` returned. That may be well after the receive ended (rank 3
      of a 4-stage GPipe resumed 15 ms after its last send's bytes had
      arrived, the thread waking on a crowded machine), and which of a late
      wait or a slow wake-up held it the trace cannot tell; either way the
      host resumed then.
    * A send that waits for its peer (NCCL) ends with its receive: both
      take the least either record allows."""
    later_post = max(send[0], recv[0])
    recv_us = max(0.0, recv[1] - later_post)
    if buffered:
        return TransferTimes(max(0.0, send[1] - send[0]), recv_us)
    both = max(0.0, min(recv[1], send[1]) - later_post)
    return TransferTimes(both, both)


def recorded_order(ops: Sequence[CommOp]) -> list[CommOp]:
    """The rank's recorded order of its communication nodes."""
    return sorted(ops, key=lambda op: (op.start, op.node))


def rendezvous_keys(ops: Sequence[CommOp], rank: int) -> dict[int, RendezvousKey]:
    """Node id -> key, for one rank's communication nodes (any order: they
    are taken in recorded order). ``rank`` is this rank's number, which a
    transfer's peers are named by."""
    keys: dict[int, RendezvousKey] = {}
    collectives: dict[str, int] = defaultdict(int)
    transfers: dict[tuple[str, int, int], int] = defaultdict(int)
    for op in recorded_order(ops):
        if op.node_type == NodeType.COMM_COLL_NODE:
            if op.seq is not None:
                keys[op.node] = RendezvousKey(op.pg, SEQ, op.seq)
            else:
                keys[op.node] = RendezvousKey(op.pg, ORDER, collectives[op.pg])
                collectives[op.pg] += 1
            continue
        if op.peer is None or op.peer < 0:
            sender = receiver = NO_RANK
        elif op.node_type == NodeType.COMM_SEND_NODE:
            sender, receiver = rank, op.peer
        else:
            sender, receiver = op.peer, rank
        pair = (op.pg, sender, receiver)
        keys[op.node] = RendezvousKey(op.pg, P2P, transfers[pair], sender, receiver)
        transfers[pair] += 1
    return keys


def comm_order(ids: Sequence[int], deps: Mapping[int, Sequence[tuple[int, object]]],
               ops: Sequence[CommOp]) -> list[tuple[int, int]]:
    """Pairs (a, b) of one rank's communication nodes where b cannot start
    before a completed: a is a nearest communication ancestor of b over
    ``deps`` (destination -> ``[(source, kind)]``), or a precedes b on b's
    lane. A buffered send (``is_buffered_send``) completes without its peer,
    so no pair starts at one: what follows it waits for what it waited for
    (its ancestors pass through it). Iterative (Kahn's order); nodes on a
    cycle of ``deps`` are skipped."""
    comm = {op.node for op in ops}
    blocking = {op.node for op in ops if not op.buffered}
    pairs: set[tuple[int, int]] = set()
    known = set(ids)
    indegree = dict.fromkeys(ids, 0)
    children: dict[int, list[int]] = defaultdict(list)
    for dst, srcs in deps.items():
        if dst not in known:
            continue
        for src, _kind in srcs:
            if src in known and src != dst:
                indegree[dst] += 1
                children[src].append(dst)
    empty: frozenset[int] = frozenset()
    # Nearest communication ancestors of each node, dropped once every child read them.
    above: dict[int, frozenset[int]] = {}
    unread = {i: len(c) for i, c in children.items()}
    ready = [i for i, deg in indegree.items() if deg == 0]
    while ready:
        cur = ready.pop()
        sources = [s for s, _k in deps.get(cur, ()) if s in known and s != cur]
        sets = [frozenset((s,)) if s in blocking else above.get(s, empty) for s in sources]
        sets = [s for s in sets if s]
        mine = empty if not sets else sets[0] if len(sets) == 1 else frozenset().union(*sets)
        if cur in comm:
            pairs.update((a, cur) for a in mine)
        above[cur] = mine
        for child in children.get(cur, ()):
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
        for s in sources:
            unread[s] -= 1
            if not unread[s]:
                above.pop(s, None)
        if not children.get(cur):
            above.pop(cur, None)
    lanes: dict[tuple[Any, ...], list[CommOp]] = defaultdict(list)
    for op in ops:
        lanes[op.lane].append(op)
    for lane_ops in lanes.values():
        ordered = recorded_order(lane_ops)
        pairs.update((a.node, b.node) for a, b in zip(ordered, ordered[1:])
                     if a.node != b.node and not a.buffered)
    return sorted(pairs)


class RankComms(NamedTuple):
    """One rank's communication, as :func:`find_deadlock` needs it."""

    rank: int
    source: str  # the file it came from
    keys: Mapping[int, RendezvousKey]  # node id -> key
    order: Sequence[tuple[int, int]]  # (earlier, later) node ids, from comm_order


class DeadlockStep(NamedTuple):
    """On ``rank``, ``later`` cannot start before ``earlier`` completed."""

    rank: int
    source: str
    earlier_node: int
    earlier: RendezvousKey
    later_node: int
    later: RendezvousKey

    def describe(self) -> str:
        return (f"rank {self.rank} runs {self.earlier.describe()} (node {self.earlier_node}) "
                f"before {self.later.describe()} (node {self.later_node})")


def find_deadlock(ranks: Sequence[RankComms]) -> list[DeadlockStep]:
    """One cycle of ranks waiting on each other (empty when there is none):
    matched nodes are merged into one rendezvous and every rank's order
    between them is an edge."""
    index: dict[RendezvousKey, int] = {}
    why: list[DeadlockStep] = []  # edge number -> the rank order behind it
    deps: dict[int, list[tuple[int, object]]] = defaultdict(list)
    for rc in ranks:
        for a, b in rc.order:
            ka, kb = rc.keys.get(a), rc.keys.get(b)
            if ka is None or kb is None or ka == kb:
                continue  # a key repeated on one rank is reported by validate as such
            ia, ib = index.setdefault(ka, len(index)), index.setdefault(kb, len(index))
            deps[ib].append((ia, len(why)))
            why.append(DeadlockStep(rc.rank, rc.source, a, ka, b, kb))
    cycle = find_cycle_in(range(len(index)), deps)
    return [why[int(edge.kind)] for edge in cycle]


def describe_deadlock(steps: Sequence[DeadlockStep]) -> str:
    return ("collectives cannot rendezvous, the ranks deadlock: "
            + "; ".join(step.describe() for step in steps))

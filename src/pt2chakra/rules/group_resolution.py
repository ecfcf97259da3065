"""Which process group a communication node used when its trace does not
say, worked out across the rank set: :func:`rank_set_keys` is
``rendezvous.rendezvous_keys`` for every rank of a job at once, what each
reader of several ranks calls (validate, the replay, the ASTRA-sim export, diff).

Gloo names no group on its nodes: the host trace gives c10d's group as
``<Object>``, Kineto's events carry no group name, and a transfer's peer is
its rank *within the group*. Where each rank is in one group of several
ranks (the world) that is all there is to know. On a 2-D mesh (a pipeline
over data-parallel replicas, PP x DP) a rank is in several, and its own
trace cannot tell which one a node used. The ranks together can:

* a **transfer** from rank r to local peer p over group G goes to
  ``G[p]``, which must have a transfer of the opposite kind from its local
  peer ``G.index(r)`` over G. Of r's groups, the one whose mapping finds
  such a partner (the same count of them, where several do) is the group;
* **collectives** run by every member of their group in one order, so a
  group's members have the same unnamed collectives (type, bytes, order);
  and not on a group that holds both ends of a transfer: a pipeline's
  stages hand activations to each other, they do not gather a replica's
  blocks together (the world, or the pipeline's own group, would tie one
  stage's forward to the next one's, which waits for it: a deadlock).
  Nor on a group where a member ended an all-reduce (any collective whose
  every member waits on every other's input) before another member began
  it. Each rank with unnamed collectives takes one group, chosen by all of
  its members (a cover of the ranks); where several covers remain, the one
  whose members' collectives end far closer together than any other's is
  taken (a collective completes on all of its ranks at once; two pipeline
  stages' gathers end tens of milliseconds apart). Where no cover stands
  out (collectives of two groups in lockstep on every rank), or a rank is
  left without a group, none is resolved: they stay matched across the
  world, as they are without this module.

A node whose group stays ambiguous keeps its unnamed key: validate then
reports what does not meet. Nodes that name their group are never changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import median
from typing import NamedTuple

from pt2chakra.chakra.process_groups import ProcessGroupRecord
from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.rules.rendezvous import CommOp, RendezvousKey, rendezvous_keys

# Collectives of one group end together, within a ring's last hop and each
# rank's wake-up; the same collectives read as another group's end as far
# apart as that group's ranks are out of step. A PP2 x DP2 job's replica
# groups ended their gathers a median 0.3-4 ms apart, its pipeline groups
# and the world 65-90 ms apart (one stage gathers while the other
# computes): 15x and more. A TP2 x DP2 job runs both groups' collectives on
# every rank in one order; read as any one group's they ended 9-28 ms
# apart, within 3x of each other: no group is theirs alone. So a group is
# taken only when every other candidate's spread is over SPREAD_RATIO times
# its own and SPREAD_FLOOR_US more (spreads of a few microseconds, where a
# ratio says nothing).
SPREAD_RATIO = 5.0
SPREAD_FLOOR_US = 200.0
# A collective whose every member waits on every other's input (a ring's
# all-reduce or all-gather, an all-to-all, a barrier) ends on no member
# before the last one started it. Read on the ranks' clock, a member that
# ended it more than CLOCK_SLACK_US before another started rules that group
# out: a hard fact where the spreads above are a measure (a loaded TP2 x
# FSDP2 step had its replica groups' gathers 6 ms apart, the tensor groups'
# 30 ms: under SPREAD_RATIO, but on the tensor group one rank ended a gather
# 58 ms before its peer began it). The slack is ranks on hosts whose clocks
# agree to within a millisecond (one host shares one clock).
CLOCK_SLACK_US = 1000.0
EVERY_MEMBER_WAITS = frozenset(int(t) for t in (
    CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER, CollectiveType.ALL_TO_ALL,
    CollectiveType.REDUCE_SCATTER, CollectiveType.REDUCE_SCATTER_BLOCK,
    CollectiveType.BARRIER))
# Ways to cover the ranks with groups tried before giving up (a mesh gives
# a rank one group per dimension; real jobs have a handful of covers).
MAX_COVERS = 256

_TRANSFERS = (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)


class RankOps(NamedTuple):
    """One rank's communication nodes and the process groups it recorded."""

    rank: int
    groups: Sequence[ProcessGroupRecord]
    ops: Sequence[CommOp]


class _Group(NamedTuple):
    name: str
    members: tuple[int, ...]


def rank_set_keys(ranks: Sequence[RankOps]) -> list[dict[int, RendezvousKey]]:
    """Per rank: node id -> rendezvous key, the groups of unnamed nodes
    resolved across the set first (``resolve_unnamed``)."""
    return resolve_set(ranks).keys


class Named(NamedTuple):
    """What the rank set tells of an unnamed node: its group, and a
    transfer's peer as a rank of the job (None: a collective)."""

    pg: str
    peer: int | None


class ResolvedSet(NamedTuple):
    """One resolution of a rank set, for a caller that needs both its
    matching keys and the names it gave (the ASTRA-sim export's check)."""

    keys: list[dict[int, RendezvousKey]]  # per rank (``rank_set_keys``)
    named: list[dict[int, Named]]  # per rank (``resolved_names``)


def resolve_set(ranks: Sequence[RankOps]) -> ResolvedSet:
    """The unnamed nodes' groups resolved once (``resolve_unnamed``)."""
    resolved = resolve_unnamed(ranks)
    keys = [rendezvous_keys(ops, r.rank) for r, ops in zip(ranks, resolved)]
    named = [{new.node: Named(new.pg, new.peer if new.node_type in _TRANSFERS else None)
              for old, new in zip(r.ops, ops) if new is not old}
             for r, ops in zip(ranks, resolved)]
    return ResolvedSet(keys, named)


def resolved_names(ranks: Sequence[RankOps]) -> list[dict[int, Named]]:
    """Per rank: node id -> its group (and peer), for the nodes whose group
    the rank set resolved: what a writer puts into the nodes it writes (the
    ASTRA-sim job), so that each file says what the set told."""
    return resolve_set(ranks).named


def resolve_unnamed(ranks: Sequence[RankOps]) -> list[list[CommOp]]:
    """Every rank's ops, those without a group given the group (and a
    transfer its peer as a rank of the job) the rank set shows they used;
    the ops unchanged where no rank is in more than one group of several
    ranks."""
    groups = {r.rank: _candidate_groups(r) for r in ranks}
    if all(len(g) <= 1 for g in groups.values()):
        return [list(r.ops) for r in ranks]
    world = _world(groups)
    transfers = _resolve_transfers(ranks, groups)
    peers = {frozenset((rank, other)) for (rank, _t, _p), (_g, other) in transfers.items()
             if other is not None}
    collectives = _resolve_collectives(ranks, groups, peers)
    out = []
    for r in ranks:
        ops = []
        for op in r.ops:
            if op.node_type in _TRANSFERS:
                found = transfers.get((r.rank, op.node_type, op.peer))
            else:
                found = collectives.get(r.rank) if not op.pg else None
            ops.append(_named(op, found, world))
        out.append(ops)
    return out


def _named(op: CommOp, found: tuple[_Group, int | None] | None, world: frozenset[int]) -> CommOp:
    """``op`` on the group found (a transfer with its global peer); unchanged
    when none was, or when it is the world's with the peer as given (what
    the unnamed key already means)."""
    if found is None or op.pg:
        return op
    group, peer = found
    if set(group.members) == world and (peer is None or peer == op.peer):
        return op
    return op._replace(pg=group.name, peer=op.peer if peer is None else peer)


def _candidate_groups(r: RankOps) -> list[_Group]:
    """The rank's groups of several ranks that it is in, each once."""
    seen: dict[str, _Group] = {}
    for g in r.groups:
        members = g.members()
        if len(members) >= 2 and r.rank in members and g.name not in seen:
            seen[g.name] = _Group(g.name, members)
    return list(seen.values())


def _world(groups: dict[int, list[_Group]]) -> frozenset[int]:
    return frozenset(groups) | frozenset(m for gs in groups.values() for g in gs for m in g.members)


def _transfer_classes(r: RankOps) -> Counter[tuple[int, int]]:
    """(node type, local peer) -> how many unnamed transfers."""
    return Counter((op.node_type, op.peer) for op in r.ops
                   if op.node_type in _TRANSFERS and not op.pg
                   and op.peer is not None and op.peer >= 0)


def _resolve_transfers(ranks: Sequence[RankOps], groups: dict[int, list[_Group]],
                       ) -> dict[tuple[int, int, int | None], tuple[_Group, int | None]]:
    """(rank, node type, local peer) -> (group, global peer) for each class
    of unnamed transfers one group explains."""
    classes = {r.rank: _transfer_classes(r) for r in ranks}
    found: dict[tuple[int, int, int | None], tuple[_Group, int | None]] = {}
    for rank, counts in classes.items():
        for (node_type, peer), count in counts.items():
            opposite = (NodeType.COMM_RECV_NODE if node_type == NodeType.COMM_SEND_NODE
                        else NodeType.COMM_SEND_NODE)
            fits: list[tuple[bool, _Group, int]] = []
            for g in groups[rank]:
                if peer >= len(g.members) or g.members[peer] == rank:
                    continue
                other = g.members[peer]
                back = classes.get(other, Counter()).get((opposite, g.members.index(rank)), 0)
                if back and any(h.name == g.name for h in groups.get(other, ())):
                    fits.append((back == count, g, other))
            exact = [f for f in fits if f[0]] or fits
            if len(exact) == 1:
                found[(rank, node_type, peer)] = (exact[0][1], exact[0][2])
    return found


class _Signature(NamedTuple):
    """A rank's unnamed collectives in recorded order: (type, bytes) of each,
    and when each started and ended."""

    shape: tuple[tuple[int, int], ...]
    starts: list[float]
    ends: list[float]


def _collective_signature(r: RankOps) -> _Signature:
    unnamed = sorted((op for op in r.ops if op.node_type not in _TRANSFERS and not op.pg),
                     key=lambda op: (op.start, op.node))
    return _Signature(tuple((op.ctype, op.size) for op in unnamed),
                      [float(op.start) for op in unnamed], [op.end for op in unnamed])


def _resolve_collectives(ranks: Sequence[RankOps], groups: dict[int, list[_Group]],
                         peers: set[frozenset[int]]) -> dict[int, tuple[_Group, int | None]]:
    """rank -> the group of all its unnamed collectives: the groups that could
    have run them, one per rank with some, the group of each chosen by all
    its members (a cover of those ranks); where several covers remain, the
    one whose ends meet far tighter (``_tightest``); else none is resolved
    (a wrong group would split what the world matches)."""
    sig = {r.rank: _collective_signature(r) for r in ranks}
    unnamed = sorted(rank for rank, s in sig.items() if s.shape)
    # Each group judged once, not once per member (the world is every rank's).
    distinct = {g.name: g for rank in unnamed for g in groups[rank]}
    could = {name: _could_run(g, sig, peers) for name, g in distinct.items()}
    feasible = {rank: [g for g in groups[rank] if could[g.name]] for rank in unnamed}
    covers = _covers(unnamed, feasible)
    spreads = {g.name: _spread([sig[m].ends for m in g.members])
               for cover in covers for g in cover}
    pick = _tightest(covers, spreads)
    return {} if pick is None else {m: (g, None) for g in pick for m in g.members}


def _could_run(g: _Group, sig: dict[int, _Signature], peers: set[frozenset[int]]) -> bool:
    """Whether ``g``'s members could have run these collectives together: they
    ran the same ones; ``g`` holds no two ends of a transfer (a pipeline's
    stages hand off, they do not gather together); and, where every member
    waits on every other's input, none of them ended one before another
    member started it (``_meet_in_time``)."""
    shape = sig[g.members[0]].shape if g.members[0] in sig else ()
    return (all(m in sig and sig[m].shape == shape for m in g.members)
            and not any(pair <= set(g.members) for pair in peers)
            and _meet_in_time(shape, [sig[m] for m in g.members]))


def _meet_in_time(shape: Sequence[tuple[int, int]], members: Sequence[_Signature]) -> bool:
    """No collective of every-member kind (``EVERY_MEMBER_WAITS``) ended on
    one member more than ``CLOCK_SLACK_US`` before another member started
    it: a rank cannot have the sum of an input not yet given. Untimed
    collectives (0) say nothing."""
    for k, (ctype, _size) in enumerate(shape):
        if ctype not in EVERY_MEMBER_WAITS:
            continue
        starts = [m.starts[k] for m in members]
        ends = [m.ends[k] for m in members]
        if min(starts) > 0 and min(ends) > 0 and max(starts) - min(ends) > CLOCK_SLACK_US:
            return False
    return True


def _covers(ranks: Sequence[int], feasible: dict[int, list[_Group]]) -> list[tuple[_Group, ...]]:
    """Every way to give each of ``ranks`` one of its feasible groups such
    that a group is the choice of all its members (none where a rank has
    no feasible group); at most ``MAX_COVERS`` (more: none, unresolved)."""
    out: list[tuple[_Group, ...]] = []
    wanted = set(ranks)

    def extend(chosen: tuple[_Group, ...], covered: frozenset[int]) -> bool:
        left = [r for r in ranks if r not in covered]
        if not left:
            out.append(chosen)
            return len(out) <= MAX_COVERS
        for g in feasible[left[0]]:
            if set(g.members) <= wanted and not covered & set(g.members):
                if not extend((*chosen, g), covered | frozenset(g.members)):
                    return False
        return True

    if not ranks or not extend((), frozenset()):
        return []
    return out


def _spread(ends: Sequence[Sequence[float]]) -> float:
    """The median, over the collectives, of how far apart their ends are."""
    return median(max(col) - min(col) for col in zip(*ends))


def _tightest(covers: Sequence[tuple[_Group, ...]],
              spreads: dict[str, float]) -> tuple[_Group, ...] | None:
    """Of the covers whose groups could have run the collectives, the one
    whose ends meet far tighter than any other's (``SPREAD_RATIO``; a
    cover's spread: its loosest group's); the only one, where one is; else
    None."""
    if len(covers) <= 1:
        return covers[0] if covers else None

    def spread(cover: tuple[_Group, ...]) -> float:
        return max(spreads[g.name] for g in cover)

    ranked = sorted(covers, key=spread)
    best, second = spread(ranked[0]), spread(ranked[1])
    clear = second > max(best * SPREAD_RATIO, best + SPREAD_FLOOR_US)
    return ranked[0] if clear else None

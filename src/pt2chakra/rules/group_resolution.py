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
  group's members have the same unnamed collectives (type, bytes, order).
  Where several of a rank's groups pass that, the one whose members'
  collectives end together is the group (a collective completes on all of
  its ranks at once; two pipeline stages' gathers end milliseconds apart);
  of groups that end together alike (a job in lockstep) the largest is
  kept, the world, which is how they are matched without this module.

A node whose group stays ambiguous keeps its unnamed key: validate then
reports what does not meet. Nodes that name their group are never changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import median
from typing import NamedTuple

from pt2chakra.chakra.process_groups import ProcessGroupRecord
from pt2chakra.chakra.records import NodeType
from pt2chakra.rules.rendezvous import CommOp, RendezvousKey, rendezvous_keys

# Collectives of one group end together, within a ring's last hop and each
# rank's wake-up: a PP2 x DP2 job's replica groups ended their gathers a
# median 0.3-4 ms apart, its pipeline groups and the world 65-90 ms apart
# (one stage's gathers run while the other computes). A group whose median
# spread of ends is within SPREAD_RATIO of the tightest group's, or within
# SPREAD_FLOOR_US of it (spreads of a few microseconds, where a ratio says
# nothing), meets as tightly: a job in lockstep meets on every group alike.
SPREAD_FLOOR_US = 200.0
SPREAD_RATIO = 2.0

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
    return [rendezvous_keys(ops, r.rank) for r, ops in zip(ranks, resolve_unnamed(ranks))]


class Named(NamedTuple):
    """What the rank set tells of an unnamed node: its group, and a
    transfer's peer as a rank of the job (None: a collective)."""

    pg: str
    peer: int | None


def resolved_names(ranks: Sequence[RankOps]) -> list[dict[int, Named]]:
    """Per rank: node id -> its group (and peer), for the nodes whose group
    the rank set resolved: what a writer puts into the nodes it writes (the
    ASTRA-sim job), so that each file says what the set told."""
    out = []
    for r, ops in zip(ranks, resolve_unnamed(ranks)):
        out.append({new.node: Named(new.pg, new.peer if new.node_type in _TRANSFERS else None)
                    for old, new in zip(r.ops, ops) if new is not old})
    return out


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
    collectives = _resolve_collectives(ranks, groups)
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


def _collective_signature(r: RankOps) -> tuple[tuple[tuple[int, int], ...], list[float]]:
    """The rank's unnamed collectives in recorded order: (type, bytes) of
    each, and when each ended."""
    unnamed = sorted((op for op in r.ops if op.node_type not in _TRANSFERS and not op.pg),
                     key=lambda op: (op.start, op.node))
    return tuple((op.ctype, op.size) for op in unnamed), [op.end for op in unnamed]


def _resolve_collectives(ranks: Sequence[RankOps], groups: dict[int, list[_Group]],
                         ) -> dict[int, tuple[_Group, int | None]]:
    """rank -> the group of all its unnamed collectives, where every rank's
    choice agrees with its group's members' (else none is resolved)."""
    sig = {r.rank: _collective_signature(r) for r in ranks}
    spreads: dict[str, float] = {}
    chosen: dict[int, _Group] = {}
    for rank, (shape, _ends) in sig.items():
        if not shape:
            continue
        fits = [g for g in groups[rank]
                if all(m in sig and sig[m][0] == shape for m in g.members)]
        for g in fits:
            if g.name not in spreads:
                spreads[g.name] = _spread([sig[m][1] for m in g.members])
        pick = _tightest(fits, spreads)
        if pick is not None:
            chosen[rank] = pick
    agreed = all(chosen.get(m) == g for g in chosen.values() for m in g.members)
    return {rank: (g, None) for rank, g in chosen.items()} if agreed else {}


def _spread(ends: Sequence[Sequence[float]]) -> float:
    """The median, over the collectives, of how far apart their ends are."""
    return median(max(col) - min(col) for col in zip(*ends))


def _tightest(fits: Sequence[_Group], spreads: dict[str, float]) -> _Group | None:
    """Of the groups whose members could have run these collectives, the
    largest of those whose ends meet as tightly as the tightest's; None
    when two of one size tie."""
    if not fits:
        return None
    least = min(spreads[g.name] for g in fits)
    close = [g for g in fits
             if spreads[g.name] <= max(least * SPREAD_RATIO, least + SPREAD_FLOOR_US)]
    largest = max(len(g.members) for g in close)
    top = [g for g in close if len(g.members) == largest]
    return top[0] if len(top) == 1 else None

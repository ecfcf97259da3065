"""Which process group an unnamed node used, told by the rank set
(``group_resolution``): gloo names no group on its transfers and collectives
and gives a transfer's peer within its group, so a pipeline on a 2-D mesh
(PP x DP: stages {0, 2} and {1, 3}, replicas {0, 1} and {2, 3}) is only
matched right when the ranks are read together."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.process_groups import ProcessGroupRecord
from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.rules.group_resolution import (
    RankOps,
    rank_set_keys,
    resolve_unnamed,
    resolved_names,
)
from pt2chakra.rules.rendezvous import P2P, CommOp

SEND, RECV, COLL = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMM_COLL_NODE
WORLD = ProcessGroupRecord("0", (), 4, "default_pg")
PP = {0: ProcessGroupRecord("1", (0, 2), 2, "mesh_pp"), 2: ProcessGroupRecord("1", (0, 2), 2),
      1: ProcessGroupRecord("2", (1, 3), 2, "mesh_pp"), 3: ProcessGroupRecord("2", (1, 3), 2)}
DP = {0: ProcessGroupRecord("3", (0, 1), 2, "mesh_dp"), 1: ProcessGroupRecord("3", (0, 1), 2),
      2: ProcessGroupRecord("4", (2, 3), 2, "mesh_dp"), 3: ProcessGroupRecord("4", (2, 3), 2)}
STAGE_OFFSET_US = 50_000.0  # stage 1 gathers its blocks this much later than stage 0


def op(node: int, node_type: int, start: float, peer: int | None = None, pg: str = "",
       size: int = 4096, end: float | None = None) -> CommOp:
    return CommOp(node, int(node_type), int(start), pg, None, peer, ("host", node),
                  node_type == SEND, 7 if node_type == COLL else -1, size,
                  start + 100 if end is None else end)


def mesh_rank(rank: int, transfers: int = 2, gathers: int = 3,
              groups: tuple[ProcessGroupRecord, ...] | None = None) -> RankOps:
    """Rank ``rank`` of PP2 x DP2 as gloo records it: stage 0 (ranks 0, 1)
    sends to local peer 1 of its pipeline group and receives from it, stage 1
    the other way; every rank gathers its blocks in its replica group."""
    stage = 0 if rank in (0, 1) else 1
    local_peer = 1 - stage
    ops = [op(10 + k, COLL, 1000 * k + STAGE_OFFSET_US * stage) for k in range(gathers)]
    for k in range(transfers):
        ops.append(op(100 + k, SEND, 10_000 + 10 * k, local_peer))
        ops.append(op(200 + k, RECV, 20_000 + 10 * k, local_peer))
    return RankOps(rank, groups if groups is not None else (WORLD, PP[rank], DP[rank]), ops)


def test_transfers_meet_their_stage_peer_over_the_pipeline_group() -> None:
    ranks = [mesh_rank(r) for r in range(4)]
    keys = rank_set_keys(ranks)
    for r, peer, pg in [(0, 2, "1"), (1, 3, "2"), (2, 0, "1"), (3, 1, "2")]:
        send = keys[r][100]
        assert (send.kind, send.pg, send.sender, send.receiver) == (P2P, pg, r, peer)
    # rank 0's first send is rank 2's first receive: one rendezvous
    assert keys[0][100] == keys[2][200]
    assert keys[1][100] == keys[3][200]


def test_collectives_meet_in_the_replica_group_not_across_the_pipeline() -> None:
    """Every rank has the same gathers (the stages are alike); the world and
    the pipeline group hold both ends of a transfer, so the replica group
    {0, 1} is theirs, whenever they end."""
    for offset in (STAGE_OFFSET_US, 0.0):
        ranks = [mesh_rank(r) for r in range(4)]
        ranks = [RankOps(r.rank, r.groups, [_shifted(o, -offset * (r.rank >= 2) * (o.node < 100))
                                            for o in r.ops]) for r in ranks]
        keys = rank_set_keys(ranks)
        assert {keys[r][10].pg for r in (0, 1)} == {"3"}
        assert {keys[r][10].pg for r in (2, 3)} == {"4"}
        assert keys[0][10] == keys[1][10] != keys[2][10]


def _shifted(o: CommOp, by: float) -> CommOp:
    return o._replace(start=int(o.start + by), end=o.end + by)


def test_without_transfers_the_group_whose_ends_meet_far_tighter_is_taken() -> None:
    """No transfer rules a group out: stage 1's gathers end STAGE_OFFSET_US
    after stage 0's, so only the replica groups' ends meet."""
    keys = rank_set_keys([mesh_rank(r, transfers=0) for r in range(4)])
    assert [keys[r][10].pg for r in range(4)] == ["3", "3", "4", "4"]


def test_one_group_of_several_ranks_changes_nothing() -> None:
    """A pipeline alone (the world and a group of one): the unnamed keys are
    already right, and stay as they were."""
    ranks = [RankOps(r, (ProcessGroupRecord("0", (), 2), ProcessGroupRecord(str(r + 1), (r,), 1)),
                     [op(1, SEND, 10, 1 - r), op(2, RECV, 20, 1 - r)]) for r in (0, 1)]
    assert resolve_unnamed(ranks) == [list(r.ops) for r in ranks]
    assert resolved_names(ranks) == [{}, {}]


def test_lockstep_collectives_on_every_group_stay_on_the_world() -> None:
    """Ranks whose collectives end together on every group (TP x DP in
    lockstep) cannot be told apart by time: they stay as the world matches
    them, not guessed onto one group."""
    ranks = []
    for r in range(4):
        ops = [op(10 + k, COLL, 1000 * k) for k in range(3)]
        ranks.append(RankOps(r, (WORLD, PP[r], DP[r]), ops))
    assert resolved_names(ranks) == [{}, {}, {}, {}]


def test_named_nodes_are_never_changed() -> None:
    ranks = [mesh_rank(r) for r in range(4)]
    named = RankOps(0, ranks[0].groups, [op(500, COLL, 5, pg="3"), *ranks[0].ops])
    out = resolve_unnamed([named, *ranks[1:]])
    assert out[0][0] is named.ops[0]


def test_a_transfer_no_group_explains_keeps_its_unnamed_key() -> None:
    """Rank 0 sends to local peer 1 but no rank receives from it: validate
    then reports the transfer unmatched, as before."""
    ranks = [mesh_rank(r) for r in range(4)]
    lonely = RankOps(0, ranks[0].groups, [op(900, SEND, 5, 1)])
    out = resolve_unnamed([lonely, *[RankOps(r.rank, r.groups, [o for o in r.ops
                                                               if o.node_type == COLL])
                                     for r in ranks[1:]]])
    assert out[0][0].pg == "" and out[0][0].peer == 1




@given(st.permutations(range(4)), st.integers(1, 4), st.integers(1, 5))
def test_resolution_does_not_depend_on_the_order_of_the_ranks(order: list[int], transfers: int,
                                                               gathers: int) -> None:
    ranks = [mesh_rank(r, transfers, gathers) for r in range(4)]
    by_rank = {r.rank: k for r, k in zip(ranks, rank_set_keys(ranks))}
    shuffled = [ranks[i] for i in order]
    for r, keys in zip(shuffled, rank_set_keys(shuffled)):
        assert keys == by_rank[r.rank]


def test_collectives_of_two_groups_in_one_order_stay_on_the_world() -> None:
    """TP x DP runs its replica and tensor groups' collectives on every rank
    in one order: read as either group's they end a few times apart, no
    group stands out, and none is guessed (a wrong one would split what the
    world matches)."""
    ranks = []
    for r in range(4):
        skew = {0: 0.0, 1: 9000.0, 2: 4500.0, 3: 13_500.0}[r]  # tp 9 ms, dp 4.5 ms apart
        ranks.append(RankOps(r, (WORLD, PP[r], DP[r]),
                             [op(10 + k, COLL, 1000 * k + skew) for k in range(3)]))
    assert resolved_names(ranks) == [{}, {}, {}, {}]


def test_a_group_whose_member_ended_before_another_began_is_ruled_out() -> None:
    """Replica groups {0, 1} and {2, 3} gather 25 ms apart on a loaded host:
    their own ends 6 ms apart, the other groups' 25 ms, under SPREAD_RATIO.
    But on {0, 2}, {1, 3} and the world a member ended each all-reduce
    before another member began it, which no all-reduce allows: the replica
    groups are the only groups that could have run them."""
    ranks = []
    for r in range(4):
        begin, took = {0: (0, 20_000), 1: (5000, 21_000), 2: (25_000, 20_000),
                       3: (30_000, 21_000)}[r]
        ops = [op(10 + k, COLL, 100_000 * k + begin, end=100_000 * k + begin + took)
               for k in range(3)]
        ops = [o._replace(ctype=int(CollectiveType.ALL_REDUCE)) for o in ops]
        ranks.append(RankOps(r, (WORLD, PP[r], DP[r]), ops))
    keys = rank_set_keys(ranks)
    assert [keys[r][10].pg for r in range(4)] == ["3", "3", "4", "4"]
    # a broadcast's root may finish before the others begin: timing rules nothing out
    bcast = [RankOps(r.rank, r.groups, [o._replace(ctype=int(CollectiveType.BROADCAST))
                                        for o in r.ops]) for r in ranks]
    assert resolved_names(bcast) == [{}, {}, {}, {}]


def test_a_rank_left_without_a_group_leaves_every_rank_unresolved() -> None:
    """Ranks 2 and 3 ran other collectives than 0 and 1 and their replica
    group is not recorded: 0 and 1 alone would be split from them."""
    ranks = [mesh_rank(r, transfers=0) for r in range(4)]
    ranks[2] = RankOps(2, (WORLD, PP[2]), ranks[2].ops)
    assert all(not names for names in resolved_names(ranks))

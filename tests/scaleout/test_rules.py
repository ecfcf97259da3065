"""Size rules per collective kind, with the invariants hypothesis checks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.scaleout.rules import SizeRule, call_name, scaled_size, shard_bytes, size_rule
from pt2chakra.simulation.network import chain_handoffs, cost_factors

AR, AG, RS = int(CollectiveType.ALL_REDUCE), int(CollectiveType.ALL_GATHER), \
    int(CollectiveType.REDUCE_SCATTER)
ranks = st.integers(1, 4096)


def test_rule_per_call() -> None:
    assert size_rule(AR, "allreduce_") is SizeRule.KEEP
    assert size_rule(AG, "_allgather_base_") is SizeRule.SHARDED
    assert size_rule(AG, "allgather_") is SizeRule.PER_RANK
    assert size_rule(AG, None) is SizeRule.PER_RANK  # no call known: a gather of per-rank pieces
    assert size_rule(RS, None) is SizeRule.SHARDED
    assert size_rule(int(CollectiveType.BROADCAST), "broadcast_") is SizeRule.KEEP
    # gloo runs _reduce_scatter_base_ as an all-reduce of the whole block: the
    # call's rule (block fixed), the backend op's type (all-reduce)
    assert size_rule(AR, "_reduce_scatter_base_") is SizeRule.SHARDED
    assert call_name("c10d::_reduce_scatter_base_") == "_reduce_scatter_base_"


@given(st.integers(1, 1 << 20), ranks, ranks)
def test_per_rank_round_trip(piece: int, n: int, m: int) -> None:
    """One piece per rank: the total is M pieces, and back to N exactly."""
    size = piece * n
    grown = scaled_size(size, SizeRule.PER_RANK, n, m)
    assert grown == piece * m
    assert scaled_size(grown, SizeRule.PER_RANK, m, n) == size
    assert shard_bytes(grown, SizeRule.PER_RANK, m) == piece


@given(st.integers(1, 1 << 30), ranks, ranks)
def test_sharded_block_fixed(block: int, n: int, m: int) -> None:
    """FSDP: the block is the model's, the shard is 1/M of it."""
    assert scaled_size(block, SizeRule.SHARDED, n, m) == block
    assert shard_bytes(block, SizeRule.SHARDED, m) == block // m
    assert scaled_size(block, SizeRule.KEEP, n, m) == block


@given(st.integers(2, 4096))
def test_ring_all_reduce_bytes_per_link(m: int) -> None:
    """A ring all-reduce moves 2(M-1)/M of the payload over each link; a
    gloo reduce-scatter (run as an all-reduce of the block) the same, not
    a reduce-scatter's (M-1)/M."""
    steps, factor = cost_factors(AR, m, "ring")
    assert abs(factor - 2 * (m - 1) / m) < 1e-12
    assert steps == 2 * (m - 1)
    assert cost_factors(RS, m, "ring")[1] * 2 == factor
    assert factor < 2 and (m == 2 or factor > cost_factors(AR, m - 1, "ring")[1])


@given(st.sampled_from([*map(int, CollectiveType), -1]), st.integers(1, 4096),
       st.sampled_from(["ring", "tree", "gloo"]), st.integers(0, 1 << 30))
def test_hand_offs_are_among_the_sequential_messages(kind: int, n: int,
                                                     algorithm: str, size: int) -> None:
    """A wake-up is charged per hand-off of the chain (network.chain_handoffs):
    never more than the messages the model already sends one after another,
    none alone, and a ring's once per other rank."""
    handoffs = chain_handoffs(kind, n, algorithm)
    steps, _factor = cost_factors(kind, n, algorithm, size)
    assert 0 <= handoffs <= steps
    assert (handoffs == 0) == (n == 1)
    if algorithm == "ring" and kind in (CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER):
        assert handoffs == n - 1

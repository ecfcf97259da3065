"""How communication meets across ranks: one rule (rules.rendezvous) behind
both ``validate`` and the simulator."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from builders import comm_op, write_rank
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.records import NodeType
from pt2chakra.errors import InputError
from pt2chakra.rules.rendezvous import (
    NO_RANK,
    ORDER,
    P2P,
    SEQ,
    CommOp,
    RankComms,
    RendezvousKey,
    find_deadlock,
    rendezvous_keys,
)
from pt2chakra.simulation import simulate
from pt2chakra.tools.validate import validate

PG = "pg0"
SEND, RECV, COLL = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMM_COLL_NODE


# Every communication node here is on group PG.
comm = partial(comm_op, pg=PG)


def deadlock_pair(folder: Path) -> list[Path]:
    """Rank 0 sends to rank 1, then all-reduces; rank 1 all-reduces, then
    receives from rank 0. No comm_seq. Real NCCL hangs: each rank waits in
    its first op for the other."""
    return [
        write_rank(folder / "d.0.et", [comm(1, SEND, 10, peer=1), comm(2, COLL, 20, [1])], 0,
                   world_size=2),
        write_rank(folder / "d.1.et", [comm(1, COLL, 10), comm(2, RECV, 20, [1], peer=0)], 1,
                   world_size=2),
    ]


def sound_pair(folder: Path) -> list[Path]:
    """The same work in an order both ranks can follow."""
    return [
        write_rank(folder / "s.0.et", [comm(1, SEND, 10, peer=1), comm(2, COLL, 20, [1])], 0,
                   world_size=2),
        write_rank(folder / "s.1.et", [comm(1, RECV, 10, peer=0), comm(2, COLL, 20, [1])], 1,
                   world_size=2),
    ]


# ---------------------------------------------------------------- the rule


def op(node: int, node_type: NodeType, start: int, *, peer: int | None = None,
       seq: int | None = None, pg: str = PG) -> CommOp:
    return CommOp(node, int(node_type), start, pg, seq, peer, ("gpu", 0, 7))


def test_collectives_match_by_seq_else_by_order_among_collectives():
    keys = rendezvous_keys([op(1, SEND, 0, peer=1), op(2, COLL, 1), op(3, COLL, 2, seq=9)], rank=0)
    # the send does not shift the collectives' order (the bug this rule fixed)
    assert keys[2] == RendezvousKey(PG, ORDER, 0)
    assert keys[3] == RendezvousKey(PG, SEQ, 9)
    assert keys[1] == RendezvousKey(PG, P2P, 0, 0, 1)


def test_a_send_and_its_receive_have_one_key():
    send = rendezvous_keys([op(1, SEND, 0, peer=1), op(2, SEND, 5, peer=1)], rank=0)
    recv = rendezvous_keys([op(7, RECV, 3, peer=0), op(8, RECV, 9, peer=0)], rank=1)
    assert [send[1], send[2]] == [recv[7], recv[8]]
    unknown = rendezvous_keys([op(1, SEND, 0)], rank=0)
    assert unknown[1] == RendezvousKey(PG, P2P, 0, NO_RANK, NO_RANK)


@given(st.lists(st.tuples(st.sampled_from([SEND, RECV, COLL]), st.integers(0, 50)),
                max_size=12))
def test_keys_depend_on_recorded_order_not_on_input_order(items):
    ops = [op(i, t, start, peer=1 - 0 if t == SEND else 0) for i, (t, start) in enumerate(items)]
    assert rendezvous_keys(ops, 0) == rendezvous_keys(list(reversed(ops)), 0)
    keys = rendezvous_keys(ops, 0)
    assert len(set(keys.values())) == len(keys)  # one rank never repeats a key


def test_find_deadlock_names_the_waiting_nodes():
    k_send, k_coll = RendezvousKey(PG, P2P, 0, 0, 1), RendezvousKey(PG, ORDER, 0)
    ranks = [RankComms(0, "a", {1: k_send, 2: k_coll}, [(1, 2)]),
             RankComms(1, "b", {1: k_coll, 2: k_send}, [(1, 2)])]
    steps = find_deadlock(ranks)
    assert {(s.rank, s.earlier_node, s.later_node) for s in steps} == {(0, 1, 2), (1, 1, 2)}
    assert not find_deadlock([ranks[0], RankComms(1, "b", {1: k_send, 2: k_coll}, [(1, 2)])])


# ------------------------------------------------- validate and simulate agree


def test_validate_reports_the_deadlock_pair(tmp_path):
    report = validate(deadlock_pair(tmp_path))
    assert not report.sound
    errors = [p for p in report.errors if p.check == "collective-order"]
    assert len(errors) == 1
    assert "rank 0 runs" in errors[0].message and "rank 1 runs" in errors[0].message


def test_simulate_refuses_the_deadlock_pair(tmp_path):
    with pytest.raises(InputError, match="deadlock") as info:
        simulate(deadlock_pair(tmp_path))
    message = str(info.value)
    assert "node 1" in message and "node 2" in message
    assert "rank 0" in message and "rank 1" in message


@pytest.mark.slow
def test_cli_validate_exits_1_and_simulate_refuses_in_one_line(tmp_path):
    files = deadlock_pair(tmp_path)
    proc = run_cli("validate", *files)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[collective-order]" in proc.stdout
    proc = run_cli("simulate", *files)
    assert proc.returncode == 2
    assert_one_line_failure(proc, ".et: collectives cannot rendezvous", "rank 0 runs",
                            "rank 1 runs", "(node 1)", "(node 2)")
    assert "predicted" not in proc.stdout  # no normal report


def test_sound_pair_validates_and_replays_with_matched_transfer(tmp_path):
    files = sound_pair(tmp_path)
    assert validate(files).sound
    result = simulate(files)
    assert all(r.unfinished == 0 for r in result.ranks)
    proc = run_cli("simulate", *files, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ranks"][1]["unfinished"] == 0


def test_a_transfer_without_its_receive_is_an_alignment_error(tmp_path):
    files = [write_rank(tmp_path / "u.0.et", [comm(1, SEND, 10, peer=1)], 0, world_size=2),
             write_rank(tmp_path / "u.1.et", [comm(1, COLL, 10)], 1, world_size=2)]
    report = validate(files)
    assert any(p.check == "alignment" and "transfer #0 from rank 0 to rank 1" in p.message
               for p in report.errors)


def test_simulate_force_replays_the_deadlock_pair_and_says_what_never_ran(tmp_path):
    """docs/ERRORS.md's promise: --force proceeds (with warnings) where an
    unsound set is refused; the stuck collectives are reported as never run."""
    proc = run_cli("simulate", "--force", *deadlock_pair(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "never ran" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr

"""Who reached each collective last (the straggler) and how long the others
waited: one rule (rules/arrivals.py) for the collectives table, the
text report of a multi-rank simulate, its --json, and diff."""

from __future__ import annotations

import pytest
from builders import comm_attrs, gpu_attrs, metadata, node

from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType
from pt2chakra.rules.arrivals import Arrival, arrival_of, arrivals_of
from pt2chakra.simulation.collective_table import collective_rows
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.text_report import format_text_report, result_json, straggler_lines

# Rank r's kernel before the all-reduce lasts BASE_US + LATE_US * r; the
# all-reduce is recorded starting when that kernel ends.
BASE_US, LATE_US, T0 = 50, 40, 1000


def _rank(rank: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    gemm_us = BASE_US + LATE_US * rank
    comm = [*gpu_attrs(20, rank), *comm_attrs(CollectiveType.ALL_REDUCE, 1 << 20, "0", 0)]
    return metadata(rank), [
        node(1, name="gemm", start=T0, dur=gemm_us, attrs=gpu_attrs(7, rank)),
        node(2, [1], name="nccl:all_reduce", node_type=NodeType.COMM_COLL_NODE,
             start=T0 + gemm_us, dur=300 - gemm_us, attrs=comm)]


def test_the_rule() -> None:
    assert arrival_of([(10.0, 0), (15.0, 1), (12.0, 2)]) == Arrival(1, 5.0 + 3.0, 15.0)
    assert arrival_of([(10.0, 3), (10.0, 1)]) == Arrival(3, 0.0, 10.0)  # a tie: the higher rank
    assert arrivals_of({"k": [(1.0, 0), (4.0, 1)]}) == {"k": Arrival(1, 3.0, 4.0)}


def test_rows_name_the_straggler_recorded_and_replayed() -> None:
    sim = Simulator([_rank(0), _rank(1), _rank(2)], ["a.0.et", "a.1.et", "a.2.et"])
    _result, schedule = sim.run()
    (row,) = collective_rows(sim, schedule)
    waited = LATE_US * 2 + LATE_US  # rank 0 waits 80 us for rank 2, rank 1 waits 40 us
    assert row.measured_last_rank == row.replay_last_rank == 2
    assert row.measured_others_wait_us == pytest.approx(waited)
    assert row.replay_others_wait_us == pytest.approx(waited)


def test_multi_rank_text_and_json_list_stragglers() -> None:
    sim = Simulator([_rank(0), _rank(1)], ["a.0.et", "a.1.et"])
    result, schedule = sim.run()
    rows = collective_rows(sim, schedule)
    text = format_text_report(result, collectives=rows)
    assert "stragglers: the last rank to reach a collective" in text
    line = text.split("stragglers:")[1].splitlines()[2]
    assert line.split()[:4] == ["1", f"{LATE_US}", "1", f"{LATE_US}"]
    (entry,) = result_json(result, rows)["stragglers"]
    assert entry["measured_last_rank"] == 1 and entry["replay_others_wait_us"] == LATE_US
    assert "stragglers" not in format_text_report(result)  # nothing given, nothing shown


def test_one_rank_has_no_straggler_table() -> None:
    sim = Simulator([_rank(0)], ["a.0.et"])
    result, schedule = sim.run()
    rows = collective_rows(sim, schedule)
    assert rows[0].measured_last_rank is None and rows[0].replay_others_wait_us is None
    assert straggler_lines(rows) == []
    assert "stragglers" not in format_text_report(result, collectives=rows)
    assert "stragglers" not in result_json(result, rows)

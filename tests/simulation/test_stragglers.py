"""Who reached each collective last (the straggler) and how long the others
waited: one rule (simulation/arrivals.py) for the collectives table, the
text report of a multi-rank simulate, its --json, and diff."""

from __future__ import annotations

import pytest

from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType
from pt2chakra.simulation.arrivals import Arrival, arrival_of, arrivals_of
from pt2chakra.simulation.collective_table import collective_rows
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.text_report import format_report, result_json, straggler_lines

# Rank r's kernel before the all-reduce lasts BASE_US + LATE_US * r; the
# all-reduce is recorded starting when that kernel ends.
BASE_US, LATE_US, T0 = 50, 40, 1000


def _rank(rank: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    md = GlobalMetadata(version="0.0.4", attrs=[("rank", "int64_val", rank)])
    kernel = [("is_cpu_op", "bool_val", False), ("device", "int64_val", rank),
              ("stream", "int64_val", 7)]
    comm = [("is_cpu_op", "bool_val", False), ("device", "int64_val", rank),
            ("stream", "int64_val", 20), ("comm_type", "int64_val", int(CollectiveType.ALL_REDUCE)),
            ("comm_size", "int64_val", 1 << 20), ("pg_name", "string_val", "0"),
            ("comm_seq", "int64_val", 0)]
    gemm_us = BASE_US + LATE_US * rank
    return md, [
        ChakraNode(id=1, name="gemm", type=NodeType.COMP_NODE, start_time_micros=T0,
                   duration_micros=gemm_us, attrs=kernel),
        ChakraNode(id=2, name="nccl:all_reduce", type=NodeType.COMM_COLL_NODE,
                   start_time_micros=T0 + gemm_us, duration_micros=300 - gemm_us,
                   data_deps=[1], attrs=comm)]


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
    text = format_report(result, collectives=rows)
    assert "stragglers: the last rank to reach a collective" in text
    line = text.split("stragglers:")[1].splitlines()[2]
    assert line.split()[:4] == ["1", f"{LATE_US}", "1", f"{LATE_US}"]
    (entry,) = result_json(result, rows)["stragglers"]
    assert entry["measured_last_rank"] == 1 and entry["replay_others_wait_us"] == LATE_US
    assert "stragglers" not in format_report(result)  # nothing given, nothing shown


def test_one_rank_has_no_straggler_table() -> None:
    sim = Simulator([_rank(0)], ["a.0.et"])
    result, schedule = sim.run()
    rows = collective_rows(sim, schedule)
    assert rows[0].measured_last_rank is None and rows[0].replay_others_wait_us is None
    assert straggler_lines(rows) == []
    assert "stragglers" not in format_report(result, collectives=rows)
    assert "stragglers" not in result_json(result, rows)

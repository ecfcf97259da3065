"""The per-collective table: matched across ranks, measured as the shortest
participant kernel, bandwidths by nccl-tests' convention."""

from __future__ import annotations

import pytest

from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType
from pt2chakra.simulation.collective_table import collective_rows
from pt2chakra.simulation.engine import Simulator

SIZE = 1 << 20


def _rank(rank: int, comm_dur: int, kind: CollectiveType) -> tuple[GlobalMetadata, list[ChakraNode]]:
    md = GlobalMetadata(version="0.0.4", attrs=[("rank", "int64_val", rank)])
    attrs = [("is_cpu_op", "bool_val", False), ("device", "int64_val", rank),
             ("stream", "int64_val", 20), ("comm_type", "int64_val", int(kind)),
             ("comm_size", "int64_val", SIZE), ("pg_name", "string_val", "0"),
             ("comm_seq", "int64_val", 0)]
    kernel = [("is_cpu_op", "bool_val", False), ("device", "int64_val", rank),
              ("stream", "int64_val", 7)]
    nodes = [ChakraNode(id=1, name="gemm", type=NodeType.COMP_NODE, start_time_micros=1000,
                        duration_micros=50 + 40 * rank, attrs=kernel),
             ChakraNode(id=2, name="nccl:all_gather", type=NodeType.COMM_COLL_NODE,
                        start_time_micros=1200, duration_micros=comm_dur, data_deps=[1],
                        attrs=attrs)]
    return md, nodes


@pytest.mark.parametrize("kind,factor", [(CollectiveType.ALL_GATHER, 0.5),
                                         (CollectiveType.ALL_REDUCE, 1.0)])
def test_one_row_per_collective_with_bandwidths(kind: CollectiveType, factor: float) -> None:
    sim = Simulator([_rank(0, 150, kind), _rank(1, 100, kind)], ["a.et", "b.et"])
    _result, schedule = sim.run()
    rows = collective_rows(sim, schedule)
    assert len(rows) == 1
    row = rows[0]
    assert row.what == kind.name.lower()
    assert row.ranks == [0, 1]
    assert row.size_bytes == SIZE
    assert row.measured_us == 100 and row.measured_max_us == 150
    # Both arrived at 1200 on the shared clock: rank 0's recorded end, 50 us
    # after rank 1's, is its own (no wait for a peer): the replay keeps it.
    assert row.simulated_us == pytest.approx(150)
    assert row.algbw_gbps == pytest.approx(SIZE / 100e-6 / 1e9)
    assert row.algbw_gbps is not None
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * factor)
    # The collective waits for rank 1's longer kernel: it starts at rank 1's gemm end.
    assert row.start_us == pytest.approx(max(schedule.end[i] for i in range(len(schedule.nodes))
                                             if schedule.nodes[i].name == "gemm"))


def test_no_communication_no_rows() -> None:
    md = GlobalMetadata(version="0.0.4")
    node = ChakraNode(id=1, name="op", type=NodeType.COMP_NODE, start_time_micros=1,
                      duration_micros=5, attrs=[("is_cpu_op", "bool_val", True)])
    sim = Simulator([(md, [node])])
    assert collective_rows(sim, sim.run()[1]) == []

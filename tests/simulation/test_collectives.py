"""The per-collective table: matched across ranks, measured as the shortest
participant kernel, bandwidths by nccl-tests' convention."""

from __future__ import annotations

import pytest
from builders import IS_CPU, MD, comm_attrs, gpu_attrs, metadata, node

from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType
from pt2chakra.simulation.collective_table import collective_rows
from pt2chakra.simulation.engine import Simulator

SIZE = 1 << 20


def _rank(rank: int, comm_dur: int, kind: CollectiveType) -> tuple[GlobalMetadata, list[ChakraNode]]:
    return metadata(rank), [
        node(1, name="gemm", start=1000, dur=50 + 40 * rank, attrs=gpu_attrs(7, rank)),
        node(2, [1], name="nccl:all_gather", node_type=NodeType.COMM_COLL_NODE, start=1200,
             dur=comm_dur, attrs=[*gpu_attrs(20, rank), *comm_attrs(kind, SIZE, "0", 0)])]


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
    sim = Simulator([(MD, [node(1, name="op", start=1, dur=5, attrs=[IS_CPU])])])
    assert collective_rows(sim, sim.run()[1]) == []

"""``simulate --consumer astra-sim``: ASTRA-sim's resource rules, checked on
tiny graphs whose ASTRA-sim schedule can be worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest
from builders import IS_CPU, IS_GPU, MD, comm_attrs, node, write_nodes
from helpers import assert_one_line_failure, run_cli

from pt2chakra.astra.collective_time import (
    AstraNetwork,
    AstraSystem,
    collective_finish_ns,
    collective_ns,
)
from pt2chakra.astra.consumer import ConsumerOptions, run_as_astra_sim
from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.errors import InputError

NET2 = AstraNetwork("Ring", 2, 50.0, 500.0)


def comp(i: int, us: int, deps: tuple[int, ...] = (), cpu: bool = False,
         ctrl: tuple[int, ...] = ()) -> ChakraNode:
    return node(i, deps, dur=us, ctrl=ctrl, attrs=[IS_CPU if cpu else IS_GPU])


def coll(i: int, size: int, deps: tuple[int, ...] = (), comm_type: int = 0) -> ChakraNode:
    return node(i, deps, name=f"c{i}", node_type=NodeType.COMM_COLL_NODE,
                attrs=[IS_GPU, *comm_attrs(comm_type, size, pg=None)])


def finish(ranks: list[list[ChakraNode]], **options: Any) -> list[int]:
    graphs = [(MD, nodes) for nodes in ranks]
    result = run_as_astra_sim(graphs, [f"t.{r}.et" for r in range(len(ranks))],
                              ConsumerOptions(network=NET2, **options))
    return [r.finished_ns for r in result.ranks]


def test_one_gpu_compute_node_at_a_time_but_cpu_in_parallel():
    # two independent GPU kernels of 10 us run one after the other (20 us);
    # a CPU node of 15 us runs beside them
    rank = [comp(1, 10), comp(2, 10), comp(3, 15, cpu=True)]
    assert finish([rank, [comp(1, 1)]])[0] == 20_000


def test_ctrl_deps_are_resolved_too_and_zero_lasts_one_ns():
    rank = [comp(1, 0), comp(2, 5, ctrl=(1,))]
    assert finish([rank, [comp(1, 1)]])[0] == 1 + 5_000


def test_collective_waits_for_its_last_member_then_the_network():
    size = 1 << 20
    ranks = [[comp(1, 10), coll(2, size, (1,))], [comp(1, 30), coll(2, size, (1,))]]
    net_ns = collective_ns(0, size, 2, NET2, AstraSystem())
    done = finish(ranks)
    # nobody finishes before the late member could have; the early one's
    # first message is already there, so the ring takes at most its full time
    assert all(30_000 < t <= 30_000 + net_ns for t in done)
    assert done == [collective_finish_ns(0, size, NET2, AstraSystem(), [0, 1],
                                         {0: 10_000, 1: 30_000})[r] for r in (0, 1)]


def test_collectives_hold_one_communication_resource():
    size = 1 << 16
    ranks = [[coll(1, size), coll(2, size)] for _ in range(2)]
    one = collective_ns(0, size, 2, NET2, AstraSystem())
    assert finish(ranks) == [2 * one, 2 * one]


def test_scales_move_compute_cpu_and_network_separately():
    size = 1 << 24
    ranks = [[comp(1, 100), comp(2, 50, cpu=True), coll(3, size, (1, 2))] for _ in range(2)]
    base = finish(ranks)[0]
    assert finish(ranks, compute_scale=0.5)[0] == base - 50_000
    assert finish(ranks, cpu_scale=4.0)[0] == base + 100_000  # CPU 200 us now longer
    slow = finish(ranks, bandwidth_scale=0.5)[0]
    assert slow > base + 0.9 * (base - 100_000)  # the network part about doubles


def test_what_it_cannot_run_is_refused_naming_the_node():
    md_node = node(1, name="## process_group:init ##", node_type=NodeType.METADATA_NODE)
    with pytest.raises(InputError, match="METADATA"):
        finish([[md_node], [comp(1, 1)]])
    with pytest.raises(InputError, match="collective type"):
        finish([[coll(1, 8, comm_type=1)], [coll(1, 8, comm_type=1)]])  # REDUCE
    with pytest.raises(InputError, match="never runs node 1"):
        finish([[coll(1, 64)], [comp(1, 1)]])  # rank 1 never joins
    with pytest.raises(InputError, match="not in the file"):
        finish([[comp(1, 1, deps=(9,))], [comp(1, 1)]])


@pytest.mark.slow
def test_cli_consumer_prints_per_rank_finish(tmp_path):
    for r in range(2):
        write_nodes(tmp_path / f"t.{r}.et", [comp(1, 10 + 10 * r)])
    proc = run_cli("simulate", "--consumer", "astra-sim", tmp_path / "t.0.et", tmp_path / "t.1.et")
    assert proc.returncode == 0, proc.stderr
    assert "Ring, 2 NPUs, 50 GB/s, 500 ns" in proc.stdout
    assert "step" in proc.stdout and "20" in proc.stdout.split("step")[-1]
    one = run_cli("simulate", "--consumer", "astra-sim", tmp_path / "t.0.et")
    assert_one_line_failure(one, "2 NPUs")
    bad = run_cli("simulate", "--consumer", "astra-sim", tmp_path / "t.0.et",
                  tmp_path / "t.1.et", "--comm-streams", "2")
    assert_one_line_failure(bad, "--comm-streams")


# -- sends and receives (issue 45): ASTRA-sim's analytical network ------------------------


def p2p(i: int, kind: NodeType, size: int, src: int, dst: int, tag: int,
        deps: tuple[int, ...] = ()) -> ChakraNode:
    return node(i, deps, name=f"p{i}", node_type=kind, attrs=[
        IS_GPU, ("comm_size", "int64_val", size), ("comm_src", "int32_val", src),
        ("comm_dst", "int32_val", dst), ("comm_tag", "int32_val", tag)])


SEND, RECV = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE


def test_a_send_waits_for_no_receive():
    """Rank 1 posts its receive 100 us late; the send ends on arrival."""
    from pt2chakra.astra.collective_time import send_ns

    size = 1 << 16
    net = send_ns(size, 0, 1, NET2)
    ranks = [[p2p(1, SEND, size, 0, 1, 0)],
             [comp(1, 100), p2p(2, RECV, size, 0, 1, 0, (1,))]]
    done = finish(ranks)
    assert done[0] == net
    assert done[1] == 100_000  # the bytes were there: the receive ends at once


def test_crossed_sends_of_1f1b_do_not_hang():
    """Each stage sends, then receives what the other sent: ASTRA-sim runs it."""
    size = 4096
    ranks = [[p2p(1, SEND, size, 0, 1, 1), p2p(2, RECV, size, 1, 0, 0, (1,))],
             [p2p(1, SEND, size, 1, 0, 0), p2p(2, RECV, size, 0, 1, 1, (1,))]]
    assert all(t > 0 for t in finish(ranks))


def test_replay_settings_defined_once() -> None:
    """Both replays' options take the shared settings from ReplaySettings
    (none redefined), checked by its one rule: a bad scale given to the
    ASTRA-sim API is refused as our own replay refuses it."""
    from pt2chakra.astra import AstraSimOptions, simulate_astra_sim
    from pt2chakra.simulation import ReplaySettings, SimulationOptions, simulate

    shared = set(ReplaySettings.__struct_fields__)
    for kind in (AstraSimOptions, SimulationOptions):
        assert issubclass(kind, ReplaySettings)
        assert not shared & set(kind.__dict__.get("__annotations__", {})), kind
    assert set(AstraSimOptions.__struct_fields__) - shared == {"topology", "congestion_aware"}
    refused = "--compute-scale: scales must be positive"
    with pytest.raises(InputError, match=refused):
        simulate_astra_sim(["x.0.et"], AstraSimOptions(compute_scale=[0.0]))
    with pytest.raises(InputError, match=refused):
        simulate(["x.0.et"], SimulationOptions(compute_scale=[0.0]))

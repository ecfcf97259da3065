"""Issue 45: a ``dist.barrier()`` inside the recorded step is written into the
ASTRA-sim job as a collective ASTRA-sim runs (a one-element all-reduce), so
the job is never one ASTRA-sim would refuse ("does not support collective
type 9")."""

from __future__ import annotations

from pathlib import Path

from builders import comm_node, comp_node, write_rank
from rel_setup import run_quietly

from pt2chakra.astra.collective_time import BARRIER_AS_BYTES, read_network_file
from pt2chakra.astra.consumer import ConsumerOptions, run_as_astra_sim
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, NodeType, attr_dict


def _barrier_rank(path: Path, rank: int) -> Path:
    barrier = comm_node(2, [1], size=0)
    barrier.attrs = [(k, t, int(CollectiveType.BARRIER) if k == "comm_type" else v)
                     for k, t, v in barrier.attrs]
    return write_rank(path, [comp_node(1), barrier, comp_node(3, [2])], rank=rank, world_size=2)


def test_a_barrier_is_written_as_a_one_element_all_reduce(tmp_path: Path) -> None:
    ranks = [_barrier_rank(tmp_path / f"r{r}.et", r) for r in (0, 1)]
    rc, _out, err = run_quietly("astra-sim", *ranks, "-o", tmp_path / "job" / "j", "-q")
    assert rc == 0, err
    graphs = [(md, list(nodes)) for md, nodes in
              (read_et(str(tmp_path / "job" / f"j.{r}.et")) for r in (0, 1))]
    comm = [n for _md, nodes in graphs for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    assert len(comm) == 2
    for n in comm:
        a = attr_dict(n.attrs)
        assert a["comm_type"] == int(CollectiveType.ALL_REDUCE)
        assert a["comm_size"] == BARRIER_AS_BYTES
    network = read_network_file(str(tmp_path / "job" / "network.yml"))
    result = run_as_astra_sim(graphs, [f"j.{r}.et" for r in (0, 1)],
                              ConsumerOptions(network=network))
    assert len(result.ranks) == 2  # run, not refused (type 9 raised InputError)

"""A rank given without its peers (simulation/lone.py): its collectives are
timed by the network what-ifs from their group size and bytes, and what
cannot be modelled is said in one note line; never a silent 1.000x (issue 28:
rank 0 of the gloo sample alone at --bandwidth-scale 0.25 gave 1.000x)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import comm_attrs, cpu, gpu_attrs, metadata, node, write_nodes
from helpers import run_cli

from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.simulation.network import collective_time

MB = 1 << 20
WAIT_US = 300  # the recorded kernel: a wait for peers, then the transfer


def _rank(tmp_path: Path, size: int, world: int | None = 4, name: str = "r0.et") -> Path:
    coll = node(2, [1], ["launch"], name="ncclDevKernel_AllReduce", node_type=NodeType.COMM_COLL_NODE,
                start=100, dur=WAIT_US + 200,
                attrs=[*gpu_attrs(), *comm_attrs(CollectiveType.ALL_REDUCE, size, "0", 0)])
    nodes = [cpu(1, 0, 100), coll, cpu(3, 100, 10, deps=[1]),
             node(4, [2, 3], ["gpu_sync", "thread_order"], name="cudaStreamSynchronize",
                  start=110, dur=500, attrs=[("is_cpu_op", "bool_val", True), ("tid", "int64_val", 1)])]
    return write_nodes(tmp_path / name, nodes, metadata(0, world))


def _speedups(path: Path, **opts: object) -> tuple[float, float, str]:
    base = simulate([path]).predicted_step_us
    result = simulate([path], SimulationOptions(**opts))  # type: ignore[arg-type]
    rows = [w for w in result.what_if if w.bandwidth_scale != 1.0]
    return base, (rows[0].predicted_step_us if rows else result.predicted_step_us), result.lone_note


def test_bandwidth_scale_changes_a_lone_rank_and_says_how(tmp_path: Path) -> None:
    base, slower, note = _speedups(_rank(tmp_path, 8 * MB), bandwidth_scale=[0.25, 1.0])
    assert slower > base * 1.5  # the whole recorded time scaled by 4
    assert note.startswith("note: a rank given without its peers: 1 collective")
    assert "scaled whole" in note


def test_a_network_model_times_the_transfer_and_keeps_the_wait(tmp_path: Path) -> None:
    path = _rank(tmp_path, 8 * MB)
    bw, lat = 100.0, 5.0
    model = collective_time(int(CollectiveType.ALL_REDUCE), 8 * MB, 4, bw, lat)
    slow = collective_time(int(CollectiveType.ALL_REDUCE), 8 * MB, 4, bw * 0.5, lat)
    result = simulate([path], SimulationOptions(bandwidth_gbps=bw, latency_us=lat,
                                                bandwidth_scale=[0.5, 1.0]))
    row = next(w for w in result.what_if if w.bandwidth_scale == 0.5)
    # the recorded time beyond the model's transfer is the wait, kept: the
    # scaled run is longer by exactly the transfer's growth
    assert row.predicted_step_us - result.predicted_step_us == pytest.approx(slow - model, abs=1.0)
    assert "recorded wait for peers" in result.lone_note


@pytest.mark.parametrize("size,world", [(0, 4), (8 * MB, None)])
def test_what_cannot_be_modelled_is_said_in_one_note(tmp_path: Path, size: int,
                                                    world: int | None) -> None:
    base, slower, note = _speedups(_rank(tmp_path, size, world), bandwidth_scale=[0.25, 1.0])
    assert slower == base
    assert note.count("note:") == 1 and "1 collective kept as recorded" in note


def test_the_cli_prints_the_note_beside_the_what_if(tmp_path: Path) -> None:
    proc = run_cli("simulate", _rank(tmp_path, 0), "--bandwidth-scale", "0.25", "1")
    assert proc.returncode == 0, proc.stderr
    assert "1.000x" in proc.stdout  # the knob cannot act here ...
    assert [line for line in proc.stdout.splitlines() if line.startswith("note: a rank given")]


def test_matched_collectives_need_no_note(tmp_path: Path) -> None:
    a = _rank(tmp_path, 8 * MB, 2, "a.et")
    b = tmp_path / "b.et"
    _md, nodes = read_et(a)
    write_et(b, metadata(1, 2), nodes)  # the same rank's work as rank 1 of the pair
    result = simulate([a, b], SimulationOptions(bandwidth_scale=[0.5, 1.0]))
    assert result.lone_note == ""

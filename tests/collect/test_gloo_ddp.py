"""The 2-rank gloo DDP sample (samples/gloo_ddp_cpu, recorded by ``pt2chakra
collect --ddp gloo``): every gloo collective is a communication node with a
size and a process group, the 2-rank replay is within 5 %, and a network
what-if moves it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import ROOT, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, NodeType, attr_dict
from pt2chakra.conversion.api import convert
from pt2chakra.names import is_backend_comm_op
from pt2chakra.rules.conventions import COMM_CHANNEL
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.tools.validate import validate

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch

SAMPLE = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"
MAX_ERROR_PCT = 5.0
RANKS = (0, 1)
RECORDING_TRIES = 3  # see test_accumulate_repeats_the_passes_not_the_communication


def _gloo_ops(rank: int) -> list[dict]:
    doc = json.loads(gzip.decompress(Path(f"{SAMPLE}.rank{rank}.host_et.json.gz").read_bytes()))
    return [n for n in doc["nodes"] if is_backend_comm_op(n["name"])]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("gloo")
    paths = []
    for r in RANKS:
        paths.append(str(out / f"gloo.{r}.et"))
        report = convert(f"{SAMPLE}.rank{r}.host_et.json.gz", f"{SAMPLE}.rank{r}.kineto.json.gz",
                         paths[-1])
        assert report.accounted() and report.link_method == "rf_id"
    return paths


@pytest.mark.parametrize("rank", RANKS)
def test_every_gloo_collective_is_a_comm_node_with_size_and_pg(converted, rank: int) -> None:
    _meta, nodes = read_et(converted[rank])
    comm = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    gloo = _gloo_ops(rank)
    assert len(gloo) >= 5 and len(comm) == len(gloo)
    assert {n.name for n in comm} == {n["name"] for n in gloo}
    for node in comm:
        a = attr_dict(node.attrs)
        assert a["comm_size"] > 0 and a["pg_name"] == "0" and not a["is_cpu_op"]
        assert isinstance(a[COMM_CHANNEL], int)  # the gloo worker thread
    sizes = {n.name: attr_dict(n.attrs)["comm_size"] for n in comm}
    # all-gather of one float from each of 2 ranks moves 2 floats
    assert sizes["gloo:all_gather"] == 2 * 4
    assert {attr_dict(n.attrs)["comm_type"] for n in comm} >= {
        CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER, CollectiveType.BROADCAST}


def test_sound_with_no_collective_as_compute(converted) -> None:
    report = validate(converted)
    assert report.sound and not [p for p in report.warnings if p.check == "collective-as-compute"]


def test_two_rank_replay_within_5_percent(converted) -> None:
    result = simulate(converted)
    assert result.error_pct is not None and abs(result.error_pct) < MAX_ERROR_PCT


def test_half_the_bandwidth_moves_the_prediction(converted) -> None:
    base = simulate(converted).predicted_step_us
    rows = simulate(converted, SimulationOptions(bandwidth_scale=(0.5,))).what_if
    assert rows and rows[0].predicted_step_us > base * 1.02


def test_cli_bandwidth_what_if(converted) -> None:
    proc = run_cli("simulate", *converted, "--bandwidth-scale", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert "0.5x" in proc.stdout


def test_collect_records_a_two_rank_gloo_pair(tmp_path) -> None:
    pytest.importorskip("torch")
    from pt2chakra.collect.distributed import DdpConfig, collect_gloo_ddp

    pairs = collect_gloo_ddp(tmp_path, DdpConfig(hidden=16, layers=1, batch=2, warmup=1),
                             name="tiny")
    assert len(pairs) == 2
    for rank, (host, kineto) in enumerate(pairs):
        assert host.name == f"tiny.rank{rank}.host_et.json.gz" and kineto.exists()
        out = tmp_path / f"tiny.{rank}.et"
        report = convert(host, kineto, out)
        assert report.nodes_by_type.get("COMM_COLL_NODE", 0) >= 3
    # the real step beside the traces: each timed step the slower rank's
    import json

    from pt2chakra.simulation.profiler_overhead import META_NAME, META_STEP_FIELD

    meta = json.loads((tmp_path / META_NAME).read_text())
    ranks = [r["timed_s"] for r in meta["ranks"]]
    assert len(ranks) == 2 and len(meta["step_s"]) == DdpConfig.timed
    assert meta["step_s"] == [max(a, b) for a, b in zip(*ranks)]
    assert meta[META_STEP_FIELD] > 0


def test_accumulate_repeats_the_passes_not_the_communication(tmp_path) -> None:
    """``--accumulate 2``: two forward/backward passes per step (the compute
    what-if's known factor), the gradients all-reduced once."""
    pytest.importorskip("torch")
    from pt2chakra.collect.distributed import DdpConfig, collect_gloo_ddp

    def passes_and_all_reduces(k: int) -> tuple[int, int]:
        # Twice in CI (2 loaded cores; 1 in 13 tiny recordings here beside
        # two busy loops) a recording converted with no gloo:all_reduce node:
        # the worker thread's op closed after the observer stopped
        # (record.BACKEND_DRAIN_S now waits for it; the two-rank test above
        # checks that without retrying). This test is about --accumulate, so
        # such a recording is taken again, at most RECORDING_TRIES times.
        for attempt in range(RECORDING_TRIES):
            cfg = DdpConfig(hidden=16, layers=1, batch=2, warmup=1, accumulate=k)
            out = tmp_path / f"{k}_{attempt}"
            host, kineto = collect_gloo_ddp(out, cfg, name="acc")[0]
            convert(host, kineto, out / "acc.et")
            names = [n.name for n in read_et(out / "acc.et")[1]]
            found = (names.count("aten::mse_loss"), names.count("gloo:all_reduce"))
            if found[1]:
                break
        return found

    counts = [passes_and_all_reduces(k) for k in (1, 2)]
    assert counts[0] == (1, counts[0][1]) and counts[0][1] >= 1
    assert counts[1] == (2, counts[0][1])


def test_ddp_config_refuses_one_rank() -> None:
    from pt2chakra.collect.distributed import DdpConfig

    with pytest.raises(ValueError):
        DdpConfig(world_size=1)


def test_collect_one_rank_refuses_a_rank_outside_the_world(tmp_path) -> None:
    proc = run_cli("collect", "--ddp", "gloo", "--world-size", "2", "--rank", "2",
                   "--master-port", "29999", "--out-dir", tmp_path / "o")
    assert proc.returncode == 2 and "--rank" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_collect_one_rank_needs_the_master_port(tmp_path) -> None:
    proc = run_cli("collect", "--ddp", "gloo", "--rank", "0", "--out-dir", tmp_path / "o")
    assert proc.returncode == 2 and "--master-port" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_fsdp2_records_per_block_all_gathers_and_gradient_reductions(tmp_path) -> None:
    """FSDP2 over gloo: each block's parameters all-gathered in forward and
    again in backward, its gradients reduced (``_reduce_scatter_base_``,
    which gloo runs as an all-reduce), on two comm lanes."""
    pytest.importorskip("torch")
    layers = 3
    proc = run_cli("collect", "--ddp", "gloo", "--parallel", "fsdp2", "--layers", layers,
                   "--hidden", 32, "--out-dir", tmp_path, "--name", "f", "-q")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(gzip.decompress((tmp_path / "f.rank0.host_et.json.gz").read_bytes()))
    names = [n["name"] for n in doc["nodes"]]
    assert names.count("c10d::_allgather_base_") >= 2 * layers
    assert names.count("c10d::_reduce_scatter_base_") >= layers
    et = tmp_path / "f.0.et"
    convert(tmp_path / "f.rank0.host_et.json.gz", tmp_path / "f.rank0.kineto.json.gz", et)
    _meta, nodes = read_et(str(et))
    lanes = {attr_dict(n.attrs)[COMM_CHANNEL] for n in nodes if n.type == NodeType.COMM_COLL_NODE}
    assert len(lanes) == 2

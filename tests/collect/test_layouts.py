"""Parallel layouts of the small transformer (``collect --tp/--pp/--dp``):
the config's refusals and the CLI's one-line errors (fast), then tiny
recordings of each layout over gloo on localhost (slow): TP's all-reduces
in forward on every rank, PP's sends matched by the next stage's receives,
the layout and the real step in meta.json, and ``convert --ranks`` on them."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from pt2chakra.cli import main
from pt2chakra.collect.layouts import GPIPE, ONE_F_ONE_B, LayoutConfig
from pt2chakra.collect.link_cost import WINDOW_S, WINDOWS

# A layout small enough to record in seconds: 2 blocks of width 64.
TINY = {"width": 64, "blocks": 2, "seq": 8, "batch": 4, "warmup": 1, "timed": 2}
TP_ALL_REDUCE = ("_c10d_functional::all_reduce", "c10d::allreduce_")
SEND, RECV = "c10d::send", "c10d::recv_"
FORWARD_END = "aten::mse_loss"  # the loss: every op before it is forward


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"tp": 2, "pp": 2}, "tensor and pipeline parallel together"),
    ({"dp": 2}, "needs tp or pp above 1"),
    ({"tp": 1}, "needs tp or pp above 1"),
    ({"pp": 3}, "4 blocks do not split into 3 pipeline stages"),
    ({"pp": 4, "schedule": ONE_F_ONE_B, "micro_batches": 2}, "at least as many micro-batches"),
    ({"pp": 2, "micro_batches": 3}, "does not split into 3 micro-batches"),
    ({"pp": 2, "schedule": "zb"}, "schedule must be one of"),
    ({"tp": 3}, "do not split over 3 tensor-parallel ranks"),
    ({"tp": 2, "width": 0}, "positive"),
    ({"tp": 2, "timed": -1}, "positive"),
])
def test_config_refuses_what_cannot_be_recorded(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        LayoutConfig(**kwargs)


def test_config_names_and_meta() -> None:
    cfg = LayoutConfig(pp=2, dp=2, schedule=ONE_F_ONE_B)
    assert (cfg.world_size, cfg.kind, cfg.label) == (4, "pp-dp", "pp2xdp2-1f1b")
    assert cfg.layout() == {"kind": "pp-dp", "tp": 1, "pp": 2, "dp": 2, "schedule": ONE_F_ONE_B,
                            "micro_batches": 4}
    tp = LayoutConfig(tp=4)
    assert (tp.world_size, tp.kind, tp.label) == (4, "tp", "tp4")
    # no pipeline: no schedule, no micro-batches (the config's defaults are moot)
    assert tp.layout()["schedule"] is None and tp.layout()["micro_batches"] is None
    assert LayoutConfig(tp=2, dp=2).label == "tp2xdp2"
    assert tp.step_names("j", 3) == ["j.rank3"]
    assert LayoutConfig(tp=2, steps=2).step_names("j", 1) == ["j.step0.rank1", "j.step1.rank1"]
    meta = cfg.meta()
    assert meta["parallel"] == "pp-dp" and meta["layout"] == cfg.layout()


@pytest.mark.parametrize(("args", "needle"), [
    (["--tp", "2", "--world-size", "3"], "--world-size 3 is not tp x pp x dp = 2"),
    (["--tp", "2", "--schedule", "1f1b"], "--schedule and --micro-batches need --pp above 1"),
    (["--pp", "2", "--micro-batches", "1", "--schedule", "1f1b"],
     "1F1B needs at least as many micro-batches as stages (2)"),
    (["--pp", "2", "--layers", "3"], "3 blocks do not split into 2 pipeline stages"),
    (["--tp", "2", "--pp", "2"], "tensor and pipeline parallel together"),
    (["--dp", "4"], "data parallel alone: collect --ddp"),
    (["--tp", "2", "--parallel", "ddp"], "a layout's data parallel is FSDP2"),
    (["--tp", "2", "--ddp", "gloo"], "--ddp is for the data-parallel MLP"),
    (["--pp", "2", "--accumulate", "2"], "--accumulate is for the data-parallel MLP"),
    (["--tp", "2", "--rank", "2", "--master-port", "29999"], "--rank: must be in 0..1"),
    (["--tp", "2", "--rank", "0"], "needs --master-port"),
])
def test_cli_refuses_in_one_line_before_writing(tmp_path: Path, capsys, args: list[str],
                                                 needle: str) -> None:
    out = tmp_path / "o"
    assert main(["collect", *args, "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not out.exists()


def test_ddp_defaults_unchanged_by_the_layout_options() -> None:
    """``--hidden``, ``--world-size``... now default to None so that each
    model has its own default: ``collect --ddp`` still gets DdpConfig's."""
    import argparse

    from pt2chakra.cli.collect import _ddp_config
    from pt2chakra.collect.distributed import DdpConfig

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    from pt2chakra.cli import collect as cli_collect

    cli_collect.register(sub, argparse.ArgumentParser(add_help=False))
    args = parser.parse_args(["collect", "--ddp", "gloo", "--out-dir", "x"])
    assert _ddp_config(args) == DdpConfig()


# --------------------------------------------------------------------------
# Recordings (slow: one process per rank)
# --------------------------------------------------------------------------


def _record(out: Path, name: str, cli_args: list[str]) -> list[list[str]]:
    """``collect`` a tiny layout; every rank's host ET op names, rank order."""
    pytest.importorskip("torch")
    sizes = ["--hidden", TINY["width"], "--seq-len", TINY["seq"], "--batch", TINY["batch"],
             "--layers", TINY["blocks"], "--steps-warmup", TINY["warmup"],
             "--timed-steps", TINY["timed"]]
    rc = main(["collect", *cli_args, *map(str, sizes), "--out-dir", str(out), "--name", name,
               "-q"])
    assert rc == 0
    meta = json.loads((out / "meta.json").read_text())
    return [[n["name"] for n in json.loads(gzip.decompress(
        (out / f"{name}.rank{r}.host_et.json.gz").read_bytes()))["nodes"]]
        for r in range(meta["world_size"])]


def _meta_holds(out: Path, layout: dict[str, object]) -> None:
    """meta.json: the layout, and each timed step the slowest rank's."""
    meta = json.loads((out / "meta.json").read_text())
    assert {k: meta["layout"][k] for k in layout} == layout
    per_rank = [r["timed_s"] for r in meta["ranks"]]
    assert len(per_rank) == meta["world_size"] and len(meta["step_s"]) == TINY["timed"]
    assert meta["step_s"] == [max(col) for col in zip(*per_rank)]
    assert meta["step_median_s"] > 0
    # the host's CPU per byte of a rank's link (link_cost.py): the probe ran
    # long enough to measure it, and where it was not lost in others' load, it is
    probe = meta["link_cpu_probe"]
    assert probe["rounds"] >= WINDOWS and probe["seconds"] >= WINDOWS * WINDOW_S
    assert probe["link_bytes"] > 0 and len(probe["window_ns_per_byte"]) <= WINDOWS
    if "host_cpu_ns_per_link_byte" in meta:
        assert 0 < meta["host_cpu_ns_per_link_byte"] < 1e6
    # the ranks' own CPU is their processes' time: always readable, never nothing
    assert len(probe["window_rank_ns_per_byte"]) == WINDOWS
    assert 0 < meta["rank_cpu_ns_per_link_byte"] < 1e6


def _converts(out: Path, name: str, ranks: int) -> None:
    """``convert --ranks`` writes every rank's .et, each with its collectives."""
    from pt2chakra.chakra.io import read_et
    from pt2chakra.chakra.records import NodeType

    rc = main(["convert", "--ranks", f"0-{ranks - 1}", "-q",
               "--host-trace", str(out / f"{name}.rank{{rank}}.host_et.json.gz"),
               "--device-trace", str(out / f"{name}.rank{{rank}}.kineto.json.gz"),
               "-o", str(out / f"{name}.{{rank}}.et")])
    assert rc == 0
    for r in range(ranks):
        _meta, nodes = read_et(str(out / f"{name}.{r}.et"))
        assert any(n.type != NodeType.COMP_NODE for n in nodes)


def _forward_all_reduces(names: list[str]) -> int:
    forward = names[:names.index(FORWARD_END)]
    return sum(n in TP_ALL_REDUCE for n in forward)


@pytest.mark.slow
def test_tensor_parallel_all_reduces_in_forward_on_every_rank(tmp_path: Path) -> None:
    ranks = _record(tmp_path, "tp", ["--tp", "2"])
    for names in ranks:  # one all-reduce per block's RowwiseParallel output
        assert _forward_all_reduces(names) >= TINY["blocks"]
    _meta_holds(tmp_path, {"kind": "tp", "tp": 2, "pp": 1, "dp": 1, "schedule": None})
    _converts(tmp_path, "tp", 2)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [GPIPE, ONE_F_ONE_B])
def test_pipeline_sends_meet_receives(tmp_path: Path, schedule: str) -> None:
    ranks = _record(tmp_path, "pp", ["--pp", "2", "--schedule", schedule,
                                     "--micro-batches", "2"])
    counts = [Counter(names) for names in ranks]
    assert counts[0][SEND] == counts[1][RECV] == 2  # activations, one per micro-batch
    assert counts[1][SEND] == counts[0][RECV] == 2  # their gradients back
    assert FORWARD_END in ranks[1] and FORWARD_END not in ranks[0]  # the loss on the last stage
    _meta_holds(tmp_path, {"kind": "pp", "pp": 2, "schedule": schedule, "micro_batches": 2})
    _converts(tmp_path, "pp", 2)


@pytest.mark.slow
def test_tensor_parallel_with_fsdp2_over_data_parallel(tmp_path: Path) -> None:
    """TP x DP on a (dp, tp) mesh: every rank all-reduces within its tp group
    in forward and all-gathers its FSDP2 shards across the dp group."""
    ranks = _record(tmp_path, "tpdp", ["--tp", "2", "--dp", "2"])
    for names in ranks:
        assert _forward_all_reduces(names) >= TINY["blocks"]
        assert names.count("c10d::_allgather_base_") >= TINY["blocks"]
    _meta_holds(tmp_path, {"kind": "tp-dp", "tp": 2, "dp": 2})
    _converts(tmp_path, "tpdp", 4)


@pytest.mark.slow
def test_pipeline_with_fsdp2_over_data_parallel(tmp_path: Path) -> None:
    """PP x DP on a (pp, dp) mesh: ranks 0-1 are stage 0, 2-3 stage 1; each
    stage-0 rank's sends meet its stage-1 peer's receives."""
    ranks = _record(tmp_path, "ppdp", ["--pp", "2", "--dp", "2", "--micro-batches", "2"])
    counts = [Counter(names) for names in ranks]
    for replica in range(2):
        first, last = counts[replica], counts[2 + replica]
        assert first[SEND] == last[RECV] == 2 and last[SEND] == first[RECV] == 2
    assert all(c["c10d::_allgather_base_"] >= 1 for c in counts)
    _meta_holds(tmp_path, {"kind": "pp-dp", "pp": 2, "dp": 2, "schedule": GPIPE})
    _converts(tmp_path, "ppdp", 4)

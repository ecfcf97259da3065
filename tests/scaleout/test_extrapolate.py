"""extrapolate: N -> N is the input apart from the documented metadata,
N -> M -> N comes back, clones are the representative's work, and what the
trace cannot tell is refused in one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_one_line_failure, run_cli

from pt2chakra.chakra.decode import iter_messages
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.rules.conventions import SCALEOUT_ALWAYS_ATTRS, SCALEOUT_SOURCE_RANK_ATTR
from pt2chakra.scaleout.api import extrapolate
from pt2chakra.scaleout.plan import DDP, FSDP1, FSDP2, plan


def _same_apart_from_metadata(a: Path, b: Path) -> None:
    """Node messages byte-identical; metadata equal once the scale-out
    attributes are left out."""
    ma, mb = list(iter_messages(a)), list(iter_messages(b))
    assert ma[1:] == mb[1:]
    meta_a, meta_b = read_et(a)[0], read_et(b)[0]
    assert [x for x in meta_a.attrs if x[0] not in SCALEOUT_ALWAYS_ATTRS] == meta_b.attrs
    assert {x[0] for x in meta_a.attrs} - {x[0] for x in meta_b.attrs} == set(SCALEOUT_ALWAYS_ATTRS)


def test_n_to_n_is_the_input(gloo_ranks: list[Path], tmp_path: Path) -> None:
    extrapolate(gloo_ranks, 2, tmp_path / "same")
    for rank, src in enumerate(gloo_ranks):
        _same_apart_from_metadata(tmp_path / f"same.{rank}.et", src)


@pytest.mark.parametrize("middle", [1, 3, 8])
def test_round_trip(gloo_ranks: list[Path], tmp_path: Path, middle: int) -> None:
    extrapolate(gloo_ranks, middle, tmp_path / "mid")
    mids = sorted(tmp_path.glob("mid.*.et"))
    assert len(mids) == middle
    if middle < 2:
        return  # rank 1's work is gone at one rank: nothing to come back to
    extrapolate(mids, 2, tmp_path / "back")
    for rank, src in enumerate(gloo_ranks):
        _same_apart_from_metadata(tmp_path / f"back.{rank}.et", src)


def test_clones_and_groups(gloo_ranks: list[Path], tmp_path: Path) -> None:
    summary = extrapolate(gloo_ranks, 5, tmp_path / "x")
    assert summary.representative == 1 and summary.kept_ranks == [0, 1]
    rep = list(iter_messages(gloo_ranks[1]))[1:]
    own = list(iter_messages(gloo_ranks[0]))
    for rank in range(5):
        path = tmp_path / f"x.{rank}.et"
        md = attr_dict(read_et(path)[0].attrs)
        assert md["rank"] == rank and md["world_size"] == 5
        assert '"group_size":5' in md["process_groups"]
        assert md[SCALEOUT_SOURCE_RANK_ATTR] == (0 if rank == 0 else 1)
        if rank >= 2:  # a clone: the representative's nodes, sizes rescaled alike
            assert list(iter_messages(path))[1:] == list(iter_messages(tmp_path / "x.1.et"))[1:]
    assert list(iter_messages(tmp_path / "x.0.et"))[1:] != own[1:]  # the gather grew
    sizes = {n.name: attr_dict(n.attrs)["comm_size"] for n in read_et(tmp_path / "x.3.et")[1]
             if n.name.startswith("gloo:")}
    recorded = {n.name: attr_dict(n.attrs)["comm_size"] for n in read_et(gloo_ranks[1])[1]
                if n.name.startswith("gloo:")}
    assert sizes["gloo:all_gather"] == recorded["gloo:all_gather"] // 2 * 5  # one piece per rank
    assert sizes["gloo:all_reduce"] == recorded["gloo:all_reduce"]  # the bucket is kept
    assert sizes["gloo:broadcast"] == recorded["gloo:broadcast"]
    assert len(rep) == len(list(iter_messages(tmp_path / "x.4.et"))[1:])


@pytest.mark.parametrize(("kind", "expected"), [("ddp", DDP), ("fsdp1", FSDP1), ("fsdp2", FSDP2),
                                                 ("orphan", DDP)])
def test_job_kinds(built_job, kind: str, expected: str) -> None:
    p = plan(built_job(kind, 2), 4)
    assert p.job_kind == expected
    assert p.sources == [0, 1, 1, 1]


def test_reduce_scatter_found_by_its_dependency(built_job) -> None:
    """FSDP2 parents gloo's all-reduce under its annotation, on a copy of
    the block: the c10d call it depends on names it."""
    rules = plan(built_job("fsdp2", 2), 4).rules
    assert rules == {"all_gather (_allgather_base_): block fixed, shard = block / M": 1,
                     "all_reduce (_reduce_scatter_base_): block fixed, shard = block / M": 1}


def test_orphan_gather_found_by_its_tensor(built_job, tmp_path: Path) -> None:
    """A backend gather with no c10d parent is still the list all-gather
    (its input tensor is the call's): one piece per rank, grows with M."""
    extrapolate(built_job("orphan", 2), 6, tmp_path / "o")
    gather = next(n for n in read_et(tmp_path / "o.3.et")[1] if n.name == "gloo:all_gather")
    assert attr_dict(gather.attrs)["comm_size"] == 4 * 6


def test_sharded_sizes_keep_the_block(built_job, tmp_path: Path) -> None:
    extrapolate(built_job("fsdp2", 2), 8, tmp_path / "f")
    sizes = [attr_dict(n.attrs)["comm_size"] for n in read_et(tmp_path / "f.5.et")[1]
             if n.name.startswith("gloo:")]
    assert sizes == [4096, 4096]


REFUSALS = [
    ("pp", 2, ["--world-size", "4"], "pipeline parallel"),
    ("a2a", 2, ["--world-size", "4"], "all-to-all"),
    ("tp", 4, ["--world-size", "8"], "not a data-parallel replica group"),
    ("hybrid", 4, ["--world-size", "8"], "hybrid sharding"),
    ("ddp", 2, ["--world-size", "4", "--scaling", "strong"], "fixed global batch"),
]


@pytest.mark.parametrize(("kind", "world", "extra", "needle"), REFUSALS)
def test_refusals(built_job, tmp_path: Path, kind: str, world: int, extra: list[str],
                  needle: str) -> None:
    files = built_job(kind, world)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("extrapolate", *files, *extra, "-o", out / "job")
    assert proc.returncode == 2
    assert_one_line_failure(proc, needle)
    assert list(out.iterdir()) == []


def test_refuses_a_missing_rank(built_job, tmp_path: Path) -> None:
    files = built_job("ddp", 3)
    proc = run_cli("extrapolate", files[0], files[2], "--world-size", "4", "-o", tmp_path / "j")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "give every recorded rank")
    assert not list(tmp_path.glob("j.*"))


def test_cli_summary(gloo_ranks: list[Path], tmp_path: Path) -> None:
    proc = run_cli("extrapolate", *gloo_ranks, "--world-size", "16", "-o", tmp_path / "j")
    assert proc.returncode == 0, proc.stderr
    assert "clones of recorded rank 1" in proc.stdout and "unvalidated:" in proc.stdout
    assert len(list(tmp_path.glob("j.*.et"))) == 16


@pytest.mark.slow
def test_1024_ranks_in_seconds(gloo_ranks: list[Path], tmp_path: Path) -> None:
    import time

    t0 = time.perf_counter()
    extrapolate(gloo_ranks, 1024, tmp_path / "k")
    assert time.perf_counter() - t0 < 30  # seconds on a loaded 2-core CI machine, not minutes
    assert len(list(tmp_path.glob("k.*.et"))) == 1024


def test_a_replay_of_scaled_files_says_nothing_was_measured_at_their_size(
        gloo_ranks: list[Path], tmp_path: Path) -> None:
    """The step beside a prediction of scaled files is the recording's at N
    ranks: the reports call it recorded, not measured, and say so."""
    extrapolate(gloo_ranks, 4, tmp_path / "x")
    files = [str(tmp_path / f"x.{r}.et") for r in range(4)]
    text = run_cli("simulate", *files).stdout
    assert "recorded us" in text and "vs recorded" in text and "measured us" not in text
    assert "a prediction at 4 ranks from a recording of 2" in text
    assert json.loads(run_cli("simulate", *files, "--json").stdout)["scaled"] == \
        {"recorded_world_size": 2, "world_size": 4}
    assert "scaled" not in json.loads(run_cli("simulate", *map(str, gloo_ranks), "--json").stdout)
    proc = run_cli("report", *files, "-o", str(tmp_path / "r.html"), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "Summary: predicted vs recorded step" in (tmp_path / "r.html").read_text()

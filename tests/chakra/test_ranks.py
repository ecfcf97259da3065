"""Which rank a file is, by one rule (metadata, then a ``<prefix>.<rank>.et``
name, never the order given), and which sets of files cannot be one job:
``chakra/ranks.py``, the front door of every command that reads several ranks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import coll, cpu, metadata, write_nodes, write_rank
from helpers import assert_one_line_failure, run_cli

from pt2chakra.astra.export import convert_files
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.ranks import (
    BY_METADATA,
    BY_NAME,
    BY_ORDER,
    open_rank_set,
    rank_in_name,
    survey,
)
from pt2chakra.chakra.records import GlobalMetadata
from pt2chakra.diff.load import load_run
from pt2chakra.errors import InputError
from pt2chakra.simulation import simulate
from pt2chakra.tools.validate import validate

STEP = (0, 200)


def _rank_nodes(rank: int) -> list:
    """A host op then a collective; the op's length differs per rank, so that
    no two ranks' files are the same bytes."""
    return [cpu(1, 0, 10 + rank), coll(2, seq=0, deps=[1], start=20 + rank)]


def _unranked(path: Path, rank: int) -> Path:
    """Rank ``rank``'s file with no rank in its metadata (a recording: it has
    a measured step), so that only its name can say which rank it is."""
    return write_nodes(path, _rank_nodes(rank), metadata(step=STEP))


@pytest.mark.parametrize(("name", "rank"), [
    ("x.10.et", 10), ("x.2.et.gz", 2), ("a.b.3.et", 3), ("x10.et", None), ("10.et", None),
    ("x.et", None), ("x.1.json", None), ("x.-1.et", None)])
def test_rank_in_name(name: str, rank: int | None) -> None:
    assert rank_in_name(f"/d/{name}") == rank


def test_ten_before_two_is_rank_order_not_argument_order(tmp_path: Path) -> None:
    """A shell glob over eleven ranks lists x.10.et before x.2.et: every
    command calls them ranks 10 and 2 and puts rank 2 first."""
    ten, two = _unranked(tmp_path / "x.10.et", 10), _unranked(tmp_path / "x.2.et", 2)
    ranks = open_rank_set([ten, two])
    assert ranks.paths == [str(two), str(ten)] and ranks.ranks == [2, 10]
    assert {f.how for f in ranks.files} == {BY_NAME}
    result = simulate([ten, two])
    assert [(r.rank, r.source) for r in result.ranks] == [(2, str(two)), (10, str(ten))]
    report = validate([ten, two])
    assert report.sound and report.files == [str(two), str(ten)]
    assert [(r.rank, r.source) for r in load_run("A", [ten, two]).ranks] == \
        [(2, str(two)), (10, str(ten))]
    written = [p for p in convert_files([ten, two], tmp_path / "job") if p.endswith(".et")]
    assert [Path(p).name for p in written] == ["job.2.et", "job.10.et"]
    first = [next(read_et(p)[1]).duration_micros for p in written]
    assert first[0] < first[1]  # rank 2's op is the shorter: each file went to its rank
    out = tmp_path / "t.json"
    proc = run_cli("timeline", ten, two, "-o", out)
    assert proc.returncode == 0, proc.stderr
    names = [e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"]
             if e.get("name") == "process_name"]
    assert names == ["rank 2 (x.2.et)", "rank 10 (x.10.et)"]


def test_the_metadata_wins_over_the_name(tmp_path: Path) -> None:
    path = write_rank(tmp_path / "x.0.et", _rank_nodes(3), rank=3)
    (only,) = open_rank_set([path]).files
    assert (only.rank, only.how) == (3, BY_METADATA)


def test_one_file_without_a_rank_is_rank_0(tmp_path: Path) -> None:
    (only,) = open_rank_set([_unranked(tmp_path / "step.et", 1)]).files
    assert only.rank == 0


def test_files_without_a_rank_are_refused_and_forced_in_order(tmp_path: Path) -> None:
    a, b = _unranked(tmp_path / "h100.et", 0), _unranked(tmp_path / "mi300x.et", 1)
    with pytest.raises(InputError, match="no rank") as caught:
        open_rank_set([a, b])
    assert caught.value.path == str(a) and "--force" in str(caught.value)
    forced = open_rank_set([b, a], force=True)
    assert forced.paths == [str(b), str(a)] and {f.how for f in forced.files} == {BY_ORDER}


def test_a_rank_twice_is_refused(tmp_path: Path) -> None:
    a = write_rank(tmp_path / "a.et", _rank_nodes(0), rank=1)
    b = write_rank(tmp_path / "b.et", _rank_nodes(1), rank=1)
    with pytest.raises(InputError, match=r"rank 1 again \(also .*a\.et\)"):
        open_rank_set([a, b])
    assert open_rank_set([a, b], force=True).ranks == [0, 1]  # the repeat takes a free rank


def test_one_file_twice_is_refused_even_with_force(tmp_path: Path) -> None:
    a = write_rank(tmp_path / "a.0.et", _rank_nodes(0), rank=0)
    with pytest.raises(InputError, match="given twice"):
        open_rank_set([a, a], force=True)


def test_a_copy_under_another_name_is_refused(tmp_path: Path) -> None:
    a = _unranked(tmp_path / "x.0.et", 0)
    b = tmp_path / "x.1.et"
    shutil.copy(a, b)
    with pytest.raises(InputError, match="same content as .*x.0.et"):
        open_rank_set([a, b])
    assert open_rank_set([a, b], force=True).ranks == [0, 1]


def test_synthetic_ranks_may_be_the_same_bytes(tmp_path: Path) -> None:
    """ASTRA-sim's microbenchmarks are one workload on every NPU: no
    recording (no pid, no measured step), so equal bytes are no copy."""
    nodes = [coll(1, seq=0)]
    paths = [write_nodes(tmp_path / f"w.{r}.et", nodes, GlobalMetadata(version="0.0.4"))
             for r in range(2)]
    assert open_rank_set(paths).ranks == [0, 1]


def test_world_sizes_that_differ_or_are_exceeded(tmp_path: Path) -> None:
    a = write_rank(tmp_path / "a.et", _rank_nodes(0), rank=0, world_size=2)
    b = write_rank(tmp_path / "b.et", _rank_nodes(1), rank=1, world_size=4)
    with pytest.raises(InputError, match="world_size 4, but 2 in"):
        open_rank_set([a, b])
    alone = write_rank(tmp_path / "c.et", _rank_nodes(5), rank=5, world_size=2)
    issues = survey([alone]).issues
    assert [i.problem for i in issues] == ["rank 5 of a world_size 2 (ranks 0-1)"]
    report = validate([alone])
    assert not report.sound and report.errors[0].check == "rank-set"


def test_single_process_recordings_are_no_job(tmp_path: Path) -> None:
    """Two conversions of one-process recordings (no rank, world size or
    group of several ranks) are no 2-rank job, whatever their names say."""
    alone = GlobalMetadata(version="0.0.4", attrs=[
        ("generator", "string_val", "pt2chakra"), ("link_method", "string_val", "rf_id"),
        ("step_start_micros", "int64_val", 0), ("step_end_micros", "int64_val", 200)])
    a = tmp_path / "x.0.et"
    b = tmp_path / "x.1.et"
    write_et(a, alone, _rank_nodes(0))
    write_et(b, alone, _rank_nodes(1))
    with pytest.raises(InputError, match="single process"):
        open_rank_set([a, b])
    assert open_rank_set([a]).ranks == [0]  # alone it is fine


@pytest.mark.parametrize("command", [["simulate"], ["validate"], ["timeline", "-o", "T.json"],
                                     ["diff", "vs", "OTHER"], ["astra-sim", "-o", "J/job"]])
def test_every_command_refuses_a_rank_twice_in_one_line(tmp_path: Path, command: list[str]) -> None:
    a = write_rank(tmp_path / "a.et", _rank_nodes(0), rank=1)
    b = write_rank(tmp_path / "b.et", _rank_nodes(1), rank=1)
    args = [str(tmp_path / c) if c in ("T.json", "J/job") else c for c in command]
    if command[0] == "diff":
        args = ["diff", str(a), str(b), "vs", str(a), str(b)]
    else:
        args[1:1] = [str(a), str(b)]
    proc = run_cli(*args)
    if command == ["validate"]:  # validate reports it as an error of the set
        assert proc.returncode == 1 and "[rank-set] rank 1 again" in proc.stdout
        return
    assert proc.returncode == 2
    assert_one_line_failure(proc, str(b), "rank 1 again", "--force")

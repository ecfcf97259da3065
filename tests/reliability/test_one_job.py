"""Issue 44, item 3: a command that takes a set of rank files checks it is
one sound job before it writes anything, through the rank-set front door
(``chakra/ranks.py``: malformed process groups, a group two files declare
differently) and the checks ``simulate`` makes (``rules.checks``:
collectives that differ across the ranks, as two recordings' do).
``extrapolate``, ``simulate --world-size`` and ``astra-sim --world-size``
refuse what ``validate`` and ``simulate`` refuse, in one line, leaving
nothing behind; ``--force`` proceeds; a sound job is not refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import comm_node, comp_node, write_nodes
from helpers import ROOT, convert_gloo_pair
from rel_setup import run_quietly, snapshot

from pt2chakra.chakra.ranks import survey
from pt2chakra.chakra.records import GlobalMetadata

PAIRS = ROOT / "samples" / "gloo_ddp_pairs"


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Two recordings of 2-rank gloo DDP jobs: the bundled pair, and the one
    recorded at 1 Gbit/s (another model size: other collective sizes)."""
    from pt2chakra import convert

    d = tmp_path_factory.mktemp("recordings")
    other = []
    for rank in (0, 1):
        target = d / f"bw1.{rank}.et"
        convert(PAIRS / f"bw1.rank{rank}.host_et.json.gz",
                PAIRS / f"bw1.rank{rank}.kineto.json.gz", target)
        other.append(target)
    return {"gloo": convert_gloo_pair(d), "bw1": other}


def scaleout_commands(files: list[Path], out: Path) -> list[list[object]]:
    return [["extrapolate", *files, "--world-size", "4", "-o", out / "x" / "job"],
            ["simulate", *files, "--world-size", "4"],
            ["astra-sim", *files, "--world-size", "4", "-o", out / "a" / "job"]]


def _refused_in_one_line(argv: list[object], needle: str, folder: Path) -> None:
    before = snapshot(folder)
    rc, _out, err = run_quietly(*argv)
    assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1, (argv, err)
    assert needle in err, (argv, err)
    assert snapshot(folder) == before, argv  # nothing written, nothing left behind


def test_ranks_of_two_recordings_are_refused(recordings: dict[str, list[Path]],
                                             tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    mixed = [recordings["gloo"][0], recordings["bw1"][1]]
    for argv in scaleout_commands(mixed, tmp_path):
        _refused_in_one_line(argv, str(mixed[1]), tmp_path)
    rc, _out, _err = run_quietly("validate", *mixed)
    assert rc == 1  # the same files validate finds unsound
    rc, _out, err = run_quietly("extrapolate", *mixed, "--world-size", "4", "-o",
                                tmp_path / "x" / "job", "--force", "-q")
    assert rc == 0, err


def test_one_recording_is_not_refused(recordings: dict[str, list[Path]], tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    for argv in scaleout_commands(recordings["bw1"], tmp_path):
        rc, _out, err = run_quietly(*argv, "-q")
        assert rc == 0, (argv, err)
    assert not survey(recordings["gloo"]).issues


def _groups_file(path: Path, rank: int, groups: object, world: int = 4) -> Path:
    md = GlobalMetadata(version="0.0.4", attrs=[
        ("rank", "int64_val", rank), ("world_size", "int64_val", world),
        ("process_groups", "string_val", groups if isinstance(groups, str)
         else json.dumps(groups))])
    return write_nodes(path, [comp_node(1), comm_node(2, [1])], md)


@pytest.mark.parametrize("bad", ['{"pg_name": "0"}', '[{"pg_name": "0", "ranks": ["x"]}]',
                                 "[" * 5000 + "]" * 5000, "not json"])
def test_malformed_process_groups_refused_by_the_front_door(tmp_path: Path, bad: str) -> None:
    (tmp_path / "x").mkdir()
    files = [_groups_file(tmp_path / "p.0.et", 0, bad, 2),
             _groups_file(tmp_path / "p.1.et", 1, [{"pg_name": "0", "ranks": []}], 2)]
    for argv in [*scaleout_commands(files, tmp_path), ["simulate", *files],
                 ["timeline", *files, "-o", tmp_path / "t.json"]]:
        _refused_in_one_line(argv, "process_groups", tmp_path)
    rc, out, _err = run_quietly("validate", *files)
    assert rc == 1 and out.count(": error:") == 1, out  # reported once, per file


def test_a_group_declared_differently_is_two_jobs(tmp_path: Path) -> None:
    """Every rank of one job records a group by the same name and members."""
    world = [{"pg_name": "0", "ranks": [], "group_size": 4}]
    files = [_groups_file(tmp_path / "g.0.et", 0, [*world, {"pg_name": "5", "ranks": [0, 1]}]),
             _groups_file(tmp_path / "g.1.et", 1, [*world, {"pg_name": "5", "ranks": [1, 3]}])]
    issues = survey(files).issues
    assert [i.path for i in issues] == [str(files[1])] and "'5'" in issues[0].problem
    _refused_in_one_line(["simulate", *files], "different jobs", tmp_path)
    rc, out, _err = run_quietly("validate", *files)
    assert rc == 1 and "[rank-set]" in out and "different jobs" in out, out
    rc, _out, err = run_quietly("simulate", *files, "--force", "-q")
    assert rc == 0, err


def test_groups_of_one_job_agree(tmp_path: Path) -> None:
    """Hybrid sharding's shard and replica groups, each rank listing its
    own, and the world listed by members on one rank and by size on another:
    one job."""
    files = []
    for r in range(4):
        shard, replica = r // 2, r % 2
        world = {"pg_name": "0", "ranks": [0, 1, 2, 3] if r == 0 else [], "group_size": 4}
        groups = [world, {"pg_name": f"s{shard}", "ranks": [2 * shard, 2 * shard + 1]},
                  {"pg_name": f"r{replica}", "ranks": [replica, replica + 2]}]
        files.append(_groups_file(tmp_path / f"h.{r}.et", r, groups))
    assert not survey(files).issues

"""``simulate`` and ``report`` refuse a set of ranks that ``validate`` calls
unsound across ranks (ranks of different jobs: their collectives differ), by
the same rule (``validate.cross_rank_problems``); ``--force`` replays it with
one warning. Sound sets replay as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT, assert_one_line_failure, run_cli

from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.conversion.api import convert
from pt2chakra.rules.checks import cross_rank_problems
from pt2chakra.simulation import simulate
from pt2chakra.tools.validate import validate

GLOO = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"


@pytest.fixture(scope="module")
def gloo(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The bundled 2-rank gloo DDP step, converted."""
    out = tmp_path_factory.mktemp("gloo")
    paths = []
    for r in range(2):
        path = out / f"gloo.{r}.et"
        convert(f"{GLOO}.rank{r}.host_et.json.gz", f"{GLOO}.rank{r}.kineto.json.gz", path)
        paths.append(path)
    return paths


def _retyped_first_collective(source: Path, target: Path) -> tuple[int, str]:
    """``source`` with its first collective's type changed (ALL_TO_ALL <->
    ALL_REDUCE): what another job's rank looks like to the matching rule.
    Returns the node id and the new type's name."""
    metadata, lazy = read_et(source)
    nodes = list(lazy)
    first = min((n for n in nodes if n.type == NodeType.COMM_COLL_NODE),
                key=lambda n: (n.start_time_micros, n.id))
    old = next(v for name, _m, v in first.attrs if name == "comm_type")
    new = CollectiveType.ALL_REDUCE if old != CollectiveType.ALL_REDUCE \
        else CollectiveType.ALL_TO_ALL
    first.attrs = [(name, m, int(new) if name == "comm_type" else v)
                   for name, m, v in first.attrs]
    write_et(target, metadata, nodes)
    return first.id, new.name


def test_a_collective_of_another_type_is_refused(converted: dict[str, Path],
                                                 tmp_path: Path) -> None:
    rank0, rank1 = converted["dlrm_rank0"], tmp_path / "other_job.1.et"
    node, ctype = _retyped_first_collective(converted["dlrm_rank1"], rank1)
    assert not validate([rank0, rank1]).sound
    for command in (["simulate"], ["report", "-o", tmp_path / "r.html"]):
        proc = run_cli(*command, rank0, rank1)
        assert proc.returncode == 2
        assert_one_line_failure(proc, str(rank1), str(rank0), f"node {node}",
                                f"is {ctype} here", "--force")
        assert proc.stdout == ""
    assert not (tmp_path / "r.html").exists()
    proc = run_cli("simulate", rank0, rank1, "--force")
    assert proc.returncode == 0, proc.stderr
    assert "predicted" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "--force" in warnings[0] and f"is {ctype} here" in warnings[0]


def test_ranks_of_two_jobs_are_refused(converted: dict[str, Path], gloo: list[Path]) -> None:
    """DLRM's rank 0 (of 8) with gloo's rank 1 (of 2): the rank set refuses
    them before any replay, naming both files and the world sizes."""
    proc = run_cli("simulate", converted["dlrm_rank0"], gloo[1])
    assert proc.returncode == 2
    assert_one_line_failure(proc, str(gloo[1]), str(converted["dlrm_rank0"]), "world_size")
    proc = run_cli("simulate", "--consumer", "astra-sim", converted["dlrm_rank0"], gloo[1])
    assert proc.returncode == 2 and "world_size" in proc.stderr


def test_sound_sets_still_replay(converted: dict[str, Path], gloo: list[Path]) -> None:
    dlrm = [converted[f"dlrm_rank{r}"] for r in range(8)]
    for paths in (dlrm, gloo, [converted["dlrm_rank3"]]):
        result = simulate(paths)
        assert len(result.ranks) == len(paths)
        assert all(r.unfinished == 0 for r in result.ranks)
        assert result.predicted_step_us > 0


def test_one_rank_has_no_cross_rank_problems(converted: dict[str, Path]) -> None:
    metadata, nodes = read_et(converted["dlrm_rank0"])
    assert cross_rank_problems([("a.et", metadata, list(nodes))]) == []

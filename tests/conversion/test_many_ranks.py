"""Many ranks in one command: same bytes as one rank at a time, one line per failing rank."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.conversion.many_ranks import RankTemplates, convert_ranks, fill, parse_ranks
from pt2chakra.errors import InputError

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch

DLRM_RANKS = range(8)


def _spec(ranks: set[int]) -> str:
    """A spec naming ``ranks``, with runs written as ranges."""
    parts: list[str] = []
    run: list[int] = []
    for r in sorted(ranks):
        if run and r != run[-1] + 1:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(r)
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


@given(st.sets(st.integers(0, 5000), min_size=1, max_size=50))
def test_rank_spec_round_trip(ranks: set[int]) -> None:
    assert parse_ranks(_spec(ranks)) == sorted(ranks)


def test_rank_spec_overlaps_and_spaces() -> None:
    assert parse_ranks("0-3, 2-4,9") == [0, 1, 2, 3, 4, 9]


@pytest.mark.parametrize("spec", ["", "a", "3-1", "-1", "1-", "0-2,x", "0-99999999"])
def test_bad_rank_spec_names_the_option(spec: str) -> None:
    with pytest.raises(InputError, match="--ranks"):
        parse_ranks(spec)


def test_fill_leaves_other_braces() -> None:
    assert fill("d/{x}/r{rank}.{rank}.et", 12) == "d/{x}/r12.12.et"


def test_outputs_must_name_the_rank() -> None:
    with pytest.raises(InputError, match="--output"):
        RankTemplates("h{rank}.json", None, "out.et").jobs([0, 1])
    with pytest.raises(InputError, match="--report"):
        RankTemplates("h{rank}.json", None, "o{rank}.et", "report.json").jobs([0, 1])
    assert [j.output for j in RankTemplates("h.json", None, "out.et").jobs([3])] == ["out.et"]


def _dlrm_args(traces: Path, out: Path) -> list[str]:
    d = traces / "dlrm_8gpu"
    return ["convert", "--ranks", "0-7", "--host-trace", f"{d}/rank{{rank}}.host_et.json.gz",
            "--device-trace", f"{d}/rank{{rank}}.kineto.json.gz", "-o", f"{out}/job.{{rank}}.et"]


def _assert_same_as_one_by_one(out: Path, converted: dict[str, Path]) -> None:
    for r in DLRM_RANKS:
        assert (out / f"job.{r}.et").read_bytes() == converted[f"dlrm_rank{r}"].read_bytes(), r


def test_jobs_2_is_byte_identical(traces: Path, converted: dict[str, Path], tmp_path: Path) -> None:
    proc = run_cli(*_dlrm_args(traces, tmp_path), "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    assert "8 of 8 ranks converted (2 processes)" in proc.stdout
    _assert_same_as_one_by_one(tmp_path, converted)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
@pytest.mark.usefixtures("one_ray_at_a_time")
def test_ray_is_byte_identical(traces: Path, converted: dict[str, Path], tmp_path: Path) -> None:
    proc = run_cli(*_dlrm_args(traces, tmp_path), "--ray", "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    assert "8 of 8 ranks converted (ray)" in proc.stdout
    _assert_same_as_one_by_one(tmp_path, converted)


def test_a_failing_rank_gets_one_line_and_the_others_are_written(
        traces: Path, converted: dict[str, Path], tmp_path: Path) -> None:
    args = _dlrm_args(traces, tmp_path)
    args[2] = "0,8"  # there is no rank 8
    proc = run_cli(*args, "--jobs", "2")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("pt2chakra: error:")]
    assert len(errors) == 1 and "rank 8:" in errors[0] and "rank8.host_et" in errors[0], errors
    assert (tmp_path / "job.0.et").read_bytes() == converted["dlrm_rank0"].read_bytes()
    assert not (tmp_path / "job.8.et").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["job.0.et"]  # no temp file left


def test_jobs_without_ranks_is_refused(tmp_path: Path) -> None:
    proc = run_cli("convert", "--host-trace", "h.json", "-o", tmp_path / "o.et", "--jobs", "2")
    assert proc.returncode == 2 and "--jobs" in proc.stderr and "--ranks" in proc.stderr


def test_shared_output_is_refused_before_work(tmp_path: Path) -> None:
    proc = run_cli("convert", "--ranks", "0-1", "--host-trace", "h{rank}.json",
                   "-o", tmp_path / "same.et")
    assert proc.returncode == 2 and "{rank}" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_api_in_process_reports_in_rank_order(traces: Path, converted: dict[str, Path],
                                              tmp_path: Path) -> None:
    d = traces / "dlrm_8gpu"
    templates = RankTemplates(f"{d}/rank{{rank}}.host_et.json.gz",
                              f"{d}/rank{{rank}}.kineto.json.gz", f"{tmp_path}/{{rank}}.et",
                              f"{tmp_path}/{{rank}}.report.json")
    result = convert_ranks(templates.jobs(parse_ranks("5,1,9")), workers=1)
    assert [o.rank for o in result.outcomes] == [1, 5, 9]
    assert [o.rank for o in result.failed] == [9]
    assert result.outputs == [f"{tmp_path}/1.et", f"{tmp_path}/5.et"]
    assert (tmp_path / "5.et").read_bytes() == converted["dlrm_rank5"].read_bytes()
    assert json.loads((tmp_path / "1.report.json").read_text())["nodes"] == result.outcomes[0].nodes
    assert not (tmp_path / "9.report.json").exists()


def _kineto_only_args(traces: Path, out: Path) -> list[str]:
    d = traces / "dlrm_8gpu"
    return ["convert", "--ranks", "0-7", "--device-trace", f"{d}/rank{{rank}}.kineto.json.gz",
            "-o", f"{out}/k.{{rank}}.et", "--report", f"{out}/k.{{rank}}.json"]


def test_kineto_only_ranks_are_byte_identical(traces: Path, tmp_path: Path) -> None:
    """The natural multi-GPU command (no host ET): every rank's ``.et`` and
    report are what ``convert --device-trace`` writes for that rank alone."""
    from pt2chakra import convert

    out, alone = tmp_path / "ranks", tmp_path / "alone"
    out.mkdir()
    alone.mkdir()
    proc = run_cli(*_kineto_only_args(traces, out), "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    assert "8 of 8 ranks converted (2 processes)" in proc.stdout
    for r in DLRM_RANKS:
        report = convert(None, traces / "dlrm_8gpu" / f"rank{r}.kineto.json.gz",
                         alone / f"k.{r}.et")
        assert (out / f"k.{r}.et").read_bytes() == (alone / f"k.{r}.et").read_bytes(), r
        written = json.loads((out / f"k.{r}.json").read_text())
        assert written["host_trace"] is None and written["nodes"] == report.nodes > 0, r


def test_kineto_only_ranks_in_process(traces: Path, tmp_path: Path) -> None:
    d = traces / "dlrm_8gpu"
    templates = RankTemplates(None, f"{d}/rank{{rank}}.kineto.json.gz", f"{tmp_path}/{{rank}}.et")
    result = convert_ranks(templates.jobs([2, 3]), workers=1)
    assert result.failed == [] and result.outputs == [f"{tmp_path}/2.et", f"{tmp_path}/3.et"]


def test_ranks_without_any_trace_is_one_line(tmp_path: Path) -> None:
    proc = run_cli("convert", "--ranks", "0-1", "-o", tmp_path / "k.{rank}.et")
    assert_one_line_failure(proc, "--ranks", "--host-trace", "--device-trace")
    assert proc.returncode == 2 and list(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="--ranks"):
        RankTemplates(None, None, "o{rank}.et").jobs([0])


def test_ranks_repair_needs_a_host_trace(tmp_path: Path) -> None:
    proc = run_cli("convert", "--ranks", "0-1", "--device-trace", "k{rank}.json", "--repair",
                   "-o", tmp_path / "k.{rank}.et")
    assert_one_line_failure(proc, "--repair", "--host-trace")

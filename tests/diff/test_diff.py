"""pt2chakra diff: the attributions add up to the step difference, a planted
slowdown comes out first, a replay diffs against its source, and traces of
different jobs are refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from builders import leaf_cpu_ops, plant_slowdown
from helpers import assert_one_line_failure, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et_whole
from pt2chakra.diff import DiffResult, diff
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import PREDICTED_SETTING_ATTR
from pt2chakra.simulation import SimulationOptions, simulate, simulate_run

# The acceptance bound: the parts add up to the difference within 1 %.
SUM_TOLERANCE = 0.01


def assert_adds_up(result: DiffResult) -> None:
    parts = math.fsum(r.delta_us for r in result.rows)
    assert parts == pytest.approx(result.attributed_us)
    assert result.attributed_us + result.residual_us == pytest.approx(result.difference_us)
    assert result.difference_us == pytest.approx(result.b.step_us - result.a.step_us)
    assert abs(result.residual_us) <= SUM_TOLERANCE * max(1.0, abs(result.difference_us))
    for a_or_b in ("a_us", "b_us"):
        total = math.fsum(getattr(c, a_or_b) for c in result.categories)
        step = result.a.step_us if a_or_b == "a_us" else result.b.step_us
        assert total == pytest.approx(step, abs=1e-6)  # each side tiles its step


def test_same_run_differs_by_nothing(gloo_ranks: list[Path]) -> None:
    result = diff(gloo_ranks, gloo_ranks)
    assert result.difference_us == 0
    assert all(r.delta_us == 0 for r in result.rows)
    assert result.only_in_a_nodes == result.only_in_b_nodes == 0
    assert result.a.step_us > 0 and result.matched_nodes > 400


def test_planted_slowdown_is_ranked_first(gloo_ranks: list[Path], tmp_path: Path) -> None:
    step_rank = diff(gloo_ranks, gloo_ranks).a.step_rank
    source = gloo_ranks[step_rank]
    op = leaf_cpu_ops(source)[0]
    slowed = tmp_path / f"slow.{step_rank}.et"
    extra = plant_slowdown(source, slowed, op.id, 10)
    other = [p for p in gloo_ranks if p != source]
    result = diff(gloo_ranks, [slowed, *other])
    assert_adds_up(result)
    first = result.rows[0]
    assert op.name in first.label and first.category == "compute"
    assert first.delta_us == pytest.approx(extra, rel=0.02)
    assert result.difference_us == pytest.approx(extra, rel=0.05)


def test_slowdown_the_other_way_is_negative(gpt_tiny: Path, tmp_path: Path) -> None:
    op = leaf_cpu_ops(gpt_tiny)[0]
    slowed = tmp_path / "slow.et"
    extra = plant_slowdown(gpt_tiny, slowed, op.id, 10)
    result = diff([slowed], [gpt_tiny])
    assert_adds_up(result)
    assert result.rows[0].delta_us == pytest.approx(-extra, rel=0.02)
    assert op.name in result.rows[0].label


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(0, 40), factor=st.sampled_from([0.5, 2.0, 3.0, 10.0]))
def test_attributions_always_add_up(gpt_tiny: Path, tmp_path: Path, pick: int,
                                    factor: float) -> None:
    ops = leaf_cpu_ops(gpt_tiny)
    op = ops[pick % len(ops)]
    slowed = tmp_path / f"p{pick}x{factor * 10:.0f}.et"  # no "<name>.<digits>.et": a rank
    plant_slowdown(gpt_tiny, slowed, op.id, factor)
    assert_adds_up(diff([gpt_tiny], [slowed]))


def test_replay_against_its_source(gloo_ranks: list[Path], tmp_path: Path) -> None:
    """A what-if replay written back as .et diffs like a recording: slower
    network, longer collectives."""
    prefix = tmp_path / "bw025"
    proc = run_cli("simulate", *gloo_ranks, "--bandwidth-scale", "0.25", "--write-et", prefix,
                   "-q")
    assert proc.returncode == 0, proc.stderr
    replayed = [tmp_path / f"bw025.{r}.et" for r in (0, 1)]
    result = diff(gloo_ranks, replayed)
    assert_adds_up(result)
    assert result.only_in_a_nodes == result.only_in_b_nodes == 0
    transfer = next(c for c in result.categories if c.category == "collective_transfer")
    assert transfer.delta_us > 0
    # re-simulating the written replay predicts what the replay predicted
    again = run_cli("simulate", *replayed, "--json")
    first = run_cli("simulate", *gloo_ranks, "--bandwidth-scale", "0.25", "--json")
    predicted = json.loads(first.stdout)["what_if"][0]["predicted_step_us"]
    assert json.loads(again.stdout)["measured_step_us"] == pytest.approx(predicted, rel=0.01)


def test_write_et_from_the_api(gloo_ranks: list[Path], tmp_path: Path) -> None:
    """``SimulationOptions.write_et`` (the API of ``simulate --write-et``)
    writes the files the CLI writes, byte for byte, readable, with the
    setting and the predicted step; a set of settings is refused before the
    replay, nothing written."""
    options = SimulationOptions(bandwidth_scale=[0.25], write_et=str(tmp_path / "api"))
    run = simulate_run(gloo_ranks, options)
    assert run.written == (f"{tmp_path}/api.0.et", f"{tmp_path}/api.1.et")
    proc = run_cli("simulate", *gloo_ranks, "--bandwidth-scale", "0.25", "--write-et",
                   tmp_path / "cli", "-q")
    assert proc.returncode == 0, proc.stderr
    for rank, path in enumerate(run.written):
        assert Path(path).read_bytes() == (tmp_path / f"cli.{rank}.et").read_bytes()
        metadata, nodes = read_et_whole(path)
        recorded = read_et_whole(gloo_ranks[rank])[1]
        assert [n.id for n in nodes] == [n.id for n in recorded]
        attrs = dict((name, value) for name, _kind, value in metadata.attrs)
        assert "bandwidth x0.25" in str(attrs[PREDICTED_SETTING_ATTR])
    # re-simulating the written replay predicts what the replay predicted
    again = simulate(run.written)
    assert again.measured_step_us == pytest.approx(run.result.what_if[0].predicted_step_us,
                                                   rel=0.01)
    with pytest.raises(InputError, match="--write-et writes one setting"):
        simulate_run(gloo_ranks, SimulationOptions(bandwidth_scale=[0.25, 1],
                                                   write_et=str(tmp_path / "two")))
    assert not list(tmp_path.glob("two*"))


def test_different_jobs_are_refused(gloo_ranks: list[Path], gpt_tiny: Path) -> None:
    with pytest.raises(InputError, match="not the same job"):
        diff([gloo_ranks[0]], [gpt_tiny])
    with pytest.raises(InputError, match="ranks 0 against 0,1"):
        diff(gloo_ranks, [gloo_ranks[0]])


def test_cli_table_json_and_errors(gloo_ranks: list[Path], gpt_tiny: Path,
                                   tmp_path: Path) -> None:
    op = leaf_cpu_ops(gpt_tiny)[0]
    slowed = tmp_path / "slow.et"
    plant_slowdown(gpt_tiny, slowed, op.id, 10)
    proc = run_cli("diff", gpt_tiny, slowed, "--top", "3")
    assert proc.returncode == 0, proc.stderr
    assert "residual" in proc.stdout and op.name in proc.stdout
    proc = run_cli("diff", gpt_tiny, "vs", slowed, "--json")
    data = json.loads(proc.stdout)
    assert data["rows"][0]["category"] == "compute" and op.name in data["rows"][0]["label"]
    bad = run_cli("diff", gloo_ranks[0], gpt_tiny)
    assert_one_line_failure(bad, "not the same job", str(gpt_tiny))
    assert bad.returncode == 2 and not bad.stdout
    assert_one_line_failure(run_cli("diff", gpt_tiny), "diff")

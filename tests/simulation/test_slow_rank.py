"""The straggler what-if (``--slow-rank RANK:cpu=F,link=G``): one rank's
host or link slower, every collective it joins waiting for it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from helpers import assert_one_line_failure, convert_gloo_pair, run_cli

from pt2chakra.cli.options import slow_rank
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.simulation.results import SlowRank


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return [str(p) for p in convert_gloo_pair(tmp_path_factory.mktemp("slow"))]


def _rows(ets: list[str], *slow: SlowRank) -> tuple[float, list[float]]:
    result = simulate(ets, SimulationOptions(slow_rank=slow))
    return result.predicted_step_us, [w.predicted_step_us for w in result.what_if]


def test_factor_one_is_the_baseline(pair: list[str]) -> None:
    base, rows = _rows(pair, SlowRank(0), SlowRank(1, cpu=1.0, link=1.0))
    assert rows == [pytest.approx(base, rel=1e-12)] * 2


def test_a_slower_rank_never_shortens_the_step_and_grows_with_its_factor(pair: list[str],
                                                                         ) -> None:
    base, rows = _rows(pair, *(SlowRank(r, cpu=f) for r in (0, 1) for f in (1.5, 3.0)),
                       *(SlowRank(r, link=f) for r in (0, 1) for f in (1.5, 3.0)))
    assert all(row >= base * (1 - 1e-9) for row in rows)
    for k in range(0, len(rows), 2):  # each rank and kind: factor 3 no faster than 1.5
        assert rows[k + 1] >= rows[k] * (1 - 1e-9)
    assert max(rows) > base * 1.05  # and something moved


def test_a_slow_link_slows_at_most_every_collective_by_its_factor(pair: list[str]) -> None:
    """Each collective the slow rank joins takes at most ``link`` times
    longer, so the step grows by at most (link - 1) x its collectives' time
    (summed over its communication lanes, which run side by side)."""
    result = simulate(pair, SimulationOptions(slow_rank=[SlowRank(1, link=2.0)]))
    run = simulate(pair)
    comm = sum(lane.busy_us for lane in run.ranks[1].lanes if "comm" in lane.lane)
    slowed = result.what_if[0].predicted_step_us
    assert run.predicted_step_us < slowed <= run.predicted_step_us + comm * 1.0 + 1.0


def test_parse() -> None:
    assert slow_rank("3:link=2") == SlowRank(3, link=2.0)
    assert slow_rank("0:cpu=1.5,link=4") == SlowRank(0, cpu=1.5, link=4.0)
    for bad in ("3", "x:cpu=2", "3:lnk=2", "3:cpu=2,cpu=3", "3:cpu=0", "-1:cpu=2"):
        with pytest.raises(argparse.ArgumentTypeError):
            slow_rank(bad)


def test_cli_row_and_refusals(pair: list[str], tmp_path: Path) -> None:
    proc = run_cli("simulate", *pair, "--slow-rank", "1:link=2", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["what_if"]
    assert [r["slow_rank"] for r in rows] == ["rank 1 link /2"]
    proc = run_cli("simulate", *pair, "--slow-rank", "7:cpu=2")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "rank 7 is not among the ranks")
    proc = run_cli("simulate", *pair, "--slow-rank", "1:cpu=2", "1:link=2",
                   "--write-et", str(tmp_path / "w"))
    assert proc.returncode == 2
    assert_one_line_failure(proc, "one setting")
    assert not list(tmp_path.iterdir())


def test_the_stragglers_table_shows_the_slow_rank(pair: list[str]) -> None:
    """With rank 1's CPU 20 times slower it reaches every collective last in
    the what-if's replay, and the others wait longer for it than in the
    plain replay: the table of the what-if says so, beside the recorded one."""
    from pt2chakra.simulation import simulate_run, slow_rank_collectives

    options = SimulationOptions(slow_rank=[SlowRank(1, cpu=20.0)])
    run = simulate_run(pair, options)
    (slowed,) = slow_rank_collectives(run, options)
    assert slowed.slow_rank == SlowRank(1, cpu=20.0).label()
    late = [r for r in slowed.rows if r.replay_last_rank is not None]
    assert late and all(r.replay_last_rank == 1 for r in late)
    plain = {r.start_us: r for r in slow_rank_collectives(run, SimulationOptions(
        slow_rank=[SlowRank(1)]))[0].rows}
    waited = sum(r.replay_others_wait_us or 0.0 for r in slowed.rows)
    assert waited > sum(r.replay_others_wait_us or 0.0 for r in plain.values())
    assert slow_rank_collectives(run, SimulationOptions()) == []  # no straggler asked


def test_cli_prints_and_writes_the_what_ifs_stragglers(pair: list[str]) -> None:
    proc = run_cli("simulate", *pair, "--slow-rank", "1:cpu=20")
    assert proc.returncode == 0, proc.stderr
    label = SlowRank(1, cpu=20.0).label()
    assert f"stragglers (replay: {label})" in proc.stdout
    doc = json.loads(run_cli("simulate", *pair, "--slow-rank", "1:cpu=20", "--json").stdout)
    (table,) = doc["slow_rank_stragglers"]
    assert table["slow_rank"] == label
    assert table["stragglers"][0]["replay_last_rank"] == 1

"""The ASTRA-sim job of a scaled-out job whose hosts are joined by uplinks
(``astra-sim --world-size M --ranks-per-host R --inter-host-bandwidth``):
its one-dimensional network is fitted to the collectives at their slowest
hop (gloo's flat ring), and ASTRA-sim runs it within 5 % of simulate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import convert_gloo_pair, run_cli

from pt2chakra.astra.job import check_job

HOSTS = ["--ranks-per-host", "2", "--inter-host-bandwidth", "0.01", "--inter-host-latency", "30"]
GOAL_PCT = 5.0  # the ASTRA-sim job within 5 % of simulate on it


@pytest.fixture(scope="module")
def gloo_ets(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return [str(p) for p in convert_gloo_pair(tmp_path_factory.mktemp("gloo"))]


def _bandwidth(network_yml: Path) -> float:
    line = next(t for t in network_yml.read_text().splitlines() if t.startswith("bandwidth:"))
    return float(line.split("[")[1].split("]")[0])


def test_the_job_network_is_paced_by_the_uplink(gloo_ets: list[str], tmp_path: Path) -> None:
    for name, hosts in (("flat", []), ("up", HOSTS)):
        proc = run_cli("astra-sim", *gloo_ets, "--world-size", "4", *hosts,
                       "-o", str(tmp_path / name / "job"), "-q")
        assert proc.returncode == 0, proc.stderr
    # 0.01 GB/s uplinks (ASTRA-sim's GB is 2^30 bytes): the fitted link is no faster
    assert _bandwidth(tmp_path / "up" / "network.yml") <= 0.01 * 1e9 / 2**30 * 1.01
    assert _bandwidth(tmp_path / "flat" / "network.yml") > _bandwidth(tmp_path / "up" / "network.yml")


def test_astra_sim_runs_it_within_the_goal_of_simulate(gloo_ets: list[str], tmp_path: Path,
                                                       astra_bin: str) -> None:
    proc = run_cli("astra-sim", *gloo_ets, "--world-size", "4", *HOSTS,
                   "-o", str(tmp_path / "job"), "-q")
    assert proc.returncode == 0, proc.stderr
    check = check_job(tmp_path / "job", astra_bin)
    ours = json.loads(run_cli("simulate", *gloo_ets, "--world-size", "4", *HOSTS,
                              "--json").stdout)["predicted_step_us"]
    astra = check.astra_sim_step_us
    assert astra is not None and ours > 0
    assert abs(astra / ours - 1) * 100 <= GOAL_PCT, (astra, ours)

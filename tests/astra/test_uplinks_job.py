"""The ASTRA-sim job of a scaled-out job whose hosts are joined by uplinks
(``astra-sim --world-size M --ranks-per-host R --inter-host-bandwidth``):
its network.yml has a dimension per tier, the uplinks' fitted to the
collectives at their slowest hop (gloo's flat ring), and ASTRA-sim runs it
within 5 % of simulate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import convert_gloo_pair, run_cli

from pt2chakra.astra.collective_time import ONE_RING, read_network_file, read_system_file
from pt2chakra.astra.job import check_job

HOSTS = ["--ranks-per-host", "2", "--inter-host-bandwidth", "0.01", "--inter-host-latency", "30"]
GOAL_PCT = 5.0  # the ASTRA-sim job within 5 % of simulate on it


@pytest.fixture(scope="module")
def gloo_ets(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return [str(p) for p in convert_gloo_pair(tmp_path_factory.mktemp("gloo"))]


def _bandwidth(network_yml: Path) -> float:
    """The first dimension's: the uplinks' where there are two."""
    return read_network_file(network_yml).bandwidth_gbps


def test_the_job_network_is_paced_by_the_uplink(gloo_ets: list[str], tmp_path: Path) -> None:
    for name, hosts in (("flat", []), ("up", HOSTS)):
        proc = run_cli("astra-sim", *gloo_ets, "--world-size", "4", *hosts,
                       "-o", str(tmp_path / name / "job"), "-q")
        assert proc.returncode == 0, proc.stderr
    # 0.01 GB/s uplinks (ASTRA-sim's GB is 2^30 bytes): the fitted link is no faster
    assert _bandwidth(tmp_path / "up" / "network.yml") <= 0.01 * 1e9 / 2**30 * 1.01
    assert _bandwidth(tmp_path / "flat" / "network.yml") > _bandwidth(tmp_path / "up" / "network.yml")


def test_the_job_network_has_a_dimension_per_tier(gloo_ets: list[str], tmp_path: Path) -> None:
    proc = run_cli("astra-sim", *gloo_ets, "--world-size", "4", *HOSTS,
                   "-o", str(tmp_path / "job"), "-q")
    assert proc.returncode == 0, proc.stderr
    network = read_network_file(tmp_path / "network.yml")
    assert network.hosts is not None and network.hosts.ranks_per_host == 2
    assert [n for n, _, _ in network.dimensions] == [2, 2]
    # the links within a host are fitted without the uplink: no slower than it
    assert network.hosts.bandwidth_gbps >= network.bandwidth_gbps
    assert read_system_file(tmp_path / "system.json").implementation == ONE_RING


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

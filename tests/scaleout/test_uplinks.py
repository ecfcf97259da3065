"""Hosts joined by uplinks (--inter-host-bandwidth/--inter-host-latency
with --ranks-per-host): a ring that spans hosts is paced by its slowest hop,
the scaled-out files carry the hosts, and the replay of them, simulate
--world-size and the rule agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.rules.conventions import scaled_world
from pt2chakra.scaleout.api import extrapolate, scaled_graphs
from pt2chakra.scaleout.hosts import HostSharing
from pt2chakra.simulation import SimulationOptions, simulate, simulate_graphs_run
from pt2chakra.simulation.network import HostLinks, host_links_of

SLOW_UPLINK_GBPS = 0.001  # 8 Mbit/s: far slower than the recorded loopback


@given(st.integers(1, 64), st.integers(1, 512), st.floats(1e-3, 100.0), st.floats(1e-3, 100.0),
       st.floats(0.0, 1e3), st.floats(0.0, 1e3))
def test_the_slowest_hop_paces_a_ring_across_hosts(per_host: int, n: int, link: float,
                                                   up: float, lat: float, up_lat: float) -> None:
    bw, latency = HostLinks(per_host, up, up_lat).slowest_hop(n, link, lat)
    if n <= per_host:  # on one host: its own links
        assert (bw, latency) == (link, lat)
    else:
        assert bw == min(link, up) and latency == lat + up_lat
        assert bw <= link and latency >= lat  # an uplink never speeds a ring up


def _direct(ranks: list[Path], m: int, h: HostSharing) -> float:
    scaled = scaled_graphs(ranks, m, hosts=h)
    opts = SimulationOptions().scaled_out(scaled.graphs)
    return simulate_graphs_run(scaled.sources, scaled.graphs, opts).result.predicted_step_us


def test_extrapolate_writes_the_hosts_and_the_replay_slows(gloo_ranks: list[Path],
                                                           tmp_path: Path) -> None:
    hosts = HostSharing(ranks_per_host=2, uplink_gbps=SLOW_UPLINK_GBPS, uplink_latency_us=50.0)
    summary = extrapolate(gloo_ranks, 4, tmp_path / "x", hosts=hosts)
    assert "uplinks" in summary.describe()
    md, _ = read_et(tmp_path / "x.3.et")
    world = scaled_world(attr_dict(md.attrs))
    assert host_links_of(world) == HostLinks(2, SLOW_UPLINK_GBPS, 50.0)
    across = simulate(sorted(tmp_path.glob("x.*.et")), SimulationOptions(calibrate=True))
    flat = _direct(gloo_ranks, 4, HostSharing())
    assert across.predicted_step_us > flat  # the gradients cross an 8 Mbit/s uplink
    assert across.predicted_step_us == pytest.approx(_direct(gloo_ranks, 4, hosts), rel=0.01)


def test_uplinks_change_nothing_while_the_ranks_fit_on_one_host(gloo_ranks: list[Path]) -> None:
    on_one = HostSharing(ranks_per_host=4, uplink_gbps=SLOW_UPLINK_GBPS)
    assert _direct(gloo_ranks, 4, on_one) == pytest.approx(_direct(gloo_ranks, 4, HostSharing()))


def test_cli_takes_the_uplinks(gloo_ranks: list[Path]) -> None:
    proc = run_cli("simulate", *gloo_ranks, "--world-size", "4", "--ranks-per-host", "2",
                   "--inter-host-bandwidth", str(SLOW_UPLINK_GBPS), "--inter-host-latency", "50",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    want = _direct(gloo_ranks, 4, HostSharing(2, None, SLOW_UPLINK_GBPS, 50.0))
    assert json.loads(proc.stdout)["predicted_step_us"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("args,words", [
    (["--world-size", "4", "--inter-host-bandwidth", "1"], "needs --ranks-per-host"),
    (["--world-size", "4", "--ranks-per-host", "2", "--inter-host-latency", "5"],
     "needs --inter-host-bandwidth"),
    (["--ranks-per-host", "2", "--inter-host-bandwidth", "1"], "applies with --world-size"),
    (["--world-size", "4", "--ranks-per-host", "2", "--inter-host-bandwidth", "0"], "bandwidth"),
])
def test_refusals_are_one_line(gloo_ranks: list[Path], args: list[str], words: str) -> None:
    proc = run_cli("simulate", *gloo_ranks, *args)
    assert proc.returncode == 2
    assert_one_line_failure(proc, words)


def test_a_step_is_given_its_range_over_what_the_fit_assumed(
        gloo_ranks: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the recording cannot tell bytes from a fixed cost (here: made
    so by asking for sizes 1e9 times apart), the fit assumes a latency and
    says so, and the M-rank step comes with its range over that latency."""
    from pt2chakra.scaleout import simulate_world_size
    from pt2chakra.simulation import calibration

    plain = simulate_world_size(gloo_ranks, 8)
    assert plain.assumed_range() is None and "assumed" not in plain.breakdown().describe()
    monkeypatch.setattr(calibration, "BYTES_SPREAD_TO_FIT", 1e9)
    scaled = simulate_world_size(gloo_ranks, 8)
    assert calibration.assumes(scaled.run.result.network_model)
    span = scaled.assumed_range()
    assert span is not None
    lo, hi = span
    assert lo <= scaled.run.result.predicted_step_us <= hi and lo < hi
    assert "over the assumed latency" in scaled.breakdown().describe()

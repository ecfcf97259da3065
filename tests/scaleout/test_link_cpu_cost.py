"""A host's CPU caps what its ranks' links move (``--link-cpu-cost``, or what
``collect`` measured in ``meta.json``): with C cores and R ranks moving bytes
at once, each link moves at most C / (R x cost). The scaled-out files carry
the cap, and the replay, simulate --world-size and the rule agree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.collect.link_cost import (
    cost_per_byte,
    host_busy_s,
    link_bytes,
    own_cost_per_byte,
    own_cpu_s,
)
from pt2chakra.rules.conventions import scaled_world
from pt2chakra.scaleout import simulate_world_size
from pt2chakra.scaleout.api import extrapolate
from pt2chakra.scaleout.hosts import HostSharing
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.simulation.network import HostLinks, host_links_of
from pt2chakra.simulation.profiler_overhead import (
    META_LINK_CPU_FIELD,
    META_NAME,
    META_RANK_LINK_CPU_FIELD,
    read_meta_link_cost,
)

# On the bundled loopback recording the links move ~GB/s; a host that spends
# a microsecond of CPU per byte gives 8 ranks on 2 cores 250 kB/s each.
COSTLY_NS = 1000.0


def test_the_cap_is_the_hosts_cores_over_its_ranks_cost() -> None:
    hosts = HostSharing(ranks_per_host=8, cores_per_host=2, link_cpu_ns_per_byte=15.6)
    assert hosts.host_link_gbps(8) == pytest.approx(2 / (8 * 15.6))
    assert hosts.host_link_gbps(2) == pytest.approx(2 / (2 * 15.6))  # 2 ranks on the host
    assert hosts.host_link_gbps(64) == hosts.host_link_gbps(8)  # 8 per host, more hosts
    assert HostSharing(8, 2).host_link_gbps(8) is None  # cost not known
    assert HostSharing(8, None, link_cpu_ns_per_byte=15.6).host_link_gbps(8) is None


@given(st.integers(1, 64), st.integers(1, 64), st.floats(1e-3, 1e3), st.integers(1, 512),
       st.integers(1, 512))
def test_more_ranks_never_move_more_bytes_each(per_host: int, cores: int, cost: float, m: int,
                                               more: int) -> None:
    hosts = HostSharing(per_host, cores, link_cpu_ns_per_byte=cost)
    small, large = hosts.host_link_gbps(m), hosts.host_link_gbps(m + more)
    assert small is not None and large is not None and large <= small


@given(st.floats(1e-4, 100.0), st.floats(1e-4, 100.0), st.integers(2, 64))
def test_a_link_runs_at_most_its_share_of_the_host(link: float, cap: float, n: int) -> None:
    bw, latency = HostLinks(4, None, 0.0, cap).slowest_hop(n, link, 3.0)
    assert bw == min(link, cap) and latency == 3.0


def _with_meta(gloo_ranks: list[Path], folder: Path, doc: dict[str, object]) -> list[Path]:
    """The recording copied into ``folder`` with ``doc`` as its meta.json."""
    folder.mkdir()
    out = [Path(shutil.copy(p, folder / p.name)) for p in gloo_ranks]
    (folder / META_NAME).write_text(json.dumps(doc))
    return out


def test_extrapolate_reads_the_measured_cost_and_the_replay_slows(
        gloo_ranks: list[Path], tmp_path: Path) -> None:
    ranks = _with_meta(gloo_ranks, tmp_path / "rec", {"step_median_s": 0.1,
                                                       META_LINK_CPU_FIELD: COSTLY_NS})
    hosts = HostSharing(ranks_per_host=8, cores_per_host=2)
    summary = extrapolate(ranks, 8, tmp_path / "x", hosts=hosts)
    assert "at most 0.25 MB/s" in summary.describe()
    md, _ = read_et(tmp_path / "x.5.et")
    world = scaled_world(attr_dict(md.attrs))
    assert world is not None and world.host_link_gbps == pytest.approx(2 / (8 * COSTLY_NS))
    assert host_links_of(world) == HostLinks(0, None, 0.0, world.host_link_gbps)
    capped = simulate(sorted(tmp_path.glob("x.*.et")), SimulationOptions(calibrate=True))
    direct = simulate_world_size(ranks, 8, hosts=hosts)
    assert capped.predicted_step_us == pytest.approx(direct.run.result.predicted_step_us,
                                                     rel=0.01)
    free = simulate_world_size(gloo_ranks, 8, hosts=hosts)  # no meta.json: no cap
    assert direct.run.result.predicted_step_us > 1.5 * free.run.result.predicted_step_us
    assert "its host's CPU" in direct.breakdown().describe()
    assert "its host's CPU" not in free.breakdown().describe()


def test_the_option_overrides_the_measurement(gloo_ranks: list[Path], tmp_path: Path) -> None:
    ranks = _with_meta(gloo_ranks, tmp_path / "rec", {META_LINK_CPU_FIELD: COSTLY_NS})
    proc = run_cli("simulate", *ranks, "--world-size", "8", "--ranks-per-host", "8",
                   "--cores-per-host", "2", "--link-cpu-cost", "0.001")
    assert proc.returncode == 0, proc.stderr
    assert "0.001 ns of CPU per byte" in proc.stdout


def test_a_bad_measurement_is_one_line_naming_the_file(gloo_ranks: list[Path],
                                                       tmp_path: Path) -> None:
    ranks = _with_meta(gloo_ranks, tmp_path / "rec", {META_LINK_CPU_FIELD: -3})
    proc = run_cli("simulate", *ranks, "--world-size", "8", "--ranks-per-host", "8",
                   "--cores-per-host", "2")
    assert proc.returncode == 2
    assert_one_line_failure(proc, META_NAME)
    assert META_LINK_CPU_FIELD in proc.stderr


def test_the_cost_needs_the_cores(gloo_ranks: list[Path]) -> None:
    proc = run_cli("simulate", *gloo_ranks, "--world-size", "8", "--ranks-per-host", "8",
                   "--inter-host-bandwidth", "1", "--link-cpu-cost", "10")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "needs --cores-per-host")


def test_the_probe_cost_is_each_hosts_busy_time_over_its_ranks_link_bytes() -> None:
    per_link = link_bytes(8 << 20, 4)
    assert per_link == pytest.approx(1.5 * (8 << 20))
    # two hosts of two ranks each; each rank measured its whole host
    measured = [("a", 0.2), ("a", 0.22), ("b", 0.4), ("b", 0.4)]
    want = sorted([0.21 / (2 * per_link) * 1e9, 0.4 / (2 * per_link) * 1e9])
    assert cost_per_byte(measured, per_link) == pytest.approx(sum(want) / 2)
    assert cost_per_byte([("a", None), ("a", 0.1)], per_link) is None  # not readable
    assert cost_per_byte([("a", 0.0)], per_link) is None  # nothing seen


def test_the_hosts_busy_time_is_read_where_linux_has_it() -> None:
    busy = host_busy_s()
    if Path("/proc/stat").exists():
        assert busy is not None and busy > 0
    else:
        assert busy is None


def test_the_ranks_own_cost_sums_each_hosts_ranks() -> None:
    per_link = link_bytes(8 << 20, 4)
    # each rank measured its own process: a host's cost is their sum over its ranks' bytes
    measured = [("a", 0.1), ("a", 0.12), ("b", 0.2), ("b", 0.2)]
    want = sorted([0.22 / (2 * per_link) * 1e9, 0.4 / (2 * per_link) * 1e9])
    assert own_cost_per_byte(measured, per_link) == pytest.approx(sum(want) / 2)
    assert own_cost_per_byte([("a", 0.0)], per_link) is None  # nothing seen


def test_a_process_sees_its_own_cpu_grow() -> None:
    before = own_cpu_s()
    deadline = before + 0.05
    while own_cpu_s() < deadline:
        sum(range(1000))
    assert own_cpu_s() >= deadline


def test_the_ranks_own_cost_caps_the_links_and_the_hosts_bounds_the_range(
        gloo_ranks: list[Path], tmp_path: Path) -> None:
    ranks = _with_meta(gloo_ranks, tmp_path / "rec", {META_RANK_LINK_CPU_FIELD: COSTLY_NS,
                                                       META_LINK_CPU_FIELD: 2 * COSTLY_NS})
    found = read_meta_link_cost([str(p) for p in ranks])
    assert found is not None
    assert (found.ns_per_byte, found.host_ns_per_byte) == (COSTLY_NS, 2 * COSTLY_NS)
    hosts = HostSharing(ranks_per_host=8, cores_per_host=2)
    run = simulate_world_size(ranks, 8, hosts=hosts)
    assert run.hosts.host_link_gbps(8) == pytest.approx(2 / (8 * COSTLY_NS))
    span = run.link_cost_range()
    assert span is not None
    lo, hi = span
    assert lo == pytest.approx(run.run.result.predicted_step_us)
    upper = _with_meta(gloo_ranks, tmp_path / "host", {META_LINK_CPU_FIELD: 2 * COSTLY_NS})
    at_host_cost = simulate_world_size(upper, 8, hosts=hosts).run.result.predicted_step_us
    assert hi == pytest.approx(at_host_cost) and hi > 1.2 * lo
    text = run.breakdown().describe()
    assert "the ranks' own; the host's busy time 2e+03" in text
    assert f"the step is {lo:.0f} to {hi:.0f} us" in text


def test_an_older_recording_has_the_hosts_cost_and_no_range(gloo_ranks: list[Path],
                                                           tmp_path: Path) -> None:
    ranks = _with_meta(gloo_ranks, tmp_path / "rec", {META_LINK_CPU_FIELD: COSTLY_NS})
    found = read_meta_link_cost([str(p) for p in ranks])
    assert found is not None and (found.ns_per_byte, found.host_ns_per_byte) == (COSTLY_NS, None)
    run = simulate_world_size(ranks, 8, hosts=HostSharing(ranks_per_host=8, cores_per_host=2))
    assert run.link_cost_range() is None
    assert "over the link CPU cost" not in run.breakdown().describe()

"""The ASTRA-sim job of a job scaled out from 2 recorded ranks follows our own
prediction at the new scale (the acceptance: within 3 % at 8 ranks): the
consumer model (exact against the binary) always, the binary where built."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import convert_gloo_pair, run_cli
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pt2chakra.astra.collective_time import AstraNetwork, AstraSystem
from pt2chakra.astra.job import (
    RecordedCollective,
    _astra_ns,
    _padding_of,
    check_job,
    write_job,
)
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, NodeType, attr_dict
from pt2chakra.rules.conventions import CPU_GAP_CATEGORY
from pt2chakra.scaleout.api import extrapolate, scaled_graphs
from pt2chakra.scaleout.hosts import NO_SHARING, HostSharing
from pt2chakra.simulation import SimulationOptions, simulate_graphs_run

AGREEMENT_PCT = 3.0  # issue 27: ASTRA-sim within 3 % of simulate on the extrapolated job


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return convert_gloo_pair(tmp_path_factory.mktemp("rec"))


# The benchmark bed: every rank on one host of 2 cores (CPU time x4 at 8 ranks).
BED = HostSharing(ranks_per_host=8, cores_per_host=2)


def _ours(recorded: list[Path], m: int, hosts: HostSharing = NO_SHARING) -> float:
    scaled = scaled_graphs(recorded, m, hosts=hosts)
    opts = SimulationOptions().scaled_out(scaled.graphs)
    return simulate_graphs_run(scaled.sources, scaled.graphs, opts).result.predicted_step_us


def _job(recorded: list[Path], folder: Path, m: int, hosts: HostSharing = NO_SHARING) -> Path:
    extrapolate(recorded, m, folder / "x", hosts=hosts)
    prefix = folder / "job" / "job"
    write_job([folder / f"x.{r}.et" for r in range(m)], prefix)
    return prefix


@pytest.mark.parametrize("m", [3, 4, 8])
def test_consumer_model_follows_simulate(recorded: list[Path], tmp_path: Path, m: int) -> None:
    model = check_job(_job(recorded, tmp_path, m)).model.predicted_step_us
    ours = _ours(recorded, m)
    assert abs(model / ours - 1) * 100 <= AGREEMENT_PCT, (model, ours)


def test_binary_follows_simulate_at_8(astra_bin: str, recorded: list[Path], tmp_path: Path,
                                      ) -> None:
    check = check_job(_job(recorded, tmp_path, 8), astra_bin)
    assert check.astra_sim_step_us is not None
    assert sorted(check.binary.finished) == list(range(8)) if check.binary else False
    assert abs(check.astra_sim_step_us / _ours(recorded, 8) - 1) * 100 <= AGREEMENT_PCT


def _cpu_time(path: Path) -> list[int]:
    """The durations of a job file's CPU time (CPU nodes and cpu_gap nodes)."""
    _md, nodes = read_et(path)
    return [n.duration_micros for n in nodes
            if n.type == NodeType.COMP_NODE and (attr_dict(n.attrs).get("is_cpu_op") is True
                                                 or attr_dict(n.attrs).get("category")
                                                 == CPU_GAP_CATEGORY)]


def test_shared_hosts_stretch_the_jobs_cpu_time(astra_bin: str, recorded: list[Path],
                                                tmp_path: Path) -> None:
    """Ranks sharing a host's cores: the job's CPU time is the unshared
    job's x4 (what the consumer model's --cpu-scale scales), ASTRA-sim runs
    it on every rank, and its step grows as the replay's does."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "shared").mkdir()
    plain = _job(recorded, tmp_path / "plain", 8)
    shared = _job(recorded, tmp_path / "shared", 8, BED)
    for r in range(8):
        base = _cpu_time(Path(f"{plain}.{r}.et"))
        assert _cpu_time(Path(f"{shared}.{r}.et")) == [round(4 * d) for d in base] and base
    check, before = check_job(shared, astra_bin), check_job(plain, astra_bin)
    assert check.binary is not None and sorted(check.binary.finished) == list(range(8))
    assert check.astra_sim_step_us is not None and before.astra_sim_step_us is not None
    assert check.astra_sim_step_us > before.astra_sim_step_us
    assert _ours(recorded, 8, BED) > _ours(recorded, 8)


def test_world_size_option_writes_the_job(recorded: list[Path], tmp_path: Path) -> None:
    prefix = tmp_path / "w" / "job"
    proc = run_cli("astra-sim", *recorded, "--world-size", "8", "-o", prefix, "-q")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in prefix.parent.iterdir()) == sorted(
        [f"job.{r}.et" for r in range(8)] + ["job.prediction.json", "memory.json",
                                             "network.yml", "run.sh", "system.json"])
    refused = run_cli("astra-sim", "--check", prefix, "--world-size", "8")
    assert refused.returncode == 2
    check = run_cli("astra-sim", "--check", prefix)
    assert check.returncode == 0, check.stderr
    line = next(x for x in check.stdout.splitlines() if x.startswith("pt2chakra simulate"))
    ours = _ours(recorded, 8)
    assert f"{ours:,.0f} us" in line
    model = float(line.split("consumer model vs it: ")[1].split(" %")[0])
    assert abs(model) <= AGREEMENT_PCT


@pytest.mark.parametrize("m", [3, 8])
def test_wakeups_on_crowded_hosts_follow_simulate(recorded: list[Path], tmp_path: Path,
                                                  m: int) -> None:
    """On the bed's crowded hosts the replay adds each collective's wake-ups
    (durations.collective_wakeups); the job carries them in its sizes, so
    the consumer model still follows simulate."""
    model = check_job(_job(recorded, tmp_path, m, BED)).model.predicted_step_us
    ours = _ours(recorded, m, BED)
    assert abs(model / ours - 1) * 100 <= AGREEMENT_PCT, (model, ours)


def _comm_sizes(path: Path) -> list[int]:
    _md, nodes = read_et(path)
    return [attr_dict(n.attrs)["comm_size"] for n in nodes if n.type == NodeType.COMM_COLL_NODE]


def test_wakeups_are_in_the_collectives_sizes(recorded: list[Path], tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "shared").mkdir()
    plain = _comm_sizes(Path(f"{_job(recorded, tmp_path / 'plain', 8)}.0.et"))
    shared = _comm_sizes(Path(f"{_job(recorded, tmp_path / 'shared', 8, BED)}.0.et"))
    assert len(plain) == len(shared) and plain
    assert all(s >= p for s, p in zip(shared, plain)) and shared != plain


kinds = st.sampled_from([CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER,
                         CollectiveType.REDUCE_SCATTER])


@settings(max_examples=60, deadline=None)
@given(kinds, st.integers(1, 1 << 24), st.integers(2, 8), st.floats(50.0, 50_000.0))
def test_padding_is_the_least_that_adds_the_wakeups(kind: CollectiveType, size: int, n: int,
                                                    wake_us: float) -> None:
    """The bytes found lengthen ASTRA-sim's time of the collective by at
    least the wake-ups, and one granule fewer would not (the least, so the
    wake-ups are not overstated); the chunk count stays the collective's."""
    system = AstraSystem()
    network = AstraNetwork(topology="Ring", npus=n, bandwidth_gbps=0.0125, latency_ns=20_000.0)
    c = RecordedCollective(int(kind), size, tuple(range(n)))
    assume(_astra_ns(c, network, system) is not None)  # an all-gather of under 1 B a chunk
    extra, micros = _padding_of(c, wake_us, network, system)
    assert micros == 0 and extra > 0
    granule = system.splits * n * n
    assert extra % granule == 0

    def longer(bytes_: int) -> float:
        grown = _astra_ns(dataclasses.replace(c, size_bytes=size + bytes_), network, system)
        base = _astra_ns(c, network, system)
        assert grown is not None and base is not None
        return grown - base

    assert longer(extra) >= wake_us * 1e3
    assert longer(extra - granule) < wake_us * 1e3


def test_a_replayed_collective_gets_the_wakeups_as_time() -> None:
    """ASTRA-sim replays a broadcast from its duration: the wake-ups go there."""
    network = AstraNetwork(topology="Ring", npus=4, bandwidth_gbps=0.0125, latency_ns=20_000.0)
    c = RecordedCollective(int(CollectiveType.BROADCAST), 4, (0, 1, 2, 3))
    assert _padding_of(c, 3000.0, network, AstraSystem()) == (0, 3000)

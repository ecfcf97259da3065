"""Replay of the real traces in ../shared/traces: predicted vs measured step.

Bounds are what the simulator achieves (see docs/SIMULATE.md) with a margin;
the acceptance target is 5 %."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2chakra.chakra.ranks import open_rank_set
from pt2chakra.conversion.api import convert
from pt2chakra.rules.rendezvous import RendezvousKey
from pt2chakra.simulation.engine import Simulator, load, simulate_files
from pt2chakra.simulation.results import SimConfig


@pytest.fixture(scope="module")
def converted(traces: Path, tmp_path_factory) -> dict[str, list[str]]:
    out = tmp_path_factory.mktemp("sim")
    result: dict[str, list[str]] = {}
    for name in ("linear_1gpu", "hta_simple_add"):
        path = str(out / f"{name}.et")
        convert(str(traces / name / "host_et.json.gz"), str(traces / name / "kineto.json.gz"),
                path)
        result[name] = [path]
    dlrm = []
    for r in range(8):
        path = str(out / f"dlrm.{r}.et")
        convert(str(traces / "dlrm_8gpu" / f"rank{r}.host_et.json.gz"),
                str(traces / "dlrm_8gpu" / f"rank{r}.kineto.json.gz"), path)
        dlrm.append(path)
    result["dlrm_8gpu"] = dlrm
    return result


@pytest.mark.parametrize("name,bound", [("linear_1gpu", 2.0), ("hta_simple_add", 1.0)])
def test_single_rank_within_bound(converted, name, bound):
    res = simulate_files(converted[name])
    assert res.measured_step_us > 0
    assert res.error_pct is not None
    assert abs(res.error_pct) < bound, res.summary()


def test_dlrm_8_ranks_together_within_bound(converted):
    res = simulate_files(converted["dlrm_8gpu"])
    assert len(res.ranks) == 8
    assert res.align == "recorded"
    assert res.error_pct is not None
    assert abs(res.error_pct) < 2.0, res.summary()
    for r in res.ranks:
        assert r.unfinished == 0
        assert r.error_pct is not None
        assert abs(r.error_pct) < 3.0, res.summary()


def test_dlrm_collective_skew_is_not_double_counted(converted):
    """With the raw measured NCCL durations (which include waiting for the
    slowest peer) on top of the rendezvous the step comes out far too long;
    the min-over-participants duration brings it back."""
    ranks = open_rank_set(converted["dlrm_8gpu"])
    sim = Simulator(load(ranks), ranks.paths, ranks=ranks.ranks)
    res, sched = sim.run(SimConfig())
    # the ranks share a clock: every participant of a matched collective runs
    # from the last arrival to its own recorded end, so the participants' ends
    # spread no more than their recorded ends did (the wait is not added twice)
    ends: dict[RendezvousKey, list[float]] = {}
    recorded: dict[RendezvousKey, list[float]] = {}
    p = sim.prepared(0)
    for i, key in p.comm_key.items():
        ends.setdefault(key, []).append(sched.end[i])
        recorded.setdefault(key, []).append(p.start[i] + p.dur[i])
    assert ends
    for key, got in ends.items():
        assert max(got) - min(got) <= max(recorded[key]) - min(recorded[key]) + 1e-6, key
    assert res.critical_path is not None and res.critical_path.rank_crossings >= 1


def test_dlrm_what_if_is_monotonic(converted):
    ranks = open_rank_set(converted["dlrm_8gpu"])
    sim = Simulator(load(ranks), ranks.paths, ranks=ranks.ranks)
    base = sim.predict(SimConfig())
    assert sim.predict(SimConfig(cpu_scale=0.5)) < base * 0.8  # the step is CPU-bound
    assert sim.predict(SimConfig(compute_scale=2.0)) >= base - 1e-6
    assert sim.predict(SimConfig(bandwidth_gbps=50, latency_us=5)) > 0

"""simulate --world-size M: the step of the extrapolated files without
writing them (the clones are not replayed), collectives timed at M."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from helpers import assert_one_line_failure, run_cli

from pt2chakra.errors import InputError
from pt2chakra.scaleout import simulate_world_size
from pt2chakra.scaleout.api import extrapolate, scaled_graphs
from pt2chakra.simulation import SimulationOptions, simulate, simulate_graphs_run
from pt2chakra.simulation.network import cost_factors, gloo_segments_per_rank

AR = 0


def _world_size_step(ranks: list[Path], m: int, options: SimulationOptions) -> float:
    scaled = scaled_graphs(ranks, m)
    opts = options.scaled_out(scaled.graphs)
    return simulate_graphs_run(scaled.sources, scaled.graphs, opts).result.predicted_step_us


@pytest.mark.parametrize("m", [3, 8])
@pytest.mark.parametrize("model", ["calibrate", "network"])
def test_same_as_the_extrapolated_files(gloo_ranks: list[Path], tmp_path: Path, m: int,
                                        model: str) -> None:
    options = SimulationOptions(calibrate=True) if model == "calibrate" else \
        SimulationOptions(bandwidth_gbps=0.5, latency_us=50)
    extrapolate(gloo_ranks, m, tmp_path / "x")
    files = sorted(tmp_path.glob("x.*.et"))
    full = simulate(files, options)
    direct = _world_size_step(gloo_ranks, m, options)
    assert abs(direct / full.predicted_step_us - 1) < 0.01
    clones = {r.predicted_step_us for r in full.ranks if r.rank >= 2}
    rep = next(r.predicted_step_us for r in full.ranks if r.rank == 1)
    assert clones == {rep}  # each clone replays exactly as the representative


def test_recorded_scale_unchanged(gloo_ranks: list[Path]) -> None:
    """M = N: the recording's own replay (nothing is rescaled, so the
    recorded collective times stay)."""
    assert _world_size_step(gloo_ranks, 2, SimulationOptions()) == \
        simulate(gloo_ranks).predicted_step_us


def test_network_time_grows_with_m(gloo_ranks: list[Path]) -> None:
    options = SimulationOptions(bandwidth_gbps=0.05, latency_us=200)
    steps = [_world_size_step(gloo_ranks, m, options) for m in (2, 8, 64)]
    assert steps[0] < steps[1] < steps[2]


def test_combines_with_what_ifs(gloo_ranks: list[Path]) -> None:
    proc = run_cli("simulate", *gloo_ranks, "--world-size", "16", "--bandwidth-scale", "1", "4",
                   "--compute-scale", "0.5", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["scale_out"]["world_size"] == 16
    assert len(doc["what_if"]) == 4
    assert all(c["ranks"] == 16 for c in doc["scale_out"]["collectives"])
    assert "calibrated" in doc["network_model"]


def test_text_breakdown(gloo_ranks: list[Path]) -> None:
    proc = run_cli("simulate", *gloo_ranks, "--world-size", "1024", "--no-lanes")
    assert proc.returncode == 0, proc.stderr
    assert "scale-out: 1024 ranks from 2 recorded" in proc.stdout
    assert "clones of recorded rank 1" in proc.stdout
    assert "segments/rank" in proc.stdout


def test_world_size_from_the_api(gloo_ranks: list[Path], tmp_path: Path) -> None:
    """``simulate_world_size`` (the API of ``simulate --world-size``): the
    2-rank recording as a 4-rank job, each collective timed at 4 ranks, the
    what-ifs asked; what the CLI prints, to the last digit. ``--write-et``
    is refused as the CLI refuses it."""
    options = SimulationOptions(bandwidth_scale=[1, 4])
    scaled = simulate_world_size(gloo_ranks, 4, options)
    shown = scaled.breakdown()
    assert (shown.recorded_ranks, shown.world_size) == (2, 4)
    assert shown.collectives and all(c.ranks == 4 for c in shown.collectives)
    assert scaled.options.calibrate  # rescaled: timed by the model fitted to the recording
    assert [r.rank for r in scaled.run.result.ranks] == [0, 1]  # ranks 2, 3: clones of one
    assert [w.bandwidth_scale for w in scaled.run.result.what_if] == [1, 4]
    proc = run_cli("simulate", *gloo_ranks, "--world-size", "4", "--bandwidth-scale", "1", "4",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["predicted_step_us"] == scaled.run.result.predicted_step_us
    assert doc["what_if"][0]["predicted_step_us"] == \
        scaled.run.result.what_if[0].predicted_step_us
    assert doc["scale_out"] == json.loads(msgspec.json.encode(shown))
    with pytest.raises(InputError, match="--write-et: writes the replayed ranks only"):
        simulate_world_size(gloo_ranks, 4, SimulationOptions(write_et=str(tmp_path / "x")))
    assert not list(tmp_path.iterdir())


def test_refusal_is_one_line(built_job) -> None:
    proc = run_cli("simulate", *built_job("pp", 2), "--world-size", "4")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "pipeline parallel")


def test_gloo_segments() -> None:
    """gloo's ring all-reduce: at least 2 segments per rank, at most 1 MiB
    each; its message count 2(n-1)s grows with n even as s shrinks."""
    assert gloo_segments_per_rank(263168, 2) == 2
    assert gloo_segments_per_rank(25 << 20, 2) == 13
    assert gloo_segments_per_rank(25 << 20, 8) == 4
    steps = [cost_factors(AR, n, "gloo", 25 << 20)[0] for n in (2, 4, 8, 64, 1024)]
    assert steps == sorted(steps) and steps[0] == 2 * 13


def test_serialised_collectives_take_no_pickup_delay(gloo_ranks: list[Path]) -> None:
    """gloo ran two all-reduces at once (two workers); on the calibrated
    link, one at a time, the second starts when the first ends: its
    recorded pickup (measured from an earlier point) is not added on top.
    (At 64 ranks each all-reduce outlasts the time to the next one's issue,
    so every one of them queues behind the one before.)"""
    scaled = scaled_graphs(gloo_ranks, 64)
    opts = SimulationOptions().scaled_out(scaled.graphs)
    s = simulate_graphs_run(scaled.sources, scaled.graphs, opts).schedule
    reduces = sorted((s.start[i], s.end[i]) for i in range(len(s.nodes))
                     if s.rank[i] == 0 and s.nodes[i].name == "gloo:all_reduce")
    assert len(reduces) == 3
    for (_s0, e0), (s1, _e1) in zip(reduces, reduces[1:]):
        assert s1 == pytest.approx(e0)


@pytest.mark.parametrize("m", [2, 4, 16])
def test_gloo_reduce_scatter_timed_as_all_reduce(built_job, m: int) -> None:
    """FSDP over gloo: ``_reduce_scatter_base_`` runs as a full-size
    ``gloo:all_reduce`` of the block; at M it moves 2(M-1)/M of the block
    per link (all-reduce), not a reduce-scatter's (M-1)/M, and its size is
    still the block (shards shrink, the block does not)."""
    from scaleout.conftest import BLOCK

    from pt2chakra.simulation.network import collective_time

    bw, lat = 0.001, 10.0  # GB/s, us: the bytes term dominates
    options = SimulationOptions(bandwidth_gbps=bw, latency_us=lat)
    scaled = scaled_graphs(built_job("fsdp2", 2), m)
    run = simulate_graphs_run(scaled.sources, scaled.graphs, options)
    s = run.schedule
    rs = [s.end[i] - s.start[i] for i in range(len(s.nodes))
          if s.nodes[i].name == "gloo:all_reduce" and s.rank[i] == 0]
    assert rs == [pytest.approx(collective_time(AR, BLOCK, m, bw, lat))]
    assert rs[0] == pytest.approx(2 * (m - 1) * lat + 2 * (m - 1) / m * BLOCK / (bw * 1e3))

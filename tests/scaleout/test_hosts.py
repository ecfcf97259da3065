"""Ranks sharing a host's cores (--ranks-per-host/--cores-per-host): the CPU
stretch rule, its invariants, and that extrapolate, simulate --world-size
and the replay of the extrapolated files apply the same factor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import NodeType, attr_dict
from pt2chakra.rules.conventions import (
    SCALEOUT_CPU_STRETCH_ATTR,
    SCALEOUT_HOP_DELAY_ATTR,
    scaled_world,
)
from pt2chakra.scaleout.api import extrapolate, scaled_graphs
from pt2chakra.scaleout.hosts import NO_SHARING, HostSharing, scheduler_slice_us
from pt2chakra.simulation import SimulationOptions, simulate, simulate_graphs_run
from pt2chakra.simulation.durations import MIN_HANDOFFS_MEASURED, spread_per_handoff

sizes = st.integers(1, 4096)
hosts = st.builds(HostSharing, st.integers(1, 256), st.integers(1, 128))


@given(hosts, sizes, sizes)
def test_no_stretch_while_every_rank_has_a_core(h: HostSharing, n: int, m: int) -> None:
    on_host = max(min(n, h.ranks_per_host), min(m, h.ranks_per_host))
    assert h.cores_per_host is not None
    if on_host <= h.cores_per_host:
        assert h.cpu_stretch(n, m) == 1.0


@given(hosts, sizes, sizes, sizes)
def test_stretch_grows_with_the_ranks_and_inverts(h: HostSharing, n: int, m: int,
                                                  k: int) -> None:
    lo, hi = sorted((m, k))
    assert h.cpu_stretch(n, lo) <= h.cpu_stretch(n, hi)
    assert h.cpu_stretch(n, n) == 1.0
    assert h.cpu_stretch(n, m) * h.cpu_stretch(m, n) == pytest.approx(1.0)
    # never more than the ranks per core of a full host
    assert h.cpu_stretch(n, m) <= max(1.0, h.ranks_per_host / (h.cores_per_host or 1))


@given(sizes, sizes)
def test_default_is_one_rank_per_host(n: int, m: int) -> None:
    assert NO_SHARING.cpu_stretch(n, m) == 1.0
    assert HostSharing(cores_per_host=1).cpu_stretch(n, m) == 1.0  # one rank per host
    assert HostSharing(ranks_per_host=64).cpu_stretch(n, m) == 1.0  # cores unknown


def test_processor_sharing_of_a_crowded_host() -> None:
    """8 ranks on one host of 2 cores: each rank gets a quarter of a core;
    recorded with 2 ranks there (a core each), the CPU time stretches x4;
    from 4 ranks (half a core each), x2."""
    bed = HostSharing(ranks_per_host=8, cores_per_host=2)
    assert bed.cpu_stretch(2, 8) == 4.0
    assert bed.cpu_stretch(4, 8) == 2.0
    assert bed.cpu_stretch(2, 3) == 1.5
    assert bed.cpu_stretch(8, 1024) == 1.0  # more hosts, as full as before


def _stretch_of(path: Path) -> object:
    md, _ = read_et(path)
    return attr_dict(md.attrs).get(SCALEOUT_CPU_STRETCH_ATTR)


def test_extrapolate_writes_the_stretch(gloo_ranks: list[Path], tmp_path: Path) -> None:
    bed = HostSharing(ranks_per_host=8, cores_per_host=2)
    summary = extrapolate(gloo_ranks, 8, tmp_path / "x", hosts=bed)
    assert summary.cpu_stretch == 4.0 and "CPU time x4" in summary.describe()
    assert {_stretch_of(tmp_path / f"x.{r}.et") for r in range(8)} == {4.0}
    # no sharing asked: no attribute (N -> N stays byte-identical)
    extrapolate(gloo_ranks, 8, tmp_path / "y")
    assert _stretch_of(tmp_path / "y.0.et") is None
    # a chain from the extrapolated files keeps the factor from the recorded 2
    extrapolate(sorted(tmp_path.glob("x.*.et")), 4, tmp_path / "z", hosts=bed)
    md, _ = read_et(tmp_path / "z.3.et")
    world = scaled_world(attr_dict(md.attrs))
    assert world is not None and world.recorded == 2 and world.cpu_stretch == 2.0


def _direct(ranks: list[Path], m: int, h: HostSharing) -> float:
    scaled = scaled_graphs(ranks, m, hosts=h)
    opts = SimulationOptions().scaled_out(scaled.graphs)
    return simulate_graphs_run(scaled.sources, scaled.graphs, opts).result.predicted_step_us


def test_same_step_from_the_files_and_directly(gloo_ranks: list[Path], tmp_path: Path) -> None:
    bed = HostSharing(ranks_per_host=8, cores_per_host=2)
    extrapolate(gloo_ranks, 8, tmp_path / "x", hosts=bed)
    full = simulate(sorted(tmp_path.glob("x.*.et")), SimulationOptions(calibrate=True))
    direct = _direct(gloo_ranks, 8, bed)
    assert abs(direct / full.predicted_step_us - 1) < 0.01


def _no_wakeups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HostSharing, "hop_delay_us", lambda self, world_size: 0.0)


def test_stretch_is_the_cpu_scale(gloo_ranks: list[Path], monkeypatch: pytest.MonkeyPatch,
                                  ) -> None:
    """The shared host's step, its collectives' wake-ups left out, is the
    unshared one with its CPU time x4, the --cpu-scale 4 what-if (one rule
    for ops and the gaps between them)."""
    _no_wakeups(monkeypatch)
    bed = HostSharing(ranks_per_host=8, cores_per_host=2)
    shared = _direct(gloo_ranks, 8, bed)
    scaled = scaled_graphs(gloo_ranks, 8)
    opts = SimulationOptions(cpu_scale=(4.0,)).scaled_out(scaled.graphs)
    what_if = simulate_graphs_run(scaled.sources, scaled.graphs, opts).result.what_if
    assert len(what_if) == 1
    assert shared == pytest.approx(what_if[0].predicted_step_us, rel=1e-9)
    assert shared > _direct(gloo_ranks, 8, NO_SHARING)


@given(hosts, sizes)
def test_wakeups_only_where_the_cores_are_crowded(h: HostSharing, m: int) -> None:
    assert h.cores_per_host is not None
    crowded = h.share(m) > 1.0
    assert (h.hop_delay_us(m) > 0.0) == crowded
    if crowded:
        assert h.hop_delay_us(m) == scheduler_slice_us(h.cores_per_host)
    assert NO_SHARING.hop_delay_us(m) == 0.0


def test_scheduler_slice_is_the_kernel_default() -> None:
    """EEVDF's base slice, 0.75 ms x (1 + log2 cores), the cores capped at 8."""
    assert [scheduler_slice_us(c) for c in (1, 2, 3, 4, 8, 64)] == \
        [750.0, 1500.0, 1500.0, 2250.0, 3000.0, 3000.0]


def _hop_delay_of(path: Path) -> object:
    md, _ = read_et(path)
    return attr_dict(md.attrs).get(SCALEOUT_HOP_DELAY_ATTR)


def test_extrapolate_writes_the_wakeup_delay(gloo_ranks: list[Path], tmp_path: Path) -> None:
    bed = HostSharing(ranks_per_host=8, cores_per_host=2)
    extrapolate(gloo_ranks, 8, tmp_path / "x", hosts=bed)
    assert {_hop_delay_of(tmp_path / f"x.{r}.et") for r in range(8)} == {1500.0}
    extrapolate(gloo_ranks, 2, tmp_path / "same", hosts=bed)  # N -> N: nothing new
    assert _hop_delay_of(tmp_path / "same.0.et") is None
    extrapolate(gloo_ranks, 8, tmp_path / "y")  # no sharing asked
    assert _hop_delay_of(tmp_path / "y.0.et") is None
    extrapolate(sorted(tmp_path.glob("x.*.et")), 4, tmp_path / "z", hosts=bed)
    md, _ = read_et(tmp_path / "z.0.et")
    world = scaled_world(attr_dict(md.attrs))
    assert world is not None and world.recorded == 2 and world.hop_delay_us == 1500.0


def test_wakeups_lengthen_the_step_by_at_most_their_sum(
        gloo_ranks: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each collective of the 8-rank job on crowded cores ends 7 wake-ups
    later (a ring's hand-offs): the step grows, by no more than the rank's
    collectives' wake-ups added up."""
    bed = HostSharing(ranks_per_host=8, cores_per_host=2)
    woken = _direct(gloo_ranks, 8, bed)
    extrapolate(gloo_ranks, 8, tmp_path / "x", hosts=bed)
    _md, nodes = read_et(tmp_path / "x.0.et")
    collectives = sum(1 for n in nodes if n.type == NodeType.COMM_COLL_NODE)
    _no_wakeups(monkeypatch)
    plain = _direct(gloo_ranks, 8, bed)
    assert scheduler_slice_us(2) <= woken - plain <= collectives * 7 * scheduler_slice_us(2)


def test_cli(gloo_ranks: list[Path]) -> None:
    proc = run_cli("simulate", *gloo_ranks, "--world-size", "8", "--ranks-per-host", "8",
                   "--cores-per-host", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["predicted_step_us"] == \
        pytest.approx(_direct(gloo_ranks, 8, HostSharing(8, 2)), rel=1e-9)


@pytest.mark.parametrize("args,words", [
    (["--world-size", "8", "--ranks-per-host", "8"], "needs --cores-per-host"),
    (["--world-size", "8", "--cores-per-host", "2"], "needs --ranks-per-host"),
    (["--ranks-per-host", "8", "--cores-per-host", "2"], "applies with --world-size"),
])
def test_refusals_are_one_line(gloo_ranks: list[Path], args: list[str], words: str) -> None:
    proc = run_cli("simulate", *gloo_ranks, *args)
    assert proc.returncode == 2
    assert_one_line_failure(proc, words)


def test_extrapolate_refuses_half_the_hosts(gloo_ranks: list[Path], tmp_path: Path) -> None:
    proc = run_cli("extrapolate", *gloo_ranks, "--world-size", "4", "-o", str(tmp_path / "x"),
                   "--ranks-per-host", "4")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "needs --cores-per-host")
    assert not list(tmp_path.iterdir())


times = st.floats(0, 1e7, allow_nan=False)


@given(st.lists(st.tuples(times, times), min_size=2, max_size=16), st.integers(0, 64), times)
def test_spread_per_handoff(spans: list[tuple[float, float]], handoffs: int, shift: float) -> None:
    """The wake-up a recording shows: unmoved by a common shift of the clock,
    never negative, none for a short chain or a participant that did not wait."""
    starts = [s for s, _d in spans]
    ends = [s + d for s, d in spans]
    got = spread_per_handoff(starts, ends, handoffs)
    if handoffs < MIN_HANDOFFS_MEASURED or min(ends) < max(starts):
        assert got is None
        return
    assert got is not None and got >= 0
    moved = spread_per_handoff([s + shift for s in starts], [e + shift for e in ends], handoffs)
    assert moved == pytest.approx(got, abs=1e-6 * (1 + shift))
    assert got * handoffs == pytest.approx(max(ends) - min(ends))


def test_a_crowded_recording_is_marked(gloo_ranks: list[Path], tmp_path: Path) -> None:
    """Recorded 2 ranks on one core (crowded already): the files say so, and
    the replay then takes the wake-up the recording shows where it can."""
    one_core = HostSharing(ranks_per_host=8, cores_per_host=1)
    extrapolate(gloo_ranks, 8, tmp_path / "x", hosts=one_core)
    md, _ = read_et(tmp_path / "x.0.et")
    world = scaled_world(attr_dict(md.attrs))
    assert world is not None and world.recorded_crowded and world.hop_delay_us == 750.0
    extrapolate(gloo_ranks, 8, tmp_path / "y", hosts=HostSharing(8, 2))
    md, _ = read_et(tmp_path / "y.0.et")
    world = scaled_world(attr_dict(md.attrs))
    assert world is not None and not world.recorded_crowded

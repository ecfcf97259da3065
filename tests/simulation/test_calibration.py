"""The network-model calibration (simulate --calibrate): the fit recovers a
known alpha-beta model, never goes negative, moves only the bandwidth-bound
part, and the replay uses it on the gloo DDP sample."""

from __future__ import annotations

import math

import pytest
from helpers import ROOT, assert_one_line_failure, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.conversion.api import convert
from pt2chakra.simulation import SimulationOptions, calibrate_recorded, simulate
from pt2chakra.simulation.calibration import (
    Calibration,
    CommSample,
    backend_samples,
    fit,
    link_shares,
)
from pt2chakra.simulation.network import cost_factors

AR, AG, BC = int(CollectiveType.ALL_REDUCE), int(CollectiveType.ALL_GATHER), \
    int(CollectiveType.BROADCAST)
SIZES = (4, 8, 1 << 16, 1 << 20, 4 << 20, 16 << 20)
GLOO = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"


def _samples(overhead: float, latency: float, gbps: float, n: int = 2,
             noise: tuple[float, ...] = (1.0,)) -> list[CommSample]:
    truth = Calibration(overhead, latency, gbps, "ring", 0, 0.0)
    out = []
    for k, (ctype, size) in enumerate((t, s) for t in (AR, AG, BC) for s in SIZES):
        out.append(CommSample(ctype, size, n, truth.time_us(ctype, size, n)
                              * noise[k % len(noise)]))
    return out


@settings(max_examples=60, deadline=None)
@given(overhead=st.floats(0.0, 5e3), latency=st.floats(0.0, 500.0),
       gbps=st.floats(0.05, 50.0), n=st.integers(2, 8))
def test_fit_recovers_alpha_beta(overhead: float, latency: float, gbps: float, n: int) -> None:
    cal = fit(_samples(overhead, latency, gbps, n))
    assert cal is not None and cal.rel_error < 1e-6
    for ctype, size in ((AR, 64 << 20), (BC, 4), (AG, 1 << 20)):
        want = Calibration(overhead, latency, gbps, "ring", 0, 0.0).time_us(ctype, size, n)
        assert cal.time_us(ctype, size, n) == pytest.approx(want, rel=1e-6, abs=1e-6)
    assert cal.bandwidth_gbps == pytest.approx(gbps, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(overhead=st.floats(0.0, 5e3), latency=st.floats(0.0, 500.0),
       gbps=st.floats(0.05, 50.0),
       noise=st.lists(st.floats(0.5, 2.0), min_size=1, max_size=7))
def test_fit_is_non_negative_and_monotone(overhead: float, latency: float, gbps: float,
                                          noise: list[float]) -> None:
    """Whatever the noise: no negative parameter, more bytes never faster,
    more bandwidth never slower."""
    cal = fit(_samples(overhead, latency, gbps, noise=tuple(noise)))
    assert cal is not None
    assert cal.overhead_us >= 0 and cal.latency_us >= 0 and cal.bandwidth_gbps > 0
    times = [cal.time_us(AR, s, 2) for s in SIZES]
    assert times == sorted(times)
    scaled = [cal.time_us(AR, 16 << 20, 2, bandwidth_scale=x) for x in (0.25, 1, 4)]
    assert scaled == sorted(scaled, reverse=True)


def test_bandwidth_scale_moves_only_the_wire_part() -> None:
    cal = Calibration(overhead_us=1000.0, latency_us=0.0, bandwidth_gbps=1.0,
                      algorithm="ring", samples=1, rel_error=0.0)
    base = cal.time_us(AR, 1 << 20, 2)  # 1000 us fixed + 1048.576 us on the wire
    assert cal.time_us(AR, 1 << 20, 2, bandwidth_scale=4) == pytest.approx(1000 + 1048.576 / 4)
    assert cal.time_us(AR, 1 << 20, 2, bandwidth_scale=4) > base / 4  # the naive what-if
    # given bandwidth / latency replace the fitted ones; the overhead stays
    steps, _ = cost_factors(AR, 2)
    assert cal.time_us(AR, 0, 2, bandwidth_gbps=2.0, latency_us=5.0) == 1000 + steps * 5


def test_fit_of_one_size_puts_it_in_the_overhead() -> None:
    """Nothing to tell bytes from overhead: no byte cost is invented."""
    cal = fit([CommSample(BC, 4, 2, 100.0), CommSample(BC, 4, 2, 120.0)])
    assert cal is not None and math.isinf(cal.bandwidth_gbps)
    assert 100 < cal.time_us(BC, 4, 2) < 120  # between the two (relative-error weights)
    assert cal.time_us(BC, 1 << 30, 2) == cal.time_us(BC, 4, 2)


def test_fit_without_samples() -> None:
    assert fit([]) is None
    assert fit([CommSample(AR, 1 << 20, 2, 0.0)]) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 1e4)), max_size=8))
def test_link_shares_add_up_to_the_busy_time(spans: list[tuple[float, float]]) -> None:
    """Shares never exceed an interval's length, and add up to the time the
    link was busy (the union of the intervals)."""
    intervals = [(min(a, b), max(a, b)) for a, b in spans]
    shares = link_shares(intervals)
    for (s, e), share in zip(intervals, shares):
        assert -1e-9 <= share <= e - s + 1e-6
    union, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        union += max(0.0, e - max(s, end))
        end = max(end, e)
    assert sum(shares) == pytest.approx(union, abs=1e-6)


def test_backend_samples_take_the_participants_minimum() -> None:
    names = {0: "gloo:all_reduce", 1: "gloo:all_reduce", 2: "nccl:broadcast", 3: "nccl:broadcast"}
    out = backend_samples(names, [[0, 1], [2, 3]], {0: 50.0, 1: 30.0, 2: 7.0, 3: 9.0},
                          {0: AR, 1: AR, 2: BC, 3: BC}, {0: 100, 1: 100, 2: 4, 3: 4})
    assert out == {"gloo": [CommSample(AR, 100, 2, 30.0)], "nccl": [CommSample(BC, 4, 2, 7.0)]}


@pytest.fixture(scope="module")
def gloo_ets(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("gloo_cal")
    paths = []
    for r in (0, 1):
        paths.append(str(out / f"g{r}.et"))
        convert(f"{GLOO}.rank{r}.host_et.json.gz", f"{GLOO}.rank{r}.kineto.json.gz", paths[-1])
    return paths


def test_calibrated_replay_of_the_gloo_sample(gloo_ets: list[str]) -> None:
    plain = simulate(gloo_ets)
    cal = simulate(gloo_ets, SimulationOptions(calibrate=True, bandwidth_scale=[0.25, 1, 4]))
    assert plain.network_model is None
    assert cal.network_model is not None and cal.network_model.startswith("gloo: calibrated")
    steps = [w.predicted_step_us for w in cal.what_if]
    assert steps == sorted(steps, reverse=True)  # more bandwidth is never slower
    # a calibrated model describes the recording: the replay stays near it
    assert abs(cal.predicted_step_us / cal.measured_step_us - 1) < 0.25


def test_calibrated_bandwidth_scale_moves_less_than_naive(gloo_ets: list[str]) -> None:
    """Part of the sample's collectives is fixed cost (0.25 MB buckets on an
    unshaped loopback: the fit finds an overhead per collective besides the
    bytes), so the calibrated what-if moves the step less than dividing
    every collective by the scale."""
    naive = simulate(gloo_ets, SimulationOptions(bandwidth_scale=[0.25]))
    cal = simulate(gloo_ets, SimulationOptions(calibrate=True, bandwidth_scale=[1, 0.25]))
    cal_slowdown = cal.what_if[1].predicted_step_us / cal.what_if[0].predicted_step_us
    naive_slowdown = naive.what_if[0].predicted_step_us / naive.predicted_step_us
    assert 1.0 <= cal_slowdown < naive_slowdown
    fitted = calibrate_recorded(gloo_ets, "ring", 1).calibrations["gloo"]
    assert fitted.overhead_us > 0


def test_calibrate_is_refused_for_the_astra_sim_consumer(gloo_ets: list[str]) -> None:
    proc = run_cli("simulate", "--consumer", "astra-sim", "--calibrate", *gloo_ets)
    assert_one_line_failure(proc, "--calibrate")


def test_calibrate_on_the_command_line(gloo_ets: list[str]) -> None:
    proc = run_cli("simulate", *gloo_ets, "--calibrate", "--bandwidth-scale", "0.5", "1")
    assert proc.returncode == 0 and "network model: gloo: calibrated ring" in proc.stdout


def test_one_large_collective_is_bytes_over_a_bandwidth() -> None:
    """One bucket holding every gradient (33.65 MB in 1.49 s on 2 ranks):
    the recording cannot tell bytes from a fixed cost, and the link's
    physics says it is bytes; its time grows with the ring's bytes per
    link instead of staying a cost that does not grow with the ranks."""
    size, took = 33_650_000, 1.49e6
    cal = fit([CommSample(AR, size, 2, took)], assumed_latency_us=20.0)
    assert cal is not None and cal.overhead_us == 0 and cal.latency_us == 20.0
    steps, factor = cost_factors(AR, 2)
    assert cal.bandwidth_gbps == pytest.approx(factor * size / (took - steps * 20.0) / 1e3)
    assert cal.time_us(AR, size, 2) == pytest.approx(took)
    # 2(M-1)/M of the bucket crosses each link: 1.5x at 4 ranks, 1.75x at 8
    assert cal.time_us(AR, size, 4) == pytest.approx(1.5 * (took - 40) + 6 * 20, rel=1e-6)
    assert cal.time_us(AR, size, 8) > cal.time_us(AR, size, 4)
    assert any("latency" in a for a in cal.assumed) and "assumed:" in cal.describe()


def test_buckets_of_nearly_one_size_are_not_split_into_a_fixed_cost() -> None:
    """Three 4 MB buckets (3.9, 4.0, 4.1 MB): their sizes cannot tell a
    fixed cost from bytes, so the bytes carry their time."""
    cal = fit([CommSample(AR, s, 2, s / 23.0) for s in (3_900_000, 4_000_000, 4_100_000)],
              assumed_latency_us=20.0)
    assert cal is not None and cal.overhead_us == 0 and not math.isinf(cal.bandwidth_gbps)
    assert cal.time_us(AR, 4_000_000, 8) > 1.5 * cal.time_us(AR, 4_000_000, 2)


def test_well_spread_sizes_are_fitted_with_nothing_assumed() -> None:
    cal = fit(_samples(200.0, 10.0, 2.0))
    assert cal is not None and cal.assumed == ()


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(1 << 18, 64 << 20), min_size=1, max_size=4),
       mbit=st.floats(20.0, 10_000.0), spread=st.floats(1.0, 8.0),
       noise=st.lists(st.floats(0.9, 1.1), min_size=1, max_size=4))
def test_a_bandwidth_bound_job_never_gets_faster_with_more_ranks(
        sizes: list[int], mbit: float, spread: float, noise: list[float]) -> None:
    """Over random recordings of a job bound by its link (its all-reduces
    of sizes within a factor 8, on a link of 20 Mbit/s to 10 Gbit/s, at 2
    ranks): the time of each at M ranks never falls as M grows, and at 8
    ranks it grows as the ring's bytes per link do (1.75x; 1.3x allowing
    the noise), not kept as a cost that does not grow."""
    gbps = mbit / 8 / 1e3
    base = min(sizes)
    recorded = [int(base * (1 + (spread - 1) * k / max(1, len(sizes) - 1)))
                for k in range(len(sizes))]
    samples = [CommSample(AR, s, 2, s / (gbps * 1e3) * noise[k % len(noise)])
               for k, s in enumerate(recorded)]
    cal = fit(samples, assumed_latency_us=20.0)
    assert cal is not None
    for s in recorded:
        times = [cal.time_us(AR, s, m) for m in (2, 3, 4, 6, 8, 16)]
        assert times == sorted(times)
        assert times[4] >= 1.3 * 0.9 * s / (gbps * 1e3)

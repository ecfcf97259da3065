"""Network-model calibration from the recording itself.

Without a network model a bandwidth what-if divides each collective's
measured time by the scale, as if all of it were bytes on the wire. Part of
it is not: a fixed cost per collective (the backend's bookkeeping, a thread
hand-off) and a latency per algorithm step. This module fits, per backend,

    t = overhead + steps(type, n, algorithm) * latency + factor(type, n, algorithm) * bytes / B

(the cost factors of :mod:`pt2chakra.simulation.network`) to the recorded
collectives, so that a bandwidth what-if moves only the part that is
bandwidth-bound.

Two things in a recording are not the collective's own time, and are taken
out before the fit:

* waiting for a late peer: on ranks that share a clock each participant is
  timed from the collective's last arrival to its own end (the replay runs it
  so; ``durations.transfer_spans``), without one from its own arrival; a
  matched collective's time is the minimum over its participants (the first
  to be done after every member came; without a shared clock, the last to
  arrive, who waited for nobody);
* sharing the link: collectives that a rank runs at the same time (gloo's
  worker threads, several NCCL communicators) share its bandwidth, so each
  is credited with ``dt / k`` of every moment when ``k`` of them run.

The fit minimises the squared error relative to each collective's class
(same type, size and rank count: a 4-byte broadcast and a 16 MB all-reduce
count alike, and within a class the fit aims at the mean, not below it as a
per-sample relative error would) with every parameter non-negative: an
exact active-set search over the three parameters.

A fit is only as good as what the recording can tell. Bytes are told from
a fixed cost only by collectives whose bytes on the link differ (by
``BYTES_SPREAD_TO_FIT``): one bucket holding every gradient, or three of one
size, cannot. There the link's physics fills the gap: when the bytes over
the time are a rate a link can have (``SLOWEST_LINK_GBPS``), the time is
bytes over a bandwidth (fitted) after a latency per step (assumed,
``ASSUMED_LATENCY_US``) and no fixed cost (assumed), so a large transfer's
time grows with the ranks as its ring's bytes do instead of becoming a
cost that does not; otherwise (4-byte broadcasts) it stays a fixed cost.
``Calibration.assumed`` names what was assumed, and from what.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from pt2chakra.names import comm_backend
from pt2chakra.simulation.network import cost_factors

if TYPE_CHECKING:
    from pt2chakra.rules.rendezvous import RendezvousKey
    from pt2chakra.simulation.prepared import PreparedGraph

# Below this many microseconds a recorded collective says nothing reliable
# about the link (clock resolution of the traces is 1 us).
MIN_SAMPLE_US = 1.0
# A pivot below this is a parameter the samples cannot determine (e.g. the
# per-step latency when every collective has the same number of steps): it
# is left at zero rather than fitted to noise.
SINGULAR_PIVOT = 1e-12
PARAMETERS = 3  # overhead, latency per step, seconds per byte
OVERHEAD, LATENCY, PER_BYTE = range(PARAMETERS)
# The byte term is fitted only when some collective put this many times the
# bytes on its link of another: below it, a recording's noise (a few % per
# collective) moves the split between bytes and a fixed cost by more than
# the fixed cost is (three 4 MB buckets put the whole 1.7 s into it).
BYTES_SPREAD_TO_FIT = 2.0
# No link a job runs on is slower than 10 Mbit/s Ethernet (1.25 MB/s): a
# collective whose bytes over its time are a slower rate was not bound by
# its bytes (4-byte broadcasts of 100 us), and its time stays a fixed cost.
SLOWEST_LINK_GBPS = 10e6 / 8 / 1e9
# One message's latency per algorithm step where the recording cannot tell
# it: a TCP message one way on a Linux LAN (gloo: netperf's TCP_RR round
# trip on 10 GbE is ~40 us), an NCCL step over NVLink or InfiniBand (a few
# us; nccl-tests' small all-reduce over 8 ranks' 14 steps takes ~30-60 us).
ASSUMED_LATENCY_US = {"gloo": 20.0}
ASSUMED_LATENCY_OTHER_US = 3.0
# The range a prediction is given over an assumed latency: from none to this
# many times the assumed one (a loopback's few microseconds to a busy LAN's).
ASSUMED_LATENCY_RANGE = (0.0, 2.0)
# How the calibration line says what it assumed (``assumes`` reads it).
ASSUMED_MARK = "; assumed: "
Row = tuple[tuple[float, float, float], float, float]  # (columns, duration, its class mean)


@dataclass(frozen=True, slots=True)
class CommSample:
    """One recorded collective, as the fit sees it."""

    comm_type: int
    size_bytes: int
    ranks: int
    duration_us: float


@dataclass(frozen=True, slots=True)
class Calibration:
    """A fitted alpha-beta model of one backend's collectives."""

    overhead_us: float  # per collective, independent of size and steps
    latency_us: float  # per algorithm step
    bandwidth_gbps: float  # GB/s (1e9 bytes/s); inf when no byte cost was seen
    algorithm: str
    samples: int
    rel_error: float  # root-mean-square relative residual of the fit
    # The terms the recording could not pin down, each with its assumed
    # value and why (empty: all three fitted)
    assumed: tuple[str, ...] = ()

    def time_us(self, comm_type: int, size_bytes: int, n: int, bandwidth_scale: float = 1.0,
                bandwidth_gbps: float | None = None, latency_us: float | None = None) -> float:
        """Microseconds for one collective; ``bandwidth_gbps`` / ``latency_us``
        replace the fitted values (the fixed overhead stays: it is the
        backend's, not the network's)."""
        steps, factor = cost_factors(comm_type, n, self.algorithm, size_bytes)
        bw, lat = self.link(bandwidth_gbps, latency_us)
        bw *= bandwidth_scale
        wire = 0.0 if math.isinf(bw) else factor * size_bytes / (bw * 1e3)
        return self.overhead_us + steps * lat + wire

    def link(self, bandwidth_gbps: float | None = None, latency_us: float | None = None,
             ) -> tuple[float, float]:
        """(bandwidth, latency): those given, else the fitted ones."""
        return (self.bandwidth_gbps if bandwidth_gbps is None else bandwidth_gbps,
                self.latency_us if latency_us is None else latency_us)

    def describe(self) -> str:
        bw = "no byte cost seen" if math.isinf(self.bandwidth_gbps) else \
            f"bandwidth {self.bandwidth_gbps:.3g} GB/s"
        return (f"calibrated {self.algorithm}: overhead {self.overhead_us:.3g} us, latency "
                f"{self.latency_us:.3g} us/step, {bw} ({self.samples} collectives, "
                f"rms error {self.rel_error:.0%})"
                + (f"{ASSUMED_MARK}{'; '.join(self.assumed)}" if self.assumed else ""))


class RecordedCalibration(NamedTuple):
    """``simulate --calibrate``'s fit of a set of ranks, with what it was
    fitted to (the ASTRA-sim job fits its network to the same collectives;
    ``api.calibrate_recorded`` makes it)."""

    prepared: PreparedGraph
    matched: dict[RendezvousKey, list[int]]  # collectives more than one rank reached
    calibrations: dict[str, Calibration]  # per backend
    # participant -> the wake-ups its scaled-out collective adds on crowded
    # hosts (durations.collective_wakeups; empty for recorded files)
    wakeups: dict[int, float] = {}


def assumes(network_model: str | None) -> bool:
    """Whether a replay's network line (``Calibration.describe`` of each
    backend) says the fit assumed a term the recording could not tell."""
    return network_model is not None and ASSUMED_MARK in network_model


def link_shares(intervals: Sequence[tuple[float, float]]) -> list[float]:
    """Each interval's share of the link: ``dt / k`` for every moment that
    ``k`` intervals (collectives of one rank) are open at once."""
    # At equal times openings come first: an empty interval then closes.
    events = sorted([(s, False, k) for k, (s, _e) in enumerate(intervals)]
                    + [(e, True, k) for k, (_s, e) in enumerate(intervals)])
    share = [0.0] * len(intervals)
    open_: set[int] = set()
    last = events[0][0] if events else 0.0
    for t, closes, k in events:
        if open_ and t > last:
            for j in open_:
                share[j] += (t - last) / len(open_)
        last = t
        if closes:
            open_.discard(k)
        else:
            open_.add(k)
    return share


def fit(samples: Iterable[CommSample], algorithm: str = "ring",
        assumed_latency_us: float = ASSUMED_LATENCY_OTHER_US) -> Calibration | None:
    """Fit overhead, latency per step and bandwidth to ``samples`` (None when
    none is usable); where their bytes on the link do not differ enough to
    tell bytes from a fixed cost, the link's physics fills the gap (see the
    module doc), with ``assumed_latency_us`` per step."""
    usable = [s for s in samples if s.duration_us >= MIN_SAMPLE_US]
    if not usable:
        return None
    rows: list[Row] = []
    for s, scale in zip(usable, _class_means(usable)):
        steps, factor = cost_factors(s.comm_type, s.ranks, algorithm, s.size_bytes)
        rows.append(((1.0, steps, factor * s.size_bytes), s.duration_us, scale))
    if not _bytes_identified(rows) and _bytes_bound(rows, assumed_latency_us):
        return _fit_bytes_only(rows, algorithm, assumed_latency_us)
    best: tuple[float, tuple[float, ...]] | None = None
    for active in _subsets():
        params = _weighted_lsq(rows, active)
        if params is None or min(params) < 0:
            continue
        err = _rel_sq_error(rows, params)
        if best is None or err < best[0] - 1e-15:
            best = (err, params)
    if best is None:
        return None
    err, (overhead, latency, per_byte) = best
    return Calibration(overhead_us=overhead, latency_us=latency,
                       bandwidth_gbps=1e-3 / per_byte if per_byte > 0 else math.inf,
                       algorithm=algorithm, samples=len(rows),
                       rel_error=math.sqrt(err / len(rows)))


def _bytes_identified(rows: Sequence[Row]) -> bool:
    """Whether the samples' bytes on the link differ enough to be told from
    a fixed cost (``BYTES_SPREAD_TO_FIT``)."""
    link = [x[PER_BYTE] for x, _t, _w in rows]
    return max(link) >= BYTES_SPREAD_TO_FIT * min(link)


def _bytes_bound(rows: Sequence[Row], latency_us: float) -> bool:
    """Whether the largest collective's bytes over its time, after its
    assumed latency, are a rate a link can have (``SLOWEST_LINK_GBPS``)."""
    x, _t, mean = max(rows, key=lambda r: r[0][PER_BYTE])
    wire_us = mean - x[LATENCY] * latency_us
    return x[PER_BYTE] > 0 and wire_us > 0 and x[PER_BYTE] / (wire_us * 1e3) >= SLOWEST_LINK_GBPS


def _fit_bytes_only(rows: Sequence[Row], algorithm: str, latency_us: float) -> Calibration:
    """Bytes over a bandwidth (fitted, relative to each class as ``fit``),
    after ``latency_us`` per step (assumed), no fixed cost (assumed)."""
    num = den = 0.0
    for x, t, w in rows:
        a = x[PER_BYTE] / w
        num += a * (t - x[LATENCY] * latency_us) / w
        den += a * a
    per_byte = max(num / den, 0.0) if den > 0 else 0.0
    params = (0.0, latency_us, per_byte)
    spread = "one size" if len({x[PER_BYTE] for x, _t, _w in rows}) == 1 else \
        f"sizes within {BYTES_SPREAD_TO_FIT:g}x"
    return Calibration(
        overhead_us=0.0, latency_us=latency_us,
        bandwidth_gbps=1e-3 / per_byte if per_byte > 0 else math.inf, algorithm=algorithm,
        samples=len(rows), rel_error=math.sqrt(_rel_sq_error(list(rows), params) / len(rows)),
        assumed=(f"latency {latency_us:g} us/step (a message's, ASSUMED_LATENCY_US: the "
                 f"recording cannot tell it)",
                 f"overhead 0 (bytes cannot be told from a fixed cost: {spread})"))


def _class_means(samples: list[CommSample]) -> list[float]:
    """Each sample's class mean duration (same type, size and rank count)."""
    groups: dict[tuple[int, int, int], list[float]] = {}
    for s in samples:
        groups.setdefault((s.comm_type, s.size_bytes, s.ranks), []).append(s.duration_us)
    return [statistics.fmean(groups[(s.comm_type, s.size_bytes, s.ranks)]) for s in samples]


def _subsets() -> list[tuple[int, ...]]:
    """Every non-empty set of free parameters, the largest first (the others
    are held at zero: the candidates of a non-negative least-squares fit)."""
    return [c for r in range(PARAMETERS, 0, -1)
            for c in itertools.combinations(range(PARAMETERS), r)]


def _weighted_lsq(rows: list[Row], active: tuple[int, ...]) -> tuple[float, ...] | None:
    """Least squares of the residual relative to the class mean over the
    ``active`` parameters (normal equations, columns scaled for
    conditioning); None if singular."""
    m = len(active)
    scale = [max((abs(x[j]) / w for x, _t, w in rows), default=0.0) or 1.0 for j in active]
    ata = [[0.0] * m for _ in range(m)]
    atb = [0.0] * m
    for x, t, w in rows:
        a = [x[j] / w / sc for j, sc in zip(active, scale)]
        for r in range(m):
            atb[r] += a[r] * t / w
            for c in range(m):
                ata[r][c] += a[r] * a[c]
    sol = _solve(ata, atb)
    if sol is None:
        return None
    params = [0.0] * PARAMETERS
    for j, v, sc in zip(active, sol, scale):
        params[j] = v / sc
    return tuple(params)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting (m <= 3)."""
    m = len(b)
    a = [row[:] + [b[r]] for r, row in enumerate(a)]
    for col in range(m):
        piv = max(range(col, m), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) < SINGULAR_PIVOT * max(1.0, max(abs(v) for v in a[piv])):
            return None
        a[col], a[piv] = a[piv], a[col]
        for r in range(m):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [v - f * w for v, w in zip(a[r], a[col])]
    return [a[r][m] / a[r][r] for r in range(m)]


def _rel_sq_error(rows: list[Row], params: tuple[float, ...]) -> float:
    return sum(((sum(p * v for p, v in zip(params, x)) - t) / w) ** 2 for x, t, w in rows)


def backend_samples(names: Mapping[int, str], members: Sequence[Sequence[int]],
                    shares: Mapping[int, float], comm_type: Mapping[int, int],
                    size_bytes: Mapping[int, int], ranks: Sequence[int] | None = None,
                    ) -> dict[str, list[CommSample]]:
    """Samples per backend: one per collective (``members``: the node
    indices of its participants), timed by the smallest link share among
    its participants that ``shares`` holds (one that did not wait for the
    others is left out of it; at least the last to arrive is in). ``ranks``: per
    collective, the rank count it was recorded at (default: its members; a
    scaled-out job's durations were recorded at fewer ranks than it has)."""
    out: dict[str, list[CommSample]] = {}
    for k, group in enumerate(members):
        first = group[0]
        sample = CommSample(comm_type=comm_type[first],
                            size_bytes=max(size_bytes[m] for m in group),
                            ranks=len(group) if ranks is None else ranks[k],
                            duration_us=min(shares[m] for m in group if m in shares))
        out.setdefault(comm_backend(names[first]), []).append(sample)
    return out


def fit_backends(samples: dict[str, list[CommSample]], algorithm: str = "ring",
                 per_backend: Mapping[str, str] | None = None,
                 assumed_latency_scale: float = 1.0) -> dict[str, Calibration]:
    """One calibration per backend that has usable samples; ``per_backend``
    names another algorithm for some backends (gloo's own, when scaling out);
    ``assumed_latency_scale`` moves the latency assumed where the recording
    cannot tell it (the prediction's range, ``ASSUMED_LATENCY_RANGE``)."""
    chosen = per_backend or {}
    fitted = {b: fit(s, chosen.get(b, algorithm),
                     ASSUMED_LATENCY_US.get(b, ASSUMED_LATENCY_OTHER_US) * assumed_latency_scale)
              for b, s in samples.items()}
    return {b: c for b, c in fitted.items() if c is not None}

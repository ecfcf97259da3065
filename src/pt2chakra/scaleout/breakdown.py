"""``simulate --world-size M``: the M-rank step from the distinct ranks only,
and the breakdown a user needs (compute, exposed communication, each
collective at M and how its time was obtained).

Why the clones need no replay: new ranks N..M-1 are copies of one recorded
rank, the representative, which is among the replayed ranks. The replay is
deterministic and a clone has the representative's nodes, durations and
dependencies; a collective starts when its last participant arrives. By
induction over the replay's events, each clone reaches every collective
when the representative does, so adding it never changes a collective's
start (the maximum of arrivals that already include the representative's)
and its own step equals the representative's. Only the group size changes
the result, and that is applied: every collective is timed at M ranks
(``simulation.durations.timed_ranks``). Each rank has its own link in the
model (a switch without contention), so clones do not share bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.names import comm_backend
from pt2chakra.scaleout.plan import ScalePlan
from pt2chakra.simulation import CollectiveRow, SimulationOptions, SimulationRun, collective_rows
from pt2chakra.simulation.calibration import ASSUMED_LATENCY_RANGE
from pt2chakra.simulation.network import (
    GLOO,
    SCALED_BACKENDS,
    cost_factors,
    gloo_segments_per_rank,
)

CLONES_NOTE = ("clones are not replayed: each reaches every collective when its representative "
               "does, so the step is the same (docs/SCALE_OUT.md)")


class CollectiveAtScale(msgspec.Struct, frozen=True):
    """One collective of the M-rank step."""

    name: str
    what: str
    size_bytes: int  # comm_size at M
    ranks: int  # M
    simulated_us: float
    critical: bool  # on the critical path
    timed_by: str  # algorithm, backend, model


class ScaleBreakdown(msgspec.Struct, frozen=True):
    """The M-rank prediction and where its time goes."""

    recorded_ranks: int
    world_size: int
    job_kind: str
    representative: int
    predicted_step_us: float
    recorded_step_us: float  # the step measured at N: the naive copy's prediction
    critical_path_us: dict[str, float]  # compute, CPU, exposed communication...
    network_model: str | None
    collectives: list[CollectiveAtScale]
    clones: str
    # The step over the latency the fit assumed (None: it assumed nothing)
    assumed_range_us: tuple[float, float] | None = None
    hosts: str = ""  # the hosts the M ranks run on, in words (empty: not described)
    scaling: str = "weak scaling"  # what changes (ScalePlan.scaling)
    retimed: list[str] = []  # what re-timing the ops on a shard did, in words
    # The step over the link CPU cost's measured range (None: no range)
    link_cost_range_us: tuple[float, float] | None = None

    def describe(self) -> str:
        n, m = self.recorded_ranks, self.world_size
        change = (self.predicted_step_us / self.recorded_step_us - 1) * 100 \
            if self.recorded_step_us > 0 else math.nan
        lines = ["", f"scale-out: {m} ranks from {n} recorded ({self.job_kind}, {self.scaling})",
                 f"  predicted step at {m} ranks: {self.predicted_step_us:.0f} us; recorded at "
                 f"{n}: {self.recorded_step_us:.0f} us (the naive copy), {change:+.1f} %",
                 f"  {self.clones}"]
        lines.extend(self.retimed)
        if self.network_model:
            lines.append(f"  network: {self.network_model}")
        if self.hosts:
            lines.append(f"  hosts: {self.hosts}")
        if self.assumed_range_us is not None:
            lo, hi = self.assumed_range_us
            lines.append(f"  over the assumed latency (x{ASSUMED_LATENCY_RANGE[0]:g} to "
                         f"x{ASSUMED_LATENCY_RANGE[1]:g}): the step is {lo:.0f} to {hi:.0f} us")
        if self.link_cost_range_us is not None:
            lo, hi = self.link_cost_range_us
            lines.append(f"  over the link CPU cost (the ranks' own to the host's busy time per "
                         f"byte): the step is {lo:.0f} to {hi:.0f} us")
        if self.critical_path_us:
            parts = ", ".join(f"{k} {v:.0f} us" for k, v in self.critical_path_us.items())
            lines.append(f"  on the critical path: {parts}")
        lines.append(f"  {'collective':<18} {'bytes':>10} {'us at M':>9}  crit  timed by")
        for c in self.collectives:
            lines.append(f"  {c.name:<18} {c.size_bytes:>10} {c.simulated_us:>9.1f}  "
                         f"{'yes ' if c.critical else '    '}  {c.timed_by}")
        return "\n".join(lines)


def algorithm_for(backend: str, options: SimulationOptions) -> str:
    """The algorithm a backend's collectives are timed by when scaling out."""
    if options.bandwidth_gbps is not None and not options.calibrate:
        return options.algorithm
    return SCALED_BACKENDS.get(backend, options.algorithm)


def timed_by(row: CollectiveRow, ranks: int, options: SimulationOptions) -> str:
    """How a collective's time at ``ranks`` was obtained, in words."""
    backend = comm_backend(row.name)
    algorithm = algorithm_for(backend, options)
    try:
        ctype = int(CollectiveType[row.what.upper()])
    except KeyError:
        ctype = -1
    steps, factor = cost_factors(ctype, ranks, algorithm, row.size_bytes)
    how = f"{algorithm} {row.what}"
    if algorithm == GLOO and ctype == int(CollectiveType.ALL_REDUCE):
        how += f" ({gloo_segments_per_rank(row.size_bytes, ranks)} segments/rank)"
    source = "--bandwidth/--latency" if options.bandwidth_gbps is not None and \
        not options.calibrate else "fitted to the recording (--calibrate)"
    return (f"{backend or 'backend?'}: {how}, {steps:g} latency steps, {factor:.3g} x bytes "
            f"per link; {source}")


def recorded_step_us(plan: ScalePlan, run: SimulationRun) -> float:
    """The step recorded at N: the replay's measured step, except where the
    plan re-timed the ops (a tensor-parallel degree change moves each
    rank's step window with its clock): then the recorded window's."""
    if plan.tensor_parallel is not None and plan.recorded_step_us is not None:
        return plan.recorded_step_us
    return run.result.measured_step_us


def breakdown(plan: ScalePlan, run: SimulationRun, options: SimulationOptions,
              assumed_range_us: tuple[float, float] | None = None,
              hosts: str = "",
              link_cost_range_us: tuple[float, float] | None = None,
              retimed: Sequence[str] = ()) -> ScaleBreakdown:
    """The breakdown of a ``simulate --world-size`` run (``options`` as
    replayed: ``SimulationOptions.scaled_out``)."""
    rows = collective_rows(run.simulator, run.schedule, options.base_config().link_streams())
    cp = run.result.critical_path
    clones = (f"ranks {plan.recorded}..{plan.target - 1} are clones of recorded rank "
              f"{plan.representative}; {CLONES_NOTE}") if plan.target > plan.recorded \
        else "no clone"
    return ScaleBreakdown(
        recorded_ranks=plan.recorded, world_size=plan.target, job_kind=plan.job_kind,
        representative=plan.representative, predicted_step_us=run.result.predicted_step_us,
        recorded_step_us=recorded_step_us(plan, run),
        critical_path_us=dict(cp.by_node_type) if cp else {},
        network_model=run.result.network_model,
        collectives=[CollectiveAtScale(r.name, r.what, r.size_bytes, plan.target,
                                       r.simulated_us, r.critical,
                                       timed_by(r, plan.target, options)) for r in rows],
        clones=clones, assumed_range_us=assumed_range_us, hosts=hosts,
        link_cost_range_us=link_cost_range_us, scaling=plan.scaling(), retimed=list(retimed))


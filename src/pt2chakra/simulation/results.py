"""What the simulator is asked and what it answers: one simulation setting
(``SimConfig``), the report of a run (``SimulationResult`` with its ranks,
lanes, critical path and what-if rows) and the per-node ``Schedule`` that
timelines and plots draw. Plain structs: every output of ``simulate`` (text,
``--json``, timeline) is made from these."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import msgspec

from pt2chakra.chakra.records import ChakraNode
from pt2chakra.rules.conventions import STEP_SPAN

# The names of the node categories, by code (``Schedule.category``; the codes
# are prepared.py's CPU_OP, GPU_COMPUTE, GPU_MEMCPY, COMM, GPU_CPU_GAP).
CATEGORY_NAMES = ("cpu_op", "gpu_compute", "gpu_memcpy", "communication", "cpu_gap")


class SlowRank(msgspec.Struct, frozen=True):
    """A straggler what-if: one rank's host (its CPU ops, the gaps between
    them, its launches) ``cpu`` times slower, its link ``link`` times slower
    (each collective and transfer it joins waits for its slowest member: a
    ring is paced by its slowest hop)."""

    rank: int
    cpu: float = 1.0
    link: float = 1.0

    def label(self) -> str:
        parts = [f"cpu x{self.cpu:g}" if self.cpu != 1.0 else "",
                 f"link /{self.link:g}" if self.link != 1.0 else ""]
        return f"rank {self.rank} " + ", ".join(p for p in parts if p)


class SimConfig(msgspec.Struct, frozen=True):
    """One simulation setting. Defaults replay the measured durations."""

    compute_scale: float = 1.0  # GPU kernel durations (not memcpy, not comm)
    cpu_scale: float = 1.0  # CPU op durations and replayed gaps
    # Scale only the CPU time inside ops whose name matches (op_scale.py); None: all of it.
    cpu_scale_ops: str | None = None
    bandwidth_scale: float = 1.0  # network bandwidth (comm durations / this)
    comm_streams: int = 0  # 0: as recorded; N: collectives round-robin on N streams
    bandwidth_gbps: float | None = None  # with latency_us: network model
    latency_us: float | None = None
    algorithm: str = "ring"  # network model: "ring" or "tree"
    align: str = "auto"  # rank start offsets: "auto", "recorded", "together"
    # Collective times from a network model fitted to the recording (see
    # calibration.py); a rank's collectives then share its link one at a time.
    calibrate: bool = False
    # The profiler's cost taken out of each recorded CPU op, in microseconds
    # (profiler_overhead.py); 0: the step as recorded, profiler included.
    profiler_overhead_us: float = 0.0
    slow_rank: SlowRank | None = None  # a straggler what-if (None: every rank as recorded)
    # The latency the calibration assumes where the recording cannot tell it,
    # as a factor on its named constant (calibration.ASSUMED_LATENCY_US).
    assumed_latency_scale: float = 1.0

    def label(self) -> str:
        cpu_ops = f" (ops /{self.cpu_scale_ops}/)" if self.cpu_scale_ops else ""
        parts = [f"compute x{self.compute_scale:g}", f"cpu x{self.cpu_scale:g}{cpu_ops}",
                 f"bandwidth x{self.bandwidth_scale:g}",
                 f"comm streams {self.comm_streams or 'as recorded'}"]
        if self.profiler_overhead_us:
            parts.append(f"profiler's cost out {self.profiler_overhead_us:.2f} us/op")
        if self.slow_rank is not None:
            parts.append(f"slow {self.slow_rank.label()}")
        return ", ".join(parts)

    def link_streams(self) -> int:
        """Communication streams to replay on: calibrated collectives share a
        rank's link, one at a time, unless the what-if asks otherwise."""
        return self.comm_streams or (1 if self.calibrate else 0)


class LaneStats(msgspec.Struct):
    lane: str
    busy_us: float
    idle_us: float
    nodes: int
    idle_gaps: int  # number of idle intervals between the rank's start and its last op


class RankResult(msgspec.Struct):
    rank: int
    source: str
    nodes: int
    predicted_step_us: float
    measured_step_us: float
    error_pct: float | None
    start_offset_us: float
    lanes: list[LaneStats]
    unfinished: int = 0
    # what "measured" means for the rank (rules.conventions: period or span)
    step_definition: str = STEP_SPAN


class CriticalPath(msgspec.Struct):
    length_us: float
    nodes: int
    rank_crossings: int  # times the path moves to another rank (collectives)
    by_node_type: dict[str, float]  # category -> microseconds
    by_edge_kind: dict[str, float]  # kind of the edge that made each step critical -> us
    top_nodes: list[dict[str, Any]]  # longest nodes on the path


class WhatIf(msgspec.Struct):
    compute_scale: float
    cpu_scale: float
    bandwidth_scale: float
    comm_streams: int
    predicted_step_us: float
    speedup: float  # baseline predicted / this predicted
    slow_rank: str = ""  # SlowRank.label() of a straggler what-if, else ""


class ProfilerOverhead(msgspec.Struct):
    """The profiler's cost a ``--without-profiler`` replay took out, and
    where the figure came from (profiler_overhead.py)."""

    figure: str  # as --profiler-overhead reads it back, e.g. "32.95us/op"
    per_op_us: float
    source: str  # "fit" (--real-step or meta.json), "given", or "estimate"
    source_detail: str  # the option, file or method the figure came from
    estimate: bool  # from the trace alone: an estimate, not a measurement
    profiled_step_us: float  # the replay as recorded, the profiler's cost in
    ops: int  # recorded CPU ops the figure applies to
    taken_out_us: float  # thread time taken out, all threads together
    real_step_us: float | None = None  # the step the fit aimed at
    fit_low: str | None = None  # figures from here ...
    fit_high: str | None = None  # ... to here reach it (None: every larger one too)
    reachable: bool = True
    note: str = ""


class ScaledStep(msgspec.Struct):
    """Files that ``extrapolate`` wrote: a prediction at ``world_size`` ranks
    of a job recorded at ``recorded_world_size``. Their recorded step is the
    smaller job's (the naive copy), not a measurement at ``world_size``."""

    recorded_world_size: int
    world_size: int


class SimulationResult(msgspec.Struct):
    ranks: list[RankResult]
    predicted_step_us: float
    measured_step_us: float
    error_pct: float | None
    align: str
    network_model: str | None
    critical_path: CriticalPath | None = None
    what_if: list[WhatIf] = []
    inferred_stream_waits: int = 0
    # --without-profiler: the figure used and the step with the profiler in
    profiler_overhead: ProfilerOverhead | None = None
    # Network what-ifs on collectives they cannot time as the others (lone.py:
    # no peer given, no size recorded): note lines, or "" (left out of --json)
    lone_note: str = ""
    # Scaled-out files: the "measured" step and the error are against the
    # recording at fewer ranks (left out of --json when None)
    scaled: ScaledStep | None = None

    @property
    def measured_label(self) -> str:
        """What the measured column is: a measurement, or for scaled-out
        files the recorded step at fewer ranks (``step_notes`` says so)."""
        return "measured" if self.scaled is None else "recorded"

    @property
    def error_label(self) -> str:
        return "error" if self.scaled is None else "vs recorded"

    def summary(self) -> str:
        lines = []
        measured, error = self.measured_label, self.error_label
        for r in self.ranks:
            err = f"{r.error_pct:+.2f} %" if r.error_pct is not None else "n/a (no timing)"
            lines.append(f"rank {r.rank} ({os.path.basename(r.source)}): predicted "
                         f"{r.predicted_step_us:.0f} us, {measured} {r.measured_step_us:.0f} us, "
                         f"{error} {err}, {r.nodes} nodes on {len(r.lanes)} lanes")
        err = f"{self.error_pct:+.2f} %" if self.error_pct is not None else "n/a"
        lines.append(f"step: predicted {self.predicted_step_us:.0f} us, {measured} "
                     f"{self.measured_step_us:.0f} us, {error} {err}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = msgspec.to_builtins(self)
        if self.profiler_overhead is None:  # runs without it print what they always did
            del doc["profiler_overhead"]
        if not self.lone_note:
            del doc["lone_note"]
        if self.scaled is None:
            del doc["scaled"]
        return doc


class Schedule(msgspec.Struct):
    """Per-node simulated times of one run (for timelines and plots)."""

    nodes: list[ChakraNode]
    rank: list[int]
    lane: list[int]
    lane_names: list[tuple[int, str, str]]  # (rank, "cpu"|"gpu", label)
    start: Sequence[float]  # the replay's arrays (``ReplayRun``: read like lists)
    end: Sequence[float]
    category: list[int]  # per node: its category's code (CATEGORY_NAMES)
    critical: set[int]
    rank_origin: list[float]  # per rank: its simulated start
    step_start: list[float]  # per rank: recorded step start (trace clock)
    align: str
    rank_label: list[int]
    rank_timed: list[bool] = []  # per rank: recorded start times (else no measured schedule)
    inclusive: list[float] = []  # per node: recorded inclusive time (else its duration)


def measured_offset(schedule: Schedule, rank: int) -> float:
    """Value to subtract from a node's recorded start to place it on the
    simulated time axis of ``schedule``."""
    if schedule.align == "recorded":
        return min(schedule.step_start, default=0.0)
    return schedule.step_start[rank] - schedule.rank_origin[rank]

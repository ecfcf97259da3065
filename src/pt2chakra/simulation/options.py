"""What a replay can be asked for, defined once: ``ReplaySettings`` holds the
settings every replay of a rank set takes (the network, the what-if knobs,
the alignment, the timeline and plot, ``force``), and both replays build on
it: our own (``SimulationOptions``) and ASTRA-sim's consumer model
(``astra.AstraSimOptions``, which refuses those ASTRA-sim has no notion of).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import scaled_world
from pt2chakra.simulation.prepare import metadata_attrs
from pt2chakra.simulation.results import SimConfig, SlowRank

# The what-if knobs and the value of each that asks nothing (the baseline).
WHAT_IF_BASELINE = {"compute_scale": 1.0, "cpu_scale": 1.0, "bandwidth_scale": 1.0,
                    "comm_streams": 0}


class ReplaySettings(msgspec.Struct, frozen=True, kw_only=True):
    """The settings of a replay of ranks, shared by every replay. Each
    what-if knob takes a list of values; every combination other than the
    baseline (all 1, comm streams as recorded) becomes a what-if row."""

    bandwidth_gbps: float | None = None  # network model (needs latency_us too)
    latency_us: float | None = None
    compute_scale: Sequence[float] = (1.0,)  # GPU kernel durations
    cpu_scale: Sequence[float] = (1.0,)  # CPU op durations and CPU gaps
    bandwidth_scale: Sequence[float] = (1.0,)
    comm_streams: Sequence[int] = (0,)  # 0: as recorded; N: collectives round-robin on N
    slow_rank: Sequence[SlowRank] = ()  # straggler what-ifs (results.SlowRank), each a row
    timeline: str | None = None  # Chrome/Perfetto JSON of the simulated + measured schedule
    plot: str | None = None  # .png/.svg/.pdf per-lane picture
    align: str = "auto"  # rank start offsets: auto, recorded, together
    infer_waits: bool = True  # cross-stream waits inferred from timing
    force: bool = False  # replay traces validate calls unsound, and accept nodes that never run

    def asks_what_if(self) -> bool:
        """Whether some knob asks for more than the baseline."""
        return bool(self.slow_rank) or any(list(getattr(self, knob)) != [baseline]
                                           for knob, baseline in WHAT_IF_BASELINE.items())

    def slow_values(self) -> list[SlowRank | None]:
        """The straggler of each what-if row: those asked, else none."""
        return list(self.slow_rank) or [None]

    def check_network_and_scales(self) -> None:
        """The knobs every replay takes: bandwidth positive and finite,
        latency finite and not negative, every what-if scale positive and
        finite."""
        if self.bandwidth_gbps is not None and not 0 < self.bandwidth_gbps < math.inf:
            raise InputError("--bandwidth", "must be a positive finite number")
        if self.latency_us is not None and not 0 <= self.latency_us < math.inf:
            raise InputError("--latency", "must be a finite number, 0 or more")
        for name in ("compute_scale", "cpu_scale", "bandwidth_scale"):
            if not all(0 < v < math.inf for v in getattr(self, name)):
                raise InputError(f"--{name.replace('_', '-')}", "scales must be positive and finite")
        if not all(0 < v < math.inf for s in self.slow_rank for v in (s.cpu, s.link)):
            raise InputError("--slow-rank", "factors must be positive and finite")


class SimulationOptions(ReplaySettings, frozen=True, kw_only=True):
    """Everything ``simulate`` can be asked for: the shared settings
    (``ReplaySettings``) and what only our own replay has."""

    algorithm: str = "ring"
    cpu_scale_ops: str | None = None  # --cpu-scale only inside ops matching this (op_scale.py)
    calibrate: bool = False  # collectives from a network model fitted to the recording
    # Take the profiler's cost out (profiler_overhead.py): the figure from
    # real_step_ms (fitted), profiler_overhead (given), a meta.json beside the
    # traces, or the trace alone. Either figure source implies it.
    without_profiler: bool = False
    real_step_ms: float | None = None
    profiler_overhead: str | None = None  # e.g. "32.95us/op"
    # ``simulate --write-et PREFIX``: the replay of the one setting asked
    # written as PREFIX.<rank>.et (predicted_et.py) by simulate/simulate_run,
    # with the timeline and plot, all or none; its paths in
    # ``SimulationRun.written`` (simulate_baseline, the replay alone, writes none).
    write_et: str | None = None

    def strips_profiler(self) -> bool:
        return self.without_profiler or self.real_step_ms is not None or \
            self.profiler_overhead is not None

    def base_config(self) -> SimConfig:
        return SimConfig(bandwidth_gbps=self.bandwidth_gbps, latency_us=self.latency_us,
                         algorithm=self.algorithm, align=self.align, calibrate=self.calibrate,
                         cpu_scale_ops=self.cpu_scale_ops)

    def scaled_out(self, graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                   ) -> SimulationOptions:
        """These options as a replay of ``graphs`` runs them: collectives of a
        scaled-out job (recorded at N ranks, standing for M) cannot keep their
        recorded times, so without ``--bandwidth/--latency`` they are timed by
        the network model fitted to the recording (``--calibrate``)."""
        if self.calibrate or self.bandwidth_gbps is not None:
            return self
        worlds = (scaled_world(metadata_attrs(md)) for md, _ in graphs)
        if any(w is not None and w.rescaled for w in worlds):
            return msgspec.structs.replace(self, calibrate=True)
        return self

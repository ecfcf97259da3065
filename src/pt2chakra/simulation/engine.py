"""The simulator's entry points: read a set of ranks (``chakra.ranks``: in
rank order, refused when it cannot be one job), prepare them once and replay
them under one setting or many.

The parts, in the order a run goes through them: prepare.py (graphs into
the flat arrays of prepared.py, with thread_timing.py and inferred_waits.py),
durations.py (durations per setting), event_loop.py (the replay
loop; the model is in its docstring), rank_results.py (each rank's predicted
step and lanes), critical_path.py, results.py (the setting and the report's
types).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from pt2chakra.chakra.lean_read import read_et_apart
from pt2chakra.chakra.ranks import Inputs, RankSet, open_rank_set
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.files import gc_paused
from pt2chakra.rules.conventions import INCLUSIVE_ATTR, error_pct
from pt2chakra.simulation.critical_path import critical_path_of
from pt2chakra.simulation.event_loop import run_replay
from pt2chakra.simulation.prepare import SIM_ATTRS, prepare_graphs
from pt2chakra.simulation.prepared import PreparedGraph
from pt2chakra.simulation.rank_results import overall_step, rank_results
from pt2chakra.simulation.results import (
    ProfilerOverhead,
    ScaledStep,
    Schedule,
    SimConfig,
    SimulationResult,
    SlowRank,
    WhatIf,
)

log = logging.getLogger(__name__)


class Simulator:
    """Prepared ranks, ready to run under several settings."""

    def __init__(self, graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                 sources: Sequence[str] | None = None, infer_waits: bool = True,
                 refuse_deadlock: bool = True, ranks: Sequence[int] | None = None) -> None:
        """``refuse_deadlock=False`` (``--force``): ranks whose collectives
        cannot all meet replay anyway, the stuck nodes reported as never run.
        ``ranks``: each graph's rank (its ``RankSet``'s); see ``prepare_graphs``."""
        self.graphs = graphs
        self.infer_waits = infer_waits
        self.refuse_deadlock = refuse_deadlock
        self.sources = list(sources) if sources else [f"rank{r}" for r in range(len(graphs))]
        self.ranks = ranks
        self._prepared: dict[int, PreparedGraph] = {}
        # --without-profiler: the figure, resolved once (profiler_overhead.py)
        self.profiler_overhead: ProfilerOverhead | None = None

    def prepared(self, comm_streams: int) -> PreparedGraph:
        p = self._prepared.get(comm_streams)
        if p is None:
            with gc_paused():
                p = prepare_graphs(self.graphs, self.sources, comm_streams, self.infer_waits,
                                   self.refuse_deadlock, ranks=self.ranks)
            self._prepared[comm_streams] = p
        return p

    def predict(self, cfg: SimConfig) -> float:
        p = self.prepared(cfg.link_streams())
        with gc_paused():
            run, align, _ = run_replay(p, cfg)
            results = rank_results(p, run)
            return overall_step(p, run, results, align)[0]

    def run(self, cfg: SimConfig | None = None, critical_path: bool = True,
            ) -> tuple[SimulationResult, Schedule]:
        with gc_paused():
            return self._run_once(cfg or SimConfig(), critical_path)

    def _run_once(self, cfg: SimConfig, critical_path: bool) -> tuple[SimulationResult, Schedule]:
        p = self.prepared(cfg.link_streams())
        verbose = log.isEnabledFor(logging.INFO)
        run, align, model = run_replay(p, cfg, verbose=verbose)
        results = rank_results(p, run)
        predicted, measured = overall_step(p, run, results, align)
        cp, on_path = critical_path_of(p, run) if critical_path else (None, set())
        result = SimulationResult(
            ranks=results, predicted_step_us=predicted, measured_step_us=measured,
            error_pct=error_pct(predicted, measured),
            align=align, network_model=model, critical_path=cp,
            inferred_stream_waits=p.inferred_edges, scaled=_scaled_step(p))
        schedule = Schedule(nodes=p.nodes, rank=p.rank, lane=p.lane, lane_names=p.lane_names,
                            start=run.start, end=run.end, category=p.cat, critical=on_path,
                            rank_origin=run.origin, step_start=p.step_start, align=align,
                            rank_label=p.rank_label, rank_timed=p.rank_timed,
                            inclusive=p.incl)
        return result, schedule


def _scaled_step(p: PreparedGraph) -> ScaledStep | None:
    """The worlds of scaled-out files (None: files as recorded)."""
    world = next((s for s in p.scaled if s is not None and s.rescaled), None)
    return None if world is None else ScaledStep(world.recorded, world.world_size)


class SimulationRun(NamedTuple):
    """A replay with what it came from: the simulator (its prepared ranks,
    ready for more settings), the result and the per-node schedule, and the
    predicted ``.et`` files written (``SimulationOptions.write_et``)."""

    simulator: Simulator
    result: SimulationResult
    schedule: Schedule
    written: tuple[str, ...] = ()


def what_if(sim: Simulator, base: SimConfig, compute: Sequence[float], cpu: Sequence[float],
            bandwidth: Sequence[float], streams: Sequence[int], baseline: float,
            slow: Sequence[SlowRank | None] = (None,)) -> list[WhatIf]:
    """Predicted step for every combination of the given knob values (and
    straggler, ``slow``)."""
    out = []
    for c, u, b, s, straggler in itertools.product(compute, cpu, bandwidth, streams, slow):
        cfg = msgspec.structs.replace(base, compute_scale=c, cpu_scale=u, bandwidth_scale=b,
                                      comm_streams=s, slow_rank=straggler)
        predicted = sim.predict(cfg)
        out.append(WhatIf(compute_scale=c, cpu_scale=u, bandwidth_scale=b, comm_streams=s,
                          predicted_step_us=predicted,
                          speedup=baseline / predicted if predicted > 0 else 0.0,
                          slow_rank=straggler.label() if straggler is not None else ""))
    return out


def read_lean(path: str) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """One file's metadata and nodes, with only what the simulator reads
    (``SIM_ATTRS``; no inputs, outputs or control dependencies; the inclusive
    time held apart, see ``LeanNodes``)."""
    return read_et_apart(path, SIM_ATTRS, INCLUSIVE_ATTR)


def load(ranks: Inputs | RankSet) -> list[tuple[GlobalMetadata, list[ChakraNode]]]:
    """Every rank's file read lean (``read_lean``), in rank order (paths are
    opened as a ``RankSet`` first: pair the result with its ``paths``)."""
    ranks = open_rank_set(ranks)
    with gc_paused():  # millions of containers, no cycles: see gc_paused
        return ranks.load(read_lean)


def simulate_graphs(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                    sources: Sequence[str] | None = None, config: SimConfig | None = None,
                    ) -> SimulationResult:
    """Replay one or more ranks together."""
    return Simulator(graphs, sources).run(config or SimConfig())[0]


def simulate_files(paths: Sequence[str], config: SimConfig | None = None) -> SimulationResult:
    ranks = open_rank_set(paths)
    return Simulator(load(ranks), ranks.paths, ranks=ranks.ranks).run(config or SimConfig())[0]


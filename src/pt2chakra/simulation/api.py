"""The simulator's public API: replay ``.et`` files under one setting, plus
what-if settings, and optionally draw the schedule.

    from pt2chakra.simulation.api import SimulationOptions, simulate
    result = simulate(["rank0.et", "rank1.et"], SimulationOptions(compute_scale=[0.5, 1]))
    print(result.summary())
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from pt2chakra.atomic import refuse_overwriting_inputs
from pt2chakra.errors import InputError
from pt2chakra.simulation.engine import (
    Schedule,
    SimConfig,
    SimulationResult,
    Simulator,
    load,
    order_by_rank,
    what_if,
)
from pt2chakra.simulation.network import ALGORITHMS

ALIGNMENTS = ("auto", "recorded", "together")


class SimulationOptions(msgspec.Struct, frozen=True):
    """Everything ``simulate`` can be asked for. Each what-if knob takes a
    list of values; every combination other than the baseline (all 1, comm
    streams as recorded) becomes a row of ``SimulationResult.what_if``."""

    bandwidth_gbps: float | None = None  # network model (needs latency_us too)
    latency_us: float | None = None
    algorithm: str = "ring"
    align: str = "auto"
    compute_scale: Sequence[float] = (1.0,)
    cpu_scale: Sequence[float] = (1.0,)
    bandwidth_scale: Sequence[float] = (1.0,)
    comm_streams: Sequence[int] = (0,)
    infer_waits: bool = True
    timeline: str | None = None  # Chrome/Perfetto JSON of the simulated + measured schedule
    plot: str | None = None  # .png/.svg/.pdf per-lane picture

    def base_config(self) -> SimConfig:
        return SimConfig(bandwidth_gbps=self.bandwidth_gbps, latency_us=self.latency_us,
                         algorithm=self.algorithm, align=self.align)

    def asks_what_if(self) -> bool:
        knobs = (self.compute_scale, self.cpu_scale, self.bandwidth_scale, self.comm_streams)
        return any(list(k) != [d] for k, d in zip(knobs, (1.0, 1.0, 1.0, 0)))


def check_options(options: SimulationOptions, inputs: Sequence[str]) -> None:
    """Refuse bad settings and unusable output paths before the (possibly
    long) replay, naming the option at fault."""
    if (options.bandwidth_gbps is None) != (options.latency_us is None):
        raise InputError("--bandwidth/--latency", "the network model needs both")
    if options.bandwidth_gbps is not None and options.bandwidth_gbps <= 0:
        raise InputError("--bandwidth", "must be positive")
    if options.algorithm not in ALGORITHMS:
        raise InputError("--algorithm", f"must be one of {', '.join(ALGORITHMS)}")
    if options.align not in ALIGNMENTS:
        raise InputError("--align", f"must be one of {', '.join(ALIGNMENTS)}")
    for name in ("compute_scale", "cpu_scale", "bandwidth_scale"):
        if any(v <= 0 for v in getattr(options, name)):
            raise InputError(f"--{name.replace('_', '-')}", "scales must be positive")
    if any(n < 0 for n in options.comm_streams):
        raise InputError("--comm-streams", "must be 0 (as recorded) or more")
    if options.plot:
        from pt2chakra.simulation.views import check_plot_path

        check_plot_path(options.plot)
    for out in (options.timeline, options.plot):
        if out:
            refuse_overwriting_inputs(out, list(inputs))
    if options.timeline and options.plot and \
            os.path.realpath(options.timeline) == os.path.realpath(options.plot):
        raise InputError(options.plot, "--timeline and --plot name the same file")


def replay(paths: Sequence[str | os.PathLike[str]], options: SimulationOptions,
           ) -> tuple[Simulator, SimulationResult, Schedule]:
    """The baseline replay of ``options`` over the ranks' files (checked,
    ordered by rank), with the simulator kept for further settings and the
    per-node schedule (what the HTML report draws)."""
    names = [os.fspath(p) for p in paths]
    check_options(options, names)
    names, graphs = order_by_rank(names, load(names))
    sim = Simulator(graphs, names, infer_waits=options.infer_waits)
    result, schedule = sim.run(options.base_config())
    return sim, result, schedule


def simulate(paths: Sequence[str | os.PathLike[str]],
             options: SimulationOptions | None = None) -> SimulationResult:
    """Replay the ranks' ``.et`` files together (one file per rank), run the
    what-if settings, and write the timeline / plot when asked."""
    options = options or SimulationOptions()
    sim, result, schedule = replay(paths, options)
    base = options.base_config()
    if options.asks_what_if():
        rows = what_if(sim, base, options.compute_scale, options.cpu_scale,
                       options.bandwidth_scale, options.comm_streams,
                       baseline=result.predicted_step_us)
        result = msgspec.structs.replace(result, what_if=rows)
    if options.timeline:
        from pt2chakra.simulation.views import write_chrome_trace

        write_chrome_trace(schedule, options.timeline)
    if options.plot:
        from pt2chakra.simulation.views import write_plot

        write_plot(schedule, options.plot)
    return result

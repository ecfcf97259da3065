"""The simulator's public API: replay ``.et`` files under one setting, plus
what-if settings, and optionally draw the schedule and write the replay
back as ``.et`` files (``SimulationOptions.write_et``).

    from pt2chakra.simulation import SimulationOptions, simulate
    result = simulate(["rank0.et", "rank1.et"], SimulationOptions(compute_scale=[0.5, 1]))
    print(result.summary())
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import msgspec

from pt2chakra.atomic import StagedOutputs, check_outputs
from pt2chakra.chakra.ranks import Inputs, RankSet, open_rank_set, ranks_in_memory
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.errors import InputError
from pt2chakra.rules.checks import check_before_replay, cross_rank_problems, refuse_unsound
from pt2chakra.rules.conventions import ALIGNMENTS
from pt2chakra.simulation.calibration import RecordedCalibration
from pt2chakra.simulation.collective_table import SlowRankCollectives, collective_rows
from pt2chakra.simulation.durations import calibrate, collective_wakeups
from pt2chakra.simulation.engine import SimulationRun, Simulator, load, what_if
from pt2chakra.simulation.event_loop import participants_of, shares_clock
from pt2chakra.simulation.lone import lone_collectives, lone_note, unsized_note
from pt2chakra.simulation.network import ALGORITHMS
from pt2chakra.simulation.op_scale import compile_ops
from pt2chakra.simulation.options import SimulationOptions
from pt2chakra.simulation.predicted_et import check_prefix, predicted_et_config, write_predicted_et
from pt2chakra.simulation.prepare import prepare_graphs
from pt2chakra.simulation.prepared import PreparedGraph
from pt2chakra.simulation.profiler_overhead import (
    OPTION,
    REAL_STEP_OPTION,
    parse_figure,
    resolve,
)
from pt2chakra.simulation.results import ProfilerOverhead, Schedule, SimConfig, SimulationResult


def check_options(options: SimulationOptions, inputs: Sequence[str]) -> None:
    """Refuse bad settings and unusable output paths before the (possibly
    long) replay, naming the option at fault."""
    if not inputs:
        raise InputError("simulate", "no .et file given: nothing to replay")
    if (options.bandwidth_gbps is None) != (options.latency_us is None):
        raise InputError("--bandwidth/--latency", "the network model needs both")
    options.check_network_and_scales()
    if options.algorithm not in ALGORITHMS:
        raise InputError("--algorithm", f"must be one of {', '.join(ALGORITHMS)}")
    if options.align not in ALIGNMENTS:
        raise InputError("--align", f"must be one of {', '.join(ALIGNMENTS)}")
    if any(n < 0 for n in options.comm_streams):
        raise InputError("--comm-streams", "must be 0 (as recorded) or more")
    if options.real_step_ms is not None and options.profiler_overhead is not None:
        raise InputError(REAL_STEP_OPTION, f"fits the figure that {OPTION} gives: give one")
    if options.real_step_ms is not None and not 0 < options.real_step_ms < math.inf:
        raise InputError(REAL_STEP_OPTION, "must be a positive number of milliseconds")
    if options.profiler_overhead is not None:
        parse_figure(options.profiler_overhead)
    if options.cpu_scale_ops is not None:
        compile_ops(options.cpu_scale_ops)
        if list(options.cpu_scale) == [1.0]:
            raise InputError("--cpu-scale-ops", "says which ops --cpu-scale scales: give "
                             "--cpu-scale too")
    if options.plot:
        from pt2chakra.simulation.views import check_plot_path

        check_plot_path(options.plot)
    check_outputs(inputs, [options.timeline or None, options.plot or None])


def simulate_baseline(paths: Sequence[str | os.PathLike[str]], options: SimulationOptions,
                      ) -> tuple[Simulator, SimulationResult, Schedule]:
    """The baseline setting of ``options`` simulated over the ranks' files (checked,
    ordered by rank), with the simulator kept for further settings and the
    per-node schedule (what the HTML report draws)."""
    names = [os.fspath(p) for p in paths]
    check_options(options, names)
    ranks = open_rank_set(names, options.force)
    graphs = load(ranks)
    refuse_unsound_set(ranks.paths, graphs, options.force, ranks.ranks)
    return simulate_graphs_baseline(ranks.paths, graphs, options, ranks.ranks)


def simulate_graphs_baseline(names: Sequence[str],
                             graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                             options: SimulationOptions, ranks: Sequence[int] | None = None,
                             ) -> tuple[Simulator, SimulationResult, Schedule]:
    """``simulate_baseline`` of graphs already loaded, checked and ordered by rank
    (``simulate --world-size`` builds them in memory); ``ranks``: their
    ``RankSet``'s ranks (see ``prepare_graphs`` when None)."""
    options = options.scaled_out(graphs)
    sim = Simulator(graphs, names, infer_waits=options.infer_waits,
                    refuse_deadlock=not options.force, ranks=ranks)
    base = base_config(sim, names, options)
    result, schedule = sim.run(base)
    if asks_network(options):
        note = network_notes(sim.prepared(base.link_streams()), options, len(names))
        if note:
            result = msgspec.structs.replace(result, lone_note=note)
    _refuse_unfinished(result, options.force)
    if base.profiler_overhead_us or options.strips_profiler():
        result = msgspec.structs.replace(result, profiler_overhead=_overhead(sim, names, options))
    return sim, result, schedule


def asks_network(options: SimulationOptions) -> bool:
    """Whether some setting of ``options`` changes collective times."""
    return options.bandwidth_gbps is not None or options.calibrate or \
        any(b != 1.0 for b in options.bandwidth_scale)


def network_notes(p: PreparedGraph, options: SimulationOptions, ranks_given: int) -> str:
    """The notes on collectives the network what-ifs cannot time as the
    others (lone.py): no other given rank reaches them, or no rank records
    their size; one per line, "" when there is none."""
    matched = participants_of(p)
    notes = [lone_note(p, lone_collectives(p, matched), ranks_given)]
    if options.bandwidth_gbps is not None or options.calibrate:
        notes.append(unsized_note(p, matched))
    return "\n".join(n for n in notes if n)


def base_config(sim: Simulator, names: Sequence[str], options: SimulationOptions) -> SimConfig:
    """The baseline setting, with the profiler's cost to take out when asked."""
    base = options.base_config()
    if not options.strips_profiler():
        return base
    got = _overhead(sim, names, options)
    return msgspec.structs.replace(base, profiler_overhead_us=got.per_op_us)


def _overhead(sim: Simulator, names: Sequence[str], options: SimulationOptions,
              ) -> ProfilerOverhead:
    """The figure ``options`` ask for, worked out once per simulator."""
    got = sim.profiler_overhead
    if got is None:
        base = options.base_config()
        got = sim.profiler_overhead = resolve(
            sim.prepared(base.link_streams()),
            lambda c: sim.predict(msgspec.structs.replace(base, profiler_overhead_us=c)),
            names, options.real_step_ms, options.profiler_overhead)
    return got


def refuse_unsound_set(paths: Sequence[str],
                       graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                       force: bool, ranks: Sequence[int] | None = None) -> None:
    """Before a replay: each file's errors that stop a replay, then what
    ``validate`` calls an error across the ranks (a collective that is
    another type, size or count on another rank: ranks of different jobs, or
    a broken recording). The replay would match such collectives anyway and
    print a normal step, so the set is refused unless ``force``."""
    if ranks is None:  # graphs built in memory: their metadata, else their position
        ranks = ranks_in_memory([(path, md) for path, (md, _nodes) in zip(paths, graphs)])
    for rank, path, (metadata, nodes) in zip(ranks, paths, graphs):
        refuse_unsound(check_before_replay(path, rank, metadata, nodes), force, blocking_only=True)
    refuse_unsound(cross_rank_problems([(path, metadata, nodes) for path, (metadata, nodes)
                                        in zip(paths, graphs)], ranks), force)


def simulate(paths: Sequence[str | os.PathLike[str]],
             options: SimulationOptions | None = None) -> SimulationResult:
    """Replay the ranks' ``.et`` files together (one file per rank), run the
    what-if settings, and write the timeline, plot and replayed ``.et``
    files when asked (``simulate_run`` also says which files it wrote)."""
    return simulate_run(paths, options).result


def simulate_run(paths: Sequence[str | os.PathLike[str]],
                 options: SimulationOptions | None = None,
                 staged: StagedOutputs | None = None) -> SimulationRun:
    """``simulate``, keeping the simulator and the schedule, and writing the
    replay as ``.et`` files when ``options.write_et`` asks (``simulate
    --write-et``). The timeline, plot and those files are written all or
    none: into ``staged`` for the caller to commit with its own outputs,
    else committed here."""
    options = options or SimulationOptions()
    _check_write_et(options, paths)
    sim, result, schedule = simulate_baseline(paths, options)
    return _finish(sim, result, schedule, options, staged)


def slow_rank_collectives(run: SimulationRun, options: SimulationOptions,
                          ) -> list[SlowRankCollectives]:
    """Per straggler what-if of ``options`` (``--slow-rank``), the collectives
    of the replay with that rank slowed: who arrives last at each and how
    long the others wait for it, the effect the what-if row sums up. Empty
    for one rank or no straggler."""
    if len(run.result.ranks) < 2 or not options.slow_rank:
        return []
    sim = run.simulator
    base = base_config(sim, [r.source for r in run.result.ranks], options)
    out = []
    for slow in options.slow_rank:
        cfg = msgspec.structs.replace(base, slow_rank=slow)
        _result, schedule = sim.run(cfg, critical_path=False)
        out.append(SlowRankCollectives(slow.label(),
                                       collective_rows(sim, schedule, cfg.link_streams())))
    return out


def _check_write_et(options: SimulationOptions,
                   inputs: Sequence[str | os.PathLike[str]]) -> None:
    """Before the replay: ``write_et``'s folder exists, none of its files is
    an input, and the options ask one setting to write."""
    if options.write_et:
        check_prefix(options.write_et, inputs)
        predicted_et_config(options)


def _refuse_write_et_in_memory(options: SimulationOptions) -> None:
    """A replay of graphs in memory has no recorded files to write back
    (``simulate --world-size``: ``pt2chakra extrapolate`` writes the M-rank
    files)."""
    if options.write_et:
        raise InputError("--write-et", "writes the replayed ranks only; use pt2chakra "
                         "extrapolate for the M-rank files")


def simulate_graphs_run(names: Sequence[str],
                        graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                        options: SimulationOptions | None = None,
                        recorded: ProfilerOverhead | None = None) -> SimulationRun:
    """``simulate_run`` over graphs in memory (one per rank, ordered by
    rank); ``names`` label them in the report. ``recorded``: the profiler's
    figure ``recorded_figure`` worked out on the recorded ranks these
    graphs stand for (``options`` give it), named as its source."""
    options = options or SimulationOptions()
    _refuse_write_et_in_memory(options)
    check_options(options, names)
    refuse_unsound_set(list(names), graphs, options.force)
    sim, result, schedule = simulate_graphs_baseline(names, graphs, options)
    run = _finish(sim, result, schedule, options)
    return run._replace(result=_with_recorded_source(run.result, recorded))


def recorded_figure(paths: Sequence[str | os.PathLike[str]], options: SimulationOptions,
                    ) -> tuple[SimulationOptions, ProfilerOverhead | None]:
    """The first step of a replay of other graphs than the recorded ones
    (``--world-size``), before those are built: ``write_et`` refused, then the
    profiler's figure worked out on the recorded ranks (a real step is the
    recorded job's, so the fit is made there), and ``options`` giving it as a
    figure (both for ``simulate_graphs_run``). Unchanged when no figure is
    asked for or one is given."""
    _refuse_write_et_in_memory(options)
    if not options.strips_profiler() or options.profiler_overhead is not None:
        return options, None
    plain = SimulationOptions(align=options.align, infer_waits=options.infer_waits,
                              force=options.force, without_profiler=True,
                              real_step_ms=options.real_step_ms)
    _sim, result, _schedule = simulate_baseline(paths, plain)
    got = result.profiler_overhead
    assert got is not None  # asked for above
    return msgspec.structs.replace(options, real_step_ms=None,
                                   profiler_overhead=got.figure), got


def _with_recorded_source(result: SimulationResult, recorded: ProfilerOverhead | None,
                          ) -> SimulationResult:
    """The result of a replay given ``recorded_figure``'s figure, saying where
    the figure came from (its fit on the recorded ranks)."""
    got = result.profiler_overhead
    if recorded is None or got is None:
        return result
    moved = msgspec.structs.replace(
        recorded, profiled_step_us=got.profiled_step_us, ops=got.ops,
        taken_out_us=got.taken_out_us, real_step_us=None,
        source_detail=f"{recorded.source_detail}, on the recorded ranks",
        note=f"on the recorded ranks: {recorded.note}" if recorded.note else "")
    return msgspec.structs.replace(result, profiler_overhead=moved)


def _finish(sim: Simulator, result: SimulationResult, schedule: Schedule,
            asked: SimulationOptions, staged: StagedOutputs | None = None) -> SimulationRun:
    """The what-if rows, the timeline, the plot and the written replay of a
    baseline replay (the replay written under the setting ``asked`` gives)."""
    options = asked.scaled_out(sim.graphs)
    base = base_config(sim, [r.source for r in result.ranks], options)
    if options.asks_what_if():
        rows = what_if(sim, base, options.compute_scale, options.cpu_scale,
                       options.bandwidth_scale, options.comm_streams,
                       baseline=result.predicted_step_us, slow=options.slow_values())
        result = msgspec.structs.replace(result, what_if=rows)
    run = SimulationRun(sim, result, schedule)
    if staged is not None:
        return _write_outputs(run, options, asked, staged)
    if not (options.timeline or options.plot or asked.write_et):
        return run
    with StagedOutputs() as own:
        run = _write_outputs(run, options, asked, own)
        own.commit()
    return run


def _write_outputs(run: SimulationRun, options: SimulationOptions, asked: SimulationOptions,
                   staged: StagedOutputs) -> SimulationRun:
    """The timeline, the plot and ``write_et``'s files, staged together."""
    _write_views(run.schedule, options, staged)
    if not asked.write_et:
        return run
    written = write_predicted_et(run, asked, asked.write_et, staged)
    return run._replace(written=tuple(written))


def _write_views(schedule: Schedule, options: SimulationOptions, staged: StagedOutputs) -> None:
    if options.timeline:
        from pt2chakra.simulation.views import write_chrome_trace

        write_chrome_trace(schedule, staged.stage(options.timeline))
    if options.plot:
        from pt2chakra.simulation.views import write_plot

        write_plot(schedule, staged.stage(options.plot))


def _refuse_unfinished(result: SimulationResult, force: bool) -> None:
    """A replay that ends with nodes that never ran predicts nothing: they
    wait on a collective another rank never reached, or on each other."""
    stuck = [r for r in result.ranks if r.unfinished]
    if not stuck or force:
        return
    first = stuck[0]
    raise InputError(first.source, f"{first.unfinished} of {first.nodes} nodes never ran in the "
                     f"replay (rank {first.rank}; waiting on a collective that another rank "
                     "never reached, or on each other); pass --force to report anyway")


def calibrate_recorded(paths: Inputs | RankSet, algorithm: str,
                       comm_streams: int) -> RecordedCalibration:
    """The network model fitted per backend to the recorded collectives that
    more than one rank reached, as ``simulate --calibrate`` fits it (ranks
    prepared with ``comm_streams`` links, a set that deadlocks included)."""
    ranks = open_rank_set(paths)
    prepared = prepare_graphs(load(ranks), ranks.paths, comm_streams, refuse_deadlock=False,
                              ranks=ranks.ranks)
    matched = participants_of(prepared)
    shared = shares_clock(prepared)
    calibrations = calibrate(prepared, matched, algorithm, shared_clock=shared)
    return RecordedCalibration(prepared, matched, calibrations,
                               collective_wakeups(prepared, matched, calibrations, shared))

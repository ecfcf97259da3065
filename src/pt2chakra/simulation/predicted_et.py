"""The predicted ``.et``: a replay written back as ``.et`` files, one per
rank: every node as it was, with the times the replay gave it. ``pt2chakra
diff`` then compares a prediction with the measured run of that setting
like two recordings.

Times are on each rank's recorded clock (the replay's axis shifted by
``results.measured_offset``), rounded to whole microseconds as the format
holds them. A CPU node's ``duration_micros`` is its replayed exclusive time
and ``inclusive_duration_micros`` reaches its last callee's end; the step
(``step_start_micros`` / ``step_end_micros``) is the predicted one, its
definition (period or span) kept.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import msgspec

from pt2chakra.atomic import StagedOutputs, check_outputs, check_prefix_outputs
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.arrivals import reached_at
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    INCLUSIVE_ATTR,
    LAUNCH_TIME_ATTR,
    PREDICTED_SETTING_ATTR,
    is_gpu,
)
from pt2chakra.simulation.engine import SimulationRun
from pt2chakra.simulation.options import SimulationOptions
from pt2chakra.simulation.results import ProfilerOverhead, Schedule, SimConfig, measured_offset

STEP_ATTRS = ("step_start_micros", "step_end_micros")


def predicted_et_config(options: SimulationOptions) -> SimConfig:
    """The one setting to write: each what-if knob must have one value."""
    knobs = {"--compute-scale": options.compute_scale, "--cpu-scale": options.cpu_scale,
             "--bandwidth-scale": options.bandwidth_scale, "--comm-streams": options.comm_streams,
             "--slow-rank": options.slow_values()}
    for flag, values in knobs.items():
        if len(values) != 1:
            raise InputError(flag, "--write-et writes one setting: give one value")
    return msgspec.structs.replace(
        options.base_config(), compute_scale=options.compute_scale[0],
        cpu_scale=options.cpu_scale[0], bandwidth_scale=options.bandwidth_scale[0],
        comm_streams=options.comm_streams[0], slow_rank=options.slow_values()[0])


def _setting(cfg: SimConfig, overhead: ProfilerOverhead | None) -> str:
    """The setting written into the replay; without the profiler, with the
    step as recorded (diff then shows both)."""
    if overhead is None:
        return cfg.label()
    return f"{cfg.label()}; the replay with the profiler's cost in: " \
        f"{overhead.profiled_step_us:.0f} us"


def output_paths(prefix: str, ranks: Sequence[int]) -> list[str]:
    return [f"{prefix}.{rank}.et" for rank in ranks]


def write_predicted_et(run: SimulationRun, options: SimulationOptions, prefix: str,
                      staged: StagedOutputs | None = None) -> list[str]:
    """Write ``<prefix>.<rank>.et`` for every rank of ``run`` under the
    setting of ``options`` (the baseline replay when it asks no what-if),
    all ranks or none (into ``staged`` for the caller to commit with its
    other outputs, else committed here); returns the paths written."""
    cfg = predicted_et_config(options)
    overhead = run.result.profiler_overhead
    if overhead is not None:  # the figure the run worked out (fitted, given or estimated)
        cfg = msgspec.structs.replace(cfg, profiler_overhead_us=overhead.per_op_us)
    result, schedule = run.result, run.schedule
    if options.asks_what_if():
        result, schedule = run.simulator.run(cfg, critical_path=False)
    sources = [r.source for r in result.ranks]
    outs = output_paths(prefix, schedule.rank_label)
    inputs: list[str | os.PathLike[str] | None] = list(sources)
    check_outputs(inputs, outs)
    times = _times_by_rank(schedule)
    with StagedOutputs() as own:
        for r, (source, out) in enumerate(zip(sources, outs)):
            offset = measured_offset(schedule, r)
            origin = result.ranks[r].start_offset_us + offset
            step = (origin, origin + result.ranks[r].predicted_step_us)
            _write_rank(source, (staged or own).stage(out), times[r], offset, step,
                        _setting(cfg, overhead))
        own.commit()
    return outs


def _times_by_rank(schedule: Schedule) -> list[dict[int, tuple[float, float]]]:
    """Per rank: node id -> (replayed start, end); nodes that never ran are left out."""
    out: list[dict[int, tuple[float, float]]] = [{} for _ in schedule.rank_label]
    for node, rank, start, end in zip(schedule.nodes, schedule.rank, schedule.start,
                                      schedule.end):
        if not math.isnan(end):
            out[rank][node.id] = (start, end)
    return out


def _write_rank(source: str, out: str, times: dict[int, tuple[float, float]], offset: float,
                step: tuple[float, float], setting: str) -> None:
    metadata, node_iter = read_et(source)
    nodes = list(node_iter)
    times = _arrivals(nodes, times)
    inclusive_end = _inclusive_ends(nodes, times)
    rewritten = [_retimed(n, times.get(n.id), inclusive_end.get(n.id), offset) for n in nodes]
    attrs = [a for a in metadata.attrs if a[0] not in STEP_ATTRS and a[0] != PREDICTED_SETTING_ATTR]
    attrs += [("step_start_micros", "int64_val", round(step[0])),
              ("step_end_micros", "int64_val", round(step[1])),
              (PREDICTED_SETTING_ATTR, "string_val", setting)]
    write_et(out, GlobalMetadata(version=metadata.version, attrs=attrs), rewritten)


def _arrivals(nodes: Sequence[ChakraNode], times: dict[int, tuple[float, float]],
              ) -> dict[int, tuple[float, float]]:
    """A communication node starts, as recorded ones do, when its rank
    reached it (its last dependency's end), not when the replay's rendezvous
    let it run: its time waiting for peers stays inside it."""
    out = dict(times)
    for n in nodes:
        if n.type not in COMM_NODE_TYPES or n.id not in times:
            continue
        start, end = times[n.id]
        out[n.id] = (reached_at(start, (times[d][1] for d in n.data_deps if d in times)), end)
    return out


def _inclusive_ends(nodes: Sequence[ChakraNode], times: dict[int, tuple[float, float]],
                    ) -> dict[int, float]:
    """Each replayed CPU node: the latest end of it and its callees (callees
    start after their caller in a replay, so latest start first reaches
    every callee before its caller)."""
    caller = {n.id: n.ctrl_deps[0] for n in nodes if n.ctrl_deps}
    ends = {i: t[1] for i, t in times.items()}
    for node_id in sorted(times, key=lambda i: (times[i][0], i), reverse=True):
        parent = caller.get(node_id)
        if parent is not None and parent in ends and ends[node_id] > ends[parent]:
            ends[parent] = ends[node_id]
    return ends


def _retimed(node: ChakraNode, replayed: tuple[float, float] | None,
             inclusive_end: float | None, offset: float) -> ChakraNode:
    if replayed is None or not node.start_time_micros:
        return node  # never ran (a forced replay), or untimed: as recorded
    start, end = replayed
    new_start = round(start + offset)
    attrs: list[Attr] = node.attrs
    if not is_gpu(attr_dict(node.attrs)) and inclusive_end is not None:
        incl = max(0, round(inclusive_end + offset) - new_start)
        attrs = [a for a in node.attrs if a[0] != INCLUSIVE_ATTR]
        attrs.append((INCLUSIVE_ATTR, "int64_val", incl))
    elif any(a[0] == LAUNCH_TIME_ATTR for a in attrs):
        attrs = _launch_moved(attrs, new_start - node.start_time_micros)
    return msgspec.structs.replace(node, start_time_micros=max(1, new_start),
                                   duration_micros=max(0, round(end - start)), attrs=attrs)


def _launch_moved(attrs: list[Attr], shift: int) -> list[Attr]:
    """A late launch's recorded launch time (``LAUNCH_TIME_ATTR``) moved
    with its kernel: the replay starts the kernel at its launch unless the
    stream was still busy, so the launch keeps its lead on the kernel, and
    a replay of the written file releases it at its replayed time."""
    return [(name, kind, value + shift) if name == LAUNCH_TIME_ATTR and isinstance(value, int)
            else (name, kind, value) for name, kind, value in attrs]


def check_prefix(prefix: str, inputs: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Before the replay: the folder of ``--write-et PREFIX`` must exist and
    no ``<prefix>.<rank>.et`` may be one of the ``inputs``."""
    folder = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(folder):
        raise InputError(prefix, "--write-et: no such folder")
    check_prefix_outputs(inputs, prefix)

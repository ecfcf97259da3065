"""The profiler's own cost, taken out of a recorded step (``simulate
--without-profiler``).

A trace is recorded with the execution-trace observer and Kineto on, and
each recorded CPU op pays for them: its inputs written to the host ET, its
start and end stamped by Kineto. That cost is per op (measured by
``microbench --profiler-overhead``: tens of microseconds on a GPU host, a few
on a CPU-only torch), so the model is one figure, microseconds per recorded CPU
op. Where the cost falls on the thread's timeline is not recorded: part of
it lies inside the op's slice, part in the gap before it (the previous op's
exit, this op's entry), part in its caller's slice. The model takes the
figure out of each op's thread time in thread order: first the gap before
the op, then the op's own slice; what an op cannot give (a short op with no
gap) is carried to the next op of the same thread. The total taken out of a
thread is then exactly figure x ops wherever the thread has that much time.
GPU work, collectives and the recorded tail of each thread are unchanged.

The figure comes, in order of preference, from the user's real step
(``fit``: bisection of the replay), from a figure given or measured before
(``parse_figure``), from a ``meta.json`` beside the traces (``collect``
writes one), or from the trace alone (``estimate``: marked as an estimate).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import statistics
from collections.abc import Callable, Sequence
from typing import NamedTuple

from pt2chakra.errors import LINK_CPU_NS, STEP_S, InputError, read_number
from pt2chakra.files import read_side_json
from pt2chakra.simulation.prepared import CPU_OP, PreparedGraph
from pt2chakra.simulation.results import ProfilerOverhead

log = logging.getLogger(__name__)

OPTION = "--profiler-overhead"
REAL_STEP_OPTION = "--real-step"
# The figure's written form: "32.95us/op" (what --json prints and the option reads).
UNIT = "us/op"
_FIGURE = re.compile(r"^\s*([-+0-9.eE]+|nan|inf|-inf)\s*(?:(?:us|µs|μs)(?:\s*/\s*op)?)?\s*$",
                     re.IGNORECASE)
# The real step stored beside the traces (``collect`` writes it, the
# ``h200`` traces carry it): the median of timed steps without the profiler.
META_NAME = "meta.json"
META_STEP_FIELD = "step_median_s"
# The CPU ns per byte of a rank's link on the recording host
# (collect/link_cost.py), what scaling out to more ranks per host reads
# (scaleout/hosts.py): the ranks' own CPU (the cost the links are capped
# with) and the host's whole busy time (the upper end of the range; the
# only one in recordings from before the ranks' own was measured).
META_LINK_CPU_FIELD = "host_cpu_ns_per_link_byte"
META_RANK_LINK_CPU_FIELD = "rank_cpu_ns_per_link_byte"
# A fit reaches the real step when the replay is within this share of it:
# the spread of a real step's timed repeats on a quiet machine is ~1-3 %
# (the h200 jobs: 0.6 % median absolute deviation; our 2-core CPU box more).
FIT_TOLERANCE = 0.03
# Bisection stops when the figure is known to this many microseconds per op
# (the printed figure has two decimals).
FIT_RESOLUTION_US = 0.005
# At most this many replays per bisection (2^-40 of the range: far below
# the resolution for any figure a trace allows).
FIT_MAX_STEPS = 40


class Fit(NamedTuple):
    """What a real step says about the figure. ``figure_us``: the one that
    replays to the real step (or the closest the data allow); ``low_us`` /
    ``high_us``: the figures whose replay is within ``FIT_TOLERANCE`` of it
    (``high_us`` None: every larger figure too, the data bound it from below
    only); ``floor_us``: the replay with every recorded CPU op's time taken
    out; ``reachable``: whether any figure reaches the step."""

    figure_us: float
    low_us: float | None
    high_us: float | None
    floor_us: float
    reachable: bool
    note: str


def parse_figure(text: str, option: str = OPTION) -> float:
    """``32.95us/op``, ``32.95 us/op``, ``32.95``: microseconds per recorded
    CPU op, finite and not negative; else one line naming ``option``."""
    m = _FIGURE.match(text)
    try:
        value = float(m.group(1)) if m else math.nan
    except ValueError:
        value = math.nan
    if m is None or not math.isfinite(value):
        raise InputError(option, f"{text!r} is not a figure like 32.95{UNIT} (microseconds "
                         "per recorded CPU op)")
    if value < 0:
        raise InputError(option, f"{text!r} is negative: the profiler adds time, it never "
                         "saves any")
    return value


def format_figure(us: float) -> str:
    """The figure as ``--profiler-overhead`` reads it back."""
    return f"{us:.2f}{UNIT}"


def lane_cpu_ops(p: PreparedGraph) -> list[list[int]]:
    """Per CPU thread, its recorded ops in start order (worked out once)."""
    if p.overhead_lanes is None:
        by_lane: dict[int, list[int]] = {}
        for i, cat in enumerate(p.cat):
            if cat == CPU_OP:
                by_lane.setdefault(p.lane[i], []).append(i)
        for ops in by_lane.values():
            ops.sort(key=lambda i: (p.start[i], i))
        p.overhead_lanes = list(by_lane.values())
    return p.overhead_lanes


def op_count(p: PreparedGraph) -> int:
    """Recorded CPU ops: what the figure is per."""
    return sum(map(len, lane_cpu_ops(p)))


def _lane_time(p: PreparedGraph, ops: list[int]) -> float:
    """Thread time the model can take out of one thread: every op's gap
    before it and, but for ops blocked on the GPU, its slice."""
    return sum(p.delay[i] + (0.0 if i in p.sync else p.dur[i]) for i in ops)


def largest_figure(p: PreparedGraph) -> float:
    """The figure that empties the thread with the most time per op (every
    op's time and the gaps before it): a larger one is larger than the ops
    themselves on every thread."""
    return max((_lane_time(p, ops) / len(ops) for ops in lane_cpu_ops(p) if ops), default=0.0)


def check_figure(p: PreparedGraph, per_op_us: float, option: str = OPTION) -> None:
    """One line when the figure is larger than the ops it is taken out of."""
    top = largest_figure(p)
    if per_op_us > top:
        raise InputError(option, f"{format_figure(per_op_us)} is larger than the recorded ops "
                         f"themselves: their time and the gaps before them average at most "
                         f"{top:.2f} us per op on any thread ({op_count(p)} ops)")


def take_out(p: PreparedGraph, dur: list[float], delay: list[float], per_op_us: float) -> float:
    """Take ``per_op_us`` out of each recorded CPU op's thread time (the gap
    before it first, then its slice; a sync op gives only its gap), carrying
    what an op cannot give to the next op of its thread. Returns the time
    taken out, summed over threads."""
    if per_op_us <= 0.0:
        return 0.0
    sync = p.sync
    taken = 0.0
    for ops in lane_cpu_ops(p):
        owed = 0.0
        for i in ops:
            owed += per_op_us
            d = delay[i]
            cut = d if d < owed else owed
            delay[i] = d - cut
            owed -= cut
            if owed > 0.0 and i not in sync:
                d = dur[i]
                cut = d if d < owed else owed
                dur[i] = d - cut
                owed -= cut
        taken += per_op_us * len(ops) - owed
    return taken


def fit(predict: Callable[[float], float], real_us: float, largest_us: float) -> Fit:
    """The figures whose replay gives the real step (``predict``: the
    predicted step for a figure). The replay shortens as the figure grows
    until the GPU-bound floor (or the whole CPU side) is reached."""
    with_profiler = predict(0.0)
    floor = predict(largest_us)
    hi_step, lo_step = real_us * (1 + FIT_TOLERANCE), real_us * (1 - FIT_TOLERANCE)
    if with_profiler <= real_us:
        ok = with_profiler >= lo_step
        return Fit(0.0, 0.0 if ok else None, None if ok and floor >= lo_step else
                   (_bisect(predict, lo_step, 0.0, largest_us) if ok else None), floor, ok,
                   "the replay with the profiler's cost is already at or below the real step: "
                   "nothing to take out")
    if floor > hi_step:
        return Fit(largest_us, None, None, floor, False,
                   f"not reachable: with the largest figure ({format_figure(largest_us)}) the "
                   f"replay still takes {floor / 1000:.2f} ms, above the real step: its floor "
                   f"(GPU work, waits, and recorded gaps longer than the figure) is above it")
    figure = _bisect(predict, real_us, 0.0, largest_us) if floor < real_us else \
        _bisect(predict, hi_step, 0.0, largest_us)
    low = _bisect(predict, hi_step, 0.0, figure)
    if floor >= lo_step:
        return Fit(figure, low, None, floor, True,
                   f"bounded from below only: every figure from {format_figure(low)} up "
                   f"replays within {FIT_TOLERANCE:.0%} of the real step (the replay reaches "
                   f"its floor, {floor / 1000:.2f} ms: the GPU-bound part)")
    high = _bisect(predict, lo_step, figure, largest_us)
    return Fit(figure, low, high, floor, True,
               f"{format_figure(low)} to {format_figure(high)} replay within "
               f"{FIT_TOLERANCE:.0%} of the real step")


def _bisect(predict: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """The smallest figure in [lo, hi] whose replay is at or below ``target``
    (the replay does not lengthen as the figure grows)."""
    for _ in range(FIT_MAX_STEPS):
        if hi - lo <= FIT_RESOLUTION_US:
            break
        mid = (lo + hi) / 2
        if predict(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def read_meta(trace_paths: Sequence[str]) -> tuple[float, str] | None:
    """The real step (us) stored beside the first trace (``META_NAME``), and
    the file it came from; None when there is none."""
    meta = meta_beside(trace_paths)
    return None if meta is None else (meta_real_step_us(meta), meta)


def meta_beside(trace_paths: Sequence[str]) -> str | None:
    """The ``META_NAME`` beside the first trace that has one (None: none)."""
    for path in trace_paths:
        meta = os.path.join(os.path.dirname(os.path.abspath(path)), META_NAME)
        if os.path.isfile(meta):
            return meta
    return None


class RecordedLinkCost(NamedTuple):
    """The CPU per link byte ``collect`` measured (``META_NAME``)."""

    ns_per_byte: float  # the links' cap: the ranks' own, else the host's
    host_ns_per_byte: float | None  # the host's busy time, where both were measured
    meta: str  # the file


def read_meta_link_cost(trace_paths: Sequence[str]) -> RecordedLinkCost | None:
    """The recording host's CPU ns per link byte stored beside the first
    trace that has a ``META_NAME`` (``META_RANK_LINK_CPU_FIELD``, else
    ``META_LINK_CPU_FIELD``); None where there is no such file or it holds
    neither field (recorded before ``collect`` measured it, or by another
    tool)."""
    meta = meta_beside(trace_paths)
    if meta is None:
        return None
    doc = read_side_json(meta)
    if not isinstance(doc, dict):
        return None
    found = {f: read_number(doc[f], LINK_CPU_NS, meta, f"field {f!r} (ns per byte)")
             for f in (META_RANK_LINK_CPU_FIELD, META_LINK_CPU_FIELD) if f in doc}
    if not found:
        return None
    own, host = found.get(META_RANK_LINK_CPU_FIELD), found.get(META_LINK_CPU_FIELD)
    if own is None:
        return RecordedLinkCost(found[META_LINK_CPU_FIELD], None, meta)
    return RecordedLinkCost(own, host, meta)


def meta_real_step_us(meta: str) -> float:
    """The real step (us) a ``META_NAME`` file stores (``files.read_side_json``, with its
    nesting limit); one line naming it when it is not readable JSON or the
    field is not a number of seconds in ``errors.STEP_S``."""
    doc = read_side_json(meta)
    value = doc.get(META_STEP_FIELD) if isinstance(doc, dict) else None
    return read_number(value, STEP_S, meta, f"field {META_STEP_FIELD!r} (seconds)") * 1e6


def write_meta(path: str, step_s: Sequence[float], extra: dict[str, object]) -> None:
    """``META_NAME``: the timed steps without the profiler and their median."""
    from pt2chakra.atomic import atomic_output

    doc = dict(extra)
    doc["step_s"] = list(step_s)
    doc[META_STEP_FIELD] = statistics.median(step_s)
    with atomic_output(path) as out:
        out.write(json.dumps(doc, indent=1).encode() + b"\n")


# The trace-only estimate (``estimate``): the profiler's cost per op shows
# where an op does next to nothing. Around a callee, the caller's time not
# inside any callee is the callee's entry and exit bookkeeping (a C++
# caller runs a microsecond or two of its own between callees); inside a
# callee that does nothing (a view, a detach) its whole span is bookkeeping.
# The estimate is the median caller time per callee plus this low percentile
# of the leaves' spans (the cheapest ops: their own work ~1 us). On the h200
# gpt trace: 18 + 13 = 31 us/op for a fitted 32.9; see docs/PROFILER_OVERHEAD.md.
ESTIMATE_LEAF_QUANTILE = 0.1


def estimate(p: PreparedGraph) -> float:
    """The figure from the trace alone (documented above); 0 when the
    trace has no nested ops to read it from."""
    per_callee: list[float] = []
    leaves: list[float] = []
    for ops in lane_cpu_ops(p):
        _nesting(p, ops, per_callee, leaves)
    if not per_callee or not leaves:
        return 0.0
    leaves.sort()
    return statistics.median(per_callee) + \
        leaves[int(ESTIMATE_LEAF_QUANTILE * (len(leaves) - 1))]


def _nesting(p: PreparedGraph, ops: list[int], per_callee: list[float],
             leaves: list[float]) -> None:
    """One thread's ops nested by their recorded spans: per caller, its time
    outside its callees over their number; per leaf, its span."""
    stack: list[list[float]] = []  # [end, callees' time, callees, own span]

    def close(t: float) -> None:
        while stack and stack[-1][0] <= t:
            end, inside, n, span = stack.pop()
            if n:
                per_callee.append(max(0.0, span - inside) / n)
            else:
                leaves.append(span)

    for i in ops:
        start, span = float(p.start[i]), p.incl[i]
        close(start)
        if stack:
            stack[-1][1] += span
            stack[-1][2] += 1
        stack.append([start + span, 0.0, 0, span])
    close(math.inf)


def resolve(p: PreparedGraph, predict: Callable[[float], float], traces: Sequence[str],
            real_step_ms: float | None, figure_text: str | None) -> ProfilerOverhead:
    """The figure to take out, from the best source given (see the module's
    docstring), with what the replay as recorded predicts."""
    profiled = predict(0.0)
    n = op_count(p)
    if figure_text is not None:
        per_op = parse_figure(figure_text)
        check_figure(p, per_op)
        return _result(p, per_op, "given", OPTION, profiled, n)
    if real_step_ms is not None:
        return _fitted(p, predict, real_step_ms * 1000.0, f"{REAL_STEP_OPTION} "
                       f"{real_step_ms:g} ms", profiled, n)
    meta = read_meta(traces)
    if meta is not None:
        return _fitted(p, predict, meta[0], meta[1], profiled, n)
    per_op = min(estimate(p), largest_figure(p))
    return _result(p, per_op, "estimate", "from the trace alone (the caller time per callee "
                   "plus the cheapest ops' span)", profiled, n, note="an estimate: give "
                   f"{REAL_STEP_OPTION} MS (your step without the profiler) or {OPTION}")


def _fitted(p: PreparedGraph, predict: Callable[[float], float], real_us: float, source: str,
            profiled: float, n: int) -> ProfilerOverhead:
    got = fit(predict, real_us, largest_figure(p))
    if not got.reachable:  # the prediction is not the real step: say so, not only in the report
        log.warning("%s: missed: %s", source, got.note)
    return _result(p, got.figure_us, "fit", source, profiled, n, real_us=real_us,
                   low=got.low_us, high=got.high_us, reachable=got.reachable, note=got.note)


def _result(p: PreparedGraph, per_op: float, source: str, detail: str, profiled: float, n: int,
            real_us: float | None = None, low: float | None = None, high: float | None = None,
            reachable: bool = True, note: str = "") -> ProfilerOverhead:
    taken = take_out(p, list(p.dur), list(p.delay), per_op)
    return ProfilerOverhead(
        figure=format_figure(per_op), per_op_us=per_op, source=source, source_detail=detail,
        estimate=source == "estimate", profiled_step_us=profiled, ops=n, taken_out_us=taken,
        real_step_us=real_us, fit_low=None if low is None else format_figure(low),
        fit_high=None if high is None else format_figure(high), reachable=reachable, note=note)

"""What the page shows, gathered from one replay of the ranks: typed
structs that ``render`` turns into HTML and that tests can read directly."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence

import msgspec

from pt2chakra.conversion import ConversionReport
from pt2chakra.diff import DiffResult, diff
from pt2chakra.simulation import (
    CollectiveRow,
    SimulationOptions,
    SimulationResult,
    Simulator,
    base_config,
    collective_rows,
    simulate_baseline,
    what_if,
)
from pt2chakra.simulation.results import CATEGORY_NAMES, Schedule, WhatIf, measured_offset
from pt2chakra.simulation.views import CATEGORY_COLORS, lane_tids, measured_span

from .downsample import Bar, downsample, share_budget

# Bars drawn on the whole page (every lane, simulated and measured). A bar
# costs about 20 bytes of the page, and the page's canvas redraws this many
# in a few tens of milliseconds on each zoom step, which keeps a 64-rank,
# million-node page well under its 15 MB and 5 s.
BAR_BUDGET = 300_000
# Even a lane of a 64-rank page keeps this many bars (a lane's shape).
MIN_LANE_BARS = 200
# The timeline's JSON may take this much of the page; over it, the bar
# budget is halved until it fits (tables are capped separately below).
TIMELINE_BYTES = 10_000_000
# Op names are cut to this length (tooltips and tables).
NAME_CHARS = 120
# Rows of the top-ops and per-collective tables (the rest is summed up).
TOP_OPS = 30
MAX_COLLECTIVE_ROWS = 300
# The comparison with a baseline draws both runs' measured lanes: a third of
# the page's bar and byte budgets, so that both timelines fit one page.
COMPARISON_SHARE = 3
# Labels of the two runs' lanes on the comparison timeline.
BASELINE_RUN, THIS_RUN = "baseline", "this run"

# The what-ifs every page shows when the user asks for none: one knob at a
# time, the questions people ask first (faster GPU, faster host, slower or
# faster network). (compute, cpu, bandwidth) scales.
STANDARD_WHAT_IFS: tuple[tuple[float, float, float], ...] = (
    (0.5, 1.0, 1.0), (2.0, 1.0, 1.0), (1.0, 0.5, 1.0), (1.0, 1.0, 0.5), (1.0, 1.0, 2.0))


class ReportOptions(msgspec.Struct, frozen=True):
    """What ``build_report`` is asked for. The simulation's what-if knobs,
    when set, replace the standard what-ifs."""

    simulation: SimulationOptions = SimulationOptions()
    standard_what_ifs: bool = True
    title: str = ""
    bar_budget: int = BAR_BUDGET


class Row(msgspec.Struct):
    """One lane of one rank as drawn: simulated or measured. ``bars`` is
    flat (start, width, category, label) per bar, ``critical`` flat
    (start, width) per critical-path bar; times in microseconds."""

    label: str
    measured: bool
    bars: list[float]
    critical: list[float]
    merged_below_us: float  # resolution this lane was merged at (0: every node)
    run: str = ""  # on the comparison timeline: which run the lane is of


class RankLanes(msgspec.Struct):
    rank: int
    source: str
    rows: list[Row]


class Timeline(msgspec.Struct):
    """Everything the page's script needs to draw the lanes."""

    start_us: float
    end_us: float
    categories: list[str]
    colors: list[str]
    names: list[str]
    ranks: list[RankLanes]
    bars: int  # bars drawn
    merged_below_us: float  # coarsest lane resolution (0: every node drawn)


class OpRow(msgspec.Struct):
    """One op name of one category, over every rank."""

    name: str
    category: str
    count: int
    simulated_us: float  # time it held its lanes in the replay
    recorded_us: float  # sum of recorded durations
    critical_us: float  # its nodes' time on the critical path


class CollectiveGroup(msgspec.Struct):
    """Collectives of one kind and payload, summed up."""

    what: str
    size_bytes: int
    count: int
    measured_us: float
    algbw_gbps: float | None  # total bytes / total measured time
    busbw_gbps: float | None


class WhatIfRow(msgspec.Struct):
    label: str
    row: WhatIf


class Comparison(msgspec.Struct):
    """The page's section on a baseline run: ``diff(baseline, this run)``
    (A = the baseline, B = this run) and both runs' measured lanes on one
    time axis (each rank's lanes of the baseline above its lanes of this run)."""

    sources: list[str]  # the baseline's files
    result: DiffResult
    timeline: Timeline


class ReportData(msgspec.Struct):
    title: str
    sources: list[str]
    nodes: int
    result: SimulationResult
    timeline: Timeline
    top_ops: list[OpRow]
    collectives: list[CollectiveRow]  # longest first when capped, else in start order
    collectives_total: int
    collective_groups: list[CollectiveGroup]
    what_if: list[WhatIfRow]
    conversion: list[ConversionReport]
    comparison: Comparison | None = None  # with --baseline


def build_report(paths: Sequence[str | os.PathLike[str]], options: ReportOptions | None = None,
                 conversion: Sequence[ConversionReport] = (),
                 baseline: Sequence[str | os.PathLike[str]] = ()) -> ReportData:
    """Replay the ranks' ``.et`` files and gather every section of the page;
    with ``baseline`` (another run's files, one per rank), the comparison."""
    options = options or ReportOptions()
    compared = diff(baseline, paths) if baseline else None  # a run of another job: refused first
    sim, result, schedule = simulate_baseline(paths, options.simulation)
    rows = collective_rows(sim, schedule)
    names = [os.fspath(p) for p in paths]
    return ReportData(
        title=options.title or _default_title(names), sources=[r.source for r in result.ranks],
        nodes=len(schedule.nodes), result=result,
        timeline=fitted_timeline(schedule, options.bar_budget, [r.source for r in result.ranks]),
        top_ops=top_ops(schedule), collectives=_capped(rows), collectives_total=len(rows),
        collective_groups=collective_groups(rows),
        what_if=what_if_rows(sim, options, result.predicted_step_us),
        conversion=list(conversion),
        comparison=None if compared is None else comparison(
            compared, baseline, schedule, options, [r.source for r in result.ranks]))


def comparison(compared: DiffResult, baseline: Sequence[str | os.PathLike[str]],
               schedule: Schedule, options: ReportOptions, sources: Sequence[str]) -> Comparison:
    """The baseline section: the diff as computed, and both runs' recorded
    lanes (the baseline replayed for its schedule) on one axis: each rank's
    step starts where its start offset puts it, in both runs."""
    _sim, base_result, base_schedule = simulate_baseline(baseline, options.simulation)
    names = _Names()
    lanes = []
    for base_lane, this_lane in _paired_by_rank(_measured_lanes(base_schedule, names, BASELINE_RUN),
                                                _measured_lanes(schedule, names, THIS_RUN)):
        lanes += base_lane + this_lane
    budget = max(MIN_LANE_BARS, options.bar_budget // COMPARISON_SHARE)
    labels = [f"{os.path.basename(a)} vs {os.path.basename(b)}"
              for a, b in zip([r.source for r in base_result.ranks], sources)]
    return Comparison(sources=[r.source for r in base_result.ranks], result=compared,
                      timeline=_fitted(schedule, lanes, names, budget, labels,
                                       TIMELINE_BYTES // COMPARISON_SHARE))


def _measured_lanes(schedule: Schedule, names: _Names, run: str) -> list[_LaneBars]:
    return [msgspec.structs.replace(lane, run=run)
            for lane in _lane_bars(schedule, names) if lane.measured]


def _paired_by_rank(base: list[_LaneBars], this: list[_LaneBars],
                    ) -> list[tuple[list[_LaneBars], list[_LaneBars]]]:
    """Per rank (position; both runs have the same ranks): its lanes in each run."""
    ranks = sorted({lane.rank for lane in base} | {lane.rank for lane in this})
    return [([x for x in base if x.rank == r], [x for x in this if x.rank == r]) for r in ranks]


def _default_title(names: list[str]) -> str:
    first = os.path.basename(names[0]) if names else ""
    return first if len(names) == 1 else f"{first} and {len(names) - 1} more ranks"


# --------------------------------------------------------------------------
# Timeline
# --------------------------------------------------------------------------


class _Names:
    """The page's table of op names: each distinct (cut) name once."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.names: list[str] = []

    def __call__(self, name: str) -> int:
        k = self.index.get(name)
        if k is None:
            k = self.index[name] = len(self.names)
            self.names.append(name[:NAME_CHARS])
        return k


class _LaneBars(msgspec.Struct):
    rank: int
    label: str
    measured: bool
    bars: list[Bar]
    critical: list[Bar]
    run: str = ""


def fitted_timeline(schedule: Schedule, budget: int = BAR_BUDGET,
                    sources: Sequence[str] = ()) -> Timeline:
    """The timeline at ``budget`` bars, halved until its JSON fits ``TIMELINE_BYTES``."""
    names = _Names()
    return _fitted(schedule, _lane_bars(schedule, names), names, budget, sources, TIMELINE_BYTES)


def _fitted(schedule: Schedule, lanes: list[_LaneBars], names: _Names, budget: int,
            sources: Sequence[str], max_bytes: int) -> Timeline:
    while True:
        tl = timeline_view(schedule, lanes, names.names, budget, sources)
        if budget <= MIN_LANE_BARS or len(msgspec.json.encode(tl)) <= max_bytes:
            return tl
        budget //= 2


def _lane_bars(schedule: Schedule, names: _Names) -> list[_LaneBars]:
    """Every node as a bar on its lane, simulated and (timed ranks) measured;
    lanes in the order views use (per rank, CPU threads then GPU streams)."""
    tids = lane_tids(schedule)
    sim: dict[int, list[Bar]] = defaultdict(list)
    meas: dict[int, list[Bar]] = defaultdict(list)
    crit: dict[int, list[Bar]] = defaultdict(list)
    timed = schedule.rank_timed
    offsets = [measured_offset(schedule, r) for r in range(len(schedule.step_start))]
    for i, node in enumerate(schedule.nodes):
        lane, cat, r = schedule.lane[i], schedule.category[i], schedule.rank[i]
        label = names(node.name)
        s, e = schedule.start[i], schedule.end[i]
        if not math.isnan(s):
            sim[lane].append(Bar(s, e, cat, label))
            if i in schedule.critical:
                crit[lane].append(Bar(s, e, cat, label))
        span = measured_span(schedule, i, offsets[r]) if r >= len(timed) or timed[r] else None
        if span is not None:
            meas[lane].append(Bar(span[0], span[0] + span[1], cat, label))
    out = []
    for lane in sorted(tids, key=lambda k: tids[k]):
        r, kind, lane_label = schedule.lane_names[lane]
        name = f"{'CPU' if kind == 'cpu' else 'GPU'} {lane_label}"
        out.append(_LaneBars(r, name, False, sim[lane], crit[lane]))
        if meas[lane]:
            out.append(_LaneBars(r, name, True, meas[lane], []))
    return out


def timeline_view(schedule: Schedule, lanes: list[_LaneBars], names: list[str], budget: int,
             sources: Sequence[str] = ()) -> Timeline:
    """The lanes downsampled to ``budget`` bars in all (a lane's critical-path
    marks share its part)."""
    counts = [len(lb.bars) + len(lb.critical) for lb in lanes]
    budgets = share_budget(counts, budget, MIN_LANE_BARS)
    by_rank: dict[int, list[Row]] = defaultdict(list)
    lo, hi, drawn, coarsest = 0.0, 0.0, 0, 0.0
    for lb, b in zip(lanes, budgets):
        share = b * len(lb.bars) // max(1, len(lb.bars) + len(lb.critical))
        bars, res = downsample(lb.bars, share)
        crit, _ = downsample(lb.critical, max(1, b - share))
        if bars:
            lo = min(lo, bars[0].start)
            hi = max(hi, max(x.end for x in bars))
        drawn += len(bars) + len(crit)
        coarsest = max(coarsest, res)
        by_rank[lb.rank].append(Row(label=lb.label, measured=lb.measured,
                                    bars=_flat(bars, True), critical=_flat(crit, False),
                                    merged_below_us=round(res, 3), run=lb.run))
    ranks = [RankLanes(rank=schedule.rank_label[r] if r < len(schedule.rank_label) else r,
                       source=os.path.basename(sources[r]) if r < len(sources) else "",
                       rows=by_rank[r])
             for r in sorted(by_rank)]
    return Timeline(start_us=lo, end_us=hi, categories=list(CATEGORY_NAMES),
                    colors=[CATEGORY_COLORS[c] for c in CATEGORY_NAMES], names=names, ranks=ranks,
                    bars=drawn, merged_below_us=round(coarsest, 3))


def _flat(bars: list[Bar], labelled: bool) -> list[float]:
    """(start, width[, category, label]) per bar; 0.01 us is finer than any
    recorded time."""
    out: list[float] = []
    for b in bars:
        out += [round(b.start, 2), round(max(0.0, b.end - b.start), 2)]
        if labelled:
            out += [b.cat, b.label]
    return out


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def top_ops(schedule: Schedule, limit: int = TOP_OPS) -> list[OpRow]:
    """Op names (per category) by the time they held their lanes in the replay."""
    rows: dict[tuple[str, int], OpRow] = {}
    for i, node in enumerate(schedule.nodes):
        key = (node.name, schedule.category[i])
        row = rows.get(key)
        if row is None:
            row = rows[key] = OpRow(name=node.name[:NAME_CHARS],
                                    category=CATEGORY_NAMES[key[1]], count=0,
                                    simulated_us=0.0, recorded_us=0.0, critical_us=0.0)
        row.count += 1
        row.recorded_us += float(node.duration_micros)
        s, e = schedule.start[i], schedule.end[i]
        if not math.isnan(s):
            row.simulated_us += e - s
            if i in schedule.critical:
                row.critical_us += e - s
    return sorted(rows.values(), key=lambda r: (-r.simulated_us, r.name))[:limit]


def _capped(rows: list[CollectiveRow]) -> list[CollectiveRow]:
    if len(rows) <= MAX_COLLECTIVE_ROWS:
        return rows
    return sorted(rows, key=lambda r: -r.measured_us)[:MAX_COLLECTIVE_ROWS]


def collective_groups(rows: list[CollectiveRow]) -> list[CollectiveGroup]:
    """Collectives by kind and payload, most total time first (capped like
    the per-collective table); bandwidths over the group's total bytes and time."""
    acc: dict[tuple[str, int], list[CollectiveRow]] = defaultdict(list)
    for r in rows:
        acc[(r.what, r.size_bytes)].append(r)
    out = []
    for (what, size), members in acc.items():
        t = sum(m.measured_us for m in members)
        algbw = size * len(members) / t * 1e-3 if size > 0 and t > 0 else None
        ratio = [m.busbw_gbps / m.algbw_gbps for m in members
                 if m.busbw_gbps is not None and m.algbw_gbps]
        busbw = algbw * ratio[0] if algbw is not None and ratio else None
        out.append(CollectiveGroup(what=what, size_bytes=size, count=len(members),
                                   measured_us=t, algbw_gbps=algbw, busbw_gbps=busbw))
    return sorted(out, key=lambda g: (-g.measured_us, g.what, g.size_bytes))[:MAX_COLLECTIVE_ROWS]


def what_if_rows(sim: Simulator, options: ReportOptions, baseline: float) -> list[WhatIfRow]:
    """The user's what-if combinations, else the standard ones."""
    sopt = options.simulation
    base = base_config(sim, sim.sources, sopt)  # the profiler's cost out, when asked
    if sopt.asks_what_if():
        rows = what_if(sim, base, sopt.compute_scale, sopt.cpu_scale, sopt.bandwidth_scale,
                       sopt.comm_streams, baseline=baseline, slow=sopt.slow_values())
    elif options.standard_what_ifs:
        rows = [w for c, u, b in STANDARD_WHAT_IFS
                for w in what_if(sim, base, [c], [u], [b], [0], baseline=baseline)]
    else:
        rows = []
    return [WhatIfRow(label=_what_if_label(w), row=w) for w in rows]


def _what_if_label(w: WhatIf) -> str:
    parts = [f"{name} x{v:g}" for name, v in (("compute", w.compute_scale),
                                              ("CPU", w.cpu_scale),
                                              ("bandwidth", w.bandwidth_scale)) if v != 1.0]
    if w.comm_streams:
        parts.append(f"{w.comm_streams} comm streams")
    if w.slow_rank:
        parts.append(f"slow {w.slow_rank}")
    return ", ".join(parts) or "baseline"

"""Results of a replay per rank: its predicted step (to its last lane's end,
or its CPU side's where the step ends there) against the measured one, each
lane's busy and idle time, and the whole step over all ranks."""

from __future__ import annotations

import logging
import operator
from array import array
from collections.abc import Sequence
from itertools import compress, repeat

from pt2chakra.rules.conventions import (
    STEP_PERIOD,
    STEP_SPAN,
    StepWindow,
    error_pct,
    run_measured_step,
)
from pt2chakra.simulation.compiled import fast_path
from pt2chakra.simulation.event_loop import (
    LOG_NAME,
    TIME_TYPECODE,
    ReplayRun,
    ran_flags,
    step_ends_on_cpu,
)
from pt2chakra.simulation.prepare import MASK_PASSES_MAX
from pt2chakra.simulation.prepared import PreparedGraph, non_decreasing
from pt2chakra.simulation.results import LaneStats, RankResult

log = logging.getLogger(LOG_NAME)

# A lane's nodes that ran: their starts and their ends, in node order.
Spans = tuple["array[float]", "array[float]"]


def rank_results(p: PreparedGraph, run: ReplayRun) -> list[RankResult]:
    """Each rank's predicted step against its measured one, and its lanes'
    busy and idle time; notes each rank's end in ``run.rank_end``."""
    results = []
    for rank, rng in enumerate(p.rank_nodes):
        origin = run.origin[rank]
        by_lane = _ran_by_lane(p, run, rng)
        # the last end of each lane's nodes that ran (the same largest end as
        # over all of them: no pass over a million nodes) and of each thread
        last = {lane: max(lane_ends) for lane, (_s, lane_ends) in by_lane.items()}
        thread_ends = _thread_ends(run, last)
        ends = thread_ends if thread_ends and step_ends_on_cpu(p.step_period[rank:rank + 1]) \
            else list(last.values()) + thread_ends
        unfinished = len(rng) - sum(len(lane_ends) for _s, lane_ends in by_lane.values())
        predicted = (max(ends) - origin) if ends else 0.0
        run.rank_end.append(max(ends) if ends else origin)
        measured = p.step_end[rank] - p.step_start[rank]
        if unfinished:
            log.warning("rank %d: %d nodes never ran (waiting on a collective that another "
                        "rank never reached, or a cycle)", rank, unfinished)
        results.append(RankResult(
            rank=p.rank_label[rank], source=p.sources[rank], nodes=len(rng), predicted_step_us=predicted,
            measured_step_us=measured,
            error_pct=error_pct(predicted, measured),
            start_offset_us=origin, lanes=_lane_stats(p, by_lane, origin, predicted),
            unfinished=unfinished,
            step_definition=STEP_PERIOD if p.step_period[rank] else STEP_SPAN))
    return results


def _ran_by_lane(p: PreparedGraph, run: ReplayRun, rng: range) -> dict[int, Spans]:
    """Each lane of the rank (in the order of its first node that ran): the
    starts and ends of its nodes that ran, in node order (typed arrays, as
    the replay holds them: a million floats as objects would cost 24 bytes
    each more)."""
    a, b = rng.start, rng.stop
    all_ends = run.end[a:b]
    ran = list(ran_flags(all_ends))
    if all(ran):  # every node ran: the replay's own columns
        lanes, starts, ends = p.lane[a:b], run.start[a:b], all_ends
    else:
        lanes = list(compress(p.lane[a:b], ran))
        starts = array(TIME_TYPECODE, compress(run.start[a:b], ran))
        ends = array(TIME_TYPECODE, compress(all_ends, ran))
    del ran
    order = dict.fromkeys(lanes)
    if len(order) == 1:
        return {lane: (starts, ends) for lane in order}
    if len(order) <= MASK_PASSES_MAX:  # one C-level pass per lane
        out: dict[int, Spans] = {}
        for lane in order:
            mine = list(map(operator.eq, lanes, repeat(lane)))
            out[lane] = (array(TIME_TYPECODE, compress(starts, mine)),
                         array(TIME_TYPECODE, compress(ends, mine)))
        return out
    out = {lane: (array(TIME_TYPECODE), array(TIME_TYPECODE)) for lane in order}
    for lane, start, end in zip(lanes, starts, ends):
        lane_starts, lane_ends = out[lane]
        lane_starts.append(start)
        lane_ends.append(end)
    return out


def _thread_ends(run: ReplayRun, last: dict[int, float]) -> list[float]:
    """Each CPU thread's end (from the last end of each lane): its recorded
    time after its last op started (callers returning) still belongs to the step."""
    tail = run.tails
    return [end + tail[lane] for lane, end in last.items() if lane in tail]


def _lane_stats(p: PreparedGraph, by_lane: dict[int, Spans],
                origin: float, predicted: float) -> list[LaneStats]:
    """Busy and idle time of each lane of the rank over its predicted step,
    CPU threads and GPU streams by name; lanes of one name (a group's
    transfers in flight, each on a lane of its own) as one, busy where any is."""
    named: dict[tuple[str, str], list[int]] = {}
    for lane in sorted(by_lane, key=lambda x: (p.lane_names[x][1], p.lane_names[x][2])):
        _r, kind, label = p.lane_names[lane]
        named.setdefault((kind, label), []).append(lane)
    lanes = []
    for (kind, label), members in named.items():
        starts, ends = by_lane[members[0]] if len(members) == 1 else _merged(by_lane, members)
        busy, gaps = _cover(starts, ends, origin, predicted)
        lanes.append(LaneStats(lane=f"{kind} {label}", busy_us=busy,
                               idle_us=max(0.0, predicted - busy), nodes=len(starts),
                               idle_gaps=gaps))
    return lanes


def _merged(by_lane: dict[int, Spans], members: Sequence[int]) -> Spans:
    """The spans of several lanes as one lane's, in start order."""
    spans = sorted((s, e) for lane in members for s, e in zip(*by_lane[lane]))
    return (array(TIME_TYPECODE, (s for s, _e in spans)),
            array(TIME_TYPECODE, (e for _s, e in spans)))


def _cover(starts: array[float], ends: array[float], origin: float, predicted: float,
           ) -> tuple[float, int]:
    """``_cover_python`` by the compiled path where built and it takes the
    spans (in order, times as floats), else by that twin."""
    fast = fast_path()
    got = None if fast is None else fast.lane_cover(starts, ends, origin, predicted)
    return got if got is not None else _cover_python(starts, ends, origin, predicted)


def _cover_python(starts: array[float], ends: array[float], origin: float, predicted: float,
                  ) -> tuple[float, int]:
    """A lane's busy time and idle intervals between the rank's start and its
    predicted end. Busy time is the union of its nodes' spans clipped to that
    window: nested host ops and work after the step's end would otherwise count
    twice or outside it (a lane "busy" longer than the step). Spans are walked
    in start order: as they are when starts and ends both ascend, else sorted."""
    gaps = 0
    busy = 0.0
    cursor = origin
    hi = origin + predicted
    spans = zip(starts, ends)
    for s, e in (spans if non_decreasing(starts) and non_decreasing(ends) else sorted(spans)):
        if s > cursor + 1e-9:
            gaps += 1
        if e > cursor:  # max(cursor, e), inline
            lo = s if s > cursor else cursor
            if lo < hi:
                busy += (e if e < hi else hi) - lo
            cursor = e
    if cursor < hi - 1e-9:
        gaps += 1
    return busy, gaps


def overall_step(p: PreparedGraph, run: ReplayRun, results: list[RankResult], align: str,
                 ) -> tuple[float, float]:
    """The whole step, predicted and measured: on the shared clock from the
    first rank's start to the last rank's end (``recorded``), else the
    longest rank's."""
    if not results:
        return 0.0, 0.0
    if align == "recorded":
        predicted = max(run.rank_end, default=0.0) - min(run.origin)
    else:
        predicted = max(r.predicted_step_us for r in results)
    windows = [StepWindow(s, e) for s, e in zip(p.step_start, p.step_end)]
    return predicted, run_measured_step(windows, align)

"""Simulated schedule as Chrome / Perfetto trace JSON and as a static picture.

The JSON follows the Chrome trace event format (``traceEvents`` of complete
events ``ph: "X"`` with ``ts``/``dur`` in microseconds, ``pid``/``tid``, plus
``process_name`` / ``thread_name`` / ``*_sort_index`` metadata events), which
Perfetto UI and ``chrome://tracing`` open. Each rank is two processes: the
simulated schedule and, beside it, the measured one on the same time axis.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from typing import Any

import orjson

from pt2chakra.atomic import atomic_path, target_of, write_atomic
from pt2chakra.simulation.prepared import CPU_OP
from pt2chakra.simulation.results import CATEGORY_NAMES, Schedule, measured_offset

MEASURED_PID_BASE = 10000

Event = dict[str, Any]  # one Chrome trace event

# One colour per node category: the plot, the Chrome trace and the HTML report.
CATEGORY_COLORS = {"cpu_op": "#4c72b0", "gpu_compute": "#55a868", "gpu_memcpy": "#8172b2",
                   "communication": "#dd8452", "cpu_gap": "#c8c8c8"}


def lane_tids(schedule: Schedule) -> dict[int, int]:
    """Lane -> tid: CPU threads first, then GPU streams, per rank."""
    order = sorted(range(len(schedule.lane_names)),
                   key=lambda k: (schedule.lane_names[k][0], schedule.lane_names[k][1] != "cpu",
                                  schedule.lane_names[k][2]))
    return {lane: pos + 1 for pos, lane in enumerate(order)}


def chrome_trace(schedule: Schedule, measured: bool = True) -> dict[str, Any]:
    tids = lane_tids(schedule)
    ranks = sorted(set(schedule.rank))
    # Untimed ranks (no recorded start times) have no measured schedule to show.
    timed = {r: schedule.rank_timed[r] if r < len(schedule.rank_timed) else True for r in ranks}
    events = _process_events(schedule, ranks, timed, measured)
    events += _thread_events(schedule, tids, timed, measured)
    events += _node_events(schedule, tids, ranks, timed, measured)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "pt2chakra simulate"}}


def _process_events(schedule: Schedule, ranks: list[int], timed: dict[int, bool],
                    measured: bool) -> list[Event]:
    """Names and order of the processes: per rank, simulated then measured."""
    events: list[Event] = []
    for r in ranks:
        label = schedule.rank_label[r] if r < len(schedule.rank_label) else r
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                       "args": {"name": f"rank {label} simulated"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                       "args": {"sort_index": 2 * r}})
        if measured and timed[r]:
            events.append({"ph": "M", "name": "process_name", "pid": MEASURED_PID_BASE + r,
                           "tid": 0, "args": {"name": f"rank {label} measured"}})
            events.append({"ph": "M", "name": "process_sort_index",
                           "pid": MEASURED_PID_BASE + r, "tid": 0,
                           "args": {"sort_index": 2 * r + 1}})
    return events


def _thread_events(schedule: Schedule, tids: dict[int, int], timed: dict[int, bool],
                   measured: bool) -> list[Event]:
    """Names and order of the lanes, the same in both processes of a rank."""
    events: list[Event] = []
    for lane, tid in tids.items():
        r, kind, label = schedule.lane_names[lane]
        name = f"{'CPU' if kind == 'cpu' else 'GPU'} {label}"
        pids = [r, MEASURED_PID_BASE + r] if measured and timed[r] else [r]
        for pid in pids:
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
    return events


def _node_events(schedule: Schedule, tids: dict[int, int], ranks: list[int],
                 timed: dict[int, bool], measured: bool) -> list[Event]:
    """Each node as simulated and, shifted onto the simulated time axis, as
    measured (a CPU op with its inclusive time)."""
    events: list[Event] = []
    offsets = {r: measured_offset(schedule, r) for r in ranks}
    for i, node in enumerate(schedule.nodes):
        r = schedule.rank[i]
        tid = tids[schedule.lane[i]]
        cat = CATEGORY_NAMES[schedule.category[i]]
        start, end = schedule.start[i], schedule.end[i]
        if not math.isnan(start):
            crit = i in schedule.critical
            events.append({"ph": "X", "name": node.name, "cat": cat + (",critical" if crit else ""),
                           "pid": r, "tid": tid, "ts": round(start, 3),
                           "dur": round(max(0.0, end - start), 3),
                           "args": {"id": node.id, "critical": crit}})
        span = measured_span(schedule, i, offsets[r]) if measured and timed[r] else None
        if span is not None:
            events.append({"ph": "X", "name": node.name, "cat": cat,
                           "pid": MEASURED_PID_BASE + r, "tid": tid,
                           "ts": round(span[0], 3), "dur": span[1], "args": {"id": node.id}})
    return events


def measured_span(schedule: Schedule, i: int, offset: float) -> tuple[float, float] | None:
    """Node ``i`` as recorded, placed on the simulated time axis (``offset``:
    ``measured_offset`` of its rank): (start, duration), a CPU op with its
    inclusive time; None when the node has no recorded time."""
    node = schedule.nodes[i]
    if not (node.start_time_micros or node.duration_micros):
        return None
    dur = float(node.duration_micros)
    if schedule.category[i] == CPU_OP:
        dur = schedule.inclusive[i]  # the inclusive time, else the duration
    return node.start_time_micros - offset, dur


def write_chrome_trace(schedule: Schedule, path: str, measured: bool = True) -> int:
    doc = chrome_trace(schedule, measured)
    write_atomic(path, orjson.dumps(doc))
    return len(doc["traceEvents"])


PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(path: str) -> str:
    """The format of a ``--plot`` path (``png``, ``svg`` or ``pdf``, from its
    extension); ``InputError`` for any other path."""
    from pt2chakra.errors import InputError

    ext = os.path.splitext(path)[1].lower()
    if ext not in PLOT_FORMATS:
        raise InputError(path, "the plot must be a .png, .svg or .pdf file (named by its "
                         "extension)")
    try:  # before the replay, not after it
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("--plot", "needs matplotlib (pip install matplotlib)") from None
    return ext[1:]


Spans = list[tuple[float, float]]  # (start, width) of bars


def _plot_spans(schedule: Schedule,
                ) -> tuple[dict[tuple[int, int], Spans], dict[int, Spans], float]:
    """Bars per (lane, category) and critical-path outlines per lane, as
    broken_barh draws them, and the end of the schedule."""
    bars: dict[tuple[int, int], Spans] = defaultdict(list)
    crit: dict[int, Spans] = defaultdict(list)
    t_max = 0.0
    for i in range(len(schedule.nodes)):
        s, e = schedule.start[i], schedule.end[i]
        if math.isnan(s):
            continue
        lane = schedule.lane[i]
        width = max(e - s, 0.0)
        bars[(lane, schedule.category[i])].append((s, width))
        if i in schedule.critical:
            crit[lane].append((s, width))
        t_max = max(t_max, e)
    return bars, crit, t_max


def _lane_labels(schedule: Schedule, lanes: list[int]) -> list[str]:
    """Y-axis labels: the rank as recorded in its metadata, and the lane."""
    labels = []
    for lane in lanes:
        r, kind, label = schedule.lane_names[lane]
        rl = schedule.rank_label[r] if r < len(schedule.rank_label) else r
        labels.append(f"rank {rl} {'CPU' if kind == 'cpu' else 'GPU'} {label}")
    return labels


def write_plot(schedule: Schedule, path: str, title: str = "") -> None:
    """Per-lane timeline (PNG, SVG or PDF by extension) with the critical path
    outlined in red. Needs matplotlib (Agg backend, no display). Written
    atomically: a temp file beside ``path``, then renamed over it (``path``
    may be a staged temp file: the format is its target's)."""
    fmt = check_plot_path(target_of(path))
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("--plot needs matplotlib (pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tids = lane_tids(schedule)
    lanes = sorted(tids, key=lambda lane: tids[lane])
    row = {lane: len(lanes) - 1 - k for k, lane in enumerate(lanes)}
    bars, crit, t_max = _plot_spans(schedule)
    scale, unit = (1e3, "ms") if t_max > 5e3 else (1.0, "us")
    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.45 * len(lanes)))
    for (lane, cat), spans in bars.items():
        name = CATEGORY_NAMES[cat]
        ax.broken_barh([(s / scale, max(w / scale, t_max / scale * 2e-4)) for s, w in spans],
                       (row[lane] - 0.4, 0.8), facecolors=CATEGORY_COLORS[name], linewidth=0)
    for lane, spans in crit.items():
        ax.broken_barh([(s / scale, max(w / scale, t_max / scale * 2e-4)) for s, w in spans],
                       (row[lane] - 0.45, 0.9), facecolors="none", edgecolors="#d62728",
                       linewidth=1.2)
    ax.set_yticks([row[lane] for lane in lanes])
    ax.set_yticklabels(_lane_labels(schedule, lanes), fontsize=8)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_xlim(0, t_max / scale * 1.01 if t_max else 1)
    ax.set_title(title or "pt2chakra simulate: per-lane timeline (critical path in red)")
    handles = [Patch(facecolor=c, label=n) for n, c in CATEGORY_COLORS.items()]
    handles.append(Patch(facecolor="none", edgecolor="#d62728", label="critical path"))
    ax.legend(handles=handles, loc="upper right", fontsize=8, ncol=5)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    # Same extension on the temp file: savefig and viewers go by it.
    try:
        with atomic_path(path, suffix="." + fmt) as tmp:
            fig.savefig(tmp, dpi=120, format=fmt)
    except OSError as exc:  # missing folder...: name the target, not the temp file
        raise OSError(exc.errno, exc.strerror, path) from exc
    finally:
        plt.close(fig)

"""The step the user ran: which window of a Kineto trace is "the step", what
it means, and the GPU work the previous step left running into it.

Two definitions, recorded in the ``.et`` (``step_definition``) and printed by
``convert`` and ``simulate`` so a reader knows what "measured" means:

* ``period`` — a trace with two or more ``ProfilerStep#N`` annotations: the
  last step that has a successor, from its start to the next step's start.
  That is the steady-state step time a training loop reports. The step's GPU
  work still running when the next step starts belongs to the next period
  (the previous step's did the same to this one), so the prediction is when
  the CPU side reaches the next step.
* ``span`` — otherwise (one step, the whole trace, a linked host ET): from
  the first op's start to the last GPU activity's end.

In a GPU-bound loop the GPU is still busy with the previous step when a
step starts on the CPU. That work is carried into the step as one node per
stream (``PENDING_CATEGORY``) that occupies the stream from the step's start
until the last earlier activity there ends: the replay then starts with busy
streams, as the recording did, instead of an idle GPU.

GPU-only traces (kernels and copies, no CPU op) keep their streams' recorded
rhythm with ``CPU_GAP_CATEGORY`` nodes between consecutive activities: without a
CPU record, the idle time is the only trace of what held the stream back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from pt2chakra.errors import InputError
from pt2chakra.pytorch.records import GpuActivity, KinetoTrace
from pt2chakra.rules.conventions import (
    CPU_GAP_CATEGORY,
    QUEUED_WORK_CATEGORY,
    STEP_PERIOD,
    STEP_SPAN,
)

# The annotation torch.profiler's schedule writes around each step.
PROFILER_STEP_PREFIX = "ProfilerStep#"
# The category of the node that stands for GPU work of the previous step.
PENDING_CATEGORY = "pending_from_previous_step"
PENDING_NAME = "[GPU work pending from before the step]"
# GPU-only traces: idle time on a stream between two activities is host time
# that was not recorded; the ASTRA-sim export's stand-ins for dropped CPU
# time have the same meaning, so they share a category (the CPU what-if scales it).
GAP_NAME = "[idle: host time not in the trace]"
# Kineto rounds to µs fractions: a gap shorter than this is rounding, not idle time.
MIN_GAP_US = 0.5
# A pending stretch shorter than this is rounding of the stream's last end.
MIN_PENDING_US = 0.5
# Work the trace does not hold can keep a GPU busy: work queued before the
# trace began (seen: 149 ms), a CUDA/HIP graph's upload (seen: 6.8 ms). It
# shows as an activity starting long after its launch while nothing recorded
# runs on its device (a launch takes µs); that stretch becomes a stand-in that
# holds the stream, as the recording's GPU was held.
QUEUED_CATEGORY = QUEUED_WORK_CATEGORY
QUEUED_NAME = "[GPU held by work not in the trace]"
QUEUED_LAG_US = 5_000.0


class RecordedStep(NamedTuple):
    """The step a conversion takes from its input, with what "measured"
    means there; written to the metadata as ``step_start_micros`` ..
    ``step_end_micros`` and ``step_definition`` (read back by
    ``rules.conventions.step_window``)."""

    start: float
    end: float
    label: str  # "ProfilerStep#5", "whole trace", ...
    definition: str = STEP_SPAN  # STEP_PERIOD or STEP_SPAN (see the module docstring)
    why: str = ""  # why this step (the --step choice, an outlier), for the summary

    def describe(self) -> str:
        """One line for the user: which window, what "measured" means there, and why."""
        if self.definition == STEP_PERIOD:
            text = (f"{self.label}, steady-state period (from its start to the next step's "
                    "start)")
        else:
            text = f"{self.label} (span: first op start to last GPU activity end)"
        return f"{text}: {self.why}" if self.why else text


# ``convert --step``: which ProfilerStep a Kineto-only conversion measures.
STEP_LAST, STEP_MEDIAN, STEP_ALL = "last", "median", "all"
STEP_CHOICES = (STEP_LAST, STEP_MEDIAN, STEP_ALL)
StepChoice = str | int  # one of STEP_CHOICES, or the N of ProfilerStep#N
# A period this much longer or shorter than the median of the trace's periods
# is an outlier (seen: 163 ms against 124-127 ms); run-to-run jitter of a
# steady loop stays within a few percent.
OUTLIER_PCT = 10.0


def parse_step_choice(text: str) -> StepChoice:
    """``--step``'s value: last, median, all or a step number."""
    if text in STEP_CHOICES:
        return text
    if text.isdigit():
        return int(text)
    raise InputError("--step", f"{text!r} is not last, median, all or a step number (the N "
                     "of ProfilerStep#N)")


STAND_IN_CATEGORIES = (PENDING_CATEGORY, CPU_GAP_CATEGORY, QUEUED_CATEGORY)


def is_stand_in(act: GpuActivity) -> bool:
    """A node made here, not an activity of the trace (accounted apart)."""
    return act.cat in STAND_IN_CATEGORIES and act.correlation < 0


def profiler_steps(kineto: KinetoTrace) -> list[tuple[float, float, str]]:
    """The ``ProfilerStep#N`` annotations as (start, end, name), by start."""
    return sorted((ev.ts, ev.ts + ev.dur, ev.name) for ev in kineto.cpu_events
                  if ev.name.startswith(PROFILER_STEP_PREFIX))


def kineto_step(kineto: KinetoTrace, choice: StepChoice = STEP_LAST) -> RecordedStep:
    """The step of a Kineto-only conversion: a steady-state period when the
    trace holds a step followed by another (by default the last such one: the
    last step is often cut short by the profiler stopping; ``choice`` picks
    another, see ``STEP_CHOICES``), the lone step, else the span of the CPU
    ops and GPU work. Runtime calls outside every op do not widen it: the
    profiler's closing ``cudaDeviceSynchronize`` can come seconds after the
    last op."""
    steps = profiler_steps(kineto)
    if isinstance(choice, int) and len(steps) < 2 and (
            not steps or steps[0][2] != f"{PROFILER_STEP_PREFIX}{choice}"):
        raise InputError(kineto.path, f"--step {choice}: the trace holds "
                         + (f"one step ({steps[0][2]})" if steps else "no ProfilerStep#N"))
    if len(steps) >= 2:
        return _chosen_period(kineto, steps, choice)
    if steps:
        start, end, name = steps[0]
        return RecordedStep(start, end, name, STEP_SPAN, "the trace's only step")
    spans = [(ev.ts, ev.ts + ev.dur) for group in (kineto.cpu_events, kineto.gpu_activities,
                                                   kineto.python_events)
             for ev in group]
    if not spans:
        raise InputError(kineto.path, "no CPU op and no GPU activity: nothing to convert")
    return RecordedStep(min(s for s, _ in spans), max(e for _, e in spans), "whole trace",
                        why="no ProfilerStep#N annotation")


def _chosen_period(kineto: KinetoTrace, steps: list[tuple[float, float, str]],
                   choice: StepChoice) -> RecordedStep:
    """A period (a step to the next one's start) of a trace with two or more
    steps, as ``choice`` says; its reason names an outlier."""
    periods = [(steps[k][0], steps[k + 1][0], steps[k][2]) for k in range(len(steps) - 1)]
    lengths = sorted(end - start for start, end, _n in periods)
    median = lengths[(len(lengths) - 1) // 2]
    if choice == STEP_ALL:
        first, last = periods[0], periods[-1]
        return RecordedStep(first[0], last[1], f"{first[2]}..{last[2]}", STEP_PERIOD,
                            f"--step all: {len(periods)} steps from the first one's start to "
                            f"the start of {steps[-1][2]}")
    if choice == STEP_MEDIAN:
        start, end, name = min(periods, key=lambda p: (abs((p[1] - p[0]) - median), -p[0]))
        why = (f"--step median: {(end - start) / 1e3:.1f} ms, the median of {len(periods)} "
               f"periods ({lengths[0] / 1e3:.1f}-{lengths[-1] / 1e3:.1f} ms)")
        return RecordedStep(start, end, name, STEP_PERIOD, why)
    if isinstance(choice, int):
        wanted = f"{PROFILER_STEP_PREFIX}{choice}"
        for start, end, name in periods:
            if name == wanted:
                return RecordedStep(start, end, name, STEP_PERIOD, f"--step {choice}")
        if steps[-1][2] == wanted:  # the last step: no successor, its own span
            start, end, name = steps[-1]
            return RecordedStep(start, end, name, STEP_SPAN,
                                f"--step {choice}: the last step, no next step to end its period")
        raise InputError(kineto.path, f"--step {choice}: no {wanted} in the trace (it holds "
                         f"{steps[0][2]} .. {steps[-1][2]})")
    start, end, name = periods[-1]
    why = "the last step followed by another (--step N|median|all picks another)"
    off = (end - start - median) / median * 100 if median > 0 else 0.0
    if len(periods) >= 3 and abs(off) > OUTLIER_PCT:
        why += (f"; it is an outlier: {(end - start) / 1e3:.1f} ms against a median of "
                f"{median / 1e3:.1f} ms over {len(periods)} periods ({off:+.0f} %), "
                "--step median measures a typical one")
    return RecordedStep(start, end, name, STEP_PERIOD, why)


def pending_gpu_work(kineto: KinetoTrace, step_start: float) -> list[GpuActivity]:
    """One activity per stream that was still busy with earlier work when the
    step started: from ``step_start`` to the end of the last activity there
    launched before it (an activity without a launch counts by its own start)."""
    if not kineto.gpu_activities:  # a CPU-only trace: no pass over its runtime calls
        return []
    launch_ts = {rt.correlation: rt.ts for rt in kineto.runtime_events if rt.correlation >= 0}
    busy_until: dict[tuple[int, int], float] = {}
    for act in kineto.gpu_activities:
        issued = launch_ts.get(act.correlation, act.ts)
        end = act.ts + act.dur
        if issued < step_start < end:
            key = (act.device, act.stream)
            busy_until[key] = max(busy_until.get(key, end), end)
    return [GpuActivity(PENDING_NAME, PENDING_CATEGORY, step_start, until - step_start,
                        device, stream, -1)
            for (device, stream), until in sorted(busy_until.items())
            if until - step_start >= MIN_PENDING_US]


def queued_gpu_work(kineto: KinetoTrace, start: float, end: float) -> list[GpuActivity]:
    """One stand-in per activity of the window that started more than
    ``QUEUED_LAG_US`` after its launch while its device ran nothing the trace
    records (see ``QUEUED_CATEGORY``): from its launch (or the window's start)
    until it starts, on its stream."""
    if not kineto.gpu_activities:
        return []
    launch_ts = {rt.correlation: rt.ts for rt in kineto.runtime_events if rt.correlation >= 0}
    by_device: dict[int, list[tuple[float, float]]] = {}
    for act in kineto.gpu_activities:
        by_device.setdefault(act.device, []).append((act.ts, act.ts + act.dur))
    out = []
    for act in kineto.gpu_activities:
        issued = launch_ts.get(act.correlation)
        if issued is None or not start <= act.ts < end or act.ts - issued < QUEUED_LAG_US:
            continue
        busy = any(s < act.ts and e > issued for s, e in by_device[act.device])
        if not busy:
            begin = max(issued, start)
            out.append(GpuActivity(QUEUED_NAME, QUEUED_CATEGORY, begin, act.ts - begin,
                                   act.device, act.stream, -1))
    return out


def stream_gaps(activities: Iterable[GpuActivity], start: float) -> list[GpuActivity]:
    """Idle stretches of each stream from ``start`` on, as activities (see
    ``CPU_GAP_CATEGORY``): before its first activity and between consecutive ones."""
    by_stream: dict[tuple[int, int], list[GpuActivity]] = {}
    for act in activities:
        by_stream.setdefault((act.device, act.stream), []).append(act)
    gaps = []
    for (device, stream), acts in sorted(by_stream.items()):
        acts.sort(key=lambda a: a.ts)
        cursor = start
        for act in acts:
            if act.ts - cursor >= MIN_GAP_US:
                gaps.append(GpuActivity(GAP_NAME, CPU_GAP_CATEGORY, cursor, act.ts - cursor,
                                        device, stream, -1))
            cursor = max(cursor, act.ts + act.dur)
    return gaps


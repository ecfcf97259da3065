"""A tensor-parallel rank's sharded ops re-timed at another degree
(``extrapolate`` / ``simulate --tensor-parallel T``).

At degree N each rank's shard of a sharded op holds 1/N of the layer (the
op DTensor ran on the local shard: ``rules/layout.py``'s sharded-op rule);
at degree T it holds 1/T, so its work is N/T times the recorded. Its time
follows from its kind's fit on the recording (``simulation/compute_model.py``:
fixed + work x rate); a kind whose instances all have one size gives no
rate, and its ops are timed in proportion to their work (the assumption
that a fixed cost is small beside the work: the bench's matrix multiplies
of a few ms each). Views, records outside ATen and ops on unsharded
(replicated) tensors keep their recorded time, and so does everything
between the ops.

The time is moved on each thread's own clock: every moment inside a
re-timed op's span stretches by its factor, every moment outside is kept,
so each later node on that thread starts earlier (or later) by the time
taken out before it, and its own span by the part of it inside. Nodes that
are not a thread's (a collective's own lane) move with the thread that holds
the most re-timed time.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import msgspec

from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import (
    CPU_LANE,
    INCLUSIVE_ATTR,
    Lane,
    inclusive_micros,
    is_gpu,
    lane_of,
)
from pt2chakra.rules.layout import sharded_op_degrees
from pt2chakra.simulation.compute_model import ELEMENTWISE, KindFit, fit_compute_model, op_work

# The options' words, in every one-line refusal.
OPTION = "--tensor-parallel"
# The metadata's step window (the converter's), moved with the clock.
STEP_WINDOW_ATTRS = frozenset({"step_start_micros", "step_end_micros"})
_COMM_TYPES = frozenset({int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE),
                         int(NodeType.COMM_RECV_NODE)})


class TensorParallelChange(NamedTuple):
    """From the recorded tensor-parallel degree to another."""

    recorded: int  # N: the degree recorded (its group spans every rank)
    target: int  # T

    def work_factor(self) -> float:
        """A sharded op's work at T over its work at N."""
        return self.recorded / self.target


class RetimeCounts(NamedTuple):
    """What one rank's re-timing did."""

    ops: int  # sharded ops re-timed
    recorded_us: float  # their spans' time as recorded
    retimed_us: float  # at the new degree
    proportional: int  # of them, timed in proportion to their work (their kind's rate unknown)


class _Span(NamedTuple):
    start: float
    end: float
    factor: float


class ThreadClock:
    """One thread's time after re-timing: ``at(t)`` for a recorded moment."""

    def __init__(self, spans: Sequence[_Span]) -> None:
        self._starts = [s.start for s in spans]
        self._spans = list(spans)
        shift = 0.0
        self._before: list[float] = []  # the shift every span before this one added
        for s in spans:
            self._before.append(shift)
            shift += (s.factor - 1.0) * (s.end - s.start)

    def at(self, t: float) -> float:
        k = bisect.bisect_right(self._starts, t) - 1
        if k < 0:
            return t
        span = self._spans[k]
        inside = min(t, span.end) - span.start
        return t + self._before[k] + (span.factor - 1.0) * inside

    def taken(self) -> float:
        """Time the re-timed spans lost (negative: gained)."""
        return -sum((s.factor - 1.0) * (s.end - s.start) for s in self._spans)


def refuse_device_work(nodes: Sequence[ChakraNode], attrs: Sequence[Mapping[str, object]],
                       where: str) -> None:
    """Device kernels would need their own re-timing (not built): one line."""
    for n, a in zip(nodes, attrs, strict=True):
        if int(n.type) not in _COMM_TYPES and is_gpu(a):
            raise InputError(where, f"{OPTION}: node {n.id} ({n.name[:60]}) runs on a device; "
                             "re-timing device kernels by their shard is not built (CPU "
                             "recordings only)")


def time_factor(fit: KindFit | None, units: float, work_factor: float) -> tuple[float, bool]:
    """An op's time at the new degree over its recorded time, and whether
    it was taken in proportion to the work (no rate for its kind)."""
    if fit is None or fit.us_per_unit is None:
        return work_factor, True
    before = fit.fixed_us + fit.us_per_unit * units
    after = fit.fixed_us + fit.us_per_unit * units * work_factor
    if before <= 0.0:
        return work_factor, True
    return after / before, False


def retime_rank(metadata: GlobalMetadata, nodes: Sequence[ChakraNode],
                change: TensorParallelChange, where: str,
                ) -> tuple[GlobalMetadata, list[ChakraNode], RetimeCounts]:
    """One rank's nodes (and its step window) with its sharded ops re-timed
    at ``change.target`` by the CPU side of its compute model; ``where``
    (the rank's file) names it in the refusal of device kernels."""
    attrs = [attr_dict(n.attrs) for n in nodes]
    refuse_device_work(nodes, attrs, where)
    fits = fit_compute_model(nodes).cpu
    lanes = [lane_of(int(n.type), a) for n, a in zip(nodes, attrs, strict=True)]
    found = _sharded_spans(nodes, attrs, lanes, change, {k.kind: k for k in fits.kinds})
    clocks: dict[object, ThreadClock] = {}
    ops = proportional = 0
    recorded_us = retimed_us = 0.0
    for key, spans in found.items():
        kept = _outermost(sorted(spans))
        clocks[key] = ThreadClock([s for s, _assumed in kept])
        for s, assumed in kept:
            ops += 1
            proportional += assumed
            recorded_us += s.end - s.start
            retimed_us += s.factor * (s.end - s.start)
    main = max(clocks.values(), key=lambda c: abs(c.taken()), default=None)
    out = [_moved(n, a, clocks.get(lane.key) if lane.kind == CPU_LANE else main)
           for n, a, lane in zip(nodes, attrs, lanes, strict=True)]
    return (_moved_window(metadata, main), out,
            RetimeCounts(ops, recorded_us, retimed_us, proportional))


def _sharded_spans(nodes: Sequence[ChakraNode], attrs: Sequence[dict[str, object]],
                   lanes: Sequence[Lane], change: TensorParallelChange,
                   kinds: dict[str, KindFit],
                   ) -> dict[object, list[tuple[_Span, bool]]]:
    """Per thread, the spans of the ops run on a shard of the recorded
    degree that do work, each with its time factor and whether the factor
    was the work's (no rate for its kind)."""
    degrees = sharded_op_degrees(nodes)
    spans: dict[object, list[tuple[_Span, bool]]] = {}
    for n, a, lane in zip(nodes, attrs, lanes, strict=True):
        if degrees.get(n.id) != change.recorded or is_gpu(a):
            continue
        work = op_work(n.name, n.inputs[1] if n.inputs is not None else None)
        if work is None:
            continue
        factor, assumed = time_factor(kinds.get(work.kind, kinds.get(ELEMENTWISE)),
                                      work.units, change.work_factor())
        start = float(n.start_time_micros)
        span = _Span(start, start + inclusive_micros(n, a), factor)
        spans.setdefault(lane.key, []).append((span, assumed))
    return spans


def _outermost(spans: Sequence[tuple[_Span, bool]]) -> list[tuple[_Span, bool]]:
    """Sorted spans without those inside an earlier one (an op on a shard
    that another such op called is re-timed with its caller)."""
    out: list[tuple[_Span, bool]] = []
    for span, assumed in spans:
        if out and span.start < out[-1][0].end:
            continue
        out.append((span, assumed))
    return out


def _moved(n: ChakraNode, a: dict[str, object], clock: ThreadClock | None) -> ChakraNode:
    """``n`` on its thread's new clock: its start, its span to its first
    callee (``duration_micros``) and its inclusive time."""
    if clock is None:
        return n
    start = round(clock.at(n.start_time_micros))
    end = round(clock.at(n.start_time_micros + n.duration_micros))
    changes: dict[str, object] = {"start_time_micros": start, "duration_micros": end - start}
    if INCLUSIVE_ATTR in a:
        incl = round(clock.at(n.start_time_micros + inclusive_micros(n, a))) - start
        changes["attrs"] = [(k, m, incl) if k == INCLUSIVE_ATTR else (k, m, v)
                            for k, m, v in n.attrs]
    return msgspec.structs.replace(n, **changes)


def _moved_window(metadata: GlobalMetadata, clock: ThreadClock | None) -> GlobalMetadata:
    """The step window (``step_start_micros`` / ``step_end_micros``) on the clock."""
    if clock is None:
        return metadata
    moved = [(k, m, round(clock.at(v))) if k in STEP_WINDOW_ATTRS and type(v) is int
             else (k, m, v) for k, m, v in metadata.attrs]
    return msgspec.structs.replace(metadata, attrs=moved)

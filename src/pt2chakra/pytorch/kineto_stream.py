"""Streaming Kineto loading: the profiler's own layout, a slice of events at a time.

The whole-file loader holds the decompressed JSON and every decoded event at
once. The profiler writes one event per block, so ``traceEvents`` is read a
slice of whole events at a time (:mod:`pt2chakra.pytorch.json_slices`); each
slice is decoded and classified by the whole-file loader's own functions and
the per-kind lists are joined and sorted by time as there (a stable sort of
slices that keep file order gives the order of the whole), so the trace is
the same. The rest of the document (``distributedInfo``...) is decoded with
an empty ``traceEvents``.

Anything else (Chrome's array format, minified JSON) and every error make
:func:`load_streamed` return None: the caller then runs the whole-file
loader, which gives its result or names the problem as always. One
difference: torch's truncated list args are reported once per slice that
has some, not once per file.
"""

from __future__ import annotations

from collections import Counter
from os import PathLike
from types import GenericAlias

from pt2chakra.files import gc_paused
from pt2chakra.pytorch.json_input import decode
from pt2chakra.pytorch.json_slices import NOT_STREAMABLE, NotSliceable, read_sliced
from pt2chakra.pytorch.kineto_decode import (
    REPEATED_FLOW_START,
    KinetoDoc,
    classify,
    event_types,
    time_ordered,
    with_distributed_info,
)
from pt2chakra.pytorch.records import CpuColumns, KinetoTrace


def load_streamed(path: str | PathLike[str], ignored: Counter[str] | None = None, *,
                  inputs: bool = True) -> KinetoTrace | None:
    """The Kineto trace at ``path``, read a slice of events at a time; None
    when it is not laid out as the profiler writes it, or has any problem.
    ``ignored`` is counted into only when the result is returned; ``inputs``
    as for ``load_kineto_trace``."""
    where = str(path)
    counts: Counter[str] = Counter()
    try:
        with gc_paused():
            trace = _load(where, counts, inputs)
    except NOT_STREAMABLE:
        return None
    if ignored is not None:
        ignored.update(counts)
    return trace


def _load(where: str, ignored: Counter[str], inputs: bool) -> KinetoTrace:
    parts: list[KinetoTrace] = []
    events_type = GenericAlias(list, (event_types(inputs)[0],))

    def check_head(first: bytes) -> None:
        if first.lstrip()[:1] != b"{":  # Chrome's array format: read whole
            raise NotSliceable

    def on_slice(events: memoryview) -> None:
        parts.append(classify(where, decode(where, events, events_type), ignored,
                              lean=not inputs))

    head, trailer = read_sliced(where, b"traceEvents", check_head, on_slice)
    doc = decode(where, head + b'"traceEvents": []' + trailer, KinetoDoc)
    return with_distributed_info(where, _joined(where, parts, ignored), doc.distributedInfo)


def _joined(where: str, parts: list[KinetoTrace], ignored: Counter[str]) -> KinetoTrace:
    """One trace of the slices' traces: each kind in file order, then sorted
    by time as the whole-file loader sorts it; a flow id seen again keeps its
    last start and is counted in ``ignored``, as there."""
    if len(parts) == 1:
        return parts[0]
    flows: dict[int, tuple[float, int]] = {}
    for p in parts:
        repeated = len(flows.keys() & p.flow_starts.keys())
        if repeated:
            ignored[REPEATED_FLOW_START] += repeated
        flows.update(p.flow_starts)
    cpu_parts = [p.cpu_events for p in parts]
    columns = [c for c in cpu_parts if isinstance(c, CpuColumns)]
    return time_ordered(where, CpuColumns.joined(columns) if len(columns) == len(cpu_parts)
                        else [e for c in cpu_parts for e in c],
                        [e for p in parts for e in p.runtime_events],
                        [e for p in parts for e in p.gpu_activities],
                        [e for p in parts for e in p.sync_events],
                        [e for p in parts for e in p.python_events], flows)

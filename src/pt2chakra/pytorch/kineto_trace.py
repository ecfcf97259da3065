"""Load a Kineto (Chrome trace JSON) profile into a ``KinetoTrace``: the
sliced reader (``kineto_stream``) where the profiler's layout allows it, else
the whole file at once; both decode with ``kineto_decode``."""

from __future__ import annotations

from collections import Counter
from os import PathLike
from types import GenericAlias

from pt2chakra.errors import InputError
from pt2chakra.files import gc_paused
from pt2chakra.pytorch import kineto_stream  # looked up per call: tests swap in the whole-file path
from pt2chakra.pytorch.json_input import decode, read_json_bytes
from pt2chakra.pytorch.kineto_decode import (
    KinetoDoc,
    KinetoEvent,
    classify,
    event_types,
    with_distributed_info,
)
from pt2chakra.pytorch.records import KinetoTrace


def load_kineto_trace(path: str | PathLike[str], ignored: Counter[str] | None = None, *,
                      inputs: bool = True) -> KinetoTrace:
    """Read a Kineto trace JSON (plain or gzip), typed and sorted by ``ts``.

    ``ignored``, when given, is incremented per category (or ``ph=M`` style
    key when an event has none) for every event not kept, so callers can
    report what was skipped. ``inputs=False`` keeps of CPU events what
    linking them to a host ET reads: their per-argument inputs
    (``input_dims``, ``input_types``, ``concrete_inputs``) are None, as the
    decoder skips them (see ``_ArgsWithInputs``), and their ``external_id``,
    ``seq_num`` and ``fwd_thread_id`` -1 (a Kineto-only conversion reads
    them; a million linked events held about 30 MB of them), and holds
    them as columns (``records.CpuColumns``: a ``CpuEvent`` made when one is
    asked for).
    """
    streamed = kineto_stream.load_streamed(path, ignored, inputs=inputs)  # the profiler's layout, in slices
    if streamed is not None:
        return streamed
    where = str(path)
    event_type, doc_type = event_types(inputs)
    with gc_paused():
        doc: KinetoDoc | list[KinetoEvent] = decode(where, read_json_bytes(path),
                                               doc_type | GenericAlias(list, (event_type,)))
        if isinstance(doc, list):  # Chrome's "JSON Array Format"
            doc = KinetoDoc(traceEvents=doc)
        if doc.traceEvents is None:
            raise InputError(where, "no top-level field `traceEvents`: not a Kineto / Chrome trace?")
        trace = classify(where, doc.traceEvents, ignored if ignored is not None else Counter(),
                         lean=not inputs)
        del doc.traceEvents
    return with_distributed_info(where, trace, doc.distributedInfo)

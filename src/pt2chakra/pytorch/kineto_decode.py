"""Decode a Kineto (Chrome trace JSON) profile into a ``KinetoTrace``: what
the whole-file reader (``kineto_trace``) and the sliced one (``kineto_stream``)
share.

Events are decoded by msgspec into one private struct whose ``args`` keeps
only the keys the pipeline uses (Kineto writes a dozen more per kernel;
skipping them in C is much cheaper than building dicts). Events are then
sorted into CPU ops, runtime calls, GPU activities, sync events and
``ac2g`` flow starts by category, using ``CATEGORY_KINDS``.

Kineto has changed value types across torch releases: pids/tids are strings
on non-op rows ("Spans"), and collective args such as ``Process Group Ranks``
or ``In split size`` are JSON-looking strings ("[0, 1]") in some versions and
lists or ints in others; both are accepted. AMD's tracer (ROCm) writes the
numeric args of runtime calls and GPU activities as strings ("128", "0x0"):
they are read as the numbers they spell (see ``numeric_text``).
"""

from __future__ import annotations

import enum
import logging
import re
from collections import Counter
from operator import attrgetter
from types import GenericAlias
from typing import Annotated, Any

import msgspec

from pt2chakra.chakra.wire import I64_MAX, I64_MIN
from pt2chakra.errors import MAX_INT_DIGITS, InputError
from pt2chakra.pytorch.records import (
    CollectiveInfo,
    CpuColumns,
    CpuEvent,
    GpuActivity,
    KinetoTrace,
    RuntimeEvent,
    SyncEvent,
)

log = logging.getLogger(__name__)


class Kind(enum.IntEnum):
    CPU = 1
    RUNTIME = 2
    GPU = 3
    SYNC = 4
    FLOW = 5
    PYTHON = 6


# Lower-cased ``cat`` -> (kind, canonical category). Aliases cover older
# Kineto spellings ("Operator", "Runtime", "Memcpy", "Memset" before ~2021)
# and non-CUDA backends, which reuse the same event shapes.
CATEGORY_KINDS: dict[str, tuple[Kind, str]] = {
    "cpu_op": (Kind.CPU, "cpu_op"),
    "operator": (Kind.CPU, "cpu_op"),
    "user_annotation": (Kind.CPU, "user_annotation"),
    "cuda_runtime": (Kind.RUNTIME, "cuda_runtime"),
    "cuda_driver": (Kind.RUNTIME, "cuda_driver"),
    "runtime": (Kind.RUNTIME, "cuda_runtime"),
    "hip_runtime": (Kind.RUNTIME, "cuda_runtime"),
    "hip_driver": (Kind.RUNTIME, "cuda_driver"),
    "xpu_runtime": (Kind.RUNTIME, "cuda_runtime"),
    "xpu_driver": (Kind.RUNTIME, "cuda_driver"),
    "privateuse1_runtime": (Kind.RUNTIME, "cuda_runtime"),
    "privateuse1_driver": (Kind.RUNTIME, "cuda_driver"),
    "kernel": (Kind.GPU, "kernel"),
    "gpu_memcpy": (Kind.GPU, "gpu_memcpy"),
    "memcpy": (Kind.GPU, "gpu_memcpy"),
    "gpu_memset": (Kind.GPU, "gpu_memset"),
    "memset": (Kind.GPU, "gpu_memset"),
    "cuda_sync": (Kind.SYNC, "cuda_sync"),
    "ac2g": (Kind.FLOW, "ac2g"),
    # Python stack frames (with_stack=True): kept apart from the CPU ops, as
    # linking to a host ET pairs operators only; Kineto-only conversion nests them.
    "python_function": (Kind.PYTHON, "python_function"),
}
# Chrome "complete" events: the only phase that carries a duration.
COMPLETE = "X"
FLOW_START = "s"
FLOW_END = "f"
# torch formats long lists as "[a, b, ..., ]" (first 30 items then "...").
TRUNCATION_MARK = "..."
_INT_RE = re.compile(r"-?\d+")
# A string that is one integer: decimal (leading zeros allowed: "007"), hex
# as ROCm writes streams ("0x1f"), or a float with no fraction ("12.0").
_NUMERIC_TEXT = re.compile(r"\s*([+-]?)(?:0[xX]([0-9a-fA-F]+)|([0-9]+)(?:\.0*)?)\s*")
# Digits an integer text may have (leading zeros aside): ``errors.MAX_INT_DIGITS``,
# the bound of every integer read from text. Python refuses to convert more
# than 4300 digits (ValueError), and converting is quadratic before that: the
# length is checked first.
# The last start of a repeated ``ac2g`` flow id is kept; the ones it replaced
# are counted as not used under this key, so every event is accounted for.
REPEATED_FLOW_START = "ac2g:ph=s:repeated id"


# Values written to int64 attributes (stream, device, correlation, bytes) must
# fit in one; times are microseconds since an epoch and durations, so they are
# finite, non-negative and far below 2**63. Out-of-range values are corrupt
# input, reported with their JSON path.
Int64 = Annotated[int, msgspec.Meta(ge=I64_MIN, le=I64_MAX)]
Micros = Annotated[float, msgspec.Meta(ge=0, lt=2.0**63)]


def _arg(key: str) -> Any:
    return msgspec.field(default=None, name=key)


# A numeric arg: an int as torch writes it, or a string as ROCm's tracer
# does; the string is read by ``_or`` when the value is used.
IntArg = Int64 | str | None


class _Args(msgspec.Struct, gc=False):
    """The ``args`` keys the pipeline reads; msgspec skips all others.
    A CPU op's per-argument inputs are in ``_ArgsWithInputs``."""

    external_id: IntArg = _arg("External id")
    record_function_id: IntArg = _arg("Record function id")
    correlation: IntArg = None
    stream: IntArg = None
    device: IntArg = None
    bytes: IntArg = None
    seq_num: IntArg = _arg("Sequence number")
    fwd_thread_id: IntArg = _arg("Fwd thread id")
    # Collective keys: value types vary across torch versions, so Any.
    collective_name: Any = _arg("Collective name")
    dtype: Any = None
    in_msg_nelems: Any = _arg("In msg nelems")
    out_msg_nelems: Any = _arg("Out msg nelems")
    in_split_size: Any = _arg("In split size")
    out_split_size: Any = _arg("Out split size")
    group_size: Any = _arg("Group size")
    pg_name: Any = _arg("Process Group Name")
    pg_desc: Any = _arg("Process Group Description")
    pg_ranks: Any = _arg("Process Group Ranks")
    rank: Any = _arg("Rank")
    src_rank: Any = _arg("Src Rank")
    dst_rank: Any = _arg("Dst Rank")
    seq: Any = _arg("Seq")
    # Sync keys (enable_cuda_sync_events=True).
    cuda_sync_kind: Any = None
    wait_on_stream: Any = None
    wait_on_cuda_event_record_corr_id: Any = None
    wait_on_cuda_event_id: Any = None


class _ArgsWithInputs(_Args, gc=False):
    """``_Args`` and the per-argument inputs of CPU ops (record_shapes=True),
    kept as decoded. Only a Kineto-only conversion writes them: linked to a
    host ET, the output carries the ET's own inputs, and decoding these lists
    was most of the memory of a Kineto trace (about 1 KB per CPU op)."""

    input_dims: Any = _arg("Input Dims")
    input_type: Any = _arg("Input type")
    concrete_inputs: Any = _arg("Concrete Inputs")  # scalar arguments, as text


_NO_ARGS = _Args()


class KinetoEvent(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Int64 | str = -1
    tid: Int64 | str = -1
    ts: Micros | None = None
    dur: Micros | None = None
    id: Any = None
    args: _Args | None = None


class KinetoDoc(msgspec.Struct, gc=False):
    traceEvents: list[KinetoEvent] | None = None
    distributedInfo: dict[str, Any] | None = None


# The same with every argument of CPU ops (see ``_ArgsWithInputs``); made
# with defstruct as a field narrowed in a subclass is beyond the type checker.
_EventWithInputs: Any = msgspec.defstruct(
    "_EventWithInputs", [("args", _ArgsWithInputs | None, None)], bases=(KinetoEvent,), gc=False)
_DocWithInputs: Any = msgspec.defstruct(
    "_DocWithInputs", [("traceEvents", GenericAlias(list, (_EventWithInputs,)) | None, None)],
    bases=(KinetoDoc,), gc=False)


def event_types(inputs: bool) -> tuple[type[KinetoEvent], type[KinetoDoc]]:
    """The event and document structs to decode, with CPU ops' inputs or without."""
    return (_EventWithInputs, _DocWithInputs) if inputs else (KinetoEvent, KinetoDoc)


# --------------------------------------------------------------------------
# Tolerant scalar conversion (only used on rare keys or odd pid/tid values)
# --------------------------------------------------------------------------


def numeric_text(text: str) -> int | None:
    """The integer ``text`` spells ("128", "0x1f", "007", "12.0"), or None."""
    found = _NUMERIC_TEXT.fullmatch(text)
    if found is None:
        return None
    sign, hex_digits, digits = found.groups()
    value = _digits(hex_digits, 16) if hex_digits is not None else _digits(digits)
    return -value if sign == "-" else value


def _digits(text: str, base: int = 10) -> int:
    """``int(text, base)`` for a run of digits; 2^64 (outside int64 with
    either sign) when it has more than ``MAX_INT_DIGITS`` (leading zeros
    aside), without converting it: every int64 check downstream then refuses
    it, naming its field."""
    if len(text) > MAX_INT_DIGITS and len(text.lstrip("0")) > MAX_INT_DIGITS:
        return 1 << 64
    return int(text, base)


def _to_int(value: Any, default: int = -1) -> int:
    """Int from an int, float or numeric-looking string ("7", "0x7", "stream 7")."""
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        whole = numeric_text(value)
        if whole is not None:
            return whole
        found = _INT_RE.findall(value)
        return _digits(found[-1].lstrip("-")) * (-1 if found[-1][0] == "-" else 1) \
            if found else default
    return default


def _to_str(value: Any) -> str:
    return "" if value is None else str(value)


class _ListParser:
    """Parses list-valued args; remembers which keys came truncated. Also
    checks the collective ints (they reach int64/int32 attributes)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.truncated: set[str] = set()

    def __call__(self, key: str, value: Any) -> list[int]:
        if value is None:
            return []
        if isinstance(value, list):
            items: list[Any] = value
        elif isinstance(value, str):
            if TRUNCATION_MARK in value:
                self.truncated.add(key)
            items = _INT_RE.findall(value)
        else:
            items = [value]
        return [self.int_arg(key, item, 0) for item in items]

    def check(self, key: str, value: int) -> int:
        if not I64_MIN <= value <= I64_MAX:
            raise InputError(self.where, f"collective arg `{key}` is {value}: outside int64")
        return value

    def int_arg(self, key: str, value: Any, default: int = -1) -> int:
        """``value`` as an int64, the error naming ``key`` (a text longer than
        ``MAX_INT_DIGITS`` is refused before it is converted)."""
        try:
            return self.check(key, _to_int(value, default))
        except _NotAnInt64:
            raise InputError(self.where, f"collective arg `{key}` has more than "
                             f"{MAX_INT_DIGITS} digits: outside int64") from None


def _collective(a: _Args, lists: _ListParser) -> CollectiveInfo | None:
    if a.collective_name is None:
        return None
    int_arg = lists.int_arg
    return CollectiveInfo(
        name=_to_str(a.collective_name),
        dtype=_to_str(a.dtype),
        in_msg_nelems=int_arg("In msg nelems", a.in_msg_nelems, 0),
        out_msg_nelems=int_arg("Out msg nelems", a.out_msg_nelems, 0),
        in_split_size=lists("In split size", a.in_split_size),
        out_split_size=lists("Out split size", a.out_split_size),
        group_size=int_arg("Group size", a.group_size, 0),
        pg_name=_to_str(a.pg_name),
        pg_desc=_to_str(a.pg_desc),
        pg_ranks=lists("Process Group Ranks", a.pg_ranks),
        rank=int_arg("Rank", a.rank),
        src_rank=int_arg("Src Rank", a.src_rank),
        dst_rank=int_arg("Dst Rank", a.dst_rank),
        seq=int_arg("Seq", a.seq),
    )


class _NotAnInt64(Exception):
    """A string arg that is no int64; ``classify`` names the event and key."""


def _or(value: int | str | None, default: int) -> int:
    """``value``, or ``default`` when absent. A string (ROCm) is read as the
    number it spells; one that spells none, or none in int64, raises
    ``_NotAnInt64`` (ints were range-checked by the decoder)."""
    if value is None:
        return default
    return value if type(value) is int else _text_int(value)  # type: ignore[arg-type]


def _int_arg(value: int | str) -> int:
    """``_or`` of a present value."""
    return value if type(value) is int else _text_int(value)  # type: ignore[arg-type]


def _text_int(text: str) -> int:
    number = numeric_text(text)
    if number is None or not I64_MIN <= number <= I64_MAX:
        raise _NotAnInt64
    return number


def _bad_int_arg(where: str, index: int, e: KinetoEvent) -> InputError:
    """The error naming the first numeric arg of event ``index`` that is a
    string spelling no int64 (looked for again here: the hot path keeps no key)."""
    a = e.args or _NO_ARGS
    for field in msgspec.structs.fields(_Args):
        value = getattr(a, field.name)
        if field.type == IntArg and type(value) is str:
            try:
                _text_int(value)
            except _NotAnInt64:
                shown = value if len(value) <= 40 else f"{value[:40]}... ({len(value)} chars)"
                return InputError(where, f"unexpected content: expected an integer in int64 "
                                  f"(or its decimal or 0x-hex text), got {shown!r} - at "
                                  f"`$.traceEvents[{index}].args.{field.encode_name}`")
    return InputError(where, f"$.traceEvents[{index}] ({e.cat} {e.name!r}): a numeric field "
                      "(pid, tid or an arg) is not an integer in int64")


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def with_distributed_info(where: str, trace: KinetoTrace,
                           distributed_info: dict[str, Any] | None) -> KinetoTrace:
    """``trace`` with the rank and world size of ``distributedInfo``."""
    info = distributed_info or {}
    trace.distributed_info = info
    trace.rank = _to_int(info.get("rank"), -1)
    trace.world_size = _to_int(info.get("world_size"), 0)
    for key, value in (("rank", trace.rank), ("world_size", trace.world_size)):
        if not -(2**31) <= value < 2**31:
            raise InputError(where, f"distributedInfo.{key} is {value}: not a plausible {key}")
    return trace


def classify(where: str, events: list[KinetoEvent], ignored: Counter[str],
             lean: bool = False) -> KinetoTrace:
    """The trace of ``events``; ``lean``: its CPU events as ``CpuColumns``
    (what linking reads; ``load_kineto_trace(inputs=False)``)."""
    cpu: list[CpuEvent] = []
    columns = CpuColumns() if lean else None
    runtime: list[RuntimeEvent] = []
    gpu: list[GpuActivity] = []
    sync: list[SyncEvent] = []
    python: list[CpuEvent] = []
    flows: dict[int, tuple[float, int]] = {}
    lists = _ListParser(where)
    shared: dict[Any, Any] = {}  # see _cpu_event
    kinds = CATEGORY_KINDS
    # Bound once: an enum member lookup costs more than the rest of a test.
    cpu_kind, python_kind, runtime_kind, gpu_kind, flow_kind = (
        Kind.CPU, Kind.PYTHON, Kind.RUNTIME, Kind.GPU, Kind.FLOW)
    for index, e in enumerate(events):
        found = kinds.get(e.cat) or kinds.get(e.cat.lower())
        if found is None:
            ignored[e.cat or f"ph={e.ph}"] += 1
            continue
        kind, cat = found
        ts, dur = e.ts, e.dur
        if ts is None or (dur is None and e.ph == COMPLETE):
            if kind is flow_kind or e.ph != COMPLETE:
                ignored[f"{e.cat}:ph={e.ph}:no ts"] += 1
                continue
            raise InputError(where, f"$.traceEvents[{index}] ({e.cat} {e.name!r}): a complete "
                             "event without `ts` or `dur`; the trace is corrupt")
        if kind is flow_kind:
            if e.ph == FLOW_START:
                flow_id = _to_int(e.id)
                if flow_id in flows:
                    ignored[REPEATED_FLOW_START] += 1
                try:
                    flows[flow_id] = (ts, _int_id(e.tid))
                except _NotAnInt64:
                    raise _bad_int_arg(where, index, e) from None
            else:  # an end is found again through its GPU activity's correlation
                ignored[f"{e.cat}:ph={e.ph}"] += 1
            continue
        if e.ph != COMPLETE or dur is None:  # (a complete event has a dur by now)
            ignored[f"{e.cat}:ph={e.ph}"] += 1
            continue
        a = e.args or _NO_ARGS
        try:
            if kind is cpu_kind:
                if columns is not None:
                    _cpu_columns_append(columns, e, ts, dur, a, cat, lists, shared)
                else:
                    cpu.append(_cpu_event(e, ts, dur, a, cat, lists, shared))
            elif kind is python_kind:
                python.append(_cpu_event(e, ts, dur, a, cat, lists, shared))
            elif kind is runtime_kind:
                runtime.append(_runtime_event(e, ts, dur, a))
            elif kind is gpu_kind:
                gpu.append(_gpu_activity(e, ts, dur, a, cat, lists))
            else:
                sync.append(_sync_event(e, ts, dur, a))
        except _NotAnInt64:
            raise _bad_int_arg(where, index, e) from None
    if lists.truncated:
        log.warning("%s: torch truncated these list args to their first items (values are partial): %s", where, ", ".join(sorted(lists.truncated)))
    return time_ordered(where, cpu if columns is None else columns, runtime, gpu, sync, python,
                        flows)


def time_ordered(where: str, cpu: list[CpuEvent] | CpuColumns, runtime: list[RuntimeEvent],
                 gpu: list[GpuActivity], sync: list[SyncEvent], python: list[CpuEvent],
                 flows: dict[int, tuple[float, int]]) -> KinetoTrace:
    """The trace of these events, each kind sorted by time (stably: ties keep
    file order). Every per-event field of ``KinetoTrace`` is an argument, so
    the streamed loader, which joins its slices' traces through this too,
    cannot leave one out."""
    by_ts = attrgetter("ts")
    if isinstance(cpu, CpuColumns):
        cpu = cpu.by_time()
    else:
        cpu.sort(key=by_ts)
    for group in (runtime, gpu, sync, python):
        group.sort(key=by_ts)
    return KinetoTrace(where, cpu, runtime, gpu, sync, flow_starts=flows, python_events=python)


def _int_id(value: int | str) -> int:
    return value if type(value) is int else _id_text(value)


def _id_text(value: Any) -> int:
    """A pid or tid given as text: the number it spells, within int64
    (``_NotAnInt64`` otherwise: the event loop names the event)."""
    number = _to_int(value)
    if not I64_MIN <= number <= I64_MAX:
        raise _NotAnInt64
    return number


def _cpu_event(e: KinetoEvent, ts: float, dur: float, a: _Args, cat: str,
               lists: _ListParser, shared: dict[Any, Any]) -> CpuEvent:
    """The event's name, pid and tid repeat on many events: ``shared`` hands
    out one object per value (about 120 bytes less per event; a million-op
    trace keeps every CPU event until it is written)."""
    share = shared.setdefault
    name, pid, tid = e.name, e.pid, e.tid
    if type(pid) is not int:  # _int_id inlined: this runs once per event
        pid = _id_text(pid)
    if type(tid) is not int:
        tid = _id_text(tid)
    name, pid, tid = share(name, name), share(pid, pid), share(tid, tid)
    collective = None if a.collective_name is None else _collective(a, lists)
    if type(a) is not _ArgsWithInputs:  # what linking reads (see load_kineto_trace)
        return CpuEvent(name, cat, ts, dur, pid, tid, -1, _or(a.record_function_id, -1), -1, -1,
                        collective)
    return CpuEvent(name, cat, ts, dur, pid, tid, _or(a.external_id, -1),
                    _or(a.record_function_id, -1), _or(a.seq_num, -1),
                    _or(a.fwd_thread_id, -1), collective,
                    a.input_dims, a.input_type, a.concrete_inputs)


def _cpu_columns_append(columns: CpuColumns, e: KinetoEvent, ts: float, dur: float, a: _Args,
                        cat: str, lists: _ListParser, shared: dict[Any, Any]) -> None:
    """``_cpu_event`` with ``inputs=False``, into ``columns``: the fields
    that keeps, from the same args."""
    name, pid, tid = e.name, e.pid, e.tid
    if type(pid) is not int:
        pid = _id_text(pid)
    if type(tid) is not int:
        tid = _id_text(tid)
    columns.append(shared.setdefault(name, name), cat, ts, dur, pid, tid,
                   _or(a.record_function_id, -1),
                   None if a.collective_name is None else _collective(a, lists))


def _runtime_event(e: KinetoEvent, ts: float, dur: float, a: _Args) -> RuntimeEvent:
    return RuntimeEvent(
        e.name,
        ts,
        dur,
        _int_id(e.pid),
        _int_id(e.tid),
        _or(a.correlation, -1),
        _or(a.external_id, -1),
        _or(a.stream, -1),
    )


def _gpu_activity(e: KinetoEvent, ts: float, dur: float, a: _Args, cat: str,
                  lists: _ListParser) -> GpuActivity:
    # GPU rows use pid = device and tid = stream; args are authoritative.
    return GpuActivity(
        e.name,
        cat,
        ts,
        dur,
        _int_id(e.pid) if (device := a.device) is None else _int_arg(device),
        _int_id(e.tid) if (stream := a.stream) is None else _int_arg(stream),
        _or(a.correlation, -1),
        _or(a.external_id, -1),
        _or(a.bytes, 0),
        None if a.collective_name is None else _collective(a, lists),
    )


def _sync_event(e: KinetoEvent, ts: float, dur: float, a: _Args) -> SyncEvent:
    return SyncEvent(
        kind=_to_str(a.cuda_sync_kind) or e.name,
        ts=ts,
        dur=dur,
        pid=_int_id(e.pid),
        tid=_int_id(e.tid),
        stream=_or(a.stream, -1),
        device=_or(a.device, -1),
        correlation=_or(a.correlation, -1),
        wait_on_stream=_to_int(a.wait_on_stream),
        wait_on_event_record_corr_id=_to_int(a.wait_on_cuda_event_record_corr_id),
        wait_on_event_id=_to_int(a.wait_on_cuda_event_id),
    )


__all__ = ["CATEGORY_KINDS", "Kind"]

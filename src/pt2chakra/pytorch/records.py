"""Typed records of the PyTorch inputs: the host execution trace and the
Kineto trace, normalised across schemas by the loaders of this package.

Structs are ``msgspec.Struct`` with ``gc=False``: millions of them are created
and the cyclic collector would otherwise dominate run time.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import islice
from operator import attrgetter, le
from typing import Any, overload

import msgspec

from pt2chakra.chakra import compiled
from pt2chakra.chakra.encode import ioinfo_body, ioinfo_texts

# --------------------------------------------------------------------------
# Host execution trace
# --------------------------------------------------------------------------


def _parse(text: bytes) -> Any:
    return msgspec.json.decode(text) if text else []


class IOValues(msgspec.Struct, gc=False, frozen=True):
    """Inputs or outputs of a host op, kept as the trace's JSON text.

    Parsing every op's values into Python objects was two thirds of loading a
    host trace, yet only collectives and process groups need them: the rest
    is copied to the output as text. So the texts are held as the output
    writes them, the body of a Chakra IOInfo (``ioinfo_body``): one bytes
    object per side instead of four (about 200 bytes less per op), with the
    strides text after it (``ioinfo_size`` bytes in). The properties give the
    texts back and parse on demand."""

    ioinfo: bytes = b""
    ioinfo_size: int = 0

    @classmethod
    def from_json(cls, values_json: Any = b"", shapes_json: Any = b"", types_json: Any = b"",
                  strides_json: Any = b"") -> IOValues:
        """From the JSON texts (bytes-like); empty strides: none recorded."""
        body = ioinfo_body(values_json, shapes_json, types_json, strides_json)
        return cls(body, len(body) - len(strides_json))

    @classmethod
    def of(cls, values: list[Any] | None = None, shapes: list[Any] | None = None,
           types: list[str] | None = None, strides: list[Any] | None = None) -> IOValues:
        """Build from Python lists (tests, hand-made traces)."""
        enc = msgspec.json.encode
        return cls.from_json(enc(values or []), enc(shapes or []), enc(types or []),
                             b"" if strides is None else enc(strides))

    def _texts(self) -> tuple[bytes, bytes, bytes]:
        return ioinfo_texts(memoryview(self.ioinfo)[:self.ioinfo_size])

    @property
    def values_json(self) -> bytes:
        return self._texts()[0]

    @property
    def shapes_json(self) -> bytes:
        return self._texts()[1]

    @property
    def types_json(self) -> bytes:
        return self._texts()[2]

    @property
    def strides_json(self) -> bytes:
        """b"" when the trace predates strides (schema < 1.1.1)."""
        return self.ioinfo[self.ioinfo_size:]

    @property
    def values(self) -> list[Any]:
        return _parse(self.values_json)

    @property
    def shapes(self) -> list[Any]:
        return _parse(self.shapes_json)

    @property
    def types(self) -> list[str]:
        return _parse(self.types_json)

    @property
    def strides(self) -> list[Any] | None:
        """None when the trace predates strides (schema < 1.1.1)."""
        strides = self.strides_json
        return _parse(strides) if len(strides) else None


class HostOp(msgspec.Struct, gc=False):
    """One node of the host execution trace, normalised across schemas."""

    id: int
    name: str
    parent: int  # caller's id (``parent`` in 1.0.1, ``ctrl_deps`` later)
    tid: int  # ET thread id (small ints assigned by the observer, not OS tids)
    rf_id: int | None = None
    fw_parent: int = 0
    seq_id: int = -1
    scope: int = 0
    fw_tid: int = 0
    op_schema: str = ""
    inputs: IOValues = IOValues()
    outputs: IOValues = IOValues()
    # Schema-specific extras (pg_name, collective_name, in_msg_nelems, ...).
    attrs: dict[str, Any] = {}


def op_field(ops: Sequence[HostOp], field: str) -> list[Any]:
    """``field`` of every op, in order: read at the ops' slots by the
    compiled path (an attrgetter call an op was most of a pass over a
    trace's names or ids), else the twin (``_op_field_python``)."""
    fast = getattr(compiled.fast_path(), "op_field", None)
    if fast is not None and type(ops) is list:
        values = fast(ops, field)
        if values is not None:
            return values
    return _op_field_python(ops, field)


def _op_field_python(ops: Sequence[HostOp], field: str) -> list[Any]:
    return list(map(attrgetter(field), ops))


class ProcessGroup(msgspec.Struct, gc=False):
    pg_name: str
    pg_desc: str = ""
    ranks: list[int] = []
    group_size: int = 0
    backend: str = ""


class RepairInfo(msgspec.Struct, gc=False):
    """What ``--repair`` recovered from a host ET cut off mid-array."""

    ops_recovered: int  # complete nodes read before the cut
    tail_bytes_lost: int  # bytes after the last complete node (a partial node)
    orphans_to_root: int  # recovered ops whose caller was cut off


class HostTrace(msgspec.Struct, gc=False):
    path: str
    schema: str
    pid: int
    start_ts: int
    finish_ts: int
    ops: list[HostOp]  # in file order (completion order), not id order
    process_groups: list[ProcessGroup] = []
    repair: RepairInfo | None = None  # set when read with --repair


# --------------------------------------------------------------------------
# Kineto trace
# --------------------------------------------------------------------------


class CollectiveInfo(msgspec.Struct, gc=False):
    """Collective metadata from Kineto args (or from the host ET)."""

    name: str = ""  # e.g. "allreduce", "all_to_allv"
    dtype: str = ""
    in_msg_nelems: int = 0
    out_msg_nelems: int = 0
    in_split_size: list[int] = []
    out_split_size: list[int] = []
    group_size: int = 0
    pg_name: str = ""
    pg_desc: str = ""
    pg_ranks: list[int] = []
    rank: int = -1
    src_rank: int = -1
    dst_rank: int = -1
    seq: int = -1


class CpuEvent(msgspec.Struct, gc=False):
    """A Kineto ``cpu_op`` or ``user_annotation`` event."""

    name: str
    cat: str
    ts: float  # microseconds
    dur: float
    pid: int
    tid: int
    external_id: int = -1
    record_function_id: int = -1  # -1 when the trace predates the field
    seq_num: int = -1
    fwd_thread_id: int = -1
    collective: CollectiveInfo | None = None
    input_dims: Any = None  # ``Input Dims`` (record_shapes=True), as recorded
    input_types: Any = None  # ``Input type``: one dtype name per argument
    concrete_inputs: Any = None  # ``Concrete Inputs``: scalar arguments as text


class CpuColumns(Sequence[CpuEvent]):
    """Kineto CPU events as columns, with what linking them to a host ET
    reads (``load_kineto_trace(inputs=False)``): name, category, start,
    duration, pid, tid, record function id and the rare collective; a
    ``CpuEvent`` (its other fields at their defaults) is made when one is
    asked for. About 56 bytes an event, where a ``CpuEvent`` with its floats
    and ints was about 200: at a million ops the events were the largest
    thing held beside the host ops while linking."""

    __slots__ = ("name", "cat", "ts", "dur", "pid", "tid", "rf_id", "collective")

    def __init__(self) -> None:
        self.name: list[str] = []
        self.cat: list[str] = []
        self.ts = array("d")
        self.dur = array("d")
        self.pid = array("q")
        self.tid = array("q")
        self.rf_id = array("q")  # -1: not recorded
        self.collective: dict[int, CollectiveInfo] = {}  # by index, the few that have one

    def append(self, name: str, cat: str, ts: float, dur: float, pid: int, tid: int,
               rf_id: int, collective: CollectiveInfo | None) -> None:
        if collective is not None:
            self.collective[len(self.ts)] = collective
        self.name.append(name)
        self.cat.append(cat)
        self.ts.append(ts)
        self.dur.append(dur)
        self.pid.append(pid)
        self.tid.append(tid)
        self.rf_id.append(rf_id)

    def __len__(self) -> int:
        return len(self.ts)

    @overload
    def __getitem__(self, i: int) -> CpuEvent: ...

    @overload
    def __getitem__(self, i: slice) -> list[CpuEvent]: ...

    def __getitem__(self, i: int | slice) -> CpuEvent | list[CpuEvent]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return CpuEvent(self.name[i], self.cat[i], self.ts[i], self.dur[i], self.pid[i],
                        self.tid[i], record_function_id=self.rf_id[i],
                        collective=self.collective.get(i))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CpuColumns):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def joined(cls, parts: Iterable[CpuColumns]) -> CpuColumns:
        """The parts' events one after the other. Each part is emptied once
        taken: a streamed load holding every part and the whole at once was
        the peak of a million-op conversion (56 MB of columns twice)."""
        out = cls()
        for p in parts:
            base = len(out)
            out.collective.update((base + i, c) for i, c in p.collective.items())
            for k in ("name", "cat", "ts", "dur", "pid", "tid", "rf_id"):
                getattr(out, k).extend(getattr(p, k))
            p.clear()
        return out

    def clear(self) -> None:
        """No events left (its columns handed to another)."""
        CpuColumns.__init__(self)

    def by_time(self) -> CpuColumns:
        """The events sorted by start, stably (ties keep their order); this
        one when already in order."""
        ts = self.ts
        if all(map(le, ts, islice(ts, 1, None))):
            return self
        order = sorted(range(len(ts)), key=ts.__getitem__)
        out = CpuColumns()
        out.name = list(map(self.name.__getitem__, order))
        out.cat = list(map(self.cat.__getitem__, order))
        for k, code in (("ts", "d"), ("dur", "d"), ("pid", "q"), ("tid", "q"), ("rf_id", "q")):
            setattr(out, k, array(code, map(getattr(self, k).__getitem__, order)))
        if self.collective:
            out.collective = {new: self.collective[old] for new, old in enumerate(order)
                              if old in self.collective}
        return out


class RuntimeEvent(msgspec.Struct, gc=False):
    """A ``cuda_runtime`` / ``cuda_driver`` call (launches, syncs, event records)."""

    name: str
    ts: float
    dur: float
    pid: int
    tid: int
    correlation: int = -1
    external_id: int = -1
    stream: int = -1  # present on some runtime events (e.g. cudaEventRecord)


class GpuActivity(msgspec.Struct, gc=False):
    """A ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` event."""

    name: str
    cat: str
    ts: float
    dur: float
    device: int
    stream: int
    correlation: int
    external_id: int = -1
    bytes: int = 0
    collective: CollectiveInfo | None = None


class SyncEvent(msgspec.Struct, gc=False):
    """A ``cuda_sync`` event (recorded with ``enable_cuda_sync_events=True``)."""

    kind: str  # "Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event"
    ts: float
    dur: float
    pid: int
    tid: int
    stream: int = -1  # the stream that waits (Stream Wait Event) or is synced
    device: int = -1
    correlation: int = -1
    wait_on_stream: int = -1
    wait_on_event_record_corr_id: int = -1
    wait_on_event_id: int = -1


class KinetoTrace(msgspec.Struct, gc=False):
    path: str
    # a list, or columns when read for linking (``CpuColumns``)
    cpu_events: Sequence[CpuEvent]
    runtime_events: list[RuntimeEvent]
    gpu_activities: list[GpuActivity]
    sync_events: list[SyncEvent]
    rank: int = -1
    world_size: int = 0
    distributed_info: dict[str, Any] = {}
    # ``ac2g`` flow pairs, correlation id -> launch (ts, tid); used only when a
    # launch event lacks ``correlation``.
    flow_starts: dict[int, tuple[float, int]] = {}
    # ``python_function`` events (with_stack=True), not linked to a host ET.
    python_events: list[CpuEvent] = []

"""Dependency rules: small pure functions, one per edge kind.

Each takes plain spans and returns ``(src, dst, kind)`` edges. Every rule
points from something that happened earlier to something later, so on a
consistent trace the union is acyclic; ``validate`` checks that anyway.
"""

from __future__ import annotations

import bisect
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Protocol, TypeVar

import msgspec

from pt2chakra.chakra import compiled
from pt2chakra.chakra.dep_kinds import EdgeKind
from pt2chakra.rules.conventions import is_late_launch, thread_holds

Edge = tuple[int, int, EdgeKind]

# When looking back for the op that last finished on another CPU thread, stop
# after this many candidates: on a busy trace the nearest other-thread op is
# a few entries back, and an unbounded scan would be quadratic.
INTER_THREAD_LOOKBACK = 64


class CpuSpan(msgspec.Struct, gc=False):
    """A CPU node as the rules see it. ``start``/``end`` are microseconds, or
    ``None`` for host-only traces, which have no timing."""

    id: int
    parent: int
    tid: int
    start: float | None = None
    end: float | None = None


class GpuSpan(msgspec.Struct, gc=False):
    id: int
    device: int
    stream: int
    launch_ts: float  # when the CPU enqueued it (its own start if unknown)
    launcher: int = -1  # host op id, -1 when unknown


_span_id = attrgetter("id")
_span_start = attrgetter("start")
_span_end = attrgetter("end")
_span_tid = attrgetter("tid")
T = TypeVar("T")


def iter_thread_order_edges(cpu: Sequence[CpuSpan]) -> Iterator[Edge]:
    """Execution order within each CPU thread (``thread_order_edges``) of
    these spans."""
    return thread_order_edges((s.id, s.parent, s.tid) for s in sorted(cpu, key=_span_id))


class ThreadOp(Protocol):
    """What the thread order reads of an op (a ``HostOp``)."""

    @property
    def id(self) -> int: ...
    @property
    def parent(self) -> int: ...
    @property
    def tid(self) -> int: ...


class EdgeColumns:
    """Edges as three columns, in the order found: destinations and sources
    (array('q')) and kinds (array('B'), ``EdgeKind`` values), 17 bytes an
    edge. ``ascending``: the destinations strictly ascend and no edge is a
    self-edge, so ``DepTable.merged`` takes the columns whole when they
    come above every destination so far. Iterating gives ``Edge``s."""

    __slots__ = ("dsts", "srcs", "kinds", "ascending")

    def __init__(self, dsts: array[int], srcs: array[int], kinds: array[int],
                 ascending: bool) -> None:
        assert (dsts.typecode, srcs.typecode, kinds.typecode) == ("q", "q", "B")
        self.dsts, self.srcs, self.kinds, self.ascending = dsts, srcs, kinds, ascending

    @classmethod
    def of(cls, edges: Iterable[Edge]) -> EdgeColumns:
        dsts, srcs, kinds = array("q"), array("q"), array("B")
        ascending, last = True, None
        for src, dst, kind in edges:
            ascending = ascending and src != dst and (last is None or dst > last)
            last = dst
            dsts.append(dst)
            srcs.append(src)
            kinds.append(kind)
        return cls(dsts, srcs, kinds, ascending)

    def __iter__(self) -> Iterator[Edge]:
        return zip(self.srcs, self.dsts, map(KINDS_BY_VALUE.__getitem__, self.kinds))

    def __len__(self) -> int:
        return len(self.dsts)


# By value: KINDS_BY_VALUE[int(kind)] is kind (columns hold the values).
KINDS_BY_VALUE: tuple[EdgeKind, ...] = tuple(sorted(EdgeKind))
assert all(int(kind) == value for value, kind in enumerate(KINDS_BY_VALUE)), \
    "EdgeKind values 0..n-1"


def thread_order_columns(ops: Sequence[ThreadOp], channels: Mapping[int, int]) -> EdgeColumns:
    """``thread_order_edges`` of ``ops`` (in any order), an op's thread its
    channel (``channels``) or else its own: the compiled pass over the
    ops when they come in id order (as ``link`` leaves them), else the
    twin (``_thread_order_python``)."""
    fast = getattr(compiled.fast_path(), "thread_order", None)
    if fast is not None and isinstance(ops, list) and type(channels) is dict:
        n = len(ops)
        dsts, srcs, kinds = array("q", [0]) * n, array("q", [0]) * n, array("B", [0]) * n
        count = fast(ops, channels, EdgeKind.CALLER, EdgeKind.THREAD_ORDER, dsts, srcs, kinds)
        if count is not None:
            del dsts[count:], srcs[count:], kinds[count:]
            return EdgeColumns(dsts, srcs, kinds, True)
    return _thread_order_python(ops, channels)


def _thread_order_python(ops: Sequence[ThreadOp], channels: Mapping[int, int]) -> EdgeColumns:
    """``thread_order_columns``' pure-Python twin."""
    channel = channels.get
    return EdgeColumns.of(thread_order_edges(
        (op.id, op.parent, channel(op.id, op.tid)) for op in sorted(ops, key=_span_id)))


def thread_order_edges(ops: Iterable[tuple[int, int, int]]) -> Iterator[Edge]:
    """Execution order within each CPU thread: every op after the one that
    started just before it (its caller, or the previous op's last callee).
    ET ids are handed out at op start, so id order is start order: ``ops``
    are (id, caller id, thread) by id, needing no timing (a conversion
    makes them from its ops, without a span each). One edge at a time, by
    destination id (a list is about 70 MB for a million ops)."""
    last: dict[int, int] = {}
    caller, thread = EdgeKind.CALLER, EdgeKind.THREAD_ORDER
    for op_id, parent, tid in ops:
        prev = last.get(tid)
        if prev is not None:
            yield prev, op_id, caller if prev == parent else thread
        last[tid] = op_id


def inter_thread_edges(cpu: Sequence[CpuSpan]) -> list[Edge]:
    """``inter_thread_edges_of`` these spans (those with a start and end)."""
    timed = [s for s in cpu if s.start is not None and s.end is not None]
    timed.sort(key=_span_id)
    return inter_thread_edges_of(timed, _span_id, _span_tid, _span_start, _span_end)


def inter_thread_edges_of(timed: Sequence[T], ident: Callable[[T], int],
                          tid: Callable[[T], int], start: Callable[[T], float],
                          end: Callable[[T], float]) -> list[Edge]:
    """Where execution moves from one CPU thread to another (e.g. the autograd
    thread taking over from the main thread and handing back), the first op
    of the new run waits for the op that most recently *finished* on another
    thread. Needs timing; host-only traces get none. ``timed``: the CPU ops
    in id order, read through the four functions (spans, or a conversion's
    op ids with its columns: C-level getters, no span a op)."""
    if len(set(map(tid, timed))) < 2:
        return []  # one thread: nothing to hand over
    # By (start, id) and (end, id): in id order, then stably by time (a
    # (time, id) key is a new tuple per op, about 60 MB for a million).
    by_start = sorted(timed, key=start)
    by_end = sorted(timed, key=end)
    ends = array("d", map(end, by_end))
    edges: list[Edge] = []
    prev_tid: int | None = None
    for op in by_start:
        op_tid = tid(op)
        if prev_tid is not None and op_tid != prev_tid:
            k = bisect.bisect_right(ends, start(op)) - 1
            stop = max(-1, k - INTER_THREAD_LOOKBACK)
            while k > stop:
                cand = by_end[k]
                if tid(cand) != op_tid:
                    edges.append((ident(cand), ident(op), EdgeKind.INTER_THREAD))
                    break
                k -= 1
        prev_tid = op_tid
    return edges


def launch_edges(gpu: Iterable[GpuSpan]) -> list[Edge]:
    """A GPU op runs after the CPU op that launched it."""
    return [(g.launcher, g.id, EdgeKind.LAUNCH) for g in gpu if g.launcher >= 0]


def late_launches(cpu: Sequence[CpuSpan], gpu: Iterable[GpuSpan]) -> dict[int, float]:
    """GPU op id -> its recorded launch time, for each launch that came well
    after its launcher's hold of its thread ended (``is_late_launch``): the
    replay would release it at that hold's end, before the caller's own time
    that preceded the launch."""
    launched: dict[int, list[GpuSpan]] = defaultdict(list)
    for g in gpu:
        if g.launcher >= 0:
            launched[g.launcher].append(g)
    if not launched:
        return {}
    threads: dict[int, list[CpuSpan]] = defaultdict(list)
    for span in sorted(cpu, key=_span_id):  # ids follow op start, as the replay's threads
        if span.start is not None and span.end is not None:
            threads[span.tid].append(span)
    late: dict[int, float] = {}
    for ops in threads.values():
        if not any(s.id in launched for s in ops):
            continue
        starts = [s.start for s in ops if s.start is not None]
        holds = thread_holds(starts, [s.end - s.start for s in ops
                                      if s.end is not None and s.start is not None])
        for span, start, held in zip(ops, starts, holds):
            for g in launched.get(span.id, ()):
                if is_late_launch(g.launch_ts, start + held):
                    late[g.id] = g.launch_ts
    return late


def _by_stream(gpu: Iterable[GpuSpan]) -> dict[tuple[int, int], list[GpuSpan]]:
    lanes: dict[tuple[int, int], list[GpuSpan]] = defaultdict(list)
    for g in gpu:
        lanes[(g.device, g.stream)].append(g)
    for lane in lanes.values():
        lane.sort(key=lambda g: (g.launch_ts, g.id))
    return lanes


def stream_order_edges(gpu: Iterable[GpuSpan]) -> list[Edge]:
    """GPU ops on one stream run in the order they were enqueued."""
    edges: list[Edge] = []
    for lane in _by_stream(gpu).values():
        edges.extend((a.id, b.id, EdgeKind.STREAM_ORDER) for a, b in zip(lane, lane[1:]))
    return edges


class StreamLookup:
    """Per-stream launch-ordered GPU ops, for 'last op enqueued before t' and
    'first op enqueued after t' questions."""

    def __init__(self, gpu: Iterable[GpuSpan]) -> None:
        self.lanes = _by_stream(gpu)
        self.times = {key: [g.launch_ts for g in lane] for key, lane in self.lanes.items()}

    def last_before(self, device: int, stream: int, ts: float) -> GpuSpan | None:
        key = self._key(device, stream)
        if key is None:
            return None
        k = bisect.bisect_left(self.times[key], ts)
        return self.lanes[key][k - 1] if k else None

    def first_after(self, device: int, stream: int, ts: float) -> GpuSpan | None:
        key = self._key(device, stream)
        if key is None:
            return None
        k = bisect.bisect_right(self.times[key], ts)
        lane = self.lanes[key]
        return lane[k] if k < len(lane) else None

    def streams(self, device: int) -> list[tuple[int, int]]:
        return [key for key in self.lanes if device < 0 or key[0] == device]

    def _key(self, device: int, stream: int) -> tuple[int, int] | None:
        if device >= 0:
            return (device, stream) if (device, stream) in self.lanes else None
        for key in self.lanes:  # device unknown: the stream id alone
            if key[1] == stream:
                return key
        return None


def stream_wait_edges(waits: Iterable[tuple[int, int, float, int, float]],
                      lookup: StreamLookup) -> list[Edge]:
    """``cudaStreamWaitEvent``: the first op enqueued on the waiting stream
    after the wait depends on the last op enqueued on the recorded stream
    before the event was recorded.

    ``waits`` holds ``(device, stream, wait_ts, wait_on_stream, record_ts)``.
    """
    edges: list[Edge] = []
    for device, stream, wait_ts, src_stream, record_ts in waits:
        producer = lookup.last_before(device, src_stream, record_ts)
        consumer = lookup.first_after(device, stream, wait_ts)
        if producer is not None and consumer is not None and producer.id != consumer.id:
            edges.append((producer.id, consumer.id, EdgeKind.STREAM_WAIT))
    return edges


def gpu_sync_edges(syncs: Iterable[tuple[int, int, float, float, int]],
                   lookup: StreamLookup,
                   next_cpu_op: dict[int, tuple[list[float], list[int]]]) -> list[Edge]:
    """A CPU op that starts after a synchronize returned depends on the GPU
    work the synchronize waited for.

    ``syncs`` holds ``(device, stream, before_ts, end_ts, tid)``: stream -1
    means every stream of the device (a device synchronize); only GPU work
    enqueued before ``before_ts`` is waited on. ``next_cpu_op`` maps a Kineto
    thread id to its host ops' sorted start times and ids.
    """
    edges: list[Edge] = []
    for device, stream, before_ts, end_ts, tid in syncs:
        starts, ids = next_cpu_op.get(tid, ([], []))
        k = bisect.bisect_left(starts, end_ts)
        if k >= len(ids):
            continue
        consumer = ids[k]
        if stream >= 0:
            keys = [(device, stream)]
        else:
            keys = lookup.streams(device)
        for dev, st in keys:
            producer = lookup.last_before(dev, st, before_ts)
            if producer is not None:
                edges.append((producer.id, consumer, EdgeKind.GPU_SYNC))
    return edges

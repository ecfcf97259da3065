"""Build the Chakra graph (nodes + typed edges) from a linked trace.

Every host op becomes a node except the observer's process/thread containers;
every GPU activity of the recorded step becomes a node. CPU nodes carry their
*exclusive* duration (inclusive minus callees) so that replaying the
caller-before-callee chain on one thread adds up to the measured time; the
inclusive duration is kept as an attribute.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, count, islice
from operator import attrgetter
from typing import Any, NamedTuple

import msgspec

from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR, EDGE_KIND_NAMES, EdgeKind
from pt2chakra.chakra.encode import (
    NODE_FIELDS,
    AttrSpec,
    FramedNodes,
    NodeWriter,
    encode_node,
)
from pt2chakra.chakra.records import (
    CHAKRA_VERSION,
    Attr,
    ChakraNode,
    CollectiveType,
    GlobalMetadata,
    NodeType,
)
from pt2chakra.conversion import collective as coll
from pt2chakra.conversion.dep_table import Deps, DepTable
from pt2chakra.conversion.deps import (
    CpuSpan,
    Edge,
    GpuSpan,
    StreamLookup,
    gpu_sync_edges,
    inter_thread_edges_of,
    late_launches,
    launch_edges,
    stream_order_edges,
    stream_wait_edges,
    thread_order_columns,
)
from pt2chakra.conversion.linker import (
    NAN,
    LaunchedGpuOp,
    LinkedEvents,
    LinkedTrace,
    ReadByGet,
    containers,
    dense_ids,
    names_passing,
)
from pt2chakra.conversion.step import is_stand_in
from pt2chakra.names import (
    PROCESS_GROUP_INIT,
    RECORD_PARAM_COMMS,
    functional_group,
    is_backend_comm_op,
)
from pt2chakra.pytorch.records import CollectiveInfo, HostOp, IOValues, op_field
from pt2chakra.pytorch.transfers import is_device_transfer, own_transfers
from pt2chakra.rules.conventions import (
    COMM_CHANNEL,
    COMM_SIZE_UNKNOWN_ATTR,
    INCLUSIVE_ATTR,
    LAUNCH_TIME_ATTR,
    STEP_DEFINITION_ATTR,
    STEP_SPAN,
    own_transfer_channel,
)


class _NoOps(dict[int, HostOp | None]):
    """``OpsById``'s table when the ids are sparse: None for an id it lacks."""

    def __missing__(self, key: int) -> None:
        return None


class OpsById(ReadByGet[HostOp]):
    """Every host op by id: a list indexed by id when the ids are dense (as
    the observer numbers them; 8 bytes a slot, where a dict of a million ops
    was about 40 MB at the conversion's peak), else a dict. A repeated id
    keeps its last op, as a dict built in order does. Loops over every op
    read ``table`` within ``lo <= id < hi`` (None: no op); ``max_id``: the
    highest id (None: no op)."""

    __slots__ = ("table", "lo", "hi", "max_id", "_count")

    def __init__(self, ops: Sequence[HostOp]) -> None:
        ids = op_field(ops, "id")
        self.max_id: int | None = max(ids, default=None)
        top = (-1 if self.max_id is None else self.max_id) + 1
        self.table: Any
        if min(ids, default=0) >= 0 and dense_ids(top, len(ids)):
            self.table = [None] * top
            self.lo, self.hi = 0, top
        else:
            self.table = _NoOps()
            self.lo, self.hi = -(2**63), 2**63
        table = self.table
        for op_id, op in zip(ids, ops):
            table[op_id] = op
        self._count = len(table) if isinstance(table, dict) else top - table.count(None)

    def get(self, op_id: int, default: Any = None) -> Any:
        if self.lo <= op_id < self.hi:
            op = self.table[op_id]
            if op is not None:
                return op
        return default

    def __iter__(self) -> Iterator[int]:
        table = self.table
        if isinstance(table, dict):
            return iter(table)
        return (i for i, op in enumerate(table) if op is not None)

    def __len__(self) -> int:
        return self._count


class CpuNodeSources(NamedTuple):
    """Where a CPU node's fields come from beyond its host op, by op id.

    Its times are read from its linked event's columns (``LinkedEvents``)
    when written rather than copied into a table of their own (one tuple
    per op: about 140 MB for a million ops), so they are kept until then."""

    events: LinkedEvents  # the linked Kineto event's times
    # time in linked callees on its thread (us), by op id: read for linked
    # ops (a column of the linked events' form, ``LinkedEvents.zeros``)
    callee_time: Any
    deps: Mapping[int, Deps]
    ops_by_id: Mapping[int, HostOp]  # every host op (OpsById): a kept op's caller is one
    dropped: frozenset[int]  # ... unless dropped (see build_graph)


class ChakraGraph:
    """The converted graph: dependencies in memory, nodes made on demand.

    Nodes are generated lazily by ``nodes()`` so that writing a million-node
    trace never holds every encoded node at once; ``deps`` (destination ->
    ``[(source, kind)]``) is compact enough to check for cycles first."""

    def __init__(self, metadata: GlobalMetadata, linked: LinkedTrace, cpu_ops: list[HostOp],
                 callee_time: Any, gpu_nodes: list[ChakraNode],
                 deps: DepTable,
                 host_ops_dropped: dict[str, int], ops_by_id: Mapping[int, HostOp],
                 comm: CommContext | None = None, dropped: frozenset[int] = frozenset(),
                 ) -> None:
        """``dropped``: the ids of ``ops_by_id`` not in ``cpu_ops``."""
        self.metadata = metadata
        self.deps = deps
        self.link_method = linked.method
        self.host_ops_in = len(linked.host.ops)
        self.host_ops_kept = len(cpu_ops)
        self.host_ops_dropped = host_ops_dropped
        self.linked_ops = len(linked.cpu_event)
        self.gpu_in = len(linked.kineto.gpu_activities) if linked.kineto else 0
        # the nodes standing for GPU work the trace holds no activity for
        self.stand_ins = dict(Counter(g.activity.name for g in linked.gpu_ops
                                      if is_stand_in(g.activity)))
        self.gpu_kept = len(gpu_nodes) - sum(self.stand_ins.values())
        self.gpu_dropped = dict(linked.gpu_dropped)
        self._cpu_ops = cpu_ops
        self._gpu_nodes = gpu_nodes
        self._comm = comm or CommContext(ops_by_id, frozenset(), "", 0)
        self._ops_by_id = ops_by_id
        self._sources = CpuNodeSources(linked.cpu_event, callee_time, deps, ops_by_id, dropped)
        self._special: frozenset[int] | None = None  # _special_ids, once found

    def node_ids(self) -> list[int]:
        return [op.id for op in self._cpu_ops] + [n.id for n in self._gpu_nodes]

    def node_names(self) -> dict[int, str]:
        names = {op.id: op.name for op in self._cpu_ops}
        names.update((n.id, n.name) for n in self._gpu_nodes)
        return names

    def nodes(self) -> Iterator[ChakraNode]:
        """CPU nodes in id order, then GPU nodes in start order."""
        for op in self._cpu_ops:
            yield _cpu_node(op, self._sources, self._comm)
        yield from self._gpu_nodes_with_deps()

    def node_type_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        special = self._special_ids()
        for op in self._cpu_ops if special else ():
            if op.id in special:
                counts[_cpu_node_type(op, self._comm.transfers)[0].name] += 1
        counts[NodeType.COMP_NODE.name] += len(self._cpu_ops) - len(special)
        counts.update(NodeType(n.type).name for n in self._gpu_nodes)
        return {k: v for k, v in counts.items() if v}

    def framed_nodes(self) -> Iterator[FramedNodes | bytes]:
        """The same nodes as ``nodes()``, encoded as the converter writes
        them. Ordinary CPU ops, the bulk of a trace, skip ``ChakraNode``:
        their raw fields go to a ``NodeWriter``, framed a batch at a time
        (``FramedNodes``: no bytes object or Python step per node;
        byte-identical, tested); the special ones and the GPU nodes take
        ``encode_node``, one message each, in the same order."""
        writer = cpu_node_writer()
        sources, comm = self._sources, self._comm
        ops = self._cpu_ops
        rows = _cpu_rows(ops, self.deps.in_order(map(_op_id, ops)), sources,
                         NodeType.COMP_NODE, True)
        done = 0
        for at in self._special_positions():
            yield from writer.framed(islice(rows, at - done))
            next(rows)  # the special op's row: its node is made in full instead
            yield encode_node(_cpu_node(ops[at], sources, comm))
            done = at + 1
        yield from writer.framed(rows)
        for node in self._gpu_nodes_with_deps():
            yield encode_node(node)

    def _special_positions(self) -> list[int]:
        """Where the special ops (``_special_ids``) are in ``_cpu_ops``, in
        order (found without a Python step per op)."""
        special = self._special_ids()
        if not special:
            return []
        return list(compress(count(), map(special.__contains__, map(_op_id, self._cpu_ops))))

    def comm_size_unknown(self) -> int:
        """Communication nodes whose size the trace does not hold
        (``COMM_SIZE_UNKNOWN_ATTR``), counted in the report."""
        flagged = sum(1 for n in self._gpu_nodes if _flagged(n.attrs))
        special = self._special_ids()
        # the few special ops by id (a dict of every op was 40 MB above the
        # conversion's peak at a million ops)
        by_id = {op.id: op for op in self._cpu_ops if op.id in special} if special else {}
        for op_id in special:
            op = by_id.get(op_id)
            ctype = _cpu_node_type(op, self._comm.transfers)[1] if op is not None else None
            if op is not None and ctype is not None:
                flagged += _flagged(_comm_attrs(ctype, None, op, self._comm))
        return flagged

    def _special_ids(self) -> frozenset[int]:
        """The CPU ops that are not surely plain COMP_NODEs: they may become
        metadata or communication nodes (see ``_cpu_node_type``). A few
        ops of the trace, found without a call per op, once (the writer and
        the report's counts ask: a pass over the ops' names each time)."""
        if self._special is None:
            ops = self._cpu_ops
            pg_init = names_passing(ops, PROCESS_GROUP_INIT.__eq__)
            special = set(self._comm.transfers)
            if pg_init is not None:
                special.update(map(_op_id, compress(ops, pg_init)))
            self._special = frozenset(special)
        return self._special

    def _gpu_nodes_with_deps(self) -> Iterator[ChakraNode]:
        for node in self._gpu_nodes:
            node_deps = self.deps.get(node.id)
            if node_deps:
                yield msgspec.structs.replace(
                    node, data_deps=[d for d, _ in node_deps],
                    attrs=node.attrs + [(DEP_KINDS_ATTR, "string_list",
                                         [EDGE_KIND_NAMES[k] for _, k in node_deps])])
            else:
                yield node


_op_id = attrgetter("id")
_op_tid = attrgetter("tid")


class CommContext(NamedTuple):
    """What a communication node's attributes need beyond its own op."""

    ops_by_id: Mapping[int, HostOp]
    # Backend ops (``gloo:all_reduce``...) that are the transfer themselves.
    transfers: frozenset[int]
    # The process group of a collective that names none: the trace's only one.
    default_pg: str
    # Ranks in that group (sizes an all-gather known only by its input).
    group_size: int
    # Transfer op id -> the worker thread Kineto saw it run on (its channel).
    channels: dict[int, int] = {}
    # A send or receive transfer op id -> its call (``posted_transfers``).
    posted: dict[int, int] = {}
    # Tensor id -> the group a functional collective moved it in
    # (``functional_tensor_groups``).
    functional: dict[int, str] = {}


def transfer_ops(ops: Sequence[HostOp], gpu_ops: Sequence[LaunchedGpuOp],
                 ops_by_id: Mapping[int, HostOp], host_only: bool) -> frozenset[int]:
    """The backend ops that are their collective's transfer
    (``pytorch.transfers.own_transfers``): every one in a host-only trace,
    else those no collective GPU node (an NCCL kernel) belongs to."""
    mask = names_passing(ops, is_backend_comm_op)
    backend = [] if mask is None else list(map(_op_id, compress(ops, mask)))
    launchers = (g.host_op_id for g in gpu_ops
                 if _gpu_collective(g.activity.name, g.activity.collective,
                                    ops_by_id.get(g.host_op_id), ops_by_id) is not None)
    return own_transfers(backend, launchers, ops_by_id, host_only)


def comm_context(linked: LinkedTrace, ops_by_id: Mapping[int, HostOp]) -> CommContext:
    groups = linked.host.process_groups
    if not groups and linked.kineto is not None:  # a host ET before process-group records
        from pt2chakra.conversion.kineto_only import process_groups

        groups = process_groups(linked.kineto)
    world = linked.kineto.world_size if linked.kineto is not None else 0
    only = groups[0] if len(groups) == 1 else None
    size = (only.group_size or len(only.ranks)) if only is not None else 0
    transfers = transfer_ops(linked.ops, linked.gpu_ops, ops_by_id, linked.kineto is None)
    posted = posted_transfers(transfers, ops_by_id)
    for transfer, call in posted.items():
        _posted_by_call(transfer, call, linked.cpu_event)
    channels = transfer_channels(transfers, posted, linked.cpu_event)
    return CommContext(ops_by_id, transfers, only.pg_name if only is not None else "",
                       size or world, channels, posted, functional_tensor_groups(linked.ops))


# How far up its callers a backend op's functional collective is looked for
# (``gloo:all_reduce`` under ``c10d::allreduce_`` under
# ``_c10d_functional::all_reduce``).
FUNCTIONAL_CALLER_DEPTH = 3


def functional_tensor_groups(ops: Sequence[HostOp]) -> dict[int, str]:
    """Tensor id -> the group of the functional collective (DTensor's,
    torch.compile's) that took or gave it: gloo names no group on its own
    ops, and runs a functional collective's work when the tensor is
    waited on (under ``wait_tensor``, which names none), so the tensor is
    what ties the work to its group."""
    out: dict[int, str] = {}
    for op in ops:
        group = functional_group(op.name, op.inputs.values, op.inputs.types)
        if group is None:
            continue
        for tensor in (*coll.tensor_ids(op.inputs.values), *coll.tensor_ids(op.outputs.values)):
            out.setdefault(tensor, group)
    return out


def _functional_pg(op: HostOp | None, comm: CommContext) -> str:
    """The group of the functional collective a backend op runs: named by a
    caller within ``FUNCTIONAL_CALLER_DEPTH``, else by the tensor it moves;
    "" when it runs none."""
    if op is None or not comm.functional:  # no functional collective in the trace
        return ""
    caller: HostOp | None = op
    for _ in range(FUNCTIONAL_CALLER_DEPTH + 1):
        if caller is None:
            break
        group = functional_group(caller.name, caller.inputs.values, caller.inputs.types)
        if group is not None:
            return group
        caller = comm.ops_by_id.get(caller.parent)
    if is_backend_comm_op(op.name):
        for tensor in coll.tensor_ids(op.inputs.values):
            if tensor in comm.functional:
                return comm.functional[tensor]
    return ""


def posted_transfers(transfers: frozenset[int], ops_by_id: Mapping[int, HostOp],
                     ) -> dict[int, int]:
    """Send or receive transfer op id (gloo's ``send``/``recv``: a pipeline's
    transfers) -> the call that posted it (``c10d::send``/``recv_``)."""
    out: dict[int, int] = {}
    for i in transfers:
        op = ops_by_id.get(i)
        if op is not None and coll.collective_from_name(op.name) in (coll.SEND, coll.RECV):
            out[i] = op.parent
    return out


def transfer_channels(transfers: frozenset[int], posted: Mapping[int, int],
                      events: LinkedEvents) -> dict[int, int]:
    """Transfer op id -> its channel: the backend worker thread Kineto saw it
    run on, where the backend runs them one after another. A send or a
    receive (``posted``) instead gets a channel of its own (``own_transfer_channel``):
    it is posted and left in flight, completing when its peer matches it, so
    the transfers of one thread overlap (four sends in flight while the
    stage computes) and its host waits on one only where the timing shows it
    did. On one shared channel each waited for the previous one's recorded
    end, which is when the host called ``wait()``, not when the bytes moved."""
    channels: dict[int, int] = {}
    for i in transfers:
        ev = events.get(i)
        if ev is not None:
            channels[i] = own_transfer_channel(i) if i in posted else ev.tid
    return channels


def _posted_by_call(op_id: int, call: int, events: LinkedEvents) -> None:
    """A send or receive starts when its call (``c10d::send``/``recv_``)
    does: gloo posts the buffer first and only then makes the work object
    whose record Kineto shows, up to milliseconds later (a receive of rank 1
    ended 3.3 ms before its send's record began). Its linked event is moved
    to the call's start, its end kept, before any edge is found from it."""
    ts, dur, _tid, lo, hi = events.columns()
    if not (lo <= op_id < hi and lo <= call < hi):
        return
    own, posted = ts[op_id], ts[call]
    if posted == posted and own == own and posted < own:  # both linked (not NaN)
        ts[op_id] = posted
        dur[op_id] += own - posted


def build_graph(linked: LinkedTrace, rank: int | None = None) -> ChakraGraph:
    host = linked.host
    ops_by_id = OpsById(host.ops)
    kept_ops = linked.ops
    dropped_host: Counter[str] = Counter()
    n_containers = len(host.ops) - len(kept_ops)
    if n_containers:
        dropped_host["observer container (process/thread root, no work)"] = n_containers
    dropped = _dropped_ids(host.ops, kept_ops)

    comm = comm_context(linked, ops_by_id)
    next_id = (ops_by_id.max_id or 0) + 1  # the GPU nodes' ids follow every op's
    gpu_nodes, gpu_spans = _gpu_nodes(linked.gpu_ops, next_id, comm)
    late: dict[int, float] = {}
    deps = DepTable.merged(_edge_groups(linked, kept_ops, comm, gpu_spans, late))
    _mark_late_launches(gpu_nodes, late)
    # After the edges: the spans they are found from were the peak of memory.
    callee_time = _callee_time(kept_ops, linked, ops_by_id)
    return ChakraGraph(_metadata(linked, rank), linked, kept_ops, callee_time, gpu_nodes, deps,
                       dict(dropped_host), ops_by_id, comm, dropped)


def _cpu_spans(linked: LinkedTrace, kept_ops: Sequence[HostOp], comm: CommContext,
               ) -> list[CpuSpan]:
    spans: list[CpuSpan] = []
    append, channel = spans.append, comm.channels.get
    ts_of, dur_of, _tid, lo, hi = linked.cpu_event.columns()
    # Names bound once and the events read from their columns: a loop once per op.
    for op in kept_ops:
        op_id = op.id
        tid = channel(op_id, op.tid)
        ts = ts_of[op_id] if lo <= op_id < hi else NAN
        if ts != ts:  # NaN: not linked
            append(CpuSpan(op_id, op.parent, tid))
        else:
            append(CpuSpan(op_id, op.parent, tid, ts, ts + dur_of[op_id]))
    return spans


def _edge_groups(linked: LinkedTrace, kept_ops: Sequence[HostOp], comm: CommContext,
                 gpu_spans: list[GpuSpan], late: dict[int, float]) -> Iterator[Iterable[Edge]]:
    """Each rule's edges in turn, made only when the last are merged, the
    thread-order ones one at a time, and the CPU spans dropped before any
    later rule runs: on a million-op trace the spans, the merged table and
    the edges of every rule at once were the peak (about 250 MB above the
    traces). Fills ``late`` with the late launches (``late_launches``), found
    from spans. The spans (about 130 bytes an op with their times) are made
    only when there are late launches to look for (a GPU op with a
    launcher); the thread order and the inter-thread edges are read from
    the ops and the linked events' columns."""
    if any(g.launcher >= 0 for g in gpu_spans):
        late.update(late_launches(_cpu_spans(linked, kept_ops, comm), gpu_spans))
    inter = _inter_thread_edges(linked, kept_ops, comm)  # merged after the thread order
    yield thread_order_columns(kept_ops, comm.channels)
    yield inter
    del inter
    yield launch_edges(gpu_spans)
    yield stream_order_edges(gpu_spans)
    lookup = StreamLookup(gpu_spans)
    yield stream_wait_edges(((w.device, w.stream, w.ts, w.wait_on_stream, w.record_ts)
                             for w in linked.stream_waits), lookup)
    if linked.cpu_syncs:
        yield gpu_sync_edges(((s.device, s.stream, s.before_ts if s.before_ts >= 0 else s.ts,
                               s.end, s.tid) for s in linked.cpu_syncs), lookup,
                             _cpu_starts_by_kineto_tid(linked))


def _inter_thread_edges(linked: LinkedTrace, kept_ops: Sequence[HostOp], comm: CommContext,
                        ) -> list[Edge]:
    """``inter_thread_edges`` of the linked ops (their thread: the op's, or
    its channel), read by id from columns: an op's start and end, and its
    thread, without a span per op (1M spans were the graph's peak)."""
    events = linked.cpu_event
    if not events:
        return []  # nothing linked (host-only): no op has a start or end
    if len(set(map(_op_tid, kept_ops)).union(comm.channels.values())) < 2:
        return []  # one thread: nothing to hand over
    ts, dur, _tid, lo, hi = events.columns()
    channel = comm.channels.get
    thread = events.int_column()
    ids: list[int] = []  # the ops' own id objects, in id order
    for op in sorted(kept_ops, key=_op_id):
        op_id = op.id
        if lo <= op_id < hi and ts[op_id] == ts[op_id]:  # linked (not NaN)
            ids.append(op_id)
            thread[op_id] = channel(op_id, op.tid)
    ends = events.ends()
    edges = inter_thread_edges_of(ids, int, thread.__getitem__, ts.__getitem__, ends.__getitem__)
    posted = {t: call for t, call in comm.posted.items() if t in comm.channels}  # linked
    if not posted:
        return edges
    kept = [e for e in edges if e[1] not in posted]
    return kept + _posting_edges(posted, ids, thread, ts, ends)


def _posting_edges(posted: Mapping[int, int], ids: Sequence[int], thread: Any, ts: Any,
                   ends: Any) -> list[Edge]:
    """A send or receive is posted by its call, so it follows what its call's
    thread ran before the call: the op of that thread that last ended by the
    call's start. The inter-thread rule would pick whatever ended last on
    any thread, which for a transfer is often the previous transfer, whose
    recorded end is only when its host got round to waiting on it."""
    known = set(ids)
    wanted = {thread[call] for call in posted.values() if call in known}
    by_thread: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for op_id in ids:
        if thread[op_id] in wanted:
            by_thread[thread[op_id]].append((ends[op_id], op_id))
    for rows in by_thread.values():
        rows.sort()
    edges: list[Edge] = []
    for transfer, call in posted.items():
        rows = by_thread.get(thread[call], []) if call in known else []
        k = bisect.bisect_right(rows, (ts[call], math.inf)) - 1
        if k >= 0:
            edges.append((rows[k][1], transfer, EdgeKind.INTER_THREAD))
    return edges


def _mark_late_launches(gpu_nodes: list[ChakraNode], late: dict[int, float]) -> None:
    """Late launches carry their recorded launch time (``LAUNCH_TIME_ATTR``);
    every other node is written as before."""
    for node in gpu_nodes if late else ():
        launch = late.get(node.id)
        if launch is not None:
            node.attrs.append((LAUNCH_TIME_ATTR, "int64_val", round(launch)))


def _dropped_ids(ops: Sequence[HostOp], kept: Sequence[HostOp]) -> frozenset[int]:
    """Ids of ``ops`` not in ``kept`` (a subset of them): the observer's
    containers, as ``link`` leaves them out; else found the long way (a set
    of every kept id costs tens of MB on a million-op trace)."""
    if len(ops) == len(kept):
        return frozenset()
    found = frozenset(map(_op_id, containers(ops)))
    if len(found) == len(ops) - len(kept):
        return found
    kept_ids = {op.id for op in kept}
    return frozenset(op.id for op in ops if op.id not in kept_ids)


# --------------------------------------------------------------------------
# CPU nodes
# --------------------------------------------------------------------------


# How far up an unlinked chain of callers to look for the nearest linked
# one (ops Kineto did not record sit between a linked caller and callee).
MAX_UNLINKED_CALLERS = 64


def _callee_time(ops: Sequence[HostOp], linked: LinkedTrace, ops_by_id: Mapping[int, HostOp],
                 ) -> Any:
    """host op id -> time spent in its linked callees on the same thread
    (the nearest linked ones, through callers Kineto did not record), for
    linked ops that have some. A node's exclusive duration subtracts it, so
    that the chain of exclusive durations adds up to the caller's span.
    A column by op id (``LinkedEvents.zeros``: 8 bytes a host op, where a
    dict was about 60 a caller)."""
    if not linked.cpu_event:
        return {}
    ts_of, dur_of, tid_of, lo, hi = linked.cpu_event.columns()
    child_time = linked.cpu_event.zeros()
    for op in ops:
        op_id = op.id
        ts = ts_of[op_id] if lo <= op_id < hi else NAN
        if ts != ts:  # NaN: not linked
            continue
        caller = op.parent
        caller_ts = ts_of[caller] if lo <= caller < hi else NAN
        hops = 0
        while caller_ts != caller_ts and caller in ops_by_id and hops < MAX_UNLINKED_CALLERS:
            caller = ops_by_id[caller].parent
            caller_ts = ts_of[caller] if lo <= caller < hi else NAN
            hops += 1
        if caller_ts == caller_ts and tid_of[caller] == tid_of[op_id]:
            dur = dur_of[op_id]
            if _nested(ts, dur, caller_ts, dur_of[caller]):
                child_time[caller] += dur
    return child_time


NESTING_SLACK_US = 1.0
"""A callee ends within its caller's span up to the traces' clock resolution
(1 us)."""


def _nested(ts: float, dur: float, caller_ts: float, caller_dur: float) -> bool:
    """Whether an event (start, duration) ran inside its caller's: the host ET files a gloo
    worker thread's collective under whatever op its record stack held (an
    earlier collective of the same worker, long over), and subtracting a
    callee that ran after its caller ended cuts the caller's own time (a
    330 ms all-reduce written as 2.5 ms)."""
    return (ts >= caller_ts - NESTING_SLACK_US
            and ts + dur <= caller_ts + caller_dur + NESTING_SLACK_US)


def _cpu_starts_by_kineto_tid(linked: LinkedTrace) -> dict[int, tuple[list[float], list[int]]]:
    """Kineto thread id -> its linked host ops' start times and ids, sorted."""
    per_tid: dict[int, list[tuple[float, int]]] = defaultdict(list)
    ts, _dur, tid, _lo, _hi = linked.cpu_event.columns()
    for host_id in linked.cpu_event:
        per_tid[tid[host_id]].append((ts[host_id], host_id))
    result = {}
    for tid, items in per_tid.items():
        items.sort()
        result[tid] = ([t for t, _ in items], [i for _, i in items])
    return result


def _io(io: IOValues) -> tuple[str, str, str]:
    """IOInfo strings straight from the trace's JSON text (no re-encoding)."""
    return io.values_json.decode(), io.shapes_json.decode(), io.types_json.decode()


def _cpu_node_type(op: HostOp, transfers: frozenset[int],
                   ) -> tuple[NodeType, CollectiveType | str | None]:
    """Node type of a host op, and its collective when it stands for one
    (a backend op that is its own transfer, see ``transfer_ops``)."""
    if op.name == PROCESS_GROUP_INIT:
        return NodeType.METADATA_NODE, None
    if op.id in transfers:
        ctype = coll.collective_from_name(op.name)
        if ctype is not None and ctype != "sendrecv":
            return coll.node_type_for(ctype), ctype
    return NodeType.COMP_NODE, None


def _dep_kind_names(kinds: EdgeKind | tuple[EdgeKind, ...]) -> list[str]:
    """The dependency-kinds attribute's value from _cpu_fields' hashable key."""
    if isinstance(kinds, tuple):
        return [EDGE_KIND_NAMES[kind] for kind in kinds]
    return [EDGE_KIND_NAMES[kinds]]


# The attributes of a CPU node after any collective ones, in encoded order:
# the one list both _cpu_node and the fast path (cpu_node_writer) follow.
# Their values come from _cpu_fields, in the same order.
CPU_ATTRS: tuple[AttrSpec, ...] = (
    AttrSpec("is_cpu_op", "bool_val"),
    AttrSpec("rf_id", "int64_val", repeats=False),
    AttrSpec("tid", "int64_val"),
    AttrSpec("op_schema", "string_val"),
    AttrSpec(INCLUSIVE_ATTR, "int64_val", repeats=False),
    AttrSpec(DEP_KINDS_ATTR, "string_list", plain=_dep_kind_names),
)


def _cpu_fields(op: HostOp, sources: CpuNodeSources, node_type: NodeType,
                is_cpu: bool, deps: Deps | None) -> tuple[Any, ...]:
    """Every field of a CPU node as a raw value, in NodeWriter's layout: the
    Node fields (``NODE_FIELDS``), then the values of ``CPU_ATTRS`` in table
    order. None leaves a field out. Both paths start here, so a field's
    value is defined once. ``deps``: the op's in ``sources.deps``."""
    return next(_cpu_rows((op,), (deps,), sources, node_type, is_cpu))


def _cpu_rows(ops: Iterable[HostOp], deps: Iterable[Deps | None], sources: CpuNodeSources,
              node_type: NodeType, is_cpu: bool) -> Iterator[tuple[Any, ...]]:
    """``_cpu_fields`` of each op with its deps, in one loop: the writer's
    fast path maps its encoder over these rows (a call per node less)."""
    events, callee_time, _deps, ops_by_id, dropped = sources
    if isinstance(ops_by_id, OpsById):
        op_table, op_lo, op_hi = ops_by_id.table, ops_by_id.lo, ops_by_id.hi
    else:  # a mapping of a caller's own (tests)
        op_table, op_lo, op_hi = _NoOps(ops_by_id), -(2**63), 2**63
    ts_of, dur_of, _tid, lo, hi = events.columns()
    callee_time_of = callee_time.__getitem__
    for op, op_deps in zip(ops, deps):
        op_id, parent = op.id, op.parent
        ts = ts_of[op_id] if lo <= op_id < hi else NAN
        if ts != ts:  # NaN: not linked
            start = duration = inclusive = None
        else:
            dur = dur_of[op_id]
            start, inclusive = round(ts), round(dur)
            exclusive = dur - callee_time_of(op_id)
            duration = round(exclusive if exclusive > 0.0 else 0.0)  # max(0.0, ...), inlined
        if not op_deps:
            kinds = None
        else:  # a hashable key: most nodes have one dependency
            kinds = (op_deps[0][1] if len(op_deps) == 1
                     else tuple([kind for _, kind in op_deps]))
        kept_parent = (op_table[parent] if op_lo <= parent < op_hi else None) is not None \
            and parent not in dropped
        yield (op_id, op.name, node_type, parent if kept_parent else None, op_deps, start,
               duration, op.inputs, op.outputs,
               is_cpu, op.rf_id, op.tid, op.op_schema or None, inclusive, kinds)


def cpu_node_writer() -> NodeWriter:
    """The fast path's encoder of CPU nodes given by ``_cpu_fields``."""
    return NodeWriter(CPU_ATTRS)


def _cpu_node(op: HostOp, sources: CpuNodeSources, comm: CommContext) -> ChakraNode:
    """The generic path: ``_cpu_fields`` as a ChakraNode, with the collective
    attributes first when the op stands for one."""
    node_type, ctype = _cpu_node_type(op, comm.transfers)
    fields = _cpu_fields(op, sources, node_type, ctype is None, sources.deps.get(op.id))
    node_id, name, _, ctrl_dep, data_deps, start, duration, inputs, outputs = (
        fields[:len(NODE_FIELDS)])
    attrs = _comm_attrs(ctype, None, op, comm) if ctype is not None else []
    channel = comm.channels.get(op.id)
    if channel is not None:
        # A transfer runs on the backend's worker thread, which Kineto
        # records but the ET does not (it files the op under its caller's
        # thread); transfers on different workers overlap.
        attrs.append((COMM_CHANNEL, "int64_val", channel))
    attrs += [(name, member, value if plain is None else plain(value))
              for (name, member, _, plain), value in zip(CPU_ATTRS, fields[len(NODE_FIELDS):])
              if value is not None]
    return ChakraNode(
        id=node_id, name=name, type=node_type, start_time_micros=start or 0,
        duration_micros=duration or 0, ctrl_deps=[] if ctrl_dep is None else [ctrl_dep],
        data_deps=[src for src, _ in data_deps] if data_deps else [],
        inputs=_io(inputs), outputs=_io(outputs), attrs=attrs)


# --------------------------------------------------------------------------
# GPU nodes
# --------------------------------------------------------------------------


def _gpu_nodes(gpu_ops: Sequence[LaunchedGpuOp], first_id: int, comm: CommContext,
               ) -> tuple[list[ChakraNode], list[GpuSpan]]:
    ops_by_id = comm.ops_by_id
    nodes: list[ChakraNode] = []
    spans: list[GpuSpan] = []
    for offset, g in enumerate(gpu_ops):
        act = g.activity
        node_id = first_id + offset
        launcher = ops_by_id.get(g.host_op_id) if g.host_op_id >= 0 else None
        attrs: list[Attr] = [
            ("is_cpu_op", "bool_val", False),
            ("device", "int64_val", act.device),
            ("stream", "int64_val", act.stream),
            ("correlation", "int64_val", act.correlation),
            ("category", "string_val", act.cat),
        ]
        node_type = NodeType.COMP_NODE
        ctype = _gpu_collective(act.name, act.collective, launcher, ops_by_id)
        if ctype is not None:
            node_type = coll.node_type_for(ctype)
            attrs += _comm_attrs(ctype, act.collective, launcher, comm)
        if act.bytes:
            attrs.append(("bytes", "int64_val", act.bytes))
        nodes.append(ChakraNode(id=node_id, name=act.name, type=node_type,
                                start_time_micros=round(act.ts), duration_micros=round(act.dur),
                                ctrl_deps=[g.host_op_id] if launcher is not None else [],
                                attrs=attrs))
        launch_ts = g.launch.ts if g.launch is not None else act.ts
        spans.append(GpuSpan(id=node_id, device=act.device, stream=act.stream,
                             launch_ts=launch_ts,
                             launcher=g.host_op_id if launcher is not None else -1))
    return nodes, spans


def _comm_op(op: HostOp | None, ops_by_id: Mapping[int, HostOp]) -> tuple[HostOp | None, HostOp | None]:
    """(the ``nccl:*`` op, its ``record_param_comms`` parent) around a launch."""
    if op is None:
        return None, None
    if op.name == RECORD_PARAM_COMMS:
        return None, op
    parent = ops_by_id.get(op.parent)
    if parent is not None and parent.name == RECORD_PARAM_COMMS:
        return op, parent
    return op, None


def _record_param_comms_name(op: HostOp | None) -> str:
    """The collective name record_param_comms carries: the ``collective_name``
    attr (schema >= 1.1.0) or, in older traces, its first String input."""
    if op is None:
        return ""
    name = op.attrs.get("collective_name")
    if name:
        return str(name)
    for value, vtype in zip(op.inputs.values, op.inputs.types):
        if vtype == "String" and isinstance(value, str):
            return value
    return ""


def _gpu_collective(kernel: str, info: CollectiveInfo | None, launcher: HostOp | None,
                    ops_by_id: Mapping[int, HostOp]) -> CollectiveType | str | None:
    """Kineto collective metadata first, then the launching op, then the
    kernel name; NCCL's SendRecv kernel serves all-to-all and p2p alike."""
    if not is_device_transfer(kernel, info):
        return None
    if info is not None and info.name:
        ctype = coll.collective_from_name(info.name)
        if ctype is not None and ctype != "sendrecv":
            return ctype
    nccl_op, rpc = _comm_op(launcher, ops_by_id)
    for name in (nccl_op.name if nccl_op else "", _record_param_comms_name(rpc)):
        ctype = coll.collective_from_name(name)
        if ctype is not None and ctype != "sendrecv":
            return ctype
    ctype = coll.collective_from_kernel(kernel)
    if ctype == "sendrecv":
        return coll.SEND  # a bare SendRecv kernel with no context: point-to-point
    return ctype


def _flagged(attrs: Sequence[Attr]) -> bool:
    return any(a[0] == COMM_SIZE_UNKNOWN_ATTR and a[2] is True for a in attrs)


def _comm_attrs(ctype: CollectiveType | str, info: CollectiveInfo | None, launcher: HostOp | None,
                comm: CommContext) -> list[Attr]:
    nccl_op, rpc = _comm_op(launcher, comm.ops_by_id)
    size = coll.comm_size_from_info(ctype, info) if info is not None else 0
    for op in (rpc, nccl_op):
        if not size and op is not None:
            size = coll.comm_size_from_host_op(ctype, op, comm.group_size)
    attrs: list[Attr] = []
    if isinstance(ctype, CollectiveType):
        attrs.append(("comm_type", "int64_val", int(ctype)))
    attrs.append(("comm_size", "int64_val", size))
    if not size and ctype != CollectiveType.BARRIER:  # not 0 bytes: not known (conventions)
        attrs.append((COMM_SIZE_UNKNOWN_ATTR, "bool_val", True))
    pg_name = (info.pg_name if info is not None else "") or str(
        (rpc.attrs.get("pg_name") if rpc is not None else "") or "") or \
        _functional_pg(launcher, comm) or comm.default_pg
    if pg_name:
        attrs.append(("pg_name", "string_val", pg_name))
    if info is not None:
        if info.seq >= 0:
            attrs.append(("comm_seq", "int64_val", info.seq))
        if ctype == coll.SEND and info.dst_rank >= 0:
            attrs.append(("comm_dst", "int32_val", info.dst_rank))
        if ctype == coll.RECV and info.src_rank >= 0:
            attrs.append(("comm_src", "int32_val", info.src_rank))
    elif rpc is not None:
        seq = _legacy_seq(rpc)
        if seq is not None:
            attrs.append(("comm_seq", "int64_val", seq))
    if info is None and ctype in (coll.SEND, coll.RECV) and launcher is not None:
        peer = coll.p2p_peer(comm.ops_by_id.get(launcher.parent))
        if peer >= 0:
            attrs.append(("comm_dst" if ctype == coll.SEND else "comm_src", "int32_val", peer))
    return attrs


def _legacy_seq(rpc: HostOp) -> int | None:
    """Schema 1.0.x record_param_comms inputs: [tensor, seq, pg, rank, name, ...]."""
    values, types = rpc.inputs.values, rpc.inputs.types
    if len(values) > 4 and len(types) > 1 and types[1] == "Int" and isinstance(values[1], int):
        return values[1]
    return None


# --------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------


def _metadata(linked: LinkedTrace, rank: int | None) -> GlobalMetadata:
    host = linked.host
    kineto = linked.kineto
    if rank is None and kineto is not None and kineto.rank >= 0:
        rank = kineto.rank
    attrs: list[Attr] = [
        ("generator", "string_val", "pt2chakra"),
        ("host_trace_schema", "string_val", host.schema),
        ("pid", "int64_val", host.pid),
        ("link_method", "string_val", linked.method),
        ("edge_kinds", "string_list", [EDGE_KIND_NAMES[k] for k in EdgeKind]),
    ]
    if rank is not None:
        attrs.append(("rank", "int64_val", rank))
    if kineto is not None and kineto.world_size:
        attrs.append(("world_size", "int64_val", kineto.world_size))
    if host.process_groups:
        import orjson  # here: only a distributed trace has process groups to write

        attrs.append(("process_groups", "string_val",
                      orjson.dumps([msgspec.to_builtins(pg) for pg in host.process_groups]).decode()))
    if linked.kineto is not None:
        attrs.append(("step_start_micros", "int64_val", round(linked.step_start)))
        attrs.append(("step_end_micros", "int64_val", round(linked.step_end)))
        if linked.step_definition != STEP_SPAN:  # absent means span (older files too)
            attrs.append((STEP_DEFINITION_ATTR, "string_val", linked.step_definition))
    return GlobalMetadata(version=CHAKRA_VERSION, attrs=attrs)

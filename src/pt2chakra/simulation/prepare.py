"""Simulator input: Chakra graphs of one or more ranks as flat arrays.

Turns decoded nodes into what the replay loop needs (lanes, categories,
durations, CPU-gap delays, children lists, collective keys, sync gates), and
infers the cross-stream waits that old traces do not record. The model is
described in event_loop.py (the loop) and docs/SIMULATE.md.
"""

from __future__ import annotations

import bisect
import logging
import math
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, compress, islice, repeat
from operator import and_, attrgetter, eq, itemgetter, le, or_, sub
from typing import Any, NamedTuple, TypeVar

from pt2chakra.chakra.compiled import fast_path
from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES as EDGE_KIND_NAMES_BY_KIND
from pt2chakra.chakra.dep_kinds import UNRECORDED_KIND, EdgeKind, dep_kinds_of
from pt2chakra.chakra.lean_read import LeanNodes
from pt2chakra.chakra.process_groups import read_process_groups
from pt2chakra.chakra.ranks import ranks_in_memory
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    COMM_SIZE_UNKNOWN_ATTR,
    CPU_GAP_CATEGORY,
    CPU_LANE,
    INCLUSIVE_ATTR,
    LAUNCH_TIME_ATTR,
    STEP_DEFINITION_ATTR,
    ScaledWorld,
    StepWindow,
    is_finite_number,
    is_gpu,
    is_int,
    is_period_step,
    lane_of,
    scaled_world,
    step_window_from,
    thread_holds,
)
from pt2chakra.rules.rendezvous import (
    CommOp,
    RankComms,
    RendezvousKey,
    comm_op,
    comm_order,
    describe_deadlock,
    find_deadlock,
    rendezvous_keys,
)
from pt2chakra.simulation.op_scale import CoveredTime
from pt2chakra.simulation.waits import (
    INFER_MIN_US,
    CollectiveEnds,
    TimedHostOp,
    host_comm_waits,
)

log = logging.getLogger("pt2chakra.simulation")

_T = TypeVar("_T")

COMM_TYPES = COMM_NODE_TYPES

# Node categories (critical path "by node type").
CPU_OP, GPU_COMPUTE, GPU_MEMCPY, COMM, GPU_CPU_GAP = 0, 1, 2, 3, 4
# GPU_CPU_GAP: a GPU-side stand-in for dropped CPU time (``cpu_gap`` nodes of
# the ASTRA-sim profile): CPU time, so --cpu-scale scales it, not --compute-scale.
CATEGORY_NAMES = ("cpu_op", "gpu_compute", "gpu_memcpy", "communication", "cpu_gap")
# Extra critical-path categories for time that no node's duration holds.
WAIT = "wait"  # waiting for a peer rank, or a sync's post-return lag

# Edge kinds, as the converter names them, plus the simulator's own reasons.
EDGE_KIND_NAMES = (*(EDGE_KIND_NAMES_BY_KIND[kind] for kind in EdgeKind),
                   "lane_order", "rank_start", UNRECORDED_KIND)
_KIND_CODE = {name: i for i, name in enumerate(EDGE_KIND_NAMES)}
K_GPU_SYNC = _KIND_CODE["gpu_sync"]
K_LAUNCH = _KIND_CODE["launch"]
K_STREAM_ORDER = _KIND_CODE["stream_order"]
K_STREAM_WAIT = _KIND_CODE["stream_wait"]
K_THREAD_ORDER = _KIND_CODE["thread_order"]
K_LANE = _KIND_CODE["lane_order"]
K_START = _KIND_CODE["rank_start"]
K_DATA = _KIND_CODE[UNRECORDED_KIND]  # a data_dep without a recorded kind (other tools' .et)

# Inferring cross-stream waits: an op that started this much later than
# anything recorded explains (``INFER_MIN_US``, shared with the wake-up rule
# of ``waits.py``), and at most this long after another stream's op ended,
# waited for that op.
INFER_TOL_US = 10.0
# A collective kernel waits for the work its caller had queued on its other
# streams (ProcessGroupNCCL records an event on the current stream and makes
# the communication stream wait on it): traces without the event's arguments
# (or without runtime sync events at all) show only that the kernel started
# late. It starts this long after the last such op ends at most: 14 us
# measured on an A100, 125 us on a V100 where a GEMM queued after the event
# still held the SMs (HTA trace_diff control / test).
COMM_EVENT_TOL_US = 200.0
# A kernel that fills the GPU holds back a ready kernel of another stream
# until its last blocks retire: the held kernel starts before it ends, by at
# most this share of its duration (69 us before the end of a 6.5 ms
# embedding backward, 5 us of a 0.7 ms elementwise kernel: HTA trace_diff).
HELD_TAIL_FRACTION = 0.02


# Attributes by name, and each node's dependencies as (index, kind code).
Attrs = dict[str, Any]
# (A tuple per node, the shared empty one where there is none: a million
# small lists would cost an allocation each; the few edges added later
# replace a node's tuple.)
Parents = list[tuple[tuple[int, int], ...]]

# How far back on a thread to look for the op that held a GPU sync.
SYNC_LOOKBACK = 64

# --------------------------------------------------------------------------
# Preparation: graph -> flat arrays
# --------------------------------------------------------------------------


# Node fields read by C-level maps (a million nodes: no Python call per node).
_node_type, _node_id = attrgetter("type"), attrgetter("id")
_node_start, _node_duration = attrgetter("start_time_micros"), attrgetter("duration_micros")
_node_attrs, _node_deps = attrgetter("attrs"), attrgetter("data_deps")
_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)
_is_str = str.__instancecheck__  # isinstance(x, str), callable by map() without a lambda

# Attributes the simulator reads, and the values it can use. Other tools'
# .et files may carry them with another member type (``comm_seq`` as a
# string, ``tid`` as a list, ...): such an attribute counts as absent.
_ATTR_OK: dict[str, Callable[[Any], bool]] = {
    "data_dep_kinds": lambda v: isinstance(v, (list, tuple)) and all(map(_is_str, v)),
    "comm_seq": is_int, "comm_size": is_int, "comm_type": is_int,
    "tid": is_int, "stream": is_int, "device": is_int, "rank": is_int, "comm_channel": is_int,
    "is_cpu_op": lambda v: isinstance(v, (bool, int)),
    "category": lambda v: isinstance(v, str),
    "pg_name": lambda v: isinstance(v, (str, int)) and not isinstance(v, bool),
    INCLUSIVE_ATTR: is_finite_number,
    "step_start_micros": is_finite_number, "step_end_micros": is_finite_number,
    STEP_DEFINITION_ATTR: lambda v: isinstance(v, str),
    COMM_SIZE_UNKNOWN_ATTR: lambda v: isinstance(v, bool),
    LAUNCH_TIME_ATTR: is_finite_number,
}



# Every node attribute the simulator reads (the lean reader decodes only these);
# the size-unknown marker for the set check (rules.checks.check_before_replay).
SIM_ATTRS = frozenset(_ATTR_OK) | {"comm_src", "comm_dst", COMM_SIZE_UNKNOWN_ATTR}


def _checked(attrs: Sequence[Attr], bad: set[str] | None) -> Attrs:
    out = {}
    for a in attrs:
        name, value = a[0], a[2]
        ok = _ATTR_OK.get(name)
        if ok is not None and not ok(value):
            if bad is not None:
                bad.add(name)
            continue
        out[name] = value
    return out


def _attrs(node: ChakraNode, bad: set[str] | None = None) -> Attrs:
    """Node attributes by name; those of an unusable type are left out (and
    their names added to ``bad``)."""
    return _checked(node.attrs, bad)


def metadata_attrs(md: GlobalMetadata, bad: set[str] | None = None) -> Attrs:
    return _checked(md.attrs, bad)


class PreparedGraph:
    """All ranks' nodes as flat arrays indexed by a global node index: the
    documented seam between preparing (``prepare_graphs``, once per trace set
    and comm-stream setting) and replaying (``event_loop.run_replay``, once per
    what-if). Columns are plain lists and arrays, not nodes, because the
    replay reads them a million times; a node's rank, lane, recorded start
    and duration, CPU delay, children (``child_start``/``child``) and wait
    count (``nwait``) are all found at its index."""

    def __init__(self) -> None:
        self.nodes: list[ChakraNode] = []
        self.ids: list[int] = []  # columns of the nodes' fields that the loops read
        self.start: list[int] = []
        self.rank: list[int] = []
        self.lane: list[int] = []
        self.lane_names: list[tuple[int, str, str]] = []
        self.lane_index: dict[tuple[Any, ...], int] = {}
        self.order: list[int] = []  # recorded start order within the rank
        self.dur: list[float] = []
        self.incl: list[float] = []  # recorded inclusive time (CPU ops: callees included)
        self.cat: list[int] = []
        self.delay: list[float] = []
        # Children of node i: child[child_start[i]:child_start[i + 1]], with the
        # kinds of the edges in child_kind; flat arrays, not a list per node.
        self.child_start = array("q")
        self.child = array("q")
        self.child_kind = array("b")
        self.nwait: list[int] = []
        self.comm_key: dict[int, RendezvousKey] = {}
        self.comm_bytes: dict[int, int] = {}
        self.comm_type: dict[int, int] = {}
        self.size_unknown: set[int] = set()  # comm nodes flagged comm_size_unknown
        # Sync ops: index -> (own CPU work, post-return time, pre-issue time)
        self.sync: dict[int, tuple[float, float, float]] = {}
        self.sync_producers: dict[int, list[int]] = {}  # producer -> sync ops it gates
        self.sync_gates: dict[int, int] = {}  # sync op -> number of producers
        self.issue_children: dict[int, list[int]] = {}  # sync op -> GPU ops released at issue
        self.step_start: list[float] = []
        self.step_end: list[float] = []
        # per rank: the step is a period (conversion/step.py), so the replay's
        # CPU side reaching the next step is its prediction, not the last GPU end
        self.step_period: list[bool] = []
        self.sources: list[str] = []
        self.rank_label: list[int] = []  # each rank's number (chakra.ranks)
        # per rank: the world a scaled-out file stands for (None: as recorded)
        self.scaled: list[ScaledWorld | None] = []
        # per rank: its process groups' sizes by name and the world size, as
        # recorded (0: unknown): what times a collective with no peer given (lone.py)
        self.pg_sizes: list[dict[str, int]] = []
        self.world: list[int] = []
        self.inferred_edges = 0  # cross-stream waits inferred from timing
        # late launches (``LAUNCH_TIME_ATTR``): GPU node -> (its launcher's
        # lane, recorded launch time, the op that thread ran last before it);
        # its delay is that thread's CPU time from that op's end
        self.late_launch: dict[int, tuple[int, float, int]] = {}
        self.lane_tail: dict[int, float] = {}  # CPU lane: recorded time after its last slice
        self.lane_tail_end: dict[int, float] = {}  # CPU lane: when that tail ends (recorded)
        # --cpu-scale-ops: per pattern, the time the matching ops cover (op_scale.py)
        self.covered: dict[str, CoveredTime] = {}
        # --without-profiler: per CPU thread, its ops in start order (profiler_overhead.py)
        self.overhead_lanes: list[list[int]] | None = None
        self.rank_nodes: list[range] = []
        self.rank_timed: list[bool] = []  # per rank: some node has a start time
        self.rank_comms: list[RankComms] = []  # per rank with communication: its keys and order

    def lane_id(self, key: tuple[Any, ...], rank: int, kind: str, label: str) -> int:
        idx = self.lane_index.get(key)
        if idx is None:
            idx = len(self.lane_names)
            self.lane_index[key] = idx
            self.lane_names.append((rank, kind, label))
        return idx


def prepare_graphs(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                   sources: Sequence[str], comm_streams: int, infer_waits: bool = True,
                   refuse_deadlock: bool = True, *, ranks: Sequence[int] | None = None,
                   ) -> PreparedGraph:
    """Every rank's nodes as the flat arrays the replay runs on (see
    ``PreparedGraph``), checked for collectives that can never meet.
    ``ranks``: each graph's rank (its label; the graphs' positions index
    everything else), by ``ranks.rank_of`` or position when not given."""
    if ranks is None:
        ranks = ranks_in_memory([(src, md) for src, (md, _nodes) in zip(sources, graphs)])
    p = PreparedGraph()
    for rank, (md, nodes) in enumerate(graphs):
        bad: set[str] = set()
        p.sources.append(sources[rank])
        p.rank_label.append(ranks[rank])
        _prepare_rank(p, rank, md, nodes, comm_streams, infer_waits, bad)
        if bad:
            log.warning("%s: ignored attribute%s of an unexpected type (treated as absent): %s",
                        sources[rank], "s" if len(bad) > 1 else "", ", ".join(sorted(bad)))
    p.child_start.append(len(p.child))  # the end of the last node's children
    if len(graphs) > 1:
        steps = find_deadlock(p.rank_comms)
        if steps and refuse_deadlock:  # the replay would end with nodes that never ran
            raise InputError(steps[0].source, describe_deadlock(steps))
        if steps:
            log.warning("%s: %s (--force: replayed anyway)", steps[0].source,
                        describe_deadlock(steps))
    return p


def _comm_keys(p: PreparedGraph, rank: int, base: int, by_start: list[int], attrs_of: list[Attrs],
               parents: Parents) -> list[int]:
    """Key each communication node by the shared matching rule
    (``rendezvous_keys``) and note the rank's order between them for the
    deadlock check; returns the communication nodes in recorded order."""
    ops: list[CommOp] = []
    comm_by_order: list[int] = []
    for i in by_start:
        if p.cat[i] != COMM:
            continue
        a = attrs_of[i - base]
        ops.append(comm_op(p.nodes[i], a))
        p.comm_bytes[i] = int(a.get("comm_size", 0) or 0)
        if a.get(COMM_SIZE_UNKNOWN_ATTR) is True:
            p.size_unknown.add(i)
        p.comm_type[i] = int(a.get("comm_type", -1)) if "comm_type" in a else -1
        comm_by_order.append(i)
    if not ops:
        return comm_by_order
    keys = rendezvous_keys(ops, p.rank_label[rank])
    for i in comm_by_order:
        p.comm_key[i] = keys[p.nodes[i].id]
    end = base + len(parents)
    ids = [p.nodes[i].id for i in range(base, end)]
    deps = {p.nodes[base + k].id: [(p.nodes[src].id, kind) for src, kind in plist]
            for k, plist in enumerate(parents) if plist}
    p.rank_comms.append(RankComms(p.rank_label[rank], p.sources[rank], keys,
                                  comm_order(ids, deps, ops)))
    return comm_by_order


def _prepare_rank(p: PreparedGraph, rank: int, md: GlobalMetadata, nodes: Sequence[ChakraNode],
                  comm_streams: int, infer_waits: bool = True,
                  bad: set[str] | None = None) -> None:
    """Append one rank to ``p``: its nodes, their order, dependencies,
    replayed CPU durations and delays, sync ops and children lists."""
    base = len(p.nodes)
    mda = metadata_attrs(md, bad)
    timed_rank = _note_timed(p, nodes)
    index, attrs_of, incl, sets = _add_nodes(p, rank, nodes, bad)
    end = len(p.nodes)
    p.rank_nodes.append(range(base, end))
    t0 = _add_step(p, rank, mda, incl)
    p.pg_sizes.append({g.name: g.size or len(g.ranks)
                       for g in read_process_groups(md, p.sources[rank])})
    by_start = _recorded_order(p, base, end)
    parents, gpu_syncs = _parents(nodes, base, index, sets)
    del index  # the largest map of all, not needed past this point
    comm_by_order = _comm_keys(p, rank, base, by_start, attrs_of, parents)
    # Device ops without a recorded dependency, before respreading adds stream order.
    orphans = [] if _only_cpu_ops(p, base, end) else \
        [i for i in range(base, end) if p.cat[i] != CPU_OP and not parents[i - base]]
    if comm_streams > 0 and comm_by_order:
        _respread_comm(p, rank, comm_by_order, parents, base, attrs_of, comm_streams)
    cpu_lane_ops = _cpu_threads(p, base, end, timed_rank)
    _cpu_slices(p, base, cpu_lane_ops, incl)
    _late_launches(p, base, sets, parents, cpu_lane_ops)
    host_waits: list[tuple[int, int]] = []
    if infer_waits and timed_rank:
        p.inferred_edges += _infer_stream_waits(p, base, end, parents)
        host_waits = _infer_host_comm_waits(p, base, end, parents, cpu_lane_ops)
        p.inferred_edges += len(host_waits)
    _pin_orphans(p, base, orphans, parents, t0)
    _cpu_delays(p, base, cpu_lane_ops, parents, incl, t0)
    for x, src in host_waits:  # the gap before X was the wait: only the rest stays
        end_src = p.nodes[src].start_time_micros + p.nodes[src].duration_micros
        p.delay[x] = min(p.delay[x], max(0.0, p.nodes[x].start_time_micros - end_src))
    if timed_rank:
        _worker_pickups(p, base, end, parents)
    if gpu_syncs:  # else no node has a gpu_sync edge, and none is added before
        _sync_ops(p, base, parents, cpu_lane_ops)
    _link_children(p, base, parents)


def _only_cpu_ops(p: PreparedGraph, base: int, end: int) -> bool:
    """The rank has no device op (a C-level count: the per-node scans for
    device ops can be skipped)."""
    return p.cat[base:end].count(CPU_OP) == end - base


def _note_timed(p: PreparedGraph, nodes: Sequence[ChakraNode]) -> bool:
    """A rank without any start time (other tools' graphs, ``microbench``) is
    untimed: nodes keep their whole duration, in dependency order, with no
    replayed gaps and no measured step."""
    timed_rank = any(map(_node_start, nodes))
    p.rank_timed.append(timed_rank)
    return timed_rank


def _add_nodes(p: PreparedGraph, rank: int, nodes: Sequence[ChakraNode], bad: set[str] | None,
               ) -> tuple[dict[int, int], list[Attrs], list[float], _AttrSets]:
    """Append the rank's nodes to the flat arrays, each in its category and on
    its lane; returns what later steps read (id -> index, attributes,
    inclusive times, attribute sets)."""
    base = len(p.nodes)
    count = len(nodes)
    dur = list(map(float, map(_node_duration, nodes)))
    if isinstance(nodes, LeanNodes) and nodes.apart_name == INCLUSIVE_ATTR:
        attrs_of, incl, sets = _apart_attrs(nodes, dur, bad)
    else:
        attrs_of, incl, sets = _shared_attrs(nodes, dur, bad)
    p.incl.extend(incl)
    ids = list(map(_node_id, nodes))
    index = dict(zip(ids, range(base, base + count)))  # a repeated id: its last node
    p.nodes.extend(nodes)
    p.ids.extend(ids)
    p.start.extend(map(_node_start, nodes))
    p.rank.extend([rank] * count)
    p.dur.extend(dur)
    p.delay.extend([0.0] * count)
    p.nwait.extend([0] * count)
    p.order.extend([0] * count)
    # Category and lane per distinct (type, attribute dict), worked out in the
    # order nodes first show them (lanes are numbered in that order), then
    # handed to every node by lazy C-level maps (a million nodes).
    types = list(map(_node_type, nodes))
    category: dict[tuple[int, int], int] = {}  # (type, attribute set) -> category
    lanes: dict[tuple[int, int], int] = {}  # (type, attribute set) -> lane
    for where in dict.fromkeys(zip(types, sets.of_node)):
        node_type, a = where[0], sets.checked[where[1]]
        lane = lane_of(node_type, a)
        category[where] = _category(node_type, a)
        lanes[where] = p.lane_id((rank, *lane.key), rank,
                                 "cpu" if lane.kind == CPU_LANE else "gpu", lane.label)
    p.cat.extend(map(category.__getitem__, zip(types, sets.of_node)))
    p.lane.extend(map(lanes.__getitem__, zip(types, sets.of_node)))
    return index, attrs_of, incl, sets


class _AttrSets(NamedTuple):
    """The distinct attribute sets of a rank: each node's set, numbered in
    the order sets first show (small ints, shared: no object per node), and
    each set's checked attributes."""

    of_node: list[int]
    checked: list[Attrs]


def _numbered(keys: Iterable[int], checked: dict[int, Attrs]) -> _AttrSets:
    """``_AttrSets`` from each node's key (the id of a shared object, all
    alive here) and the checked attributes of each key, in first-shown order."""
    number = {key: n for n, key in enumerate(checked)}
    return _AttrSets(list(map(number.__getitem__, keys)), list(checked.values()))


def _shared_attrs(nodes: Sequence[ChakraNode], dur: list[float], bad: set[str] | None,
                  ) -> tuple[list[Attrs], list[float], _AttrSets]:
    """Each node's checked attributes and inclusive time. Nodes from the lean
    reader share their attribute objects: one checked dict per distinct set
    (all alive here, so ids are stable). ``inclusive_duration_micros``
    differs on almost every node, so it is kept out of the set and read into
    ``incl`` instead."""
    checked: dict[tuple[int, ...], Attrs] = {}
    attrs_of = []
    incl = dur[:]
    for k, n in enumerate(nodes):
        at = n.attrs
        key = tuple([id(x) if x[0] != INCLUSIVE_ATTR else 0 for x in at])
        a = checked.get(key)
        if a is None:
            a = checked[key] = _attrs(n, bad)
            a.pop(INCLUSIVE_ATTR, None)
        attrs_of.append(a)
        if 0 in key:
            _own_inclusive(at, incl, k, bad)
    return attrs_of, incl, _numbered(map(id, attrs_of), {id(a): a for a in checked.values()})


def _apart_attrs(nodes: LeanNodes, dur: list[float], bad: set[str] | None,
                 ) -> tuple[list[Attrs], list[float], _AttrSets]:
    """``_shared_attrs`` for nodes read with the inclusive time held apart
    (``read_et_apart``): equal attribute sets are one list, and the few
    nodes whose list still holds the inclusive time (a value of another
    type, a batch read the exact way) read it as ``_shared_attrs`` does."""
    incl = [v if v == v else d for v, d in zip(nodes.apart, dur)]  # NaN: absent
    # One checked dict per distinct list (in node order, so that ``bad`` and
    # any warning come out as a per-node pass gives them), handed out by
    # C-level maps; only nodes whose list still holds the inclusive time are
    # visited. Lazy maps: no million-entry temporaries.
    lists = list(map(_node_attrs, nodes))
    checked: dict[int, Attrs] = {}  # id(attr list) -> its checked attributes
    holding: dict[int, bool] = {}  # id(attr list) -> it holds INCLUSIVE_ATTR
    for key, at in dict(zip(map(id, lists), lists)).items():  # distinct, in node order
        a = checked[key] = _checked(at, bad)
        a.pop(INCLUSIVE_ATTR, None)
        holding[key] = any(x[0] == INCLUSIVE_ATTR for x in at)
    sets = _numbered(map(id, lists), checked)
    attrs_of = list(map(sets.checked.__getitem__, sets.of_node))
    if any(holding.values()):
        for k in compress(range(len(lists)), map(holding.__getitem__, map(id, lists))):
            _own_inclusive(lists[k], incl, k, bad)
    return attrs_of, incl, sets


def _own_inclusive(attrs: Sequence[Attr], incl: list[float], k: int, bad: set[str] | None,
                   ) -> None:
    """Set ``incl[k]`` from the node's ``inclusive_duration_micros`` (the last
    one, as in ``_checked``); one of an unusable type counts as absent."""
    for a in attrs:
        if a[0] == INCLUSIVE_ATTR:
            value = a[2]
            if _ATTR_OK[INCLUSIVE_ATTR](value):
                incl[k] = float(value)
            elif bad is not None:
                bad.add(INCLUSIVE_ATTR)


def _category(node_type: int, a: Attrs) -> int:
    """The node's category, which decides the knob that scales it and its
    share of the critical path. ``is_cpu_op`` absent means a device op
    (``../shared/FORMATS.md``), stream or not."""
    is_cpu = not is_gpu(a)
    if node_type in COMM_TYPES and not is_cpu:
        return COMM
    if is_cpu:
        return CPU_OP
    if str(a.get("category", "")).startswith(("gpu_memcpy", "gpu_memset")):
        return GPU_MEMCPY
    if a.get("category") == CPU_GAP_CATEGORY:
        return GPU_CPU_GAP
    return GPU_COMPUTE


def _add_step(p: PreparedGraph, rank: int, mda: Attrs, incl: list[float]) -> float:
    """Record the measured step (what the prediction is compared with);
    returns the step start, the origin of replayed delays.
    Runs right after ``_add_nodes``, while ``p.dur`` holds the recorded durations."""
    nodes = p.rank_nodes[rank]
    window = step_window_from(mda, p.start[nodes.start:nodes.stop], p.dur[nodes.start:nodes.stop],
                              incl) or StepWindow(0.0, 0.0)
    p.step_start.append(window.start)
    p.scaled.append(scaled_world(mda))
    world = mda.get("world_size")
    p.world.append(world if is_int(world) and world > 0 else 0)
    p.step_end.append(window.end)
    p.step_period.append(is_period_step(mda))
    return window.start


def _recorded_order(p: PreparedGraph, base: int, end: int) -> list[int]:
    """Set the order in which ready nodes of one lane run: CPU lanes in ET id
    order (ids are handed out at op start, and untimed ops have none), GPU
    lanes in recorded start order. Returns the rank's nodes by recorded start
    where it has device ops; a rank of CPU ops only has no use for it (its
    callers look for communication nodes there) and skips the sort."""
    ids, cat, order = p.ids, p.cat, p.order
    if _only_cpu_ops(p, base, end):  # ids throughout
        order[base:end] = ids[base:end]
        return []
    # (start, id, index): ties keep node order, as a stable sort by (start, id) does
    by_start = list(map(_third, sorted(zip(p.start[base:end], ids[base:end], range(base, end)))))
    for pos, i in enumerate(by_start):
        order[i] = ids[i] if cat[i] == CPU_OP else pos
    return by_start


def _parents(nodes: Sequence[ChakraNode], base: int, index: dict[int, int],
             sets: _AttrSets) -> tuple[Parents, bool]:
    """Each node's dependencies (``data_deps``) with their recorded kinds, as
    global indices; unknown ids and self-edges are dropped (they could never be met).
    Kind codes are worked out once per attribute set and dep count (most
    nodes have one dependency: looked up by the set alone; the compiled
    path takes those nodes where built). Also says whether any dependency
    is recorded as a ``gpu_sync``."""
    lone: list[int | None] = [None] * len(sets.checked)  # set -> code of a lone dependency
    codes_of: dict[tuple[int, int], list[int]] = {}  # (attribute set, deps) -> kind codes
    get = index.get

    def lone_code(key: int) -> int:
        code = lone[key] = _kind_codes(sets.checked[key], 1)[0]
        return code

    def many(i: int, deps: list[int], key: int) -> tuple[tuple[int, int], ...]:
        codes = codes_of.get((key, len(deps)))
        if codes is None:
            codes = codes_of[key, len(deps)] = _kind_codes(sets.checked[key], len(deps))
        mine = []
        for d, code in zip(deps, codes):
            src = get(d)
            if src is not None and src != i:
                mine.append((src, code))
        return tuple(mine)

    fast = fast_path()
    if fast is not None:
        parents: Parents = fast.parents_of(list(map(_node_deps, nodes)), sets.of_node, index,
                                           lone, base, lone_code, many)
    else:
        parents = []
        append = parents.append
        for i, deps, key in zip(range(base, base + len(nodes)), map(_node_deps, nodes),
                                sets.of_node):
            if len(deps) == 1:
                code = lone[key]
                if code is None:
                    code = lone_code(key)
                src = get(deps[0])
                append(((src, code),) if src is not None and src != i else ())
            else:
                append(many(i, deps, key))
    return parents, K_GPU_SYNC in lone or \
        any(K_GPU_SYNC in codes for codes in codes_of.values())


def _kind_codes(attrs: Attrs, count: int) -> list[int]:
    """The kind codes of a node's ``count`` dependencies (by its attributes)."""
    return [_KIND_CODE.get(name, K_DATA) for name in dep_kinds_of([0] * count, attrs)]


def _cpu_threads(p: PreparedGraph, base: int, end: int, timed_rank: bool) -> dict[int, list[int]]:
    """The timed CPU ops of each thread (lane) in ET id order, since ids are
    handed out at op start; untimed ranks replay no thread timing."""
    cpu_lane_ops: dict[int, list[int]] = defaultdict(list)
    if not timed_rank:
        return cpu_lane_ops
    ids, cat, start, nodes, lane = p.ids, p.cat, p.start, p.nodes, p.lane
    if not non_decreasing(ids[base:end]):
        for _id, i in sorted([(ids[i], i) for i in range(base, end) if cat[i] == CPU_OP]):
            if start[i] or nodes[i].duration_micros:
                cpu_lane_ops[lane[i]].append(i)
        return cpu_lane_ops
    # Ids ascend in node order (converters hand them out so): node order is
    # id order, and C-level passes pick the ops (a million nodes), none where
    # every node is a timed CPU op.
    picked: Iterator[Any] | None = None  # per node: a timed CPU op
    if not all(start[base:end]):
        picked = map(or_, map(bool, start[base:end]),
                     map(bool, map(_node_duration, nodes[base:end])))
    if not _only_cpu_ops(p, base, end):
        cpu = map(eq, cat[base:end], repeat(CPU_OP))
        picked = cpu if picked is None else map(and_, cpu, picked)
    if picked is None:
        ops, lanes = list(range(base, end)), lane[base:end]
    else:
        ops = list(compress(range(base, end), picked))
        lanes = list(map(lane.__getitem__, ops))
    cpu_lane_ops.update(_split_by(lanes, ops))
    return cpu_lane_ops


def non_decreasing(values: list[int] | list[float]) -> bool:
    """``values`` never decrease (then a stable sort keeps them in place)."""
    return all(map(le, values, islice(values, 1, None)))


# Up to this many groups, items are split by group with one C-level pass per
# group; past it, one Python pass over the items is cheaper.
MASK_PASSES_MAX = 8


def _split_by(groups: list[int], items: list[int]) -> dict[int, list[int]]:
    """``items`` split by their ``groups`` (in the order groups first show,
    items in their order)."""
    order = dict.fromkeys(groups)
    if len(order) == 1:
        return {g: items for g in order}
    if len(order) <= MASK_PASSES_MAX:
        return {g: list(compress(items, map(eq, groups, repeat(g)))) for g in order}
    out: dict[int, list[int]] = {g: [] for g in order}
    for g, item in zip(groups, items):
        out[g].append(item)
    return out


def _cpu_slices(p: PreparedGraph, base: int, cpu_lane_ops: dict[int, list[int]],
                incl: list[float]) -> None:
    """CPU threads: each op holds its thread from its start until its first
    callee starts (or until it ends); every other moment of the thread
    (idle gaps, a caller's time between and after its callees) is replayed
    as a delay before the next op. Replaying an op's whole exclusive time
    up front instead would launch its callees' GPU work late."""
    dur = p.dur
    for ops in cpu_lane_ops.values():
        for i, held in zip(ops, thread_holds(_float_starts(p, ops), _of_rank(incl, ops, base))):
            dur[i] = held


def _late_launches(p: PreparedGraph, base: int, sets: _AttrSets, parents: Parents,
                   cpu_lane_ops: dict[int, list[int]]) -> None:
    """A late launch (``LAUNCH_TIME_ATTR``) is released when its thread
    reaches it: after the last op its launcher's thread started before the
    launch, and the recorded time from that op's slice end to the launch
    (the caller's own time) as its delay. Without it the launch edge would
    release it at its launcher's first slice end."""
    flagged = {k for k, a in enumerate(sets.checked) if LAUNCH_TIME_ATTR in a}
    if not flagged:
        return  # the usual case: no per-node pass
    starts: dict[int, list[float]] = {}
    for i in compress(range(base, base + len(sets.of_node)), map(flagged.__contains__, sets.of_node)):
        launcher = next((src for src, kind in parents[i - base] if kind == K_LAUNCH), None)
        ops = cpu_lane_ops.get(p.lane[launcher]) if launcher is not None else None
        if launcher is None or not ops:
            continue
        lane = p.lane[launcher]
        launch = float(sets.checked[sets.of_node[i - base]][LAUNCH_TIME_ATTR])
        if lane not in starts:
            starts[lane] = _float_starts(p, ops)
        q = bisect.bisect_left(starts[lane], launch) - 1
        if q < 0 or ops[q] == launcher or p.start[ops[q]] < p.start[launcher]:
            continue  # launched within its launcher's slice: the launch edge holds it
        before = ops[q]
        gap = launch - (p.start[before] + p.dur[before])
        if gap > 0.0:
            parents[i - base] += ((before, K_THREAD_ORDER),)
            p.delay[i] = gap
            p.late_launch[i] = (lane, launch, before)


def _float_starts(p: PreparedGraph, ops: list[int]) -> list[float]:
    """The ops' recorded starts as floats (C-level maps: a million ops)."""
    return list(map(float, map(p.start.__getitem__, ops)))


def _of_rank(values: Sequence[_T], ops: list[int], base: int) -> Iterator[_T]:
    """The ops' entries of a list indexed from the rank's first node (``base``)."""
    return map(values.__getitem__, ops if not base else map(sub, ops, repeat(base)))


def _pin_orphans(p: PreparedGraph, base: int, orphans: list[int], parents: Parents,
                 t0: float) -> None:
    """A GPU op with no dependency at all (launcher not linked) stays at its
    recorded offset instead of floating to the start of the step."""
    for i in orphans:
        if not parents[i - base] and p.nodes[i].start_time_micros:
            p.delay[i] = max(0.0, p.nodes[i].start_time_micros - t0)


def _cpu_delays(p: PreparedGraph, base: int, cpu_lane_ops: dict[int, list[int]],
                parents: Parents, incl: list[float], t0: float) -> None:
    """The delay before an op is measured from when it could have started in
    the trace: the later of its thread's previous slice and its
    dependencies' ends (a thread handing over to another, a GPU sync). Also
    notes each thread's recorded tail after its last slice (callers returning).
    The compiled fast path runs ``_thread_delays``' loop where built."""
    fast = fast_path() if type(t0) is float else None
    for lane, ops in cpu_lane_ops.items():
        got = None if fast is None else \
            fast.cpu_delays(ops, p.start, p.dur, incl, parents, base, t0, p.delay)
        last, cursor = got if got is not None else \
            _thread_delays(p, base, ops, parents, incl, t0)
        p.lane_tail[lane] = max(0.0, last - cursor)
        p.lane_tail_end[lane] = last


def _thread_delays(p: PreparedGraph, base: int, ops: list[int], parents: Parents,
                   incl: list[float], t0: float) -> tuple[float, float]:
    """One thread's delays; returns its latest recorded end (start +
    inclusive time) and where its last slice ends."""
    starts, dur, delay = p.start, p.dur, p.delay
    cursor = t0
    last = -math.inf
    for i, start, inclusive, plist in zip(ops, _float_starts(p, ops), _of_rank(incl, ops, base),
                                          _of_rank(parents, ops, base)):
        ready = cursor
        for src, _kind in plist:
            e = starts[src] + dur[src]
            if ready < e <= start:
                ready = e
        gap = start - ready  # max(0.0, ...) and max(cursor, ...), inline
        delay[i] = gap if gap > 0.0 else 0.0
        held_to = start + dur[i]
        if held_to > cursor:
            cursor = held_to
        end = start + inclusive
        if end > last:
            last = end
    return last, cursor


def _link_children(p: PreparedGraph, base: int, parents: Parents) -> None:
    """Turn the parent lists into the flat children arrays and wait counts the
    replay releases nodes by (each node's children in node order, as a
    counting sort by parent); edges moved to an issue release are skipped.
    The compiled fast path does the same where built."""
    fast = fast_path()
    got = fast.link_children(parents, base, len(p.child), p.nwait) if fast is not None else None
    if got is not None:
        starts, child, kinds = got
        p.child_start.frombytes(starts)
        p.child.frombytes(child)
        p.child_kind.frombytes(kinds)
        return
    counts = array("q", [0]) * (len(parents) + 1)
    for plist in parents:
        for src, kind in plist:
            if kind != -1:
                counts[src - base + 1] += 1
    offsets = array("q", accumulate(counts))  # offsets[k]: where node base+k's children start
    fill = offsets[:-1]
    child = array("q", [0]) * offsets[-1]
    child_kind = array("b", [0]) * offsets[-1]
    nwait = p.nwait
    for i, plist in zip(range(base, base + len(parents)), parents):
        for src, kind in plist:
            if kind == -1:
                continue  # moved to an issue release
            k = src - base
            at = fill[k]
            fill[k] = at + 1
            child[at] = i
            child_kind[at] = kind
            nwait[i] += 1
    shift = len(p.child)
    del offsets[-1]
    p.child_start.extend(offsets if not shift else array("q", (o + shift for o in offsets)))
    p.child.extend(child)
    p.child_kind.extend(child_kind)


def _infer_stream_waits(p: PreparedGraph, base: int, end: int, parents: Parents) -> int:
    """GPU ops that started late for no recorded reason waited on another
    stream (``cudaStreamWaitEvent`` without the stream/event arguments that
    old traces lack, e.g. the compute stream waiting for an NCCL kernel).

    An op X whose start is more than ``INFER_MIN_US`` after both its stream
    predecessor's end and its launcher's issue, and within ``INFER_TOL_US``
    after the end of an op on another stream of the same rank, gets a
    ``stream_wait`` edge from that op (the latest such). A collective kernel
    with no such op waited for what its caller had queued on another stream
    before launching it (``_QueuedBefore``: NCCL's event on the caller's
    stream, not recorded by traces without runtime sync events)."""
    if _only_cpu_ops(p, base, end):
        return 0
    gpu = [i for i in range(base, end) if p.cat[i] != CPU_OP and
           (p.nodes[i].start_time_micros or p.nodes[i].duration_micros)]
    if not gpu:
        return 0
    node = p.nodes
    ends = sorted((node[i].start_time_micros + node[i].duration_micros, i) for i in gpu)
    end_t = [e for e, _ in ends]
    added = 0
    queued: _QueuedBefore | None = None  # built for the first late collective only
    tail = HELD_TAIL_FRACTION * max(node[i].duration_micros for i in gpu)
    for i in gpu:
        s_x = node[i].start_time_micros
        explained = -math.inf
        has_other = False
        for src, kind in parents[i - base]:
            if p.cat[src] == CPU_OP:
                e = node[src].start_time_micros + p.dur[src]
                if e > s_x:  # still running when X started (a blocking copy): issued at start
                    e = node[src].start_time_micros
            else:
                e = node[src].start_time_micros + node[src].duration_micros
                if kind != K_STREAM_ORDER and p.lane[src] != p.lane[i]:
                    has_other = True
            explained = max(explained, e)
        late = p.late_launch.get(i)
        if late is not None:  # its launch came later: the thread's time explains that much
            explained = max(explained, late[1])
        if has_other or explained == -math.inf or s_x - explained <= INFER_MIN_US:
            continue
        waited: int | None = None
        k = bisect.bisect_right(end_t, s_x) - 1
        while k >= 0 and end_t[k] >= s_x - INFER_TOL_US:
            if p.lane[ends[k][1]] != p.lane[i] and end_t[k] > explained:
                waited = ends[k][1]
                break
            k -= 1
        if waited is None and p.cat[i] == COMM:
            queued = queued or _QueuedBefore(p, base, gpu, parents)
            waited = queued.waited(i, explained)
        if waited is None:
            waited = _held_by(p, ends, end_t, i, explained, tail)
        if waited is not None:
            parents[i - base] += ((waited, K_STREAM_WAIT),)
            added += 1
    return added


def _held_by(p: PreparedGraph, ends: Sequence[tuple[float, int]], end_t: Sequence[float], x: int,
             explained: float, tail: float) -> int | None:
    """The kernel of another stream that held the GPU when op ``x`` was
    ready: it started before ``x`` could (within ``INFER_TOL_US``), and
    ``x`` started in its last ``HELD_TAIL_FRACTION`` (``tail``: that share
    of the longest op). The nearest end wins."""
    node = p.nodes
    s_x = node[x].start_time_micros
    k = bisect.bisect_right(end_t, s_x)
    while k < len(end_t) and end_t[k] <= s_x + tail:
        src = ends[k][1]
        start, dur = node[src].start_time_micros, node[src].duration_micros
        if p.lane[src] != p.lane[x] and start <= explained + INFER_TOL_US \
                and end_t[k] - s_x <= HELD_TAIL_FRACTION * dur:
            return src
        k += 1
    return None


class _QueuedBefore:
    """Each GPU op by the thread that launched it and its stream, in launch
    order: what a collective's caller had queued on each stream before it."""

    def __init__(self, p: PreparedGraph, base: int, gpu: list[int], parents: Parents) -> None:
        self.p, self.base, self.parents = p, base, parents
        by: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
        for i in gpu:
            launcher = self.launcher(i)
            if launcher is not None:
                by[p.lane[launcher], p.lane[i]].append(
                    (float(p.nodes[launcher].start_time_micros), i))
        self.lists = {key: sorted(ops) for key, ops in by.items()}
        self.issued = {key: [t for t, _ in ops] for key, ops in self.lists.items()}

    def launcher(self, i: int) -> int | None:
        return next((src for src, kind in self.parents[i - self.base] if kind == K_LAUNCH), None)

    def waited(self, x: int, explained: float) -> int | None:
        """The op collective ``x`` waited for: on each other stream, the last
        op its launcher's thread queued before launching ``x``; the one that
        ended latest, at most ``COMM_EVENT_TOL_US`` before ``x`` started and
        after what its recorded dependencies explain."""
        p, node = self.p, self.p.nodes
        launcher = self.launcher(x)
        if launcher is None:
            return None
        s_x, issued_at = node[x].start_time_micros, node[launcher].start_time_micros
        best, best_end = None, max(explained, s_x - COMM_EVENT_TOL_US)
        for (thread, lane), ops in self.lists.items():
            if thread != p.lane[launcher] or lane == p.lane[x]:
                continue
            k = bisect.bisect_left(self.issued[thread, lane], issued_at) - 1
            if k < 0:
                continue
            op = ops[k][1]
            e = node[op].start_time_micros + node[op].duration_micros
            if best_end < e <= s_x:
                best, best_end = op, e
        return best


def _infer_host_comm_waits(p: PreparedGraph, base: int, end: int, parents: Parents,
                           cpu_lane_ops: dict[int, list[int]]) -> list[tuple[int, int]]:
    """On a rank without GPU work, the waits of its host threads for the
    collectives gloo runs on its worker threads (the wake-up rule,
    ``waits.host_comm_waits``): each such op X gets a ``stream_wait`` edge
    from the collective it waited for. Returns the (X, collective) pairs."""
    cats = p.cat[base:end]
    if GPU_COMPUTE in cats or COMM not in cats:
        return []  # the GPU's own waits are inferred elsewhere; or no collective to wait on
    node = p.nodes
    collectives = CollectiveEnds(
        (node[i].start_time_micros, node[i].start_time_micros + node[i].duration_micros, i)
        for i in range(base, end) if p.cat[i] == COMM and node[i].duration_micros)
    threads = ([TimedHostOp(x, node[x].start_time_micros, node[x].start_time_micros + p.dur[x],
                       _comm_parents_end(p, parents[x - base])) for x in ops]
               for ops in cpu_lane_ops.values())
    added = [(w.op, w.collective) for w in host_comm_waits(threads, collectives)]
    for x, src in added:
        parents[x - base] += ((src, K_STREAM_WAIT),)
    return added


def _worker_pickups(p: PreparedGraph, base: int, end: int, parents: Parents) -> None:
    """On a rank without GPU work a collective runs on one of the backend's
    host worker threads (gloo), which picks it up some time after it could
    have started: the thread wakes up, a while on a loaded machine (0.05 ms
    quiet, up to 15 ms seen with 8 ranks on 2 shared cores). That time, from
    the later of its dependencies' and its lane's previous node's recorded
    ends to its recorded start, is replayed as a delay, like a CPU thread's
    gap; a collective without either keeps its own rule (``_pin_orphans``).
    A collective the recording ran beside the previous one of its lane
    (a lane a what-if or the calibrated link serialises: ``comm_streams``)
    had been picked up already: serialised, it starts when that one ends,
    with no pickup delay on top (as the ASTRA-sim job's serial chain issues it).
    Likewise a dependency that ended after the recorded start (the issuing
    op returns once the worker has taken the work): the replay starts the
    collective after it, so no delay is left to add."""
    cats = p.cat[base:end]
    if GPU_COMPUTE in cats or GPU_MEMCPY in cats or COMM not in cats:
        return
    starts, dur, lanes = p.start, p.dur, p.lane
    lane_end: dict[int, float] = {}
    for i in sorted((i for i in range(base, end) if p.cat[i] == COMM), key=starts.__getitem__):
        start, lane = float(starts[i]), lanes[i]
        prev = lane_end.get(lane, -math.inf)
        ready = max([prev, *(starts[src] + dur[src] for src, _kind in parents[i - base])])
        if ready > -math.inf:
            p.delay[i] = max(0.0, start - ready)
        lane_end[lane] = max(prev, start + dur[i])


def _comm_parents_end(p: PreparedGraph, plist: tuple[tuple[int, int], ...]) -> float:
    """The latest end of the collectives among an op's recorded parents."""
    return max([-math.inf] + [p.nodes[src].start_time_micros + p.dur[src]
                              for src, _kind in plist if p.cat[src] == COMM])


def _respread_comm(p: PreparedGraph, rank: int, comm: list[int], parents: Parents,
                   base: int, attrs_of: list[Attrs], streams: int) -> None:
    """What-if: collectives round-robin over ``streams`` communication streams.
    Stream order between collectives is rebuilt per new stream."""
    comm_set = set(comm)
    for pos, i in enumerate(comm):
        dev = attrs_of[i - base].get("device", 0)
        p.lane[i] = p.lane_id(("gpu", rank, dev, f"comm{pos % streams}"), rank, "gpu",
                              f"comm stream {pos % streams}")
        k = i - base
        parents[k] = tuple([(s, kind) for s, kind in parents[k]
                            if not (kind == K_STREAM_ORDER and s in comm_set)])
        if pos >= streams:
            parents[k] += ((comm[pos - streams], K_STREAM_ORDER),)


def _sync_ops(p: PreparedGraph, base: int, parents: Parents,
              cpu_lane_ops: dict[int, list[int]]) -> None:
    """Take the measured GPU wait out of the CPU time that blocked on it.

    For each ``gpu_sync`` consumer C (first CPU op after the sync returned),
    find on C's thread where the GPU producers' end ``t_ret`` falls:

    * inside op S's slice: S waited. S then ends at
      ``max(start + own work, producer end + post-return time)``, where the
      post-return time is the part of its slice after ``t_ret``, and releases
      the GPU ops it launched when it issues them (its start), not when it
      returns;
    * inside the replayed gap before op X: the gap's part before ``t_ret`` was
      the wait; X then waits for the producers plus the rest of the gap.
    """
    start, delay = p.start, p.delay
    starts = {lane: [start[i] - delay[i] for i in ops]
              for lane, ops in cpu_lane_ops.items()}
    for k, plist in enumerate(parents):
        producers = [s for s, kind in plist if kind == K_GPU_SYNC]
        if producers:
            _sync_consumer(p, base, parents, cpu_lane_ops, starts, base + k, producers)


def _sync_consumer(p: PreparedGraph, base: int, parents: Parents,
                   cpu_lane_ops: dict[int, list[int]], starts: dict[int, list[float]],
                   c: int, producers: list[int]) -> None:
    """Find the op (or the gap) on consumer ``c``'s thread that held the
    wait for ``producers``, and give the wait back to the dependency."""
    lane = p.lane[c]
    ops = cpu_lane_ops.get(lane)
    if not ops:
        return
    t_ret = max(p.nodes[s].start_time_micros + p.nodes[s].duration_micros for s in producers)
    c_start = p.nodes[c].start_time_micros
    if t_ret > c_start:
        return  # inconsistent timing: keep the plain edge
    q = bisect.bisect_right(starts[lane], t_ret) - 1
    if q < 0:
        return
    x = ops[q]
    x_start = float(p.nodes[x].start_time_micros)
    if t_ret <= x_start:
        if x != c:
            _wait_in_gap(p, base, parents, x, x_start, producers)
        return
    if t_ret > x_start + p.dur[x] or x in p.sync:
        return  # after X's slice: the producers were done before anyone waited
    launched = _launched_by(p, base, parents, x, producers)
    if launched is not None:
        _make_sync_op(p, base, parents, x, t_ret, x_start, producers, launched)


def _wait_in_gap(p: PreparedGraph, base: int, parents: Parents, x: int, x_start: float,
                 producers: list[int]) -> None:
    """In the gap before X: X waited for the producers (its delay is then
    measured from their end)."""
    for s in producers:
        parents[x - base] += ((s, K_GPU_SYNC),)
        end_s = p.nodes[s].start_time_micros + p.nodes[s].duration_micros
        p.delay[x] = min(p.delay[x], max(0.0, x_start - end_s))


def _launched_by(p: PreparedGraph, base: int, parents: Parents, holder: int,
                 producers: list[int]) -> list[int] | None:
    """The producers that ``holder`` launched (released when it issues them);
    None when one was launched after the holder started, which would deadlock."""
    ok = True
    launched = []
    for s in producers:
        for src, kind in parents[s - base]:
            if kind != K_LAUNCH:
                continue
            if src == holder:
                launched.append(s)
            elif p.nodes[src].id > p.nodes[holder].id and p.rank[src] == p.rank[holder]:
                ok = False  # launched after the holder started: would deadlock
    return launched if ok else None


def _make_sync_op(p: PreparedGraph, base: int, parents: Parents, holder: int, t_ret: float,
                  x_start: float, producers: list[int], launched: list[int]) -> None:
    """Make ``holder`` a sync op: its own work is the part of its slice after
    the producers' end, it is gated by them, and the GPU ops it launched are
    released at its issue instead of through their launch edge."""
    excl = p.dur[holder]
    wait = min(excl, t_ret - x_start)
    post = excl - wait
    p.sync[holder] = (post, post, 0.0)  # (own work, post-return time, issue offset)
    p.sync_gates[holder] = len(producers)
    for s in producers:
        p.sync_producers.setdefault(s, []).append(holder)
    if launched:
        p.issue_children[holder] = launched
        for s in launched:
            sk = s - base
            parents[sk] = tuple([(src, -1 if (src == holder and kind == K_LAUNCH) else kind)
                                 for src, kind in parents[sk]])
            p.nwait[s] += 1  # released by the issue event

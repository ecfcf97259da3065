"""Simulator input: Chakra graphs of one or more ranks as flat arrays.

Turns decoded nodes into what the replay loop needs (``prepared.py``'s
``PreparedGraph``: lanes, categories, durations, children lists, collective
keys), rank by rank: the attributes the simulator reads, each node's
category, lane and dependencies, the recorded order and step. Two parts of
it have their own modules: CPU threads' slices and delays
(``thread_timing.py``) and the waits old traces do not record
(``inferred_waits.py``). The model is described in event_loop.py (the loop)
and docs/SIMULATE.md.
"""

from __future__ import annotations

import logging
from array import array
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, compress, repeat
from operator import and_, attrgetter, eq, itemgetter, or_
from typing import Any, NamedTuple

from pt2chakra.chakra.dep_kinds import dep_kinds_of
from pt2chakra.chakra.lean_read import LeanNodes
from pt2chakra.chakra.process_groups import ProcessGroupRecord, read_process_groups
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
    StepWindow,
    is_finite_number,
    is_gpu,
    is_int,
    is_period_step,
    lane_of,
    scaled_world,
    step_window_from,
)
from pt2chakra.rules.group_resolution import RankOps, rank_set_keys
from pt2chakra.rules.rendezvous import (
    CommOp,
    RankComms,
    comm_op,
    comm_order,
    describe_deadlock,
    find_deadlock,
)
from pt2chakra.simulation.compiled import fast_path
from pt2chakra.simulation.inferred_waits import (
    infer_host_comm_waits,
    infer_stream_waits,
    sync_ops,
    worker_pickups,
)
from pt2chakra.simulation.prepared import (
    COMM,
    CPU_OP,
    GPU_COMPUTE,
    GPU_CPU_GAP,
    GPU_MEMCPY,
    K_DATA,
    K_GPU_SYNC,
    K_STREAM_ORDER,
    KIND_CODE,
    KIND_TYPECODE,
    SOURCE_TYPECODE,
    Attrs,
    AttrSets,
    ParentList,
    Parents,
    PreparedGraph,
    non_decreasing,
    only_cpu_ops,
    shared_floats,
)
from pt2chakra.simulation.thread_timing import cpu_delays, cpu_slices, late_launches, pin_orphans

log = logging.getLogger("pt2chakra.simulation")

# Node fields read by C-level maps (a million nodes: no Python call per node).
_node_type, _node_id = attrgetter("type"), attrgetter("id")
_node_start, _node_duration = attrgetter("start_time_micros"), attrgetter("duration_micros")
_node_attrs, _node_deps = attrgetter("attrs"), attrgetter("data_deps")
_third = itemgetter(2)
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
    pending: list[_RankComm] = []
    for rank, (md, nodes) in enumerate(graphs):
        bad: set[str] = set()
        p.sources.append(sources[rank])
        p.rank_label.append(ranks[rank])
        _prepare_rank(p, rank, md, nodes, comm_streams, pending, infer_waits, bad)
        if bad:
            log.warning("%s: ignored attribute%s of an unexpected type (treated as absent): %s",
                        sources[rank], "s" if len(bad) > 1 else "", ", ".join(sorted(bad)))
    p.child_start.append(len(p.child))  # the end of the last node's children
    _key_comms(p, pending)
    if len(graphs) > 1:
        steps = find_deadlock(p.rank_comms)
        if steps and refuse_deadlock:  # the replay would end with nodes that never ran
            raise InputError(steps[0].source, describe_deadlock(steps))
        if steps:
            log.warning("%s: %s (--force: replayed anyway)", steps[0].source,
                        describe_deadlock(steps))
    return p


class _RankComm(NamedTuple):
    """One rank's communication before it is keyed: keys need every rank's
    (``group_resolution.rank_set_keys``)."""

    ops: RankOps
    nodes: list[int]  # its communication nodes, in recorded order
    order: list[tuple[int, int]]  # rendezvous.comm_order


def _comm_ops(p: PreparedGraph, rank: int, base: int, by_start: list[int], attrs_of: list[Attrs],
              parents: Parents, groups: list[ProcessGroupRecord],
              pending: list[_RankComm]) -> list[int]:
    """Read each communication node as the matching rule does (``comm_op``)
    and note the rank's order between them for the deadlock check; returns
    the communication nodes in recorded order."""
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
    end = base + len(parents)
    ids = [p.nodes[i].id for i in range(base, end)]
    deps = {p.nodes[base + k].id: [(p.nodes[src].id, kind) for src, kind in plist]
            for k, plist in enumerate(parents) if plist}
    pending.append(_RankComm(RankOps(rank, groups, ops), comm_by_order,
                             comm_order(ids, deps, ops)))
    return comm_by_order


def _key_comms(p: PreparedGraph, pending: Sequence[_RankComm]) -> None:
    """Key every rank's communication nodes by the shared matching rule, the
    groups of unnamed ones resolved across the ranks."""
    labelled = [c.ops._replace(rank=p.rank_label[c.ops.rank]) for c in pending]
    for c, keys in zip(pending, rank_set_keys(labelled)):
        for i in c.nodes:
            p.comm_key[i] = keys[p.nodes[i].id]
        p.rank_comms.append(RankComms(p.rank_label[c.ops.rank], p.sources[c.ops.rank], keys,
                                      c.order))


def _prepare_rank(p: PreparedGraph, rank: int, md: GlobalMetadata, nodes: Sequence[ChakraNode],
                  comm_streams: int, pending: list[_RankComm], infer_waits: bool = True,
                  bad: set[str] | None = None) -> None:
    """Append one rank to ``p``: its nodes, their order, dependencies,
    replayed CPU durations and delays, sync ops and children lists."""
    base = len(p.nodes)
    mda = metadata_attrs(md, bad)
    timed_rank = _note_timed(p, nodes)
    ids, attrs_of, incl, sets = _add_nodes(p, rank, nodes, bad)
    end = len(p.nodes)
    p.rank_nodes.append(range(base, end))
    t0 = _add_step(p, rank, mda, incl)
    groups = read_process_groups(md, p.sources[rank])
    p.pg_sizes.append({g.name: g.size or len(g.ranks) for g in groups})
    by_start = _recorded_order(p, base, end)
    ascending = non_decreasing(ids)  # as converters hand ids out: read by two steps below
    parents, gpu_syncs = _parents(nodes, base, ids, sets, ascending)
    del ids
    comm_by_order = _comm_ops(p, rank, base, by_start, attrs_of, parents, groups, pending)
    # Device ops without a recorded dependency, before respreading adds stream order.
    orphans = [] if only_cpu_ops(p, base, end) else \
        [i for i in range(base, end) if p.cat[i] != CPU_OP and not parents[i - base]]
    if comm_streams > 0 and comm_by_order:
        _respread_comm(p, rank, comm_by_order, parents, base, attrs_of, comm_streams)
    cpu_lane_ops = _cpu_threads(p, base, end, timed_rank, ascending)
    cpu_slices(p, base, cpu_lane_ops, incl)
    late_launches(p, base, sets, parents, cpu_lane_ops)
    host_waits: list[tuple[int, int]] = []
    if infer_waits and timed_rank:
        p.inferred_edges += infer_stream_waits(p, base, end, parents)
        host_waits = infer_host_comm_waits(p, base, end, parents, cpu_lane_ops)
        p.inferred_edges += len(host_waits)
    pin_orphans(p, base, orphans, parents, t0)
    cpu_delays(p, base, cpu_lane_ops, parents, incl, t0)
    for x, src in host_waits:  # the gap before X was the wait: only the rest stays
        end_src = p.nodes[src].start_time_micros + p.nodes[src].duration_micros
        p.delay[x] = min(p.delay[x], max(0.0, p.nodes[x].start_time_micros - end_src))
    if timed_rank:
        worker_pickups(p, base, end, parents)
    if gpu_syncs:  # else no node has a gpu_sync edge, and none is added before
        sync_ops(p, base, parents, cpu_lane_ops)
    _link_children(p, base, parents)


def _note_timed(p: PreparedGraph, nodes: Sequence[ChakraNode]) -> bool:
    """A rank without any start time (other tools' graphs, ``microbench``) is
    untimed: nodes keep their whole duration, in dependency order, with no
    replayed gaps and no measured step."""
    timed_rank = any(map(_node_start, nodes))
    p.rank_timed.append(timed_rank)
    return timed_rank


def _add_nodes(p: PreparedGraph, rank: int, nodes: Sequence[ChakraNode], bad: set[str] | None,
               ) -> tuple[list[int], list[Attrs], list[float], AttrSets]:
    """Append the rank's nodes to the flat arrays, each in its category and on
    its lane; returns what later steps read (the nodes' ids, attributes,
    inclusive times, attribute sets)."""
    count = len(nodes)
    dur = list(map(float, map(_node_duration, nodes)))
    if isinstance(nodes, LeanNodes) and nodes.apart_name == INCLUSIVE_ATTR:
        attrs_of, incl, sets = _apart_attrs(nodes, dur, bad)
    else:
        attrs_of, incl, sets = _shared_attrs(nodes, dur, bad)
    p.incl.extend(incl)
    ids = list(map(_node_id, nodes))
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
    return ids, attrs_of, incl, sets


def _numbered(keys: Iterable[int], checked: dict[int, Attrs]) -> AttrSets:
    """``AttrSets`` from each node's key (the id of a shared object, all
    alive here) and the checked attributes of each key, in first-shown order."""
    number = {key: n for n, key in enumerate(checked)}
    return AttrSets(list(map(number.__getitem__, keys)), list(checked.values()))


def _shared_attrs(nodes: Sequence[ChakraNode], dur: list[float], bad: set[str] | None,
                  ) -> tuple[list[Attrs], list[float], AttrSets]:
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
                 ) -> tuple[list[Attrs], list[float], AttrSets]:
    """``_shared_attrs`` for nodes read with the inclusive time held apart
    (``read_et_apart``): equal attribute sets are one list, and the few
    nodes whose list still holds the inclusive time (a value of another
    type, a batch read the exact way) read it as ``_shared_attrs`` does."""
    incl = shared_floats(nodes.apart, dur)  # NaN: absent
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
    if node_type in COMM_NODE_TYPES and not is_cpu:
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
    if only_cpu_ops(p, base, end):  # ids throughout
        order[base:end] = ids[base:end]
        return []
    # (start, id, index): ties keep node order, as a stable sort by (start, id) does
    by_start = list(map(_third, sorted(zip(p.start[base:end], ids[base:end], range(base, end)))))
    for pos, i in enumerate(by_start):
        order[i] = ids[i] if cat[i] == CPU_OP else pos
    return by_start


def _parents(nodes: Sequence[ChakraNode], base: int, ids: list[int], sets: AttrSets,
             ascending: bool | None = None) -> tuple[Parents, bool]:
    """Each node's dependencies (``data_deps``) with their recorded kinds, as
    global indices (``ids``: the nodes' ids; a repeated id means its last
    node); unknown ids and self-edges are dropped (they could never be met).
    Kind codes are worked out once per attribute set and dep count (most
    nodes have one dependency: looked up by the set alone; the compiled
    path takes those nodes where built, finding ids in the sorted ids
    themselves where they do not decrease, as converters write them: no
    million-entry dict; ``ascending``: whether they do, when known). Also
    says whether any dependency is recorded as a ``gpu_sync``."""
    lone: list[int | None] = [None] * len(sets.checked)  # set -> code of a lone dependency
    codes_of: dict[tuple[int, int], list[int]] = {}  # (attribute set, deps) -> kind codes
    fast = fast_path()
    if ascending is None:
        ascending = non_decreasing(ids)
    sorted_ids = _sorted_ids(ids) if fast is not None and ascending else None
    index = _id_index(ids, base) if sorted_ids is None else None
    get = index.get if index is not None else _id_lookup(ids, base)

    def lone_code(key: int) -> int:
        code = lone[key] = _kind_codes(sets.checked[key], 1)[0]
        return code

    def many(i: int, deps: list[int], key: int) -> ParentList:
        codes = codes_of.get((key, len(deps)))
        if codes is None:
            codes = codes_of[key, len(deps)] = _kind_codes(sets.checked[key], len(deps))
        mine = []
        for d, code in zip(deps, codes):
            src = get(d)
            if src is not None and src != i:
                mine.append((src, code))
        return tuple(mine)

    got = None if fast is None else fast.parents_of(
        list(map(_node_deps, nodes)), sets.of_node, index if index is not None else sorted_ids,
        lone, base, lone_code, many)
    if got is not None:
        parents = Parents(*(array(code, b) for code, b in
                            zip(("q", SOURCE_TYPECODE, KIND_TYPECODE), got)))
    else:
        lists: list[ParentList] = []
        append = lists.append
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
        parents = Parents.of_lists(lists)
    return parents, K_GPU_SYNC in lone or \
        any(K_GPU_SYNC in codes for codes in codes_of.values())


def _id_index(ids: list[int], base: int) -> dict[int, int]:
    """id -> global index (a repeated id: its last node)."""
    return dict(zip(ids, range(base, base + len(ids))))


def _sorted_ids(ids: list[int]) -> array[int] | None:
    """Ids that do not decrease as the compiled path's sorted lookup reads
    them (uint64), or None where they are not all such ints (a dict it is)."""
    try:
        return array("Q", ids)
    except (OverflowError, TypeError):
        return None


def _id_lookup(ids: list[int], base: int) -> Callable[[Any], int | None]:
    """``_id_index(ids, base).get`` for ids that do not decrease, by bisection
    (an id that is not an int is looked up in that dict, made once)."""
    index: dict[int, int] | None = None

    def get(dep: Any) -> int | None:
        nonlocal index
        if type(dep) is int:
            at = bisect_right(ids, dep) - 1
            return base + at if at >= 0 and ids[at] == dep else None
        if index is None:
            index = _id_index(ids, base)
        return index.get(dep)

    return get


def _kind_codes(attrs: Attrs, count: int) -> list[int]:
    """The kind codes of a node's ``count`` dependencies (by its attributes)."""
    return [KIND_CODE.get(name, K_DATA) for name in dep_kinds_of([0] * count, attrs)]


def _cpu_threads(p: PreparedGraph, base: int, end: int, timed_rank: bool, ascending: bool,
                 ) -> dict[int, list[int]]:
    """The timed CPU ops of each thread (lane) in ET id order, since ids are
    handed out at op start (``ascending``: the rank's ids do not decrease);
    untimed ranks replay no thread timing."""
    cpu_lane_ops: dict[int, list[int]] = defaultdict(list)
    if not timed_rank:
        return cpu_lane_ops
    ids, cat, start, nodes, lane = p.ids, p.cat, p.start, p.nodes, p.lane
    if not ascending:
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
    if not only_cpu_ops(p, base, end):
        cpu = map(eq, cat[base:end], repeat(CPU_OP))
        picked = cpu if picked is None else map(and_, cpu, picked)
    if picked is None:
        ops, lanes = list(range(base, end)), lane[base:end]
    else:
        ops = list(compress(range(base, end), picked))
        lanes = list(map(lane.__getitem__, ops))
    cpu_lane_ops.update(_split_by(lanes, ops))
    return cpu_lane_ops


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

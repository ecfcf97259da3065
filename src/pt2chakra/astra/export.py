"""The ``--consumer astra-sim`` export: rewrite a trace into what today's
ASTRA-sim (analytical backend, HEAD of 2026-03) replays to completion.

- No ``METADATA_NODE`` (it stops with "Invalid node_type"): the process-group
  facts of ``## process_group:init ##`` move to the metadata attribute
  ``process_groups`` (JSON) instead.
- CPU nodes (``is_cpu_op`` true) make its statistics step throw, and its
  resource model runs one compute node at a time per NPU. So by default
  (``cpu="serial"``, ``serial_chain.py``) each rank becomes that one serial
  chain: GPU compute in measured order, idle time as ``cpu_gap`` nodes,
  communication issued after the chain node that ended at its measured start.
- The other modes are kept for comparison: ``cpu="drop"`` removes CPU nodes
  and keeps their time as GPU-side gaps per stream (a GPU node G that
  depended on a dropped CPU node and started X µs after its remaining
  dependencies ended gets a ``cpu_gap`` node of X µs before it, kind
  ``cpu_gap``; the CPU time after the last GPU node becomes a final gap);
  ``cpu="keep"`` leaves the CPU nodes; ``cpu="drop-no-gaps"`` drops them
  without gaps (the old output). A removed node's dependents inherit its
  dependencies (transitively; per GPU stream only the latest inherited
  predecessor is kept), named ``via_dropped`` in ``data_dep_kinds``;
  ``ctrl_deps`` on removed nodes are dropped (ASTRA-sim ignores them).
- One file per rank, ``<prefix>.<rank>.et``, plus ``<prefix>.comm_groups.json``
  (``{"<pg_name>": [ranks...]}``, the communicator-group file ASTRA-sim takes)
  when the trace names process groups with their ranks.
"""
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import msgspec
import orjson

from pt2chakra.astra.choices import CPU_MODES, DEFAULT_CPU_MODE
from pt2chakra.astra.collective_time import astra_collective, astra_comm_size
from pt2chakra.astra.serial_chain import comm_issue_times, serial_chain
from pt2chakra.atomic import (
    RANK_FILES,
    StagedOutputs,
    check_outputs,
    check_prefix_outputs,
    write_atomic,
)
from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR, UNRECORDED_KIND, recorded_dep_kinds
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.process_groups import read_process_groups
from pt2chakra.chakra.ranks import Inputs, RankSet, open_rank_set
from pt2chakra.chakra.records import (
    CHAKRA_VERSION,
    Attr,
    ChakraNode,
    GlobalMetadata,
    NodeType,
    attr_dict,
)
from pt2chakra.errors import InputError
from pt2chakra.names import PROCESS_GROUP_INIT
from pt2chakra.rules.checks import SetChecker, refuse_unsound
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    CONSUMER_PROFILE_ATTR,
    CPU_GAP_CATEGORY,
    QUEUED_WORK_CATEGORY,
    STREAM_LANE,
    StepWindow,
    is_gpu,
    lane_of,
    profile_tag,
    rank_origins,
    scaled_world,
    size_unknown,
    step_window,
)
from pt2chakra.rules.group_resolution import Named
from pt2chakra.rules.rendezvous import comm_op, rendezvous_keys

MIN_NPUS = 2  # the analytical backend refuses a 1-NPU network
_OWN_LANE = "node"  # first item of the lane key of a node that is a lane of its own
VIA_DROPPED = "via_dropped"

log = logging.getLogger(__name__)


def _process_groups_from_node(node: ChakraNode) -> str | None:
    if node.inputs is None:
        return None
    with contextlib.suppress(msgspec.DecodeError, IndexError, TypeError):
        values = msgspec.json.decode(node.inputs[0])
        if isinstance(values, list) and values and isinstance(values[0], str):
            msgspec.json.decode(values[0])  # must itself be JSON
            return values[0]
    return None


def _lane(attrs: dict[str, Any], node: ChakraNode) -> tuple[Any, ...]:
    """Inherited predecessors are merged per GPU stream (stream order implies
    the earlier ones); any other node is a lane of its own."""
    lane = lane_of(node.type, attrs)
    return lane.key if lane.kind == STREAM_LANE else (_OWN_LANE, node.id)


def profile(metadata: GlobalMetadata, nodes: Iterable[ChakraNode], cpu: str = DEFAULT_CPU_MODE,
            origin_us: float = 0.0) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """Apply the ASTRA-sim rules to one rank's trace (see the module doc).
    ``origin_us``: the rank's start after the earliest rank's (``serial``)."""
    all_nodes = list(nodes)
    return _profile_rank(metadata, all_nodes, cpu, origin_us, rank_window(metadata, all_nodes))


def _profile_rank(metadata: GlobalMetadata, all_nodes: list[ChakraNode], cpu: str,
                  origin_us: float, window: StepWindow | None,
                  network_ends: Mapping[int, float] | None = None,
                  link_scales: Mapping[int, float] | None = None,
                  ) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """``profile`` with the rank's step window (``rank_window``) worked out
    once by the caller: the serial chain, the gaps and the ranks' origins all
    read it. ``network_ends``, ``link_scales``: the serial chain's
    (``convert_files``)."""
    if cpu not in CPU_MODES:
        raise ValueError(f"cpu must be one of {CPU_MODES}, got {cpu!r}")
    if cpu == "serial" and window is None:
        cpu = "drop"  # an untimed graph (microbench, from-text) has no schedule to fold
    removed = _removed_nodes(all_nodes, cpu)
    kept = [n for n in all_nodes if n.id not in removed]
    ancestry = _Ancestry(kept, removed)
    if cpu == "serial" and window is not None:
        inherited = {n.id: ancestry.via(n) for n in kept
                     if any(d in removed for d in n.data_deps)}
        out_nodes = serial_chain(all_nodes, set(removed), inherited, window, origin_us,
                                 network_ends, link_scales)
        return _profile_metadata(metadata, all_nodes, cpu), out_nodes
    gaps = _GapMaker(all_nodes, removed, window) if cpu == "drop" else None
    out: list[ChakraNode] = []
    for node in kept:
        out.extend(_rewired(node, removed, ancestry, gaps))
    tail = gaps.tail(out) if gaps is not None else None
    if tail is not None:
        out.append(tail)
    return _profile_metadata(metadata, all_nodes, cpu), out


def host_stretched(nodes: list[ChakraNode], metadata: GlobalMetadata,
                   slow_cpu: float = 1.0) -> list[ChakraNode]:
    """A scaled-out rank whose ranks share their hosts' cores more than the
    recorded ones did (its ``scaleout_cpu_stretch``, scaleout/hosts.py), or
    a slow rank's host (``slow_cpu``, ``--slow-rank RANK:cpu=F``): its CPU
    time (CPU nodes and ``cpu_gap`` nodes, what the replay's CPU scale
    covers, as the consumer model's ``cpu_scale``) stretched by the factors."""
    world = scaled_world(attr_dict(metadata.attrs))
    factor = (1.0 if world is None else world.cpu_stretch) * slow_cpu
    if factor == 1.0:
        return nodes
    out = []
    for n in nodes:
        a = attr_dict(n.attrs)
        if n.type == NodeType.COMP_NODE and (a.get("is_cpu_op") is True
                                             or a.get("category") == CPU_GAP_CATEGORY):
            n = msgspec.structs.replace(
                n, duration_micros=round(n.duration_micros * factor))
        out.append(n)
    return out


def rank_window(metadata: GlobalMetadata, nodes: Sequence[ChakraNode]) -> StepWindow | None:
    """The rank's recorded step (None: untimed), as the simulator measures it."""
    return step_window(attr_dict(metadata.attrs), nodes, [attr_dict(n.attrs) for n in nodes])


def serial_issue_times(path: str) -> dict[int, int]:
    """When the ``serial`` profile issues each communication node of the rank
    file ``path`` (``serial_chain.comm_issue_times``)."""
    _md, lazy = read_et(path)
    nodes = list(lazy)
    return comm_issue_times(nodes, set(_removed_nodes(nodes, "serial")))


def _removed_nodes(nodes: list[ChakraNode], cpu: str) -> dict[int, ChakraNode]:
    """The nodes ASTRA-sim cannot replay, by id in trace order: every
    METADATA node (an "Invalid node_type" stop) and, unless ``cpu="keep"``,
    every CPU node (its statistics step throws on them)."""
    removed: dict[int, ChakraNode] = {}
    for node in nodes:
        if node.type == NodeType.METADATA_NODE or (
                cpu != "keep" and _is_cpu(node)):
            removed[node.id] = node
    return removed


def _profile_metadata(metadata: GlobalMetadata, nodes: list[ChakraNode],
                      cpu: str) -> GlobalMetadata:
    """The metadata of the rewritten trace: the process groups of the first
    (removed) ``process_group:init`` node survive as the ``process_groups``
    attribute (unless one is there already), and ``consumer_profile`` says
    which rewrite produced the file."""
    md_attrs: list[Attr] = list(metadata.attrs)
    if not any(a[0] == "process_groups" for a in md_attrs):
        pgs = _first_process_groups(nodes)
        if pgs is not None:
            md_attrs.append(("process_groups", "string_val", pgs))
    md_attrs = [a for a in md_attrs if a[0] != CONSUMER_PROFILE_ATTR]
    md_attrs.append((CONSUMER_PROFILE_ATTR, "string_val", profile_tag(cpu)))
    return GlobalMetadata(version=metadata.version or CHAKRA_VERSION, attrs=md_attrs)


def _first_process_groups(nodes: list[ChakraNode]) -> str | None:
    """The process-group JSON of the first readable ``process_group:init``
    METADATA node: the only place the trace names the groups' ranks."""
    for node in nodes:
        if node.type == NodeType.METADATA_NODE and node.name == PROCESS_GROUP_INIT:
            pgs = _process_groups_from_node(node)
            if pgs is not None:
                return pgs
    return None


class _Ancestry:
    """The kept predecessors each removed node hands down to its dependents
    (transitively through removed chains), latest per lane, memoised."""

    def __init__(self, kept: list[ChakraNode], removed: dict[int, ChakraNode]) -> None:
        self.removed = removed
        self.order = {n.id: (n.start_time_micros, n.id) for n in kept}
        self.lanes = {n.id: _lane(attr_dict(n.attrs), n) for n in kept}
        self._effective: dict[int, dict[tuple[Any, ...], int]] = {}

    def via(self, node: ChakraNode) -> list[int]:
        """What ``node`` inherits through its removed deps, oldest first."""
        via: dict[tuple[Any, ...], int] = {}
        for d in node.data_deps:
            if d in self.removed:
                for lane, nid in self.inherited(d).items():
                    _keep_latest(via, lane, nid, self.order)
        return sorted(via.values(), key=lambda i: self.order[i])

    def inherited(self, start: int) -> dict[tuple[Any, ...], int]:
        """Lane -> latest kept predecessor of removed node ``start``.
        Iterative (removed chains can be long), cycles cut."""
        stack = [start]
        while stack:
            cur = stack[-1]
            if cur in self._effective:
                stack.pop()
                continue
            pending = self._pending(cur, stack)
            if pending:
                stack.extend(pending)
                continue
            self._effective[cur] = self._merged(cur)
            stack.pop()
        return self._effective[start]

    def _pending(self, cur: int, stack: list[int]) -> list[int]:
        """Removed deps of ``cur`` still to resolve first; one already on
        the stack closes a cycle and is skipped, so the walk ends."""
        pending = [d for d in self.removed[cur].data_deps
                   if d in self.removed and d not in self._effective and d != cur]
        if pending:
            on_stack = set(stack)
            pending = [d for d in pending if d not in on_stack]
        return pending

    def _merged(self, cur: int) -> dict[tuple[Any, ...], int]:
        """``cur``'s kept deps plus what its removed deps hand down, the
        latest per lane (stream order implies the earlier ones)."""
        merged: dict[tuple[Any, ...], int] = {}
        for d in self.removed[cur].data_deps:
            if d in self.removed:
                for lane, nid in self._effective.get(d, {}).items():
                    _keep_latest(merged, lane, nid, self.order)
            elif d in self.lanes:
                _keep_latest(merged, self.lanes[d], d, self.order)
        return merged


def _rewired(node: ChakraNode, removed: dict[int, ChakraNode], ancestry: _Ancestry,
             gaps: _GapMaker | None) -> list[ChakraNode]:
    """``node`` with its removed deps replaced by what they inherited (so no
    ordering is lost), preceded by its ``cpu_gap`` node when it has one; a
    node that touches no removed node is left as it is."""
    if not any(d in removed for d in node.data_deps) and not any(
            d in removed for d in node.ctrl_deps) and not (
            gaps is not None and gaps.waited_for_launch(node)):
        return [node]
    kinds = recorded_dep_kinds(attr_dict(node.attrs), len(node.data_deps))
    deps, dep_kinds = _kept_deps(node, removed, kinds)
    for nid in ancestry.via(node):
        if nid not in deps and nid != node.id:
            deps.append(nid)
            dep_kinds.append(VIA_DROPPED)
    out: list[ChakraNode] = []
    gap = gaps.before(node, deps, dep_kinds) if gaps is not None else None
    if gap is not None:
        out.append(gap)
        deps.append(gap.id)
        dep_kinds.append(CPU_GAP_CATEGORY)
        kinds = kinds or []  # name the kinds so the gap edge reads as such
    new_attrs = [a for a in node.attrs if a[0] != DEP_KINDS_ATTR]
    if kinds is not None and deps:
        new_attrs.append((DEP_KINDS_ATTR, "string_list", dep_kinds))
    out.append(msgspec.structs.replace(
        node, data_deps=deps, ctrl_deps=[d for d in node.ctrl_deps if d not in removed],
        attrs=new_attrs))
    return out


def _kept_deps(node: ChakraNode, removed: dict[int, ChakraNode], kinds: list[str] | None,
               ) -> tuple[list[int], list[str]]:
    """``node``'s data deps that stay, once each, with their recorded kinds
    (``UNRECORDED_KIND`` when the node recorded none)."""
    deps: list[int] = []
    dep_kinds: list[str] = []
    for i, d in enumerate(node.data_deps):
        if d not in removed and d not in deps:
            deps.append(d)
            dep_kinds.append(kinds[i] if kinds else UNRECORDED_KIND)
    return deps, dep_kinds


class _GapMaker:
    """``cpu_gap`` nodes: the measured time a GPU node waited for the CPU."""

    def __init__(self, nodes: list[ChakraNode], removed: dict[int, ChakraNode],
                 window: StepWindow | None) -> None:
        """``window``: the rank's step as the simulator measures it."""
        self.removed = removed
        self.end = {n.id: n.start_time_micros + n.duration_micros for n in nodes}
        self.next_id = max((n.id for n in nodes), default=0) + 1
        self.t0 = round(window.start) if window is not None else None
        self.t1 = round(window.end) if window is not None else None

    def _node(self, like: ChakraNode, start: int, duration: int, deps: list[int],
              kinds: list[str]) -> ChakraNode:
        attrs: list[Attr] = [("is_cpu_op", "bool_val", False)]
        for a in like.attrs:
            if a[0] in ("device", "stream"):
                attrs.append(a)
        attrs.append(("category", "string_val", CPU_GAP_CATEGORY))
        if deps:
            attrs.append((DEP_KINDS_ATTR, "string_list", list(kinds)))
        node = ChakraNode(id=self.next_id, name=CPU_GAP_CATEGORY, type=NodeType.COMP_NODE,
                          start_time_micros=start, duration_micros=duration,
                          data_deps=list(deps), attrs=attrs)
        self.next_id += 1
        self.end[node.id] = start + duration
        return node

    def waited_for_launch(self, node: ChakraNode) -> bool:
        """A stand-in for queued work (``QUEUED_WORK_CATEGORY``) waited for a
        launch no edge carries: it gets its recorded wait as a gap too."""
        return attr_dict(node.attrs).get("category") == QUEUED_WORK_CATEGORY

    def before(self, node: ChakraNode, deps: list[int], kinds: list[str]) -> ChakraNode | None:
        """The gap node G = ``node`` needs, or None. Only nodes that waited on
        a dropped CPU node (or on a launch: ``waited_for_launch``) get one,
        and only timed ones."""
        if self.t0 is None or not node.start_time_micros or _is_cpu(node):
            return None
        if not any(d in self.removed and _is_cpu(self.removed[d]) for d in node.data_deps) \
                and not self.waited_for_launch(node):
            return None
        ready = max((self.end[d] for d in deps if d in self.end), default=self.t0)
        ready = max(ready, self.t0)
        gap = node.start_time_micros - ready
        if gap <= 0:
            return None
        return self._node(node, ready, gap, deps, kinds)

    def tail(self, out: list[ChakraNode]) -> ChakraNode | None:
        """The CPU time after the last GPU node until the step's end (only
        when CPU nodes were dropped: it is their time)."""
        if self.t1 is None or not out or not any(
                _is_cpu(n) for n in self.removed.values()):
            return None
        last: dict[tuple[Any, ...], ChakraNode] = {}
        for n in out:
            lane = _lane(attr_dict(n.attrs), n)
            if lane not in last or self.end[n.id] >= self.end[last[lane].id]:
                last[lane] = n
        latest = max(last.values(), key=lambda n: (self.end[n.id], n.id))
        end = self.end[latest.id]
        if end <= 0 or self.t1 - end <= 0:
            return None
        deps = [n.id for lane, n in sorted(last.items(), key=lambda kv: (self.end[kv[1].id],
                                                                         kv[1].id))
                if n is latest or lane[0] != _OWN_LANE]
        return self._node(latest, end, self.t1 - end, deps, [CPU_GAP_CATEGORY] * len(deps))


def _is_cpu(node: ChakraNode) -> bool:
    return not is_gpu(attr_dict(node.attrs))


def _keep_latest(lanes: dict[tuple[Any, ...], int], lane: tuple[Any, ...], nid: int,
                 order: dict[int, tuple[int, int]]) -> None:
    old = lanes.get(lane)
    if old is None or order[nid] > order[old]:
        lanes[lane] = nid


def comm_groups(metadata: GlobalMetadata, world_size: int | None = None,
                where: str = "metadata") -> dict[str, list[int]]:
    """``{pg_name: ranks}`` from the metadata's ``process_groups`` JSON
    (``chakra.process_groups``: malformed records are refused, naming ``where``)."""
    out: dict[str, list[int]] = {}
    for pg in read_process_groups(metadata, where):
        ranks = pg.members(world_size)
        if ranks:
            out[pg.name] = list(ranks)
    return out


# The communicator group ASTRA-sim reads as "every NPU" (a node's pg_name
# "0" or none); its comm-groups file cannot hold it (it asserts id > 0).
WHOLE_MACHINE_GROUP = "0"


def groups_file(groups: dict[str, list[int]], source: str) -> dict[str, list[int]]:
    """What goes into ``<prefix>.comm_groups.json``: every group but group 0,
    which ASTRA-sim takes to be the whole machine. Group names must be numbers
    (ASTRA-sim reads them with ``stoi``)."""
    out = {}
    for name, ranks in groups.items():
        if not name.isdigit():
            raise InputError(source, f"process group {name!r}: ASTRA-sim needs numeric "
                             "process-group names")
        if name != WHOLE_MACHINE_GROUP:
            out[name] = ranks
    return out


GROUPS_SUFFIX = ".comm_groups.json"
# What follows ``<prefix>.`` in the export's files (atomic.check_prefix_outputs).
EXPORT_FILES = f"{RANK_FILES}|comm_groups\\.json"


def output_paths(prefix: str, rank: int) -> list[str]:
    return [f"{prefix}.{rank}.et", f"{prefix}{GROUPS_SUFFIX}"]


class AstraSimProfile(msgspec.Struct, frozen=True):
    """``convert --consumer astra-sim``: the conversion written as this export
    (a ``conversion.api.OutputProfile``); ``cpu``: one of ``CPU_MODES``."""

    cpu: str = DEFAULT_CPU_MODE
    name: ClassVar[str] = "astra-sim"

    @property
    def output_files(self) -> str:
        return EXPORT_FILES

    def write(self, metadata: GlobalMetadata, nodes: Iterable[ChakraNode],
              output: str | os.PathLike[str], *, rank: int | None,
              inputs: Sequence[str | os.PathLike[str] | None],
              staged: StagedOutputs) -> None:
        write_astra_sim(metadata, nodes, output, rank=rank, cpu=self.cpu, inputs=inputs,
                        staged=staged)


def write_astra_sim(metadata: GlobalMetadata, nodes: Iterable[ChakraNode],
                    prefix: str | os.PathLike[str], rank: int | None = None, cpu: str = DEFAULT_CPU_MODE,
                    *, inputs: Sequence[str | os.PathLike[str] | None] = (),
                    staged: StagedOutputs | None = None) -> list[str]:
    """Write ``<prefix>.<rank>.et`` (and ``<prefix>.comm_groups.json`` when
    process groups are known); returns the paths written. ``rank`` defaults
    to the metadata's ``rank``, else 0. Call it from ``convert`` with the
    graph's metadata and ``graph.nodes()``.

    ``inputs``: files this run reads; an output equal to one is refused
    (``InputError``) before any work. ``staged``: write into these staged
    outputs (the caller commits them) instead of committing here; either
    way both files appear together or not at all."""
    prefix = os.fspath(prefix)
    check_prefix_outputs(inputs, prefix, EXPORT_FILES)
    if rank is None:
        value = attr_dict(metadata.attrs).get("rank")
        rank = value if isinstance(value, int) else 0
    for out in output_paths(prefix, rank):
        check_outputs(inputs, [out])
    named = [os.fspath(p) for p in inputs if p is not None]
    source = named[0] if named else prefix
    if staged is None:
        with StagedOutputs() as own:
            written = _write_one(metadata, nodes, prefix, rank, cpu, own, source=source)
            own.commit()
        return written
    return _write_one(metadata, nodes, prefix, rank, cpu, staged, source=source)


def _refuse_one_npu(metadata: GlobalMetadata, where: str, ranks_given: int) -> None:
    """ASTRA-sim's analytical backend stops on a 1-NPU network ("npus_count
    (1) should be larger than 1"), so a 1-rank trace is refused here, in
    one line, rather than written for a run that cannot start. The world is
    the trace's ``world_size``, else its largest process group, else the
    number of ranks given together."""
    world = attr_dict(metadata.attrs).get("world_size")
    if not isinstance(world, int) or isinstance(world, bool):
        world = max([ranks_given, *(len(r) for r in comm_groups(metadata, None, where).values())])
    if world < MIN_NPUS:
        raise InputError(where, f"a {world}-rank trace: ASTRA-sim's analytical backend needs "
                         f"at least {MIN_NPUS} NPUs (it stops with 'npus_count (1) should be "
                         "larger than 1'); replay it with pt2chakra simulate instead")


@dataclass(frozen=True, slots=True)
class CollectivePadding:
    """What the job changes in one rank's collectives: node id -> bytes added
    to the collective's ``comm_size`` (converter convention; negative: the
    bytes ``job.network_ends`` trims off a collective the network would end
    after its recorded end), or us added to the duration of one ASTRA-sim
    replays from its duration (a scaled-out job's wake-ups on crowded hosts:
    ``job.wakeup_padding``)."""

    size_bytes: dict[int, int]
    micros: dict[int, int]


NO_PADDING = CollectivePadding({}, {})


class RankPlacement(NamedTuple):
    """A rank's recorded step (None: untimed), its start after the earliest
    rank's, worked out once per rank, and where the job's network ends its
    collectives and how a network what-if scales their link time
    (``convert_files``)."""

    window: StepWindow | None
    origin_us: float
    network_ends: Mapping[int, float] = {}
    link_scales: Mapping[int, float] = {}
    padding: CollectivePadding = NO_PADDING
    # node id -> the group (and peer) the rank set resolved for a node its
    # trace leaves unnamed (``group_resolution.resolved_names``)
    named: Mapping[int, Named] = {}
    # every rank's process groups (the job's groups file); None: this rank's
    job_groups: Mapping[str, list[int]] | None = None
    slow_cpu: float = 1.0  # a slow rank's CPU factor (``--slow-rank RANK:cpu=F``)


def _padded(nodes: list[ChakraNode], padding: CollectivePadding) -> list[ChakraNode]:
    """The rank's collectives with the job's padding (or trim) applied."""
    if not padding.size_bytes and not padding.micros:
        return nodes
    out = []
    for n in nodes:
        extra = padding.size_bytes.get(n.id, 0)
        if extra:
            n = msgspec.structs.replace(n, attrs=[
                (k, t, v + extra if k == "comm_size" and isinstance(v, int) else v)
                for k, t, v in n.attrs])
        micros = padding.micros.get(n.id, 0)
        if micros:
            n = msgspec.structs.replace(n, duration_micros=n.duration_micros + micros)
        out.append(n)
    return out


def _named(nodes: list[ChakraNode], named: Mapping[int, Named]) -> list[ChakraNode]:
    """The nodes whose group the rank set resolved, with it written in
    (``pg_name``; a transfer's peer as a rank of the job), so that
    ASTRA-sim meets them in the communicator groups the job ran them in."""
    if not named:
        return nodes
    out = []
    for n in nodes:
        found = named.get(n.id)
        if found is not None:
            values: dict[str, int | str] = {"pg_name": found.pg}
            if found.peer is not None:
                values["comm_dst" if n.type == NodeType.COMM_SEND_NODE else "comm_src"] = \
                    found.peer
            n = msgspec.structs.replace(n, attrs=_with_values(n.attrs, values))
        out.append(n)
    return out


def _write_one(metadata: GlobalMetadata, nodes: Iterable[ChakraNode], prefix: str, rank: int,
               cpu: str, staged: StagedOutputs, placed: RankPlacement | None = None,
               ranks_given: int = 1, source: str | None = None) -> list[str]:
    """One rank's file (and the groups file); ``placed``: its window and
    origin when the caller worked them out (``convert_files``), else they
    are worked out here."""
    all_nodes = list(nodes)
    _warn_size_unknown(all_nodes, source or prefix)
    if placed is None:
        placed = RankPlacement(rank_window(metadata, all_nodes), 0.0)
    md, out_nodes = _profile_rank(metadata, all_nodes, cpu, placed.origin_us, placed.window,
                                  placed.network_ends, placed.link_scales)
    out_nodes = _padded(host_stretched(out_nodes, metadata, placed.slow_cpu), placed.padding)
    out_nodes = _named(out_nodes, placed.named)
    _refuse_one_npu(md, source or prefix, ranks_given)
    world = _world_of(md)
    all_groups = dict(placed.job_groups) if placed.job_groups is not None \
        else comm_groups(md, world, source or prefix)
    out_nodes = _astra_sizes(out_nodes, all_groups, world or ranks_given)
    out_nodes = p2p_tags(out_nodes, rank)
    if not out_nodes:
        raise InputError(prefix, "nothing left for ASTRA-sim: every node is a CPU or METADATA "
                         "node (host-only trace without collectives?); try cpu='keep'")
    path, gpath = output_paths(prefix, rank)
    tmp = staged.stage(path)
    try:
        write_et(tmp, md, out_nodes)
    except InputError as exc:
        if exc.path != tmp:
            raise
        raise InputError(path, exc.problem) from exc  # name the target, not the temp file
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from exc
    written = [path]
    groups = groups_file(all_groups, source or prefix)
    if groups:
        try:
            write_atomic(staged.stage(gpath), orjson.dumps(groups, option=orjson.OPT_INDENT_2))
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, gpath) from exc
        written.append(gpath)
    return written


# ASTRA-sim's tags of a workload's own sends and receives lie below this
# (Sys::FrontEndSendRecvType: NATIVE [0, 500000000); it takes the rest).
NATIVE_TAG_LIMIT = 500_000_000
COMM_TAG_ATTR = "comm_tag"


def p2p_tags(nodes: list[ChakraNode], rank: int) -> list[ChakraNode]:
    """Every send and receive with a ``comm_tag`` (ASTRA-sim stops on one
    without): its transfer's position among the transfers between its two
    ranks in its process group (``rendezvous.rendezvous_keys``), so that
    both sides of a transfer carry one tag and ASTRA-sim, which meets a
    send with the receive of its source, destination, tag and size, meets
    the same pairs as our replay. A tag already in the trace is kept."""
    ops = [comm_op(n, attr_dict(n.attrs)) for n in nodes
           if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)]
    if not ops:
        return nodes
    keys = rendezvous_keys(ops, rank)
    out = []
    for node in nodes:
        key = keys.get(node.id)
        if key is not None and not any(a[0] == COMM_TAG_ATTR for a in node.attrs):
            node = msgspec.structs.replace(node, attrs=[
                *node.attrs, (COMM_TAG_ATTR, "int32_val", key.position % NATIVE_TAG_LIMIT)])
        out.append(node)
    return out


def _with_values(attrs: Sequence[Attr], values: Mapping[str, int | str]) -> list[Attr]:
    """``attrs`` with these attributes' values replaced (added when absent)."""
    out: list[Attr] = [(k, t, values[k] if k in values else v) for k, t, v in attrs]
    have = {k for k, _t, _v in attrs}
    out += [(k, "string_val" if isinstance(v, str) else "int64_val", v)
            for k, v in values.items() if k not in have]
    return out


def _warn_size_unknown(nodes: list[ChakraNode], source: str) -> None:
    """Say what the export does with communication nodes whose size the trace
    does not hold (``comm_size_unknown``): ASTRA-sim reads only ``comm_size``."""
    unknown = [n for n in nodes if n.type in COMM_NODE_TYPES and size_unknown(attr_dict(n.attrs))]
    if unknown:
        log.warning("%s: %d communication nodes without a size in the trace (comm_size_unknown) "
                    "are written with comm_size 0: ASTRA-sim times them by latency alone, not "
                    "by their recorded %.0f us", source, len(unknown),
                    sum(n.duration_micros for n in unknown))


def _astra_sizes(nodes: list[ChakraNode], groups: dict[str, list[int]],
                 machine: int) -> list[ChakraNode]:
    """Each collective's ``comm_size`` as ASTRA-sim reads it
    (``collective.astra_comm_size``: an all-gather's per-rank input), its
    group's size from the process groups, else the whole machine's."""
    out = []
    for node in nodes:
        if node.type == NodeType.COMM_COLL_NODE:
            a = attr_dict(node.attrs)
            size, ctype = a.get("comm_size"), a.get("comm_type")
            if isinstance(size, int) and isinstance(ctype, int):
                members = groups.get(str(a.get("pg_name", WHOLE_MACHINE_GROUP)))
                run, size_of_run = astra_collective(ctype, size)
                new = astra_comm_size(run, size_of_run, len(members) if members else machine)
                if new != size or run != ctype:
                    node = msgspec.structs.replace(node, attrs=_with_values(
                        node.attrs, {"comm_size": new, "comm_type": run}))
        out.append(node)
    return out


def convert_files(inputs: Inputs | RankSet, prefix: str | os.PathLike[str],
                  cpu: str = DEFAULT_CPU_MODE, force: bool = False,
                  staged: StagedOutputs | None = None,
                  network_ends: Sequence[Mapping[int, float]] = (),
                  link_scales: Sequence[Mapping[int, float]] = (),
                  padding: Sequence[CollectivePadding] = (),
                  slow_cpu: Mapping[int, float] | None = None) -> list[str]:
    """Rewrite per-rank ``.et`` files for ASTRA-sim (each rank by
    ``chakra.ranks``: metadata, else name).

    All or nothing: every input's metadata is read and the set checked
    (``open_rank_set``: one job, no output overwriting an input) before
    anything is written, and the outputs are staged and moved into place only
    when every rank converted; on any error no output of this run is left
    behind. Inputs ``validate`` calls unsound are refused (``InputError``)
    unless ``force``. ``staged``: write into these staged outputs (the caller
    commits them with its own files) instead of committing here.
    ``network_ends``: per rank (in rank order), where the job's network ends
    its collectives on the recorded clock (``job.network_ends``; the serial
    chain's waits start there); none: at their recorded ends. ``link_scales``:
    per rank, how the job's network scales each collective against the
    fitted one (``job.link_scales``; the recorded link time the fit leaves
    unexplained scales with it); none: 1. ``padding``: per rank, what the
    job adds to (or trims off) its collectives (``CollectivePadding``);
    none: nothing. ``slow_cpu``: rank -> its CPU time's factor (a slow
    rank); none: 1."""
    prefix = os.fspath(prefix)
    given = inputs.paths if isinstance(inputs, RankSet) else [os.fspath(p) for p in inputs]
    check_prefix_outputs(given, prefix, EXPORT_FILES)
    ranks = open_rank_set(inputs, force)
    paths = ranks.paths
    windows: list[StepWindow | None] = []
    checker = SetChecker()
    # Every rank's groups: where nodes were given groups their own rank's
    # trace does not list alone (a 2-D mesh), the groups file must hold the
    # groups of all ranks, not the last one's.
    job_groups: dict[str, list[int]] = {}
    for path, rank in zip(paths, ranks.ranks):
        metadata, lazy = read_et(path)
        nodes = list(lazy)
        for name, members in comm_groups(metadata, _world_of(metadata), path).items():
            job_groups.setdefault(name, members)
        refuse_unsound(checker.add(path, rank, metadata, nodes), force)
        windows.append(rank_window(metadata, nodes))
        for out in output_paths(prefix, rank):
            check_outputs(paths, [out])
    # Collectives that differ or are crossed between ranks: ASTRA-sim would
    # wait forever on the job (refused unless ``force``, as validate's errors).
    refuse_unsound(checker.finish(), force)
    named = checker.resolved_names()
    placements = [RankPlacement(w, o, network_ends[k] if k < len(network_ends) else {},
                                link_scales[k] if k < len(link_scales) else {},
                                padding[k] if k < len(padding) else NO_PADDING,
                                named[k], job_groups, (slow_cpu or {}).get(rank, 1.0))
                  for k, (rank, w, o) in enumerate(zip(ranks.ranks, windows,
                                                       _origins(windows)))]
    if staged is not None:
        return _write_ranks(paths, ranks.ranks, placements, prefix, cpu, staged)
    with StagedOutputs() as own:
        written = _write_ranks(paths, ranks.ranks, placements, prefix, cpu, own)
        own.commit()
    return written


def _world_of(md: GlobalMetadata) -> int | None:
    """The metadata's ``world_size`` (None: not an int)."""
    world = attr_dict(md.attrs).get("world_size")
    return world if isinstance(world, int) and not isinstance(world, bool) else None


def _write_ranks(paths: list[str], ranks: list[int], placements: list[RankPlacement],
                 prefix: str, cpu: str, staged: StagedOutputs) -> list[str]:
    written: list[str] = []
    for path, rank, placed in zip(paths, ranks, placements):
        metadata, lazy = read_et(path)
        for p in _write_one(metadata, lazy, prefix, rank, cpu, staged, placed,
                            ranks_given=len(paths), source=path):
            if p not in written:
                written.append(p)
    return written


def _origins(windows: list[StepWindow | None]) -> list[float]:
    """Each rank's start after the earliest one (``rank_origins``, as the
    simulator places them), 0 for untimed ranks; all 0 unless every rank is
    timed, since an untimed one has no place on the clock."""
    if any(w is None for w in windows):
        return [0.0] * len(windows)
    origins, _align = rank_origins([w for w in windows if w is not None], "auto")
    return origins


def convert_json(json_path: str | os.PathLike[str], prefix: str | os.PathLike[str],
                 rank: int | None = None, cpu: str = DEFAULT_CPU_MODE) -> list[str]:
    """A ``jsonize`` document -> ``<prefix>.<rank>.et`` for ASTRA-sim (rank:
    ``rank``, else the metadata's, else 0); returns the paths written."""
    from pt2chakra.chakra.json_form import read_json

    check_prefix_outputs([json_path], prefix, EXPORT_FILES)
    metadata, nodes = read_json(json_path)
    return write_astra_sim(metadata, nodes, prefix, rank=rank, cpu=cpu, inputs=[json_path])

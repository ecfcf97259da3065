"""The checks behind ``pt2chakra validate``, as a library: is an ``.et`` (or a
set of per-rank files) sound for replay? The exporter and the simulator refuse
unsound input with them (``refuse_unsound``), so they live here, below both;
``tools/validate.py`` only names the consumers and formats the command's
output. A consumer's own rules (``ConsumerRules``, e.g. ``astra.rules``) plug in
without this module knowing the consumer.

Errors make a trace unsound (exit 1); warnings name known weaknesses that a
replay tolerates but gets wrong (e.g. the reference converter's GPU ops with
no stream order, collectives typed as compute).
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain, compress
from operator import attrgetter
from typing import Any, NamedTuple, Protocol

import msgspec

from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES, UNRECORDED_KIND, EdgeKind, dep_kinds_of
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.process_groups import (
    PROCESS_GROUPS_PROBLEM,
    ProcessGroupRecord,
    read_process_groups,
)
from pt2chakra.chakra.ranks import RANK_SET_PROBLEM, ranks_in_memory, survey
from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.names import looks_collective
from pt2chakra.pytorch.transfers import own_transfers
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    COMM_SIZE_UNKNOWN_ATTR,
    is_gpu,
    is_int,
    is_serial_profile,
    scaled_world,
    size_unknown,
)
from pt2chakra.rules.cycles import describe_cycle, find_cycle_in, ids_ascend
from pt2chakra.rules.group_resolution import (
    Named,
    RankOps,
    ResolvedSet,
    rank_set_keys,
    resolve_set,
)
from pt2chakra.rules.rendezvous import (
    SEQ,
    CommOp,
    RankComms,
    RendezvousKey,
    comm_op,
    comm_order,
    describe_deadlock,
    find_deadlock,
    is_collective,
)

log = logging.getLogger(__name__)

# Attribute -> the one oneof member consumers (ASTRA-sim's feeder) read.
EXPECTED_MEMBERS = {
    "is_cpu_op": "bool_val",
    "comm_type": "int64_val",
    "comm_size": "int64_val",
    "comm_src": "int32_val",
    "comm_dst": "int32_val",
    "comm_tag": "int32_val",
    "comm_priority": "int32_val",
    "tensor_size": "uint64_val",
    "num_ops": "int64_val",
    "pg_name": "string_val",
}
_node_type = attrgetter("type")  # read by a C-level map: a million nodes
MAX_PER_CHECK = 20  # problems of one kind listed per file before a summary line


class Problem(msgspec.Struct, omit_defaults=True):
    file: str
    severity: str  # "error" | "warning"
    check: str
    message: str
    hint: str = ""
    node: int | None = None

    def line(self) -> str:
        where = f" node {self.node}:" if self.node is not None else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{self.file}: {self.severity}: [{self.check}]{where} {self.message}{hint}"


class Finding(NamedTuple):
    """One problem a ``ConsumerRules`` finds; the checks add the file's name."""

    severity: str  # "error" | "warning"
    check: str
    message: str
    hint: str = ""
    node: int | None = None


class ConsumerRules(Protocol):
    """What a consumer (``validate --consumer``) adds to the checks: its own
    rules per node, per file name, and over the set of files."""

    name: str

    def node_findings(self, node: ChakraNode, attrs: dict[str, Any]) -> Iterable[Finding]: ...

    def file_findings(self, path: str) -> Iterable[Finding]: ...

    def set_findings(self, files: Sequence[str], ranks: Sequence[int]) -> Iterable[Finding]: ...


ProfileRules = ConsumerRules  # the old name, still importable


class ValidationReport(msgspec.Struct):
    files: list[str]
    consumer: str | None
    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def sound(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        # "profile": the consumer's old key, kept for readers of older output.
        return {"files": self.files, "consumer": self.consumer, "profile": self.consumer,
                "sound": self.sound,
                "errors": len(self.errors), "warnings": len(self.warnings),
                "problems": [msgspec.to_builtins(p) for p in self.problems]}

    def lines(self) -> list[str]:
        out = [p.line() for p in self.problems]
        verdict = "sound" if self.sound else "NOT sound"
        out.append(f"{len(self.files)} file(s) {verdict}: {len(self.errors)} error(s), "
                   f"{len(self.warnings)} warning(s)")
        return out


class _Collector:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []
        self._counts: dict[tuple[str, str], int] = defaultdict(int)
        self.host_collectives: list[ChakraNode] = []  # host comm ops typed COMP_NODE
        self.size_unknown: list[ChakraNode] = []  # flagged comm_size_unknown

    def add(self, severity: str, check: str, message: str, hint: str = "",
            node: int | None = None) -> None:
        self._counts[severity, check] += 1
        if self._counts[severity, check] <= MAX_PER_CHECK:
            self.problems.append(Problem(self.path, severity, check, message, hint, node))

    def finish(self) -> list[Problem]:
        for (severity, check), n in self._counts.items():
            if n > MAX_PER_CHECK:
                self.problems.append(Problem(self.path, severity, check,
                                             f"{n - MAX_PER_CHECK} more like the above"))
        return self.problems


class _Comm(msgspec.Struct):
    """A communication node: how ranks match it, and what must agree."""

    op: CommOp
    ctype: int | None
    size: int | None


class _FileFacts(msgspec.Struct):
    path: str
    rank: int
    comms: list[_Comm]
    process_groups: list[ProcessGroupRecord]
    # (earlier, later) communication node ids: the later cannot start
    # before the earlier completed (rendezvous.comm_order). None when the
    # file's own graph has a cycle or duplicate ids (reported by itself).
    comm_order: list[tuple[int, int]] | None = None


class _Scan(msgspec.Struct):
    """What one pass over a file's nodes gathers for the file-wide checks."""

    ids: list[int] = []
    seen: set[int] = set()
    deps: dict[int, list[tuple[int, str]]] = {}
    ctrl: list[tuple[int, int]] = []
    names: dict[int, str] = {}
    streams: dict[tuple[Any, Any], list[tuple[int, int, list[int]]]] = {}
    comms: list[_Comm] = []
    # The launch edges into the file's GPU communication nodes (their
    # launching ops), and whether one of them has deps of no recorded kind
    # (another tool's .et: who launched it is unknown).
    comm_launchers: list[int] = []
    launchers_unknown: bool = False


class _Caller(NamedTuple):
    """A node's caller (its ``ctrl_deps`` parent), as ``transfers`` walks them."""

    parent: int


LAUNCH_KIND = EDGE_KIND_NAMES[EdgeKind.LAUNCH]


def _check_attrs(node: ChakraNode, c: _Collector) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for name, member, value in node.attrs:
        expected = EXPECTED_MEMBERS.get(name)
        if expected is not None and member != expected:
            c.add("error", "attr-type", f"attribute {name!r} is {member or 'unset'}, "
                  f"consumers read {expected} (any other member reads as 0)",
                  f"write {name} as {expected}", node.id)
            continue
        attrs[name] = value
    return attrs


def _check_node(node: ChakraNode, attrs: dict[str, Any], c: _Collector,
                rules: ConsumerRules | None) -> None:
    if node.type == NodeType.INVALID_NODE:
        c.add("error", "node-type", "node type is INVALID_NODE",
              "give every node a real type (COMP_NODE, COMM_COLL_NODE, ...)", node.id)
    if node.type in COMM_NODE_TYPES:
        if node.type == NodeType.COMM_COLL_NODE:
            if "comm_type" not in attrs:
                c.add("error", "comm-attrs", f"{node.name!r}: collective without comm_type",
                      "add comm_type (int64_val, a CollectiveCommType)", node.id)
            else:
                try:
                    CollectiveType(attrs["comm_type"])
                except ValueError:
                    c.add("error", "comm-attrs", f"comm_type {attrs['comm_type']} is not a "
                          "CollectiveCommType", "use a value 0..9", node.id)
        size = attrs.get("comm_size")
        if size is None and attrs.get(COMM_SIZE_UNKNOWN_ATTR) is True:
            c.add("warning", "comm-size-unknown", f"{node.name!r}: its trace does not know its "
                  "size", "replayed as a 0-byte transfer", node.id)
        elif size is None:
            c.add("error", COMM_SIZE_CHECK, f"{node.name!r}: communication node without "
                  "comm_size", f"add comm_size (int64_val, bytes), or {COMM_SIZE_UNKNOWN_ATTR}"
                  " (bool_val true) when the size is not known", node.id)
        elif size < 0:
            c.add("error", "comm-attrs", f"comm_size {size} is negative", "", node.id)
        elif size == 0 and size_unknown(attrs):
            c.size_unknown.append(node)  # one warning per file (_warn_size_unknown)
        elif size == 0 and attrs.get("comm_type") != CollectiveType.BARRIER:
            c.add("warning", "comm-size-zero", f"{node.name!r}: comm_size is 0",
                  ZERO_SIZE_HINT, node.id)
    elif looks_collective(node.name) and node.type == NodeType.COMP_NODE:
        if is_gpu(attrs):
            c.add("warning", "collective-as-compute",
                  f"GPU op {node.name!r} is a collective but typed COMP_NODE",
                  "it replays as compute, not communication", node.id)
        else:  # fine when its GPU kernel is the comm node; decided per file
            c.host_collectives.append(node)
    if rules is not None:
        for f in rules.node_findings(node, attrs):
            c.add(f.severity, f.check, f.message, f.hint, f.node)


def _check_file(path: str, rank: int, rules: ConsumerRules | None, want_order: bool = False,
                ) -> tuple[list[Problem], _FileFacts]:
    metadata, nodes = read_et(path)
    return _check_loaded(path, rank, metadata, nodes, rules, want_order)


# What each consumer does with a communication node of 0 bytes, or of a size
# the trace does not hold (the replay's measured time stands either way).
ZERO_SIZE_HINT = ("simulate keeps its measured time; a network model (--bandwidth/--latency, "
                  "--calibrate) and ASTRA-sim time it as 0 bytes: latency only")
SIZE_UNKNOWN_HINT = ("simulate keeps their measured time (the size of a matched collective "
                     "comes from another given rank that records it); the network what-ifs keep "
                     "the others as recorded and say so; the ASTRA-sim export writes them as "
                     "0 bytes (latency only) and warns; record with record_shapes=True (or "
                     "torch >= 2.2's collective args) to keep the sizes")


def _warn_size_unknown(c: _Collector) -> None:
    """One warning for all the file's nodes flagged comm_size_unknown, with
    their count (not one per node, cut at MAX_PER_CHECK)."""
    if not c.size_unknown:
        return
    first = c.size_unknown[0]
    n = len(c.size_unknown)
    c.add("warning", "comm-size-unknown",
          f"{n} communication node{'s' if n != 1 else ''} without a size in the trace "
          f"(comm_size 0, flagged comm_size_unknown; the first: {first.name!r})",
          SIZE_UNKNOWN_HINT, first.id)


def _check_loaded(path: str, rank: int, metadata: GlobalMetadata, nodes: Iterable[ChakraNode],
                  rules: ConsumerRules | None, want_order: bool = False,
                  ) -> tuple[list[Problem], _FileFacts]:
    c = _Collector(path)
    if not metadata.version:
        c.add("warning", "metadata", "GlobalMetadata has no version",
              "the reference converter writes none; readers cannot tell the schema")
    scan = _scan_nodes(nodes, c, rules)
    _warn_host_collectives(c, scan)
    _warn_size_unknown(c)
    _check_dangling(scan, c)
    cycle = _check_cycles(scan, c)
    if not is_serial_profile(attr_dict(metadata.attrs)):  # there the chain orders streams
        _check_stream_order(scan, c)
    if rules is not None:
        for f in rules.file_findings(path):
            c.add(f.severity, f.check, f.message, f.hint, f.node)
    order = None
    if want_order and not cycle and len(scan.seen) == len(scan.ids) and scan.comms:
        order = comm_order(scan.ids, scan.deps, [comm.op for comm in scan.comms])
    pgs = _process_groups(metadata, c)
    _metadata_numbers(metadata, c)
    facts = _FileFacts(path, rank, scan.comms, pgs, order)
    return c.finish(), facts


def _scan_nodes(nodes: Iterable[ChakraNode], c: _Collector, rules: ConsumerRules | None,
                ) -> _Scan:
    """Per-node checks, and the facts the file-wide checks need."""
    scan = _Scan(streams=defaultdict(list))
    for node in nodes:
        if node.id in scan.seen:
            c.add("error", "duplicate-id", f"id {node.id} is used by more than one node "
                  f"(this one is {node.name!r})", "ids must be unique within a file", node.id)
        scan.seen.add(node.id)
        scan.ids.append(node.id)
        scan.names[node.id] = node.name
        attrs = _check_attrs(node, c)
        _check_node(node, attrs, c, rules)
        if node.data_deps:
            scan.deps[node.id] = list(zip(node.data_deps, dep_kinds_of(node.data_deps, attrs)))
        scan.ctrl += [(node.id, d) for d in node.ctrl_deps]
        if is_gpu(attrs) and is_int(attrs.get("stream")) and node.start_time_micros:
            scan.streams[(attrs.get("device"), attrs["stream"])].append(
                (node.start_time_micros, node.id, node.data_deps))
        if node.type in COMM_NODE_TYPES:
            scan.comms.append(_comm(node, attrs, c))
            if is_gpu(attrs):
                kinds = scan.deps.get(node.id, [])
                scan.comm_launchers += [d for d, kind in kinds if kind == LAUNCH_KIND]
                scan.launchers_unknown |= any(kind == UNRECORDED_KIND for _d, kind in kinds)
    return scan


def _comm(node: ChakraNode, attrs: dict[str, Any], c: _Collector) -> _Comm:
    seq = attrs.get("comm_seq")
    if seq is not None and not is_int(seq):
        c.add("error", "comm-attrs", f"comm_seq {seq!r} is not an integer",
              "write comm_seq as int64_val: ranks match collectives by it", node.id)
    size = attrs.get("comm_size")
    # a size the trace does not hold matches any (another rank may record it)
    return _Comm(comm_op(node, attrs), attrs.get("comm_type"),
                 size if isinstance(size, int) and not size_unknown(attrs) else None)


def _warn_host_collectives(c: _Collector, scan: _Scan) -> None:
    """Host backend ops typed COMP_NODE that are their collective's transfer
    by the converter's one rule (``pytorch.transfers.own_transfers``): no GPU
    communication node was launched by the op, under it or above it. In a
    file without communication nodes every one is; in a file whose launch
    edges are unknown (another tool's), none is told apart, so only the
    first case is reported there."""
    if not c.host_collectives:
        return
    if not scan.comms:
        for node in c.host_collectives:
            c.add("warning", "collective-as-compute",
                  f"{node.name!r} is a collective but typed COMP_NODE and the file has no "
                  "communication node", "it replays as compute, not communication (the "
                  "reference converter does this on host-only traces)", node.id)
        return
    if scan.launchers_unknown:
        return
    callers = {node: _Caller(parent) for node, parent in scan.ctrl}
    lone = own_transfers([n.id for n in c.host_collectives], scan.comm_launchers, callers,
                         host_only=False)
    for node in c.host_collectives:
        if node.id in lone:
            c.add("warning", "collective-as-compute",
                  f"{node.name!r} is a collective but typed COMP_NODE and no communication "
                  "node of the file was launched under it", "it replays as compute, not "
                  "communication, and its peers may wait for it in vain", node.id)


def _check_dangling(scan: _Scan, c: _Collector) -> None:
    for dst, srcs in scan.deps.items():
        for src, _kind in srcs:
            if src not in scan.seen:
                c.add("error", "dangling-dep", f"data dependency on {src}, which is not a node "
                      "of this file", "the simulator follows data_deps and would wait forever",
                      dst)
    for dst, src in scan.ctrl:
        if src not in scan.seen:
            c.add("warning", "dangling-ctrl-dep", f"ctrl dependency on {src}, which is not a "
                  "node of this file", "ASTRA-sim ignores ctrl_deps; other readers may not", dst)


def _check_cycles(scan: _Scan, c: _Collector) -> bool:
    """Cycles over data_deps (an error) and ctrl_deps (a warning); True when
    the data deps have one."""
    cycle = find_cycle_in(scan.ids, scan.deps)
    if cycle:
        c.add("error", "cycle", "dependency cycle " + describe_cycle(cycle, scan.names),
              "a replay deadlocks; convert with --break-cycles", cycle[0].src)
    ctrl_map: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for dst, src in scan.ctrl:
        ctrl_map[dst].append((src, "ctrl"))
    ctrl_cycle = find_cycle_in(scan.ids, ctrl_map) if ctrl_map else []
    if ctrl_cycle:
        c.add("warning", "ctrl-cycle", "ctrl_deps (parent) cycle "
              + describe_cycle(ctrl_cycle, scan.names),
              "ctrl_deps should form a tree; readers that walk parents loop or stop",
              ctrl_cycle[0].src)
    return bool(cycle)


def _check_stream_order(scan: _Scan, c: _Collector) -> None:
    for (device, stream), ops in scan.streams.items():
        ops.sort()
        unordered = [cur[1] for prev, cur in zip(ops, ops[1:]) if prev[1] not in cur[2]]
        if unordered:
            c.add("warning", "stream-order",
                  f"device {device} stream {stream}: {len(unordered)} of {len(ops)} GPU ops "
                  f"do not depend on their stream predecessor (first: node {unordered[0]})",
                  "the replay may run them concurrently or at time 0 (reference converter)",
                  unordered[0])


def _process_groups(metadata: GlobalMetadata, c: _Collector) -> list[ProcessGroupRecord]:
    """The metadata's process groups (``chakra.process_groups``, the parser
    every command shares); malformed ones are an error, as the ASTRA-sim
    export and the replay refuse them."""
    try:
        return read_process_groups(metadata, c.path)
    except InputError as exc:
        c.add("error", PROCESS_GROUPS_CHECK, exc.problem,
              "each record: pg_name, ranks as integers (empty: every rank), group_size")
    return []


def _metadata_numbers(metadata: GlobalMetadata, c: _Collector) -> None:
    """The numbers a replay reads from the metadata (a scaled-out file's CPU
    stretch and hop delay, ``conventions.scaled_world``) finite and within
    their ranges: an error, as the replay and the ASTRA-sim export refuse
    them."""
    problem = _metadata_number_problem(metadata, c.path)
    if problem is not None:
        c.add("error", METADATA_NUMBER_CHECK, problem,
              "pt2chakra extrapolate writes them; write them again from the recording")


def _metadata_number_problem(metadata: GlobalMetadata, path: str) -> str | None:
    try:
        scaled_world(attr_dict(metadata.attrs), path)
    except InputError as exc:
        return exc.problem
    return None


def _comm_facts(path: str, rank: int, metadata: GlobalMetadata,
                nodes: Sequence[ChakraNode]) -> _FileFacts:
    """What the cross-rank checks read of one file in memory: its rank and
    its communication nodes, read as ``validate`` reads them (its per-file
    problems are left to the per-file checks)."""
    c = _Collector(path)
    comm_types = frozenset(COMM_NODE_TYPES)
    comms = [_comm(node, _check_attrs(node, c), c)
             for node in compress(nodes, map(comm_types.__contains__, map(_node_type, nodes)))]
    return _FileFacts(path, rank, comms, _process_groups(metadata, c))


def cross_rank_problems(loaded: Sequence[tuple[str, GlobalMetadata, Sequence[ChakraNode]]],
                        ranks: Sequence[int] | None = None) -> list[Problem]:
    """``validate``'s checks across ranks, on files already in memory (path,
    metadata, nodes; several = one per rank of one run): collectives of each
    process group the same in number and type (and size), every transfer
    received. A command that replays the set (``simulate``, ``report``)
    refuses what these call an error, as ``validate`` does. The order check
    (ranks waiting on each other) is left to the caller's replay, which finds
    deadlocks itself with the same rule (``rendezvous.find_deadlock``).
    ``ranks``: each file's rank (its ``RankSet``'s); by ``ranks.rank_of``
    when not given."""
    if len(loaded) < 2:
        return []
    if ranks is None:
        ranks = ranks_in_memory([(path, metadata) for path, metadata, _nodes in loaded])
    facts = [_comm_facts(path, rank, metadata, nodes)
             for rank, (path, metadata, nodes) in zip(ranks, loaded)]
    return _across_ranks(facts)


def _across_ranks(facts: Sequence[_FileFacts]) -> list[Problem]:
    """``cross_rank_problems`` of the files' communication facts."""
    if len(facts) < 2:
        return []
    keys = _keys_of(facts)
    return _check_collectives(facts, keys) + _check_transfers(facts, keys)


def refuse_unsound_files(paths: Sequence[str], ranks: Sequence[int], force: bool) -> None:
    """What a replay refuses of a set of rank files (``simulate``: each file's
    errors that stop a replay, ``check_before_replay``; then the collectives
    that differ across the ranks, ``cross_rank_problems``: ranks of different
    recordings, or of a broken one), for a command that builds something
    else from them (``extrapolate``, ``simulate``/``astra-sim --world-size``)
    before it writes or replays anything. The files are read one at a time;
    only each one's communication nodes are kept. ``ranks``: each file's
    (its ``RankSet``'s). ``InputError`` naming the first error, unless
    ``force`` (then one warning)."""
    problems: list[Problem] = []
    facts: list[_FileFacts] = []
    for path, rank in zip(paths, ranks):
        metadata, node_iter = read_et(path)
        nodes = list(node_iter)
        problems += [p for p in check_before_replay(path, rank, metadata, nodes)
                     if blocks_replay(p)]
        facts.append(_comm_facts(path, rank, metadata, nodes))
        del nodes
    refuse_unsound(problems + _across_ranks(facts), force)


def collective_mismatch(paths: Sequence[str]) -> str | None:
    """Where the ranks of one job (one ``.et`` per rank) disagree about their
    collectives: one line naming the process group and the first collective
    that differs (missing on a rank, or of another type or size), or None
    when every group's collectives match. Only communication nodes are kept
    while reading. ``convert --ranks`` refuses a job this answers for: its
    replay, and ASTRA-sim's, would wait forever for the odd collective."""
    comm_types = frozenset(COMM_NODE_TYPES)
    facts = []
    rank_set = survey(paths)  # each file's rank; whether the set is one job is not asked here
    for path, rank in zip(rank_set.paths, rank_set.ranks):
        metadata, nodes = read_et(path)
        facts.append(_comm_facts(path, rank, metadata,
                                 [n for n in nodes if n.type in comm_types]))
    per_pg: dict[str, dict[int, list[tuple[RendezvousKey, _Comm]]]] = defaultdict(dict)
    for k, (f, keys) in enumerate(zip(facts, _keys_of(facts))):
        for comm in f.comms:
            key = keys[comm.op.node]
            if is_collective(key):
                per_pg[key.pg].setdefault(k, []).append((key, comm))
    for pg, ranks in sorted(per_pg.items()):
        for k, f in enumerate(facts):
            if _member(f, pg):
                ranks.setdefault(k, [])
        line = _first_difference(pg, [(facts[k], sorted(cols, key=_rendezvous_order))
                                      for k, cols in sorted(ranks.items())])
        if line is not None:
            return line
    return None


def _member(f: _FileFacts, pg: str) -> bool:
    """Does the file's own process-group record put its rank in group ``pg``
    (a group that lists no ranks holds every rank, as the default one)? A
    file that records no groups is taken to be in every one of its job.
    ``validate`` and ``convert --ranks`` both expect a member of a group to
    reach its collectives."""
    if not f.process_groups:
        return True
    for group in f.process_groups:
        if group.name == pg:
            return not group.ranks or f.rank in group.ranks
    return False


def _rendezvous_order(item: tuple[RendezvousKey, _Comm]) -> tuple[str, int]:
    return item[0].kind, item[0].position


def _first_difference(pg: str, ranks: list[tuple[_FileFacts, list[tuple[RendezvousKey, _Comm]]]],
                      ) -> str | None:
    """The first collective of group ``pg`` on which a rank differs from the
    first rank (by rendezvous order: comm_seq, else recorded order)."""
    group = f"process group {pg!r}" if pg else "collectives without pg_name"
    ref, ref_cols = ranks[0]
    for f, cols in ranks[1:]:
        for i in range(max(len(cols), len(ref_cols))):
            a = ref_cols[i] if i < len(ref_cols) else None
            b = cols[i] if i < len(cols) else None
            if a is not None and b is not None and a[0] == b[0] and a[1].ctype == b[1].ctype \
                    and (a[1].size == b[1].size or a[1].ctype == CollectiveType.ALL_TO_ALL):
                continue
            return (f"ranks disagree about {group}: its collective #{i} is "
                    f"{_describe_comm(a)} on {_rank_at(ref)} but {_describe_comm(b)} on "
                    f"{_rank_at(f)}")
    return None


def _describe_comm(item: tuple[RendezvousKey, _Comm] | None) -> str:
    if item is None:
        return "absent"
    key, comm = item
    size = f" {comm.size} B" if comm.size is not None else ""
    seq = f"seq {key.position}, " if key.kind == SEQ else ""
    return f"{_ctype(comm.ctype)}{size} ({seq}node {comm.op.node})"


def _keys_of(facts: Sequence[_FileFacts]) -> list[dict[int, RendezvousKey]]:
    """Per file: node id -> rendezvous key (the shared matching rule, unnamed
    groups resolved across the files)."""
    return rank_set_keys(_rank_ops(facts))


def _rank_ops(facts: Sequence[_FileFacts]) -> list[RankOps]:
    """The files' communication as the matching rule reads a rank set."""
    return [RankOps(f.rank, f.process_groups, [comm.op for comm in f.comms]) for f in facts]


def _check_alignment(facts: Sequence[_FileFacts],
                     keys: Sequence[dict[int, RendezvousKey]] | None = None) -> list[Problem]:
    """Across ranks: communication matched by the simulator's rule
    (rendezvous.rendezvous_keys); each process group's collectives of the
    same types and (except all-to-all, whose splits may differ) sizes; every
    transfer received; and no two ranks reaching matched nodes in orders
    that wait for each other. ``keys``: the set's, when already resolved."""
    keys = _keys_of(facts) if keys is None else keys
    problems = _check_collectives(facts, keys)
    problems += _check_transfers(facts, keys)
    problems += _check_rendezvous_order(facts, keys)
    return problems


def _check_collectives(facts: Sequence[_FileFacts],
                       keys: Sequence[dict[int, RendezvousKey]]) -> list[Problem]:
    problems: list[Problem] = []
    per_pg: dict[str, dict[int, list[tuple[RendezvousKey, _Comm]]]] = defaultdict(dict)
    for k, f in enumerate(facts):
        groups: dict[str, list[tuple[RendezvousKey, _Comm]]] = defaultdict(list)
        for comm in sorted(f.comms, key=lambda x: (x.op.start, x.op.node)):
            key = keys[k][comm.op.node]
            if is_collective(key):
                groups[key.pg].append((key, comm))
        for pg, cols in groups.items():
            per_pg[pg][k] = cols
    for pg, ranks in sorted(per_pg.items()):
        problems += _check_group(pg, [facts[k] for k in ranks], list(ranks.values()),
                                 [f for k, f in enumerate(facts) if k not in ranks])
    return problems


def _check_group(pg: str, members: list[_FileFacts],
                 cols_of: list[list[tuple[RendezvousKey, _Comm]]],
                 missing: list[_FileFacts]) -> list[Problem]:
    """One process group's collectives, every member against the first."""
    problems: list[Problem] = []
    label = f"collectives of process group {pg!r}" if pg else "collectives without pg_name"
    for f in missing:
        if not pg or _member(f, pg):  # a rank of the group that never reached it
            problems.append(Problem(f.path, "error", "alignment",
                                    f"rank {f.rank} has none of the {len(cols_of[0])} {label} "
                                    f"that {_rank_at(members[0])} runs",
                                    "a collective waits for every rank of its group"))
    keyed: list[dict[RendezvousKey, _Comm]] = []
    for f, cols in zip(members, cols_of):
        mine: dict[RendezvousKey, _Comm] = {}
        for key, comm in cols:
            if key in mine:
                problems.append(Problem(
                    f.path, "error", "alignment",
                    f"{key.describe()} appears twice here (nodes {mine[key].op.node} and "
                    f"{comm.op.node})", "each collective of a process group needs its own "
                    "comm_seq; the simulator waits for a third arrival", comm.op.node))
                continue
            mine[key] = comm
        keyed.append(mine)
    ref, ref_keyed = members[0], keyed[0]
    for f, cols, mine in zip(members[1:], cols_of[1:], keyed[1:]):
        problems += _compare_to_reference(f, ref, len(cols), len(cols_of[0]), mine, ref_keyed,
                                          label)
    return problems


def _rank_at(f: _FileFacts, node: int | None = None) -> str:
    """Another rank, named with its file (the problem's own file is the line's
    first word, the other one would otherwise be a bare rank number)."""
    return f"rank {f.rank} ({f.path}" + ("" if node is None else f", node {node}") + ")"


def _compare_to_reference(f: _FileFacts, ref: _FileFacts, count: int, ref_count: int,
                          mine: dict[RendezvousKey, _Comm], ref_keyed: dict[RendezvousKey, _Comm],
                          label: str) -> list[Problem]:
    problems: list[Problem] = []
    if count != ref_count:
        problems.append(Problem(
            f.path, "error", "alignment",
            f"this file runs {count} {label}, {_rank_at(ref)} runs {ref_count}",
            "ranks would hang waiting for each other"))
    else:
        lone = [k for k in ref_keyed if k not in mine]
        extra = [k for k in mine if k not in ref_keyed]
        if lone:
            problems.append(Problem(
                f.path, "error", "alignment",
                f"{lone[0].describe()} (on {_rank_at(ref, ref_keyed[lone[0]].op.node)}) "
                "has no match here"
                + (f"; this rank runs {extra[0].describe()} instead" if extra else ""),
                "ranks would hang waiting for each other",
                mine[extra[0]].op.node if extra else None))
        elif extra:
            problems.append(Problem(
                f.path, "error", "alignment",
                f"{extra[0].describe()} has no match on {_rank_at(ref)}",
                "ranks would hang waiting for each other", mine[extra[0]].op.node))
    for key, a in ref_keyed.items():
        b = mine.get(key)
        if b is None:
            continue
        if a.ctype != b.ctype:
            problems.append(Problem(
                f.path, "error", "alignment",
                f"{key.describe()} is {_ctype(b.ctype)} here but "
                f"{_ctype(a.ctype)} on {_rank_at(ref, a.op.node)}",
                "same order of collectives on every rank", b.op.node))
            break
        if a.size != b.size and a.size is not None and b.size is not None:
            severity = "warning" if a.ctype == CollectiveType.ALL_TO_ALL else "error"
            problems.append(Problem(
                f.path, severity, "alignment",
                f"{key.describe()} ({_ctype(b.ctype)}) is {b.size} B here "
                f"but {a.size} B on {_rank_at(ref, a.op.node)}",
                "all-to-all splits may differ" if severity == "warning"
                else "every rank must move the same amount", b.op.node))
    return problems


def _check_transfers(facts: Sequence[_FileFacts],
                     keys: Sequence[dict[int, RendezvousKey]]) -> list[Problem]:
    """Every transfer between two ranks that are both among the files has
    its send on the sender and its receive on the receiver."""
    problems: list[Problem] = []
    ranks = {f.rank for f in facts}
    holders: dict[RendezvousKey, list[int]] = defaultdict(list)
    for k, f in enumerate(facts):
        for key in keys[k].values():
            if not is_collective(key) and key.sender in ranks and key.receiver in ranks:
                holders[key].append(f.rank)
    for k, f in enumerate(facts):
        for node, key in keys[k].items():
            if key in holders and len(holders[key]) == 1:
                other = key.receiver if key.sender == f.rank else key.sender
                problems.append(Problem(
                    f.path, "error", "alignment",
                    f"{key.describe()} has no match on rank {other}",
                    "a send waits for its receive: ranks would hang", node))
    return problems


def _check_rendezvous_order(facts: Sequence[_FileFacts],
                            keys: Sequence[dict[int, RendezvousKey]]) -> list[Problem]:
    """No cycle of ranks waiting for each other (rendezvous.find_deadlock)."""
    if any(f.comm_order is None and f.comms for f in facts):
        return []  # a file with its own cycle (or duplicate ids): reported by itself
    steps = find_deadlock([RankComms(f.rank, f.path, keys[k], f.comm_order or ())
                           for k, f in enumerate(facts)])
    if not steps:
        return []
    return [Problem(steps[0].source, "error", "collective-order", describe_deadlock(steps),
                    "every rank must reach matched collectives in the same order (one "
                    "lane, or data dependencies, orders them)", steps[0].earlier_node)]


def _ctype(value: int | None) -> str:
    try:
        return CollectiveType(value).name if value is not None else "untyped"
    except ValueError:
        return f"invalid({value})"


# What validate says beside a rank-set error (``chakra.ranks``).
RANK_SET_HINT = ("a file's rank is its metadata's rank, else N in a <prefix>.N.et name; give "
                 "one file per rank of one job")


def check_files(paths: Sequence[str | os.PathLike[str]], rules: ConsumerRules | None = None,
                ) -> ValidationReport:
    """Check one or more ``.et`` files (several = one per rank of one run),
    with a consumer's ``rules`` when given (``tools.validate`` names them).
    The files are checked in rank order (``ranks.survey``); what makes the
    set no one job (a rank twice, a copy, world sizes) is an error here."""
    ranks = survey(paths)
    files = ranks.paths
    problems = [Problem(issue.path, "error", issue.check, issue.problem, RANK_SET_HINT)
                for issue in ranks.issues if issue.check == RANK_SET_PROBLEM]  # the rest: per file
    facts: list[_FileFacts] = []
    for path, rank in zip(files, ranks.ranks):
        found, fact = _check_file(path, rank, rules, want_order=len(files) > 1)
        problems += found
        facts.append(fact)
    if len(facts) > 1:
        problems += _check_alignment(facts)
    if rules is not None:
        problems += [Problem(files[0], *f) for f in rules.set_findings(files, ranks.ranks)]
    return ValidationReport(files, rules.name if rules is not None else None, problems)


class SetChecker:
    """``validate``'s checks of a set of ranks, one file at a time (so that a
    caller that writes each rank as it goes holds only each file's
    communication facts): ``add`` returns the file's own problems, ``finish``
    the problems across the ranks, the order check (ranks that would wait
    for each other, as ASTRA-sim would forever) included."""

    def __init__(self) -> None:
        self._facts: list[_FileFacts] = []
        self._resolved: ResolvedSet | None = None  # by finish, for resolved_names

    def add(self, path: str, rank: int, metadata: GlobalMetadata,
            nodes: Sequence[ChakraNode]) -> list[Problem]:
        """``rank``: the file's, by its ``RankSet``."""
        problems, facts = _check_loaded(path, rank, metadata, nodes, None, want_order=True)
        self._facts.append(facts)
        self._resolved = None
        return problems

    def finish(self) -> list[Problem]:
        if len(self._facts) < 2:
            return []
        return _check_alignment(self._facts, self._resolution().keys)

    def resolved_names(self) -> list[dict[int, Named]]:
        """Per file added: the groups (and peers) of its unnamed nodes that
        the set resolved (``group_resolution.resolved_names``; resolved once
        with ``finish``)."""
        return self._resolution().named

    def _resolution(self) -> ResolvedSet:
        if self._resolved is None:
            self._resolved = resolve_set(_rank_ops(self._facts))
        return self._resolved


def check_loaded(path: str, rank: int, metadata: GlobalMetadata,
                 nodes: Sequence[ChakraNode]) -> list[Problem]:
    """The per-file checks of ``validate`` on a trace already in memory (no
    cross-rank checks: the simulator's deadlock check owns those)."""
    return _check_loaded(path, rank, metadata, nodes, None)[0]


# The errors a replay cannot get past: a node that waits on itself, on a node
# that is not there, or shares its id. (Attributes of an unexpected type are
# errors for validate, but the simulator reads them as absent, with a warning,
# and other tools' traces rely on that.)
# Malformed process groups too: every command refuses them alike (the export
# could not write its groups file, the set check could not read membership).
PROCESS_GROUPS_CHECK = PROCESS_GROUPS_PROBLEM
# Numbers the replay reads from the metadata, out of their range (a CPU
# stretch of 1e308 overflowed the ASTRA-sim export and replayed as inf us).
METADATA_NUMBER_CHECK = "metadata-number"
# And a communication node without a size that its trace does not declare
# unknown (``COMM_SIZE_UNKNOWN_ATTR``): a replay would time it as free.
COMM_SIZE_CHECK = "comm-size-missing"
REPLAY_BLOCKING = frozenset({"cycle", "dangling-dep", "duplicate-id", PROCESS_GROUPS_CHECK,
                             COMM_SIZE_CHECK, METADATA_NUMBER_CHECK})


def blocks_replay(problem: Problem) -> bool:
    return problem.check in REPLAY_BLOCKING


def check_before_replay(path: str, rank: int, metadata: GlobalMetadata,
                        nodes: Sequence[ChakraNode]) -> list[Problem]:
    """What ``refuse_unsound(..., blocking_only=True)`` needs: ``check_loaded``'s
    problems, or none at all when a linear scan proves that no
    ``REPLAY_BLOCKING`` error can be there (the whole check costs several
    seconds on a million nodes; the replay ignores everything else)."""
    if _surely_replayable(nodes) and _sizes_known(nodes) and _groups_readable(metadata, path) \
            and _metadata_number_problem(metadata, path) is None:
        return []
    return check_loaded(path, rank, metadata, nodes)


def _sizes_known(nodes: Sequence[ChakraNode]) -> bool:
    """Every communication node has an integer comm_size or says it is unknown."""
    comm_types = frozenset(COMM_NODE_TYPES)
    for node in compress(nodes, map(comm_types.__contains__, map(_node_type, nodes))):
        if not any((name == "comm_size" and type(value) is int)
                   or (name == COMM_SIZE_UNKNOWN_ATTR and value is True)
                   for name, _kind, value in node.attrs):
            return False
    return True


def _groups_readable(metadata: GlobalMetadata, path: str) -> bool:
    try:
        read_process_groups(metadata, path)
    except InputError:
        return False
    return True


def _surely_replayable(nodes: Sequence[ChakraNode]) -> bool:
    """Unique ids, every data dependency on a node of the file, and every one
    on a smaller id: then there is no duplicate id, no dangling dependency and
    no cycle (a cycle needs an edge to a larger or equal id). Converters hand
    out ids in start order, so this holds on most traces; where it does not,
    the full check decides."""
    ids = list(map(attrgetter("id"), nodes))  # C-level maps: a million nodes
    known = set(ids)
    if len(known) != len(ids):
        return False
    deps = list(map(attrgetter("data_deps"), nodes))
    if not known.issuperset(chain.from_iterable(deps)):
        return False
    owners = list(compress(ids, deps))  # nodes with a dependency
    return ids_ascend(map(max, filter(None, deps)), owners)


def refuse_unsound(problems: Sequence[Problem], force: bool, blocking_only: bool = False) -> None:
    """What ``validate`` calls an error stops a command that would pass the
    trace on (ASTRA-sim export; with ``blocking_only``, only the errors in
    ``blocks_replay``, for the simulator): ``InputError`` naming the first
    error, or with ``force`` one warning and on."""
    errors = [p for p in problems if p.severity == "error"
              and (not blocking_only or blocks_replay(p))]
    if not errors:
        return
    first = errors[0]
    where = f" node {first.node}:" if first.node is not None else ""
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    text = f"[{first.check}]{where} {first.message}{more}"
    if not force:
        raise InputError(first.file, f"not sound: {text}; see `pt2chakra validate`, "
                         "or pass --force to proceed anyway")
    log.warning("%s: not sound, proceeding because of --force: %s", first.file, text)

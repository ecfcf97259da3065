"""``pt2chakra validate``: is an ``.et`` (or a set of per-rank files) sound
for replay? Reuses :mod:`pt2chakra.validate` for cycles.

Errors make a trace unsound (exit 1); warnings name known weaknesses that a
replay tolerates but gets wrong (e.g. the reference converter's GPU ops with
no stream order, collectives typed as compute).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

from pt2chakra.chakra.conventions import attr_dict, is_gpu, rank_of
from pt2chakra.chakra.cycles import describe_cycle, find_cycle_in
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, CollectiveType, NodeType
from pt2chakra.conversion.collective import is_nccl_kernel
from pt2chakra.conversion.graph_builder import COMM_OP_PREFIXES

PROFILES = ("astra-sim",)

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
COMM_TYPES = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)
MAX_PER_CHECK = 20  # problems of one kind listed per file before a summary line
_ASTRA_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(\.gz)?$")


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


class ValidationReport(msgspec.Struct):
    files: list[str]
    profile: str | None
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
        return {"files": self.files, "profile": self.profile, "sound": self.sound,
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


class _Collective(msgspec.Struct):
    node: int
    start: int
    ctype: int | None
    node_type: int
    size: int | None
    pg: str
    seq: int | None = None  # comm_seq: how the simulator matches it across ranks
    lane: tuple[Any, ...] = ()


class _FileFacts(msgspec.Struct):
    path: str
    rank: int
    collectives: list[_Collective]
    process_groups: list[dict[str, Any]]
    # (earlier, later) collective node ids: the later cannot start before the
    # earlier completed (data_deps, or recorded order on one lane). None
    # when the file's own graph has a cycle (reported by itself).
    coll_order: list[tuple[int, int]] | None = None


def _comm_lane(attrs: dict[str, Any]) -> tuple[Any, ...]:
    """The lane the simulator runs a communication node on (it holds the lane
    while it waits for its peers)."""
    if attrs.get("is_cpu_op", False):
        return ("cpu", attrs.get("tid", 0))
    if "stream" in attrs:
        return ("gpu", attrs.get("device", 0), attrs["stream"])
    return ("comm", str(attrs.get("pg_name", "")))


def _collective_order(ids: list[int], deps: dict[int, list[tuple[int, str]]],
                      collectives: list[_Collective]) -> list[tuple[int, int]]:
    """Pairs (a, b) of collectives where b cannot start before a completed:
    a is a nearest collective ancestor of b over data_deps, or a precedes b
    on b's lane. Iterative (Kahn's order); the graph must be acyclic."""
    coll = {c.node for c in collectives if c.node_type == NodeType.COMM_COLL_NODE}
    pairs: set[tuple[int, int]] = set()
    known = set(ids)
    indegree = dict.fromkeys(ids, 0)
    children: dict[int, list[int]] = defaultdict(list)
    for dst, srcs in deps.items():
        for src, _kind in srcs:
            if src in known and src != dst:
                indegree[dst] += 1
                children[src].append(dst)
    empty: frozenset[int] = frozenset()
    # Nearest collective ancestors of each node, dropped once every child read them.
    above: dict[int, frozenset[int]] = {}
    unread = {i: len(c) for i, c in children.items()}
    ready = [i for i, deg in indegree.items() if deg == 0]
    while ready:
        cur = ready.pop()
        srcs = [s for s, _k in deps.get(cur, ()) if s in known and s != cur]
        sets = [frozenset((s,)) if s in coll else above.get(s, empty) for s in srcs]
        sets = [s for s in sets if s]
        mine = empty if not sets else sets[0] if len(sets) == 1 else frozenset().union(*sets)
        if cur in coll:
            pairs.update((a, cur) for a in mine)
        above[cur] = mine
        for child in children.get(cur, ()):
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
        for s in srcs:
            unread[s] -= 1
            if not unread[s]:
                del above[s]
        if not children.get(cur):
            del above[cur]
    lanes: dict[tuple[Any, ...], list[_Collective]] = defaultdict(list)
    for c in collectives:
        if c.node in coll:
            lanes[c.lane].append(c)
    for cols in lanes.values():
        cols.sort(key=lambda c: (c.start, c.node))
        pairs.update((a.node, b.node) for a, b in zip(cols, cols[1:]) if a.node != b.node)
    return sorted(pairs)


def _looks_collective(name: str) -> bool:
    return name.startswith(COMM_OP_PREFIXES) or is_nccl_kernel(name)


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


def _check_node(node: ChakraNode, attrs: dict[str, Any], c: _Collector, profile: str | None,
                ) -> None:
    if node.type == NodeType.INVALID_NODE:
        c.add("error", "node-type", "node type is INVALID_NODE",
              "give every node a real type (COMP_NODE, COMM_COLL_NODE, ...)", node.id)
    if node.type in COMM_TYPES:
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
        if size is None:
            c.add("error", "comm-attrs", f"{node.name!r}: communication node without comm_size",
                  "add comm_size (int64_val, bytes)", node.id)
        elif size < 0:
            c.add("error", "comm-attrs", f"comm_size {size} is negative", "", node.id)
        elif size == 0 and attrs.get("comm_type") != CollectiveType.BARRIER:
            c.add("warning", "comm-size-zero", f"{node.name!r}: comm_size is 0",
                  "a zero-byte collective replays as free", node.id)
    elif _looks_collective(node.name) and node.type == NodeType.COMP_NODE:
        if is_gpu(attrs):
            c.add("warning", "collective-as-compute",
                  f"GPU op {node.name!r} is a collective but typed COMP_NODE",
                  "it replays as compute, not communication", node.id)
        else:  # fine when its GPU kernel is the comm node; decided per file
            c.host_collectives.append(node)
    if profile == "astra-sim":
        if node.type == NodeType.METADATA_NODE:
            c.add("error", "astra-sim", f"METADATA_NODE {node.name!r}: ASTRA-sim stops with "
                  "'Invalid node_type'", "convert with --for astra-sim (drops it)", node.id)
        elif attrs.get("is_cpu_op", False):
            c.add("error", "astra-sim", f"CPU node {node.name!r}: ASTRA-sim's statistics step "
                  "throws on CPU ops", "convert with --for astra-sim", node.id)


def _check_file(path: str, index: int, profile: str | None, want_order: bool = False,
                ) -> tuple[list[Problem], _FileFacts]:
    c = _Collector(path)
    metadata, nodes = read_et(path)
    md = attr_dict(metadata.attrs)
    if not metadata.version:
        c.add("warning", "metadata", "GlobalMetadata has no version",
              "the reference converter writes none; readers cannot tell the schema")
    ids: list[int] = []
    seen: set[int] = set()
    deps: dict[int, list[tuple[int, str]]] = {}
    ctrl: list[tuple[int, int]] = []
    names: dict[int, str] = {}
    streams: dict[tuple[Any, Any], list[tuple[int, int, list[int]]]] = defaultdict(list)
    collectives: list[_Collective] = []
    for node in nodes:
        if node.id in seen:
            c.add("error", "duplicate-id", f"id {node.id} is used by more than one node "
                  f"(this one is {node.name!r})", "ids must be unique within a file", node.id)
        seen.add(node.id)
        ids.append(node.id)
        names[node.id] = node.name
        attrs = _check_attrs(node, c)
        _check_node(node, attrs, c, profile)
        if node.data_deps:
            kinds = attrs.get("data_dep_kinds")
            if not (isinstance(kinds, list) and len(kinds) == len(node.data_deps)):
                kinds = ["data"] * len(node.data_deps)
            deps[node.id] = list(zip(node.data_deps, kinds))
        ctrl += [(node.id, d) for d in node.ctrl_deps]
        if is_gpu(attrs) and "stream" in attrs and node.start_time_micros:
            streams[(attrs.get("device"), attrs["stream"])].append(
                (node.start_time_micros, node.id, node.data_deps))
        if node.type in COMM_TYPES:
            size = attrs.get("comm_size")
            seq = attrs.get("comm_seq")
            if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
                c.add("error", "comm-attrs", f"comm_seq {seq!r} is not an integer",
                      "write comm_seq as int64_val: ranks match collectives by it", node.id)
                seq = None
            collectives.append(_Collective(
                node.id, node.start_time_micros, attrs.get("comm_type"), int(node.type),
                size if isinstance(size, int) else None, str(attrs.get("pg_name", "")),
                seq, _comm_lane(attrs)))
    if not collectives:
        for node in c.host_collectives:
            c.add("warning", "collective-as-compute",
                  f"{node.name!r} is a collective but typed COMP_NODE and the file has no "
                  "communication node", "it replays as compute, not communication (the "
                  "reference converter does this on host-only traces)", node.id)
    for dst, srcs in deps.items():
        for src, _kind in srcs:
            if src not in seen:
                c.add("error", "dangling-dep", f"data dependency on {src}, which is not a node "
                      "of this file", "the simulator follows data_deps and would wait forever",
                      dst)
    for dst, src in ctrl:
        if src not in seen:
            c.add("warning", "dangling-ctrl-dep", f"ctrl dependency on {src}, which is not a "
                  "node of this file", "ASTRA-sim ignores ctrl_deps; other readers may not", dst)
    cycle = find_cycle_in(ids, deps)
    if cycle:
        c.add("error", "cycle", "dependency cycle " + describe_cycle(cycle, names),
              "a replay deadlocks; convert with --break-cycles", cycle[0].src)
    ctrl_map: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for dst, src in ctrl:
        ctrl_map[dst].append((src, "ctrl"))
    ctrl_cycle = find_cycle_in(ids, ctrl_map) if ctrl_map else []
    if ctrl_cycle:
        c.add("warning", "ctrl-cycle", "ctrl_deps (parent) cycle "
              + describe_cycle(ctrl_cycle, names),
              "ctrl_deps should form a tree; readers that walk parents loop or stop",
              ctrl_cycle[0].src)
    coll_order = None
    if want_order and not cycle and len(seen) == len(ids) and any(
            col.node_type == NodeType.COMM_COLL_NODE for col in collectives):
        coll_order = _collective_order(ids, deps, collectives)
    for (device, stream), ops in streams.items():
        ops.sort()
        unordered = [cur[1] for prev, cur in zip(ops, ops[1:]) if prev[1] not in cur[2]]
        if unordered:
            c.add("warning", "stream-order",
                  f"device {device} stream {stream}: {len(unordered)} of {len(ops)} GPU ops "
                  f"do not depend on their stream predecessor (first: node {unordered[0]})",
                  "the replay may run them concurrently or at time 0 (reference converter)",
                  unordered[0])
    if profile == "astra-sim":
        if not _ASTRA_NAME.match(os.path.basename(path)):
            c.add("error", "astra-sim", "file name is not <prefix>.<rank>.et",
                  "ASTRA-sim opens <prefix>.<rank>.et for every rank")
    pgs: list[dict[str, Any]] = []
    raw_pgs = md.get("process_groups")
    if isinstance(raw_pgs, str):
        try:
            pgs = list(msgspec.json.decode(raw_pgs))
        except msgspec.DecodeError:
            c.add("warning", "metadata", "process_groups is not JSON", "")
    facts = _FileFacts(path, rank_of(metadata, path, index), collectives, pgs, coll_order)
    return c.finish(), facts


def _keys(cols: list[_Collective]) -> list[tuple[Any, ...]]:
    """How the simulator matches collectives across ranks: by process group
    and comm_seq, else by order of appearance in the process group."""
    keys: list[tuple[Any, ...]] = []
    order = 0
    for col in cols:
        if col.seq is not None:
            keys.append((col.pg, "seq", col.seq))
        else:
            keys.append((col.pg, "order", order))
            order += 1
    return keys


def _what(key: tuple[Any, ...], label: str) -> str:
    return (f"collective seq {key[2]} of {label}" if key[1] == "seq"
            else f"collective #{key[2]} of {label}")


def _check_alignment(facts: Sequence[_FileFacts]) -> list[Problem]:
    """Across ranks: each process group's collectives matched as the
    simulator matches them (pg + comm_seq, else order), of the same types and
    (except all-to-all, whose splits may differ) sizes; and no two ranks
    reaching matched collectives in orders that wait for each other."""
    problems: list[Problem] = []
    per_pg: dict[str, dict[int, list[_Collective]]] = defaultdict(dict)
    for f in facts:
        groups: dict[str, list[_Collective]] = defaultdict(list)
        for col in sorted(f.collectives, key=lambda x: (x.start, x.node)):
            if col.node_type == NodeType.COMM_COLL_NODE:
                groups[col.pg].append(col)
        for pg, cols in groups.items():
            per_pg[pg][id(f)] = cols
    by_id = {id(f): f for f in facts}
    key_of: dict[tuple[int, int], tuple[Any, ...]] = {}  # (id(file), node) -> key
    for pg, ranks in sorted(per_pg.items()):
        label = f"process group {pg!r}" if pg else "collectives without pg_name"
        members = [by_id[k] for k in ranks]
        missing = [f for f in facts if id(f) not in ranks]
        if missing and not pg:
            for f in missing:
                problems.append(Problem(f.path, "error", "alignment",
                                        f"rank {f.rank} has none of the {label} other ranks run",
                                        "a collective waits for every rank of its group"))
        keyed: dict[int, dict[tuple[Any, ...], _Collective]] = {}
        for f in members:
            mine: dict[tuple[Any, ...], _Collective] = {}
            for key, col in zip(_keys(ranks[id(f)]), ranks[id(f)]):
                key_of[id(f), col.node] = key
                if key in mine:
                    problems.append(Problem(
                        f.path, "error", "alignment",
                        f"{_what(key, label)} appears twice here (nodes {mine[key].node} and "
                        f"{col.node})", "each collective of a process group needs its own "
                        "comm_seq; the simulator waits for a third arrival", col.node))
                    continue
                mine[key] = col
            keyed[id(f)] = mine
        ref = members[0]
        ref_cols = ranks[id(ref)]
        ref_keyed = keyed[id(ref)]
        for f in members[1:]:
            cols = ranks[id(f)]
            mine = keyed[id(f)]
            if len(cols) != len(ref_cols):
                problems.append(Problem(
                    f.path, "error", "alignment",
                    f"rank {f.rank} runs {len(cols)} collectives of {label}, rank {ref.rank} "
                    f"runs {len(ref_cols)}", "ranks would hang waiting for each other"))
            else:
                lone = [k for k in ref_keyed if k not in mine]
                extra = [k for k in mine if k not in ref_keyed]
                if lone:
                    problems.append(Problem(
                        f.path, "error", "alignment",
                        f"{_what(lone[0], label)} (node {ref_keyed[lone[0]].node} on rank "
                        f"{ref.rank}) has no match here"
                        + (f"; this rank runs {_what(extra[0], label)} instead" if extra
                           else ""),
                        "ranks would hang waiting for each other",
                        mine[extra[0]].node if extra else None))
                elif extra:
                    problems.append(Problem(
                        f.path, "error", "alignment",
                        f"{_what(extra[0], label)} has no match on rank {ref.rank}",
                        "ranks would hang waiting for each other", mine[extra[0]].node))
            for key, a in ref_keyed.items():
                b = mine.get(key)
                if b is None:
                    continue
                if a.ctype != b.ctype:
                    problems.append(Problem(
                        f.path, "error", "alignment",
                        f"{_what(key, label)} is {_ctype(b.ctype)} here but "
                        f"{_ctype(a.ctype)} on rank {ref.rank} (node {a.node})",
                        "same order of collectives on every rank", b.node))
                    break
                if a.size != b.size:
                    severity = "warning" if a.ctype == CollectiveType.ALL_TO_ALL else "error"
                    problems.append(Problem(
                        f.path, severity, "alignment",
                        f"{_what(key, label)} ({_ctype(b.ctype)}) is {b.size} B here "
                        f"but {a.size} B on rank {ref.rank} (node {a.node})",
                        "all-to-all splits may differ" if severity == "warning"
                        else "every rank must move the same amount", b.node))
    problems += _check_rendezvous_order(facts, key_of)
    return problems


def _check_rendezvous_order(facts: Sequence[_FileFacts],
                            key_of: dict[tuple[int, int], tuple[Any, ...]]) -> list[Problem]:
    """A collective starts when every rank reached it; if rank A must finish
    collective X before reaching Y while rank B must finish Y before X, both
    wait forever. Merge matched collectives across ranks and look for a cycle
    over the ranks' (earlier, later) pairs."""
    if any(f.coll_order is None and any(
            c.node_type == NodeType.COMM_COLL_NODE for c in f.collectives) for f in facts):
        return []  # a file with its own cycle (or duplicate ids): reported by itself
    index: dict[tuple[Any, ...], int] = {}
    why: list[tuple[_FileFacts, int, int]] = []  # edge number -> (file, earlier, later)
    deps: dict[int, list[tuple[int, object]]] = defaultdict(list)
    for f in facts:
        for a, b in f.coll_order or ():
            ka, kb = key_of.get((id(f), a)), key_of.get((id(f), b))
            if ka is None or kb is None or ka == kb:
                continue  # a repeated key is reported as such
            ia, ib = index.setdefault(ka, len(index)), index.setdefault(kb, len(index))
            deps[ib].append((ia, len(why)))
            why.append((f, a, b))
    cycle = find_cycle_in(range(len(index)), deps)
    if not cycle:
        return []
    keys = {i: k for k, i in index.items()}

    def short(key: tuple[Any, ...]) -> str:
        return (f"seq {key[2]}" if key[1] == "seq" else f"#{key[2]}") + f" of pg {key[0]!r}"

    steps = []
    for edge in cycle:
        f, a, b = why[int(edge.kind)]
        steps.append(f"rank {f.rank} runs {short(keys[edge.src])} (node {a}) before "
                     f"{short(keys[edge.dst])} (node {b})")
    f0, a0, _b0 = why[int(cycle[0].kind)]
    return [Problem(f0.path, "error", "collective-order",
                    "collectives cannot rendezvous, the ranks deadlock: " + "; ".join(steps),
                    "every rank must reach matched collectives in the same order (one "
                    "lane, or data dependencies, orders them)", a0)]


def _ctype(value: int | None) -> str:
    try:
        return CollectiveType(value).name if value is not None else "untyped"
    except ValueError:
        return f"invalid({value})"


def validate(paths: Sequence[str | os.PathLike[str]], profile: str | None = None,
             ) -> ValidationReport:
    """Check one or more ``.et`` files (several = one per rank of one run)."""
    if profile is not None and profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    files = [os.fspath(p) for p in paths]
    problems: list[Problem] = []
    facts: list[_FileFacts] = []
    for index, path in enumerate(files):
        found, fact = _check_file(path, index, profile, want_order=len(files) > 1)
        problems += found
        facts.append(fact)
    if len(facts) > 1:
        ranks = [f.rank for f in facts]
        if len(set(ranks)) != len(ranks):
            problems.append(Problem(files[0], "warning", "alignment",
                                    f"ranks repeat across the files: {ranks}",
                                    "give one file per rank"))
        problems += _check_alignment(facts)
    if profile == "astra-sim":
        ranks = sorted(f.rank for f in facts)
        if len(files) == 1:
            problems.append(Problem(files[0], "warning", "astra-sim",
                                    "one file: ASTRA-sim needs at least 2 ranks",
                                    "pass every <prefix>.<rank>.et of the run"))
        elif ranks != list(range(len(ranks))):
            problems.append(Problem(files[0], "error", "astra-sim",
                                    f"ranks {ranks} are not 0..{len(ranks) - 1}",
                                    "ASTRA-sim opens <prefix>.0.et .. <prefix>.<N-1>.et"))
    return ValidationReport(files, profile, problems)

"""A job's parallel layout, read from its trace: what each collective is for
(a gradient bucket, an FSDP shard, an activation reduction, a pipeline
hand-off, an expert exchange), the role of every process group that follows
from it (data, tensor, pipeline, expert parallel), the degrees of the job's
dimensions, and which ops ran on a shard. The one home of the rule:
``inspect`` prints it, scale-out (``extrapolate``, ``simulate
--world-size``, ``astra-sim --world-size``) refuses by it what is not data
parallel.

The evidence is each communication node's context, the chain of its
``ctrl_deps`` callers (and the c10d call it depends on where the recording
parents it elsewhere):

* a functional collective (``_c10d_functional::``, what DTensor and
  torch.compile issue) or a DTensor redistribution (``Redistribute``,
  ``_FromTorchTensorBackward``...) moves activations: tensor parallel,
  forward or backward (under ``autograd::engine::evaluate_function``);
* an all-reduce issued by a plain c10d call is a gradient bucket (DDP's
  reducer runs it in backward): data parallel, replicated;
* a gather or reduce-scatter of a sharded block (an ``FSDP::`` or
  ``FullyShardedDataParallel`` caller, or a sharded c10d call) is FSDP's or
  ZeRO's: data parallel, sharded;
* a send or a receive is a pipeline's hand-off; an all-to-all that no
  functional collective issued is an expert exchange;
* a broadcast, a per-rank gather, a barrier, or a payload of at most
  ``SCALAR_BYTES`` (a loss, a norm) says nothing about the group.

A group's role is the one its collectives share (two: mixed; none: unknown).
A collective names its group by ``pg_name``; where the recording does not (a
gloo job of several groups), a functional collective's own ``group_name``
input does, and a plain c10d call's group stays unnamed (one unnamed group
per role). An op is sharded where DTensor ran it on its local shard: the op
under a ``PythonSubclass`` dispatch of the same op whose inputs are larger
(their ratio is the shard's degree).

Streaming: one pass over a rank's nodes in id order (a caller precedes its
callees), holding a small context per node with one, not the nodes.
"""

from __future__ import annotations

import enum
import math
import os
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.process_groups import ProcessGroupRecord, read_process_groups
from pt2chakra.chakra.ranks import rank_of
from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType, attr_dict
from pt2chakra.names import C10D_FUNCTIONAL_PREFIXES, C10D_PREFIX, functional_group

# Names a sharded data-parallel job's annotations carry: FSDP2's ``FSDP::...``
# record functions, FSDP1's ``FullyShardedDataParallel`` module and hooks.
FSDP2_MARK = "FSDP::"
FSDP1_MARK = "FullyShardedDataParallel"
# c10d calls whose tensor is a sharded block (FSDP1 flat parameters, FSDP2
# per-parameter shards, ZeRO): the block is the model's, each rank's shard 1/n.
SHARDED_CALLS = frozenset({
    "_allgather_base_", "all_gather_into_tensor", "_reduce_scatter_base_",
    "reduce_scatter_tensor", "allgather_into_tensor_coalesced_",
    "reduce_scatter_tensor_coalesced_",
})
# DTensor's record functions around a redistribution (``Redistribute``, its
# nested and backward forms) and around a local tensor's entry into and exit
# from DTensor (``from_local`` / ``to_local`` and their backward).
DTENSOR_OPS = frozenset({
    "Redistribute", "NestedRedistribute", "RedistributeBackward", "_FromTorchTensor",
    "_FromTorchTensorBackward", "_ToTorchTensor", "_ToTorchTensorBackward",
})
# The autograd engine runs every backward function under this record function.
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
# The record function of a tensor subclass's ``__torch_dispatch__`` (DTensor's):
# under it the op runs again on the local shard.
SUBCLASS_DISPATCH = "PythonSubclass"
# A payload of at most one float64 is a scalar (a loss, a gradient norm, a
# token count): any layout reduces those, so it is no evidence of one.
SCALAR_BYTES = 8
# Nodes remembered for the sharded-op rule: DTensor's dispatch node follows
# its op at once, and the local op comes after at most the few dozen nodes of
# an input's redistribution (the real TP recordings: under 20).
RECENT_NODES = 512
# A pipeline has two stages at least (a send has a receiver).
PIPELINE_MIN_STAGES = 2
# The unnamed group's label (a collective whose group the trace does not say).
UNNAMED = ""

# Context flags, inherited down the chain of callers.
_FUNCTIONAL, _DTENSOR, _BACKWARD, _FSDP = 1, 2, 4, 8
_ACTIVATION_FLAGS = _FUNCTIONAL | _DTENSOR
_REDUCE_SCATTER = frozenset({int(CollectiveType.REDUCE_SCATTER),
                             int(CollectiveType.REDUCE_SCATTER_BLOCK)})
_SHARDABLE = _REDUCE_SCATTER | {int(CollectiveType.ALL_GATHER), int(CollectiveType.ALL_REDUCE)}
_P2P = frozenset({int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)})
_COMM = _P2P | {int(NodeType.COMM_COLL_NODE)}


class Role(str, enum.Enum):
    """What a process group is for."""

    DATA = "data"
    TENSOR = "tensor"
    PIPELINE = "pipeline"
    EXPERT = "expert"
    MIXED = "mixed"
    UNKNOWN = "unknown"


class Purpose(enum.Enum):
    """What one collective is for."""

    GRADIENT = "gradient all-reduce"  # data parallel, replicated (DDP's buckets)
    SHARD = "sharded gather / reduce-scatter"  # data parallel, sharded (FSDP, ZeRO)
    ACTIVATION = "activation collective"  # tensor parallel (DTensor, functional)
    TRANSFER = "send / receive"  # pipeline parallel
    EXCHANGE = "all-to-all"  # expert parallel
    OTHER = "other"  # broadcasts, scalars, per-rank gathers: no role


class Evidence(msgspec.Struct):
    """A group's collectives by what they are for, counted over the ranks read."""

    gradient_backward: int = 0  # plain all-reduces in backward: DDP's reducer buckets
    gradient_other: int = 0  # plain all-reduces outside backward
    sharded: int = 0  # FSDP / ZeRO gathers and reduce-scatters
    activation_forward: int = 0  # functional collectives outside backward
    activation_backward: int = 0  # functional collectives in backward
    dtensor: int = 0  # of the activation ones, issued through DTensor
    sends: int = 0
    receives: int = 0
    all_to_all: int = 0
    other: int = 0  # broadcasts, scalars, per-rank gathers, barriers

    def plus(self, other: Evidence) -> Evidence:
        return Evidence(*(a + b for a, b in zip(msgspec.structs.astuple(self),
                                                msgspec.structs.astuple(other), strict=True)))

    def counts(self) -> dict[Role, int]:
        """Collectives that are evidence of each role."""
        return {Role.DATA: self.gradient_backward + self.gradient_other + self.sharded,
                Role.TENSOR: self.activation_forward + self.activation_backward,
                Role.PIPELINE: self.sends + self.receives, Role.EXPERT: self.all_to_all}

    def role(self) -> Role:
        roles = [r for r, n in self.counts().items() if n]
        return roles[0] if len(roles) == 1 else Role.MIXED if roles else Role.UNKNOWN

    def text(self, role: Role) -> str:
        """What says so, in words: the counts of ``role``'s evidence."""
        return " and ".join(self._parts(role)) or "no collective"

    def detail(self, role: Role) -> str:
        """The activation collectives' phases, in parentheses ("" for other roles)."""
        if role not in (Role.TENSOR, Role.MIXED) or not self.counts()[Role.TENSOR]:
            return ""
        via = f", {self.dtensor} via DTensor" if self.dtensor else ""
        return f" ({self.activation_forward} forward, {self.activation_backward} backward{via})"

    def _parts(self, role: Role) -> list[str]:
        parts: list[str] = []
        if role in (Role.DATA, Role.MIXED):
            parts += _counted((self.gradient_backward, "gradient all-reduce", "in backward"),
                              (self.gradient_other, "all-reduce", "outside backward"),
                              (self.sharded, "sharded collective", ""))
        if role in (Role.TENSOR, Role.MIXED):
            parts += _counted((self.activation_forward + self.activation_backward,
                               "activation collective", ""))
        if role in (Role.PIPELINE, Role.MIXED):
            parts += _counted((self.sends, "send", ""), (self.receives, "receive", ""))
        if role in (Role.EXPERT, Role.MIXED):
            parts += _counted((self.all_to_all, "all-to-all", ""))
        if role is Role.UNKNOWN:
            parts += _counted((self.other, "broadcast, scalar or per-rank gather", ""))
        return parts


def _plural(n: int, noun: str) -> str:
    if n == 1 or noun.endswith("all-to-all"):
        return f"{n} {noun}"
    return f"{n} {noun}es" if noun.endswith(("sh", "ch")) else f"{n} {noun}s"


def _counted(*items: tuple[int, str, str]) -> list[str]:
    return [f"{_plural(n, noun)} {tail}".rstrip() for n, noun, tail in items if n]


class ShardedOp(msgspec.Struct):
    """An op DTensor ran on local shards: how often, and the shard's degree
    (its inputs' global size over the local one; the most common)."""

    name: str
    count: int
    degree: int


class GroupLayout(msgspec.Struct):
    """One process group and its role."""

    name: str  # pg_name; "" where the trace does not name the group
    desc: str  # pg_desc (``default_pg``, a mesh's ``mesh_tp``); "" if none
    ranks: list[int]  # the ranks it spans as declared (else those that used it; [] with every)
    size: int  # declared, else the ranks seen using it; 0 not known
    users: list[int]  # the recorded ranks read that hold a collective on it
    role: Role
    evidence: Evidence
    stages: int = 0  # a pipeline group's stages (its size, else its peers)
    at_least: bool = False  # stages from the peers of some ranks only: a lower bound
    every: bool = False  # every rank of the world (declared so, its ranks not listed)

    def label(self) -> str:
        if self.name == UNNAMED:
            return "a group the trace does not name"
        desc = f" ({self.desc})" if self.desc else ""
        return f"process group {self.name!r}{desc}"

    def describe(self) -> str:
        """One line: the group, its ranks, its role and the evidence."""
        name = "unnamed" if self.name == UNNAMED else repr(self.name)
        desc = f" {self.desc}" if self.desc else ""
        spans = f", {self.spans()}" if self.name != UNNAMED else ""
        if not self.users:
            return f"{name}{desc}{spans}: no collective in the ranks read"
        stages = f", {self.stages_text()}" if self.stages else ""
        return (f"{name}{desc}{spans}: {self.role.value}{stages}, "
                f"{self.evidence.text(self.role)}{self.evidence.detail(self.role)}")

    def stages_text(self) -> str:
        return f"{'at least ' if self.at_least else ''}{self.stages} stages"

    def spans(self) -> str:
        """Its ranks in words: ``every rank (4)``, ``ranks [0, 2] (2)``."""
        ranks = self.ranks
        if self.every:
            return f"every rank ({self.size})"
        if not ranks:
            return f"{self.size} ranks" if self.size else "ranks not recorded"
        if ranks == list(range(ranks[0], ranks[0] + len(ranks))) and len(ranks) > 2:
            shown = f"ranks {ranks[0]}..{ranks[-1]}"
        else:
            shown = f"ranks {ranks[:8]}{'...' if len(ranks) > 8 else ''}"
        return f"{shown} ({self.size or len(ranks)})"


class Layout(msgspec.Struct):
    """A job's layout as read from the ranks given: its groups, the degree of
    each dimension (1: none; 0: there, of a degree the trace does not say),
    the ops run on shards."""

    world_size: int
    ranks_read: list[int]
    groups: list[GroupLayout]
    tp: int
    pp: int
    ep: int
    dp: int
    sharded_ops: list[ShardedOp]

    def groups_of(self, role: Role) -> list[GroupLayout]:
        return [g for g in self.groups if g.role is role]

    def non_data_roles(self) -> list[Role]:
        """The roles other than data parallel that some group has."""
        return [r for r in (Role.PIPELINE, Role.TENSOR, Role.EXPERT, Role.MIXED)
                if self.groups_of(r)]

    def dimension(self, role: Role) -> str:
        """One dimension in words, with the groups and the evidence."""
        groups = self.groups_of(role)
        evidence = _sum(g.evidence for g in groups)
        where = _where(groups)
        users = sorted({r for g in groups for r in g.users})
        said = (f"{evidence.text(role)} on {_plural(len(users), 'rank')}"
                f"{evidence.detail(role)}")
        if role is Role.TENSOR:
            head = f"tensor parallel{_degree(self.tp)}"
        elif role is Role.PIPELINE:
            pipes = self.groups_of(Role.PIPELINE)
            head = ("pipeline parallel, " + (f"{self.pp} stages" if self.pp else max(
                pipes, key=lambda g: g.stages).stages_text()))
        elif role is Role.EXPERT:
            head = f"expert parallel{_degree(self.ep)}"
        elif role is Role.DATA:
            kind = "sharded" if evidence.sharded else "replicated"
            head = f"data parallel{_degree(self.dp)} ({kind})"
        else:
            head = "mixed roles"
        return f"{head} over {where}, with {said}"

    def describe(self) -> str:
        """The layout in one line: its dimensions joined by `` x ``."""
        roles = [r for r in (Role.TENSOR, Role.PIPELINE, Role.EXPERT, Role.MIXED, Role.DATA)
                 if self.groups_of(r)]
        if not roles:
            used = any(g.users for g in self.groups)
            return ("no layout in the trace (only broadcasts, scalars or per-rank gathers)"
                    if used else "no collective")
        return " x ".join(self.dimension(r) for r in roles)


def _degree(n: int) -> str:
    return f" {n}" if n else ""


def _where(groups: Sequence[GroupLayout]) -> str:
    named = [g for g in groups if g.name != UNNAMED]
    if not named:
        return groups[0].label() if groups else "no group"
    descs = sorted({g.desc for g in named if g.desc})
    desc = f" ({', '.join(descs)})" if descs else ""
    names = ", ".join(repr(g.name) for g in named[:4]) + (", ..." if len(named) > 4 else "")
    also = " and a group the trace does not name" if len(named) < len(groups) else ""
    return f"process group{'s' if len(named) > 1 else ''} {names}{desc}{also}"


def _sum(items: Iterable[Evidence]) -> Evidence:
    total = Evidence()
    for e in items:
        total = total.plus(e)
    return total


class _Context(NamedTuple):
    """What a node's chain of callers says: flags, the group a functional
    collective named, the nearest c10d call."""

    flags: int = 0
    group: str | None = None
    call: str | None = None


_NO_CONTEXT = _Context()


class _Comm(NamedTuple):
    """One communication node as the rule reads it (its group resolved at the end)."""

    group: str | None
    activation: bool  # issued through a functional collective or DTensor
    purpose: Purpose
    backward: bool
    dtensor: bool
    node_type: int
    peer: int | None


@dataclass(frozen=True, slots=True)
class RankLayout:
    """One rank's part: its declared groups, its collectives' evidence per
    group, its pipeline peers, its sharded ops, the FSDP marks it holds."""

    rank: int | None
    world_size: int
    declared: list[ProcessGroupRecord]
    evidence: dict[tuple[str, Role | None], Evidence]  # (group, role of an unnamed one)
    peers: dict[tuple[str, Role | None], set[int]]
    sharded_ops: dict[str, Counter[int]]  # op -> degree -> count
    marks: frozenset[str] = field(default=frozenset())


def _own_context(node: ChakraNode) -> _Context:
    name = node.name
    flags = 0
    group = call = None
    if name.startswith(C10D_FUNCTIONAL_PREFIXES):
        flags |= _FUNCTIONAL
        group = _group_input(node)
        if group is not None:
            call = name.split("::", 1)[1]
    elif name.startswith(C10D_PREFIX):
        call = name[len(C10D_PREFIX):]
    elif name in DTENSOR_OPS or name == SUBCLASS_DISPATCH:
        flags |= _DTENSOR
    elif name.startswith(BACKWARD_PREFIX):
        flags |= _BACKWARD
    if FSDP2_MARK in name or FSDP1_MARK in name:
        flags |= _FSDP
    return _Context(flags, group, call)


def _group_input(node: ChakraNode) -> str | None:
    """A functional collective's ``group_name`` (``names.functional_group``)."""
    if node.inputs is None:
        return None
    try:
        values = msgspec.json.decode(node.inputs[0])
        types = msgspec.json.decode(node.inputs[2])
    except msgspec.DecodeError:
        return None
    if not (isinstance(values, list) and isinstance(types, list)):
        return None
    return functional_group(node.name, values, types)


def _merged(a: _Context, b: _Context) -> _Context:
    return _Context(a.flags | b.flags, a.group if a.group is not None else b.group,
                    a.call if a.call is not None else b.call)


def purpose_of(flags: int, call: str | None, node_type: int, comm_type: int,
               size: int) -> Purpose:
    """What one communication node is for, from its context (module docstring)."""
    if node_type in _P2P:
        return Purpose.TRANSFER
    scalar = 0 < size <= SCALAR_BYTES
    if flags & _ACTIVATION_FLAGS:
        return Purpose.OTHER if scalar else Purpose.ACTIVATION
    if comm_type == CollectiveType.ALL_TO_ALL:
        return Purpose.EXCHANGE
    if scalar:
        return Purpose.OTHER
    sharded = flags & _FSDP or call in SHARDED_CALLS or comm_type in _REDUCE_SCATTER
    if sharded and comm_type in _SHARDABLE:
        return Purpose.SHARD
    if comm_type == CollectiveType.ALL_REDUCE:
        return Purpose.GRADIENT
    return Purpose.OTHER


_ROLE_OF = {Purpose.GRADIENT: Role.DATA, Purpose.SHARD: Role.DATA,
            Purpose.ACTIVATION: Role.TENSOR, Purpose.TRANSFER: Role.PIPELINE,
            Purpose.EXCHANGE: Role.EXPERT}


def _count(e: Evidence, c: _Comm) -> None:
    p = c.purpose
    if p is Purpose.GRADIENT:
        if c.backward:
            e.gradient_backward += 1
        else:
            e.gradient_other += 1
    elif p is Purpose.SHARD:
        e.sharded += 1
    elif p is Purpose.ACTIVATION:
        if c.backward:
            e.activation_backward += 1
        else:
            e.activation_forward += 1
        e.dtensor += bool(c.dtensor)
    elif p is Purpose.TRANSFER:
        if c.node_type == NodeType.COMM_SEND_NODE:
            e.sends += 1
        else:
            e.receives += 1
    elif p is Purpose.EXCHANGE:
        e.all_to_all += 1
    else:
        e.other += 1


class ShardedOpPairs:
    """The sharded-op rule, one node at a time in file order: DTensor's
    dispatch records op X with the global shapes, its ``PythonSubclass``
    child, then X again on the local shard with smaller inputs; the local
    op's degree is their ratio (``_shard_degree``)."""

    def __init__(self) -> None:
        self._recent: OrderedDict[int, tuple[str, tuple[str, str, str] | None]] = OrderedDict()
        self._dispatch: OrderedDict[int, tuple[str, tuple[str, str, str] | None]] = OrderedDict()

    def degree(self, node: ChakraNode) -> int:
        """The shard's degree where ``node`` is an op run on a local shard,
        else 1."""
        parent = node.ctrl_deps[0] if node.ctrl_deps else -1  # -1: no node
        degree = 1
        if node.name == SUBCLASS_DISPATCH and parent in self._recent:
            _remember(self._dispatch, node.id, self._recent[parent])
        elif parent in self._dispatch:
            name, outer = self._dispatch[parent]
            if name == node.name:
                degree = _shard_degree(outer, node.inputs)
        _remember(self._recent, node.id, (node.name, node.inputs))
        return degree


def sharded_op_degrees(nodes: Iterable[ChakraNode]) -> dict[int, int]:
    """Node id -> the shard's degree, for every op run on a local shard."""
    pairs = ShardedOpPairs()
    found = {}
    for n in nodes:
        degree = pairs.degree(n)
        if degree > 1:
            found[n.id] = degree
    return found


class LayoutReader:
    """One rank's layout, gathered as its nodes stream by (``add`` each in
    file order, then ``result``)."""

    def __init__(self, metadata: GlobalMetadata, where: str) -> None:
        md = attr_dict(metadata.attrs)
        world = md.get("world_size")
        self._rank = rank_of(metadata, where)
        self._world = world if type(world) is int and world > 0 else 0
        self._declared = read_process_groups(metadata, where)
        self._context: dict[int, _Context] = {}
        self._calls: dict[int, _Context] = {}  # c10d call nodes: their own context
        self._comms: list[_Comm] = []
        self._functional_groups: set[str] = set()
        self._pairs = ShardedOpPairs()
        self._sharded: dict[str, Counter[int]] = {}
        self._marks: set[str] = set()

    def add(self, node: ChakraNode) -> None:
        own = _own_context(node)
        inherited = _NO_CONTEXT
        for parent in node.ctrl_deps:
            inherited = _merged(inherited, self._context.get(parent, _NO_CONTEXT))
        ctx = _merged(own, inherited)
        if own.call is not None or own.flags & _FUNCTIONAL:
            self._calls[node.id] = ctx
        if own.group is not None:
            self._functional_groups.add(own.group)
        if int(node.type) in _COMM:
            ctx = self._comm_context(node, ctx)
            self._add_comm(node, ctx)
        if ctx != _NO_CONTEXT:
            self._context[node.id] = ctx
        if own.flags & _FSDP:
            self._marks.update(m for m in (FSDP2_MARK, FSDP1_MARK) if m in node.name)
        degree = self._pairs.degree(node)
        if degree > 1:
            self._sharded.setdefault(node.name, Counter())[degree] += 1

    def _comm_context(self, node: ChakraNode, ctx: _Context) -> _Context:
        """A comm node recorded under no c10d call takes the context of the
        c10d call it depends on (FSDP2's reduce under its annotation, gloo's
        op under a functional collective's wrapper), and the group it names;
        one that waited for a backward op is in backward (DDP's bucket issued
        from a gloo worker, under no caller)."""
        for dep in node.data_deps:
            call = self._calls.get(dep)
            if call is None:
                if self._context.get(dep, _NO_CONTEXT).flags & _BACKWARD:
                    ctx = ctx._replace(flags=ctx.flags | _BACKWARD)
                continue
            if ctx.call is None:
                ctx = _merged(ctx, call)
            elif ctx.group is None:
                ctx = ctx._replace(group=call.group)
        return ctx

    def _add_comm(self, node: ChakraNode, ctx: _Context) -> None:
        attrs = attr_dict(node.attrs)
        ctype, size = attrs.get("comm_type"), attrs.get("comm_size")
        pg = attrs.get("pg_name")
        group = str(pg) if pg not in (None, "") else ctx.group
        ntype = int(node.type)
        peer = attrs.get("comm_dst" if ntype == NodeType.COMM_SEND_NODE else "comm_src")
        self._comms.append(_Comm(
            group, bool(ctx.flags & _ACTIVATION_FLAGS),
            purpose_of(ctx.flags, ctx.call, ntype, ctype if type(ctype) is int else -1,
                       size if type(size) is int else 0),
            bool(ctx.flags & _BACKWARD), bool(ctx.flags & _DTENSOR), ntype,
            peer if type(peer) is int and peer >= 0 else None))

    def result(self) -> RankLayout:
        evidence: dict[tuple[str, Role | None], Evidence] = {}
        peers: dict[tuple[str, Role | None], set[int]] = {}
        sole = next(iter(self._functional_groups)) if len(self._functional_groups) == 1 else None
        for c in self._comms:
            group = c.group if c.group is not None else sole if c.activation else None
            key = (group, None) if group is not None else (UNNAMED, _ROLE_OF.get(c.purpose))
            _count(evidence.setdefault(key, Evidence()), c)
            if c.peer is not None:
                peers.setdefault(key, set()).add(c.peer)
        return RankLayout(self._rank, self._world, self._declared, evidence, peers,
                          self._sharded, frozenset(self._marks))


def _remember(memory: OrderedDict[int, Any], key: int, value: Any) -> None:
    memory[key] = value
    if len(memory) > RECENT_NODES:
        memory.popitem(last=False)


def _shapes(io: tuple[str, str, str] | None) -> list[Any]:
    return [] if io is None else decode_shapes(io[1])


def decode_shapes(text: str) -> list[Any]:
    """A node's ``inputs``/``outputs`` shapes (JSON: one entry per value, a
    list of dims for a tensor); [] when unreadable."""
    try:
        shapes = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return []
    return shapes if isinstance(shapes, list) else []


def _shard_degree(outer: tuple[str, str, str] | None, inner: tuple[str, str, str] | None) -> int:
    """The largest ratio of an input's global size to its local one (1: none smaller)."""
    best = 1
    for g, loc in zip(_shapes(outer), _shapes(inner), strict=False):
        if not (is_flat_shape(g) and is_flat_shape(loc)) or len(g) != len(loc):
            continue
        whole, local = math.prod(g), math.prod(loc)
        if local > 0 and whole > local and whole % local == 0:
            best = max(best, whole // local)
    return best


def is_flat_shape(shape: Any) -> bool:
    """A tensor's shape: a list of dims, each a non-negative int."""
    return isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)


def rank_layout(metadata: GlobalMetadata, nodes: Iterable[ChakraNode], where: str) -> RankLayout:
    """One rank's layout in one pass over its nodes."""
    reader = LayoutReader(metadata, where)
    for node in nodes:
        reader.add(node)
    return reader.result()


def read_layout(paths: Sequence[str | os.PathLike[str]]) -> Layout:
    """The layout of the ranks in ``paths``, read one file at a time."""
    ranks = []
    for p in paths:
        metadata, nodes = read_et(p)
        ranks.append(rank_layout(metadata, nodes, os.fspath(p)))
    return job_layout(ranks)


def job_layout(ranks: Sequence[RankLayout], world_size: int | None = None) -> Layout:
    """The job's layout from its ranks' parts (any subset; one file alone
    gives that rank's view). ``world_size``: the job's, else the metadata's."""
    world = world_size or max((r.world_size for r in ranks), default=0) or len(ranks)
    declared: dict[str, ProcessGroupRecord] = {}
    for r in ranks:
        for g in r.declared:
            declared.setdefault(g.name, g)
    evidence: dict[tuple[str, Role | None], Evidence] = {}
    users: dict[tuple[str, Role | None], set[int]] = {}
    peers: dict[tuple[str, Role | None], set[int]] = {}
    for i, r in enumerate(ranks):
        for key, e in r.evidence.items():
            evidence[key] = evidence.get(key, Evidence()).plus(e)
            users.setdefault(key, set()).add(r.rank if r.rank is not None else i)
        for key, p in r.peers.items():
            peers.setdefault(key, set()).update(p)
    groups = [_group(key, declared.get(key[0]), evidence[key], users[key], peers.get(key, set()),
                     world) for key in sorted(evidence, key=_group_order)]
    groups += [_group((name, None), g, Evidence(), set(), set(), world)
               for name, g in sorted(declared.items(), key=lambda kv: _group_order((kv[0], None)))
               if (name, None) not in evidence]
    read = sorted(r.rank if r.rank is not None else i for i, r in enumerate(ranks))
    return _with_degrees(world, read, groups, _sharded_ops(ranks))


def _group_order(key: tuple[str, Role | None]) -> tuple[int, int, str, str]:
    name, role = key
    number = int(name) if name.isdigit() else -1
    return (name == UNNAMED, number if number >= 0 else 1 << 62, name,
            role.value if role is not None else "")


def _group(key: tuple[str, Role | None], record: ProcessGroupRecord | None, evidence: Evidence,
           users: set[int], peers: set[int], world: int) -> GroupLayout:
    name, _role = key
    members = list(record.ranks) if record is not None else []
    size = record.size if record is not None and record.size else len(members)
    every = record is not None and not members and size == world
    if name == UNNAMED:
        members, size = [], 0
    elif not members and users and not every:
        members, size = sorted(users), size or len(users)
    role = evidence.role()
    stages, at_least = 0, False
    if role is Role.PIPELINE:
        # Every stage sends to or receives from a neighbour: the peers of all
        # ranks name every stage; some ranks' peers, a few of them (two at least).
        stages = size or max(PIPELINE_MIN_STAGES, max(peers, default=0) + 1)
        at_least = not size and len(users) < world
    return GroupLayout(name, record.desc if record is not None else "", members, size,
                       sorted(users), role, evidence, stages, at_least, every)


def _with_degrees(world: int, read: list[int], groups: list[GroupLayout],
                  sharded: list[ShardedOp]) -> Layout:
    """Each dimension's degree: its groups' size (a pipeline's stages); data
    parallel's, where its group is not named, what the others leave of the world."""
    def degree(role: Role) -> int:
        found = [0 if g.at_least else g.stages if role is Role.PIPELINE else g.size
                 for g in groups if g.role is role]
        if not found:
            return 1
        return max(found) if all(found) else 0

    tp, pp, ep = degree(Role.TENSOR), degree(Role.PIPELINE), degree(Role.EXPERT)
    dp = degree(Role.DATA)
    if dp == 0 and tp and pp and ep and world % (tp * pp * ep) == 0:
        dp = world // (tp * pp * ep)
    return Layout(world, read, groups, tp, pp, ep, dp, sharded)


def _sharded_ops(ranks: Sequence[RankLayout]) -> list[ShardedOp]:
    total: dict[str, Counter[int]] = {}
    for r in ranks:
        for name, degrees in r.sharded_ops.items():
            total.setdefault(name, Counter()).update(degrees)
    return [ShardedOp(name, sum(d.values()), d.most_common(1)[0][0])
            for name, d in sorted(total.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))]

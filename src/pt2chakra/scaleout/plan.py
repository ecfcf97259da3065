"""What a recorded job is, and the plan to scale it from N to M ranks: which
recorded rank each new rank is cloned from, and every refusal of what the
trace cannot tell.

The job must be data-parallel replicas only: by the layout read from the
trace (``rules/layout.py``, the one home of that rule), no tensor-parallel
group (activation collectives: DTensor, functional collectives), no pipeline
(sends and receives) and no expert exchange (all-to-all), each refused in one
line naming the layout and its evidence, both dimensions where data parallel
is one of two; then every collective on a group that every recorded rank
uses (the world), no group that only some ranks use (the shard and replica
groups of hybrid sharding, whose growth with M the trace does not say). A
group counts as the world when all N rank files hold collectives on it: each
rank reaches only its own groups' collectives, so that is proof, not a guess.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.process_groups import ProcessGroupRecord
from pt2chakra.chakra.ranks import open_rank_set
from pt2chakra.chakra.records import NodeType, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.layout import (
    FSDP1_MARK,
    FSDP2_MARK,
    Layout,
    LayoutReader,
    RankLayout,
    Role,
    job_layout,
)
from pt2chakra.scaleout.retime import OPTION as RETIME_OPTION
from pt2chakra.scaleout.retime import TensorParallelChange
from pt2chakra.scaleout.rules import SizeRule, comm_type_of, issuing_calls, size_rule

# The largest target world size: the generated-trace limit of the CLI (--npus).
MAX_WORLD_SIZE = 65536

# Job kinds.
DDP, FSDP1, FSDP2, SHARDED = "data parallel (replicated)", "FSDP1", "FSDP2", "sharded (ZeRO/FSDP)"
TENSOR_PARALLEL = "tensor parallel"


class CommFact(NamedTuple):
    """One communication node as the plan sees it."""

    pg: str
    node_type: int
    comm_type: int
    call: str | None  # the c10d call that issued it
    rule: SizeRule


class RankFacts(NamedTuple):
    """What planning needs of one recorded rank file (its nodes are dropped)."""

    path: str
    rank: int
    world_size: int  # metadata world_size (0 when absent)
    groups: dict[str, ProcessGroupRecord]  # pg_name -> its declared record
    comms: list[CommFact]
    step_us: float | None
    fsdp_marks: frozenset[str]
    layout: RankLayout  # its part of the job's layout (rules/layout.py)


class ScalePlan(NamedTuple):
    """The N -> M plan: ``sources[r]`` is the recorded rank new rank r is cloned from."""

    recorded: int  # N
    target: int  # M
    paths: dict[int, str]  # recorded rank -> file
    sources: list[int]
    representative: int  # the rank clones beyond the recorded ones come from
    job_kind: str
    rules: dict[str, int]  # "<collective> <rule>" -> count on the representative
    layout: str = ""  # the recorded job's layout in one line (rules/layout.py)
    # A change of the tensor-parallel degree (None: data-parallel scale-out)
    tensor_parallel: TensorParallelChange | None = None
    # The recorded step (the slowest rank's window; None: no window recorded)
    recorded_step_us: float | None = None

    def scaling(self) -> str:
        """What changes, in words (the summaries' heads)."""
        if self.tensor_parallel is not None:
            return f"tensor parallel {self.recorded} -> {self.target}"
        return "weak scaling"

    def targets_of(self, source: int) -> list[int]:
        return [r for r, s in enumerate(self.sources) if s == source]


def rank_facts(path: str) -> RankFacts:
    """Read one recorded rank file for planning (its layout in the same pass)."""
    metadata, node_iter = read_et(path)
    nodes = list(node_iter)
    md = attr_dict(metadata.attrs)
    reader = LayoutReader(metadata, path)
    for n in nodes:
        reader.add(n)
    layout = reader.result()
    rank, world = layout.rank, md.get("world_size")
    if rank is None:
        raise InputError(path, "no rank in its metadata or name: extrapolate needs every "
                         "recorded rank's file as convert writes it")
    calls = issuing_calls(nodes)
    comms = []
    for n in nodes:
        if n.type not in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE,
                          NodeType.COMM_RECV_NODE):
            continue
        a = attr_dict(n.attrs)
        ctype = comm_type_of(a)
        call = calls.get(n.id)
        comms.append(CommFact(str(a.get("pg_name", "")), int(n.type), ctype, call,
                              size_rule(ctype, call)))
    start, end = md.get("step_start_micros"), md.get("step_end_micros")
    step = float(end - start) if type(start) is int and type(end) is int else None
    return RankFacts(path, rank, world if type(world) is int else 0,
                     {g.name: g for g in layout.declared}, comms, step, layout.marks, layout)


# Why a layout other than data parallel alone does not scale out.
_NOT_IN_TRACE = {
    Role.PIPELINE: "the pipeline degree at M ranks is not in the trace",
    Role.TENSOR: "its tensor-parallel degree at M ranks is not in the trace, and its ranks "
                 "are no data-parallel replicas",
    Role.EXPERT: "its degree at M ranks is not in the trace",
    Role.MIXED: "which of the roles grows to reach M ranks is not in the trace",
}


def _refuse_layout(facts: Sequence[RankFacts]) -> Layout:
    """Anything but data parallel, named by its layout and evidence; with a
    data-parallel dimension beside it, both dimensions (growing only that
    one would need the other groups rebuilt, which the rewrite does not do)."""
    layout = job_layout([f.layout for f in facts], len(facts))
    roles = layout.non_data_roles()
    if not roles:
        return layout
    first = layout.groups_of(roles[0])[0]
    where = next((f.path for f in facts if f.rank in first.users), facts[0].path)
    why = ("growing only its data-parallel dimension is not supported"
           if layout.groups_of(Role.DATA) else _NOT_IN_TRACE[roles[0]])
    raise InputError(where, f"{layout.describe()}: {why}; only data-parallel jobs scale out")


def _tensor_parallel_layout(facts: Sequence[RankFacts]) -> Layout:
    """A degree change needs a job of one dimension, tensor parallel, its
    group spanning every rank (a data or pipeline dimension beside it would
    need its groups rebuilt): anything else in one line."""
    layout = job_layout([f.layout for f in facts], len(facts))
    roles = list(layout.non_data_roles()) + ([Role.DATA] if layout.groups_of(Role.DATA)
                                                    else [])
    if roles != [Role.TENSOR] or layout.tp != len(facts):
        raise InputError(facts[0].path, f"{layout.describe()}: {RETIME_OPTION} changes a job "
                         "of one tensor-parallel group spanning every rank (DTensor), no other "
                         "dimension")
    return layout


def _group_size(facts: Sequence[RankFacts], pg: str, users: int) -> int:
    sizes = [f.groups[pg].size for f in facts if pg in f.groups and f.groups[pg].size > 0]
    return max(sizes) if sizes else users


def _refuse_subgroups(facts: Sequence[RankFacts]) -> str:
    """Every collective's group must be the world; returns the job kind
    (replicated, or sharded: FSDP1 / FSDP2)."""
    n = len(facts)
    users: Counter[str] = Counter()
    for f in facts:
        users.update({c.pg for c in f.comms})
    sub = {pg: _group_size(facts, pg, k) for pg, k in users.items() if k < n}
    sharded_pgs = {c.pg for f in facts for c in f.comms if c.rule is SizeRule.SHARDED}
    if sub:
        shard = sorted({s for pg, s in sub.items() if pg in sharded_pgs})
        replica = sorted({s for pg, s in sub.items() if pg not in sharded_pgs})
        first = facts[0].path
        if shard and replica:
            raise InputError(first, f"hybrid sharding (shard groups of {shard[0]} and replica "
                             f"groups of {replica[0]} ranks): which of them grows to reach M ranks "
                             "is not in the trace; record it fully sharded or pure replicated")
        if shard:
            raise InputError(first, f"sharded collectives on groups of {shard[0]} of {n} ranks "
                             "without their replica groups: hybrid sharding needs both group "
                             "kinds recorded")
        pg, size = sorted(sub.items())[0]
        raise InputError(first, f"process group {pg!r} has {size} of {n} ranks: not a "
                         "data-parallel replica group (tensor or pipeline parallel degree is "
                         "not in the trace)")
    for f in facts:
        for pg in users:
            size = _group_size([f], pg, n)
            if size != n:
                raise InputError(f.path, f"process group {pg!r} declares {size} ranks but all "
                                 f"{n} recorded ranks use it")
    if not sharded_pgs:
        return DDP
    marks = frozenset().union(*(f.fsdp_marks for f in facts))
    return FSDP2 if FSDP2_MARK in marks else FSDP1 if FSDP1_MARK in marks else SHARDED


def representative(facts: Sequence[RankFacts]) -> int:
    """The rank whose work the new ranks copy: not rank 0 (the root of
    broadcasts, logging, checkpoints), the median recorded step among the
    others (ties: the lowest rank). Rank 0 alone when it is all there is."""
    others = [f for f in facts if f.rank != 0]
    if not others:
        return 0
    timed = [f for f in others if f.step_us is not None]
    if not timed:
        return others[-1].rank
    median = statistics.median_low([f.step_us for f in timed if f.step_us is not None])
    return min(f.rank for f in timed if f.step_us == median)


def plan(paths: Sequence[str | os.PathLike[str]], target: int, scaling: str = "weak",
         tensor_parallel: bool = False) -> ScalePlan:
    """Check the recorded job and plan its scale-out to ``target`` ranks
    (``InputError`` for everything the trace cannot tell); with
    ``tensor_parallel``, a job whose tensor-parallel group spans every rank
    taken to degree ``target`` instead."""
    names = [os.fspath(p) for p in paths]
    if not names:
        raise InputError("extrapolate", "no .et file given")
    if scaling != "weak":
        raise InputError("--scaling", "a fixed global batch (strong scaling) divides per-rank "
                         "work by a rule the trace does not hold; only weak scaling (per-rank "
                         "batch fixed) is supported")
    if not 1 <= target <= MAX_WORLD_SIZE:
        raise InputError("--world-size", f"must be 1..{MAX_WORLD_SIZE}")
    rank_set = open_rank_set(names)  # one job's files, in rank order (chakra/ranks.py)
    facts = [rank_facts(p) for p in rank_set.paths]
    n = len(facts)
    ranks = rank_set.ranks
    if ranks != list(range(n)):
        missing = min(set(range(max(ranks) + 1)) - set(ranks))
        raise InputError(rank_set.paths[0], f"rank {missing} is missing: give every recorded "
                         "rank 0..N-1 once")
    for f in facts:
        if f.world_size and f.world_size != n:
            raise InputError(f.path, f"world_size {f.world_size} in its metadata but {n} rank "
                             "files given: give every recorded rank")
    layout = _tensor_parallel_layout(facts) if tensor_parallel else _refuse_layout(facts)
    if not any(f.comms for f in facts) and n > 1:
        raise InputError(facts[0].path, "no collective: nothing says the ranks are "
                         "data-parallel replicas")
    kind = _refuse_subgroups(facts)
    rep = representative(facts)
    sources = [r if r < n else rep for r in range(target)]
    rules: Counter[str] = Counter()
    for c in facts[rep].comms:
        rules[f"{_type_name(c.comm_type)} ({c.call or 'call unknown'}): {c.rule.value}"] += 1
    change = TensorParallelChange(n, target) if tensor_parallel else None
    return ScalePlan(n, target, {f.rank: f.path for f in facts}, sources, rep,
                     TENSOR_PARALLEL if tensor_parallel else kind, dict(rules),
                     layout.describe(), change,
                     max((f.step_us for f in facts if f.step_us is not None), default=None))


def _type_name(comm_type: int) -> str:
    from pt2chakra.chakra.records import CollectiveType

    try:
        return CollectiveType(comm_type).name.lower()
    except ValueError:
        return "collective"

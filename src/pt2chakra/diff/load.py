"""One run as ``diff`` reads it: per rank, the timed nodes as columns (start,
end, lane, dependencies), the measured step window and where each rank sits
on the run's common axis.

Every rule comes from its home: lanes (``conventions.lane_of``), the rank of
a file (``chakra.ranks``), the measured step (``conventions.step_window``),
rank start offsets (``conventions.rank_origins``) and how collectives meet
(``rules.rendezvous``).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from functools import cached_property
from itertools import compress
from operator import attrgetter
from typing import Any, NamedTuple

from pt2chakra.chakra.dep_kinds import dep_kinds_of
from pt2chakra.chakra.lean_read import read_et_apart
from pt2chakra.chakra.process_groups import read_process_groups
from pt2chakra.chakra.ranks import open_rank_set
from pt2chakra.chakra.records import NodeType, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.arrivals import Arrival, arrivals_of
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    INCLUSIVE_ATTR,
    PREDICTED_SETTING_ATTR,
    STEP_PERIOD,
    STEP_SPAN,
    StepWindow,
    inclusive_micros,
    is_gpu,
    is_period_step,
    lane_of,
    rank_origins,
    run_measured_step,
    step_window_from,
)
from pt2chakra.rules.group_resolution import RankOps, rank_set_keys
from pt2chakra.rules.rendezvous import RendezvousKey, comm_op

# The node attributes diff reads (the lean reader decodes only these).
DIFF_ATTRS = frozenset({"is_cpu_op", "tid", "device", "stream", "pg_name", "comm_channel",
                        "comm_seq", "comm_src", "comm_dst", "data_dep_kinds", INCLUSIVE_ATTR,
                        # what the rank set reads to tell an unnamed node's group
                        "comm_type", "comm_size"})
# How collectives of one run are matched across ranks: by rendezvous key, the
# alignment every consumer uses (conventions.rank_origins: shared clock or not).
ALIGN = "auto"


class RankTrace:
    """One rank's timed nodes as parallel columns (index = position)."""

    __slots__ = ("rank", "source", "ids", "names", "types", "start", "end", "lane", "is_cpu",
                 "deps", "tid", "comm_key", "window", "period", "origin", "setting")

    def __init__(self, rank: int, source: str) -> None:
        self.rank = rank
        self.source = source
        self.setting = ""  # a replay's setting (simulate --write-et), else ""
        self.ids: list[int] = []
        self.names: list[str] = []
        self.types: list[int] = []
        self.start: list[float] = []
        self.end: list[float] = []  # CPU ops: start + inclusive time; others: start + duration
        self.lane: list[tuple[Any, ...]] = []
        self.is_cpu: list[bool] = []
        self.deps: list[list[tuple[int, str]]] = []  # (index, kind) of each data dependency
        self.tid: list[Any] = []
        self.comm_key: dict[int, RendezvousKey] = {}  # index -> rendezvous key
        self.window = StepWindow(0.0, 0.0)
        self.period = False
        self.origin = 0.0  # where the rank's step starts on the run's common axis

    @property
    def step_us(self) -> float:
        return self.window.end - self.window.start

    def on_axis(self, t: float) -> float:
        """A time of this rank's clock on the run's common axis."""
        return t - self.window.start + self.origin


class Run:
    """The ranks of one run (ordered by rank) and its measured step."""

    def __init__(self, label: str, ranks: list[RankTrace], align: str) -> None:
        self.label = label
        self.ranks = ranks
        self.by_rank = {r.rank: r for r in ranks}
        self.align = align  # as rank_origins resolved it: recorded or together

    @cached_property
    def arrivals(self) -> dict[RendezvousKey, Arrival]:
        """Each collective's straggler, the others' wait and the last arrival,
        on the run's common axis (``rules.arrivals``)."""
        starts: dict[RendezvousKey, list[tuple[float, int]]] = defaultdict(list)
        for r in self.ranks:
            for i, key in r.comm_key.items():
                starts[key].append((r.on_axis(r.start[i]), r.rank))
        return arrivals_of(starts)

    @property
    def step_us(self) -> float:
        """The run's measured step (``conventions.run_measured_step``)."""
        return run_measured_step([r.window for r in self.ranks], self.align)

    def step_rank(self) -> RankTrace:
        """The rank whose step ends last: the one that defines the run's step."""
        return max(self.ranks, key=lambda r: (r.origin + r.step_us, -r.rank))

    @property
    def step_definition(self) -> str:
        return STEP_PERIOD if any(r.period for r in self.ranks) else STEP_SPAN


def load_run(label: str, paths: Sequence[str | os.PathLike[str]], force: bool = False) -> Run:
    """Read every rank of one run (``chakra.ranks``: refused unless it can be
    one job, or ``force``); refuse a run without a measured step."""
    if not paths:
        raise InputError(label, "no .et file given")
    rank_set = open_rank_set(paths, force)
    loaded = [_load_rank(path, rank) for path, rank in zip(rank_set.paths, rank_set.ranks)]
    ranks = [trace for trace, _comms in loaded]
    _key_comms(loaded)
    origins, align = rank_origins([r.window for r in ranks], ALIGN)
    for r, origin in zip(ranks, origins):
        r.origin = origin
    return Run(label, ranks, align)


class _NodeClass(NamedTuple):
    """What diff reads from one shared attribute list (with the node type):
    decoded once for every node that shares it."""

    attrs: dict[str, Any]
    cpu: bool
    lane: tuple[Any, ...]
    tid: Any


def _classes(attr_lists: list[list[Any]], types: list[int]) -> list[_NodeClass]:
    """Each node's ``_NodeClass``: the lean reader shares one attribute list
    between nodes with equal attributes, so each list is decoded once (the
    nodes keep the lists alive, so their ids stay unique meanwhile)."""
    keys = list(zip(map(id, attr_lists), types))
    first = dict(zip(keys, zip(attr_lists, types)))
    decoded = {key: _node_class(attrs, node_type) for key, (attrs, node_type) in first.items()}
    return list(map(decoded.__getitem__, keys))


def _node_class(attr_list: list[Any], node_type: int) -> _NodeClass:
    attrs = attr_dict(attr_list)
    return _NodeClass(attrs, not is_gpu(attrs), lane_of(node_type, attrs).key, attrs.get("tid"))


def _dep_kinds(classes: list[_NodeClass], data_deps: list[list[int]]) -> list[list[str]]:
    """Each node's dependency kinds (``dep_kinds_of``), decoded once per
    attribute list and dependency count (shared, read only)."""
    keys = list(zip(map(id, classes), map(len, data_deps)))
    first = dict(zip(keys, zip(classes, data_deps)))
    decoded = {key: dep_kinds_of(deps, cls.attrs) for key, (cls, deps) in first.items()}
    return list(map(decoded.__getitem__, keys))


class _RankComm(NamedTuple):
    """A rank's communication before it is keyed (keys need every rank's:
    ``group_resolution.rank_set_keys``) and each node's index."""

    ops: RankOps
    position: dict[int, int]  # node id -> index in the rank's columns


def _key_comms(loaded: Sequence[tuple[RankTrace, _RankComm]]) -> None:
    """Each rank's communication keyed by the shared matching rule, the
    groups of unnamed nodes resolved across the run's ranks."""
    for (trace, comms), keys in zip(loaded, rank_set_keys([c.ops for _t, c in loaded])):
        for node_id, key in keys.items():
            trace.comm_key[comms.position[node_id]] = key


def _load_rank(path: str, rank: int) -> tuple[RankTrace, _RankComm]:
    metadata, all_nodes = read_et_apart(path, DIFF_ATTRS, INCLUSIVE_ATTR)
    md = attr_dict(metadata.attrs)
    trace = RankTrace(rank, path)
    trace.period = is_period_step(md)
    setting = md.get(PREDICTED_SETTING_ATTR)
    trace.setting = setting if isinstance(setting, str) else ""
    # untimed nodes (metadata, neither start nor duration): nothing to attribute
    timed = [n.type != NodeType.METADATA_NODE and bool(n.start_time_micros or n.duration_micros)
             for n in all_nodes]
    nodes = list(compress(all_nodes, timed))
    if not nodes:
        raise InputError(path, "no timed node: diff compares measured (or replayed) times")
    inclusive = list(compress(all_nodes.apart, timed))
    starts: list[int] = list(map(attrgetter("start_time_micros"), nodes))
    durations = list(map(float, map(attrgetter("duration_micros"), nodes)))
    node_types = list(map(attrgetter("type"), nodes))
    classes = _classes(list(map(attrgetter("attrs"), nodes)), node_types)
    for k in [k for k, x in enumerate(inclusive) if math.isnan(x)]:
        inclusive[k] = inclusive_micros(nodes[k], classes[k].attrs)
    trace.ids = list(map(attrgetter("id"), nodes))
    trace.names = list(map(attrgetter("name"), nodes))
    trace.types = list(map(int, node_types))
    trace.start = list(map(float, starts))
    trace.is_cpu = list(map(attrgetter("cpu"), classes))
    trace.end = [s + (max(incl, d) if cpu else d)
                 for s, d, incl, cpu in zip(trace.start, durations, inclusive, trace.is_cpu)]
    trace.lane = list(map(attrgetter("lane"), classes))
    trace.tid = list(map(attrgetter("tid"), classes))
    data_deps = list(map(attrgetter("data_deps"), nodes))
    index_of = dict(zip(trace.ids, range(len(nodes))))
    trace.deps = [[(index_of[d], kind) for d, kind in zip(deps, kinds) if d in index_of]
                  for deps, kinds in zip(data_deps, _dep_kinds(classes, data_deps))]
    comm_ops = [(i, comm_op(nodes[i], classes[i].attrs))
                for i, node_type in enumerate(node_types) if node_type in COMM_NODE_TYPES]
    comms = _RankComm(RankOps(trace.rank, read_process_groups(metadata, path),
                              [op for _i, op in comm_ops]),
                      {op.node: i for i, op in comm_ops})
    window = step_window_from(md, starts, durations, inclusive)
    if window is None or window.end <= window.start:
        raise InputError(path, "no measured step (step_start_micros / step_end_micros, or "
                         "timed nodes)")
    trace.window = window
    return trace, comms

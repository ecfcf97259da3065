"""Event-driven replay of Chakra graphs: predicted step time vs measured.

A node starts when every dependency has *completed* and its lane (a CPU
thread or a GPU stream of one rank) is free, and holds the lane for its
duration. On CPU lanes the measured idle time before a top-level op (Python
and framework overhead that no op's duration holds) is replayed as a delay.
Collectives with the same process group and sequence start together once
every participating rank has reached them. O((nodes + edges) log nodes).
"""

from __future__ import annotations

import heapq
import logging
import os
from collections import defaultdict
from collections.abc import Sequence

import msgspec

from pt2chakra.chakra_io import read_et
from pt2chakra.model import ChakraNode, GlobalMetadata, NodeType

log = logging.getLogger(__name__)

COMM_TYPES = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)


class LaneStats(msgspec.Struct):
    lane: str
    busy_us: float
    nodes: int


class RankResult(msgspec.Struct):
    rank: int
    source: str
    nodes: int
    predicted_step_us: float
    measured_step_us: float
    error_pct: float | None
    lanes: list[LaneStats]


class SimulationResult(msgspec.Struct):
    ranks: list[RankResult]
    predicted_step_us: float
    measured_step_us: float
    error_pct: float | None

    def summary(self) -> str:
        lines = []
        for r in self.ranks:
            err = f"{r.error_pct:+.2f} %" if r.error_pct is not None else "n/a (no timing)"
            lines.append(f"rank {r.rank} ({os.path.basename(r.source)}): predicted "
                         f"{r.predicted_step_us:.0f} us, measured {r.measured_step_us:.0f} us, "
                         f"error {err}, {r.nodes} nodes on {len(r.lanes)} lanes")
        err = f"{self.error_pct:+.2f} %" if self.error_pct is not None else "n/a"
        lines.append(f"step: predicted {self.predicted_step_us:.0f} us, measured "
                     f"{self.measured_step_us:.0f} us, error {err}")
        return "\n".join(lines)


class _SimNode:
    __slots__ = ("rank", "node", "lane", "dur", "delay", "waiting", "children", "comm_key",
                 "order", "is_gpu")

    def __init__(self, rank: int, node: ChakraNode, lane: tuple, dur: float, is_gpu: bool) -> None:
        self.rank = rank
        self.node = node
        self.lane = lane
        self.dur = dur
        self.delay = 0.0
        self.waiting = 0
        self.children: list[_SimNode] = []
        self.comm_key: tuple | None = None
        self.order = (node.start_time_micros, node.id)
        self.is_gpu = is_gpu


def _attrs(node: ChakraNode) -> dict:
    return {a[0]: a[2] for a in node.attrs}


def _lane_of(rank: int, node: ChakraNode, attrs: dict) -> tuple[tuple, bool]:
    if attrs.get("is_cpu_op", False):
        return ("cpu", rank, attrs.get("tid", 0)), False
    if "stream" in attrs:
        return ("gpu", rank, attrs.get("device", 0), attrs["stream"]), True
    if node.type in COMM_TYPES:
        return ("comm", rank, attrs.get("pg_name", "")), True
    return ("cpu", rank, attrs.get("tid", 0)), False


def _prepare_rank(rank: int, nodes: Sequence[ChakraNode]) -> tuple[list[_SimNode], float, float]:
    """Sim nodes with lanes, CPU gap delays and dependency counts; also the
    measured span (start, end) of the step."""
    sims: dict[int, _SimNode] = {}
    inclusive: dict[int, float] = {}
    timed = [n for n in nodes if n.start_time_micros or n.duration_micros]
    step_start = min((n.start_time_micros for n in timed), default=0)
    step_end = max((n.start_time_micros + n.duration_micros for n in timed), default=0)
    comm_counter: dict[str, int] = defaultdict(int)
    for n in nodes:
        a = _attrs(n)
        lane, is_gpu = _lane_of(rank, n, a)
        sim = _SimNode(rank, n, lane, float(n.duration_micros), is_gpu)
        if n.type in COMM_TYPES:
            pg = str(a.get("pg_name", ""))
            seq = a.get("comm_seq")
            if seq is None:
                seq = comm_counter[pg]
                comm_counter[pg] += 1
                sim.comm_key = (pg, "order", seq)
            else:
                sim.comm_key = (pg, "seq", seq)
        sims[n.id] = sim
        inclusive[n.id] = float(a.get("inclusive_duration_micros", n.duration_micros))
    # Idle gaps on CPU lanes: time no op covers, charged to the op after it.
    covered_until: dict[tuple, float] = {}
    for sim in sorted(sims.values(), key=lambda s: s.order):
        if sim.is_gpu:
            continue
        start = float(sim.node.start_time_micros)
        until = covered_until.get(sim.lane, float(step_start))
        if start > until:
            sim.delay = start - until
        covered_until[sim.lane] = max(until, start + inclusive[sim.node.id])
    for sim in sims.values():
        for d in sim.node.data_deps:
            parent = sims.get(d)
            if parent is not None:
                parent.children.append(sim)
                sim.waiting += 1
    return list(sims.values()), float(step_start), float(step_end)


def simulate(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
             sources: Sequence[str] | None = None) -> SimulationResult:
    """Replay one or more ranks together."""
    per_rank: list[tuple[list[_SimNode], float, float]] = []
    for rank, (_md, nodes) in enumerate(graphs):
        per_rank.append(_prepare_rank(rank, nodes))
    # Collective rendezvous: how many ranks take part in each key.
    participants: dict[tuple, int] = defaultdict(int)
    for sims, _, _ in per_rank:
        for s in sims:
            if s.comm_key is not None:
                participants[s.comm_key] += 1

    events: list[tuple[float, int, _SimNode]] = []  # completion events
    seq = 0
    lane_free: dict[tuple, float] = defaultdict(float)
    lane_busy: dict[tuple, bool] = defaultdict(bool)
    ready: dict[tuple, list[tuple[tuple, int, _SimNode]]] = defaultdict(list)
    arrived: dict[tuple, list[tuple[float, _SimNode]]] = defaultdict(list)
    finish: dict[int, float] = {}  # id(sim) -> completion time
    busy: dict[tuple, float] = defaultdict(float)
    count: dict[tuple, int] = defaultdict(int)
    verbose = log.isEnabledFor(logging.INFO)

    def start_node(sim: _SimNode, at: float) -> None:
        nonlocal seq
        end = at + sim.dur
        busy[sim.lane] += sim.dur
        count[sim.lane] += 1
        if verbose:
            kind = "GPU" if sim.is_gpu else "CPU"
            where = f"stream {sim.lane[-1]}" if sim.is_gpu else f"thread {sim.lane[-1]}"
            log.info("Issuing %s node %d (%s) at %.0fus on %s with duration %.0fus",
                     kind, sim.node.id, sim.node.name, at, where, sim.dur)
        seq += 1
        heapq.heappush(events, (end, seq, sim))

    def try_lane(lane: tuple, now: float) -> None:
        if lane_busy[lane] or not ready[lane]:
            return
        _, _, sim = heapq.heappop(ready[lane])
        lane_busy[lane] = True
        at = max(now, lane_free[lane] + sim.delay)
        if sim.comm_key is not None and participants[sim.comm_key] > 1:
            group = arrived[sim.comm_key]
            group.append((at, sim))
            if len(group) == participants[sim.comm_key]:
                begin = max(t for t, _ in group)
                for _, member in group:
                    start_node(member, begin)
            return
        start_node(sim, at)

    for rank_offset, (sims, step_start, _) in enumerate(per_rank):
        del rank_offset
        for s in sims:
            if s.waiting == 0:
                heapq.heappush(ready[s.lane], (s.order, id(s), s))
    for lane in list(ready):
        try_lane(lane, 0.0)
    # Lanes start at the rank's own step start (delays are relative to it).
    while events:
        now, _, sim = heapq.heappop(events)
        finish[id(sim)] = now
        if verbose:
            log.info("%s node %d completed at %.0fus", "GPU" if sim.is_gpu else "CPU",
                     sim.node.id, now)
        lane_busy[sim.lane] = False
        lane_free[sim.lane] = now
        touched = {sim.lane}
        for child in sim.children:
            child.waiting -= 1
            if child.waiting == 0:
                heapq.heappush(ready[child.lane], (child.order, id(child), child))
                touched.add(child.lane)
        for lane in touched:
            try_lane(lane, now)

    results: list[RankResult] = []
    for rank, (sims, step_start, step_end) in enumerate(per_rank):
        done = [finish[id(s)] for s in sims if id(s) in finish]
        predicted = max(done, default=0.0)
        measured = step_end - step_start
        unfinished = len(sims) - len(done)
        if unfinished:
            log.warning("rank %d: %d nodes never ran (waiting on a collective or a cycle)",
                        rank, unfinished)
        lanes = sorted({s.lane for s in sims}, key=str)
        results.append(RankResult(
            rank=rank, source=sources[rank] if sources else f"rank{rank}", nodes=len(sims),
            predicted_step_us=predicted, measured_step_us=measured,
            error_pct=(predicted - measured) / measured * 100 if measured > 0 else None,
            lanes=[LaneStats(lane=":".join(map(str, lane)), busy_us=busy[lane], nodes=count[lane])
                   for lane in lanes]))
    predicted = max((r.predicted_step_us for r in results), default=0.0)
    measured = max((r.measured_step_us for r in results), default=0.0)
    return SimulationResult(ranks=results, predicted_step_us=predicted, measured_step_us=measured,
                            error_pct=(predicted - measured) / measured * 100 if measured > 0
                            else None)


def simulate_files(paths: Sequence[str]) -> SimulationResult:
    graphs = []
    for path in paths:
        metadata, nodes = read_et(path)
        graphs.append((metadata, list(nodes)))
    return simulate(graphs, sources=list(paths))

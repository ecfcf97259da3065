"""Event-driven replay of Chakra graphs: predicted step time vs measured.

The model (docs/SIMULATE.md has the long form):

* **Lanes.** Every CPU thread and every GPU stream of every rank is a lane. A
  node starts when all its dependencies have *completed* and its lane is free,
  and holds the lane for its duration. Ready nodes of one lane run in recorded
  order. No time stepping: a heap of events, O((nodes + edges) log nodes).
* **CPU gaps.** The measured idle time before an op on a CPU thread (Python
  and framework overhead that no op's duration holds) is replayed as a delay.
* **Synchronisation.** A CPU op that blocked on the GPU (a synchronous memcpy,
  ``.item()``, a stream synchronize: the converter's ``gpu_sync`` edges) has a
  measured duration that *includes* the wait. The wait is taken out and
  replaced by the dependency: the op ends at
  ``max(start + own work, GPU producer end + post-return time)``, and the GPU
  work it launches is released when it issues it, not when it returns.
* **Collectives.** Matched across ranks by process group and ``comm_seq`` (or
  order of appearance). A collective starts when every participant has
  reached it; all participants end together. A measured NCCL kernel duration
  includes the time spent waiting for the slowest peer, so the intrinsic
  duration is the *minimum* measured over the participants (the last rank to
  arrive waits for nobody). With ``bandwidth_gbps`` and ``latency_us`` set, a
  network model (ring / tree cost factors, sim_network.py) gives it instead.
* **Ranks** start at their recorded offsets on the shared clock when the
  traces agree on one (``align="auto"``), or all together.
* **What-if knobs**: scale compute (GPU kernels), CPU time, network bandwidth;
  spread collectives over N communication streams.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
from collections import defaultdict
from collections.abc import Sequence

import msgspec

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.simulation.prepare import (  # noqa: F401  (categories are part of the API)
    CATEGORY_NAMES,
    COMM,
    COMM_TYPES,
    CPU_GAP,
    CPU_OP,
    EDGE_KIND_NAMES,
    GPU_COMPUTE,
    GPU_CPU_GAP,
    GPU_MEMCPY,
    K_LANE,
    K_LAUNCH,
    K_START,
    WAIT,
    _meta,
    _prepare,
    _Prepared,
)

log = logging.getLogger(__name__)

# lane freed at t can take a node that starts at t.
_EV_COMPLETE, _EV_CPU_DONE, _EV_ISSUE, _EV_START = 0, 1, 2, 3


# --------------------------------------------------------------------------
# Configuration and results
# --------------------------------------------------------------------------


class SimConfig(msgspec.Struct, frozen=True):
    """One simulation setting. Defaults replay the measured durations."""

    compute_scale: float = 1.0  # GPU kernel durations (not memcpy, not comm)
    cpu_scale: float = 1.0  # CPU op durations and replayed gaps
    bandwidth_scale: float = 1.0  # network bandwidth (comm durations / this)
    comm_streams: int = 0  # 0: as recorded; N: collectives round-robin on N streams
    bandwidth_gbps: float | None = None  # with latency_us: network model
    latency_us: float | None = None
    algorithm: str = "ring"  # network model: "ring" or "tree"
    align: str = "auto"  # rank start offsets: "auto", "recorded", "together"

    def label(self) -> str:
        parts = [f"compute x{self.compute_scale:g}", f"cpu x{self.cpu_scale:g}",
                 f"bandwidth x{self.bandwidth_scale:g}",
                 f"comm streams {self.comm_streams or 'as recorded'}"]
        return ", ".join(parts)


class LaneStats(msgspec.Struct):
    lane: str
    busy_us: float
    idle_us: float
    nodes: int
    idle_gaps: int  # number of idle intervals between the rank's start and its last op


class RankResult(msgspec.Struct):
    rank: int
    source: str
    nodes: int
    predicted_step_us: float
    measured_step_us: float
    error_pct: float | None
    start_offset_us: float
    lanes: list[LaneStats]
    unfinished: int = 0


class CriticalPath(msgspec.Struct):
    length_us: float
    nodes: int
    rank_crossings: int  # times the path moves to another rank (collectives)
    by_node_type: dict[str, float]  # category -> microseconds
    by_edge_kind: dict[str, float]  # kind of the edge that made each step critical -> us
    top_nodes: list[dict]  # longest nodes on the path


class WhatIf(msgspec.Struct):
    compute_scale: float
    cpu_scale: float
    bandwidth_scale: float
    comm_streams: int
    predicted_step_us: float
    speedup: float  # baseline predicted / this predicted


class SimulationResult(msgspec.Struct):
    ranks: list[RankResult]
    predicted_step_us: float
    measured_step_us: float
    error_pct: float | None
    align: str
    network_model: str | None
    critical_path: CriticalPath | None = None
    what_if: list[WhatIf] = []
    inferred_stream_waits: int = 0

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

    def to_json(self) -> dict:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


class Schedule(msgspec.Struct):
    """Per-node simulated times of one run (for timelines and plots)."""

    nodes: list[ChakraNode]
    rank: list[int]
    lane: list[int]
    lane_names: list[tuple[int, str, str]]  # (rank, "cpu"|"gpu", label)
    start: list[float]
    end: list[float]
    category: list[int]
    critical: set[int]
    rank_origin: list[float]  # per rank: its simulated start
    step_start: list[float]  # per rank: recorded step start (trace clock)
    align: str
    rank_label: list[int]
    rank_timed: list[bool] = []  # per rank: recorded start times (else no measured schedule)


# --------------------------------------------------------------------------
# Durations per setting
# --------------------------------------------------------------------------


def _durations(p: _Prepared, cfg: SimConfig, participants: dict[tuple, list[int]],
               ) -> tuple[list[float], list[float], dict[tuple, float], str | None]:
    from pt2chakra.simulation.network import collective_time

    dur = list(p.dur)
    delay = list(p.delay)
    cs, cpu = cfg.compute_scale, cfg.cpu_scale
    for i, cat in enumerate(p.cat):
        if cat == GPU_COMPUTE and cs != 1.0:
            dur[i] *= cs
        elif cat == CPU_OP and cpu != 1.0:
            dur[i] *= cpu
            delay[i] *= cpu
        elif cat == GPU_CPU_GAP and cpu != 1.0:
            dur[i] *= cpu
    model = None
    coll: dict[tuple, float] = {}
    use_model = cfg.bandwidth_gbps is not None and cfg.latency_us is not None
    if use_model:
        model = (f"{cfg.algorithm}: latency {cfg.latency_us:g} us, bandwidth "
                 f"{cfg.bandwidth_gbps:g} GB/s")
    for key, members in participants.items():
        if use_model:
            first = members[0]
            t = collective_time(p.comm_type[first], max(p.comm_bytes[m] for m in members),
                                max(len(members), _group_size(p, key, members)),
                                cfg.bandwidth_gbps * cfg.bandwidth_scale,  # type: ignore[operator]
                                cfg.latency_us, cfg.algorithm)  # type: ignore[arg-type]
        else:
            # Measured kernels include waiting for the slowest peer; the last
            # to arrive waited for nobody, and its time is the minimum.
            t = min(p.dur[m] for m in members) / cfg.bandwidth_scale
        coll[key] = t
        for m in members:
            dur[m] = t
    return dur, delay, coll, model


def _group_size(p: _Prepared, key: tuple, members: list[int]) -> int:
    return len(members)


# --------------------------------------------------------------------------
# The event loop
# --------------------------------------------------------------------------


class _Run:
    """Times of one run, indexed like ``_Prepared``."""

    def __init__(self, n: int) -> None:
        self.start = [math.nan] * n
        self.end = [math.nan] * n
        self.bind_pred = [-1] * n
        self.bind_kind = [K_START] * n
        self.bind_time = [0.0] * n
        self.gate_pred = [-1] * n  # sync op: producer that decided its end
        self.issue_time: dict[int, float] = {}
        self.origin: list[float] = []
        self.rank_end: list[float] = []
        self.cpu_scale = 1.0


def _origins(p: _Prepared, align: str) -> tuple[list[float], str]:
    starts = p.step_start
    if not starts:
        return [], "together"
    low = min(starts)
    if align == "auto":
        spread = max(starts) - low
        longest = max((e - s for s, e in zip(p.step_start, p.step_end)), default=0.0)
        align = "recorded" if len(starts) > 1 and spread < longest else "together"
        if len(starts) == 1:
            align = "together"
    if align == "recorded":
        return [s - low for s in starts], align
    return [0.0] * len(starts), "together"


def _run(p: _Prepared, cfg: SimConfig, verbose: bool = False) -> tuple[_Run, str, str | None]:
    n = len(p.nodes)
    participants: dict[tuple, list[int]] = defaultdict(list)
    for i, key in p.comm_key.items():
        participants[key].append(i)
    participants = {k: v for k, v in participants.items() if len(v) > 1}
    dur, delay, _coll, model = _durations(p, cfg, participants)
    origin, align = _origins(p, cfg.align)
    run = _Run(n)
    run.origin = origin
    run.cpu_scale = cfg.cpu_scale

    lanes = len(p.lane_names)
    lane_rank = [r for r, _, _ in p.lane_names]
    lane_free = [origin[r] if origin else 0.0 for r in lane_rank]
    lane_busy = [False] * lanes
    lane_prev = [-1] * lanes
    lane_heap: list[list[tuple[int, int]]] = [[] for _ in range(lanes)]
    waiting = list(p.nwait)
    ready_t = [origin[r] for r in p.rank]
    ready_pred = [-1] * n
    ready_kind = [K_START] * n
    arrived: dict[tuple, list[tuple[float, int, int, int, float]]] = defaultdict(list)
    gate_left = dict(p.sync_gates)
    gate_t: dict[int, float] = {}
    cpu_done: dict[int, float] = {}
    sync, sync_producers, issue_children = p.sync, p.sync_producers, p.issue_children
    comm_key = p.comm_key
    events: list[tuple[float, int, int, int]] = []
    seq = 0
    start_t, end_t = run.start, run.end
    bind_pred, bind_kind, bind_time = run.bind_pred, run.bind_kind, run.bind_time
    heappush, heappop = heapq.heappush, heapq.heappop
    nodes, lane_of, order, cat = p.nodes, p.lane, p.order, p.cat
    multi = len(p.step_start) > 1

    def where(i: int) -> str:
        r, kind, label = p.lane_names[lane_of[i]]
        return f"{label}" if not multi else f"{label} of rank {r}"

    def push(t: float, ev: int, i: int) -> None:
        nonlocal seq
        seq += 1
        heappush(events, (t, ev, seq, i))

    def try_lane(lane: int) -> None:
        if lane_busy[lane] or not lane_heap[lane]:
            return
        _, i = heappop(lane_heap[lane])
        lane_busy[lane] = True
        if lane_free[lane] > ready_t[i]:
            bp, bk, bt = lane_prev[lane], K_LANE, lane_free[lane]
            if bp < 0:
                bk = K_START
        else:
            bp, bk, bt = ready_pred[i], ready_kind[i], ready_t[i]
        at = bt + delay[i]
        key = comm_key.get(i)
        if key is not None and key in participants:
            group = arrived[key]
            group.append((at, i, bp, bk, bt))
            if len(group) == len(participants[key]):
                last = max(group)
                begin = last[0]
                for _, m, _, _, _ in group:
                    bind_pred[m], bind_kind[m], bind_time[m] = last[2], last[3], last[4]
                    push(begin, _EV_START, m)
                del arrived[key]
            return
        bind_pred[i], bind_kind[i], bind_time[i] = bp, bk, bt
        push(at, _EV_START, i)

    def release(i: int, child: int, kind: int, t: float) -> None:
        if t >= ready_t[child]:
            ready_t[child], ready_pred[child], ready_kind[child] = t, i, kind
        waiting[child] -= 1
        if waiting[child] == 0:
            heappush(lane_heap[lane_of[child]], (order[child], child))
            try_lane(lane_of[child])

    def complete(i: int, t: float) -> None:
        end_t[i] = t
        if verbose:
            log.info("%s node %d completed at %.0fus", "CPU" if cat[i] == CPU_OP else "GPU",
                     nodes[i].id, t)
        lane = lane_of[i]
        lane_busy[lane] = False
        lane_free[lane] = t
        lane_prev[lane] = i
        kinds = p.child_kind[i]
        for c, child in enumerate(p.children[i]):
            release(i, child, kinds[c], t)
        gated = sync_producers.get(i)
        if gated:
            for s in gated:
                g = t + sync[s][1] * cfg.cpu_scale
                if g >= gate_t.get(s, -math.inf):
                    gate_t[s] = g
                    run.gate_pred[s] = i
                gate_left[s] -= 1
                if gate_left[s] == 0 and s in cpu_done:
                    push(max(cpu_done.pop(s), gate_t[s]), _EV_COMPLETE, s)
        try_lane(lane)

    for i in range(n):
        if waiting[i] == 0:
            heappush(lane_heap[lane_of[i]], (order[i], i))
    for lane in range(lanes):
        try_lane(lane)

    while events:
        t, ev, _, i = heappop(events)
        if ev == _EV_COMPLETE:
            complete(i, t)
        elif ev == _EV_START:
            start_t[i] = t
            s = sync.get(i)
            if verbose:
                if cat[i] == CPU_OP:
                    log.info("Issuing CPU node %d (%s) at %.0fus on %s with duration %.0fus",
                             nodes[i].id, nodes[i].name, t, where(i), dur[i])
                else:
                    log.info("Issuing GPU node %d (%s) at %.0fus on %s with duration %.0fus",
                             nodes[i].id, nodes[i].name, t, where(i), dur[i])
            if s is None:
                push(t + dur[i], _EV_COMPLETE, i)
            else:
                own, _post, pre = s
                push(t + own * cfg.cpu_scale, _EV_CPU_DONE, i)
                if i in issue_children:
                    push(t + pre * cfg.cpu_scale, _EV_ISSUE, i)
        elif ev == _EV_CPU_DONE:
            if gate_left.get(i, 0) == 0:
                g = gate_t.get(i, t)
                if g > t:
                    push(g, _EV_COMPLETE, i)
                else:
                    run.gate_pred[i] = -1
                    complete(i, t)
            else:
                cpu_done[i] = t
        else:  # _EV_ISSUE
            run.issue_time[i] = t
            for child in issue_children[i]:
                release(i, child, K_LAUNCH, t)
    return run, align, model


# --------------------------------------------------------------------------
# Report pieces
# --------------------------------------------------------------------------


def _critical_path(p: _Prepared, run: _Run, cfg: SimConfig) -> tuple[CriticalPath, set[int]]:
    done = [i for i in range(len(p.nodes)) if not math.isnan(run.end[i])]
    if not done:
        return CriticalPath(0.0, 0, 0, {}, {}, []), set()
    last = max(done, key=lambda i: (run.end[i], -i))
    by_type: dict[str, float] = defaultdict(float)
    by_kind: dict[str, float] = defaultdict(float)
    on_path: set[int] = set()
    crossings = 0
    cur, t = last, run.end[last]
    total = 0.0
    guard = len(p.nodes) + 5
    while cur >= 0 and guard:
        guard -= 1
        on_path.add(cur)
        start = run.start[cur]
        gp = run.gate_pred[cur]
        if gp >= 0 and t >= run.end[cur] and run.end[gp] > start:
            # A sync op whose end waited on the GPU: post-return part, then the producer.
            seg = t - run.end[gp]
            by_type[CATEGORY_NAMES[CPU_OP]] += seg
            by_kind["gpu_sync"] += seg
            total += seg
            if p.rank[gp] != p.rank[cur]:
                crossings += 1
            cur, t = gp, run.end[gp]
            continue
        node_part = max(0.0, min(t, run.end[cur]) - start)
        by_type[CATEGORY_NAMES[p.cat[cur]]] += node_part
        bt = run.bind_time[cur]
        wait = max(0.0, start - bt)
        kind = run.bind_kind[cur]
        if p.cat[cur] == CPU_OP:
            by_type[CPU_GAP] += wait
        elif wait:
            by_type[WAIT] += wait
        by_kind[EDGE_KIND_NAMES[kind]] += node_part + wait
        total += node_part + wait
        pred = run.bind_pred[cur]
        if pred >= 0 and p.rank[pred] != p.rank[cur]:
            crossings += 1
        if pred >= 0 and kind == K_LAUNCH and pred in run.issue_time and \
                abs(run.issue_time[pred] - bt) < 1e-9:
            t = bt  # released at the issue point, mid-op
        else:
            t = bt
        cur = pred
    top = sorted(on_path, key=lambda i: -(run.end[i] - run.start[i]))[:10]
    return CriticalPath(
        length_us=total, nodes=len(on_path), rank_crossings=crossings,
        by_node_type=dict(sorted(by_type.items(), key=lambda kv: -kv[1])),
        by_edge_kind=dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        top_nodes=[{"rank": p.rank[i], "id": p.nodes[i].id, "name": p.nodes[i].name,
                    "category": CATEGORY_NAMES[p.cat[i]],
                    "duration_us": run.end[i] - run.start[i]} for i in top]), on_path


def _rank_results(p: _Prepared, run: _Run) -> list[RankResult]:
    results = []
    for rank, rng in enumerate(p.rank_nodes):
        origin = run.origin[rank]
        ends = [run.end[i] for i in rng if not math.isnan(run.end[i])]
        unfinished = len(rng) - len(ends)
        lane_end: dict[int, float] = {}
        for i in rng:
            if p.lane[i] in p.lane_tail and not math.isnan(run.end[i]):
                lane_end[p.lane[i]] = max(lane_end.get(p.lane[i], -math.inf), run.end[i])
        # A CPU thread's recorded time after its last op started (callers
        # returning) still belongs to the step.
        ends += [t + p.lane_tail[lane] * run.cpu_scale for lane, t in lane_end.items()]
        predicted = (max(ends) - origin) if ends else 0.0
        run.rank_end.append(max(ends) if ends else origin)
        measured = p.step_end[rank] - p.step_start[rank]
        if unfinished:
            log.warning("rank %d: %d nodes never ran (waiting on a collective that another "
                        "rank never reached, or a cycle)", rank, unfinished)
        busy: dict[int, float] = defaultdict(float)
        count: dict[int, int] = defaultdict(int)
        spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for i in rng:
            if math.isnan(run.end[i]):
                continue
            lane = p.lane[i]
            busy[lane] += run.end[i] - run.start[i]
            count[lane] += 1
            spans[lane].append((run.start[i], run.end[i]))
        lanes = []
        for lane in sorted(busy, key=lambda x: (p.lane_names[x][1], p.lane_names[x][2])):
            gaps = 0
            cursor = origin
            for s, e in sorted(spans[lane]):
                if s > cursor + 1e-9:
                    gaps += 1
                cursor = max(cursor, e)
            if cursor < origin + predicted - 1e-9:
                gaps += 1
            _r, kind, label = p.lane_names[lane]
            lanes.append(LaneStats(lane=f"{kind} {label}", busy_us=busy[lane],
                                   idle_us=max(0.0, predicted - busy[lane]), nodes=count[lane],
                                   idle_gaps=gaps))
        results.append(RankResult(
            rank=p.rank_label[rank], source=p.sources[rank], nodes=len(rng), predicted_step_us=predicted,
            measured_step_us=measured,
            error_pct=(predicted - measured) / measured * 100 if measured > 0 else None,
            start_offset_us=origin, lanes=lanes, unfinished=unfinished))
    return results


def _overall(p: _Prepared, run: _Run, results: list[RankResult], align: str,
             ) -> tuple[float, float]:
    if not results:
        return 0.0, 0.0
    if align == "recorded":
        predicted = max(run.rank_end, default=0.0) - min(run.origin)
        measured = max(p.step_end) - min(p.step_start)
    else:
        predicted = max(r.predicted_step_us for r in results)
        measured = max(r.measured_step_us for r in results)
    return predicted, measured


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------


class Simulator:
    """Prepared ranks, ready to run under several settings."""

    def __init__(self, graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                 sources: Sequence[str] | None = None, infer_waits: bool = True) -> None:
        self.graphs = graphs
        self.infer_waits = infer_waits
        self.sources = list(sources) if sources else [f"rank{r}" for r in range(len(graphs))]
        self._prepared: dict[int, _Prepared] = {}

    def prepared(self, comm_streams: int) -> _Prepared:
        p = self._prepared.get(comm_streams)
        if p is None:
            p = _prepare(self.graphs, self.sources, comm_streams, self.infer_waits)
            self._prepared[comm_streams] = p
        return p

    def predict(self, cfg: SimConfig) -> float:
        p = self.prepared(cfg.comm_streams)
        run, align, _ = _run(p, cfg)
        results = _rank_results(p, run)
        return _overall(p, run, results, align)[0]

    def run(self, cfg: SimConfig | None = None, critical_path: bool = True,
            ) -> tuple[SimulationResult, Schedule]:
        cfg = cfg or SimConfig()
        p = self.prepared(cfg.comm_streams)
        verbose = log.isEnabledFor(logging.INFO)
        run, align, model = _run(p, cfg, verbose=verbose)
        results = _rank_results(p, run)
        predicted, measured = _overall(p, run, results, align)
        cp, on_path = _critical_path(p, run, cfg) if critical_path else (None, set())
        result = SimulationResult(
            ranks=results, predicted_step_us=predicted, measured_step_us=measured,
            error_pct=(predicted - measured) / measured * 100 if measured > 0 else None,
            align=align, network_model=model, critical_path=cp,
            inferred_stream_waits=p.inferred_edges)
        schedule = Schedule(nodes=p.nodes, rank=p.rank, lane=p.lane, lane_names=p.lane_names,
                            start=run.start, end=run.end, category=p.cat, critical=on_path,
                            rank_origin=run.origin, step_start=p.step_start, align=align,
                            rank_label=p.rank_label, rank_timed=p.rank_timed)
        return result, schedule


def measured_offset(schedule: Schedule, rank: int) -> float:
    """Value to subtract from a node's recorded start to place it on the
    simulated time axis of ``schedule``."""
    if schedule.align == "recorded":
        return min(schedule.step_start, default=0.0)
    return schedule.step_start[rank] - schedule.rank_origin[rank]


def what_if(sim: Simulator, base: SimConfig, compute: Sequence[float], cpu: Sequence[float],
            bandwidth: Sequence[float], streams: Sequence[int], baseline: float) -> list[WhatIf]:
    """Predicted step for every combination of the given knob values."""
    out = []
    for c in compute:
        for u in cpu:
            for b in bandwidth:
                for s in streams:
                    cfg = msgspec.structs.replace(base, compute_scale=c, cpu_scale=u,
                                                  bandwidth_scale=b, comm_streams=s)
                    predicted = sim.predict(cfg)
                    out.append(WhatIf(compute_scale=c, cpu_scale=u, bandwidth_scale=b,
                                      comm_streams=s, predicted_step_us=predicted,
                                      speedup=baseline / predicted if predicted > 0 else 0.0))
    return out


def load(paths: Sequence[str]) -> list[tuple[GlobalMetadata, list[ChakraNode]]]:
    graphs = []
    for path in paths:
        metadata, nodes = read_et(path)
        graphs.append((metadata, list(nodes)))
    return graphs


def order_by_rank(paths: Sequence[str], graphs: list[tuple[GlobalMetadata, list[ChakraNode]]],
                  ) -> tuple[list[str], list[tuple[GlobalMetadata, list[ChakraNode]]]]:
    """Sort inputs by the rank their metadata records (file order otherwise)."""
    ranks = [_meta(md).get("rank") for md, _ in graphs]
    if all(isinstance(r, int) for r in ranks) and len(set(ranks)) == len(ranks):
        pairs = sorted(zip(ranks, paths, graphs), key=lambda x: x[0])
        return [x[1] for x in pairs], [x[2] for x in pairs]
    return list(paths), graphs


def simulate(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
             sources: Sequence[str] | None = None, config: SimConfig | None = None,
             ) -> SimulationResult:
    """Replay one or more ranks together."""
    return Simulator(graphs, sources).run(config or SimConfig())[0]


def simulate_files(paths: Sequence[str], config: SimConfig | None = None) -> SimulationResult:
    paths, graphs = order_by_rank(paths, load(paths))
    return simulate(graphs, sources=list(paths), config=config)


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
import itertools
import logging
import math
import operator
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import reduce
from itertools import compress, repeat
from typing import Any, cast

import msgspec

from pt2chakra.chakra.conventions import (
    STEP_PERIOD,
    STEP_SPAN,
    StepWindow,
    error_pct,
    rank_origins,
)
from pt2chakra.chakra.lean_read import read_et_apart
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.chakra.rendezvous import RendezvousKey
from pt2chakra.pytorch.json_input import gc_paused
from pt2chakra.pytorch.names import comm_backend
from pt2chakra.simulation.calibration import (
    Calibration,
    backend_samples,
    fit_backends,
    link_shares,
)
from pt2chakra.simulation.network import collective_time
from pt2chakra.simulation.op_scale import CoveredTime, compile_ops, covered_time
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
    INCLUSIVE_ATTR,
    K_GPU_SYNC,
    K_LANE,
    K_LAUNCH,
    K_START,
    MASK_PASSES_MAX,
    SIM_ATTRS,
    WAIT,
    PreparedGraph,
    metadata_attrs,
    non_decreasing,
    prepare_graphs,
)

log = logging.getLogger(__name__)

# Event types, in processing order at equal times: completions first so a
# lane freed at t can take a node that starts at t.
_EV_COMPLETE, _EV_CPU_DONE, _EV_ISSUE, _EV_START = 0, 1, 2, 3

_heappush, _heappop = heapq.heappush, heapq.heappop

TOP_NODES = 10  # longest nodes of the critical path listed in the report


# --------------------------------------------------------------------------
# Configuration and results
# --------------------------------------------------------------------------


class SimConfig(msgspec.Struct, frozen=True):
    """One simulation setting. Defaults replay the measured durations."""

    compute_scale: float = 1.0  # GPU kernel durations (not memcpy, not comm)
    cpu_scale: float = 1.0  # CPU op durations and replayed gaps
    # Scale only the CPU time inside ops whose name matches (op_scale.py); None: all of it.
    cpu_scale_ops: str | None = None
    bandwidth_scale: float = 1.0  # network bandwidth (comm durations / this)
    comm_streams: int = 0  # 0: as recorded; N: collectives round-robin on N streams
    bandwidth_gbps: float | None = None  # with latency_us: network model
    latency_us: float | None = None
    algorithm: str = "ring"  # network model: "ring" or "tree"
    align: str = "auto"  # rank start offsets: "auto", "recorded", "together"
    # Collective times from a network model fitted to the recording (see
    # calibration.py); a rank's collectives then share its link one at a time.
    calibrate: bool = False

    def label(self) -> str:
        cpu_ops = f" (ops /{self.cpu_scale_ops}/)" if self.cpu_scale_ops else ""
        parts = [f"compute x{self.compute_scale:g}", f"cpu x{self.cpu_scale:g}{cpu_ops}",
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
    # what "measured" means for the rank (chakra.conventions: period or span)
    step_definition: str = STEP_SPAN


class CriticalPath(msgspec.Struct):
    length_us: float
    nodes: int
    rank_crossings: int  # times the path moves to another rank (collectives)
    by_node_type: dict[str, float]  # category -> microseconds
    by_edge_kind: dict[str, float]  # kind of the edge that made each step critical -> us
    top_nodes: list[dict[str, Any]]  # longest nodes on the path


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

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


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
    inclusive: list[float] = []  # per node: recorded inclusive time (else its duration)


# --------------------------------------------------------------------------
# Durations per setting
# --------------------------------------------------------------------------


def _durations(p: PreparedGraph, cfg: SimConfig, participants: dict[RendezvousKey, list[int]],
               ) -> tuple[list[float], list[float], dict[RendezvousKey, float], str | None]:
    """Durations and delays under ``cfg``'s knobs; each matched collective
    gets one duration for all its participants (they end together)."""
    dur, delay = _scaled(p, cfg)
    model = None
    coll: dict[RendezvousKey, float] = {}
    if cfg.bandwidth_gbps is not None and cfg.latency_us is not None:
        model = (f"{cfg.algorithm}: latency {cfg.latency_us:g} us, bandwidth "
                 f"{cfg.bandwidth_gbps:g} GB/s")
    cal = calibrate(p, participants, cfg.algorithm) if cfg.calibrate else {}
    if cfg.calibrate:
        model = "; ".join(f"{b or 'other'}: {c.describe()}" for b, c in sorted(cal.items())) \
            or "calibration: no collective to fit"
        if cfg.bandwidth_gbps is not None:
            model += f" (with latency {cfg.latency_us:g} us, bandwidth {cfg.bandwidth_gbps:g} GB/s)"
    for key, members in participants.items():
        c = cal.get(comm_backend(p.nodes[members[0]].name)) if cal else None
        t = _calibrated_us(p, cfg, c, members) if c else _collective_us(p, cfg, key, members)
        coll[key] = t
        for m in members:
            dur[m] = t
    return dur, delay, coll, model


def _scaled(p: PreparedGraph, cfg: SimConfig) -> tuple[list[float], list[float]]:
    """Recorded durations and CPU delays under the compute and CPU knobs (a
    GPU-side CPU gap is CPU time)."""
    dur = list(p.dur)
    delay = list(p.delay)
    cs, cpu = cfg.compute_scale, cfg.cpu_scale
    if cs == 1.0 and cpu == 1.0:
        return dur, delay  # nothing scales: no pass over a million nodes
    covered = _covered(p, cfg)
    for i, cat in enumerate(p.cat):
        if cat == GPU_COMPUTE and cs != 1.0:
            dur[i] *= cs
        elif cat == CPU_OP and cpu != 1.0:
            if covered is None:
                dur[i] *= cpu
                delay[i] *= cpu
            else:  # only the share of the slice / the delay inside matching ops
                start, lane = float(p.start[i]), p.lane[i]
                dur[i] += (cpu - 1.0) * covered.within(lane, start, start + p.dur[i])
                delay[i] += (cpu - 1.0) * covered.within(lane, start - p.delay[i], start)
        elif cat == GPU_CPU_GAP and cpu != 1.0 and covered is None:  # unnamed CPU time
            dur[i] *= cpu
    return dur, delay


def _covered(p: PreparedGraph, cfg: SimConfig) -> CoveredTime | None:
    """The time ``cfg.cpu_scale_ops`` selects (None: all CPU time scales),
    worked out once per pattern."""
    pattern = cfg.cpu_scale_ops
    if pattern is None or cfg.cpu_scale == 1.0:
        return None
    got = p.covered.get(pattern)
    if got is None:
        got = p.covered[pattern] = covered_time(
            (n.name for n in p.nodes), p.lane, p.start, p.incl,
            (c == CPU_OP for c in p.cat), compile_ops(pattern))
    return got


def _sync_scales(p: PreparedGraph, cfg: SimConfig) -> dict[int, float]:
    """Under ``--cpu-scale-ops``, a sync op's CPU parts (its own work, the
    time after its wait, the time before it issues) scale by the share of
    its recorded span the matching ops cover; empty otherwise."""
    covered = _covered(p, cfg)
    if covered is None:
        return {}
    out = {}
    for i in p.sync:
        start, span = float(p.start[i]), p.incl[i]
        share = covered.within(p.lane[i], start, start + span) / span if span > 0 else 0.0
        out[i] = 1.0 + (cfg.cpu_scale - 1.0) * share
    return out


def _scaled_tails(p: PreparedGraph, cfg: SimConfig) -> dict[int, float]:
    """Each CPU thread's recorded tail (callers returning) under the CPU knob."""
    covered = _covered(p, cfg)
    if covered is None:
        return {lane: t * cfg.cpu_scale for lane, t in p.lane_tail.items()}
    return {lane: t + (cfg.cpu_scale - 1.0) * covered.within(lane, p.lane_tail_end[lane] - t,
                                                               p.lane_tail_end[lane])
            for lane, t in p.lane_tail.items()}


def _collective_us(p: PreparedGraph, cfg: SimConfig, key: RendezvousKey, members: list[int],
                   ) -> float:
    """One collective's duration: from the network model when it is set,
    else from the measured kernels."""
    if cfg.bandwidth_gbps is not None and cfg.latency_us is not None:
        first = members[0]
        return collective_time(p.comm_type[first], max(p.comm_bytes[m] for m in members),
                               max(len(members), _group_size(p, key, members)),
                               cfg.bandwidth_gbps * cfg.bandwidth_scale,
                               cfg.latency_us, cfg.algorithm)
    # Measured kernels include waiting for the slowest peer; the last
    # to arrive waited for nobody, and its time is the minimum.
    return min(p.dur[m] for m in members) / cfg.bandwidth_scale


def calibrate(p: PreparedGraph, participants: dict[RendezvousKey, list[int]], algorithm: str,
              ) -> dict[str, Calibration]:
    """Per backend, the network model fitted to the recorded collectives that
    more than one rank reached (each timed by its share of its rank's link)."""
    shares: dict[int, float] = {}
    for nodes in p.rank_nodes:
        comm = [i for i in nodes if p.cat[i] == COMM]
        spans = [(float(p.nodes[i].start_time_micros),
                  float(p.nodes[i].start_time_micros + p.nodes[i].duration_micros)) for i in comm]
        shares.update(zip(comm, link_shares(spans)))
    names = {i: p.nodes[i].name for m in participants.values() for i in m}
    samples = backend_samples(names, list(participants.values()), shares, p.comm_type,
                              p.comm_bytes)
    return fit_backends(samples, algorithm)


def _calibrated_us(p: PreparedGraph, cfg: SimConfig, cal: Calibration, members: list[int]) -> float:
    """A collective under the calibrated model: the fitted overhead, the
    given (else fitted) latency and bandwidth, the bandwidth what-if."""
    first = members[0]
    return cal.time_us(p.comm_type[first], max(p.comm_bytes[m] for m in members), len(members),
                       cfg.bandwidth_scale, cfg.bandwidth_gbps, cfg.latency_us)


def link_streams(cfg: SimConfig) -> int:
    """Communication streams to replay on: calibrated collectives share a
    rank's link, one at a time, unless the what-if asks otherwise."""
    return cfg.comm_streams or (1 if cfg.calibrate else 0)


def _group_size(p: PreparedGraph, key: RendezvousKey, members: list[int]) -> int:
    return len(members)


# --------------------------------------------------------------------------
# The event loop
# --------------------------------------------------------------------------


class _Run:
    """Times of one run, indexed like ``PreparedGraph``."""

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
        self.tails: dict[int, float] = {}  # CPU lane: its recorded tail, scaled
        self.sync_scale: dict[int, float] = {}  # sync op: its CPU parts' scale, where not cpu_scale


def _origins(p: PreparedGraph, align: str) -> tuple[list[float], str]:
    """Each rank's simulated start (the shared rule: ``rank_origins``)."""
    return rank_origins([StepWindow(s, e) for s, e in zip(p.step_start, p.step_end)], align)


def _participants(p: PreparedGraph) -> dict[RendezvousKey, list[int]]:
    """Collectives that more than one rank reaches: only those make their
    participants wait for each other (a lone one runs like any node)."""
    participants: dict[RendezvousKey, list[int]] = defaultdict(list)
    for i, key in p.comm_key.items():
        participants[key].append(i)
    return {k: v for k, v in participants.items() if len(v) > 1}


def _run(p: PreparedGraph, cfg: SimConfig, verbose: bool = False) -> tuple[_Run, str, str | None]:
    """One replay under ``cfg``: its times, the rank alignment used and the
    network model's description (None: measured collectives)."""
    participants = _participants(p)
    dur, delay, _coll, model = _durations(p, cfg, participants)
    origin, align = _origins(p, cfg.align)
    run = _Run(len(p.nodes))
    run.origin = origin
    run.cpu_scale = cfg.cpu_scale
    run.tails = _scaled_tails(p, cfg)
    run.sync_scale = _sync_scales(p, cfg)
    _Replay(p, run, dur, delay, participants, verbose).replay()
    return run, align, model


class _Replay:
    """The state of one replay (lanes, readiness, collective arrivals, sync
    gates, the event heap) and one method per event, so that each rule of the
    model reads on its own. Writes its times into ``run``.

    The two events every node has (taking a lane, completing) are closures
    over the state (``_lane_taker``, ``_completer``): they run millions of
    times, and a closure's variables are read faster than attributes, even
    slotted ones. Events are numbered by one shared counter (``next_seq``)."""

    __slots__ = ("p", "run", "dur", "delay", "participants", "verbose", "cpu_scale", "sync_scale",
                 "multi", "lane_free", "lane_busy", "lane_prev", "lane_heap", "waiting",
                 "ready_t", "ready_pred", "ready_kind", "arrived", "gate_left", "gate_t",
                 "cpu_done_at", "events", "next_seq", "sync", "sync_producers",
                 "issue_children", "comm_key", "nodes", "lane_of", "order", "cat",
                 "child_start", "child", "child_kind", "start_t", "end_t", "bind_pred",
                 "bind_kind", "bind_time", "try_lane", "take", "complete")

    def __init__(self, p: PreparedGraph, run: _Run, dur: list[float], delay: list[float],
                 participants: dict[RendezvousKey, list[int]], verbose: bool) -> None:
        n = len(p.nodes)
        lanes = len(p.lane_names)
        origin = run.origin
        self.p, self.run, self.dur, self.delay = p, run, dur, delay
        self.participants = participants
        self.verbose = verbose
        self.cpu_scale = run.cpu_scale
        self.sync_scale = run.sync_scale
        self.multi = len(p.step_start) > 1
        # Per lane: free since, busy, last node that held it, ready nodes by recorded order.
        self.lane_free = [origin[r] if origin else 0.0 for r, _, _ in p.lane_names]
        self.lane_busy = [False] * lanes
        self.lane_prev = [-1] * lanes
        self.lane_heap: list[list[tuple[int, int]]] = [[] for _ in range(lanes)]
        # Per node: dependencies left, and the latest one so far (time, node, edge kind).
        self.waiting = list(p.nwait)
        self.ready_t = list(map(origin.__getitem__, p.rank))
        self.ready_pred = [-1] * n
        self.ready_kind = [K_START] * n
        # Collective -> participants arrived: (start, node, bound by, edge kind, bound at).
        self.arrived: dict[RendezvousKey, list[tuple[float, int, int, int, float]]] = \
            defaultdict(list)
        # Sync ops: producers still running, latest gate time, CPU part done at.
        self.gate_left = dict(p.sync_gates)
        self.gate_t: dict[int, float] = {}
        self.cpu_done_at: dict[int, float] = {}
        self.events: list[tuple[float, int, int, int]] = []  # (time, event type, seq, node)
        # events pushed so far: ties at equal time and type go in push order
        self.next_seq = itertools.count(1).__next__
        self.sync, self.sync_producers = p.sync, p.sync_producers
        self.issue_children, self.comm_key = p.issue_children, p.comm_key
        self.nodes, self.lane_of, self.order, self.cat = p.nodes, p.lane, p.order, p.cat
        self.child_start, self.child, self.child_kind = p.child_start, p.child, p.child_kind
        self.start_t, self.end_t = run.start, run.end
        self.bind_pred, self.bind_kind, self.bind_time = run.bind_pred, run.bind_kind, run.bind_time
        self.try_lane, self.take = self._lane_taker()
        self.complete = self._completer()

    def replay(self) -> None:
        """Queue the nodes that wait on nothing, start what the lanes allow,
        then handle events in (time, type, sequence) order until none is left."""
        lane_of, order, lane_heap = self.lane_of, self.order, self.lane_heap
        for i in compress(range(len(self.waiting)), map(operator.not_, self.waiting)):
            _heappush(lane_heap[lane_of[i]], (order[i], i))
        for lane in range(len(lane_heap)):
            self.try_lane(lane)
        events, heappop, heappush = self.events, _heappop, _heappush
        start_t, dur, sync, verbose = self.start_t, self.dur, self.sync, self.verbose
        complete, cpu_done, issue = self.complete, self.cpu_done, self.issue
        start_sync, log_issue, next_seq = self.start_sync, self.log_issue, self.next_seq
        while events:
            t, ev, _, i = heappop(events)
            if ev == _EV_COMPLETE:
                complete(i, t)
            elif ev == _EV_START:  # inline: the one event every node has besides completing
                start_t[i] = t
                if verbose:
                    log_issue(i, t)
                if sync and i in sync:
                    start_sync(i, t, sync[i])
                else:  # a plain node holds its lane for its duration
                    heappush(events, (t + dur[i], _EV_COMPLETE, next_seq(), i))
            elif ev == _EV_CPU_DONE:
                cpu_done(i, t)
            else:
                issue(i, t)

    def push(self, t: float, ev: int, i: int) -> None:
        """Queue event ``ev`` of node ``i`` at ``t`` (ties: by type, then in push order)."""
        _heappush(self.events, (t, ev, self.next_seq(), i))

    def _lane_taker(self) -> tuple[Callable[[int], None], Callable[[int, int], None]]:
        """``try_lane(lane)``: a free lane takes its first ready node, and
        ``take(lane, i)``: the free lane takes node ``i`` (the one ready node,
        without a pass through the lane's queue). The node starts after its
        replayed delay, counted from whichever came last, the lane freeing or
        its last dependency (that one bound the start, for the critical path)."""
        lane_busy, lane_heap, lane_free, lane_prev = self.lane_busy, self.lane_heap, \
            self.lane_free, self.lane_prev
        ready_t, ready_pred, ready_kind, delay = self.ready_t, self.ready_pred, \
            self.ready_kind, self.delay
        comm_key, participants, arrive = self.comm_key, self.participants, self.arrive
        bind_pred, bind_kind, bind_time = self.bind_pred, self.bind_kind, self.bind_time
        events, next_seq, heappop, heappush = self.events, self.next_seq, _heappop, _heappush

        def take(lane: int, i: int) -> None:
            lane_busy[lane] = True
            free, ready = lane_free[lane], ready_t[i]
            if free > ready:
                bp, bk, bt = lane_prev[lane], K_LANE, free
                if bp < 0:
                    bk = K_START
            else:
                bp, bk, bt = ready_pred[i], ready_kind[i], ready
            at = bt + delay[i]
            if participants:  # else no collective waits for its peers
                key = comm_key.get(i)
                if key is not None and key in participants:
                    arrive(key, i, at, bp, bk, bt)
                    return
            bind_pred[i], bind_kind[i], bind_time[i] = bp, bk, bt
            heappush(events, (at, _EV_START, next_seq(), i))

        def try_lane(lane: int) -> None:
            if lane_busy[lane]:
                return
            heap = lane_heap[lane]
            if heap:
                take(lane, heappop(heap)[1])

        return try_lane, take

    def _completer(self) -> Callable[[int, float], None]:
        """``complete(i, t)``: node ``i`` ends. It frees its lane, meets its
        children's dependencies (the latest one met binds a child, which
        joins its lane's queue once all are met: ``release``, inline) and
        moves the gates of the sync ops waiting on it. A lane that is
        already busy is not offered a node."""
        end_t, verbose, cat, nodes = self.end_t, self.verbose, self.cat, self.nodes
        lane_of, lane_busy, lane_free, lane_prev = self.lane_of, self.lane_busy, \
            self.lane_free, self.lane_prev
        cs, child, kind = self.child_start, self.child, self.child_kind
        ready_t, ready_pred, ready_kind = self.ready_t, self.ready_pred, self.ready_kind
        waiting, lane_heap, order = self.waiting, self.lane_heap, self.order
        sync_producers, open_gates = self.sync_producers, self.open_gates
        try_lane, take, heappush = self.try_lane, self.take, _heappush

        def complete(i: int, t: float) -> None:
            end_t[i] = t
            if verbose:
                log.info("%s node %d completed at %.0fus",
                         "CPU" if cat[i] == CPU_OP else "GPU", nodes[i].id, t)
            lane = lane_of[i]
            lane_busy[lane] = False
            lane_free[lane] = t
            lane_prev[lane] = i
            for j in range(cs[i], cs[i + 1]):
                c = child[j]
                if t >= ready_t[c]:
                    ready_t[c], ready_pred[c], ready_kind[c] = t, i, kind[j]
                left = waiting[c] - 1
                waiting[c] = left
                if not left:
                    c_lane = lane_of[c]
                    if lane_busy[c_lane]:
                        heappush(lane_heap[c_lane], (order[c], c))
                    elif lane_heap[c_lane]:
                        heappush(lane_heap[c_lane], (order[c], c))
                        try_lane(c_lane)
                    else:
                        take(c_lane, c)
            if sync_producers:
                gated = sync_producers.get(i)
                if gated:
                    open_gates(i, t, gated)
            if not lane_busy[lane]:
                try_lane(lane)

        return complete

    def arrive(self, key: RendezvousKey, i: int, at: float, bp: int, bk: int, bt: float) -> None:
        """A collective starts when its last participant arrives, on every
        rank at once, all bound by that last arrival."""
        group = self.arrived[key]
        group.append((at, i, bp, bk, bt))
        if len(group) == len(self.participants[key]):
            last = max(group)
            begin = last[0]
            for _, m, _, _, _ in group:
                self.bind_pred[m], self.bind_kind[m], self.bind_time[m] = last[2], last[3], last[4]
                self.push(begin, _EV_START, m)
            del self.arrived[key]

    def release(self, i: int, child: int, kind: int, t: float) -> None:
        """Node ``i`` meets a dependency of ``child`` at ``t``; the latest one
        met binds the child, which joins its lane's queue once all are met."""
        ready_t = self.ready_t
        if t >= ready_t[child]:
            ready_t[child], self.ready_pred[child], self.ready_kind[child] = t, i, kind
        waiting = self.waiting
        waiting[child] -= 1
        if waiting[child] == 0:
            lane = self.lane_of[child]
            _heappush(self.lane_heap[lane], (self.order[child], child))
            self.try_lane(lane)

    def open_gates(self, i: int, t: float, gated: list[int]) -> None:
        """Producer ``i`` ended: a sync op it gates may end no earlier than
        this plus its post-return time, and ends once its last producer is
        done and its own CPU part too."""
        sync, gate_t, gate_left = self.sync, self.gate_t, self.gate_left
        cpu_done_at = self.cpu_done_at
        for s in gated:
            g = t + sync[s][1] * self.sync_scale.get(s, self.cpu_scale)
            if g >= gate_t.get(s, -math.inf):
                gate_t[s] = g
                self.run.gate_pred[s] = i
            gate_left[s] -= 1
            if gate_left[s] == 0 and s in cpu_done_at:
                self.push(max(cpu_done_at.pop(s), gate_t[s]), _EV_COMPLETE, s)

    def start_sync(self, i: int, t: float, s: tuple[float, float, float]) -> None:
        """Sync op ``i`` starts: it runs its own CPU part (then waits for its
        gate), and issues the GPU work it launched at its issue offset."""
        own, _post, pre = s
        scale = self.sync_scale.get(i, self.cpu_scale)
        self.push(t + own * scale, _EV_CPU_DONE, i)
        if i in self.issue_children:
            self.push(t + pre * scale, _EV_ISSUE, i)

    def cpu_done(self, i: int, t: float) -> None:
        """A sync op's own CPU part is done: with its producers all ended it
        completes at its gate time (now if that has passed); otherwise the
        last producer's end completes it (``open_gates``)."""
        if self.gate_left.get(i, 0) == 0:
            g = self.gate_t.get(i, t)
            if g > t:
                self.push(g, _EV_COMPLETE, i)
            else:
                self.run.gate_pred[i] = -1
                self.complete(i, t)
        else:
            self.cpu_done_at[i] = t

    def issue(self, i: int, t: float) -> None:
        """A sync op issues the GPU work it launched before it blocks."""
        self.run.issue_time[i] = t
        for child in self.issue_children[i]:
            self.release(i, child, K_LAUNCH, t)

    def where(self, i: int) -> str:
        """The lane for the log (with the rank when several are replayed)."""
        r, _kind, label = self.p.lane_names[self.lane_of[i]]
        return f"{label}" if not self.multi else f"{label} of rank {r}"

    def log_issue(self, i: int, t: float) -> None:
        """The verbose trace of each start, as ``simulate -v`` prints it."""
        n = self.nodes[i]
        if self.cat[i] == CPU_OP:
            log.info("Issuing CPU node %d (%s) at %.0fus on %s with duration %.0fus",
                     n.id, n.name, t, self.where(i), self.dur[i])
        else:
            log.info("Issuing GPU node %d (%s) at %.0fus on %s with duration %.0fus",
                     n.id, n.name, t, self.where(i), self.dur[i])


# --------------------------------------------------------------------------
# Report pieces
# --------------------------------------------------------------------------


# What the critical path's time is charged to, by code: the node categories,
# then the two kinds of time no node's duration holds.
_PATH_TYPES = (*CATEGORY_NAMES, CPU_GAP, WAIT)
_T_GAP, _T_WAIT = len(CATEGORY_NAMES), len(CATEGORY_NAMES) + 1


def _charge(slots: list[float | None], order: list[int], code: int, us: float) -> None:
    """Add ``us`` to slot ``code``, noting the code's first charge in ``order``."""
    got = slots[code]
    if got is None:
        order.append(code)
        got = 0.0
    slots[code] = got + us


class _PathTally:
    """What the critical path is made of, gathered while walking it back:
    time per node type and per edge kind, by code (list slots: cheaper than
    a dict update on each of a million steps; None until first charged),
    with the codes in the order first charged (the report's order at equal times)."""

    def __init__(self) -> None:
        self.type_us: list[float | None] = [None] * len(_PATH_TYPES)
        self.kind_us: list[float | None] = [None] * len(EDGE_KIND_NAMES)
        self.type_order: list[int] = []
        self.kind_order: list[int] = []
        self.path: list[int] = []  # the nodes walked, last first
        self.crossings = 0  # moves to another rank (collectives)
        self.total = 0.0

    def charge_type(self, code: int, us: float) -> None:
        _charge(self.type_us, self.type_order, code, us)

    def charge_kind(self, code: int, us: float) -> None:
        _charge(self.kind_us, self.kind_order, code, us)

    def by_type(self) -> dict[str, float]:
        return {_PATH_TYPES[c]: cast(float, self.type_us[c]) for c in self.type_order}

    def by_kind(self) -> dict[str, float]:
        return {EDGE_KIND_NAMES[c]: cast(float, self.kind_us[c]) for c in self.kind_order}


def _critical_path(p: PreparedGraph, run: _Run, cfg: SimConfig) -> tuple[CriticalPath, set[int]]:
    end = run.end
    ran = map(operator.eq, end, end)  # NaN: never ran
    if p.step_period and all(p.step_period):  # the step ends when the CPU reaches the next
        ran = map(operator.and_, ran, map(operator.eq, p.cat, repeat(CPU_OP)))
    latest = max(compress(end, ran), default=None)
    if latest is None:
        return CriticalPath(0.0, 0, 0, {}, {}, []), set()
    last = end.index(latest)  # the first node to end last
    tally = _walk_back(p, run, last)
    on_path = set(tally.path)
    return _path_summary(p, run, tally, on_path), on_path


def _walk_back(p: PreparedGraph, run: _Run, last: int) -> _PathTally:
    """From the last node to end, follow what decided each start (or a sync
    op's end) back to a rank's start; the guard stops a malformed cycle."""
    tally = _PathTally()
    cur, t = last, run.end[last]
    guard = len(p.nodes) + 5
    gate_pred, end, start, add = run.gate_pred, run.end, run.start, tally.path.append
    # A bound step, inline (a million steps on a million-node path): the
    # node's own time up to ``t`` plus its wait before starting (a CPU gap on
    # a thread, else a wait for a peer or a sync lag), charged to the edge that
    # bound its start; then the path goes on from that edge's source. A child
    # released at a sync op's issue point joins it mid-op: the binding time is
    # the issue time either way. The tally's fields are held in locals (the
    # CPU gap and wait sums too: only these steps charge them).
    cat_of, rank_of, bind_time, bind_kind, bind_pred = p.cat, p.rank, run.bind_time, \
        run.bind_kind, run.bind_pred
    type_us, kind_us, type_order, kind_order = tally.type_us, tally.kind_us, \
        tally.type_order, tally.kind_order
    total, crossings, multi = tally.total, tally.crossings, len(p.rank_nodes) > 1
    gap: float | None = None
    waited: float | None = None
    while cur >= 0 and guard:
        guard -= 1
        add(cur)
        gp = gate_pred[cur]
        if gp >= 0 and t >= end[cur] and end[gp] > start[cur]:
            tally.total, tally.crossings = total, crossings
            cur, t = _gated_step(p, run, tally, cur, gp, t)
            total, crossings = tally.total, tally.crossings
            continue
        s, e = start[cur], end[cur]
        node_part = (e if e < t else t) - s  # max(0.0, min(t, end) - start)
        if not node_part > 0.0:
            node_part = 0.0
        cat = cat_of[cur]
        got = type_us[cat]
        if got is None:
            type_order.append(cat)
            got = 0.0
        type_us[cat] = got + node_part
        bt = bind_time[cur]
        wait = s - bt  # max(0.0, start - bind time)
        if not wait > 0.0:
            wait = 0.0
        if cat == CPU_OP:
            if gap is None:
                type_order.append(_T_GAP)
                gap = 0.0
            gap += wait
        elif wait:
            if waited is None:
                type_order.append(_T_WAIT)
                waited = 0.0
            waited += wait
        share = node_part + wait
        kind = bind_kind[cur]
        got = kind_us[kind]
        if got is None:
            kind_order.append(kind)
            got = 0.0
        kind_us[kind] = got + share
        total += share
        pred = bind_pred[cur]
        if multi and pred >= 0 and rank_of[pred] != rank_of[cur]:
            crossings += 1
        cur, t = pred, bt
    tally.total, tally.crossings = total, crossings
    type_us[_T_GAP], type_us[_T_WAIT] = gap, waited
    return tally


def _gated_step(p: PreparedGraph, run: _Run, tally: _PathTally, cur: int, gp: int,
                t: float) -> tuple[int, float]:
    """A sync op whose end waited on the GPU: its post-return part counts as
    CPU time on a ``gpu_sync`` edge, then the path goes on from the producer."""
    seg = t - run.end[gp]
    tally.charge_type(CPU_OP, seg)
    tally.charge_kind(K_GPU_SYNC, seg)
    tally.total += seg
    if p.rank[gp] != p.rank[cur]:
        tally.crossings += 1
    return gp, run.end[gp]


def _path_summary(p: PreparedGraph, run: _Run, tally: _PathTally, nodes: set[int]) -> CriticalPath:
    """Shares sorted largest first, and the ten longest nodes on the path."""
    # sorted(on_path, key=-duration)[:10] (nsmallest is that, ties in order),
    # without a Python key call per node
    on_path = list(nodes)
    minus_duration = [s - e for s, e in zip(map(run.start.__getitem__, on_path),
                                            map(run.end.__getitem__, on_path))]
    top = [on_path[k] for k in heapq.nsmallest(TOP_NODES, range(len(on_path)),
                                               key=minus_duration.__getitem__)]
    return CriticalPath(
        length_us=tally.total, nodes=len(on_path), rank_crossings=tally.crossings,
        by_node_type=dict(sorted(tally.by_type().items(), key=lambda kv: -kv[1])),
        by_edge_kind=dict(sorted(tally.by_kind().items(), key=lambda kv: -kv[1])),
        top_nodes=[{"rank": p.rank_label[p.rank[i]], "id": p.nodes[i].id, "name": p.nodes[i].name,
                    "category": CATEGORY_NAMES[p.cat[i]],
                    "duration_us": run.end[i] - run.start[i]} for i in top])


def _rank_results(p: PreparedGraph, run: _Run) -> list[RankResult]:
    results = []
    for rank, rng in enumerate(p.rank_nodes):
        origin = run.origin[rank]
        by_lane = _ran_by_lane(p, run, rng)
        # the last end of each lane's nodes that ran (the same largest end as
        # over all of them: no pass over a million nodes) and of each thread
        last = {lane: max(lane_ends) for lane, (_s, lane_ends) in by_lane.items()}
        thread_ends = _thread_ends(run, last)
        # a period ends when the CPU reaches the next step (conversion/step.py)
        ends = thread_ends if p.step_period[rank] and thread_ends else \
            list(last.values()) + thread_ends
        unfinished = len(rng) - sum(len(lane_ends) for _s, lane_ends in by_lane.values())
        predicted = (max(ends) - origin) if ends else 0.0
        run.rank_end.append(max(ends) if ends else origin)
        measured = p.step_end[rank] - p.step_start[rank]
        if unfinished:
            log.warning("rank %d: %d nodes never ran (waiting on a collective that another "
                        "rank never reached, or a cycle)", rank, unfinished)
        results.append(RankResult(
            rank=p.rank_label[rank], source=p.sources[rank], nodes=len(rng), predicted_step_us=predicted,
            measured_step_us=measured,
            error_pct=error_pct(predicted, measured),
            start_offset_us=origin, lanes=_lane_stats(p, by_lane, origin, predicted),
            unfinished=unfinished,
            step_definition=STEP_PERIOD if p.step_period[rank] else STEP_SPAN))
    return results


def _ran_by_lane(p: PreparedGraph, run: _Run, rng: range,
                 ) -> dict[int, tuple[list[float], list[float]]]:
    """Each lane of the rank (in the order of its first node that ran): the
    starts and ends of its nodes that ran, in node order."""
    a, b = rng.start, rng.stop
    ends = run.end[a:b]
    ran = list(map(operator.eq, ends, ends))  # NaN: never ran
    lanes = list(compress(p.lane[a:b], ran))
    starts, ends = list(compress(run.start[a:b], ran)), list(compress(ends, ran))
    order = dict.fromkeys(lanes)
    if len(order) == 1:
        return {lane: (starts, ends) for lane in order}
    out: dict[int, tuple[list[float], list[float]]] = {lane: ([], []) for lane in order}
    if len(order) <= MASK_PASSES_MAX:  # one C-level pass per lane
        for lane in order:
            mine = list(map(operator.eq, lanes, repeat(lane)))
            out[lane] = (list(compress(starts, mine)), list(compress(ends, mine)))
        return out
    for lane, start, end in zip(lanes, starts, ends):
        lane_starts, lane_ends = out[lane]
        lane_starts.append(start)
        lane_ends.append(end)
    return out


def _thread_ends(run: _Run, last: dict[int, float]) -> list[float]:
    """Each CPU thread's end (from the last end of each lane): its recorded
    time after its last op started (callers returning) still belongs to the step."""
    tail = run.tails
    return [end + tail[lane] for lane, end in last.items() if lane in tail]


def _lane_stats(p: PreparedGraph, by_lane: dict[int, tuple[list[float], list[float]]],
                origin: float, predicted: float) -> list[LaneStats]:
    """Busy and idle time of each lane of the rank over its predicted step,
    CPU threads and GPU streams by name (busy time summed in node order)."""
    lanes = []
    for lane in sorted(by_lane, key=lambda x: (p.lane_names[x][1], p.lane_names[x][2])):
        _r, kind, label = p.lane_names[lane]
        starts, ends = by_lane[lane]
        busy = reduce(operator.add, map(operator.sub, ends, starts), 0.0)
        lanes.append(LaneStats(lane=f"{kind} {label}", busy_us=busy,
                               idle_us=max(0.0, predicted - busy), nodes=len(starts),
                               idle_gaps=_idle_gaps(starts, ends, origin, predicted)))
    return lanes


def _idle_gaps(starts: list[float], ends: list[float], origin: float, predicted: float) -> int:
    """Idle intervals of a lane between the rank's start and its predicted end
    (its spans in start order: as they are when starts and ends both ascend,
    as on most lanes, else sorted)."""
    gaps = 0
    cursor = origin
    spans = zip(starts, ends)
    for s, e in (spans if non_decreasing(starts) and non_decreasing(ends) else sorted(spans)):
        if s > cursor + 1e-9:
            gaps += 1
        if e > cursor:  # max(cursor, e), inline
            cursor = e
    if cursor < origin + predicted - 1e-9:
        gaps += 1
    return gaps


def _overall(p: PreparedGraph, run: _Run, results: list[RankResult], align: str,
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
                 sources: Sequence[str] | None = None, infer_waits: bool = True,
                 refuse_deadlock: bool = True) -> None:
        """``refuse_deadlock=False`` (``--force``): ranks whose collectives
        cannot all meet replay anyway, the stuck nodes reported as never run."""
        self.graphs = graphs
        self.infer_waits = infer_waits
        self.refuse_deadlock = refuse_deadlock
        self.sources = list(sources) if sources else [f"rank{r}" for r in range(len(graphs))]
        self._prepared: dict[int, PreparedGraph] = {}

    def prepared(self, comm_streams: int) -> PreparedGraph:
        p = self._prepared.get(comm_streams)
        if p is None:
            with gc_paused():
                p = prepare_graphs(self.graphs, self.sources, comm_streams, self.infer_waits,
                             self.refuse_deadlock)
            self._prepared[comm_streams] = p
        return p

    def predict(self, cfg: SimConfig) -> float:
        p = self.prepared(link_streams(cfg))
        with gc_paused():
            run, align, _ = _run(p, cfg)
            results = _rank_results(p, run)
            return _overall(p, run, results, align)[0]

    def run(self, cfg: SimConfig | None = None, critical_path: bool = True,
            ) -> tuple[SimulationResult, Schedule]:
        with gc_paused():
            return self._run_once(cfg or SimConfig(), critical_path)

    def _run_once(self, cfg: SimConfig, critical_path: bool) -> tuple[SimulationResult, Schedule]:
        p = self.prepared(link_streams(cfg))
        verbose = log.isEnabledFor(logging.INFO)
        run, align, model = _run(p, cfg, verbose=verbose)
        results = _rank_results(p, run)
        predicted, measured = _overall(p, run, results, align)
        cp, on_path = _critical_path(p, run, cfg) if critical_path else (None, set())
        result = SimulationResult(
            ranks=results, predicted_step_us=predicted, measured_step_us=measured,
            error_pct=error_pct(predicted, measured),
            align=align, network_model=model, critical_path=cp,
            inferred_stream_waits=p.inferred_edges)
        schedule = Schedule(nodes=p.nodes, rank=p.rank, lane=p.lane, lane_names=p.lane_names,
                            start=run.start, end=run.end, category=p.cat, critical=on_path,
                            rank_origin=run.origin, step_start=p.step_start, align=align,
                            rank_label=p.rank_label, rank_timed=p.rank_timed,
                            inclusive=p.incl)
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
    """Each file's metadata and nodes, with only what the simulator reads
    (``SIM_ATTRS``; no inputs, outputs or control dependencies; the inclusive
    time held apart, see ``LeanNodes``)."""
    graphs: list[tuple[GlobalMetadata, list[ChakraNode]]] = []
    with gc_paused():  # millions of containers, no cycles: see gc_paused
        for path in paths:
            graphs.append(read_et_apart(path, SIM_ATTRS, INCLUSIVE_ATTR))
    return graphs


def order_by_rank(paths: Sequence[str], graphs: list[tuple[GlobalMetadata, list[ChakraNode]]],
                  ) -> tuple[list[str], list[tuple[GlobalMetadata, list[ChakraNode]]]]:
    """Sort inputs by the rank their metadata records (file order otherwise)."""
    ranks = [metadata_attrs(md).get("rank") for md, _ in graphs]
    known = [r for r in ranks if isinstance(r, int)]
    if len(known) == len(ranks) and len(set(known)) == len(known):
        pairs = sorted(zip(known, paths, graphs), key=lambda x: x[0])
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


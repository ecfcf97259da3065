"""The replay loop: event-driven replay of prepared Chakra graphs under one
setting, writing each node's simulated start and end into a ``ReplayRun``.

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
  reached it. A measured duration includes the time spent waiting for the
  slowest peer: on ranks that share a clock each participant takes the time
  from the last participant's recorded arrival to its own recorded end (the
  ends differ where the ranks' links are shared unevenly, e.g. gloo's
  concurrent collectives on one TCP connection), and one that ended before
  the last arrival (a broadcast root that only queued its send) runs from
  its own arrival for its own time; otherwise all end together
  after the *minimum* measured over the participants (the last rank to
  arrive waits for nobody). With ``bandwidth_gbps`` and ``latency_us`` set, a
  network model (ring / tree cost factors, network.py) gives it instead.
* **Ranks** start at their recorded offsets on the shared clock when the
  traces agree on one (``align="auto"``), or all together.
* **What-if knobs** (durations.py): scale compute (GPU kernels), CPU time,
  network bandwidth; spread collectives over N communication streams.

Deliberate inlined copies in the hot loop (each runs once per node or per
edge, where a method call costs more than the rule; a change to a rule
changes its copy too):

* ``_Replay.replay``, the ``_EV_START`` branch: a plain node's completion is
  queued with ``heappush`` on the event heap directly; home: ``_Replay.push``.
* ``take`` (``_Replay._lane_taker``): the start event is queued the same way;
  home: ``_Replay.push``.
* ``complete`` (``_Replay._completer``), per child: the dependency rule (the
  latest dependency met binds the child; it joins its lane's queue once all
  are met); home: ``_Replay.release``. A child whose lane is free and has no
  queue is handed to ``take`` without passing through the queue; home:
  ``try_lane`` (``_Replay._lane_taker``).
* ``heapq.heappush`` / ``heappop``: module globals (``_heappush``,
  ``_heappop``) bound to locals once per replay, as is every attribute the
  loop reads; keep the loop's names local.

The critical path's walk back has its own list (critical_path.py).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import operator
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from itertools import compress

from pt2chakra.rules.conventions import StepWindow, rank_origins
from pt2chakra.rules.rendezvous import RendezvousKey
from pt2chakra.simulation import compiled
from pt2chakra.simulation.durations import (
    durations,
    scaled_tails,
    sync_scales,
    with_host_sharing,
)
from pt2chakra.simulation.prepared import (
    CPU_OP,
    EDGE_KIND_NAMES,
    K_LANE,
    K_LAUNCH,
    K_START,
    K_THREAD_ORDER,
    PreparedGraph,
)
from pt2chakra.simulation.results import SimConfig

# The logger ``simulate -v`` has always printed the replay's trace under
# (the replay was engine.py's): its lines keep their name.
LOG_NAME = "pt2chakra.simulation.engine"
log = logging.getLogger(LOG_NAME)

# Event types, in processing order at equal times: completions first so a
# lane freed at t can take a node that starts at t.
_EV_COMPLETE, _EV_CPU_DONE, _EV_ISSUE, _EV_START = 0, 1, 2, 3

_heappush, _heappop = heapq.heappush, heapq.heappop


# The typecodes of a run's per-node columns (``array``): times as doubles,
# node indices as 64-bit ints, edge-kind codes as signed bytes (fewer than
# 128 kinds: ``prepared.EDGE_KIND_NAMES``). A column of Python floats costs
# 32 bytes a node (a pointer and a float object), these 8 (1 for kinds): at a
# million nodes the run's six columns were 180 MB of the replay's peak.
TIME_TYPECODE, INDEX_TYPECODE, KIND_TYPECODE = "d", "q", "b"
assert len(EDGE_KIND_NAMES) <= 127, "edge-kind codes must fit KIND_TYPECODE (signed bytes)"


class ReplayRun:
    """Times of one run, indexed like ``PreparedGraph``: typed arrays (read
    like lists; a time is a float, a node that never ran keeps NaN)."""

    def __init__(self, n: int) -> None:
        self.start = array(TIME_TYPECODE, [math.nan]) * n
        self.end = array(TIME_TYPECODE, [math.nan]) * n
        self.bind_pred = array(INDEX_TYPECODE, [-1]) * n
        self.bind_kind = array(KIND_TYPECODE, [K_START]) * n
        self.bind_time = array(TIME_TYPECODE, [0.0]) * n
        self.gate_pred = array(INDEX_TYPECODE, [-1]) * n  # sync op: producer that decided its end
        self.issue_time: dict[int, float] = {}
        self.origin: list[float] = []
        self.rank_end: list[float] = []
        self.cpu_scale = 1.0
        self.tails: dict[int, float] = {}  # CPU lane: its recorded tail, scaled
        self.sync_scale: dict[int, float] = {}  # sync op: its CPU parts' scale, where not cpu_scale


def ran_flags(end: Sequence[float]) -> Iterator[bool]:
    """Per node, whether it ran (one C-level pass): a ``ReplayRun`` end stays
    NaN for a node that never did, and NaN != NaN."""
    return map(operator.eq, end, end)


def step_ends_on_cpu(step_period: Sequence[bool]) -> bool:
    """Whether the step of these ranks ends on the replay's CPU side: a
    period step ends where the CPU reaches the next step (conversion/step.py,
    ``rules.conventions.STEP_PERIOD``), so only CPU ends count toward it;
    with a span step among them (or no rank), every lane's end counts."""
    return bool(step_period) and all(step_period)


def _origins(p: PreparedGraph, align: str) -> tuple[list[float], str]:
    """Each rank's simulated start (the shared rule: ``rank_origins``)."""
    return rank_origins([StepWindow(s, e) for s, e in zip(p.step_start, p.step_end)], align)


def shares_clock(p: PreparedGraph, align: str = "auto") -> bool:
    """Whether the replay places the ranks on their recorded clock (so one
    rank's times compare with another's): ``rank_origins`` under ``align``."""
    return _origins(p, align)[1] == "recorded"


def participants_of(p: PreparedGraph) -> dict[RendezvousKey, list[int]]:
    """Collectives that more than one rank reaches: only those make their
    participants wait for each other (a lone one runs like any node)."""
    participants: dict[RendezvousKey, list[int]] = defaultdict(list)
    for i, key in p.comm_key.items():
        participants[key].append(i)
    return {k: v for k, v in participants.items() if len(v) > 1}


def run_replay(p: PreparedGraph, cfg: SimConfig, verbose: bool = False,
               ) -> tuple[ReplayRun, str, str | None]:
    """One replay under ``cfg``: its times, the rank alignment used and the
    network model's description (None: measured collectives)."""
    cfg = with_host_sharing(p, cfg)
    participants = participants_of(p)
    origin, align = _origins(p, cfg.align)
    eager: set[int] = set()
    dur, delay, _coll, model = durations(p, cfg, participants, shared_clock=align == "recorded",
                                         eager=eager)
    run = ReplayRun(len(p.nodes))
    run.origin = origin
    run.cpu_scale = cfg.cpu_scale
    run.tails = scaled_tails(p, cfg)
    run.sync_scale = sync_scales(p, cfg)
    if not replay_compiled(p, run, dur, delay, participants, verbose):
        _Replay(p, run, dur, delay, participants, verbose, eager).replay()
    return run, align, model


def _free_and_ready(p: PreparedGraph, origin: list[float]) -> tuple[list[float], list[float]]:
    """Where a replay starts: each lane free from its rank's origin, each
    node ready from it (until a dependency says later)."""
    return ([origin[r] if origin else 0.0 for r, _, _ in p.lane_names],
            list(map(origin.__getitem__, p.rank)))


def replay_compiled(p: PreparedGraph, run: ReplayRun, dur: list[float], delay: list[float],
                    participants: dict[RendezvousKey, list[int]], verbose: bool) -> bool:
    """The whole replay by the compiled path (``_fast.replay_plain``, whose
    twin is ``_Replay.replay``) where the graph has none of what it leaves
    to Python: collectives that wait for peers, sync ops, late launches,
    logging of each node; False where it did not run (nothing written).
    Tried before a ``_Replay`` is made: the C replay keeps its state in its
    own arrays, so the Python state (four lists a node) is never built."""
    plain = getattr(compiled.FAST, "replay_plain", None)
    if plain is None or participants or p.sync or p.sync_producers or p.issue_children or \
            p.late_launch or verbose:
        return False
    lane_free, ready_t = _free_and_ready(p, run.origin)
    return plain(lane_free, p.nwait, ready_t, p.lane, p.order, p.child_start, p.child,
                 p.child_kind, dur, delay, run.start, run.end, run.bind_pred, run.bind_kind,
                 run.bind_time, K_START, K_LANE) is True


class _Replay:
    """The state of one replay (lanes, readiness, collective arrivals, sync
    gates, the event heap) and one method per event, so that each rule of the
    model reads on its own. Writes its times into ``run``.

    The two events every node has (taking a lane, completing) are closures
    over the state (``_lane_taker``, ``_completer``): they run millions of
    times, and a closure's variables are read faster than attributes, even
    slotted ones. Events are numbered by one shared counter (``next_seq``)."""

    __slots__ = ("p", "run", "dur", "delay", "participants", "eager", "verbose", "cpu_scale",
                 "sync_scale",
                 "multi", "lane_free", "lane_busy", "lane_prev", "lane_heap", "waiting",
                 "ready_t", "ready_pred", "ready_kind", "arrived", "gate_left", "gate_t",
                 "cpu_done_at", "events", "next_seq", "sync", "sync_producers",
                 "issue_children", "comm_key", "nodes", "lane_of", "order", "cat",
                 "child_start", "child", "child_kind", "start_t", "end_t", "bind_pred",
                 "bind_kind", "bind_time", "try_lane", "take", "complete")

    def __init__(self, p: PreparedGraph, run: ReplayRun, dur: list[float], delay: list[float],
                 participants: dict[RendezvousKey, list[int]], verbose: bool,
                 eager: set[int] | None = None) -> None:
        n = len(p.nodes)
        lanes = len(p.lane_names)
        origin = run.origin
        self.p, self.run, self.dur, self.delay = p, run, dur, delay
        self.participants = participants
        self.eager = eager or set()  # participants that do not wait for the last arrival
        self.verbose = verbose
        self.cpu_scale = run.cpu_scale
        self.sync_scale = run.sync_scale
        self.multi = len(p.step_start) > 1
        # Per lane: free since, busy, last node that held it, ready nodes by recorded order.
        self.lane_free, self.ready_t = _free_and_ready(p, origin)
        self.lane_busy = [False] * lanes
        self.lane_prev = [-1] * lanes
        self.lane_heap: list[list[tuple[int, int]]] = [[] for _ in range(lanes)]
        # Per node: dependencies left, and the latest one so far (time, node, edge kind).
        self.waiting = list(p.nwait)
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
        then handle events in (time, type, sequence) order until none is left
        (the twin of ``replay_compiled``)."""
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
        its last dependency (that one bound the start, for the critical path);
        a late launch's delay (its thread's CPU time) counts from its last
        dependency, while the stream may still be busy."""
        lane_busy, lane_heap, lane_free, lane_prev = self.lane_busy, self.lane_heap, \
            self.lane_free, self.lane_prev
        ready_t, ready_pred, ready_kind, delay = self.ready_t, self.ready_pred, \
            self.ready_kind, self.delay
        late, end_t = self.p.late_launch, self.end_t
        comm_key, participants, arrive = self.comm_key, self.participants, self.arrive
        bind_pred, bind_kind, bind_time = self.bind_pred, self.bind_kind, self.bind_time
        events, next_seq, heappop, heappush = self.events, self.next_seq, _heappop, _heappush

        def take(lane: int, i: int) -> None:
            lane_busy[lane] = True
            free, ready, d = lane_free[lane], ready_t[i], delay[i]
            if late and i in late:
                # a late launch: its thread reaches it its delay after the op the
                # thread ran before it, while other dependencies and the stream run
                x = late[i][2]
                if end_t[x] + d > max(free, ready):
                    free, ready = -math.inf, end_t[x]
                    ready_pred[i], ready_kind[i] = x, K_THREAD_ORDER
                else:
                    d = 0.0
            if free > ready:
                bp, bk, bt = lane_prev[lane], K_LANE, free
                if bp < 0:
                    bk = K_START
            else:
                bp, bk, bt = ready_pred[i], ready_kind[i], ready
            at = bt + d
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
        rank at once, all bound by that last arrival; an eager participant
        (recorded ending before the last arrival: ``durations``) starts on
        its own arrival instead, bound by what bound that."""
        group = self.arrived[key]
        group.append((at, i, bp, bk, bt))
        eager = self.eager
        if i in eager:
            self.bind_pred[i], self.bind_kind[i], self.bind_time[i] = bp, bk, bt
            self.push(at, _EV_START, i)
        if len(group) == len(self.participants[key]):
            last = max(group)
            begin = last[0]
            for _, m, _, _, _ in group:
                if m in eager:
                    continue
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


"""The ``serial`` ASTRA-sim profile: one rank's measured GPU schedule as the
one serial compute chain ASTRA-sim's resource model runs.

Why: ASTRA-sim runs one GPU compute node at a time per NPU (and one
communication node; see ``../shared/ASTRA_SIM.md``), so work recorded on
several streams, and gap nodes placed per stream, add up instead of
overlapping (the ``drop`` profile: +33 % on DLRM x8). Here, per rank:

- **The chain.** GPU compute nodes (kernels, memcpy, memset) of every stream,
  in measured start order, form one chain. A node overlapped by earlier ones
  keeps only the part that extends the busy time (the overlap between
  streams is folded in), so the chain is busy exactly when some stream was.
- **Gaps.** Idle time between chain nodes becomes ``cpu_gap`` nodes (GPU
  ``COMP_NODE`` s: CPU nodes make ASTRA-sim warn): the time the GPU waited
  for the CPU. Time it waited for communication is not a gap: the chain
  node depends on the communication node instead, so the network model
  decides it, and the gap that follows starts when both are done.
- **Communication** nodes hang off the chain: each depends on the chain node
  that ended where it was issued (gaps are cut at each one's measured start)
  and on the rank's previous communication node, so they are issued in the
  measured order, which is the order ASTRA-sim matches them by.
- **Rank start and end.** The rank's start offset (after the earliest rank,
  see ``conventions.rank_origins``) is a leading gap; the time after the last
  node until the step's recorded end a trailing one. So a replay finishes
  every rank at its measured step end unless the network is slower than
  measured.

What-ifs: chain nodes carry GPU time, gaps CPU time (category ``cpu_gap``),
and communication nodes their size. Scaling kernel durations moves the chain
as if each gap were a fixed CPU delay (right when the GPU is the bottleneck;
an over-estimate of the gain when the CPU is); a network what-if moves the
communication nodes and whatever waits on them.

Edges are written as ``data_deps`` only (ASTRA-sim resolves ``ctrl_deps``
too, and they would add orderings the schedule does not have).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec

from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR
from pt2chakra.chakra.records import Attr, ChakraNode, NodeType, attr_dict
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    CPU_GAP_CATEGORY,
    StepWindow,
    inclusive_micros,
    is_gpu,
    lane_of,
    thread_holds,
)
from pt2chakra.rules.rendezvous import sends_buffered
from pt2chakra.simulation.waits import (
    CPU_WAKE_TOL_US,
    INFER_MIN_US,
    CollectiveEnds,
    HostWait,
    TimedHostOp,
    host_comm_waits,
    release_point,
)

# Kinds of the edges this profile writes (``data_dep_kinds``).
SERIAL_ORDER = "serial_order"  # previous chain node -> next (one compute resource)
CPU_GAP_EDGE = "cpu_gap"  # gap -> the chain node it delays
COMM_DONE = "comm_done"  # communication node -> chain node that waited for it
ISSUE_POINT = "issue_point"  # chain node ending at a comm node's measured start -> it
COMM_ORDER = "comm_order"  # previous communication node of the rank -> next
HOST_WAIT = "host_wait"  # collective -> what its host thread did after waiting for it


class SerialChain:
    """Builds one rank's chain (see the module doc). ``removed``: the nodes
    ASTRA-sim cannot run (CPU, METADATA); ``inherited``: for each kept node,
    the kept nodes it depends on through removed ones; ``window``: the
    rank's recorded step."""

    def __init__(self, nodes: Sequence[ChakraNode], removed: set[int],
                 inherited: dict[int, list[int]], window: StepWindow,
                 origin_us: float, network_ends: Mapping[int, float] | None = None,
                 link_scales: Mapping[int, float] | None = None) -> None:
        self.t1 = round(window.end)
        self.cursor = round(window.start - origin_us)  # ASTRA-sim's time 0, on this clock
        self.next_id = max((n.id for n in nodes), default=0) + 1
        kept = [n for n in nodes if n.id not in removed]
        self.comm = sorted((n for n in kept if n.type in COMM_NODE_TYPES),
                           key=lambda n: (n.start_time_micros, n.id))
        self.compute = sorted((n for n in kept if n.type not in COMM_NODE_TYPES),
                              key=lambda n: (n.start_time_micros, n.id))
        self.end = {n.id: _end(n) for n in kept}
        # Where the chain's waits for a collective start: the job's network's
        # end of it when given (job.network_ends), else its recorded end.
        self.done = dict(self.end)
        self.done.update((k, round(v)) for k, v in (network_ends or {}).items() if k in self.end)
        # How the job's network scales each collective against the fitted
        # one (job.link_scales; 1 when not given).
        self.link_scale = dict(link_scales or {})
        self.preds = {n.id: _kept_preds(n, removed, inherited) for n in kept}
        self.chain: list[ChakraNode] = []
        self.index: dict[int, int] = {}  # chain node id -> its index in the chain
        # comm id -> index of the chain node it is issued after (-1: none),
        # raised to anything it waits for, so every edge goes forward.
        self.comm_position: dict[int, int] = {}
        self._issued = 0  # communication nodes issued so far, in measured order
        self._last_is_gap = False
        host = HostTimeline(nodes, removed, self.comm) if not self.compute else None
        self.host = host
        # Host-only ranks (gloo on CPU): when each communication node was
        # issued and what it waited for; the waits of the host threads.
        self.issue = host.issues() if host is not None else {}
        self.waits = host.waits() if host is not None else []
        self._pending: list[int] = []  # collectives waited for, on the next chain node

    def build(self) -> list[ChakraNode]:
        """The chain, then the communication nodes, as written."""
        for node in self.compute:
            self._advance_until(node.start_time_micros)
            self._append_compute(node)
        self._advance_until(self.t1)
        self._append_tail()
        return self.chain + [self._comm_node(k, n) for k, n in enumerate(self.comm)]

    # -- the chain ------------------------------------------------------

    def _last(self) -> list[int]:
        return [self.chain[-1].id] if self.chain else []

    def _push(self, node: ChakraNode, is_gap: bool) -> None:
        self.index[node.id] = len(self.chain)
        self.chain.append(node)
        self._last_is_gap = is_gap

    def _gap(self, until: int, comm_deps: list[int]) -> bool:
        """A gap node from the cursor to ``until``, after the previous chain
        node, ``comm_deps`` and the collectives a host thread waited for;
        False when there is no time to fill."""
        if until <= self.cursor:
            return False
        comm_deps = comm_deps + [d for d in self._pending if d not in comm_deps]
        self._pending = []
        deps = self._last() + comm_deps
        kinds = [SERIAL_ORDER] * len(self._last()) + [COMM_DONE] * len(comm_deps)
        attrs: list[Attr] = [("is_cpu_op", "bool_val", False),
                             ("category", "string_val", CPU_GAP_CATEGORY)]
        if deps:
            attrs.append((DEP_KINDS_ATTR, "string_list", kinds))
        self._push(ChakraNode(id=self.next_id, name=CPU_GAP_CATEGORY, type=NodeType.COMP_NODE,
                              start_time_micros=self.cursor,
                              duration_micros=until - self.cursor, data_deps=deps, attrs=attrs),
                   is_gap=True)
        self.next_id += 1
        self.cursor = until
        return True

    def _advance_until(self, t: int) -> None:
        """The communication issues and host waits up to ``t``, in measured
        order (a wait before an issue at the same time: the thread woke,
        then issued)."""
        while True:
            issue_t = self._next_issue_time()
            wait_t = self.waits[0].wake if self.waits else None
            if wait_t is not None and wait_t <= t and (issue_t is None or wait_t <= issue_t):
                self._wait(self._pop_waits())
            elif issue_t is not None and issue_t <= t:
                self._issue_next()
            else:
                return

    def _next_issue_time(self) -> int | None:
        if self._issued >= len(self.comm):
            return None
        comm = self.comm[self._issued]
        return self.issue[comm.id].time if comm.id in self.issue else comm.start_time_micros

    def _issue_next(self) -> None:
        """Cut the idle time at the next communication node's issue, so it
        is issued after the chain node ending there."""
        comm = self.comm[self._issued]
        self._gap(self._next_issue_time() or 0, [])
        position = len(self.chain) - 1
        for d in self.preds[comm.id]:
            position = max(position, self.index.get(d, -1), self.comm_position.get(d, -1))
        if self._issued > 0:
            position = max(position, self.comm_position[self.comm[self._issued - 1].id])
        self.comm_position[comm.id] = position
        self._issued += 1

    def _pop_waits(self) -> list[HostWaitPoint]:
        """The next wait, with every other one of the same thread's gap (same
        wake and gap start): an op with a recorded dependency on a collective
        that the wake-up rule finds waited for a later one too."""
        first = self.waits.pop(0)
        group = [first]
        while self.waits and (self.waits[0].wake, self.waits[0].gap_start) == \
                (first.wake, first.gap_start):
            group.append(self.waits.pop(0))
        return group

    def _wait(self, waits: list[HostWaitPoint]) -> None:
        """A host thread idle from ``gap_start`` until ``wake``, waiting for
        collectives: its busy time before stays fixed, the wait is for the
        last of them to end (the network decides it, as the replay's op
        starts after all its waits), the rest a fixed gap after it (the
        wake-up latency). Timed from an earlier one, the gap would hold the
        later collective's recorded time as fixed CPU time."""
        waited_for = [w.collective for w in waits if w.collective in self.comm_position]
        if not waited_for:
            return
        self._gap(waits[0].gap_start, [])
        if not self._gap_after(waits[0].wake, waited_for):
            # woke at their end: the next node waits
            self._pending.extend(c for c in waited_for if c not in self._pending)

    def _comm_deps(self, node_id: int) -> list[int]:
        """The communication nodes a chain node appended next waits for: those
        it depends on that were issued before it (so the graph stays acyclic)."""
        here = len(self.chain)
        return [d for d in self.preds[node_id] if self.comm_position.get(d, here) < here]

    def _append_compute(self, node: ChakraNode) -> None:
        """``node`` on the chain: first the CPU part of the idle time before
        it (after its communication finished), then its busy time beyond
        what the chain already covers."""
        comm_deps = self._comm_deps(node.id)
        start = node.start_time_micros
        if start > self.cursor:
            if self._gap_after(start, comm_deps):  # the network decides the wait
                comm_deps = []  # the gap waits for them
        deps = self._last() + comm_deps
        kinds = [CPU_GAP_EDGE if self._last_is_gap else SERIAL_ORDER] * len(self._last()) + \
            [COMM_DONE] * len(comm_deps)
        begin = max(start, self.cursor)
        end = max(self.end[node.id], begin)
        self._push(msgspec.structs.replace(
            node, start_time_micros=begin, duration_micros=end - begin, data_deps=deps,
            ctrl_deps=[], attrs=_with_kinds(node.attrs, kinds)), is_gap=False)
        self.cursor = end

    def _append_tail(self) -> None:
        """The step's recorded end: a gap after the last chain node and the
        last communication node (the time the CPU still ran). On a host-only
        rank the wake-up rule decides, as in the replay: the tail waits for a
        collective only when its threads' recorded end is a wake-up after
        that collective's end; otherwise it is CPU time that runs while the
        collective does (the replay's thread tail), and the rank ends at the
        later of the two. Where a collective ended the step after the
        threads' last op, the threads' tail ends at that op (the collective's
        end is no wake-up) and the rest of the collective's recorded time
        after the job's network end of it is a fixed gap (none when the job's
        waits start at the recorded ends, as a scaled-out job's do)."""
        if self.host is None or not self.comm:
            self._tail_to(self.t1, [self.comm[-1].id] if self.comm else [])
            return
        end = self.host.threads_end(self.t1)
        key = self.host.ends.waited(float(end), float(self.cursor), -math.inf)
        self._tail_to(end, [key] if key is not None and key in self.comm_position else [])
        if end < self.t1:
            last = max(self.comm, key=lambda c: (_end(c), c.id)).id
            self._tail_to(self.t1, [last] if last in self.comm_position else [])

    def _tail_to(self, end: int, waited_for: list[int]) -> None:
        """A gap until ``end`` that starts once ``waited_for`` are done (at
        most at ``end``)."""
        self._gap_after(max(end, self.cursor), waited_for)

    def _gap_after(self, until: int, waited_for: list[int]) -> bool:
        """A gap until ``until`` that starts once ``waited_for`` are done (at
        most at ``until``): the time before their (network's) end is the
        network's, not the gap's. Of the gap, the part before the deciding
        collective's recorded end is recorded link time the job's fitted
        network leaves unexplained (gloo ran two collectives at a time on one
        link; the network runs them one after another): it scales as the
        job's network scales that collective (``link_scale``), the rest (the
        host's wake-up) stays fixed. False when there is no time to fill."""
        decider = max(waited_for, key=lambda d: (self.done[d], d)) if waited_for else None
        if decider is not None:
            self.cursor = min(max(self.cursor, self.done[decider]), until)
        start = self.cursor
        if not self._gap(until, waited_for):
            return False
        if decider is not None:
            self._scale_link_time(decider, start, until)
        return True

    def _scale_link_time(self, decider: int, start: int, until: int) -> None:
        """The gap just appended (from ``start`` to ``until``), its part before
        ``decider``'s recorded end scaled by ``link_scale``."""
        scale = self.link_scale.get(decider, 1.0)
        link = min(until, self.end[decider]) - start
        if scale != 1.0 and link > 0:
            gap = self.chain[-1]
            self.chain[-1] = msgspec.structs.replace(
                gap, duration_micros=max(0, gap.duration_micros - round(link * (1.0 - scale))))

    # -- communication --------------------------------------------------

    def _comm_node(self, k: int, node: ChakraNode) -> ChakraNode:
        """A communication node after its issue point and the rank's previous
        communication node."""
        deps: list[int] = []
        kinds: list[str] = []
        position = self.comm_position.get(node.id, -1)
        if position >= 0:
            deps.append(self.chain[position].id)
            kinds.append(ISSUE_POINT)
        if k > 0:
            deps.append(self.comm[k - 1].id)
            kinds.append(COMM_ORDER)
        issue = self.issue.get(node.id)
        if issue is not None and issue.waited is not None and issue.waited not in deps:
            deps.append(issue.waited)
            kinds.append(HOST_WAIT)
        return msgspec.structs.replace(node, data_deps=deps, ctrl_deps=[],
                                       attrs=_with_kinds(node.attrs, kinds))


def _with_kinds(attrs: Sequence[Attr], kinds: list[str]) -> list[Attr]:
    out = [a for a in attrs if a[0] != DEP_KINDS_ATTR]
    if kinds:
        out.append((DEP_KINDS_ATTR, "string_list", kinds))
    return out


def _kept_preds(node: ChakraNode, removed: set[int], inherited: dict[int, list[int]],
                ) -> list[int]:
    preds = [d for d in node.data_deps if d not in removed]
    for d in inherited.get(node.id, []):
        if d not in preds:
            preds.append(d)
    return preds


def serial_chain(nodes: Sequence[ChakraNode], removed: set[int], inherited: dict[int, list[int]],
                 window: StepWindow, origin_us: float = 0.0,
                 network_ends: Mapping[int, float] | None = None,
                 link_scales: Mapping[int, float] | None = None) -> list[ChakraNode]:
    """One rank's nodes for ASTRA-sim under the serial profile (``window``:
    its recorded step; ``network_ends``: where the job's network ends each
    collective on the recorded clock, ``job.network_ends``; the waits for a
    collective start there, and the rest of the recorded time until the
    thread went on is a fixed gap after it)."""
    return SerialChain(nodes, removed, inherited, window, origin_us, network_ends,
                       link_scales).build()


def comm_issue_times(nodes: Sequence[ChakraNode], removed: set[int]) -> dict[int, int]:
    """Per communication node, when the chain issues it: on a host-only rank
    the end of the op that issued it when it then queued behind a busy
    worker (``HostTimeline.issues``), else its recorded start. The job's
    ``network_ends`` starts each collective there too."""
    kept = [n for n in nodes if n.id not in removed]
    comm = sorted((n for n in kept if n.type in COMM_NODE_TYPES),
                  key=lambda n: (n.start_time_micros, n.id))
    starts = {n.id: n.start_time_micros for n in comm}
    if any(n.type not in COMM_NODE_TYPES for n in kept):
        return starts
    return {k: issue.time for k, issue in HostTimeline(nodes, removed, comm).issues().items()}


# -- host-only ranks ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommIssue:
    """When a communication node was issued on a host-only rank, and the
    collective its start waited for (a busy gloo worker), if any."""

    time: int
    waited: int | None


@dataclass(frozen=True, slots=True)
class HostWaitPoint:
    """A host thread idle from ``gap_start`` until ``wake``, waiting for
    ``collective`` (the wake-up rule, ``simulation.waits``)."""

    wake: int
    gap_start: int
    collective: int


class HostTimeline:
    """A rank without GPU work: its host threads' waits for collectives and
    when its collectives were issued, by the replay's wake-up rule. Gloo
    runs collectives on worker threads: a thread that waited for one resumes
    when the collective ends, and a collective queued behind another on a
    busy worker starts when that one ends. Kept as fixed time, neither would
    move when the network does."""

    def __init__(self, nodes: Sequence[ChakraNode], removed: set[int],
                 comm: Sequence[ChakraNode]) -> None:
        self.nodes = {n.id: n for n in nodes}
        self.removed = removed
        self.comm = comm
        # A buffered send's recorded end is when its host called wait(),
        # not a completion it waited for (rendezvous.is_buffered_send).
        self.ends = CollectiveEnds((c.start_time_micros, _end(c), c.id)
                                   for c in comm if c.duration_micros and not sends_buffered(c))
        self.attrs = {n.id: attr_dict(n.attrs) for n in nodes
                      if n.id in removed and n.type != NodeType.METADATA_NODE}
        self.cpu = [n for n in nodes if n.id in self.attrs and not is_gpu(self.attrs[n.id])
                    and (n.start_time_micros or n.duration_micros)]

    def threads_end(self, step_end: int) -> int:
        """Where the host threads' recorded time ends: ``step_end``, unless a
        collective ended the step after the threads' last op."""
        comm_end = max((_end(c) for c in self.comm), default=-math.inf)
        if step_end > comm_end or not self.cpu:
            return step_end
        return math.ceil(max(n.start_time_micros + inclusive_micros(n, self.attrs[n.id])
                             for n in self.cpu))

    def waits(self) -> list[HostWaitPoint]:
        """The host threads' waits, by wake time."""
        threads: dict[tuple[object, ...], list[ChakraNode]] = {}
        for n in sorted(self.cpu, key=lambda n: n.id):  # ids follow op start (as the replay)
            threads.setdefault(lane_of(n.type, self.attrs[n.id]).key, []).append(n)
        host_ops = [self._host_ops(ops) for ops in threads.values()]
        found = host_comm_waits(host_ops, self.ends) + _recorded_waits(host_ops, self.nodes)
        points = {HostWaitPoint(self.nodes[w.op].start_time_micros, round(w.gap_start),
                                w.collective) for w in found}
        return sorted(points, key=lambda w: (w.wake, w.gap_start, w.collective))

    def _host_ops(self, ops: list[ChakraNode]) -> list[TimedHostOp]:
        starts = [float(n.start_time_micros) for n in ops]
        holds = thread_holds(starts, [inclusive_micros(n, self.attrs[n.id]) for n in ops])
        return [TimedHostOp(n.id, start, start + held, self._comm_preds_end(n), self._released(n))
                for n, start, held in zip(ops, starts, holds)]

    def _released(self, node: ChakraNode) -> float:
        """The latest end of ``node``'s recorded dependencies on other
        threads that ended before it started (``TimedHostOp.released``; a CPU
        op ends with its callees)."""
        lane = lane_of(node.type, self.attrs[node.id]).key
        ends = []
        for d in node.data_deps:
            dep = self.nodes.get(d)
            if dep is None:
                continue
            attrs = attr_dict(dep.attrs)
            if lane_of(dep.type, attrs).key != lane:
                ends.append(dep.start_time_micros + inclusive_micros(dep, attrs))
        return release_point(node.start_time_micros, ends)

    def _comm_preds_end(self, node: ChakraNode) -> float:
        """The latest end of the collectives ``node`` recorded a dependency on."""
        ends = [_end(self.nodes[d]) for d in node.data_deps
                if d in self.nodes and self.nodes[d].type in COMM_NODE_TYPES]
        return max(ends, default=-math.inf)

    def issues(self) -> dict[int, CommIssue]:
        """Per communication node, its issue: the end of the host op that
        issued it when its start then waited for another collective (the
        wake-up rule, from that op's end); one issued by no host op that
        started as a collective it depends on ended (DDP's bucket launched
        from a gloo callback) where the last of those it depends on was
        issued, after that end; else its recorded start."""
        out: dict[int, CommIssue] = {}
        for c in self.comm:
            issuer_end = max((_end(self.nodes[d]) for d in c.data_deps
                              if d in self.removed and d in self.nodes
                              and self.nodes[d].type != NodeType.METADATA_NODE), default=None)
            if issuer_end is None and (chained := self._chained(c)) is not None:
                out[c.id] = chained
                continue
            waited = None
            if issuer_end is not None and c.start_time_micros - issuer_end > INFER_MIN_US:
                waited = self.ends.waited(c.start_time_micros, issuer_end, -math.inf)
            out[c.id] = CommIssue(issuer_end, waited) if waited is not None and \
                issuer_end is not None else CommIssue(c.start_time_micros, None)
        return out

    def _chained(self, c: ChakraNode) -> CommIssue | None:
        """A collective that started when a collective it depends on ended
        (a gloo worker picking up work queued behind it: within the wake-up
        tolerance, ``CPU_WAKE_TOL_US``): issued where the last of them
        started, waiting for that one. Kept at its recorded start, the chain
        would hold the other's recorded time as a fixed gap before it."""
        deps = [self.nodes[d] for d in c.data_deps
                if d in self.nodes and self.nodes[d].type in COMM_NODE_TYPES]
        ended = [(_end(d), d.id) for d in deps if _end(d) <= c.start_time_micros]
        if not ended:
            return None
        last_end, last = max(ended)
        if c.start_time_micros - last_end > CPU_WAKE_TOL_US:
            return None
        return CommIssue(max(d.start_time_micros for d in deps), last)


def _recorded_waits(threads: Sequence[Sequence[TimedHostOp]],
                    nodes: dict[int, ChakraNode]) -> list[HostWait]:
    """Waits the trace records: an op with a dependency on a collective that
    ended inside the op's idle gap (after its thread's latest hold) waited
    for it, as the replay holds it (the latest such collective). The wake-up
    rule leaves these out: they are explained."""
    waits: list[HostWait] = []
    for ops in threads:
        cursor = -math.inf
        for op in ops:
            ends = [(_end(nodes[d]), d) for d in nodes[op.key].data_deps
                    if d in nodes and nodes[d].type in COMM_NODE_TYPES
                    and not sends_buffered(nodes[d])]
            inside = [(end, d) for end, d in ends if cursor < end <= op.start]
            if inside and cursor > -math.inf:
                waits.append(HostWait(op.key, max(inside)[1], cursor))
            cursor = max(cursor, op.held_end)
    return waits


def _end(node: ChakraNode) -> int:
    """Where a node's recorded time ends."""
    return node.start_time_micros + node.duration_micros

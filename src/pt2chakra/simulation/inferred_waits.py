"""The waits a trace does not record, inferred from its timing as edges of
a prepared rank: a GPU op that waited on another stream, a host thread that
waited for a gloo collective, a collective's pickup by gloo's worker thread,
and the CPU op that blocked on a GPU sync (made a sync op). Called by
``prepare.py`` per rank; the wake-up rule itself is ``waits.py``'s.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence

from pt2chakra.rules.rendezvous import sends_buffered
from pt2chakra.simulation.prepared import (
    COMM,
    CPU_OP,
    GPU_COMPUTE,
    GPU_MEMCPY,
    K_GPU_SYNC,
    K_LAUNCH,
    K_STREAM_ORDER,
    K_STREAM_WAIT,
    Parents,
    PreparedGraph,
    only_cpu_ops,
)
from pt2chakra.simulation.waits import (
    INFER_MIN_US,
    CollectiveEnds,
    TimedHostOp,
    host_comm_waits,
    release_point,
)

# Inferring cross-stream waits: an op that started this much later than
# anything recorded explains (``INFER_MIN_US``, shared with the wake-up rule
# of ``waits.py``), and at most this long after another stream's op ended,
# waited for that op.
INFER_TOL_US = 10.0
# A collective kernel waits for the work its caller had queued on its other
# streams (ProcessGroupNCCL records an event on the current stream and makes
# the communication stream wait on it): traces without the event's arguments
# (or without runtime sync events at all) show only that the kernel started
# late. It starts this long after the last such op ends at most: 14 us
# measured on an A100, 125 us on a V100 where a GEMM queued after the event
# still held the SMs (HTA trace_diff control / test).
COMM_EVENT_TOL_US = 200.0
# A kernel that fills the GPU holds back a ready kernel of another stream
# until its last blocks retire: the held kernel starts before it ends, by at
# most this share of its duration (69 us before the end of a 6.5 ms
# embedding backward, 5 us of a 0.7 ms elementwise kernel: HTA trace_diff).
HELD_TAIL_FRACTION = 0.02


def infer_stream_waits(p: PreparedGraph, base: int, end: int, parents: Parents) -> int:
    """GPU ops that started late for no recorded reason waited on another
    stream (``cudaStreamWaitEvent`` without the stream/event arguments that
    old traces lack, e.g. the compute stream waiting for an NCCL kernel).

    An op X whose start is more than ``INFER_MIN_US`` after both its stream
    predecessor's end and its launcher's issue, and within ``INFER_TOL_US``
    after the end of an op on another stream of the same rank, gets a
    ``stream_wait`` edge from that op (the latest such). A collective kernel
    with no such op waited for what its caller had queued on another stream
    before launching it (``_QueuedBefore``: NCCL's event on the caller's
    stream, not recorded by traces without runtime sync events)."""
    if only_cpu_ops(p, base, end):
        return 0
    gpu = [i for i in range(base, end) if p.cat[i] != CPU_OP and
           (p.nodes[i].start_time_micros or p.nodes[i].duration_micros)]
    if not gpu:
        return 0
    node = p.nodes
    ends = sorted((node[i].start_time_micros + node[i].duration_micros, i) for i in gpu)
    end_t = [e for e, _ in ends]
    added = 0
    queued: _QueuedBefore | None = None  # built for the first late collective only
    tail = HELD_TAIL_FRACTION * max(node[i].duration_micros for i in gpu)
    for i in gpu:
        s_x = node[i].start_time_micros
        explained = -math.inf
        has_other = False
        for src, kind in parents[i - base]:
            if p.cat[src] == CPU_OP:
                e = node[src].start_time_micros + p.dur[src]
                if e > s_x:  # still running when X started (a blocking copy): issued at start
                    e = node[src].start_time_micros
            else:
                e = node[src].start_time_micros + node[src].duration_micros
                if kind != K_STREAM_ORDER and p.lane[src] != p.lane[i]:
                    has_other = True
            explained = max(explained, e)
        late = p.late_launch.get(i)
        if late is not None:  # its launch came later: the thread's time explains that much
            explained = max(explained, late[1])
        if has_other or explained == -math.inf or s_x - explained <= INFER_MIN_US:
            continue
        waited: int | None = None
        k = bisect.bisect_right(end_t, s_x) - 1
        while k >= 0 and end_t[k] >= s_x - INFER_TOL_US:
            if p.lane[ends[k][1]] != p.lane[i] and end_t[k] > explained:
                waited = ends[k][1]
                break
            k -= 1
        if waited is None and p.cat[i] == COMM:
            queued = queued or _QueuedBefore(p, base, gpu, parents)
            waited = queued.waited(i, explained)
        if waited is None:
            waited = _held_by(p, ends, end_t, i, explained, tail)
        if waited is not None:
            parents[i - base] += ((waited, K_STREAM_WAIT),)
            added += 1
    return added


def _held_by(p: PreparedGraph, ends: Sequence[tuple[float, int]], end_t: Sequence[float], x: int,
             explained: float, tail: float) -> int | None:
    """The kernel of another stream that held the GPU when op ``x`` was
    ready: it started before ``x`` could (within ``INFER_TOL_US``), and
    ``x`` started in its last ``HELD_TAIL_FRACTION`` (``tail``: that share
    of the longest op). The nearest end wins."""
    node = p.nodes
    s_x = node[x].start_time_micros
    k = bisect.bisect_right(end_t, s_x)
    while k < len(end_t) and end_t[k] <= s_x + tail:
        src = ends[k][1]
        start, dur = node[src].start_time_micros, node[src].duration_micros
        if p.lane[src] != p.lane[x] and start <= explained + INFER_TOL_US \
                and end_t[k] - s_x <= HELD_TAIL_FRACTION * dur:
            return src
        k += 1
    return None


class _QueuedBefore:
    """Each GPU op by the thread that launched it and its stream, in launch
    order: what a collective's caller had queued on each stream before it."""

    def __init__(self, p: PreparedGraph, base: int, gpu: list[int], parents: Parents) -> None:
        self.p, self.base, self.parents = p, base, parents
        by: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
        for i in gpu:
            launcher = self.launcher(i)
            if launcher is not None:
                by[p.lane[launcher], p.lane[i]].append(
                    (float(p.nodes[launcher].start_time_micros), i))
        self.lists = {key: sorted(ops) for key, ops in by.items()}
        self.issued = {key: [t for t, _ in ops] for key, ops in self.lists.items()}

    def launcher(self, i: int) -> int | None:
        return next((src for src, kind in self.parents[i - self.base] if kind == K_LAUNCH), None)

    def waited(self, x: int, explained: float) -> int | None:
        """The op collective ``x`` waited for: on each other stream, the last
        op its launcher's thread queued before launching ``x``; the one that
        ended latest, at most ``COMM_EVENT_TOL_US`` before ``x`` started and
        after what its recorded dependencies explain."""
        p, node = self.p, self.p.nodes
        launcher = self.launcher(x)
        if launcher is None:
            return None
        s_x, issued_at = node[x].start_time_micros, node[launcher].start_time_micros
        best, best_end = None, max(explained, s_x - COMM_EVENT_TOL_US)
        for (thread, lane), ops in self.lists.items():
            if thread != p.lane[launcher] or lane == p.lane[x]:
                continue
            k = bisect.bisect_left(self.issued[thread, lane], issued_at) - 1
            if k < 0:
                continue
            op = ops[k][1]
            e = node[op].start_time_micros + node[op].duration_micros
            if best_end < e <= s_x:
                best, best_end = op, e
        return best


def infer_host_comm_waits(p: PreparedGraph, base: int, end: int, parents: Parents,
                          cpu_lane_ops: dict[int, list[int]]) -> list[tuple[int, int]]:
    """On a rank without GPU work, the waits of its host threads for the
    collectives gloo runs on its worker threads (the wake-up rule,
    ``waits.host_comm_waits``): each such op X gets a ``stream_wait`` edge
    from the collective it waited for. Returns the (X, collective) pairs."""
    cats = p.cat[base:end]
    if GPU_COMPUTE in cats or COMM not in cats:
        return []  # the GPU's own waits are inferred elsewhere; or no collective to wait on
    node = p.nodes
    # A buffered send's recorded end is when its host called wait(), not a
    # completion the host could have waited for (rendezvous.is_buffered_send).
    collectives = CollectiveEnds(
        (node[i].start_time_micros, node[i].start_time_micros + node[i].duration_micros, i)
        for i in range(base, end) if p.cat[i] == COMM and node[i].duration_micros
        and not sends_buffered(node[i]))
    threads = ([TimedHostOp(x, node[x].start_time_micros, node[x].start_time_micros + p.dur[x],
                            _comm_parents_end(p, parents[x - base]),
                            _released(p, x, parents[x - base])) for x in ops]
               for ops in cpu_lane_ops.values())
    added = [(w.op, w.collective) for w in host_comm_waits(threads, collectives)]
    for x, src in added:
        parents[x - base] += ((src, K_STREAM_WAIT),)
    return added


def worker_pickups(p: PreparedGraph, base: int, end: int, parents: Parents) -> None:
    """On a rank without GPU work a collective runs on one of the backend's
    host worker threads (gloo), which picks it up some time after it could
    have started: the thread wakes up, a while on a loaded machine (0.05 ms
    quiet, up to 15 ms seen with 8 ranks on 2 shared cores). That time, from
    the later of its dependencies' and its lane's previous node's recorded
    ends to its recorded start, is replayed as a delay, like a CPU thread's
    gap; a collective without either keeps its own rule (``thread_timing.pin_orphans``).
    A collective the recording ran beside the previous one of its lane
    (a lane a what-if or the calibrated link serialises: ``comm_streams``)
    had been picked up already: serialised, it starts when that one ends,
    with no pickup delay on top (as the ASTRA-sim job's serial chain issues it).
    Likewise a dependency that ended after the recorded start (the issuing
    op returns once the worker has taken the work): the replay starts the
    collective after it, so no delay is left to add."""
    cats = p.cat[base:end]
    if GPU_COMPUTE in cats or GPU_MEMCPY in cats or COMM not in cats:
        return
    starts, dur, lanes = p.start, p.dur, p.lane
    lane_end: dict[int, float] = {}
    for i in sorted((i for i in range(base, end) if p.cat[i] == COMM), key=starts.__getitem__):
        start, lane = float(starts[i]), lanes[i]
        prev = lane_end.get(lane, -math.inf)
        ready = max([prev, *(starts[src] + dur[src] for src, _kind in parents[i - base])])
        if ready > -math.inf:
            p.delay[i] = max(0.0, start - ready)
        lane_end[lane] = max(prev, start + dur[i])


def _comm_parents_end(p: PreparedGraph, plist: tuple[tuple[int, int], ...]) -> float:
    """The latest end of the collectives among an op's recorded parents."""
    return max([-math.inf] + [p.nodes[src].start_time_micros + p.dur[src]
                              for src, _kind in plist if p.cat[src] == COMM])


def _released(p: PreparedGraph, x: int, plist: tuple[tuple[int, int], ...]) -> float:
    """The latest end of an op's recorded dependencies on other threads that
    ended before it started (``TimedHostOp.released``; a CPU op ends with its
    callees)."""
    lane = p.lane[x]
    return release_point(p.nodes[x].start_time_micros,
                         (p.nodes[src].start_time_micros + p.incl[src] for src, _kind in plist
                          if p.lane[src] != lane))


def sync_ops(p: PreparedGraph, base: int, parents: Parents,
             cpu_lane_ops: dict[int, list[int]]) -> None:
    """Take the measured GPU wait out of the CPU time that blocked on it.

    For each ``gpu_sync`` consumer C (first CPU op after the sync returned),
    find on C's thread where the GPU producers' end ``t_ret`` falls:

    * inside op S's slice: S waited. S then ends at
      ``max(start + own work, producer end + post-return time)``, where the
      post-return time is the part of its slice after ``t_ret``, and releases
      the GPU ops it launched when it issues them (its start), not when it
      returns;
    * inside the replayed gap before op X: the gap's part before ``t_ret`` was
      the wait; X then waits for the producers plus the rest of the gap.
    """
    start, delay = p.start, p.delay
    starts = {lane: [start[i] - delay[i] for i in ops]
              for lane, ops in cpu_lane_ops.items()}
    for k, plist in enumerate(parents):
        producers = [s for s, kind in plist if kind == K_GPU_SYNC]
        if producers:
            _sync_consumer(p, base, parents, cpu_lane_ops, starts, base + k, producers)


def _sync_consumer(p: PreparedGraph, base: int, parents: Parents,
                   cpu_lane_ops: dict[int, list[int]], starts: dict[int, list[float]],
                   c: int, producers: list[int]) -> None:
    """Find the op (or the gap) on consumer ``c``'s thread that held the
    wait for ``producers``, and give the wait back to the dependency."""
    lane = p.lane[c]
    ops = cpu_lane_ops.get(lane)
    if not ops:
        return
    t_ret = max(p.nodes[s].start_time_micros + p.nodes[s].duration_micros for s in producers)
    c_start = p.nodes[c].start_time_micros
    if t_ret > c_start:
        return  # inconsistent timing: keep the plain edge
    q = bisect.bisect_right(starts[lane], t_ret) - 1
    if q < 0:
        return
    x = ops[q]
    x_start = float(p.nodes[x].start_time_micros)
    if t_ret <= x_start:
        if x != c:
            _wait_in_gap(p, base, parents, x, x_start, producers)
        return
    if t_ret > x_start + p.dur[x] or x in p.sync:
        return  # after X's slice: the producers were done before anyone waited
    launched = _launched_by(p, base, parents, x, producers)
    if launched is not None:
        _make_sync_op(p, base, parents, x, t_ret, x_start, producers, launched)


def _wait_in_gap(p: PreparedGraph, base: int, parents: Parents, x: int, x_start: float,
                 producers: list[int]) -> None:
    """In the gap before X: X waited for the producers (its delay is then
    measured from their end)."""
    for s in producers:
        parents[x - base] += ((s, K_GPU_SYNC),)
        end_s = p.nodes[s].start_time_micros + p.nodes[s].duration_micros
        p.delay[x] = min(p.delay[x], max(0.0, x_start - end_s))


def _launched_by(p: PreparedGraph, base: int, parents: Parents, holder: int,
                 producers: list[int]) -> list[int] | None:
    """The producers that ``holder`` launched (released when it issues them);
    None when one was launched after the holder started, which would deadlock."""
    ok = True
    launched = []
    for s in producers:
        for src, kind in parents[s - base]:
            if kind != K_LAUNCH:
                continue
            if src == holder:
                launched.append(s)
            elif p.nodes[src].id > p.nodes[holder].id and p.rank[src] == p.rank[holder]:
                ok = False  # launched after the holder started: would deadlock
    return launched if ok else None


def _make_sync_op(p: PreparedGraph, base: int, parents: Parents, holder: int, t_ret: float,
                  x_start: float, producers: list[int], launched: list[int]) -> None:
    """Make ``holder`` a sync op: its own work is the part of its slice after
    the producers' end, it is gated by them, and the GPU ops it launched are
    released at its issue instead of through their launch edge."""
    excl = p.dur[holder]
    wait = min(excl, t_ret - x_start)
    post = excl - wait
    p.sync[holder] = (post, post, 0.0)  # (own work, post-return time, issue offset)
    p.sync_gates[holder] = len(producers)
    for s in producers:
        p.sync_producers.setdefault(s, []).append(holder)
    if launched:
        p.issue_children[holder] = launched
        for s in launched:
            sk = s - base
            parents[sk] = tuple([(src, -1 if (src == holder and kind == K_LAUNCH) else kind)
                                 for src, kind in parents[sk]])
            p.nwait[s] += 1  # released by the issue event

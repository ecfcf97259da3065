"""Durations per setting: each node's duration and replayed CPU delay under
a ``SimConfig``'s knobs (compute, CPU, ``--cpu-scale-ops``, bandwidth), and
each matched collective's one duration, from the measured kernels, a network
model, or the model calibrated on the recording."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import msgspec

from pt2chakra.chakra.records import NodeType
from pt2chakra.errors import InputError
from pt2chakra.names import comm_backend
from pt2chakra.rules.rendezvous import (
    P2P,
    RendezvousKey,
    on_host_channel,
    p2p_times,
    sends_buffered,
)
from pt2chakra.simulation.calibration import (
    Calibration,
    backend_samples,
    fit_backends,
    link_shares,
)
from pt2chakra.simulation.lone import (
    LoneCollective,
    lone_collectives,
    lone_us,
    modelled,
    network_knob,
)
from pt2chakra.simulation.network import SCALED_BACKENDS, chain_handoffs, collective_time
from pt2chakra.simulation.op_scale import CoveredTime, compile_ops, covered_time
from pt2chakra.simulation.prepared import COMM, CPU_OP, GPU_COMPUTE, GPU_CPU_GAP, PreparedGraph
from pt2chakra.simulation.profiler_overhead import take_out
from pt2chakra.simulation.results import SimConfig


def durations(p: PreparedGraph, cfg: SimConfig, participants: dict[RendezvousKey, list[int]],
              shared_clock: bool = False, eager: set[int] | None = None,
              ) -> tuple[list[float], list[float], dict[RendezvousKey, float], str | None]:
    """Durations and delays under ``cfg``'s knobs; a matched collective gets
    one duration for all its participants (they end together), except a
    measured one on ranks that share a clock (``shared_clock``): each
    participant then runs from the last arrival to its own recorded end
    (``_member_us``), and one that ended before the last arrival did not
    wait for it: it is added to ``eager`` (when given) and keeps its own
    recorded time from its own arrival. The returned map holds each
    collective's longest."""
    dur, delay = _scaled(p, cfg)
    model = None
    coll: dict[RendezvousKey, float] = {}
    if cfg.bandwidth_gbps is not None and cfg.latency_us is not None:
        model = (f"{cfg.algorithm}: latency {cfg.latency_us:g} us, bandwidth "
                 f"{cfg.bandwidth_gbps:g} GB/s")
    lone = lone_collectives(p, participants) if network_knob(cfg) else []
    cal = calibrate(p, participants, cfg.algorithm, lone, shared_clock,
                    cfg.assumed_latency_scale) if cfg.calibrate else {}
    if cfg.calibrate:
        model = "; ".join(f"{b or 'other'}: {c.describe()}" for b, c in sorted(cal.items())) \
            or "calibration: no collective to fit"
        if cfg.bandwidth_gbps is not None:
            model += f" (with latency {cfg.latency_us:g} us, bandwidth {cfg.bandwidth_gbps:g} GB/s)"
    measured = cfg.bandwidth_gbps is None or cfg.latency_us is None
    woken = collective_wakeups(p, participants, cal, shared_clock) if cal else {}
    slow, slow_at = cfg.slow_rank, slow_rank_index(p, cfg)
    for key, members in participants.items():
        c = cal.get(comm_backend(p.nodes[members[0]].name)) \
            if cal and known_size(p, members) else None
        if c is None and measured and shared_clock and key.kind == P2P and len(members) == 2:
            each = _transfer_us(p, cfg, members, eager)
        elif c is None and measured and shared_clock:
            each = _member_us(p, cfg, members, eager)
        else:
            t = _calibrated_us(p, cfg, c, members) + woken.get(members[0], 0.0) if c \
                else _collective_us(p, cfg, key, members)
            each = [t] * len(members)
        if slow is not None and slow.link != 1.0 and any(p.rank[m] == slow_at for m in members):
            each = [t * slow.link for t in each]  # paced by the slow rank's link
        coll[key] = max(each)
        for m, t in zip(members, each):
            dur[m] = t
    for alone in lone:  # no peer given: the group size and bytes time it (lone.py)
        fitted = cal.get(comm_backend(p.nodes[alone.node].name)) if cal else None
        dur[alone.node] = lone_us(p, cfg, alone, dur[alone.node], fitted)
    return dur, delay, coll, model


def _member_us(p: PreparedGraph, cfg: SimConfig, members: list[int],
               eager: set[int] | None = None) -> list[float]:
    """Each participant's measured time once the last one arrived: its
    recorded end less the last recorded arrival (the clocks agree). The last
    to arrive keeps its own duration; the others lose the wait for it, and
    keep what they spent after it, which differs by rank where the ranks'
    transfers finished at different times (a link shared unevenly by
    concurrent collectives, a peer whose data came last). A participant that
    ended before the last arrival (a broadcast root that only queued its
    send) did not wait for it: with ``eager`` it goes there and keeps its own
    recorded duration, to run from its own arrival (a host-run collective
    only: ``_host_collective``); otherwise it gets 0."""
    last = max(p.start[m] for m in members)
    out = []
    for m in members:
        end = p.start[m] + p.dur[m]
        if end < last and eager is not None and _host_collective(p, m):
            eager.add(m)
            out.append(p.dur[m] / cfg.bandwidth_scale)
        else:
            out.append(max(end - last, 0.0) / cfg.bandwidth_scale)
    return out


def _transfer_us(p: PreparedGraph, cfg: SimConfig, members: list[int],
                 eager: set[int] | None = None) -> list[float]:
    """A matched send/receive pair on ranks that share a clock: each side's
    time (``p2p_times``); a buffered send (``sends_buffered``) goes to
    ``eager`` and runs from its own post, waiting for nobody."""
    sends = [m for m in members if p.nodes[m].type == NodeType.COMM_SEND_NODE]
    recvs = [m for m in members if p.nodes[m].type == NodeType.COMM_RECV_NODE]
    if len(sends) != 1 or len(recvs) != 1:
        return _member_us(p, cfg, members, eager)
    send, recv = sends[0], recvs[0]
    buffered = eager is not None and sends_buffered(p.nodes[send])
    times = p2p_times((p.start[send], p.start[send] + p.dur[send]),
                      (p.start[recv], p.start[recv] + p.dur[recv]), buffered)
    if buffered and eager is not None:
        eager.add(send)
    scale = cfg.bandwidth_scale
    return [(times.send_us if m == send else times.recv_us) / scale for m in members]


def _host_collective(p: PreparedGraph, m: int) -> bool:
    """A collective run on one of the backend's host worker threads (the
    converter names it: ``COMM_CHANNEL``, gloo), whose sends are buffered:
    only such a participant may finish without waiting for the others (an
    NCCL kernel or a matched send / receive waits)."""
    node = p.nodes[m]
    return node.type == NodeType.COMM_COLL_NODE and on_host_channel(node)


def _scaled(p: PreparedGraph, cfg: SimConfig) -> tuple[list[float], list[float]]:
    """Recorded durations and CPU delays under the compute and CPU knobs (a
    GPU-side CPU gap is CPU time), the profiler's cost taken out first (the
    what-ifs then scale the job's own time)."""
    dur = list(p.dur)
    delay = list(p.delay)
    take_out(p, dur, delay, cfg.profiler_overhead_us)
    _slow_host(p, cfg, dur, delay)
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
                dur[i] += (cpu - 1.0) * covered.within(lane, start, start + p.dur[i]) \
                    * _left(dur[i], p.dur[i])
                delay[i] += (cpu - 1.0) * covered.within(lane, start - p.delay[i], start) \
                    * _left(delay[i], p.delay[i])
        elif cat == GPU_CPU_GAP and cpu != 1.0 and covered is None:  # unnamed CPU time
            dur[i] *= cpu
    for i, (lane, launch, _before) in p.late_launch.items() if cpu != 1.0 else ():
        # a late launch's delay is its launcher thread's CPU time before the launch
        if covered is None:
            delay[i] *= cpu
        else:
            delay[i] += (cpu - 1.0) * covered.within(lane, launch - p.delay[i], launch) \
                * _left(delay[i], p.delay[i])
    return dur, delay


def slow_rank_index(p: PreparedGraph, cfg: SimConfig) -> int | None:
    """The position of ``cfg``'s slow rank among the replayed ranks (None:
    no straggler what-if); ``InputError`` when the job has no such rank."""
    if cfg.slow_rank is None:
        return None
    try:
        return p.rank_label.index(cfg.slow_rank.rank)
    except ValueError:
        raise InputError("--slow-rank", f"rank {cfg.slow_rank.rank} is not among the ranks "
                         f"replayed ({', '.join(map(str, p.rank_label))})") from None


def _slow_host(p: PreparedGraph, cfg: SimConfig, dur: list[float], delay: list[float]) -> None:
    """The straggler what-if's host: the slow rank's CPU ops, the gaps
    before them and its GPU-side CPU gaps ``cpu`` times longer, and the CPU
    time before its late launches."""
    at = slow_rank_index(p, cfg)
    if at is None or cfg.slow_rank is None or cfg.slow_rank.cpu == 1.0:
        return
    factor = cfg.slow_rank.cpu
    for i in p.rank_nodes[at]:
        cat = p.cat[i]
        if cat == CPU_OP:
            dur[i] *= factor
            delay[i] *= factor
        elif cat == GPU_CPU_GAP:
            dur[i] *= factor
    for i in p.late_launch:
        if p.rank[i] == at:
            delay[i] *= factor


def _left(now: float, recorded: float) -> float:
    """The share of a recorded interval left once the profiler's cost is out
    (1.0 exactly when none was taken: the what-if is then unchanged)."""
    return now / recorded if recorded > 0.0 and now != recorded else 1.0


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


def sync_scales(p: PreparedGraph, cfg: SimConfig) -> dict[int, float]:
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


def scaled_tails(p: PreparedGraph, cfg: SimConfig) -> dict[int, float]:
    """Each CPU thread's recorded tail (callers returning) under the CPU knob."""
    covered = _covered(p, cfg)
    slow = slow_rank_index(p, cfg)
    if slow is not None and cfg.slow_rank is not None and cfg.slow_rank.cpu != 1.0:
        factor = cfg.slow_rank.cpu
        tails = {lane: t * (factor if p.lane_names[lane][0] == slow else 1.0)
                 for lane, t in p.lane_tail.items()}
    else:
        tails = dict(p.lane_tail)
    if covered is None:
        return {lane: t * cfg.cpu_scale for lane, t in tails.items()}
    return {lane: t + (cfg.cpu_scale - 1.0) * covered.within(lane, p.lane_tail_end[lane] - t,
                                                               p.lane_tail_end[lane])
            for lane, t in tails.items()}


def _collective_us(p: PreparedGraph, cfg: SimConfig, key: RendezvousKey, members: list[int],
                   ) -> float:
    """One collective's duration: from the network model when it is set,
    else from the measured kernels."""
    if cfg.bandwidth_gbps is not None and cfg.latency_us is not None and known_size(p, members):
        first, n = members[0], timed_ranks(p, members)
        bandwidth, latency = p.link_of(first, n, cfg.bandwidth_gbps, cfg.latency_us)
        return collective_time(p.comm_type[first], max(p.comm_bytes[m] for m in members), n,
                               bandwidth * cfg.bandwidth_scale, latency, cfg.algorithm)
    # Measured kernels include waiting for the slowest peer; the last
    # to arrive waited for nobody, and its time is the minimum.
    return min(p.dur[m] for m in members) / cfg.bandwidth_scale


def known_size(p: PreparedGraph, members: list[int]) -> bool:
    """Some participant records the collective's size (a size the trace does
    not hold, ``comm_size_unknown``, is taken from another rank that has it):
    else a network model cannot time it, and it keeps its measured time."""
    return any(m not in p.size_unknown for m in members)


def calibrate(p: PreparedGraph, participants: dict[RendezvousKey, list[int]], algorithm: str,
              lone: Sequence[LoneCollective] = (), shared_clock: bool = False,
              assumed_latency_scale: float = 1.0) -> dict[str, Calibration]:
    """Per backend, the network model fitted to the recorded collectives that
    more than one rank reached (each timed by its share of its rank's link,
    over the span ``transfer_spans`` gives it), and to those of ranks given
    alone at their group's size (``lone``: their recorded time includes any
    wait for peers, so the fit is slower than the network)."""
    spans, waited = transfer_spans(p, participants, shared_clock)
    shares: dict[int, float] = {}
    for nodes in p.rank_nodes:
        comm = [i for i in nodes if p.cat[i] == COMM]
        shares.update(zip(comm, link_shares([spans.get(i) or _own_span(p, i) for i in comm])))
    timed = {i: t for i, t in shares.items() if i not in spans or i in waited}
    names = {i: p.nodes[i].name for m in participants.values() for i in m}
    groups = [m for m in participants.values() if known_size(p, m)]
    counts = [recorded_ranks(p, m) for m in groups]
    for c in lone:
        if modelled(c):
            names[c.node] = p.nodes[c.node].name
            groups.append([c.node])
            counts.append(c.group)
    samples = backend_samples(names, groups, timed, p.comm_type, p.comm_bytes, counts)
    return fit_backends(samples, algorithm, SCALED_BACKENDS if rescaled(p) else None,
                        assumed_latency_scale)


def transfer_spans(p: PreparedGraph, participants: dict[RendezvousKey, list[int]],
                   shared_clock: bool) -> tuple[dict[int, tuple[float, float]], set[int]]:
    """The part of each matched participant's recorded span that the network
    timed, and the participants that waited for the last arrival. On ranks
    that share a clock it is the span from the collective's last recorded
    arrival (no ring step, no gloo receive completes before every member has
    come) to the participant's end, as the replay runs it (``_member_us``):
    an early participant's own span holds its wait, and where it also ends
    first (gloo's 2-rank all-gather: one direction ends ~19 ms after the
    other, whoever arrived last) the shortest own span is the late rank's,
    wait-free but slow, and the fit gets the wait of whichever rank came
    first. A participant that ended before the last arrival (a broadcast
    root that only queued its send) did not wait for it: it keeps its own
    span on its rank's link and is left out of the waited set, since its
    time says nothing of the transfer. Without a shared clock the arrivals
    cannot be compared: every participant keeps its own span and counts."""
    spans: dict[int, tuple[float, float]] = {}
    waited: set[int] = set()
    for members in participants.values():
        last = float(max(p.nodes[m].start_time_micros for m in members))
        for m in members:
            start, end = _own_span(p, m)
            if not shared_clock:
                spans[m] = (start, end)
                waited.add(m)
            elif end < last:
                spans[m] = (start, end)
            else:
                spans[m] = (max(start, last), end)
                waited.add(m)
    return spans, waited


def _own_span(p: PreparedGraph, i: int) -> tuple[float, float]:
    """A node's recorded span, as its rank's clock has it."""
    start = float(p.nodes[i].start_time_micros)
    return start, start + float(p.nodes[i].duration_micros)


def _calibrated_us(p: PreparedGraph, cfg: SimConfig, cal: Calibration, members: list[int]) -> float:
    """A collective under the calibrated model: the fitted overhead, the
    given (else fitted) latency and bandwidth, the bandwidth what-if."""
    first, n = members[0], timed_ranks(p, members)
    bandwidth, latency = p.link_of(first, n, *cal.link(cfg.bandwidth_gbps, cfg.latency_us))
    return cal.time_us(p.comm_type[first], max(p.comm_bytes[m] for m in members), n,
                       cfg.bandwidth_scale, bandwidth, latency)


def collective_wakeups(p: PreparedGraph, participants: dict[RendezvousKey, list[int]],
                       calibrations: dict[str, Calibration], shared_clock: bool,
                       ) -> dict[int, float]:
    """Participant -> the scheduler's wake-ups its collective adds to the
    calibrated model's time where a scaled-out job's ranks crowd their
    hosts' cores (scaleout/hosts.py): the fit, from the first participant
    to end, holds none of them, and the clones all end with the last. The
    replay adds them; the ASTRA-sim job writes them into the collective's
    size. Empty for recorded files."""
    woken = [w for w in p.scaled if w is not None and w.rescaled and w.hop_delay_us > 0]
    if not woken:
        return {}
    handoff = recorded_handoff_us(p, participants, shared_clock) \
        if any(w.recorded_crowded for w in woken) else None  # else unread: the slice
    out: dict[int, float] = {}
    for members in participants.values():
        cal = calibrations.get(comm_backend(p.nodes[members[0]].name))
        if cal is None or not known_size(p, members):
            continue
        wake = wakeups_us(p, members, cal.algorithm, handoff)
        if wake > 0.0:
            out.update((m, wake) for m in members)
    return out


def wakeups_us(p: PreparedGraph, members: list[int], algorithm: str,
               handoff_us: float | None = None) -> float:
    """One scaled-out collective's wake-ups: one per hand-off of its chain
    at the new world size, each what the recording showed (``handoff_us``,
    where its ranks crowded their cores too), else the scheduler's slice
    the file names. 0 for a recorded file."""
    world = p.scaled[p.rank[members[0]]]
    if world is None or not world.rescaled or world.hop_delay_us == 0.0:
        return 0.0
    handoffs = chain_handoffs(p.comm_type[members[0]], world.world_size, algorithm)
    each = handoff_us if handoff_us is not None and world.recorded_crowded else world.hop_delay_us
    return handoffs * each


# Fewer hand-offs than this and a collective's spread of ends is not a
# chain of wake-ups: gloo's 2-rank all-gather ends one direction of its one
# connection ~19 ms after the other, arrivals or not (docs/SCALE_OUT_BENCH.md).
MIN_HANDOFFS_MEASURED = 2
# Fewer collectives measured than this and the median does not outvote one
# odd collective (a step of DDP buckets that overlap on the link leaves 0-2
# alone): the scheduler's slice is taken instead.
MIN_COLLECTIVES_MEASURED = 3
# A collective whose share of the link is its whole span to this relative
# error had the link to itself (the sum of its pieces rounds).
SHARE_TOLERANCE = 1e-9


def recorded_handoff_us(p: PreparedGraph, participants: dict[RendezvousKey, list[int]],
                        shared_clock: bool) -> float | None:
    """The wake-up per hand-off that a scaled-out job's recording shows: per
    collective timed at its recorded size, its last participant's end less
    its first's (both after the last arrival) over the recorded chain's
    hand-offs; the median. None where nothing can be measured (ranks
    without a shared clock, a recorded file, chains too short)."""
    if not shared_clock or not rescaled(p):
        return None
    shared_link = _overlapping_comm(p)
    per_handoff = []
    for members in participants.values():
        if not known_size(p, members) or any(m in shared_link for m in members):
            continue
        handoffs = chain_handoffs(p.comm_type[members[0]], recorded_ranks(p, members))
        spread = spread_per_handoff([p.start[m] for m in members],
                                    [p.start[m] + p.dur[m] for m in members], handoffs)
        if spread is not None:
            per_handoff.append(spread)
    if len(per_handoff) < MIN_COLLECTIVES_MEASURED:
        return None
    return statistics.median(per_handoff)


def spread_per_handoff(starts: Sequence[float], ends: Sequence[float],
                       handoffs: int) -> float | None:
    """One collective's last end less its first over its chain's hand-offs;
    None for a chain too short to be one, or a participant that ended
    before the last arrival (it did not wait for the chain)."""
    if handoffs < MIN_HANDOFFS_MEASURED or min(ends) < max(starts):
        return None
    return (max(ends) - min(ends)) / handoffs


def _overlapping_comm(p: PreparedGraph) -> set[int]:
    """Collectives that shared their rank's link with another one for some
    of their recorded span (``link_shares`` gives them less than their
    span): their ends are apart by the link's sharing, not by wake-ups
    (DDP's concurrent bucket all-reduces)."""
    out: set[int] = set()
    for nodes in p.rank_nodes:
        comm = [i for i in nodes if p.cat[i] == COMM]
        spans = [_own_span(p, i) for i in comm]
        for i, (start, end), share in zip(comm, spans, link_shares(spans)):
            if not math.isclose(share, end - start, rel_tol=SHARE_TOLERANCE, abs_tol=1e-9):
                out.add(i)
    return out


def rescaled(p: PreparedGraph) -> bool:
    """Some rank is a scaled-out file whose collectives were recorded at
    another rank count (``extrapolate``, ``simulate --world-size``)."""
    return any(w is not None and w.rescaled for w in p.scaled)


def host_cpu_stretch(p: PreparedGraph) -> float:
    """The factor a scaled-out job's files put on their recorded CPU time
    (their ranks share hosts' cores more than the recorded ones did:
    scaleout/hosts.py); the largest, since the ranks run in lockstep."""
    return max((w.cpu_stretch for w in p.scaled if w is not None), default=1.0)


def with_host_sharing(p: PreparedGraph, cfg: SimConfig) -> SimConfig:
    """``cfg`` with the job's host CPU stretch on its CPU scale."""
    stretch = host_cpu_stretch(p)
    if stretch == 1.0:
        return cfg
    return msgspec.structs.replace(cfg, cpu_scale=cfg.cpu_scale * stretch)


def timed_ranks(p: PreparedGraph, members: list[int]) -> int:
    """The rank count a collective is timed at: its participants, or the
    world a scaled-out file stands for (its clones are not replayed)."""
    world = p.scaled[p.rank[members[0]]]
    return len(members) if world is None else world.world_size


def recorded_ranks(p: PreparedGraph, members: list[int]) -> int:
    """The rank count a collective's recorded duration was measured at."""
    world = p.scaled[p.rank[members[0]]]
    return len(members) if world is None else world.recorded

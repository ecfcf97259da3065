"""An ASTRA-sim job: the export plus everything its analytical backends need to
run it as is, with the network fitted to the recorded collectives.

``write_job(traces, "DIR/job")`` writes ``DIR/job.<rank>.et`` (and
``DIR/job.comm_groups.json``), ``DIR/network.yml``, ``DIR/system.json``,
``DIR/memory.json`` and ``DIR/run.sh``, all or nothing. ``check_job`` runs it
(with a binary) beside the consumer model and the measured step.

**The network.** Without it the export's collectives would run on whatever
network ASTRA-sim is handed, however unlike the recording's. The job takes
the fit of ``simulate --calibrate`` (``simulation.calibration``: per backend,
a fixed overhead, a latency per algorithm step and a bandwidth fitted to the
recorded collectives) and expresses it in ASTRA-sim's terms: ASTRA-sim cuts
a collective into ``splits`` chunks and each chunk into ring messages, each
costing ``hops x latency + bytes / bandwidth`` plus fixed memory-bus delays
(``collective_time.py``). Its latency and bandwidth are chosen by least squares
(relative error, both non-negative) so that ASTRA-sim's time of every
recorded collective its network runs matches the calibrated time of the
same collective; the residual is written into ``network.yml``. The topology
is a Ring (the fit's ring algorithm sends each message one hop, to the next
rank); the system file is the project's reference one, held fixed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shlex
import stat
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pt2chakra.astra.binary import NO_GROUPS, AstraConfigs, WorkloadRun, run_configured
from pt2chakra.astra.choices import CHECK_TIMEOUT_S, DEFAULT_CPU_MODE, TOPOLOGIES
from pt2chakra.astra.collective_time import (
    BYTES_PER_GB_NETWORK,
    LOCAL_RING_BUS_DELAY_NS,
    MEMORY_FILE,
    NETWORK_FILE,
    ONE_RING,
    SUPPORTED_COLLECTIVES,
    SYSTEM_FILE,
    AstraNetwork,
    AstraSystem,
    HostTier,
    astra_collective,
    astra_comm_size,
    astra_config_texts,
    collective_finish_ns,
    collective_rank_ns,
    group_ranks,
    read_network_file,
    read_system_file,
    ring_plan,
    send_ns,
)
from pt2chakra.astra.consumer import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_LATENCY_NS,
    DEFAULT_TOPOLOGY,
    NS_PER_US,
    ConsumerResult,
    consume_loaded,
    load_for_consumer,
)
from pt2chakra.astra.export import (
    EXPORT_FILES,
    MIN_NPUS,
    CollectivePadding,
    convert_files,
    serial_issue_times,
)
from pt2chakra.atomic import StagedOutputs, check_outputs, check_prefix_outputs, write_atomic
from pt2chakra.chakra.ranks import Inputs, RankSet, open_rank_set
from pt2chakra.chakra.records import NodeType, attr_dict
from pt2chakra.errors import STEP_US, InputError, printable, read_number
from pt2chakra.files import read_side_json
from pt2chakra.names import comm_backend
from pt2chakra.rules.conventions import (
    COMM_NODE_TYPES,
    StepWindow,
    error_pct,
    rank_origins,
    scaled_world,
)
from pt2chakra.simulation import calibrate_recorded
from pt2chakra.simulation.calibration import Calibration, RecordedCalibration
from pt2chakra.simulation.network import HostLinks, host_links_of
from pt2chakra.simulation.results import SlowRank

log = logging.getLogger(__name__)

RUN_SCRIPT = "run.sh"
JOB_FILES = (NETWORK_FILE, SYSTEM_FILE, MEMORY_FILE, RUN_SCRIPT)
BINARY_ENV = "ASTRA_SIM_BIN"
DEFAULT_BINARY = "AstraSim_Analytical_Congestion_Unaware"
"""run.sh runs this unless ``ASTRA_SIM_BIN`` names another: the backend the
consumer model and the fit describe (the aware one aborts on a 2-NPU Ring)."""
FIT_ALGORITHM = "ring"
"""ASTRA-sim's collectives here are its ring algorithm, so the calibration
fits ring costs too."""
CALIBRATION_LINK_STREAMS = 1
"""As ``simulate --calibrate``: a rank's collectives share its link one at a
time (and so does ASTRA-sim: one communication node at a time per NPU)."""
NO_BYTE_COST_GBPS = 1.0e6
"""Written when the fit sees no byte cost (the calibration's bandwidth is
infinite): ASTRA-sim needs a finite number; at 10^6 GB/s the largest
recorded payloads cost well under a microsecond, i.e. nothing the fit saw."""
RELATIVE_SINGULAR = 1e-12
"""A 2x2 system whose determinant is below this share of its diagonal's
product cannot separate latency from bandwidth (every collective has the
same ratio of messages to bytes): the one-parameter fits decide."""
LATENCY, BANDWIDTH = 0, 1  # the fitted parameters: ns per hop, ns per byte
FitRow = tuple[float, float, float, float]  # (hops x messages, bytes sent, fixed ns, target ns)


@dataclass(frozen=True, slots=True)
class RecordedCollective:
    """One collective the ranks reached together, as ASTRA-sim will see it."""

    comm_type: int
    size_bytes: int  # the converter's convention (an all-gather's: its gathered output)
    ranks: tuple[int, ...]  # positions in rank order (ASTRA-sim's NPUs)

    @property
    def astra_size(self) -> int:
        """The ``comm_size`` the export writes for it (``astra_comm_size``)."""
        return astra_comm_size(self.comm_type, self.size_bytes, len(self.ranks))


@dataclass(frozen=True, slots=True)
class RankComm:
    """One communication node of one rank as recorded (the clock shared by
    the ranks), and the collective it meets the others in (None: replayed
    from its own duration, as ASTRA-sim replays a broadcast)."""

    node_id: int
    start_us: float  # when the serial chain issues it (serial_chain.comm_issue_times)
    duration_us: float
    collective: RecordedCollective | None
    meeting: int  # index of the collective among the recording's matched ones (-1: none)
    # A send or a receive: "send"/"recv" (its pair is its ``meeting``), else "".
    p2p: str = ""
    rank: int = -1  # this rank's position (a send's source, a receive's destination)
    recorded_end_us: float = math.inf  # its recorded end (the job's network ends it by then)


@dataclass(frozen=True, slots=True)
class RecordedFit:
    """What ``simulate --calibrate`` fits, per backend, and the collectives
    it was fitted to; per rank, its communication nodes in the order the
    job issues them (``comm``) when the ranks share a clock and the files
    hold their recorded collectives (not rescaled): then ``simulate`` times
    each collective from the recording and the job's waits follow it
    (``network_ends``)."""

    calibrations: dict[str, Calibration]
    collectives: dict[str, list[RecordedCollective]]
    comm: list[list[RankComm]] | None = None
    # per rank, node id -> (its collective, the wake-ups its scaled-out
    # collective adds on crowded hosts, us: durations.collective_wakeups)
    wakeups: list[dict[int, tuple[RecordedCollective, float]]] | None = None
    # the hosts' links a scaled-out job's files describe (None: its links
    # as recorded): a collective runs at its slowest hop
    host_links: HostLinks | None = None

    def target_us(self, calibration: Calibration, c: RecordedCollective) -> float:
        """The time ``simulate`` gives collective ``c`` under ``calibration``
        (at its slowest hop where it spans hosts): what the job's network is
        fitted to. ASTRA-sim's network is written with one dimension, the
        links' and uplinks' slowest hop, since gloo's ring (and NCCL's across
        nodes) is one flat ring paced by it, where ASTRA-sim's multi-dimensional
        collectives run a phase per dimension."""
        n = len(c.ranks)
        bandwidth, latency = calibration.link()
        if self.host_links is not None:
            bandwidth, latency = self.host_links.slowest_hop(n, bandwidth, latency)
        return calibration.time_us(c.comm_type, c.size_bytes, n, 1.0, bandwidth, latency)

    def chosen_backend(self) -> str | None:
        """The backend whose calibration the job's one network carries: the
        one with the most collectives ASTRA-sim's network runs (ASTRA-sim has
        one network for every collective)."""
        fitted = [b for b in self.calibrations if _network_collectives(self.collectives[b])]
        if not fitted:
            return None
        return max(sorted(fitted), key=lambda b: len(_network_collectives(self.collectives[b])))


@dataclass(frozen=True, slots=True)
class NetworkFit:
    """The job's network and, per network.yml field, how its value was obtained."""

    network: AstraNetwork
    notes: dict[str, str]
    backend: str | None = None
    calibration: Calibration | None = None
    rms_error_pct: float | None = None  # ASTRA-sim's time vs the calibrated one, per collective
    worst_error_pct: float | None = None


@dataclass(frozen=True, slots=True)
class NetworkChoice:
    """What the command line fixes; None: fitted (else the reference value)."""

    topology: str | None = None
    bandwidth_gbps: float | None = None
    latency_us: float | None = None


@dataclass(frozen=True, slots=True)
class AstraJob:
    """What ``write_job`` wrote."""

    prefix: str
    written: list[str]
    fit: NetworkFit


# --------------------------------------------------------------------------
# The recorded collectives and their calibration
# --------------------------------------------------------------------------


def recorded_fit(paths: Inputs | RankSet) -> RecordedFit:
    """``simulate --calibrate``'s fit of these traces, per backend, and the
    collectives (matched across ranks) it was fitted to."""
    fit = calibrate_recorded(paths, FIT_ALGORITHM, CALIBRATION_LINK_STREAMS)
    prepared = fit.prepared
    collectives: dict[str, list[RecordedCollective]] = defaultdict(list)
    meeting: dict[int, tuple[int, RecordedCollective]] = {}
    wakeups: list[dict[int, tuple[RecordedCollective, float]]] = \
        [{} for _ in prepared.rank_nodes]
    for k, members in enumerate(fit.matched.values()):
        first = members[0]
        ctype, size = astra_collective(prepared.comm_type[first],
                                       max(prepared.comm_bytes[m] for m in members))
        c = RecordedCollective(comm_type=ctype, size_bytes=size,
                               ranks=tuple(sorted(prepared.rank[m] for m in members)))
        collectives[comm_backend(prepared.nodes[first].name)].append(c)
        if all(m not in prepared.size_unknown for m in members):
            meeting.update((m, (k, c)) for m in members)
        for m in members:
            if m in fit.wakeups:
                wakeups[prepared.rank[m]][prepared.nodes[m].id] = (c, fit.wakeups[m])
    return RecordedFit(fit.calibrations, dict(collectives),
                       _rank_comm(fit, meeting, open_rank_set(paths).paths),
                       wakeups if fit.wakeups else None,
                       host_links_of(prepared.scaled[0]) if prepared.scaled else None)


def _rank_comm(fit: RecordedCalibration, meeting: dict[int, tuple[int, RecordedCollective]],
               paths: Sequence[str]) -> list[list[RankComm]] | None:
    """Each rank's communication nodes in the serial chain's order (recorded
    start, then id); None unless the ranks share a clock and hold their
    recorded collectives (a rescaled file's are timed by the model)."""
    p = fit.prepared
    windows = [StepWindow(s, e) for s, e in zip(p.step_start, p.step_end)]
    if rank_origins(windows, "auto")[1] != "recorded" or \
            any(w is not None and w.rescaled for w in p.scaled):
        return None
    out: list[list[RankComm]] = []
    for nodes, path in zip(p.rank_nodes, paths):
        issues = serial_issue_times(path)
        comm = sorted((i for i in nodes if p.nodes[i].type in COMM_NODE_TYPES),
                      key=lambda i: (p.nodes[i].start_time_micros, p.nodes[i].id))
        out.append([RankComm(p.nodes[i].id,
                             float(issues.get(p.nodes[i].id, p.nodes[i].start_time_micros)),
                             float(p.nodes[i].duration_micros),
                             meeting[i][1] if i in meeting else None,
                             meeting[i][0] if i in meeting else -1,
                             _P2P_KINDS.get(p.nodes[i].type, ""), len(out),
                             float(p.nodes[i].start_time_micros + p.nodes[i].duration_micros))
                    for i in comm])
    return out


_P2P_KINDS = {NodeType.COMM_SEND_NODE: "send", NodeType.COMM_RECV_NODE: "recv"}


@dataclass(frozen=True, slots=True)
class NetworkEnds:
    """Where the job's network ends each rank's communication nodes on the
    recorded clock (``network_ends``), and the collectives it trims to end
    by their recorded ends."""

    ends: list[dict[int, float]]  # per rank, node id -> the network's end
    # per rank, node id -> bytes the job takes off the collective's size
    trimmed: list[dict[int, int]]


NO_NETWORK_ENDS = NetworkEnds([], [])
TRIM_TOLERANCE_US = 1.0
"""A collective the network ends later than its recorded end by no more than
this is left as it is: the trace's times are whole microseconds."""


def network_ends(recorded: RecordedFit, network: AstraNetwork,
                 system: AstraSystem) -> NetworkEnds:
    """Per rank, node id -> where the job's network ends the collective on the
    recorded clock: what the serial chain's waits start from (empty: the
    recorded ends). ``simulate`` replays a recorded collective to each rank's
    own recorded end; the job's network (a model, one collective at a time
    per rank) ends it elsewhere. The rest of the rank's recorded time after
    it (a host thread's wake-up on crowded cores, a transfer that finished
    late on one rank) is then a fixed gap after ASTRA-sim's end, so that the
    job at the recorded scale ends where the recording did and a network
    what-if moves only the network's part. Each rank issues its collectives
    one after another (``comm_order``) and a collective's members each issue
    it at their recorded start or when their previous one ends, whichever is
    later (ASTRA-sim's ring: ``collective_finish_ns``).

    A collective the network would end after some member's recorded end
    (the fit is an average: on a loaded host the same all-reduce took 9 ms
    once and 219 ms another time) is trimmed to the bytes that end it by
    then: a gap after a collective can hold the recorded time the network
    leaves over, but no gap can take back time the network overran, and
    over a step those overruns add up (``_trimmed``)."""
    if recorded.comm is None:
        return NO_NETWORK_ENDS
    ends: list[dict[int, float]] = [{} for _ in recorded.comm]
    trimmed: list[dict[int, int]] = [{} for _ in recorded.comm]
    free = [-math.inf] * len(recorded.comm)  # when each rank's previous collective ends
    head = [0] * len(recorded.comm)
    waiting: dict[int, dict[int, RankComm]] = defaultdict(dict)
    arrivals: dict[int, float] = {}  # a send's pair -> when its bytes arrive
    progressed = True
    while progressed:
        progressed = False
        for rank, comms in enumerate(recorded.comm):
            while head[rank] < len(comms):
                c = comms[head[rank]]
                if c.collective is None:  # replayed from its own duration
                    free[rank] = ends[rank][c.node_id] = max(c.start_us, free[rank]) + \
                        c.duration_us
                elif c.p2p:
                    end = _p2p_end(c, free[rank], arrivals, network)
                    if end is None:
                        break  # a receive before its send
                    free[rank] = ends[rank][c.node_id] = end
                else:
                    waiting[c.meeting][rank] = c
                    break
                head[rank] += 1
                progressed = True
        for k, members in list(waiting.items()):
            first = next(iter(members.values())).collective
            assert first is not None
            if len(members) < len(first.ranks):
                continue
            del waiting[k]
            cut = _meet(first, members, ends, free, network, system)
            for rank, m in members.items():
                head[rank] += 1
                if cut:
                    trimmed[rank][m.node_id] = cut
            progressed = True
    return NetworkEnds(ends, trimmed)


def link_scales(recorded: RecordedFit, fitted: AstraNetwork, network: AstraNetwork,
                system: AstraSystem) -> list[dict[int, float]]:
    """Per rank, node id -> how the job's network scales the collective
    against the fitted one (ASTRA-sim's time of it, every member issuing
    together, under ``network`` over under ``fitted``): the serial chain
    scales by it the recorded link time after the fitted network's end of
    the collective (``serial_chain``, ``_gap_after``). That time is the
    link's too (gloo ran two collectives at a time sharing it; the fitted
    network runs them one after another), so a network what-if moves it as
    it moves the collective. Empty at the fitted network (every scale 1) and
    where the waits start at the recorded ends (no network ends)."""
    if recorded.comm is None or fitted == network:
        return []
    times: dict[int, float] = {}
    out: list[dict[int, float]] = []
    for comms in recorded.comm:
        scales: dict[int, float] = {}
        for c in comms:
            if c.collective is None:
                continue
            if c.meeting not in times:
                times[c.meeting] = _time_ratio(c.collective, fitted, network, system)
            scales[c.node_id] = times[c.meeting]
        out.append(scales)
    return out


def wakeup_padding(recorded: RecordedFit, network: AstraNetwork,
                   system: AstraSystem) -> list[CollectivePadding]:
    """Per rank, what each scaled-out collective's wake-ups on crowded hosts
    add to it in the job (``durations.collective_wakeups``; the replay adds
    them to the collective's time): bytes ASTRA-sim's network takes that
    long to carry under the job's network, so that the wake-ups stay on the
    rank's communication and keep their time under a network what-if; for
    a collective ASTRA-sim replays from its duration, that duration. Empty
    for recorded files."""
    if recorded.wakeups is None:
        return []
    memo: dict[tuple[RecordedCollective, float], tuple[int, int]] = {}
    out = []
    for rank in recorded.wakeups:
        padding = CollectivePadding({}, {})
        for node_id, (c, wake_us) in rank.items():
            if (c, wake_us) not in memo:
                memo[(c, wake_us)] = _padding_of(c, wake_us, network, system)
            extra_bytes, extra_us = memo[(c, wake_us)]
            if extra_bytes:
                padding.size_bytes[node_id] = extra_bytes
            if extra_us:
                padding.micros[node_id] = extra_us
        out.append(padding)
    return out


def slow_rank_padding(recorded: RecordedFit, ends: NetworkEnds,
                      padding: Sequence[CollectivePadding], slow: SlowRank,
                      rank_labels: Sequence[int], network: AstraNetwork,
                      system: AstraSystem) -> list[CollectivePadding]:
    """``padding`` with every collective the slow rank joins made ``slow.link``
    times longer under the job's network (ASTRA-sim's network has one link
    rate for every rank; a ring is paced by its slowest hop, so each member's
    node of it carries the bytes that take that much longer: ``_padding_of``).
    Its sends and receives keep their time. The slow rank's CPU is the
    export's (``host_stretched``)."""
    if slow.rank not in rank_labels:
        raise InputError("--slow-rank", f"rank {slow.rank} is not among the job's ranks "
                         f"({', '.join(map(str, rank_labels))})")
    if slow.link == 1.0:
        return list(padding)
    if recorded.comm is None:
        raise InputError("--slow-rank", "a slow link needs the ranks' recorded collectives on "
                         "one clock (a job at its recorded scale, its ranks on one clock)")
    out = [CollectivePadding(dict(p.size_bytes), dict(p.micros)) for p in padding] or \
        [CollectivePadding({}, {}) for _ in recorded.comm]
    memo: dict[RecordedCollective, tuple[int, int]] = {}
    for rank, c, collective in _joined_by(recorded.comm, rank_labels.index(slow.rank)):
        cut = ends.trimmed[rank].get(c.node_id, 0)
        as_written = dataclasses.replace(collective, size_bytes=collective.size_bytes - cut)
        if as_written not in memo:
            base = _astra_ns(as_written, network, system)
            memo[as_written] = (0, 0) if base is None else _padding_of(
                as_written, (slow.link - 1.0) * base / NS_PER_US, network, system)
        extra_bytes, extra_us = memo[as_written]
        if extra_bytes:
            out[rank].size_bytes[c.node_id] = out[rank].size_bytes.get(c.node_id, 0) + \
                extra_bytes
        if extra_us:
            out[rank].micros[c.node_id] = out[rank].micros.get(c.node_id, 0) + extra_us
    return out


def slow_rank_scales(recorded: RecordedFit, scales: Sequence[dict[int, float]],
                     slow: SlowRank, rank_labels: Sequence[int]) -> list[dict[int, float]]:
    """``scales`` (``link_scales``) with the recorded link time the fitted
    network leaves unexplained after each collective the slow rank joins
    scaled by ``slow.link`` too: the replay slows the collective's whole
    recorded time, the padding only the network's part."""
    if slow.link == 1.0 or recorded.comm is None:
        return list(scales)
    out = [dict(s) for s in scales] or [{} for _ in recorded.comm]
    for rank, c, _collective in _joined_by(recorded.comm, rank_labels.index(slow.rank)):
        out[rank][c.node_id] = out[rank].get(c.node_id, 1.0) * slow.link
    return out


def _joined_by(comm: list[list[RankComm]], at: int,
               ) -> Iterator[tuple[int, RankComm, RecordedCollective]]:
    """(rank, node, its collective) of every collective the rank at position
    ``at`` joins, on each member (its sends and receives left out)."""
    for rank, comms in enumerate(comm):
        for c in comms:
            if c.collective is not None and not c.p2p and at in c.collective.ranks:
                yield rank, c, c.collective


def _padding_of(c: RecordedCollective, wake_us: float, network: AstraNetwork,
                system: AstraSystem) -> tuple[int, int]:
    """(bytes, us): the least bytes, in whole granules, that lengthen ``c``
    in ASTRA-sim by ``wake_us`` (bisection on its exact collective model),
    or the microseconds where that model does not time it. A granule is
    ``splits x n x n`` bytes, so that the padded size divides into the same
    number of chunks and messages as the collective's own (one byte over a
    multiple of ``splits`` makes ASTRA-sim send a fifth chunk)."""
    base = _astra_ns(c, network, system)
    want = wake_us * NS_PER_US
    if base is None or c.comm_type not in SUPPORTED_COLLECTIVES:
        return 0, round(wake_us)
    granule = _granule(c, system)

    def long_enough(granules: int) -> bool:
        grown = dataclasses.replace(c, size_bytes=c.size_bytes + granules * granule)
        t = _astra_ns(grown, network, system)
        return (t if t is not None else base) - base >= want

    hi = 1
    while not long_enough(hi):
        hi *= 2
    return _first_true(long_enough, 0, hi) * granule, 0


def _granule(c: RecordedCollective, system: AstraSystem) -> int:
    """The bytes a collective's size moves by when padded or trimmed
    (``splits x n x n``): the chunks and messages still divide evenly."""
    return system.splits * len(c.ranks) ** 2


def _first_true(holds: Callable[[int], bool], lo: int, hi: int) -> int:
    """The least k in ``(lo, hi]`` for which ``holds`` (false up to some k,
    true from there on; true at ``hi``), by bisection."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _time_ratio(c: RecordedCollective, fitted: AstraNetwork, network: AstraNetwork,
                system: AstraSystem) -> float:
    """ASTRA-sim's time of ``c`` under ``network`` over under ``fitted``
    (1 where its network model does not time it)."""
    base, other = (_astra_ns(c, net, system) for net in (fitted, network))
    return other / base if base is not None and other is not None and base > 0 else 1.0


def _astra_ns(c: RecordedCollective, network: AstraNetwork, system: AstraSystem,
              ) -> float | None:
    """ASTRA-sim's time of a recorded collective under ``network``, every
    member issuing it together (the exact collective model,
    ``collective_time.py``); None where that model does not time it."""
    try:
        return max(collective_rank_ns(c.comm_type, c.astra_size, len(c.ranks), network, system,
                                      ranks=c.ranks).values())
    except ValueError:
        return None


def _p2p_end(c: RankComm, free: float, arrivals: dict[int, float],
             network: AstraNetwork) -> float | None:
    """A send or receive as ASTRA-sim's analytical network runs it (the
    consumer model's ``post``): a send, issued when the rank's previous
    communication ended, ends when its bytes arrive and waits for no
    receive; a receive ends when its send's bytes have arrived (None: its
    send is not issued yet)."""
    issued = max(c.start_us, free)
    assert c.collective is not None
    if c.p2p == "send":
        peer = next((r for r in c.collective.ranks if r != c.rank), c.rank)
        try:
            arrival = issued + send_ns(c.collective.size_bytes, c.rank, peer, network) / NS_PER_US
        except ValueError:
            arrival = issued + c.duration_us
        arrivals[c.meeting] = arrival
        return arrival
    sent = arrivals.get(c.meeting)
    return None if sent is None else max(issued, sent)


def _meet(c: RecordedCollective, members: dict[int, RankComm], ends: list[dict[int, float]],
          free: list[float], network: AstraNetwork, system: AstraSystem) -> int:
    """One collective's members' ends under the job's network (the recorded
    ends when ASTRA-sim's network does not time it); returns the bytes
    trimmed off it so that no member ends after its recorded end (0: none)."""
    issued = {r: max(m.start_us, free[r]) for r, m in members.items()}
    base = min(issued.values())
    offsets = {r: round((t - base) * NS_PER_US) for r, t in issued.items()}
    group = group_ranks(len(c.ranks), network, c.ranks)

    def finish(size: int) -> dict[int, int] | None:
        try:
            return collective_finish_ns(c.comm_type, astra_comm_size(c.comm_type, size,
                                                                     len(c.ranks)),
                                        network, system, group, offsets)
        except ValueError:
            return None

    def overruns(done: dict[int, int]) -> bool:
        return any(base + done[r] / NS_PER_US > m.recorded_end_us + TRIM_TOLERANCE_US
                   for r, m in members.items() if r in done)

    def ends_in_time(size: int) -> bool:
        done = finish(size)
        return done is not None and not overruns(done)

    done = finish(c.size_bytes)
    size = c.size_bytes
    if done is not None and overruns(done):
        size = _trimmed(c, ends_in_time, system)
        done = finish(size)
    for r, m in members.items():
        end = base + done[r] / NS_PER_US if done is not None and r in done else \
            issued[r] + m.duration_us
        free[r] = ends[r][m.node_id] = end
    return c.size_bytes - size


def _trimmed(c: RecordedCollective, fits: Callable[[int], bool], system: AstraSystem) -> int:
    """The largest size below ``c``'s, in whole granules (``_granule``), for
    which ``fits`` holds (true up to some size, false beyond); one granule
    where none does (a collective still moves bytes)."""
    granule = _granule(c, system)
    most = max(1, c.size_bytes // granule)
    if fits(most * granule):
        return most * granule
    if not fits(granule):
        return granule
    return (_first_true(lambda k: not fits(k * granule), 1, most) - 1) * granule


def _network_collectives(collectives: Sequence[RecordedCollective]) -> list[RecordedCollective]:
    """The collectives ASTRA-sim's network model times (a broadcast it replays
    from its duration; other types it refuses)."""
    return [c for c in collectives if c.comm_type in SUPPORTED_COLLECTIVES and len(c.ranks) > 1]


# --------------------------------------------------------------------------
# The calibration in ASTRA-sim's terms
# --------------------------------------------------------------------------


def _fit_row(c: RecordedCollective, probe: AstraNetwork, system: AstraSystem,
             target_ns: float) -> FitRow | None:
    """ASTRA-sim's time of ``c`` as ``hops x messages x latency + bytes sent
    x ns per byte + fixed ns`` (the unaware backend, every member issuing
    together; ``collective_time.py``); None for a collective ASTRA-sim cannot
    chunk (an all-gather smaller than its splits)."""
    try:
        plan = ring_plan(c.comm_type, c.astra_size, len(c.ranks), probe.npus, system.splits)
    except ValueError:
        return None
    ring = c.ranks
    hops = max(probe.hops(ring[i - 1], ring[i]) for i in range(len(ring)))
    whole_machine = len(ring) == probe.npus
    bus = system.endpoint_delay_ns if whole_machine else LOCAL_RING_BUS_DELAY_NS
    fixed = plan.chunks * ((plan.sends + 1) * bus
                           + plan.reducing_receives * system.reduce_ns(plan.message_bytes))
    messages = plan.chunks * plan.sends
    return (messages * hops, messages * plan.message_bytes, fixed, target_ns)


def _least_squares(rows: Sequence[FitRow], free: Sequence[int],
                   fixed: Sequence[float]) -> tuple[float, float]:
    """(latency ns, ns per byte) minimising the squared error relative to
    each target, both >= 0; parameters not in ``free`` keep ``fixed``. An
    exact search: every subset of the free parameters, the rest at zero."""
    best: tuple[float, tuple[float, float]] | None = None
    for subset in _subsets(free):
        params = _solve_subset(rows, subset, fixed, free)
        if params is None or min(params) < 0:
            continue
        error = _relative_sq_error(rows, params)
        if best is None or error < best[0]:
            best = (error, params)
    return best[1] if best is not None else (fixed[LATENCY], fixed[BANDWIDTH])


def _subsets(free: Sequence[int]) -> Iterator[tuple[int, ...]]:
    yield tuple(free)
    if len(free) == 2:
        yield (free[0],)
        yield (free[1],)
    if free:
        yield ()


def _solve_subset(rows: Sequence[FitRow], subset: tuple[int, ...], fixed: Sequence[float],
                  free: Sequence[int]) -> tuple[float, float] | None:
    """Weighted least squares over ``subset``; the other free parameters at
    zero, the rest at ``fixed``. None when singular."""
    params = [0.0 if j in free else fixed[j] for j in (LATENCY, BANDWIDTH)]
    # residual relative to the target: (x . p + fixed - t) / t
    xs = [[row[j] / row[3] for j in subset] for row in rows]
    ys = [(row[3] - row[2] - sum(row[j] * params[j] for j in (LATENCY, BANDWIDTH)
                                  if j not in subset)) / row[3] for row in rows]
    if len(subset) == 1:
        sxx = sum(x[0] * x[0] for x in xs)
        if sxx <= 0:
            return None
        params[subset[0]] = sum(x[0] * y for x, y in zip(xs, ys)) / sxx
    elif len(subset) == 2:
        a = sum(x[0] * x[0] for x in xs)
        b = sum(x[0] * x[1] for x in xs)
        d = sum(x[1] * x[1] for x in xs)
        det = a * d - b * b
        if det <= RELATIVE_SINGULAR * a * d:
            return None
        u = sum(x[0] * y for x, y in zip(xs, ys))
        v = sum(x[1] * y for x, y in zip(xs, ys))
        params[subset[0]] = (d * u - b * v) / det
        params[subset[1]] = (a * v - b * u) / det
    return params[LATENCY], params[BANDWIDTH]


def _relative_sq_error(rows: Sequence[FitRow], params: tuple[float, float]) -> float:
    return sum(((r[0] * params[0] + r[1] * params[1] + r[2] - r[3]) / r[3]) ** 2 for r in rows)


def gbps_of(ns_per_byte: float) -> float:
    """ASTRA-sim's bandwidth (GB/s with 1 GB = 2^30 B) for a cost per byte."""
    if ns_per_byte <= 0:
        return NO_BYTE_COST_GBPS
    return 1e9 / ns_per_byte / BYTES_PER_GB_NETWORK


def ns_per_byte_of(gbps: float) -> float:
    return 1e9 / (gbps * BYTES_PER_GB_NETWORK)


def _as_recorded(fit: NetworkFit, recorded: RecordedFit, choice: NetworkChoice,
                 system: AstraSystem) -> NetworkFit:
    """The network the recording is explained by: the fit without the
    command line's bandwidth and latency. The chain's fixed gaps (the recorded
    time after the network's end of each collective) are measured against it;
    measured against a what-if network, they would absorb the what-if and
    ``--bandwidth`` would not move the step."""
    if choice.bandwidth_gbps is None and choice.latency_us is None:
        return fit
    return fit_network(recorded, fit.network.npus, NetworkChoice(topology=choice.topology),
                       system)


def fit_network(recorded: RecordedFit, npus: int, choice: NetworkChoice = NetworkChoice(),
                system: AstraSystem | None = None) -> NetworkFit:
    """The job's network: the command line's values where given, the
    calibration expressed in ASTRA-sim's terms for the rest (the reference
    network's where nothing was recorded to fit)."""
    system = system or AstraSystem()
    topology = choice.topology or DEFAULT_TOPOLOGY
    if topology not in TOPOLOGIES:
        raise InputError("--topology", f"{topology!r}: expected one of {', '.join(TOPOLOGIES)}")
    backend = recorded.chosen_backend()
    probe = AstraNetwork(topology, npus, DEFAULT_BANDWIDTH_GBPS, DEFAULT_LATENCY_NS)
    rows: list[FitRow] = []
    calibration = recorded.calibrations.get(backend) if backend is not None else None
    if calibration is not None and backend is not None:
        for c in _network_collectives(recorded.collectives[backend]):
            target = recorded.target_us(calibration, c) * NS_PER_US
            row = _fit_row(c, probe, system, target) if target > 0 else None
            if row is not None:
                rows.append(row)
    given = (None if choice.latency_us is None else choice.latency_us * NS_PER_US,
             None if choice.bandwidth_gbps is None else ns_per_byte_of(choice.bandwidth_gbps))
    free = [j for j in (LATENCY, BANDWIDTH) if given[j] is None] if rows else []
    reference = (DEFAULT_LATENCY_NS, ns_per_byte_of(DEFAULT_BANDWIDTH_GBPS))
    fixed = [reference[j] if given[j] is None else float(given[j] or 0.0)
             for j in (LATENCY, BANDWIDTH)]
    latency_ns, per_byte = _least_squares(rows, free, fixed) if free else (fixed[0], fixed[1])
    bandwidth = choice.bandwidth_gbps if choice.bandwidth_gbps is not None else \
        gbps_of(per_byte)
    latency = choice.latency_us * NS_PER_US if choice.latency_us is not None else latency_ns
    network = AstraNetwork(topology, npus, bandwidth, latency)
    rms, worst = _residual(recorded, backend, calibration, network, system) if rows else (None,
                                                                                          None)
    notes = _notes(choice, backend, calibration, len(rows), rms, worst, npus, free, system)
    others = sorted(b or "other" for b, cs in recorded.collectives.items()
                    if b != backend and _network_collectives(cs))
    if others and backend is not None:
        notes["header"] += (f"\nASTRA-sim has one network: the collectives of {', '.join(others)}"
                            " run on it too (not fitted).")
    return NetworkFit(network, notes, backend, calibration, rms, worst)


def across_hosts(fit: NetworkFit, recorded: RecordedFit, choice: NetworkChoice,
                 system: AstraSystem) -> tuple[NetworkFit, AstraSystem]:
    """A job whose ranks span hosts joined by uplinks as a network.yml of two
    dimensions (``HostTier``): the uplinks (``fit``'s values, the slowest
    hop's) first, then the links within a host (the same collectives fitted
    on the ranks' own links), under ``oneRing``, one ring over every NPU
    paced by its slowest hop as gloo's flat ring is."""
    links = recorded.host_links
    if links is None or fit.calibration is None or not _spans_hosts(recorded, fit.network):
        return fit, system
    within = dataclasses.replace(recorded, host_links=links._replace(uplink_gbps=None,
                                                                     uplink_latency_us=0.0))
    inner = fit_network(within, fit.network.npus, choice, system).network
    network = dataclasses.replace(fit.network, hosts=HostTier(
        links.ranks_per_host, inner.bandwidth_gbps, inner.latency_ns))
    one_ring = dataclasses.replace(system, implementation=ONE_RING)
    return (dataclasses.replace(fit, network=network,
                                notes=_two_tier_notes(fit.notes, network, one_ring)), one_ring)


def _spans_hosts(recorded: RecordedFit, network: AstraNetwork) -> bool:
    """Do the job's ranks fill two hosts or more of two ranks or more, joined
    by uplinks, with every collective on the whole job? (A smaller group's
    ring in ASTRA-sim would take its hops on the dimensions its members'
    addresses give, which need not be the hosts the target has.)"""
    links, npus = recorded.host_links, network.npus
    if links is None or links.uplink_gbps is None:
        return False
    per_host = links.ranks_per_host
    if per_host < 2 or npus % per_host or npus // per_host < 2:
        return False
    return all(len(c.ranks) == npus for cs in recorded.collectives.values()
               for c in _network_collectives(cs))


def _two_tier_notes(notes: dict[str, str], network: AstraNetwork,
                    system: AstraSystem) -> dict[str, str]:
    """network.yml's comments for two tiers: what each dimension is and why
    one ring over both runs at the uplinks."""
    (hosts, _, _), (per_host, _, _) = network.dimensions
    dims = f"dimension 0: the uplinks between the {hosts} hosts; dimension 1: the links " \
        f"within each host of {per_host} ranks"
    return {**notes,
            "header": f"{notes['header']}\nTwo tiers, one dimension each ({dims}). "
                      "ASTRA-sim times a message on the first dimension where the two NPUs' "
                      f"addresses differ (NPU i: [i mod {hosts}, i div {hosts}]), so under "
                      f"{ONE_RING} every hop of the one ring crosses dimension 0 and the ring "
                      "runs at its slowest hop, as gloo's flat ring does; ranks are NPUs in "
                      "order, each host's place in ASTRA-sim's addressing a label only.",
            "npus_count": f"{hosts} hosts x {per_host} ranks each ({network.npus} traces)",
            "bandwidth": f"{dims}. {notes['bandwidth']}; dimension 1 fitted the same way to "
                         "the ranks' own links",
            "latency": f"{dims}. {notes['latency']}; dimension 1 fitted the same way",
            "system": _system_note(system)}


def _residual(recorded: RecordedFit, backend: str | None, calibration: Calibration | None,
              network: AstraNetwork, system: AstraSystem) -> tuple[float | None, float | None]:
    """ASTRA-sim's time of each recorded collective (the exact collective
    model, ``collective_time.py``) against the calibrated time: rms and worst
    relative error in %."""
    if backend is None or calibration is None:
        return None, None
    errors = []
    for c in _network_collectives(recorded.collectives[backend]):
        target = recorded.target_us(calibration, c) * NS_PER_US
        got = _astra_ns(c, network, system)
        if got is not None and target > 0:
            errors.append(100.0 * (got - target) / target)
    if not errors:
        return None, None
    return math.sqrt(sum(e * e for e in errors) / len(errors)), max(errors, key=abs)


def _notes(choice: NetworkChoice, backend: str | None, calibration: Calibration | None,
           fitted: int, rms: float | None, worst: float | None, npus: int, free: list[int],
           system: AstraSystem) -> dict[str, str]:
    """Per network.yml field, one comment saying where its value came from."""
    header = ["ASTRA-sim analytical network, written by pt2chakra astra-sim.",
              "Run the job with run.sh; check it: pt2chakra astra-sim --check <prefix>."]
    if calibration is not None and fitted:
        header.append(f"Fitted to the recording: {backend or 'other'} collectives, "
                      f"{calibration.describe()} (the fit of simulate --calibrate).")
        how = (f"Expressed in ASTRA-sim's terms by least squares over the {fitted} recorded "
               "collectives its network runs" if free else
               f"Latency and bandwidth given on the command line; over the {fitted} recorded "
               "collectives its network runs")
        header.append(f"{how}; ASTRA-sim's time of each vs the calibrated one: "
                      f"rms {rms or 0:.2f} %, worst {worst or 0:+.2f} %.")
    else:
        header.append("No recorded collective that ASTRA-sim's network runs: nothing fitted; "
                      "values not given on the command line are the project's reference "
                      "network (Ring, 50 GB/s, 500 ns).")
    fit_word = "fitted" if fitted else "reference value"
    topology = "given with --topology" if choice.topology else (
        "Ring: ASTRA-sim's ring collectives send every message one hop, to the next rank, "
        "as the fitted ring algorithm assumes")
    bandwidth = "given with --bandwidth (GB/s as ASTRA-sim reads it: 1 GB = 2^30 B)" \
        if choice.bandwidth_gbps is not None else (
            f"{fit_word}: the calibration's bytes term, per byte a ring message carries "
            "(GB/s with 1 GB = 2^30 B)" if BANDWIDTH in free else
            "reference value (ASTRA_SIM.md): nothing recorded to fit")
    if BANDWIDTH in free and calibration is not None and math.isinf(calibration.bandwidth_gbps):
        bandwidth = (f"the calibration saw no byte cost: {NO_BYTE_COST_GBPS:g} GB/s stands "
                     "for none (a bandwidth what-if on this job changes nothing)")
    latency = "given with --latency (us on the command line, ns here)" \
        if choice.latency_us is not None else (
            "fitted: ns per hop of each ring message; carries the calibration's fixed "
            "overhead and per-step latency (a collective sends splits x steps messages)"
            if LATENCY in free else "reference value (ASTRA_SIM.md): nothing recorded to fit")
    return {"header": "\n".join(header), "topology": topology,
            "npus_count": f"one NPU per rank ({npus} traces)", "bandwidth": bandwidth,
            "latency": latency, "system": _system_note(system)}


def _system_note(system: AstraSystem) -> str:
    return (f"system.json: {system.implementation} collectives, {system.splits} splits, "
            f"endpoint-delay {system.endpoint_delay_ns} ns, local-mem-bw "
            f"{system.local_mem_bw_gbps:g} GB/s: the project's reference system, held fixed "
            "by the fit.")


# --------------------------------------------------------------------------
# Writing the job
# --------------------------------------------------------------------------


def run_script(name: str, groups: bool) -> str:
    """run.sh: ASTRA-sim on the job, from the job's folder (where it writes log/)."""
    groups_arg = shlex.quote(f"{name}.comm_groups.json") if groups else NO_GROUPS
    return f"""#!/bin/sh
# ASTRA-sim job written by pt2chakra astra-sim: {_comment_name(name)}.<rank>.et, one per NPU.
# ASTRA_SIM_BIN names the binary (default: {DEFAULT_BINARY} on PATH).
# How each network value was obtained: the comments in {NETWORK_FILE}.
cd "$(dirname "$0")" || exit 2
exec "${{{BINARY_ENV}:-{DEFAULT_BINARY}}}" \\
  --workload-configuration={shlex.quote('./' + name)} \\
  --comm-group-configuration={groups_arg} \\
  --system-configuration={SYSTEM_FILE} \\
  --remote-memory-configuration={MEMORY_FILE} \\
  --network-configuration={NETWORK_FILE}
"""


@contextlib.contextmanager
def _new_folders(folder: str) -> Iterator[None]:
    """``folder`` created (with its parents) for the block; the ones created
    are removed again when the block fails (a failed job leaves nothing)."""
    missing = []
    path = os.path.abspath(folder)
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for path in missing:  # deepest first; a folder not empty stays
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise


def _comment_name(name: str) -> str:
    """``name`` as written in run.sh's comment: as is when plain, else quoted
    for the shell (``check_outputs`` already refuses control characters, so
    nothing can end the comment line)."""
    quoted = shlex.quote(name)
    return name if quoted == name else printable(quoted)


def check_job_outputs(inputs: Sequence[str | os.PathLike[str]],
                      prefix: str | os.PathLike[str]) -> tuple[str, str]:
    """Before any work: the job's files (``<prefix>.<rank>.et`` and the fixed
    files beside them) are none of ``inputs``; returns (folder, job name)."""
    prefix = os.fspath(prefix)
    folder, name = os.path.split(prefix)
    if not name:
        raise InputError(prefix, "the output needs a name after the folder (DIR/job)")
    check_prefix_outputs(inputs, prefix, EXPORT_FILES)
    check_outputs(inputs, [os.path.join(folder, f) for f in JOB_FILES], folders_exist=False)
    return folder, name


def write_job(inputs: Sequence[str | os.PathLike[str]], prefix: str | os.PathLike[str],
              cpu: str = DEFAULT_CPU_MODE, choice: NetworkChoice = NetworkChoice(),
              force: bool = False, predicted_step_us: float | None = None,
              slow: SlowRank | None = None) -> AstraJob:
    """The export of ``inputs`` (one per rank) as ``<prefix>.<rank>.et``, and
    the configuration and run.sh beside it; the folder is created. All or
    nothing: every file is staged and moved into place together.
    ``predicted_step_us``: our own prediction of the job (a scaled-out job
    has no measured step at its scale), kept in ``<prefix>.prediction.json``
    for ``--check``. ``slow``: one rank slowed, as ``simulate --slow-rank``
    replays it (``slow_rank_padding``)."""
    prefix = os.fspath(prefix)
    folder, name = check_job_outputs(inputs, prefix)
    system = AstraSystem()
    ranks = open_rank_set(inputs, force)
    for f in ranks.files:  # the numbers the fit reads from the metadata, naming the file
        scaled_world(attr_dict(f.metadata.attrs), f.path)
    with _new_folders(folder or "."), StagedOutputs() as staged:
        fit, ends, scales, padding = None, NO_NETWORK_ENDS, [], []
        if len(inputs) >= MIN_NPUS:
            recorded = recorded_fit(ranks)
            fit = fit_network(recorded, len(inputs), choice, system)
            fit, system = across_hosts(fit, recorded, choice, system)
            fitted = _as_recorded(fit, recorded, choice, system).network
            ends = network_ends(recorded, fitted, system)
            scales = link_scales(recorded, fitted, fit.network, system)
            padding = wakeup_padding(recorded, fit.network, system) or \
                [CollectivePadding({n: -cut for n, cut in rank.items()}, {})
                 for rank in ends.trimmed]
            fit = _with_trim_note(fit, ends)
            if slow is not None:
                padding = slow_rank_padding(recorded, ends, padding, slow, ranks.ranks,
                                            fit.network, system)
                scales = slow_rank_scales(recorded, scales, slow, ranks.ranks)
        written = convert_files(ranks, prefix, cpu=cpu, force=force, staged=staged,
                                network_ends=ends.ends, link_scales=scales,
                                padding=padding,
                                slow_cpu={slow.rank: slow.cpu} if slow is not None else None)
        if fit is None:
            raise InputError(os.fspath(inputs[0]), f"a job needs every rank's trace, one per "
                             f"NPU (ASTRA-sim runs at least {MIN_NPUS}); got {len(inputs)}")
        texts = astra_config_texts(fit.network, system, fit.notes)
        has_groups = any(p.endswith(".comm_groups.json") for p in written)
        texts[RUN_SCRIPT] = run_script(name, has_groups)
        for file_name in JOB_FILES:
            target = os.path.join(folder, file_name)
            temp = staged.stage(target)
            write_atomic(temp, texts[file_name].encode())
            if file_name == RUN_SCRIPT:
                os.chmod(temp, os.stat(temp).st_mode | stat.S_IXUSR | stat.S_IXGRP
                         | stat.S_IXOTH)
            written.append(target)
        if predicted_step_us is not None:
            target = prediction_path(prefix)
            write_atomic(staged.stage(target),
                         json.dumps({PREDICTION_KEY: predicted_step_us}).encode())
            written.append(target)
        staged.commit()
    return AstraJob(prefix, written, fit)


def _with_trim_note(fit: NetworkFit, ends: NetworkEnds) -> NetworkFit:
    """``fit`` with network.yml's header saying which collectives the job
    carries smaller than recorded (``network_ends``), so that nobody reads
    their sizes as the trace's."""
    nodes = sum(len(rank) for rank in ends.trimmed)
    if not nodes:
        return fit
    note = (f"{nodes} collective nodes are written smaller than recorded: under this network "
            "they would end after their recorded ends (the fit is an average of the "
            "recording), so the job carries the bytes that end them by then.")
    return dataclasses.replace(fit, notes={**fit.notes,
                                           "header": f"{fit.notes['header']}\n{note}"})


PREDICTION_KEY = "simulate_step_us"


def prediction_path(prefix: str) -> str:
    return f"{prefix}.prediction.json"


def _read_prediction(prefix: str) -> float | None:
    """Our prediction written beside the job, if any (a missing file: none;
    a bad one: none and one warning naming it; the check still runs)."""
    path = prediction_path(prefix)
    if not os.path.isfile(path):
        return None
    try:
        doc = read_side_json(path)
        value = doc.get(PREDICTION_KEY) if isinstance(doc, dict) else None
        return read_number(value, STEP_US, path, f"field {PREDICTION_KEY}")
    except InputError as exc:
        log.warning("%s (the check runs without our prediction)", exc)
        return None


# --------------------------------------------------------------------------
# Checking the job
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobCheck:
    """A job beside the consumer model and the measured step (and the binary's
    output, when one ran)."""

    prefix: str
    network: AstraNetwork
    system: AstraSystem
    model: ConsumerResult
    binary: WorkloadRun | None = None
    binary_path: str | None = None
    predicted_step_us: float | None = None  # ours (simulate), when written with the job

    @property
    def astra_sim_step_us(self) -> float | None:
        if self.binary is None:
            return None
        return max(self.binary.finished.values()) / NS_PER_US

    @property
    def error_pct(self) -> float | None:
        """ASTRA-sim's step against the measured one."""
        step = self.astra_sim_step_us
        return error_pct(step, self.model.measured_step_us) if step is not None else None

    @property
    def model_vs_binary_pct(self) -> float | None:
        """The consumer model's worst rank against the binary, in %."""
        if self.binary is None:
            return None
        return max(abs(r.finished_ns - self.binary.finished[r.rank])
                   / max(self.binary.finished[r.rank], 1) * 100 for r in self.model.ranks)


def _job_file(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise InputError(path, "missing: not a job folder written by pt2chakra astra-sim -o "
                         "DIR/job")
    return path


def check_job(prefix: str | os.PathLike[str], binary: str | os.PathLike[str] | None = None,
              timeout_s: float = CHECK_TIMEOUT_S) -> JobCheck:
    """Run the job ``prefix`` (``DIR/job``) through the consumer model and,
    when ``binary`` is given, through ASTRA-sim itself, with its own files
    (stopped after ``timeout_s``; its output bounded: ``children.run_bounded``)."""
    prefix = os.fspath(prefix)
    folder = os.path.dirname(prefix) or "."
    configs = AstraConfigs(*(Path(_job_file(folder, n)) for n in
                             (NETWORK_FILE, SYSTEM_FILE, MEMORY_FILE)))
    network = read_network_file(configs.network)
    system = read_system_file(configs.system)
    traces = [_job_file(folder, f"{os.path.basename(prefix)}.{r}.et")
              for r in range(network.npus)]
    names, graphs = load_for_consumer(traces)
    model = consume_loaded(names, graphs, network, system).result
    if binary is None:
        return JobCheck(prefix, network, system, model,
                        predicted_step_us=_read_prediction(prefix))
    groups = f"{prefix}.comm_groups.json"
    groups_arg = os.path.abspath(groups) if os.path.isfile(groups) else NO_GROUPS
    with tempfile.TemporaryDirectory(prefix="astracheck") as scratch:  # its log/ goes here
        try:
            run = run_configured(binary, os.path.abspath(prefix), groups_arg,
                                 AstraConfigs(*(p.resolve() for p in configs)), network.npus,
                                 cwd=scratch, timeout_s=timeout_s)
        except (RuntimeError, OSError) as exc:
            first = (str(exc).strip().splitlines() or ["no output"])[0]
            raise InputError(os.fspath(binary), f"ASTRA-sim failed on {prefix}: {first}") from exc
    return JobCheck(prefix, network, system, model, run, os.fspath(binary),
                    _read_prediction(prefix))


def format_job_check(check: JobCheck) -> str:
    """What ``astra-sim --check`` prints: per rank, ASTRA-sim's finish, the
    consumer model's and the measured span; then the step."""
    net = check.network
    links = [f"{b:.4g} GB/s {lat:.4g} ns" for _, b, lat in net.dimensions]
    if net.hosts is not None:  # two tiers: NPUs per dimension and its links
        links = [" x ".join(f"{n} ({link})" for (n, _, _), link in zip(net.dimensions, links,
                                                                         strict=True))]
    lines = [f"job {check.prefix}: {net.npus} NPUs, {net.topology} {links[0]}; "
             f"{check.system.implementation} collectives, "
             f"{check.system.splits} splits",
             f"ASTRA-sim: {check.binary_path}" if check.binary_path else
             f"ASTRA-sim: not run (set {BINARY_ENV} or --bin)", "",
             f"{'rank':>4} {'ASTRA-sim us':>13} {'consumer us':>12} {'measured us':>12}",
             "(per rank: its finish; measured: its own recorded span; step: the last rank,"
             " measured on the ranks' shared clock)"]
    for r in check.model.ranks:
        real = check.binary.finished.get(r.rank) if check.binary else None
        lines.append(f"{r.rank:>4} {_us(real / NS_PER_US if real is not None else None):>13} "
                     f"{_us(r.finished_ns / NS_PER_US):>12} {_us(r.measured_step_us):>12}")
    lines.append(f"{'step':>4} {_us(check.astra_sim_step_us):>13} "
                 f"{_us(check.model.predicted_step_us):>12} "
                 f"{_us(check.model.measured_step_us):>12}")
    lines.append("")
    if check.error_pct is not None:
        lines.append(f"ASTRA-sim vs measured step: {check.error_pct:+.2f} %; consumer model vs "
                     f"ASTRA-sim, worst rank: {check.model_vs_binary_pct:.3f} %")
    if check.predicted_step_us is not None:
        ours = check.predicted_step_us
        astra = check.astra_sim_step_us
        vs = f"; ASTRA-sim vs it: {error_pct(astra, ours):+.2f} %" if astra is not None else ""
        lines.append(f"pt2chakra simulate (written with the job): {ours:,.0f} us; consumer model "
                     f"vs it: {error_pct(check.model.predicted_step_us, ours):+.2f} %{vs}")
    model_error = check.model.error_pct
    if model_error is not None:
        lines.append(f"consumer model vs measured step: {model_error:+.2f} %")
    if check.binary and check.binary.warnings:
        lines.append(f"ASTRA-sim warnings: {len(check.binary.warnings)} lines, first: "
                     f"{check.binary.warnings[0].strip()}")
    return "\n".join(lines)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"

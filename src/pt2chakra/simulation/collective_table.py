"""Each collective (or point-to-point transfer) of a replay as one row: its
payload, its time measured and simulated, and the bandwidth it achieved.

A rendezvous is matched across ranks by the shared rule
(:mod:`pt2chakra.rules.rendezvous`, via the simulator's keys). Its measured
time is the *minimum* over the participants' kernels, as the simulator takes
it: a longer kernel also waited for the slowest peer. Bandwidths follow
nccl-tests: ``algbw`` = payload / time, ``busbw`` = ``algbw`` times the
collective's byte factor (``network.cost_factors``), which makes ring
all-reduce, all-gather... comparable with the link speed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import NamedTuple

import msgspec

from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.rules.arrivals import Arrival, arrival_of, reached_at
from pt2chakra.rules.rendezvous import P2P, RendezvousKey
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.network import cost_factors
from pt2chakra.simulation.prepared import COMM
from pt2chakra.simulation.results import Schedule, measured_offset

# bytes per microsecond -> GB/s (1e9 bytes/s)
_BYTES_PER_US_TO_GBPS = 1e-3


class CollectiveRow(msgspec.Struct, frozen=True):
    """One rendezvous of the replay (all its participants together)."""

    what: str  # "all_reduce", "send/recv", ... (the Chakra collective type)
    name: str  # node name on the first participant
    group: str  # how it was matched (RendezvousKey.describe)
    ranks: list[int]  # participants (rank labels)
    size_bytes: int  # payload (largest comm_size over the participants)
    measured_us: float  # intrinsic time: minimum over the participants' kernels
    measured_max_us: float  # longest participant kernel (includes waiting for peers)
    simulated_us: float  # duration in the replay
    start_us: float  # simulated start (earliest participant)
    algbw_gbps: float | None  # size / measured time
    busbw_gbps: float | None  # algbw * the collective's byte factor
    critical: bool  # a participant is on the critical path
    # The participant that started last (the straggler, a rank label) and the
    # others' wait for it, summed (rules.arrivals), as recorded (starts
    # placed on the replay's axis by the ranks' offsets) and in the replay.
    # None for a lone participant, or without recorded times.
    measured_last_rank: int | None = None
    measured_others_wait_us: float | None = None
    replay_last_rank: int | None = None
    replay_others_wait_us: float | None = None


def _what(node_type: int, comm_type: int) -> str:
    if node_type != NodeType.COMM_COLL_NODE:
        return "send/recv"
    try:
        return CollectiveType(comm_type).name.lower()
    except ValueError:
        return "collective"


def _bandwidths(size: int, us: float, comm_type: int, n: int, p2p: bool,
                ) -> tuple[float | None, float | None]:
    if size <= 0 or us <= 0:
        return None, None
    algbw = size / us * _BYTES_PER_US_TO_GBPS
    factor = 1.0 if p2p else cost_factors(comm_type, n)[1]
    return algbw, (algbw * factor if factor > 0 else None)


class SlowRankCollectives(NamedTuple):
    """The replay's collectives with one rank slowed (``--slow-rank``): the
    straggler table of that what-if, beside the recorded one."""

    slow_rank: str  # results.SlowRank.label()
    rows: list[CollectiveRow]


def collective_rows(sim: Simulator, schedule: Schedule, comm_streams: int = 0,
                    ) -> list[CollectiveRow]:
    """The rendezvous of ``schedule`` (a run of ``sim`` with ``comm_streams``)
    in simulated start order."""
    p = sim.prepared(comm_streams)
    members: dict[RendezvousKey, list[int]] = defaultdict(list)
    for i, key in p.comm_key.items():
        if p.cat[i] == COMM:
            members[key].append(i)
    reached = reached_in_replay(schedule, [i for m in members.values() for i in m])
    rows = [_row(p.comm_type, p.comm_bytes, schedule, key, m, reached)
            for key, m in members.items()]
    rows.sort(key=lambda r: (r.start_us, r.group))
    return rows


def reached_in_replay(schedule: Schedule, comm: list[int]) -> dict[int, float]:
    """When each communication node's rank reached it in the replay: its
    last dependency's end (at most its start), the start a replay written
    as ``.et`` gives it (``predicted_et``); the rendezvous's start is when the
    last participant arrived, so it shows no wait."""
    rank, nodes = schedule.rank, schedule.nodes
    wanted = {(rank[i], d) for i in comm for d in nodes[i].data_deps}
    end_of = {(r, node.id): e for node, r, e in zip(nodes, rank, schedule.end)
              if (r, node.id) in wanted and not math.isnan(e)}
    out = {}
    for i in comm:
        out[i] = reached_at(schedule.start[i], (end_of[(rank[i], d)] for d in nodes[i].data_deps
                                                if (rank[i], d) in end_of))
    return out


def _row(comm_type: dict[int, int], comm_bytes: dict[int, int], schedule: Schedule,
         key: RendezvousKey, m: list[int], reached: dict[int, float]) -> CollectiveRow:
    first = m[0]
    measured = [float(schedule.nodes[i].duration_micros) for i in m]
    size = max(comm_bytes.get(i, 0) for i in m)
    ctype = comm_type.get(first, -1)
    starts = [schedule.start[i] for i in m if not math.isnan(schedule.start[i])]
    sim_us = max((schedule.end[i] - schedule.start[i] for i in m
                  if not math.isnan(schedule.start[i])), default=math.nan)
    algbw, busbw = _bandwidths(size, min(measured), ctype, len(m), key.kind == P2P)
    recorded, replayed = _arrivals(schedule, m, reached)
    return CollectiveRow(
        what=_what(int(schedule.nodes[first].type), ctype), name=schedule.nodes[first].name,
        group=key.describe(), ranks=sorted(schedule.rank_label[schedule.rank[i]] for i in m),
        size_bytes=size, measured_us=min(measured), measured_max_us=max(measured),
        simulated_us=sim_us, start_us=min(starts, default=math.nan), algbw_gbps=algbw,
        busbw_gbps=busbw, critical=any(i in schedule.critical for i in m),
        measured_last_rank=recorded.last_rank if recorded else None,
        measured_others_wait_us=recorded.others_wait_us if recorded else None,
        replay_last_rank=replayed.last_rank if replayed else None,
        replay_others_wait_us=replayed.others_wait_us if replayed else None)


def _arrivals(schedule: Schedule, m: list[int], reached: dict[int, float],
              ) -> tuple[Arrival | None, Arrival | None]:
    """The straggler as recorded and in the replay (None for a lone
    participant, or where a participant has no time)."""
    if len(m) < 2:
        return None, None
    label = schedule.rank_label
    timed = schedule.rank_timed
    recorded = [(schedule.nodes[i].start_time_micros - measured_offset(schedule, schedule.rank[i]),
                 label[schedule.rank[i]]) for i in m
                if schedule.rank[i] >= len(timed) or timed[schedule.rank[i]]]
    replayed = [(reached[i], label[schedule.rank[i]]) for i in m if not math.isnan(reached[i])]
    return (arrival_of(recorded) if len(recorded) == len(m) else None,
            arrival_of(replayed) if len(replayed) == len(m) else None)

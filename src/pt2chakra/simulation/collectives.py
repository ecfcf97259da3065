"""Each collective (or point-to-point transfer) of a replay as one row: its
payload, its time measured and simulated, and the bandwidth it achieved.

A rendezvous is matched across ranks by the shared rule
(:mod:`pt2chakra.chakra.rendezvous`, via the simulator's keys). Its measured
time is the *minimum* over the participants' kernels, as the simulator takes
it: a longer kernel also waited for the slowest peer. Bandwidths follow
nccl-tests: ``algbw`` = payload / time, ``busbw`` = ``algbw`` times the
collective's byte factor (``network.cost_factors``), which makes ring
all-reduce, all-gather... comparable with the link speed.
"""

from __future__ import annotations

import math
from collections import defaultdict

import msgspec

from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.chakra.rendezvous import P2P, RendezvousKey
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.network import cost_factors
from pt2chakra.simulation.prepare import COMM
from pt2chakra.simulation.results import Schedule

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


def collective_rows(sim: Simulator, schedule: Schedule, comm_streams: int = 0,
                    ) -> list[CollectiveRow]:
    """The rendezvous of ``schedule`` (a run of ``sim`` with ``comm_streams``)
    in simulated start order."""
    p = sim.prepared(comm_streams)
    members: dict[RendezvousKey, list[int]] = defaultdict(list)
    for i, key in p.comm_key.items():
        if p.cat[i] == COMM:
            members[key].append(i)
    rows = [_row(p.comm_type, p.comm_bytes, schedule, key, m) for key, m in members.items()]
    rows.sort(key=lambda r: (r.start_us, r.group))
    return rows


def _row(comm_type: dict[int, int], comm_bytes: dict[int, int], schedule: Schedule,
         key: RendezvousKey, m: list[int]) -> CollectiveRow:
    first = m[0]
    measured = [float(schedule.nodes[i].duration_micros) for i in m]
    size = max(comm_bytes.get(i, 0) for i in m)
    ctype = comm_type.get(first, -1)
    starts = [schedule.start[i] for i in m if not math.isnan(schedule.start[i])]
    sim_us = max((schedule.end[i] - schedule.start[i] for i in m
                  if not math.isnan(schedule.start[i])), default=math.nan)
    algbw, busbw = _bandwidths(size, min(measured), ctype, len(m), key.kind == P2P)
    return CollectiveRow(
        what=_what(int(schedule.nodes[first].type), ctype), name=schedule.nodes[first].name,
        group=key.describe(), ranks=sorted(schedule.rank_label[schedule.rank[i]] for i in m),
        size_bytes=size, measured_us=min(measured), measured_max_us=max(measured),
        simulated_us=sim_us, start_us=min(starts, default=math.nan), algbw_gbps=algbw,
        busbw_gbps=busbw, critical=any(i in schedule.critical for i in m))

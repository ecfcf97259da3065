"""What the recording host's CPU spends per byte its ranks' links carry,
measured once per recording (``collect``; ``meta.json``'s
``host_cpu_ns_per_link_byte``).

A collective over gloo moves its bytes through the host's CPU: the kernel's
socket and network stack (and a test bed's bridge and shapers) and gloo's
own copies and reductions. On a host whose cores its ranks share, that work
competes for the cores, so more ranks per host move fewer bytes each: on the
benchmark's 2-core host, 8 ranks' 200 Mbit/s links ran at 17-18 MB/s where 2
and 4 ranks' ran at 23. The cost per byte is a property of the host, not of
the links: the recording cannot show it (its links were not short of CPU),
so ``collect`` measures it beside the steps: one all-reduce of
``PROBE_BYTES`` over the job's own group, the host's busy CPU time across it
(``/proc/stat``, less the idle host's) over the bytes its ranks' links carried.
The scale-out model turns it into each rank's share of its host
(``scaleout/hosts.py``, ``host_link_gbps``).
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

# One round's all-reduce; rounds repeat until PROBE_MIN_S has passed, so that
# /proc/stat's 10 ms ticks resolve the host's busy time to about 1 % on fast
# links too (a loopback moves 8 MiB in milliseconds), at most PROBE_MAX_ROUNDS.
# On a 100 Mbit/s link one round takes 0.7 s at 2 ranks: short beside a recording.
PROBE_BYTES = 8 << 20
PROBE_MIN_S = 0.5
PROBE_MAX_ROUNDS = 1000
# The idle host's own busy time is measured over this window first and taken
# out (other processes, the ranks' idle threads).
IDLE_WINDOW_S = 0.25
PROC_STAT = "/proc/stat"
BYTES_PER_FLOAT32 = 4


def host_busy_s() -> float | None:
    """CPU seconds the host's cores have been busy (not idle, not waiting on
    I/O) since boot; None where ``/proc/stat`` is not readable (not Linux)."""
    try:
        with open(PROC_STAT) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def link_bytes(size_bytes: int, world_size: int) -> float:
    """Bytes a ring all-reduce of ``size_bytes`` puts on each rank's link."""
    return 2 * (world_size - 1) / world_size * size_bytes


class LinkProbe(NamedTuple):
    """What the probe ran and found (``meta.json``: ``link_cpu_probe`` and,
    where measured, ``host_cpu_ns_per_link_byte``)."""

    rounds: int
    seconds: float
    link_bytes: float  # per rank, over the rounds
    ns_per_byte: float | None  # None: a host's busy time unreadable, or lost in others' load

    def meta(self) -> dict[str, object]:
        return {"rounds": self.rounds, "seconds": self.seconds, "link_bytes": self.link_bytes}


def probe_link_cost(dist: Any, torch: Any, world_size: int, rank: int) -> LinkProbe | None:
    """Every rank: the all-reduce probe; rank 0 returns what it found (the
    hosts' CPU ns per byte of each rank's link: the median over the hosts),
    the others None; None for a job of one rank."""
    if world_size < 2:
        return None
    tensor = torch.ones(PROBE_BYTES // BYTES_PER_FLOAT32)
    dist.barrier()
    before = host_busy_s()
    time.sleep(IDLE_WINDOW_S)
    idle_rate = _rate(before, host_busy_s(), IDLE_WINDOW_S)
    dist.barrier()
    start, busy0 = time.monotonic(), host_busy_s()
    rounds = _rounds(dist, torch, tensor, start)
    took, busy1 = time.monotonic() - start, host_busy_s()
    busy = None if busy0 is None or busy1 is None or idle_rate is None else \
        max(0.0, busy1 - busy0 - idle_rate * took)
    every: list[tuple[str, float | None] | None] = [None] * world_size
    dist.all_gather_object(every, (socket.gethostname(), busy))
    if rank != 0:
        return None
    moved = rounds * link_bytes(PROBE_BYTES, world_size)
    return LinkProbe(rounds, took, moved,
                     cost_per_byte([e for e in every if e is not None], moved))


def _rounds(dist: Any, torch: Any, tensor: Any, start: float) -> int:
    """All-reduce ``tensor`` until rank 0 has seen ``PROBE_MIN_S`` pass (it
    tells the others after each round); the rounds run."""
    rounds = 0
    while True:
        dist.all_reduce(tensor)
        rounds += 1
        more = time.monotonic() - start < PROBE_MIN_S and rounds < PROBE_MAX_ROUNDS
        flag = torch.tensor([1.0 if more else 0.0])
        dist.broadcast(flag, src=0)
        if not flag.item():
            return rounds


def cost_per_byte(measured: Sequence[tuple[str, float | None]], per_link: float) -> float | None:
    """ns of host CPU per byte of one rank's link: per host, its busy seconds
    (every rank on it measured the same host: their median) over its ranks'
    link bytes; the median over the hosts."""
    hosts: dict[str, list[float]] = {}
    for host, busy in measured:
        if busy is None:
            return None
        hosts.setdefault(host, []).append(busy)
    costs = [statistics.median(b) / (len(b) * per_link) * 1e9 for b in hosts.values()]
    positive = [c for c in costs if c > 0]
    return statistics.median(positive) if positive else None


def _rate(before: float | None, after: float | None, seconds: float) -> float | None:
    return None if before is None or after is None else (after - before) / seconds

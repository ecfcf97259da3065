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
so ``collect`` measures it beside the steps: all-reduces of ``PROBE_BYTES``
over the job's own group in ``WINDOWS`` windows, each window's host busy CPU
time (``/proc/stat``, less the idle host's) over the bytes its ranks' links
carried, the median of the windows.
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

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.simulation.network import GLOO, cost_factors

# One all-reduce of the probe; they repeat in windows of at least WINDOW_S
# (/proc/stat's 10 ms ticks then resolve a window's busy time to about 1 %,
# on a loopback too, which moves 8 MiB in milliseconds; at most
# WINDOW_MAX_ROUNDS each), WINDOWS of them, each measured on its own: the
# cost is their median, so a burst of other load in one window does not
# make it (on the 2-core bench single 0.5 s measurements ranged 8-19 ns per
# byte for one bed). On a 200 Mbit/s link one all-reduce takes 0.7 s at 2
# ranks: the probe adds about 2-4 s to a recording.
PROBE_BYTES = 8 << 20
WINDOW_S = 0.5
WINDOW_MAX_ROUNDS = 1000
WINDOWS = 3
# The idle host's own busy time is measured over this window first and taken
# out (other processes, the ranks' idle threads).
IDLE_WINDOW_S = 0.5
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
    """Bytes an all-reduce of ``size_bytes`` puts on each rank's link, by
    the network model's rule for gloo's ring (``network.cost_factors``)."""
    _steps, factor = cost_factors(int(CollectiveType.ALL_REDUCE), world_size, GLOO, size_bytes)
    return factor * size_bytes


class LinkProbe(NamedTuple):
    """What the probe ran and found (``meta.json``: ``link_cpu_probe`` and,
    where measured, ``host_cpu_ns_per_link_byte``)."""

    rounds: int
    seconds: float
    link_bytes: float  # per rank, over the rounds
    ns_per_byte: float | None  # None: a host's busy time unreadable, or lost in others' load
    window_ns_per_byte: list[float]  # each window's (the cost is their median)

    def meta(self) -> dict[str, object]:
        return {"rounds": self.rounds, "seconds": self.seconds, "link_bytes": self.link_bytes,
                "window_ns_per_byte": self.window_ns_per_byte}


class _Window(NamedTuple):
    rounds: int
    seconds: float
    busy_s: float | None  # the host's, less the idle host's


def probe_link_cost(dist: Any, torch: Any, world_size: int, rank: int) -> LinkProbe | None:
    """Every rank: the all-reduce probe; rank 0 returns what it found (the
    hosts' CPU ns per byte of each rank's link: the median over the windows
    and hosts), the others None; None for a job of one rank."""
    if world_size < 2:
        return None
    tensor = torch.ones(PROBE_BYTES // BYTES_PER_FLOAT32)
    dist.barrier()
    before = host_busy_s()
    time.sleep(IDLE_WINDOW_S)
    idle_rate = _rate(before, host_busy_s(), IDLE_WINDOW_S)
    dist.barrier()
    windows = [_window(dist, torch, tensor, idle_rate) for _ in range(WINDOWS)]
    every: list[tuple[str, list[float | None]] | None] = [None] * world_size
    dist.all_gather_object(every, (socket.gethostname(), [w.busy_s for w in windows]))
    if rank != 0:
        return None
    per_round = link_bytes(PROBE_BYTES, world_size)
    costs = [cost_per_byte([(host, busy[k]) for host, busy in filter(None, every)],
                           w.rounds * per_round) for k, w in enumerate(windows)]
    known = [c for c in costs if c is not None]
    return LinkProbe(sum(w.rounds for w in windows), sum(w.seconds for w in windows),
                     sum(w.rounds for w in windows) * per_round,
                     statistics.median(known) if known else None, known)


def _window(dist: Any, torch: Any, tensor: Any, idle_rate: float | None) -> _Window:
    """One measured window of all-reduces (``_rounds``)."""
    start, busy0 = time.monotonic(), host_busy_s()
    rounds = _rounds(dist, torch, tensor, start)
    took, busy1 = time.monotonic() - start, host_busy_s()
    busy = None if busy0 is None or busy1 is None or idle_rate is None else \
        max(0.0, busy1 - busy0 - idle_rate * took)
    return _Window(rounds, took, busy)


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


def _rounds(dist: Any, torch: Any, tensor: Any, start: float) -> int:
    """All-reduce ``tensor`` until rank 0 has seen ``WINDOW_S`` pass (it
    tells the others after each round); the rounds run."""
    rounds = 0
    while True:
        dist.all_reduce(tensor)
        rounds += 1
        more = time.monotonic() - start < WINDOW_S and rounds < WINDOW_MAX_ROUNDS
        flag = torch.tensor([1.0 if more else 0.0])
        dist.broadcast(flag, src=0)
        if not flag.item():
            return rounds


def _rate(before: float | None, after: float | None, seconds: float) -> float | None:
    return None if before is None or after is None else (after - before) / seconds

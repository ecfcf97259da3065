"""What the recording host's CPU spends per byte its ranks' links carry,
measured once per recording (``collect``; ``meta.json``'s
``rank_cpu_ns_per_link_byte`` and ``host_cpu_ns_per_link_byte``).

A collective over gloo moves its bytes through the host's CPU: the kernel's
socket and network stack (and a test bed's bridge and shapers) and gloo's
own copies and reductions. On a host whose cores its ranks share, that work
competes for the cores, so more ranks per host move fewer bytes each: on the
benchmark's 2-core host, 8 ranks' 200 Mbit/s links ran at 17-18 MB/s where 2
and 4 ranks' ran at 23. The cost per byte is a property of the host, not of
the links: the recording cannot show it (its links were not short of CPU),
so ``collect`` measures it beside the steps: all-reduces of ``PROBE_BYTES``
over the job's own group in ``WINDOWS`` windows, and two costs per window
over the bytes its ranks' links carried (the median of the windows):

* the ranks' own CPU (their processes' user and system time, every thread):
  what a neighbour's load cannot inflate. It is the cost the scale-out
  model caps the links with (``scaleout/hosts.py``, ``host_link_gbps``): the
  cap binds only where the host's cores are all busy, and there a byte costs
  less than on a host with cores to spare (the kernel batches packets, no
  core wakes from idle for them). On the bench's 2-core bed the host's whole
  busy time per byte at saturation (12.1-12.8 ns at 200 Mbit/s, 11.2-12.3 at
  400) was the ranks' own CPU per byte measured where cores were free
  (11-13.9 and 11.1-12.5), where the host's busy time read 13-17 and 14-15.
  In a full bench run the ranks' own read 10-20 % above the saturated
  host's: an observation on one machine, not a law; the prediction states
  its range over the two costs.
* the host's busy time (``/proc/stat``, less the idle host's): every CPU
  the links took, including the kernel's work outside the ranks, and any
  other process's load that lasts through a window. The range's upper end.
"""

from __future__ import annotations

import os
import resource
import socket
import statistics
import time
from collections.abc import Callable, Sequence
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


def own_cpu_s() -> float:
    """CPU seconds this process (every thread: gloo's workers too) has run,
    user and system."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


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
    ns_per_byte: float | None  # the host's busy time; None: unreadable, or nothing seen
    window_ns_per_byte: list[float]  # each window's (the cost is their median)
    rank_ns_per_byte: float | None  # the ranks' own CPU; None: nothing seen
    window_rank_ns_per_byte: list[float]

    def meta(self) -> dict[str, object]:
        return {"rounds": self.rounds, "seconds": self.seconds, "link_bytes": self.link_bytes,
                "window_ns_per_byte": self.window_ns_per_byte,
                "window_rank_ns_per_byte": self.window_rank_ns_per_byte}


class _Window(NamedTuple):
    rounds: int
    seconds: float
    busy_s: float | None  # the host's, less the idle host's
    own_s: float  # this rank's process


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
    every: list[tuple[str, list[float | None], list[float]] | None] = [None] * world_size
    dist.all_gather_object(every, (socket.gethostname(), [w.busy_s for w in windows],
                                   [w.own_s for w in windows]))
    if rank != 0:
        return None
    per_round = link_bytes(PROBE_BYTES, world_size)
    ranks = [r for r in every if r is not None]
    busy = [cost_per_byte([(host, b[k]) for host, b, _ in ranks], w.rounds * per_round)
            for k, w in enumerate(windows)]
    own = [own_cost_per_byte([(host, o[k]) for host, _, o in ranks], w.rounds * per_round)
           for k, w in enumerate(windows)]
    return LinkProbe(sum(w.rounds for w in windows), sum(w.seconds for w in windows),
                     sum(w.rounds for w in windows) * per_round, *_median_of(busy),
                     *_median_of(own))


def _median_of(costs: list[float | None]) -> tuple[float | None, list[float]]:
    """The median of the windows' costs that were seen, and those costs."""
    known = [c for c in costs if c is not None]
    return (statistics.median(known) if known else None), known


def _window(dist: Any, torch: Any, tensor: Any, idle_rate: float | None) -> _Window:
    """One measured window of all-reduces (``_rounds``)."""
    start, busy0, own0 = time.monotonic(), host_busy_s(), own_cpu_s()
    rounds = _rounds(dist, torch, tensor, start)
    took, busy1, own1 = time.monotonic() - start, host_busy_s(), own_cpu_s()
    busy = None if busy0 is None or busy1 is None or idle_rate is None else \
        max(0.0, busy1 - busy0 - idle_rate * took)
    return _Window(rounds, took, busy, own1 - own0)


def cost_per_byte(measured: Sequence[tuple[str, float | None]], per_link: float) -> float | None:
    """ns of host CPU per byte of one rank's link: per host, its busy seconds
    (every rank on it measured the same host: their median) over its ranks'
    link bytes; the median over the hosts."""
    if any(busy is None for _host, busy in measured):
        return None
    return _median_over_hosts([(h, b) for h, b in measured if b is not None], per_link,
                              statistics.median)


def own_cost_per_byte(measured: Sequence[tuple[str, float]], per_link: float) -> float | None:
    """ns of the ranks' own CPU per byte of one rank's link: per host, the
    sum of its ranks' CPU seconds (each measured its own process) over their
    link bytes; the median over the hosts. None: nothing seen."""
    return _median_over_hosts(measured, per_link, sum)


def _median_over_hosts(measured: Sequence[tuple[str, float]], per_link: float,
                       host_seconds: Callable[[list[float]], float]) -> float | None:
    """Per host, ``host_seconds`` of its ranks' measurements over its ranks'
    link bytes (ns per byte); the median of the hosts' positive costs."""
    hosts: dict[str, list[float]] = {}
    for host, seconds in measured:
        hosts.setdefault(host, []).append(seconds)
    costs = [host_seconds(s) / (len(s) * per_link) * 1e9 for s in hosts.values()]
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

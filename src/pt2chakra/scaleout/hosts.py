"""Ranks that share a host's cores: how much longer each rank's CPU work
takes when more of them run at once.

Data-parallel ranks run in lockstep: every rank does its CPU work (the
forward and backward ops, the optimizer, the Python between them) in the
same window of the step, between the same collectives. Ranks on one host
share its cores; while more ranks' threads want a core than it has, the
scheduler shares them out (processor sharing), so each rank's CPU work
stretches by ``busy threads / cores`` (at least 1). The recording already
holds the sharing of the host it ran on, so a prediction at M ranks
stretches the recorded CPU time by ``share(M) / share(N)``.

A crowded host also delays every hand-off of a collective's chain: a ring
step completes when the receiving rank's worker thread, woken by the data,
gets a core, and while every core is busy that waits for the running
thread's time slice to end; the delay passes along the chain, so the last
participant ends one wake-up delay per hand-off after the first
(``hop_delay_us``; the hand-offs per collective kind are the network
model's, ``simulation/network.py``, ``chain_handoffs``).

Hosts may also be joined by uplinks slower than the ranks' own links
(``uplink_gbps``, ``uplink_latency_us``: ``--inter-host-bandwidth/-latency``):
a collective that spans hosts is paced by its slowest hop
(``simulation/network.py``, ``HostLinks``). They are written into every
scaled-out file's metadata for the replay and the ASTRA-sim job.

Moving bytes costs the host CPU too (``link_cpu_ns_per_byte``: what
``collect`` measured on the recording host, ``collect/link_cost.py``, or
``--link-cpu-cost``): a host of C cores whose R ranks all move bytes at
once gives each of them at most ``C / (R x cost)`` bytes per ns, whatever
its link allows (``host_link_gbps``). The recording's links were not short of
it (2 ranks on 2 cores: 64 MB/s each against 25 MB/s links); 8 ranks on the
same host are (16 MB/s each). The cap binds only on a saturated host, where
a byte costs less than where cores are free; the measured cost is the
ranks' own CPU, and the host's whole busy time per byte
(``link_cpu_ns_upper``) bounds the prediction's range (``collect/link_cost.py``
says why).

The normal case, one rank per GPU host (``ranks_per_host`` 1, the default),
shares nothing and changes nothing. A test bed that puts every rank on one
host of a few cores (``make bench-scale``: 8 ranks on 2 cores) does.
"""

from __future__ import annotations

import math
from typing import NamedTuple

# Threads of one rank that want a core during its CPU work: its main thread.
# gloo's worker threads and the kernel's network work mostly wait for the
# link while the main thread computes (a few per cent of the step on the
# benchmark's recordings), so they are not counted.
BUSY_THREADS_PER_RANK = 1
# One rank per host (a GPU host per rank): nothing is shared.
DEFAULT_RANKS_PER_HOST = 1
# Linux's fair scheduler (EEVDF, kernel 6.6 on) gives a thread a base slice of
# 0.75 ms, scaled by 1 + log2(cores) for up to 8 cores (sysctl_sched_base_slice,
# SCHED_TUNABLESCALING_LOG): a thread woken while every core is busy runs when
# the current thread's slice ends, about one slice later. The kernel's
# default, not fitted to any recording.
SCHED_BASE_SLICE_US = 750.0
SCHED_SCALING_MAX_CORES = 8


class HostSharing(NamedTuple):
    """Where the ranks run: ``ranks_per_host`` ranks on each host of
    ``cores_per_host`` cores (None: unknown, nothing is shared). The same
    hosts for the recorded job and the predicted one."""

    ranks_per_host: int = DEFAULT_RANKS_PER_HOST
    cores_per_host: int | None = None
    uplink_gbps: float | None = None  # each host's uplink, GB/s (None: as recorded)
    uplink_latency_us: float = 0.0
    # Consecutive ranks behind one uplink where they are not one host's
    # (a test bed whose network hosts share one machine's cores); None:
    # ranks_per_host.
    ranks_per_uplink: int | None = None
    # The host's CPU ns per byte of each rank's link (None: not known, no
    # limit): with cores_per_host, it caps what each rank's link moves.
    link_cpu_ns_per_byte: float | None = None
    # The recording host's whole busy CPU per byte, where measured beside the
    # ranks' own (link_cpu_ns_per_byte): the upper end of the cost's range.
    link_cpu_ns_upper: float | None = None

    def uplink_group(self) -> int:
        """How many consecutive ranks share an uplink."""
        return self.ranks_per_uplink or self.ranks_per_host

    def share(self, world_size: int) -> float:
        """How much longer a rank's CPU work takes on a host holding its
        share of a ``world_size``-rank job than on a core of its own (>= 1)."""
        if self.cores_per_host is None:
            return 1.0
        on_host = min(world_size, self.ranks_per_host)
        return max(1.0, on_host * BUSY_THREADS_PER_RANK / self.cores_per_host)

    def cpu_stretch(self, recorded: int, target: int) -> float:
        """The factor on the CPU time recorded at ``recorded`` ranks for a
        job of ``target`` ranks on the same hosts."""
        return self.share(target) / self.share(recorded)

    def host_link_gbps(self, world_size: int) -> float | None:
        """The most each rank's link moves (GB/s, bytes per ns) on a host
        holding its share of a ``world_size``-rank job, all of its ranks
        moving bytes at once (data-parallel collectives run in lockstep):
        the host's cores over its ranks' CPU cost per byte. None: not known."""
        if self.cores_per_host is None or self.link_cpu_ns_per_byte is None:
            return None
        on_host = min(world_size, self.ranks_per_host)
        return self.cores_per_host / (on_host * self.link_cpu_ns_per_byte)

    def hop_delay_us(self, world_size: int) -> float:
        """The wake-up delay of one hand-off of a collective's chain on a host
        holding its share of a ``world_size``-rank job: a scheduler slice
        where the ranks crowd the cores, else none."""
        if self.cores_per_host is None or self.share(world_size) <= 1.0:
            return 0.0
        return scheduler_slice_us(self.cores_per_host)

    def at_upper_link_cost(self) -> HostSharing | None:
        """These hosts with the link cost at its range's upper end (the
        recording host's whole busy time); None where no range was measured."""
        upper = self.link_cpu_ns_upper
        if upper is None or self.link_cpu_ns_per_byte is None or \
                upper <= self.link_cpu_ns_per_byte:
            return None
        return self._replace(link_cpu_ns_per_byte=upper, link_cpu_ns_upper=None)

    def shares(self) -> bool:
        """Whether any world size shares a core (the options say anything)."""
        return self.share(self.ranks_per_host) > 1.0

    def describe(self) -> str:
        behind = f" ({self.ranks_per_uplink} ranks behind each)" if self.ranks_per_uplink else ""
        uplinks = "" if self.uplink_gbps is None else \
            (f", hosts joined by {self.uplink_gbps:g} GB/s uplinks{behind}"
             + (f" of {self.uplink_latency_us:g} us" if self.uplink_latency_us else ""))
        if self.cores_per_host is None:
            cores = f"{self.ranks_per_host} ranks per host" if uplinks else \
                "one core per rank (no host sharing)"
            return cores + uplinks
        cost = "" if self.link_cpu_ns_per_byte is None else \
            f", {self.link_cpu_ns_per_byte:.3g} ns of CPU per byte of a rank's link"
        if self.link_cpu_ns_upper is not None and self.link_cpu_ns_per_byte is not None:
            cost += f" (the ranks' own; the host's busy time {self.link_cpu_ns_upper:.3g})"
        return (f"{self.ranks_per_host} ranks per host of {self.cores_per_host} cores "
                f"({BUSY_THREADS_PER_RANK} busy thread per rank{cost}){uplinks}")


NO_SHARING = HostSharing()


def scheduler_slice_us(cores: int) -> float:
    """The fair scheduler's slice on a host of ``cores`` cores (its default)."""
    scaled = max(1, min(cores, SCHED_SCALING_MAX_CORES))
    return SCHED_BASE_SLICE_US * (1 + math.floor(math.log2(scaled)))

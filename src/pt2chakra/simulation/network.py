"""Analytical network model for collectives: latency + bytes / bandwidth.

Standard alpha-beta costs (Thakur et al. 2005; NCCL's performance notes). For
``n`` participants, payload ``S`` bytes (``comm_size``: the collective's total
payload, as the converter writes it), per-link bandwidth ``B`` and per-step
latency ``a``:

| collective | ring: latency, bytes | tree: latency, bytes |
|---|---|---|
| all-reduce | 2(n-1) a, 2(n-1)/n S | 2 log2(n) a, 2(n-1)/n S |
| all-gather, reduce-scatter, all-to-all, gather, scatter | (n-1) a, (n-1)/n S | log2(n) a, (n-1)/n S |
| broadcast, reduce | (n-1) a, S | log2(n) a, S |
| barrier | 2(n-1) a, 0 | 2 log2(n) a, 0 |
| send / recv (point-to-point) | a, S | a, S |

``gloo`` is what gloo itself runs (not a choice of ``--algorithm``: the
scale-out replay picks it for gloo's collectives, whose message count grows
with n in its own way): its ring all-reduce splits the payload into
``s`` segments per rank (``GLOO_MAX_SEGMENT_BYTES`` each at most, at least 2
per rank: gloo's ``allreduce.cc``), so it sends 2(n-1)s messages; its
all-gather is a ring; its broadcast is a binomial tree, the root sending the
whole tensor ceil(log2 n) times in turn.

| collective | gloo: latency, bytes |
|---|---|
| all-reduce | 2(n-1)s a, 2(n-1)/n S |
| broadcast, reduce | ceil(log2 n) a, ceil(log2 n) S |
| others | as ring |

Across hosts (``HostLinks``): with ``R`` consecutive ranks on each host and
hosts joined by uplinks, a ring of more than ``R`` ranks has hops that
cross an uplink, one per host and direction (the last rank of a host sends
to the first of the next); gloo's flat ring, like NCCL's ring across nodes,
moves in lockstep, so every step is paced by its slowest hop: bandwidth
``min(B, B_uplink)``, latency ``a + a_uplink``. A tree is timed the same
way (its crossing edges share no uplink either). A rank's link on a host
whose cores its ranks share moves at most its share of the host's CPU for
moving bytes (``host_link_gbps``, ``scaleout/hosts.py``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from pt2chakra.chakra.records import CollectiveType
from pt2chakra.rules.conventions import ScaledWorld

ALGORITHMS = ("ring", "tree")  # what --algorithm offers
GLOO = "gloo"  # gloo's own algorithms (see the module doc)
# Scaling out, a backend's collectives are timed by what the backend itself
# runs at the new rank count (gloo: its segmented ring, its binomial broadcast).
SCALED_BACKENDS = {"gloo": GLOO}
# gloo's AllreduceOptions::kMaxSegmentSize: the largest ring segment (1 MiB).
GLOO_MAX_SEGMENT_BYTES = 1 << 20
# gloo's ring keeps two segments in flight per rank, so never fewer per rank.
GLOO_MIN_SEGMENTS_PER_RANK = 2

_ALL_REDUCE = {int(CollectiveType.ALL_REDUCE)}
_SHARDED = {int(CollectiveType.ALL_GATHER), int(CollectiveType.REDUCE_SCATTER),
            int(CollectiveType.REDUCE_SCATTER_BLOCK), int(CollectiveType.ALL_TO_ALL),
            int(CollectiveType.GATHER), int(CollectiveType.SCATTER)}
_ROOTED = {int(CollectiveType.BROADCAST), int(CollectiveType.REDUCE)}
_BARRIER = {int(CollectiveType.BARRIER)}


def gloo_segments_per_rank(size_bytes: int, n: int) -> int:
    """Segments per rank of gloo's ring all-reduce of ``size_bytes`` on ``n``
    ranks: the segment count rounded up to a multiple of n, at least 2n."""
    segments = max(-(-size_bytes // GLOO_MAX_SEGMENT_BYTES), GLOO_MIN_SEGMENTS_PER_RANK * n)
    return -(-segments // n)


def cost_factors(comm_type: int, n: int, algorithm: str = "ring",
                 size_bytes: int = 0) -> tuple[float, float]:
    """(latency steps, byte factor) for one collective of ``n`` ranks.
    ``comm_type`` -1 means point-to-point (or unknown): one step, all bytes.
    ``size_bytes`` matters to ``gloo`` only (its segment count)."""
    if algorithm not in ALGORITHMS and algorithm != GLOO:
        raise ValueError(f"unknown algorithm {algorithm!r} (expected one of {ALGORITHMS})")
    if n <= 1:
        return 0.0, 0.0
    if algorithm == GLOO:
        return _gloo_factors(comm_type, n, size_bytes)
    steps = float(n - 1) if algorithm == "ring" else float(math.ceil(math.log2(n)))
    shard = (n - 1) / n
    if comm_type in _ALL_REDUCE:
        return 2 * steps, 2 * shard
    if comm_type in _SHARDED:
        return steps, shard
    if comm_type in _ROOTED:
        return steps, 1.0
    if comm_type in _BARRIER:
        return 2 * steps, 0.0
    return 1.0, 1.0


def _gloo_factors(comm_type: int, n: int, size_bytes: int) -> tuple[float, float]:
    if comm_type in _ALL_REDUCE:
        return 2.0 * (n - 1) * gloo_segments_per_rank(size_bytes, n), 2 * (n - 1) / n
    if comm_type in _ROOTED:
        rounds = float(math.ceil(math.log2(n)))
        return rounds, rounds
    return cost_factors(comm_type, n, "ring")


def chain_handoffs(comm_type: int, n: int, algorithm: str = "ring") -> int:
    """How many times a collective of ``n`` ranks waits for a rank to take
    up what the previous one passed it, one after the other: each rank of a
    ring once (n-1; an all-reduce's segments and its two phases are
    pipelined through the same ranks, so its hand-offs overlap: on the
    benchmark's crowded hosts its last-to-first end spread per rank was half
    an all-gather's), each round of a tree (ceil(log2 n)), one for a
    point-to-point. Where every hand-off waits for a crowded core, each
    adds a scheduler's wake-up (scaleout/hosts.py)."""
    if n <= 1:
        return 0
    if comm_type not in _ALL_REDUCE | _SHARDED | _ROOTED | _BARRIER:
        return 1  # point-to-point
    if algorithm == "tree" or (algorithm == GLOO and comm_type in _ROOTED):
        return math.ceil(math.log2(n))
    return n - 1


def collective_time(comm_type: int, size_bytes: int, n: int, bandwidth_gbps: float,
                    latency_us: float, algorithm: str = "ring") -> float:
    """Microseconds for one collective. ``bandwidth_gbps`` is GB/s (1e9 bytes/s),
    so bytes / (GB/s * 1e3) is microseconds."""
    steps, factor = cost_factors(comm_type, n, algorithm, size_bytes)
    if bandwidth_gbps <= 0:
        raise ValueError("bandwidth must be positive")
    return steps * latency_us + factor * size_bytes / (bandwidth_gbps * 1e3)


class HostLinks(NamedTuple):
    """The links of a job's target hosts beyond the ranks' own (see the
    module doc): ``ranks_per_host`` consecutive ranks on each host, hosts
    joined by uplinks of ``uplink_gbps`` GB/s (None: none) and
    ``uplink_latency_us``; each rank's link moving at most
    ``host_link_gbps`` (its share of its crowded host's CPU; None: no
    limit)."""

    ranks_per_host: int
    uplink_gbps: float | None
    uplink_latency_us: float = 0.0
    host_link_gbps: float | None = None

    def slowest_hop(self, n: int, bandwidth_gbps: float, latency_us: float,
                    ) -> tuple[float, float]:
        """(bandwidth, latency) of a collective of ``n`` ranks whose own links
        have ``bandwidth_gbps`` and ``latency_us``: theirs on one host (at
        most their host's share), the slowest hop's once it spans hosts."""
        if self.host_link_gbps is not None:
            bandwidth_gbps = min(bandwidth_gbps, self.host_link_gbps)
        if self.uplink_gbps is None or n <= self.ranks_per_host:
            return bandwidth_gbps, latency_us
        return min(bandwidth_gbps, self.uplink_gbps), latency_us + self.uplink_latency_us


def host_links_of(world: ScaledWorld | None) -> HostLinks | None:
    """The links a scaled-out file's target hosts have (None: as recorded)."""
    if world is None:
        return None
    uplinks = world.uplink_gbps is not None and world.ranks_per_host >= 1
    if not uplinks and world.host_link_gbps is None:
        return None
    return HostLinks(world.ranks_per_host, world.uplink_gbps if uplinks else None,
                     world.uplink_latency_us, world.host_link_gbps)

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
"""

from __future__ import annotations

import math

from pt2chakra.chakra.records import CollectiveType

ALGORITHMS = ("ring", "tree")

_ALL_REDUCE = {int(CollectiveType.ALL_REDUCE)}
_SHARDED = {int(CollectiveType.ALL_GATHER), int(CollectiveType.REDUCE_SCATTER),
            int(CollectiveType.REDUCE_SCATTER_BLOCK), int(CollectiveType.ALL_TO_ALL),
            int(CollectiveType.GATHER), int(CollectiveType.SCATTER)}
_ROOTED = {int(CollectiveType.BROADCAST), int(CollectiveType.REDUCE)}
_BARRIER = {int(CollectiveType.BARRIER)}


def cost_factors(comm_type: int, n: int, algorithm: str = "ring") -> tuple[float, float]:
    """(latency steps, byte factor) for one collective of ``n`` ranks.
    ``comm_type`` -1 means point-to-point (or unknown): one step, all bytes."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r} (expected one of {ALGORITHMS})")
    if n <= 1:
        return 0.0, 0.0
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


def collective_time(comm_type: int, size_bytes: int, n: int, bandwidth_gbps: float,
                    latency_us: float, algorithm: str = "ring") -> float:
    """Microseconds for one collective. ``bandwidth_gbps`` is GB/s (1e9 bytes/s),
    so bytes / (GB/s * 1e3) is microseconds."""
    steps, factor = cost_factors(comm_type, n, algorithm)
    if bandwidth_gbps <= 0:
        raise ValueError("bandwidth must be positive")
    return steps * latency_us + factor * size_bytes / (bandwidth_gbps * 1e3)

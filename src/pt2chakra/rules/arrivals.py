"""Who arrived last at a collective (the straggler) and how long the other
participants waited for it: the one rule behind ``simulate``'s straggler
table, the HTML report's collectives table and ``diff``'s.

Each participant's start is on one time axis (the run's common axis: ranks
placed by their start offsets). The last to start is the straggler (of two
that start together, the higher rank); each other participant waited from
its own start until then.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import NamedTuple, TypeVar

Key = TypeVar("Key", bound=Hashable)


class Arrival(NamedTuple):
    """The straggler of one collective, the others' wait for it (summed) and
    when it arrived (on the axis of the starts given)."""

    last_rank: int
    others_wait_us: float
    last_at: float


def arrival_of(starts: Iterable[tuple[float, int]]) -> Arrival:
    """The arrival of one collective from its participants' (start, rank)."""
    at = list(starts)
    last_at, last_rank = max(at)
    return Arrival(last_rank, sum(last_at - t for t, _rank in at), last_at)


def arrivals_of(starts: Mapping[Key, Iterable[tuple[float, int]]]) -> dict[Key, Arrival]:
    """``arrival_of`` for each collective (by its rendezvous key)."""
    return {key: arrival_of(at) for key, at in starts.items()}


def reached_at(start: float, dependency_ends: Iterable[float]) -> float:
    """When a rank reached a communication node in a replay: its last
    dependency's end, at most its start. The replay starts a collective when
    its last participant arrives, so its start alone shows no wait; a
    recording starts it where its rank reached it, the wait inside. The one
    home of the rule: the stragglers of a replay and a replay written back
    as ``.et`` both use it."""
    return min(max(dependency_ends, default=start), start)

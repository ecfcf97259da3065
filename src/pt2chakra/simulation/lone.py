"""A rank given without its peers: its collectives under the network what-ifs.

A collective that only one of the given ranks reaches has no peer to meet in
the replay, so the rules for matched collectives (the minimum over the
participants, the network model at the participants' count) do not apply. Its
group size and bytes are in the trace all the same (the process group's size
in the metadata, else the world size; ``comm_size``), so a network what-if
still times it:

* a network model (``--bandwidth/--latency``, or ``--calibrate``'s fit): the
  transfer comes from the model at the group's size; the rest of the recorded
  time, the wait for peers that were not given, is kept as recorded;
* ``--bandwidth-scale`` alone (measured collectives): the recorded time
  scales, as a matched collective's does; alone it cannot be split into the
  wait for peers and the transfer, so it scales whole, and the note says so.

A collective without a known size or group (``comm_size`` 0 or unknown, a
group of one) is kept as recorded; one ``note:`` line says how many and why,
so that a what-if never prints a speed-up that silently ignored its knob.
"""

from __future__ import annotations

from typing import NamedTuple

from pt2chakra.rules.rendezvous import RendezvousKey
from pt2chakra.simulation.calibration import Calibration
from pt2chakra.simulation.network import collective_time
from pt2chakra.simulation.prepared import PreparedGraph
from pt2chakra.simulation.results import SimConfig


class LoneCollective(NamedTuple):
    node: int  # index in the prepared graph
    group: int  # ranks in its group (0: not known)
    size: int  # bytes (0: not known)


def lone_collectives(p: PreparedGraph, participants: dict[RendezvousKey, list[int]],
                     ) -> list[LoneCollective]:
    """The communication nodes no other given rank reaches, with their group
    size and bytes."""
    matched = {i for members in participants.values() for i in members}
    return [LoneCollective(i, group_size(p, i, key), p.comm_bytes.get(i, 0))
            for i, key in p.comm_key.items() if i not in matched]


def group_size(p: PreparedGraph, i: int, key: RendezvousKey) -> int:
    """Ranks in node ``i``'s group: its process group's recorded size, else the
    world size where the group is the whole job (the default or only group),
    else 0; a point-to-point transfer is two ranks."""
    if key.sender >= 0 or key.receiver >= 0:
        return 2
    rank = p.rank[i]
    sizes = p.pg_sizes[rank]
    if key.pg in sizes:
        return sizes[key.pg]
    return p.world[rank] if len(sizes) <= 1 else 0


def modelled(c: LoneCollective) -> bool:
    return c.group > 1 and c.size > 0


def network_knob(cfg: SimConfig) -> bool:
    """Whether ``cfg`` changes collective times at all."""
    return (cfg.bandwidth_gbps is not None and cfg.latency_us is not None) or cfg.calibrate \
        or cfg.bandwidth_scale != 1.0


def lone_us(p: PreparedGraph, cfg: SimConfig, c: LoneCollective, recorded: float,
            cal: Calibration | None) -> float:
    """Node ``c``'s time under ``cfg`` (see the module docstring): recorded
    where nothing can be modelled."""
    if not modelled(c):
        return recorded
    ctype = p.comm_type[c.node]
    if cfg.bandwidth_gbps is not None and cfg.latency_us is not None and cal is None:
        as_given = collective_time(ctype, c.size, c.group, cfg.bandwidth_gbps, cfg.latency_us,
                                   cfg.algorithm)
        bandwidth, latency = p.link_of(c.node, c.group, cfg.bandwidth_gbps, cfg.latency_us)
        scaled = collective_time(ctype, c.size, c.group, bandwidth * cfg.bandwidth_scale,
                                 latency, cfg.algorithm)
        return max(recorded - as_given, 0.0) + scaled
    if cal is not None:
        as_fitted = cal.time_us(ctype, c.size, c.group, 1.0, cfg.bandwidth_gbps, cfg.latency_us)
        bandwidth, latency = p.link_of(c.node, c.group,
                                       *cal.link(cfg.bandwidth_gbps, cfg.latency_us))
        scaled = cal.time_us(ctype, c.size, c.group, cfg.bandwidth_scale, bandwidth, latency)
        return max(recorded - as_fitted, 0.0) + scaled
    return recorded / cfg.bandwidth_scale


def lone_note(p: PreparedGraph, lone: list[LoneCollective], ranks_given: int) -> str | None:
    """One line on what the network what-ifs do with collectives that have no
    peer in the replay; None when there is none."""
    if not lone:
        return None
    done = [c for c in lone if modelled(c)]
    left = len(lone) - len(done)
    mb = sum(c.size for c in done) / 1e6
    alone = "a rank given without its peers" if ranks_given == 1 else \
        "collectives no other given rank reaches"
    parts = []
    if done:
        parts.append(f"{len(done)} collective{'s' if len(done) != 1 else ''} ({mb:.1f} MB) timed "
                     "by the network what-ifs from their group size and bytes (with a network "
                     "model: its transfer plus the recorded wait for peers, kept as recorded; "
                     "--bandwidth-scale alone: the recorded time scaled whole, waits included)")
    if left:
        parts.append(f"{left} collective{'s' if left != 1 else ''} kept as recorded whatever "
                     "the knobs (group size or bytes not in the trace)")
    text = f"note: {alone}: " + "; ".join(parts)
    return text


def unsized_note(p: PreparedGraph, participants: dict[RendezvousKey, list[int]]) -> str | None:
    """One line on matched collectives that no given rank records the size of
    (``comm_size_unknown`` everywhere): a network model cannot time them, they
    keep their measured time; None when there is none."""
    unsized = [m for m in participants.values() if all(i in p.size_unknown for i in m)]
    if not unsized:
        return None
    return (f"note: {len(unsized)} collective{'s' if len(unsized) != 1 else ''} without a size "
            "on any given rank (comm_size_unknown) keep their measured time under the network "
            "model (--bandwidth-scale alone scales them)")

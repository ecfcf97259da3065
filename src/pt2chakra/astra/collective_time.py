"""How long one collective takes in ASTRA-sim's analytical backend, without the binary.

A model written from reading ASTRA-sim (``astra-sim/astra-sim`` 518bd513) and checked
against its binaries (``tests/simulation/test_astra_collective.py``,
``scripts/astra_collective_grid.py``). It covers the native *ring* algorithm on a
one-dimensional Ring, FullyConnected or Switch network, for the whole machine or a
communicator group, and point-to-point sends.

What ASTRA-sim does for one collective of ``comm_size`` S bytes on n ranks:

1. **Chunks.** The payload is cut into chunks of ``c = S // splits`` bytes
   (``preferred-dataset-splits``). Except for all-gather, a chunk is at least the
   machine's NPU count ``N`` bytes (then ``S`` becomes ``splits * N``). There are
   ``ceil(S / c)`` chunks, every one of ``c`` bytes (the last is not trimmed).
   With one active chunk per dimension the chunks run one after another.
2. **Messages.** Per chunk the ring sends K messages of m bytes to its clockwise
   neighbour: all-reduce K = 2(n-1), m = c // n; reduce-scatter K = n-1, m = c // n;
   all-gather K = n-1, m = c (``comm_size`` is the *per-rank input*, so the bytes on
   the wire are n times those of a reduce-scatter of the same ``comm_size``);
   all-to-all K = n(n-1)/2, m = c // n.
3. **One message** takes ``floor(hops * latency + m / B)`` ns, B the bandwidth in
   bytes/ns with 1 GB = 2^30 B; hops is 1 (FullyConnected), 2 (Switch) or the shorter
   way round the Ring between the two ranks.
4. **Around each message** the system layer passes a packet through its memory bus:
   before the first send and after every receive, ``endpoint-delay`` ns (10 ns,
   whatever the setting, for a communicator group smaller than the machine, whose
   ring is a "local" dimension). The receives that reduce (all of reduce-scatter's,
   the first n-1 of all-reduce's) add ``3 * floor(m / local_mem_bw)`` ns (one write,
   two reads).

So for the whole machine a chunk takes ``(K + 1) * delay + K * message + R * reduce``
and the collective ``chunks * chunk``. For a group on a Ring whose neighbours are not
equally far apart, ranks run at different paces; the model then steps every rank
through the same send / receive recurrence as ASTRA-sim's event loop.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pt2chakra.astra.choices import TOPOLOGIES
from pt2chakra.chakra.records import CollectiveType
from pt2chakra.errors import BANDWIDTH_GBPS, MAX_LATENCY_US, InputError, Range, read_number
from pt2chakra.files import read_side_json

RING, ONE_RING = "ring", "oneRing"
IMPLEMENTATIONS = (RING, ONE_RING)
"""``ring`` runs a ring per dimension, one phase after another; ``oneRing`` one ring
over every NPU in id order (the same thing on one dimension)."""
OPTIMIZATIONS = ("localBWAware", "baseline")
SCHEDULING_POLICIES = ("LIFO", "FIFO")

# The configuration the project's ASTRA-sim runs use (/work/shared/ASTRA_SIM.md):
DEFAULT_SPLITS = 4
"""``preferred-dataset-splits``: ASTRA-sim's examples cut a collective into 4 chunks."""
DEFAULT_ACTIVE_CHUNKS = 1
"""``active-chunks-per-dimension``: one chunk in flight, so chunks run back to back."""
DEFAULT_ENDPOINT_DELAY_NS = 10
"""``endpoint-delay``: ns a packet spends on the NPU <-> memory bus around each message."""
DEFAULT_LOCAL_MEM_BW_GBPS = 1600.0
"""``local-mem-bw`` (GB/s, 10^9 B): prices the reduction of received data (HBM-class)."""
DEFAULT_PEAK_PERF_TFLOPS = 900
"""``peak-perf``: unused with the roofline off, but the system file carries it."""

MIN_ENDPOINT_DELAY_NS = 1
"""With ``endpoint-delay`` 0 ASTRA-sim schedules an event at the current tick and its
event queue asserts (measured)."""
LOCAL_RING_BUS_DELAY_NS = 10
"""A communicator group smaller than the machine gets a "local" ring whose memory-bus
hop is hard-coded to 10 ns in ASTRA-sim (MemBus ``Transmition::Fast``)."""
REDUCE_MEMORY_PASSES = 3
"""A reducing receive reads two operands and writes one result in local memory."""
BYTES_PER_GB_NETWORK = 1 << 30
"""The analytical network reads bandwidth in GB/s with 1 GB = 2^30 B."""
BYTES_PER_GB_MEMORY = 1_000_000_000
"""The system layer reads ``local-mem-bw`` in GB/s with 1 GB = 10^9 B."""

_AR = int(CollectiveType.ALL_REDUCE)
_AG = int(CollectiveType.ALL_GATHER)
_RS = int(CollectiveType.REDUCE_SCATTER)
_A2A = int(CollectiveType.ALL_TO_ALL)
SUPPORTED_COLLECTIVES = (_AR, _AG, _RS, _A2A)


@dataclass(frozen=True, slots=True)
class HostTier:
    """network.yml's second dimension: the links within each host of
    ``ranks_per_host`` NPUs, the network's own fields being the first (the
    uplinks between the hosts). ASTRA-sim times a message on the first
    dimension where the two NPUs' addresses differ (address ``[i mod H,
    i div H]`` for H hosts), so under ``oneRing`` every hop between
    neighbouring NPUs crosses the uplinks: one flat ring paced by its
    slowest hop, as gloo's is."""

    ranks_per_host: int
    bandwidth_gbps: float
    latency_ns: float

    @property
    def bytes_per_ns(self) -> float:
        return self.bandwidth_gbps * BYTES_PER_GB_NETWORK / 1_000_000_000


@dataclass(frozen=True, slots=True)
class AstraNetwork:
    """Analytical network (``network.yml``): one dimension, or two with
    ``hosts`` (the uplinks between hosts first, then the links within one)."""

    topology: str
    npus: int
    bandwidth_gbps: float
    latency_ns: float
    congestion_aware: bool = False
    """The ``..._Congestion_Aware`` binary: messages are stored and forwarded link by
    link, so each hop costs latency + serialisation (no link may carry two messages)."""
    hosts: HostTier | None = None

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology {self.topology!r} is not modelled "
                             f"(expected one of {TOPOLOGIES})")
        if self.npus < 2:
            raise ValueError(f"npus {self.npus}: ASTRA-sim needs at least 2 NPUs")
        if self.congestion_aware and self.topology == "Ring" and self.npus == 2:
            raise ValueError("a congestion-aware Ring of 2 NPUs: ASTRA-sim aborts "
                             "(it connects the two NPUs twice)")
        if not self.bandwidth_gbps > 0 or not self.latency_ns >= 0:
            raise ValueError("bandwidth must be > 0 and latency >= 0")
        if self.hosts is not None:
            self._check_hosts(self.hosts)

    def _check_hosts(self, hosts: HostTier) -> None:
        per_host = hosts.ranks_per_host
        if per_host < 2 or self.npus % per_host or self.npus // per_host < 2:
            raise ValueError(f"{self.npus} NPUs in hosts of {per_host}: two dimensions need "
                             "at least 2 hosts of at least 2 NPUs each, every host full")
        if self.congestion_aware:
            raise ValueError("a congestion-aware network of two dimensions is not modelled")
        if not hosts.bandwidth_gbps > 0 or not hosts.latency_ns >= 0:
            raise ValueError("bandwidth must be > 0 and latency >= 0 in every dimension")

    @property
    def dimensions(self) -> list[tuple[int, float, float]]:
        """(NPUs, bandwidth GB/s, latency ns) per network.yml dimension."""
        if self.hosts is None:
            return [(self.npus, self.bandwidth_gbps, self.latency_ns)]
        per_host = self.hosts.ranks_per_host
        return [(self.npus // per_host, self.bandwidth_gbps, self.latency_ns),
                (per_host, self.hosts.bandwidth_gbps, self.hosts.latency_ns)]

    @property
    def bytes_per_ns(self) -> float:
        # same operation order as ASTRA-sim, so the rounding matches
        return self.bandwidth_gbps * BYTES_PER_GB_NETWORK / 1_000_000_000

    def hops(self, src: int, dst: int) -> int:
        return _hops(self.topology, self.npus, src, dst)

    def message_ns(self, src: int, dst: int, size_bytes: int) -> int:
        """One message on free links: hops x latency plus serialisation (once, or once
        per hop when congestion-aware), truncated to whole ns as ASTRA-sim does; with
        two dimensions, on the first one where the NPUs' addresses differ."""
        if self.hosts is not None:
            return self._two_tier_message_ns(self.hosts, src, dst, size_bytes)
        serialise = size_bytes / self.bytes_per_ns
        if self.congestion_aware:
            return self.hops(src, dst) * int(self.latency_ns + serialise)
        return int(self.hops(src, dst) * self.latency_ns + serialise)

    def _two_tier_message_ns(self, hosts: HostTier, src: int, dst: int,
                             size_bytes: int) -> int:
        count = self.npus // hosts.ranks_per_host
        if src % count != dst % count:
            hops = _hops(self.topology, count, src % count, dst % count)
            return int(hops * self.latency_ns + size_bytes / self.bytes_per_ns)
        hops = _hops(self.topology, hosts.ranks_per_host, src // count, dst // count)
        return int(hops * hosts.latency_ns + size_bytes / hosts.bytes_per_ns)

    def links(self, src: int, dst: int) -> list[tuple[int, int]]:
        """The directed links a message takes when congestion-aware (a switch is node
        ``npus``; on a Ring the shorter way, clockwise on a tie)."""
        if self.topology == "FullyConnected":
            return [(src, dst)]
        if self.topology == "Switch":
            return [(src, self.npus), (self.npus, dst)]
        clockwise = (dst - src) % self.npus
        step = -1 if self.npus - clockwise < clockwise else 1
        path = [src + step * i for i in range(self.hops(src, dst) + 1)]
        return [(a % self.npus, b % self.npus) for a, b in zip(path, path[1:], strict=False)]


def _hops(topology: str, npus: int, src: int, dst: int) -> int:
    """Links between two NPUs of one dimension of ``npus``."""
    if topology == "FullyConnected":
        return 1
    if topology == "Switch":
        return 2
    clockwise = (dst - src) % npus  # the analytical Ring is bidirectional
    return min(clockwise, npus - clockwise)


@dataclass(frozen=True, slots=True)
class AstraSystem:
    """The system-layer settings (``system.json``) that change a collective's time."""

    splits: int = DEFAULT_SPLITS
    active_chunks: int = DEFAULT_ACTIVE_CHUNKS
    endpoint_delay_ns: int = DEFAULT_ENDPOINT_DELAY_NS
    local_mem_bw_gbps: float = DEFAULT_LOCAL_MEM_BW_GBPS
    implementation: str = "ring"
    collective_optimization: str = "localBWAware"
    scheduling_policy: str = "LIFO"

    def __post_init__(self) -> None:
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"collective implementation {self.implementation!r} is not "
                             f"modelled (expected one of {IMPLEMENTATIONS})")
        if self.active_chunks != 1:
            raise ValueError(f"active_chunks {self.active_chunks} is not modelled (only 1)")
        if self.collective_optimization not in OPTIMIZATIONS:
            raise ValueError(f"collective_optimization {self.collective_optimization!r} "
                             f"(expected one of {OPTIMIZATIONS})")
        if self.scheduling_policy not in SCHEDULING_POLICIES:
            raise ValueError(f"scheduling_policy {self.scheduling_policy!r} "
                             f"(expected one of {SCHEDULING_POLICIES})")
        if self.splits < 1 or not self.local_mem_bw_gbps > 0:
            raise ValueError("splits must be >= 1 and local-mem-bw > 0")
        if self.endpoint_delay_ns < MIN_ENDPOINT_DELAY_NS:
            raise ValueError(f"endpoint_delay_ns {self.endpoint_delay_ns}: ASTRA-sim aborts "
                             f"below {MIN_ENDPOINT_DELAY_NS} (an event at the current tick)")

    def reduce_ns(self, size_bytes: int) -> int:
        """Local reduction of one received message (each pass truncated, as ASTRA-sim)."""
        one_pass = int(size_bytes / (self.local_mem_bw_gbps * BYTES_PER_GB_MEMORY) * 1e9)
        return REDUCE_MEMORY_PASSES * one_pass


@dataclass(frozen=True, slots=True)
class RingPlan:
    """What one chunk does on the ring: K sends of ``message_bytes``; which receives reduce."""

    chunks: int
    sends: int
    message_bytes: int
    reducing_receives: int


_BARRIER = int(CollectiveType.BARRIER)
# ASTRA-sim has no barrier: one runs as the all-reduce of one 4-byte element
# that NCCL's barrier is (ProcessGroupNCCL::barrier all-reduces a one-element
# tensor), so every member still waits for the last and pays a round of
# latency, and ASTRA-sim never stops on a type it lacks.
BARRIER_AS_BYTES = 4


def astra_collective(comm_type: int, size_bytes: int) -> tuple[int, int]:
    """(comm_type, size in the converter's convention) of the collective
    ASTRA-sim runs for a recorded one: a barrier as a one-element all-reduce
    (``BARRIER_AS_BYTES``), every other as recorded."""
    if comm_type == _BARRIER:
        return _AR, BARRIER_AS_BYTES
    return comm_type, size_bytes


def astra_comm_size(comm_type: int, size_bytes: int, group_size: int) -> int:
    """The ``comm_size`` ASTRA-sim must read for a collective whose payload
    is ``size_bytes`` in the converter's convention (the collective's total:
    an all-gather's gathered output, ``simulation/network.py``) on
    ``group_size`` ranks. ASTRA-sim takes an all-gather's ``comm_size`` to
    be each rank's input (step 2 above) and would move n times the bytes:
    the export writes S / n. Every other type is read as written."""
    if comm_type == _AG and group_size > 1:
        return size_bytes // group_size
    return size_bytes


def chunking(comm_type: int, size_bytes: int, machine_npus: int, splits: int) -> tuple[int, int]:
    """(chunk count, chunk bytes) as ASTRA-sim's ``determine_chunk_size`` cuts a payload."""
    chunk = size_bytes // splits
    if comm_type != _AG and machine_npus > chunk:
        chunk = machine_npus  # a floor so later divisions by the ring size stay > 0
        size_bytes = splits * chunk
    if chunk == 0:
        raise ValueError(f"ALL_GATHER of {size_bytes} B with {splits} splits: ASTRA-sim's "
                         "chunk is 0 B and it never finishes")
    return math.ceil(size_bytes / chunk), chunk


def ring_plan(comm_type: int, size_bytes: int, group_size: int, machine_npus: int,
              splits: int) -> RingPlan:
    chunks, chunk = chunking(comm_type, size_bytes, machine_npus, splits)
    n = group_size
    if comm_type == _AR:
        return RingPlan(chunks, 2 * (n - 1), chunk // n, n - 1)
    if comm_type == _RS:
        return RingPlan(chunks, n - 1, chunk // n, n - 1)
    if comm_type == _AG:
        return RingPlan(chunks, n - 1, chunk, 0)
    return RingPlan(chunks, n * (n - 1) // 2, chunk // n, 0)


def _check(comm_type: int, size_bytes: int, group: Sequence[int], network: AstraNetwork,
           system: AstraSystem) -> None:
    if network.hosts is not None and system.implementation != ONE_RING:
        raise ValueError(f"a two-dimensional network under {system.implementation!r} runs "
                         f"a phase per dimension: not modelled (only {ONE_RING!r})")
    if comm_type not in SUPPORTED_COLLECTIVES:
        known = {int(t) for t in CollectiveType}
        name = CollectiveType(comm_type).name if comm_type in known else str(comm_type)
        raise ValueError(f"collective {name} is not modelled: ASTRA-sim simulates ALL_REDUCE, "
                         "ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL (BROADCAST replays the "
                         "node's duration; other types throw)")
    if size_bytes < 0:
        raise ValueError(f"size {size_bytes} B is negative")
    if len(group) < 2 or len(set(group)) != len(group):
        raise ValueError(f"group {list(group)}: needs at least 2 distinct ranks")
    if min(group) < 0 or max(group) >= network.npus:
        raise ValueError(f"group {list(group)} does not fit a {network.npus}-NPU network")
    if network.congestion_aware:
        used = [link for i in range(len(group)) for link in network.links(group[i - 1], group[i])]
        if len(used) != len(set(used)):
            raise ValueError(f"congestion-aware group {list(group)}: its ring's messages "
                             "share links, and contention is not modelled")


def group_ranks(group_size: int, network: AstraNetwork,
                ranks: Sequence[int] | None = None) -> tuple[int, ...]:
    """The ring order ASTRA-sim uses: the whole machine in rank order, or a group's
    ranks as listed in the comm-group file (ASTRA-sim does not sort them)."""
    if ranks is None:
        return tuple(range(group_size))
    if len(ranks) != group_size:
        raise ValueError(f"group_size {group_size} but {len(ranks)} ranks given")
    return tuple(ranks)


def collective_rank_ns(comm_type: int, size_bytes: int, group_size: int,
                       network: AstraNetwork, system: AstraSystem,
                       ranks: Sequence[int] | None = None) -> dict[int, int]:
    """ns from issue to completion of one collective on each member rank.

    All members issue at the same time (as after a barrier); ``ranks`` lists a
    communicator group in its comm-group-file order (default: ranks 0..group_size-1).
    Raises ValueError for what is not modelled."""
    group = group_ranks(group_size, network, ranks)
    return collective_finish_ns(comm_type, size_bytes, network, system, group,
                                dict.fromkeys(group, 0))


def collective_finish_ns(comm_type: int, size_bytes: int, network: AstraNetwork,
                         system: AstraSystem, group: Sequence[int],
                         issued: Mapping[int, int]) -> dict[int, int]:
    """When each member finishes one collective that member r issued at
    ``issued[r]`` ns: a late member holds up the ring message by message, as
    in ASTRA-sim's event loop, rather than the whole collective starting at
    the last arrival. ``group`` in comm-group-file order."""
    _check(comm_type, size_bytes, group, network, system)
    plan = ring_plan(comm_type, size_bytes, len(group), network.npus, system.splits)
    whole_machine = len(group) == network.npus
    bus = system.endpoint_delay_ns if whole_machine else LOCAL_RING_BUS_DELAY_NS
    delays = _insert_delays(plan, len(group), bus, system.reduce_ns(plan.message_bytes))
    links = [network.message_ns(group[i - 1], group[i], plan.message_bytes)
             for i in range(len(group))]  # links[i]: from i's ring predecessor to i
    finish = [issued[r] for r in group]
    for _ in range(plan.chunks):
        finish = _ring_chunk(finish, links, delays)
    return dict(zip(group, finish, strict=True))


def collective_ns(comm_type: int, size_bytes: int, group_size: int,
                  network: AstraNetwork, system: AstraSystem,
                  ranks: Sequence[int] | None = None) -> int:
    """ns one collective takes in ASTRA-sim (the last member to finish)."""
    return max(collective_rank_ns(comm_type, size_bytes, group_size, network, system,
                                  ranks).values())


def send_ns(size_bytes: int, src: int, dst: int, network: AstraNetwork) -> int:
    """A point-to-point send/recv pair (``front_end_sim_send``, rendezvous off): the
    message time alone; the send and the matching receive complete on arrival."""
    if src == dst or not (0 <= src < network.npus and 0 <= dst < network.npus):
        raise ValueError(f"send {src} -> {dst} on a {network.npus}-NPU network")
    if size_bytes <= 0:
        raise ValueError(f"send of {size_bytes} B: the analytical network needs > 0 B")
    return network.message_ns(src, dst, size_bytes)


def _insert_delays(plan: RingPlan, n: int, bus: int, reduce: int) -> list[int]:
    """Delay of the packet ASTRA-sim inserts before the first send (index 0) and after
    each of the K receives. Packets come in rounds of n: one "zero-latency" packet,
    then n-1 that may reduce; only the first round reduces (all-reduce's second round
    is the all-gather half)."""
    delays = []
    for index in range(plan.sends + 1):
        reduces = index % n != 0 and index <= plan.reducing_receives
        delays.append(bus + (reduce if reduces else 0))
    return delays


def _ring_chunk(start: list[int], links: list[int], delays: list[int]) -> list[int]:
    """One chunk on every ring member; returns each member's finish time.

    Member i sends message k at ``send[i]``; it receives its predecessor's k-th message
    when that has arrived and i has posted the receive (at its own k-th send); then the
    next packet's delay passes before its next send."""
    n = len(start)
    send = [s + delays[0] for s in start]
    for k in range(1, len(delays)):
        received = [max(send[i - 1] + links[i], send[i]) for i in range(n)]
        send = [r + delays[k] for r in received]
    return send


NETWORK_FILE, SYSTEM_FILE, MEMORY_FILE = "network.yml", "system.json", "memory.json"
NETWORK_FIELDS = ("topology", "npus_count", "bandwidth", "latency")
"""The network.yml fields written and read back, in file order."""


def astra_config_texts(network: AstraNetwork, system: AstraSystem,
                       notes: Mapping[str, str] | None = None) -> dict[str, str]:
    """network.yml, system.json and memory.json as text, by file name.
    ``notes``: per network.yml field, how its value was obtained (written as
    a ``#`` comment above it; JSON has no comments, so system notes go into
    network.yml under the key ``system``)."""
    notes = notes or {}
    dims = network.dimensions
    values = {"topology": ", ".join(network.topology for _ in dims),
              "npus_count": ", ".join(str(n) for n, _, _ in dims),
              "bandwidth": ", ".join(repr(float(b)) for _, b, _ in dims),
              "latency": ", ".join(repr(float(lat)) for _, _, lat in dims)}
    lines = [f"# {line}" for line in notes.get("header", "").splitlines()]
    for field in NETWORK_FIELDS:
        lines += [f"# {line}" for line in notes.get(field, "").splitlines()]
        lines.append(f"{field}: [ {values[field]} ]")
    lines += [f"# {line}" for line in notes.get("system", "").splitlines()]
    impl = [system.implementation]
    system_json = json.dumps({
        "scheduling-policy": system.scheduling_policy,
        "endpoint-delay": system.endpoint_delay_ns,
        "active-chunks-per-dimension": system.active_chunks,
        "preferred-dataset-splits": system.splits,
        "all-reduce-implementation": impl,
        "all-gather-implementation": impl,
        "reduce-scatter-implementation": impl,
        "all-to-all-implementation": impl,
        "collective-optimization": system.collective_optimization,
        "local-mem-bw": system.local_mem_bw_gbps,
        "boost-mode": 0,
        "roofline-enabled": 0,
        "peak-perf": DEFAULT_PEAK_PERF_TFLOPS,
    }, indent=2) + "\n"
    return {NETWORK_FILE: "\n".join(lines) + "\n", SYSTEM_FILE: system_json,
            MEMORY_FILE: json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}) + "\n"}


def write_astra_configs(folder: str | os.PathLike[str], network: AstraNetwork,
                        system: AstraSystem) -> tuple[Path, Path, Path]:
    """Write network.yml, system.json, memory.json describing exactly what is modelled."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    texts = astra_config_texts(network, system)
    paths = out / NETWORK_FILE, out / SYSTEM_FILE, out / MEMORY_FILE
    for path in paths:
        path.write_text(texts[path.name])
    return paths


_NETWORK_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*\[\s*([^\]]+?)\s*\]\s*$")
MAX_DIMENSIONS = 2
"""The tiers modelled: the links within a host and the uplinks between hosts."""


def read_network_file(path: str | os.PathLike[str],
                      congestion_aware: bool = False) -> AstraNetwork:
    """A network.yml as ``astra_config_texts`` writes it (``key: [ v, ... ]``
    lines, ``#`` comments; one dimension, or two of one topology: the
    uplinks, then the links within a host); ``InputError`` naming the field
    otherwise."""
    name = os.fspath(path)
    fields: dict[str, list[str]] = {}
    for line in Path(name).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _NETWORK_LINE.match(line)
        if match is None:
            raise InputError(name, f"cannot read {line.strip()!r}: expected 'key: [ value, "
                             "... ]', a value per dimension")
        fields[match[1]] = [v.strip() for v in match[2].split(",")]
    missing = [f for f in NETWORK_FIELDS if f not in fields]
    if missing:
        raise InputError(name, f"field {missing[0]} is missing")
    dims = len(fields["npus_count"])
    for field in NETWORK_FIELDS:
        if len(fields[field]) != dims or dims > MAX_DIMENSIONS:
            raise InputError(name, f"field {field}: {len(fields[field])} values for {dims} "
                             f"dimensions (at most {MAX_DIMENSIONS}, one value each)")
    if len(set(fields["topology"])) != 1:
        raise InputError(name, f"field topology: {fields['topology']}: dimensions of "
                         "different topologies are not modelled")
    try:
        counts = [int(v) for v in fields["npus_count"]]
        bandwidth = [float(v) for v in fields["bandwidth"]]
        latency = [float(v) for v in fields["latency"]]
        hosts = None if dims == 1 else HostTier(counts[1], bandwidth[1], latency[1])
        return AstraNetwork(fields["topology"][0], math.prod(counts), bandwidth[0],
                            latency[0], congestion_aware=congestion_aware, hosts=hosts)
    except ValueError as exc:
        raise InputError(name, f"network fields: {exc}") from exc


_SYSTEM_KEYS = {"splits": "preferred-dataset-splits", "active_chunks": "active-chunks-per-dimension",
                "endpoint_delay_ns": "endpoint-delay", "local_mem_bw_gbps": "local-mem-bw",
                "collective_optimization": "collective-optimization",
                "scheduling_policy": "scheduling-policy"}


# The numeric fields of a system.json and their ranges (read with
# ``errors.read_number``): a collective cut into more chunks than this is no
# system ASTRA-sim's examples describe (they use 1 to 64); a delay of up to a
# day; a memory bandwidth within a network's range.
MAX_SPLITS = 65536
_SYSTEM_NUMBERS = {"preferred-dataset-splits": Range(1, MAX_SPLITS),
                   "active-chunks-per-dimension": Range(1, MAX_SPLITS),
                   "endpoint-delay": Range(MIN_ENDPOINT_DELAY_NS, MAX_LATENCY_US * 1e3),
                   "local-mem-bw": BANDWIDTH_GBPS}


def read_system_file(path: str | os.PathLike[str]) -> AstraSystem:
    """A system.json whose settings the collective model covers (the one
    ``astra_config_texts`` writes); ``InputError`` naming the field otherwise."""
    name = os.fspath(path)
    data = read_side_json(name)
    if not isinstance(data, dict):
        raise InputError(name, "expected a JSON object")
    for key in ("all-reduce-implementation", *_SYSTEM_KEYS.values()):
        if key not in data:
            raise InputError(name, f"field {key} is missing")
    for key, allowed in _SYSTEM_NUMBERS.items():
        read_number(data[key], allowed, name, f"field {key}")
    implementation = data["all-reduce-implementation"]
    if not isinstance(implementation, list) or len(implementation) != 1:
        raise InputError(name, "field all-reduce-implementation: expected one dimension")
    try:
        return AstraSystem(implementation=str(implementation[0]),
                           **{attr: data[key] for attr, key in _SYSTEM_KEYS.items()})
    except (ValueError, TypeError) as exc:
        raise InputError(name, f"system fields: {exc}") from exc

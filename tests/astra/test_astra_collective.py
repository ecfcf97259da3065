"""The ASTRA-sim collective model: against values measured from the binary (always),
against the binary itself (the ``astra_bin`` fixture: ``ASTRA_SIM_BIN``),
and its invariants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.astra.collective_time import (
    AstraNetwork,
    AstraSystem,
    astra_comm_size,
    chunking,
    collective_ns,
    collective_rank_ns,
    ring_plan,
    send_ns,
    write_astra_configs,
)
from pt2chakra.chakra.records import CollectiveType

AR, AG, RS, A2A = (int(CollectiveType.ALL_REDUCE), int(CollectiveType.ALL_GATHER),
                   int(CollectiveType.REDUCE_SCATTER), int(CollectiveType.ALL_TO_ALL))
TYPES = {"ALL_REDUCE": AR, "ALL_GATHER": AG, "REDUCE_SCATTER": RS, "ALL_TO_ALL": A2A}
RING8 = AstraNetwork("Ring", 8, 50.0, 500.0)
DEFAULT = AstraSystem()
VARIANT = AstraSystem(splits=7, endpoint_delay_ns=37, local_mem_bw_gbps=50.0,
                      collective_optimization="baseline")

# Measured with ASTRA-sim 518bd513 (AstraSim_Analytical_Congestion_Unaware), the configs
# write_astra_configs writes, one COMM_COLL_NODE per member (pg_name "1" and a
# comm-group file for groups). Columns: topology, NPUs, GB/s, latency ns, system,
# group (None: the whole machine), collective, bytes, cycles of the last member.
MEASURED = [
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_REDUCE", 192, 28600),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_REDUCE", 24576, 29384),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_REDUCE", 1576964, 82472),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_REDUCE", 16777216, 602908),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_TO_ALL", 192, 57160),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_TO_ALL", 16777216, 1150840),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_GATHER", 24576, 17512),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_GATHER", 16777216, 2201820),
    ("Ring", 8, 50, 500, DEFAULT, None, "REDUCE_SCATTER", 1576964, 42516),
    ("Ring", 8, 50, 500, DEFAULT, None, "REDUCE_SCATTER", 16777216, 315208),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_REDUCE", 0, 28600),
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_REDUCE", 103, 35750),  # 5 chunks of 25 B
    ("Ring", 8, 50, 500, DEFAULT, None, "ALL_GATHER", 5, 17900),
    ("Ring", 2, 12.5, 2000, DEFAULT, None, "ALL_GATHER", 16777216, 1258080),
    ("Ring", 2, 12.5, 2000, DEFAULT, None, "ALL_TO_ALL", 1576964, 66824),
    ("Ring", 3, 12.5, 2000, DEFAULT, None, "ALL_REDUCE", 1576964, 190824),
    ("Ring", 3, 12.5, 2000, DEFAULT, None, "REDUCE_SCATTER", 103, 20150),
    ("FullyConnected", 2, 150, 0, DEFAULT, None, "ALL_REDUCE", 16777216, 120000),
    ("FullyConnected", 3, 50, 500, DEFAULT, None, "REDUCE_SCATTER", 24576, 4448),
    ("FullyConnected", 5, 12.5, 2000, DEFAULT, None, "ALL_GATHER", 103, 40270),
    ("FullyConnected", 8, 50, 500, VARIANT, None, "ALL_TO_ALL", 103, 120584),
    ("Switch", 3, 12.5, 2000, DEFAULT, None, "ALL_REDUCE", 16777216, 1751808),
    ("Switch", 3, 150, 0, DEFAULT, None, "ALL_TO_ALL", 16777216, 104320),
    ("Switch", 8, 150, 0, DEFAULT, None, "ALL_REDUCE", 1, 600),
    ("Switch", 16, 50, 500, DEFAULT, None, "ALL_TO_ALL", 24576, 488200),
    ("Switch", 8, 50, 500, VARIANT, None, "ALL_TO_ALL", 16777216, 1482504),
    ("Ring", 16, 50, 500, DEFAULT, (0, 1, 2, 3, 4, 5, 6, 7), "REDUCE_SCATTER", 1, 26320),
    ("Ring", 16, 50, 500, DEFAULT, (0, 2, 5, 6), "ALL_GATHER", 103, 23700),
    ("Ring", 16, 50, 500, DEFAULT, (3, 2, 1, 0), "ALL_GATHER", 16777216, 946660),
    ("Switch", 16, 50, 500, DEFAULT, (7, 1, 4), "ALL_REDUCE", 16777216, 453808),
    ("FullyConnected", 16, 50, 500, DEFAULT, (3, 2, 1, 0), "ALL_TO_ALL", 1576964, 56320),
]
# The same, with AstraSim_Analytical_Congestion_Aware (store and forward: every hop
# serialises again, so Switch and multi-hop group rings are slower).
MEASURED_AWARE = [
    ("Switch", 8, None, "ALL_REDUCE", 16777216, 1177748),
    ("Switch", 16, (0, 2, 5, 6), "REDUCE_SCATTER", 1576964, 58396),
    ("Ring", 16, (7, 1, 4), "ALL_GATHER", 16777216, 2594745),
    ("Ring", 8, None, "ALL_REDUCE", 16777216, 602908),  # neighbours: as unaware
]
# Groups on a 16-NPU Ring whose neighbours are unequally far apart: members finish apart.
MEASURED_PER_RANK = [
    (AR, 16777216, (7, 1, 4), {7: 469308, 1: 470808, 4: 469308}),
    (AG, 4097, (3, 9, 4, 15), {3: 37485, 9: 37985, 4: 37985, 15: 38485}),
]


@pytest.mark.parametrize(("topo", "npus", "bw", "lat", "system", "group", "name", "size",
                          "cycles"), MEASURED)
def test_matches_measured_table(topo: str, npus: int, bw: float, lat: float,
                                system: AstraSystem, group: tuple[int, ...] | None, name: str,
                                size: int, cycles: int) -> None:
    network = AstraNetwork(topo, npus, bw, lat)
    group_size = npus if group is None else len(group)
    assert collective_ns(TYPES[name], size, group_size, network, system, group) == cycles


@pytest.mark.parametrize(("ctype", "size", "group", "cycles"), MEASURED_PER_RANK)
def test_matches_measured_per_rank(ctype: int, size: int, group: tuple[int, ...],
                                   cycles: dict[int, int]) -> None:
    network = AstraNetwork("Ring", 16, 50.0, 500.0)
    assert collective_rank_ns(ctype, size, len(group), network, DEFAULT, group) == cycles


@pytest.mark.parametrize(("topo", "npus", "group", "name", "size", "cycles"), MEASURED_AWARE)
def test_matches_measured_aware(topo: str, npus: int, group: tuple[int, ...] | None,
                                name: str, size: int, cycles: int) -> None:
    network = AstraNetwork(topo, npus, 50.0, 500.0, congestion_aware=True)
    group_size = npus if group is None else len(group)
    assert collective_ns(TYPES[name], size, group_size, network, DEFAULT, group) == cycles


def test_aware_refuses_contention() -> None:
    """(0, 3, 1, 2) on an 8-Ring: 0->3 and 1->2 both cross the link 1->2."""
    network = AstraNetwork("Ring", 8, 50.0, 500.0, congestion_aware=True)
    with pytest.raises(ValueError, match="share links"):
        collective_ns(AR, 1000, 4, network, DEFAULT, ranks=(0, 3, 1, 2))
    with pytest.raises(ValueError, match="Ring of 2 NPUs"):
        AstraNetwork("Ring", 2, 50.0, 500.0, congestion_aware=True)


def test_send_is_one_message() -> None:
    # measured: 1 -> 5 on the 8-Ring is 4 hops (2000 ns) plus 16 MiB at 50 GiB/s
    assert send_ns(16777216, 1, 5, RING8) == 314500
    assert send_ns(1, 6, 1, RING8) == 1500  # the shorter way round: 3 hops
    assert send_ns(4097, 1, 5, AstraNetwork("Switch", 8, 50.0, 500.0)) == 1076


def test_all_gather_size_is_per_rank_input() -> None:
    """ALL_GATHER's comm_size is one rank's input: each step sends a whole chunk, n times
    the message of a reduce-scatter of the same comm_size (a 1/n share)."""
    ag = ring_plan(AG, 1 << 24, 8, 8, 4)
    rs = ring_plan(RS, 1 << 24, 8, 8, 4)
    assert (ag.sends, ag.message_bytes) == (rs.sends, 8 * rs.message_bytes)
    assert (ag.reducing_receives, rs.reducing_receives) == (0, 7)


@pytest.mark.parametrize(("args", "match"), [
    ((int(CollectiveType.BROADCAST), 100, 8), "BROADCAST"),
    ((int(CollectiveType.BARRIER), 100, 8), "BARRIER"),
    ((99, 100, 8), "99"),
    ((AG, 3, 8), "ALL_GATHER of 3 B"),
    ((AR, 100, 1), "at least 2"),
    ((AR, -1, 8), "negative"),
])
def test_unsupported_raises(args: tuple[int, int, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        collective_ns(*args, RING8, DEFAULT)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: AstraNetwork("Torus", 8, 50, 500), "Torus"),
    (lambda: AstraNetwork("Ring", 1, 50, 500), "at least 2"),
    (lambda: AstraSystem(implementation="direct"), "direct"),
    (lambda: AstraSystem(active_chunks=2), "active_chunks"),
    (lambda: AstraSystem(endpoint_delay_ns=0), "endpoint_delay_ns"),
])
def test_unmodelled_settings_raise(make: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()  # type: ignore[operator]


def test_group_must_fit_the_network() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        collective_ns(AR, 100, 2, RING8, DEFAULT, ranks=(0, 8))
    with pytest.raises(ValueError, match="2 ranks given"):
        collective_ns(AR, 100, 3, RING8, DEFAULT, ranks=(0, 1))


def test_write_astra_configs(tmp_path: Path) -> None:
    net, sys_, mem = write_astra_configs(tmp_path, RING8, DEFAULT)
    assert net.read_text().splitlines() == ["topology: [ Ring ]", "npus_count: [ 8 ]",
                                            "bandwidth: [ 50.0 ]", "latency: [ 500.0 ]"]
    system = json.loads(sys_.read_text())
    assert (system["preferred-dataset-splits"], system["endpoint-delay"],
            system["active-chunks-per-dimension"], system["local-mem-bw"]) == (4, 10, 1, 1600)
    assert system["all-to-all-implementation"] == ["ring"]
    assert json.loads(mem.read_text()) == {"memory-type": "NO_MEMORY_EXPANSION"}


# --- invariants ---------------------------------------------------------------------

ctypes = st.sampled_from([AR, AG, RS, A2A])
topologies = st.sampled_from(["Ring", "FullyConnected", "Switch"])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(ctypes, topologies, st.integers(2, 16), st.integers(4, 1 << 28), st.integers(1, 1 << 20))
def test_monotone_in_size_over_whole_chunks(ctype: int, topo: str, npus: int, size: int,
                                            extra: int) -> None:
    """More bytes never take less time once the chunk count is fixed (ASTRA-sim's chunk
    count, ceil(S / (S // splits)), can drop by one as S grows: that is not monotone)."""
    network = AstraNetwork(topo, npus, 50.0, 500.0)
    bigger = size + extra * DEFAULT.splits
    if chunking(ctype, size, npus, 4)[0] == chunking(ctype, bigger, npus, 4)[0]:
        assert (collective_ns(ctype, bigger, npus, network, DEFAULT)
                >= collective_ns(ctype, size, npus, network, DEFAULT))


@settings(max_examples=200, deadline=None)
@given(ctypes, topologies, st.integers(2, 16), st.integers(4, 1 << 28),
       st.floats(1.0, 400.0), st.floats(1.0, 4.0), st.floats(0.0, 5000.0))
@pytest.mark.slow
def test_faster_links_never_slower(ctype: int, topo: str, npus: int, size: int, bw: float,
                                   factor: float, lat: float) -> None:
    slow = AstraNetwork(topo, npus, bw, lat)
    fast = AstraNetwork(topo, npus, bw * factor, lat)
    assert collective_ns(ctype, size, npus, fast, DEFAULT) <= collective_ns(
        ctype, size, npus, slow, DEFAULT)
    nearer = AstraNetwork(topo, npus, bw, lat / factor)
    assert collective_ns(ctype, size, npus, nearer, DEFAULT) <= collective_ns(
        ctype, size, npus, slow, DEFAULT)


@settings(max_examples=150, deadline=None)
@given(ctypes, st.integers(2, 16), st.integers(4, 1 << 28), st.floats(1.0, 400.0),
       st.floats(0.0, 5000.0))
def test_whole_machine_closed_form(ctype: int, npus: int, size: int, bw: float,
                                   lat: float) -> None:
    """On the whole machine every member keeps pace: the event recurrence reduces to
    chunks x ((K+1) x delay + K x message + reducing receives x reduction)."""
    network = AstraNetwork("FullyConnected", npus, bw, lat)
    chunks, chunk = chunking(ctype, size, npus, 4)
    n = npus
    sends, msg, reducing = {AR: (2 * (n - 1), chunk // n, n - 1), RS: (n - 1, chunk // n, n - 1),
                            AG: (n - 1, chunk, 0), A2A: (n * (n - 1) // 2, chunk // n, 0)}[ctype]
    per_chunk = ((sends + 1) * 10 + sends * network.message_ns(0, 1, msg)
                 + reducing * DEFAULT.reduce_ns(msg))
    ranks = collective_rank_ns(ctype, size, npus, network, DEFAULT)
    assert set(ranks.values()) == {chunks * per_chunk}


@settings(max_examples=100, deadline=None)
@given(ctypes, st.integers(4, 1 << 26), st.permutations(list(range(8))), st.integers(2, 8))
def test_group_members_finish_together_without_extra_hops(ctype: int, size: int,
                                                          order: list[int], k: int) -> None:
    """On a Switch every neighbour is 2 hops away, so the order of a group's ranks
    does not matter and its members finish together."""
    network = AstraNetwork("Switch", 8, 50.0, 500.0)
    group = order[:k]
    times = collective_rank_ns(ctype, size, k, network, DEFAULT, group)
    assert len(set(times.values())) == 1
    assert times == collective_rank_ns(ctype, size, k, network, DEFAULT, sorted(group))


# --- against the binary -------------------------------------------------------------

GRID_SIZES = (1, 103, 4097, 1576964, 16777216, 268435456)
GRID = [(topo, npus, bw, lat, name, size)
        for topo in ("Ring", "FullyConnected", "Switch")
        for npus in (2, 5, 8, 16)
        for bw, lat in ((50.0, 500.0), (150.0, 0.0), (12.5, 2000.0))
        for name in TYPES
        for size in GRID_SIZES
        if not (name == "ALL_GATHER" and size < 4)]
MAX_ERROR = 0.005
"""The brief's bound; over every grid point the model has matched the binary exactly."""


@pytest.mark.parametrize(("topo", "npus", "bw", "lat", "name", "size"), GRID)
def test_against_binary(astra_bin: str, topo: str, npus: int, bw: float, lat: float,
                        name: str, size: int) -> None:
    from pt2chakra.astra.binary import run_collective
    network = AstraNetwork(topo, npus, bw, lat)
    real = max(run_collective(astra_bin, TYPES[name], size, network, DEFAULT).values())
    model = collective_ns(TYPES[name], size, npus, network, DEFAULT)
    assert abs(model - real) <= MAX_ERROR * real


@pytest.mark.parametrize("group", [(0, 1), (0, 2, 5, 6), (7, 1, 4), (3, 9, 4, 15, 0)])
@pytest.mark.parametrize("topo", ["Ring", "Switch"])
@pytest.mark.parametrize("name", list(TYPES))
def test_groups_against_binary(astra_bin: str, group: tuple[int, ...], topo: str,
                               name: str) -> None:
    from pt2chakra.astra.binary import run_collective
    network = AstraNetwork(topo, 16, 50.0, 500.0)
    real = run_collective(astra_bin, TYPES[name], 1576964, network, VARIANT, group)
    model = collective_rank_ns(TYPES[name], 1576964, len(group), network, VARIANT, group)
    assert all(abs(model[r] - real[r]) <= MAX_ERROR * real[r] for r in group)


@pytest.mark.parametrize("aware", [False, True])
@pytest.mark.parametrize(("src", "dst"), [(0, 1), (1, 5), (6, 1)])
def test_send_against_binary(astra_bin: str, src: int, dst: int, aware: bool) -> None:
    from pt2chakra.astra.binary import run_send
    network = AstraNetwork("Ring", 8, 50.0, 500.0, congestion_aware=aware)
    real = run_send(astra_bin, 1576964, src, dst, network, DEFAULT)
    assert real[src] == real[dst] == send_ns(1576964, src, dst, network)


@pytest.mark.parametrize("group", [None, (0, 2, 5, 6), (7, 1, 4)])
@pytest.mark.parametrize("topo", ["Ring", "FullyConnected", "Switch"])
@pytest.mark.parametrize("name", list(TYPES))
def test_aware_against_binary(astra_bin: str, group: tuple[int, ...] | None, topo: str,
                              name: str) -> None:
    from pt2chakra.astra.binary import run_collective
    network = AstraNetwork(topo, 16, 50.0, 500.0, congestion_aware=True)
    real = run_collective(astra_bin, TYPES[name], 16777216, network, DEFAULT, group)
    model = collective_rank_ns(TYPES[name], 16777216, 16 if group is None else len(group),
                               network, DEFAULT, group)
    assert all(abs(model[r] - real[r]) <= MAX_ERROR * real[r] for r in model)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([AR, AG, RS]), st.integers(2, 64), st.integers(1, 1 << 16),
       st.integers(1, 8))
def test_written_sizes_move_the_ring_bytes_of_the_collective(ctype: int, n: int, unit: int,
                                                              splits: int) -> None:
    """Invariant: with the size the export writes (``astra_comm_size``),
    ASTRA-sim's ring moves per link what the alpha-beta ring moves for the
    trace's size S: 2(n-1)/n S for an all-reduce, (n-1)/n S for an
    all-gather (S its gathered output) or a reduce-scatter."""
    from pt2chakra.simulation.network import cost_factors

    size = unit * n * splits * n  # whole messages: no rounding in ASTRA-sim's cuts
    plan = ring_plan(ctype, astra_comm_size(ctype, size, n), n, n, splits)
    sent = plan.chunks * plan.sends * plan.message_bytes
    assert sent == pytest.approx(cost_factors(ctype, n)[1] * size)

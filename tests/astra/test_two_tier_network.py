"""A network.yml of two tiers (``HostTier``): the uplinks between hosts as
dimension 0, the links within a host as dimension 1, under ``oneRing``.
The model against ASTRA-sim itself (the ``astra_bin`` fixture), the file
read back, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.astra.collective_time import (
    NETWORK_FILE,
    ONE_RING,
    AstraNetwork,
    AstraSystem,
    HostTier,
    collective_ns,
    collective_rank_ns,
    read_network_file,
    write_astra_configs,
)
from pt2chakra.chakra.records import CollectiveType
from pt2chakra.errors import InputError

AR, AG, RS = (int(CollectiveType.ALL_REDUCE), int(CollectiveType.ALL_GATHER),
              int(CollectiveType.REDUCE_SCATTER))
ONE = AstraSystem(implementation=ONE_RING)
UPLINK_GBPS, UPLINK_NS, LINK_GBPS, LINK_NS = 12.5, 3000.0, 50.0, 500.0
TWO_BY_FOUR = AstraNetwork("Ring", 8, UPLINK_GBPS, UPLINK_NS,
                           hosts=HostTier(4, LINK_GBPS, LINK_NS))
SIZE = 1576964
MAX_ERROR = 0.005  # the collective model's bound against the binary


def test_a_hop_between_hosts_takes_the_uplink_and_one_within_a_host_its_link() -> None:
    # NPU i sits at [i mod 2, i div 2]: 0 -> 1 crosses hosts, 0 -> 2 stays on one
    assert TWO_BY_FOUR.message_ns(0, 1, SIZE) == int(UPLINK_NS + SIZE / (UPLINK_GBPS * 2**30 / 1e9))
    assert TWO_BY_FOUR.message_ns(0, 2, SIZE) == int(LINK_NS + SIZE / (LINK_GBPS * 2**30 / 1e9))


@pytest.mark.parametrize("ctype", [AR, AG, RS])
def test_the_whole_machine_runs_one_ring_at_the_uplinks(ctype: int) -> None:
    """Every hop of oneRing crosses dimension 0: the flat ring at its slowest hop."""
    flat = AstraNetwork("Ring", 8, UPLINK_GBPS, UPLINK_NS)
    assert collective_ns(ctype, SIZE, 8, TWO_BY_FOUR, ONE) == collective_ns(ctype, SIZE, 8,
                                                                            flat, ONE)


def test_a_group_within_one_host_is_faster_than_one_across_hosts() -> None:
    inside = collective_ns(AR, SIZE, 4, TWO_BY_FOUR, ONE, (0, 2, 4, 6))
    across = collective_ns(AR, SIZE, 4, TWO_BY_FOUR, ONE, (0, 1, 2, 3))
    assert inside < across


def test_phases_per_dimension_are_not_modelled() -> None:
    with pytest.raises(ValueError, match="phase per dimension"):
        collective_ns(AR, SIZE, 8, TWO_BY_FOUR, AstraSystem())


@pytest.mark.parametrize(("per_host", "aware"), [(3, False), (8, False), (1, False), (4, True)])
def test_hosts_that_do_not_tile_the_machine_are_refused(per_host: int, aware: bool) -> None:
    with pytest.raises(ValueError):
        AstraNetwork("Switch", 8, 1.0, 0.0, congestion_aware=aware,
                     hosts=HostTier(per_host, 1.0, 0.0))


def test_the_file_reads_back_as_written(tmp_path: Path) -> None:
    net, _, _ = write_astra_configs(tmp_path, TWO_BY_FOUR, ONE)
    text = net.read_text()
    assert "npus_count: [ 2, 4 ]" in text and "topology: [ Ring, Ring ]" in text
    assert read_network_file(net) == TWO_BY_FOUR
    assert '"oneRing"' in (tmp_path / "system.json").read_text()


@pytest.mark.parametrize(("lines", "field"), [
    (["topology: [ Ring, Switch ]", "npus_count: [ 2, 4 ]", "bandwidth: [ 1, 2 ]",
      "latency: [ 1, 2 ]"], "topology"),
    (["topology: [ Ring, Ring ]", "npus_count: [ 2, 4 ]", "bandwidth: [ 1 ]",
      "latency: [ 1, 2 ]"], "bandwidth"),
    (["topology: [ Ring, Ring, Ring ]", "npus_count: [ 2, 2, 2 ]", "bandwidth: [ 1, 1, 1 ]",
      "latency: [ 1, 1, 1 ]"], "topology"),
    (["topology: [ Ring, Ring ]", "npus_count: [ 2, 3 ]", "bandwidth: [ 1, 1 ]",
      "latency: [ 1, x ]"], "network fields"),
])
def test_a_file_outside_the_model_is_refused_naming_the_field(tmp_path: Path, lines: list[str],
                                                               field: str) -> None:
    path = tmp_path / NETWORK_FILE
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        read_network_file(path)
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("group", [None, (0, 2, 4, 6), (1, 2), (7, 0, 5)])
@pytest.mark.parametrize("ctype", [AR, AG, RS])
def test_against_binary(astra_bin: str, group: tuple[int, ...] | None, ctype: int) -> None:
    from pt2chakra.astra.binary import run_collective
    real = run_collective(astra_bin, ctype, SIZE, TWO_BY_FOUR, ONE, group)
    model = collective_rank_ns(ctype, SIZE, 8 if group is None else len(group), TWO_BY_FOUR,
                               ONE, group)
    assert all(abs(model[r] - real[r]) <= MAX_ERROR * real[r] for r in model), (model, real)


two_tiers = st.builds(
    lambda topo, hosts, per_host, bw, lat, bw1, lat1: AstraNetwork(
        topo, hosts * per_host, bw, lat, hosts=HostTier(per_host, bw1, lat1)),
    st.sampled_from(["Ring", "Switch", "FullyConnected"]), st.integers(2, 6), st.integers(2, 6),
    st.floats(0.01, 400.0), st.floats(0.0, 1e5), st.floats(0.01, 400.0), st.floats(0.0, 1e5))


@settings(max_examples=60, deadline=None)
@given(network=two_tiers, ctype=st.sampled_from([AR, AG, RS]), size=st.integers(1 << 10, 1 << 26))
def test_a_whole_machine_collective_runs_at_the_uplinks_whatever_the_links(
        network: AstraNetwork, ctype: int, size: int) -> None:
    """Under oneRing the links within a host never pace the whole ring."""
    flat = AstraNetwork(network.topology, network.npus, network.bandwidth_gbps,
                        network.latency_ns)
    assert collective_ns(ctype, size, network.npus, network, ONE) == \
        collective_ns(ctype, size, network.npus, flat, ONE)


@settings(max_examples=40, deadline=None)
@given(network=two_tiers)
def test_any_two_tier_network_reads_back_as_written(network: AstraNetwork) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path, _, _ = write_astra_configs(folder, network, ONE)
        assert read_network_file(path) == network

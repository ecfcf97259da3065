"""``simulate --consumer astra-sim``: what ASTRA-sim will print for an export,
without it (the consumer model of ``consumer.py`` under the network ASTRA-sim
is given)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pt2chakra.astra.collective_time import AstraNetwork
from pt2chakra.astra.consumer import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_LATENCY_NS,
    DEFAULT_TOPOLOGY,
    ConsumerReport,
    consume_loaded,
    load_for_consumer,
)
from pt2chakra.chakra.ranks import open_rank_set
from pt2chakra.errors import InputError
from pt2chakra.simulation import ReplaySettings, refuse_unsound_set


class AstraSimOptions(ReplaySettings, frozen=True, kw_only=True):
    """``simulate --consumer astra-sim``: the ASTRA-sim network replayed
    (defaults: the project's reference configuration) and the what-ifs it
    supports: the settings every replay takes (``ReplaySettings``: network,
    what-if knobs, views, alignment, ``force``) and ASTRA-sim's own. Those of
    the shared settings that ASTRA-sim has no notion of are refused, not
    ignored."""

    topology: str | None = None
    congestion_aware: bool = False


def _refuse_our_replay_options(options: AstraSimOptions) -> None:
    """What only our replay has: ASTRA-sim starts every rank at 0, runs one
    communication node at a time and draws no timeline here."""
    unsupported = {"--comm-streams": list(options.comm_streams) != [0],
                   "--timeline": options.timeline is not None,
                   "--plot": options.plot is not None,
                   "--align": options.align != "auto",
                   "--no-infer-waits": not options.infer_waits}
    for flag, given in unsupported.items():
        if given:
            raise InputError(flag, "applies to our own replay, not to --consumer astra-sim")


def simulate_astra_sim(paths: Sequence[str | os.PathLike[str]],
                       options: AstraSimOptions | None = None) -> ConsumerReport:
    """What ASTRA-sim will print for these ``.et`` files (one per NPU)."""
    options = options or AstraSimOptions()
    names = [os.fspath(p) for p in paths]
    _refuse_our_replay_options(options)
    options.check_network_and_scales()
    ranks = open_rank_set(names, options.force)
    latency_ns = DEFAULT_LATENCY_NS if options.latency_us is None else options.latency_us * 1000
    try:
        network = AstraNetwork(options.topology or DEFAULT_TOPOLOGY, len(names),
                               options.bandwidth_gbps or DEFAULT_BANDWIDTH_GBPS, latency_ns,
                               congestion_aware=options.congestion_aware)
    except ValueError as exc:
        raise InputError("--consumer astra-sim", str(exc)) from exc
    ordered, graphs = load_for_consumer(ranks)
    refuse_unsound_set(ordered, graphs, options.force, ranks.ranks)
    return consume_loaded(ordered, graphs, network, compute_scale=options.compute_scale,
                          cpu_scale=options.cpu_scale, bandwidth_scale=options.bandwidth_scale)

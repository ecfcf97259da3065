#!/usr/bin/env python
"""Model vs real ASTRA-sim for one collective over a grid (for the docs).

    .venv/bin/python scripts/astra_collective_grid.py /work/astra/bin/AstraSim_Analytical_Congestion_Unaware
        [--aware] [--full]

Prints one line per point (topology, NPUs, bandwidth, latency, system variant, group,
collective, bytes, model ns, ASTRA-sim ns of the last member to finish, error %) and the worst error at the end.
``--aware`` models the congestion-aware backend and runs its sibling binary; points
the model refuses (ValueError) are listed as such.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

from pt2chakra.astra.binary import run_collective, run_send
from pt2chakra.astra.collective_time import (
    AstraNetwork,
    AstraSystem,
    collective_rank_ns,
    send_ns,
)
from pt2chakra.chakra.records import CollectiveType

TYPES = (CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER,
         CollectiveType.REDUCE_SCATTER, CollectiveType.ALL_TO_ALL)
SIZES = (1, 100, 103, 192, 4097, 24576, 1576964, 16777216, 268435456)
QUICK_SIZES = (1, 103, 24576, 1576964, 16777216)
NPUS = (2, 3, 5, 8, 16)
LINKS = ((50.0, 500.0), (150.0, 0.0), (12.5, 2000.0))
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
SYSTEMS = {
    "default": AstraSystem(),
    "splits7-ep37-mem50-baseline": AstraSystem(splits=7, endpoint_delay_ns=37,
                                               local_mem_bw_gbps=50.0,
                                               collective_optimization="baseline"),
    "splits1-ep1-FIFO": AstraSystem(splits=1, endpoint_delay_ns=1, scheduling_policy="FIFO"),
}
GROUPS = ((0, 1), (0, 2, 5, 6), (7, 1, 4), (3, 2, 1, 0), (0, 1, 2, 3, 4, 5, 6, 7))
"""Communicator groups on a 16-NPU network, in comm-group-file order."""


@dataclass(frozen=True, slots=True)
class Point:
    network: AstraNetwork
    system_name: str
    ranks: tuple[int, ...] | None
    comm_type: int
    size: int


def grid(full: bool) -> Iterator[Point]:
    sizes = SIZES if full else QUICK_SIZES
    for topo, npus, (bw, lat), ctype, size in itertools.product(
            TOPOLOGIES, NPUS, LINKS, TYPES, sizes):
        if ctype == CollectiveType.ALL_GATHER and size < 4:
            continue  # ASTRA-sim's chunk would be 0 B: it never finishes
        yield Point(AstraNetwork(topo, npus, bw, lat), "default", None, int(ctype), size)
    for name, topo, ctype, size in itertools.product(
            list(SYSTEMS)[1:], TOPOLOGIES, TYPES, sizes):
        if ctype == CollectiveType.ALL_GATHER and size < 7:
            continue
        yield Point(AstraNetwork(topo, 8, 50.0, 500.0), name, None, int(ctype), size)
    for group, topo, ctype, size in itertools.product(GROUPS, TOPOLOGIES, TYPES, sizes):
        if ctype == CollectiveType.ALL_GATHER and size < 4:
            continue
        yield Point(AstraNetwork(topo, 16, 50.0, 500.0), "default", group, int(ctype), size)


def check(binary: str, point: Point) -> tuple[int, int, bool]:
    """(model, ASTRA-sim) ns of the last member to finish, and whether every member's
    own finish time matched."""
    system = SYSTEMS[point.system_name]
    group_size = point.network.npus if point.ranks is None else len(point.ranks)
    model = collective_rank_ns(point.comm_type, point.size, group_size, point.network,
                               system, point.ranks)
    real = run_collective(binary, point.comm_type, point.size, point.network, system,
                          point.ranks)
    every_rank = all(model[r] == real[r] for r in model)
    return max(model.values()), max(real[r] for r in model), every_rank


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary", help="AstraSim_Analytical_Congestion_Unaware")
    parser.add_argument("--aware", action="store_true", help="run the congestion-aware sibling")
    parser.add_argument("--full", action="store_true", help="all sizes up to 256 MiB")
    args = parser.parse_args()
    binary = args.binary
    worst = (0.0, "")
    count = exact = failures = refused = 0
    began = time.monotonic()
    print("topology npus GB/s lat_ns system group collective bytes model_ns astra_ns err%")
    for point in grid(args.full):
        try:
            point = replace(point, network=replace(point.network, congestion_aware=args.aware))
            model, real, every_rank = check(binary, point)
        except ValueError as exc:
            refused += 1
            print(f"{point}: not modelled: {exc}")
            continue
        except RuntimeError as exc:
            failures += 1
            print(f"{point}: ASTRA-sim failed: {str(exc).splitlines()[-1][-160:]}")
            continue
        err = 100.0 * (model - real) / real
        net = point.network
        group = "all" if point.ranks is None else "-".join(map(str, point.ranks))
        line = (f"{net.topology} {net.npus} {net.bandwidth_gbps:g} {net.latency_ns:g} "
                f"{point.system_name} {group} {CollectiveType(point.comm_type).name} "
                f"{point.size} {model} {real} {err:+.4f}")
        print(line, flush=True)
        count += 1
        exact += every_rank
        if abs(err) >= abs(worst[0]):
            worst = (err, line)
    for topo, (src, dst), size in itertools.product(TOPOLOGIES, ((0, 1), (1, 5), (6, 1)),
                                                    (1, 4097, 16777216)):
        net = AstraNetwork(topo, 8, 50.0, 500.0, congestion_aware=args.aware)
        try:
            real_p2p = run_send(binary, size, src, dst, net, AstraSystem())
        except RuntimeError as exc:
            print(f"send {topo} {src}->{dst} {size} B: ASTRA-sim failed: "
                  f"{str(exc).splitlines()[-1][-120:]}")
            continue
        model_p2p = send_ns(size, src, dst, net)
        ok = real_p2p[src] == real_p2p[dst] == model_p2p
        print(f"send {topo} {src}->{dst} {size} B: model {model_p2p} astra "
              f"{real_p2p[src]}/{real_p2p[dst]} {'exact' if ok else 'DIFFERS'}")
    print(f"# {count} collectives, {exact} exact on every rank, {refused} refused by the model, {failures} failed runs, worst error {worst[0]:+.4f} % "
          f"({time.monotonic() - began:.0f} s)\n# worst: {worst[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

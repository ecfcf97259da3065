"""``pt2chakra simulate``: CLI wiring over :func:`pt2chakra.simulation.api.simulate`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from pt2chakra.simulation.api import SimulationOptions

EPILOG = """examples:
  pt2chakra simulate rank0.et
  pt2chakra simulate rank*.et --json
  pt2chakra simulate rank*.et --timeline sim.json --plot sim.png
  pt2chakra simulate rank*.et --compute-scale 0.5 1 2 --bandwidth-scale 1 2
  pt2chakra simulate rank*.et --bandwidth 100 --latency 5 --algorithm ring --comm-streams 1 2
  pt2chakra -v simulate rank0.et      (one log line per issued / completed node)
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``simulate`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("simulate", parents=[common], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="replay .et files and report step time",
                       description="Event-driven replay of one or more ranks' Chakra traces: "
                       "predicted vs measured step time, per-lane busy/idle, critical path, "
                       "what-if settings, timeline.")
    p.add_argument("traces", nargs="+", help=".et files (one per rank)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--timeline", metavar="OUT.json",
                   help="write simulated + measured schedule as Chrome/Perfetto trace JSON")
    p.add_argument("--plot", metavar="OUT.png",
                   help="draw the per-lane timeline with the critical path (.png/.svg/.pdf)")
    add_model_args(p)
    p.add_argument("--no-lanes", action="store_true", help="leave per-lane lines out of the text")
    p.set_defaults(func=_cmd_simulate)


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The replay's settings and what-if knobs (``simulate`` and ``report``)."""
    p.add_argument("--compute-scale", type=float, nargs="+", default=[1.0], metavar="X",
                   help="what-if: scale GPU kernel durations (several values: one row each)")
    p.add_argument("--cpu-scale", type=float, nargs="+", default=[1.0], metavar="X",
                   help="what-if: scale CPU op durations and CPU gaps")
    p.add_argument("--bandwidth-scale", type=float, nargs="+", default=[1.0], metavar="X",
                   help="what-if: scale network bandwidth (collective time / X without a model)")
    p.add_argument("--comm-streams", type=int, nargs="+", default=[0], metavar="N",
                   help="what-if: spread collectives round-robin over N streams (0: as recorded)")
    p.add_argument("--bandwidth", type=float, metavar="GBps",
                   help="network model: link bandwidth in GB/s (needs --latency)")
    p.add_argument("--latency", type=float, metavar="US",
                   help="network model: per-step latency in microseconds (needs --bandwidth)")
    p.add_argument("--algorithm", choices=["ring", "tree"], default="ring",
                   help="network model cost factors (default ring)")
    p.add_argument("--align", choices=["auto", "recorded", "together"], default="auto",
                   help="rank start offsets: recorded (shared clock), together, or auto "
                   "(recorded when the ranks' steps overlap on one clock)")
    p.add_argument("--no-infer-waits", action="store_true",
                   help="do not infer cross-stream waits from timing")


def options_from(args: argparse.Namespace) -> SimulationOptions:
    """``SimulationOptions`` from the arguments ``add_model_args`` added
    (plus ``--timeline``/``--plot`` where the command has them)."""
    from pt2chakra.simulation.api import SimulationOptions

    return SimulationOptions(
        bandwidth_gbps=args.bandwidth, latency_us=args.latency, algorithm=args.algorithm,
        align=args.align, compute_scale=args.compute_scale, cpu_scale=args.cpu_scale,
        bandwidth_scale=args.bandwidth_scale, comm_streams=args.comm_streams,
        infer_waits=not args.no_infer_waits, timeline=getattr(args, "timeline", None),
        plot=getattr(args, "plot", None))


def _cmd_simulate(args: argparse.Namespace) -> int:
    from pt2chakra.simulation.api import simulate

    result = simulate(args.traces, options_from(args))
    if args.json:
        sys.stdout.write(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode()
                         + "\n")
    elif not args.quiet:
        from pt2chakra.simulation.report import format_report

        print(format_report(result, lanes=not args.no_lanes))
    return 0

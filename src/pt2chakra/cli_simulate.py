"""``pt2chakra simulate``: CLI wiring for the simulator (see simulate.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

EPILOG = """examples:
  pt2chakra simulate rank0.et
  pt2chakra simulate rank*.et --json
  pt2chakra simulate rank*.et --timeline sim.json --plot sim.png
  pt2chakra simulate rank*.et --compute-scale 0.5 1 2 --bandwidth-scale 1 2
  pt2chakra simulate rank*.et --bandwidth 100 --latency 5 --algorithm ring --comm-streams 1 2
  pt2chakra -v simulate rank0.et      (one log line per issued / completed node)
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
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
    p.add_argument("--no-lanes", action="store_true", help="leave per-lane lines out of the text")
    p.set_defaults(func=_cmd_simulate)


def short_report(paths: Sequence[str]) -> str:
    """What ``convert --simulate`` prints."""
    from pt2chakra.simulate import simulate_files

    return simulate_files(list(paths)).summary()


def _cmd_simulate(args: argparse.Namespace) -> int:
    import msgspec
    import orjson

    from pt2chakra.atomic import refuse_overwriting_inputs
    from pt2chakra.model import InputError
    from pt2chakra.sim_report import format_report
    from pt2chakra.simulate import SimConfig, Simulator, load, order_by_rank, what_if

    if (args.bandwidth is None) != (args.latency is None):
        raise InputError("--bandwidth/--latency", "the network model needs both")
    if args.bandwidth is not None and args.bandwidth <= 0:
        raise InputError("--bandwidth", "must be positive")
    for name in ("compute_scale", "cpu_scale", "bandwidth_scale"):
        if any(v <= 0 for v in getattr(args, name)):
            raise InputError(f"--{name.replace('_', '-')}", "scales must be positive")
    if any(n < 0 for n in args.comm_streams):
        raise InputError("--comm-streams", "must be 0 (as recorded) or more")
    # Output paths checked before the (possibly long) replay.
    if args.plot:
        from pt2chakra.sim_timeline import check_plot_path

        check_plot_path(args.plot)
    for out in (args.timeline, args.plot):
        if out:
            refuse_overwriting_inputs(out, list(args.traces))
    if args.timeline and args.plot and \
            os.path.realpath(args.timeline) == os.path.realpath(args.plot):
        raise InputError(args.plot, "--timeline and --plot name the same file")
    paths, graphs = order_by_rank(args.traces, load(args.traces))
    sim = Simulator(graphs, paths, infer_waits=not args.no_infer_waits)
    base = SimConfig(bandwidth_gbps=args.bandwidth, latency_us=args.latency,
                     algorithm=args.algorithm, align=args.align)
    result, schedule = sim.run(base)
    knobs = (args.compute_scale, args.cpu_scale, args.bandwidth_scale, args.comm_streams)
    if any(list(k) != [d] for k, d in zip(knobs, (1.0, 1.0, 1.0, 0))):
        rows = what_if(sim, base, *knobs, baseline=result.predicted_step_us)
        result = msgspec.structs.replace(result, what_if=rows)
    if args.timeline:
        from pt2chakra.sim_timeline import write_chrome_trace

        write_chrome_trace(schedule, args.timeline)
    if args.plot:
        from pt2chakra.sim_timeline import write_plot

        write_plot(schedule, args.plot)
    if args.json:
        sys.stdout.write(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode()
                         + "\n")
    elif not args.quiet:
        print(format_report(result, lanes=not args.no_lanes))
    return 0

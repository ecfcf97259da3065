"""``pt2chakra simulate``: parsing and printing over the API: ``simulation.simulate_run``
(``--write-et`` included), ``scaleout.simulate_world_size`` (``--world-size``) and
``astra.simulate_astra_sim`` (``--consumer astra-sim``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pt2chakra.cli import options
from pt2chakra.cli.json_out import json_text, print_json

if TYPE_CHECKING:
    from pt2chakra.simulation import CollectiveRow, SimulationOptions, SimulationRun

EPILOG = """examples:
  pt2chakra simulate rank0.et
  pt2chakra simulate rank*.et --json
  pt2chakra simulate rank*.et --timeline sim.json --plot sim.png
  pt2chakra simulate rank*.et --compute-scale 0.5 1 2 --bandwidth-scale 1 2
  pt2chakra simulate rank*.et --bandwidth 100 --latency 5 --algorithm ring --comm-streams 1 2
  pt2chakra simulate rank*.et --world-size 1024     (the step of the job scaled out to 1024 ranks)
  pt2chakra -v simulate rank0.et      (one log line per issued / completed node)
  pt2chakra simulate --consumer astra-sim job.*.et    (what ASTRA-sim will print for an export)
  pt2chakra simulate --consumer astra-sim job.*.et --topology FullyConnected --bandwidth 150
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``simulate`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("simulate", parents=[common], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
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
    p.add_argument("--consumer", choices=options.CONSUMERS, default=options.OWN_CONSUMER,
                   help="whose rules to replay by: ours (default), or ASTRA-sim's (one compute "
                   "and one communication node at a time per NPU, all ranks at 0, its "
                   "network model): what ASTRA-sim will print for an astra-sim export")
    p.add_argument("--topology", choices=["Ring", "FullyConnected", "Switch"],
                   help="with --consumer astra-sim: the network topology (default Ring; "
                   "bandwidth 50 GB/s and latency 0.5 us unless given)")
    p.add_argument("--congestion-aware", action="store_true",
                   help="with --consumer astra-sim: ASTRA-sim's congestion-aware backend "
                   "(messages forwarded hop by hop)")
    p.add_argument("--write-et", metavar="PREFIX", type=options.output_prefix,
                   help="write the replay (of the one what-if setting given) as PREFIX.<rank>.et, "
                   "to compare with a measured run: pt2chakra diff")
    p.add_argument("--world-size", type=options.npus, metavar="M",
                   help="predict the step of the data-parallel job scaled out (or in) to M ranks "
                   "from every recorded rank's file, without writing M files (weak scaling; "
                   "collectives timed at M by --bandwidth/--latency, else by the model fitted "
                   "to the recording; see docs/SCALE_OUT.md)")
    options.add_tensor_parallel(p)
    options.add_host_sharing(p)
    options.add_force(p, "validate finds errors in the traces or some nodes never run")
    p.set_defaults(func=_cmd_simulate)


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The replay's settings and what-if knobs (``simulate`` and ``report``)."""
    p.add_argument("--compute-scale", type=options.scale, nargs="+", default=[1.0], metavar="X",
                   help="what-if: scale GPU kernel durations (several values: one row each)")
    p.add_argument("--cpu-scale", type=options.scale, nargs="+", default=[1.0], metavar="X",
                   help="what-if: scale CPU op durations and CPU gaps")
    p.add_argument("--cpu-scale-ops", metavar="REGEX",
                   help="with --cpu-scale: scale only the CPU time inside ops whose name "
                        "matches (their callees and the gaps between them included), e.g. "
                        "the model's forward and backward but not the optimizer")
    p.add_argument("--bandwidth-scale", type=options.scale, nargs="+", default=[1.0], metavar="X",
                   help="what-if: scale network bandwidth (collective time / X without a model)")
    p.add_argument("--comm-streams", type=options.comm_streams, nargs="+", default=[0], metavar="N",
                   help="what-if: spread collectives round-robin over N streams (0: as recorded)")
    p.add_argument("--slow-rank", type=options.slow_rank, nargs="+", default=[],
                   metavar="RANK:cpu=F,link=G",
                   help="what-if: a straggler, its host's CPU time x F and/or its link G times "
                   "slower (every collective it joins waits for it); one row each")
    p.add_argument("--bandwidth", type=options.bandwidth, metavar="GBps",
                   help="network model: link bandwidth in GB/s (needs --latency)")
    p.add_argument("--latency", type=options.latency, metavar="US",
                   help="network model: per-step latency in microseconds (needs --bandwidth)")
    p.add_argument("--calibrate", action="store_true",
                   help="network model fitted to the recorded collectives, per backend "
                   "(fixed overhead + latency per step + bytes / bandwidth; --bandwidth/"
                   "--latency replace the fitted values); a rank's collectives then share "
                   "its link one at a time. --bandwidth-scale then moves only the "
                   "bandwidth-bound part")
    p.add_argument("--algorithm", choices=["ring", "tree"], default="ring",
                   help="network model cost factors (default ring)")
    p.add_argument("--align", choices=["auto", "recorded", "together"], default="auto",
                   help="rank start offsets: recorded (shared clock), together, or auto "
                   "(recorded when the ranks' steps overlap on one clock)")
    p.add_argument("--no-infer-waits", action="store_true",
                   help="do not infer cross-stream waits from timing")
    p.add_argument("--without-profiler", action="store_true",
                   help="predict the step without the profiler's own cost: a per-op figure "
                   "taken out of every recorded CPU op and the gaps before it (GPU work "
                   "unchanged), from --real-step, --profiler-overhead, a meta.json beside the "
                   "traces (pt2chakra collect writes it), or else estimated from the trace; "
                   "see docs/PROFILER_OVERHEAD.md")
    p.add_argument("--real-step", type=options.real_step, metavar="MS",
                   help="your step time without the profiler (ms, e.g. from the training log): "
                   "fit the figure so that the replay gives it (implies --without-profiler)")
    p.add_argument("--profiler-overhead", metavar="FIGURE",
                   help="the profiler's cost per recorded CPU op, e.g. 8.73us/op (printed by "
                   "a fit, or by pt2chakra microbench --profiler-overhead, on the kind of host "
                   "that recorded the trace: a GPU host's 32.95us/op is more than the bundled "
                   "CPU sample's ops take; implies --without-profiler)")


def options_from(args: argparse.Namespace) -> SimulationOptions:
    """``SimulationOptions`` from the arguments ``add_model_args`` added
    (plus ``--timeline``/``--plot``/``--write-et``/``--force`` where the
    command has them)."""
    from pt2chakra.simulation import SimulationOptions

    return SimulationOptions(
        bandwidth_gbps=args.bandwidth, latency_us=args.latency, algorithm=args.algorithm,
        align=args.align, compute_scale=args.compute_scale, cpu_scale=args.cpu_scale,
        cpu_scale_ops=args.cpu_scale_ops,
        bandwidth_scale=args.bandwidth_scale, comm_streams=args.comm_streams,
        slow_rank=args.slow_rank,
        infer_waits=not args.no_infer_waits, calibrate=args.calibrate,
        without_profiler=args.without_profiler, real_step_ms=args.real_step,
        profiler_overhead=args.profiler_overhead, timeline=getattr(args, "timeline", None),
        plot=getattr(args, "plot", None), write_et=getattr(args, "write_et", None),
        force=getattr(args, "force", False))


def _cmd_simulate(args: argparse.Namespace) -> int:
    if args.consumer == "astra-sim":
        return _cmd_consumer(args)
    for flag, given in (("--topology", args.topology is not None),
                        ("--congestion-aware", args.congestion_aware)):
        if given:
            from pt2chakra.errors import InputError

            raise InputError(flag, "applies to --consumer astra-sim only")
    if args.world_size is not None or args.tensor_parallel is not None:
        return _cmd_world_size(args)
    host_flag = options.hosts_given(args)
    if host_flag is not None:
        from pt2chakra.errors import InputError

        raise InputError(host_flag, "applies with --world-size (the recorded scale holds "
                         "its own hosts and links)")
    from pt2chakra.atomic import StagedOutputs
    from pt2chakra.simulation import simulate_run

    with StagedOutputs() as staged:  # timeline, plot and --write-et: together or not at all
        run = simulate_run(args.traces, options_from(args), staged)
        options.keep_until_exit(run)  # its million objects: not freed one by one before exit
        shown = _shown(args, run)  # made before the outputs are committed
        staged.commit()
    if run.written and not args.quiet:
        print(f"replay written: {', '.join(run.written)}", file=sys.stderr)
    sys.stdout.write(shown)
    return 0


def _shown(args: argparse.Namespace, run: SimulationRun) -> str:
    """What ``simulate`` prints: the JSON (``--json``), the text report, or
    nothing (``-q``)."""
    from pt2chakra.simulation import slow_rank_collectives

    slow = slow_rank_collectives(run, options_from(args)) if not args.quiet or args.json else []
    if args.json:
        from pt2chakra.simulation import result_json

        return json_text(result_json(run.result, _collectives(run), slow))
    if args.quiet:
        return ""
    from pt2chakra.simulation import format_text_report

    return format_text_report(run.result, lanes=not args.no_lanes,
                              collectives=_collectives(run), slow=slow) + "\n"


def _cmd_world_size(args: argparse.Namespace) -> int:
    """``--world-size M``: the distinct ranks of the M-rank job, replayed."""
    from pt2chakra.scaleout import simulate_world_size

    world_size, tensor_parallel = options.target_ranks(args)
    assert world_size is not None  # one of the two options routed here
    scaled = simulate_world_size(args.traces, world_size, options_from(args),
                                 hosts=options.host_sharing(args),
                                 tensor_parallel=tensor_parallel)
    run = scaled.run
    options.keep_until_exit(run)
    shown = scaled.breakdown()
    if args.json:
        from pt2chakra.simulation import result_json

        doc = result_json(run.result, _collectives(run))
        doc["scale_out"] = shown
        print_json(doc)
    elif not args.quiet:
        from pt2chakra.simulation import format_text_report

        print(format_text_report(run.result, lanes=not args.no_lanes,
                                 collectives=_collectives(run)))
        print(shown.describe())
    return 0


def _collectives(run: SimulationRun) -> list[CollectiveRow]:
    """The replay's collectives (their stragglers), for a multi-rank run."""
    if len(run.result.ranks) < 2:
        return []
    from pt2chakra.simulation import collective_rows

    return collective_rows(run.simulator, run.schedule)


def _cmd_consumer(args: argparse.Namespace) -> int:
    """``--consumer astra-sim``: ASTRA-sim's rules instead of ours."""
    from pt2chakra.astra import AstraSimOptions, simulate_astra_sim

    for flag, given in (("--calibrate", args.calibrate), ("--write-et", args.write_et is not None),
                        ("--cpu-scale-ops", args.cpu_scale_ops is not None),
                        ("--slow-rank", bool(args.slow_rank)),
                        ("--without-profiler", args.without_profiler),
                        ("--real-step", args.real_step is not None),
                        ("--profiler-overhead", args.profiler_overhead is not None)):
        if given:
            from pt2chakra.errors import InputError

            raise InputError(flag, "applies to our own replay, not to --consumer astra-sim")
    from pt2chakra.astra import format_consumer_report

    options = AstraSimOptions(
        topology=args.topology, bandwidth_gbps=args.bandwidth, latency_us=args.latency,
        congestion_aware=args.congestion_aware, force=args.force,
        compute_scale=args.compute_scale, cpu_scale=args.cpu_scale,
        bandwidth_scale=args.bandwidth_scale, comm_streams=args.comm_streams,
        timeline=args.timeline, plot=args.plot, align=args.align,
        infer_waits=not args.no_infer_waits)
    report = simulate_astra_sim(args.traces, options)
    if args.json:
        print_json(report.to_json())
    elif not args.quiet:
        print(format_consumer_report(report))
    return 0

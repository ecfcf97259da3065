"""Companion-tool subcommands (inspect, validate, jsonize, ...): CLI wiring.

Each command is a thin layer over a module function of the same job; bad
input raises ``InputError``, which ``pt2chakra.cli.main`` prints as one line
(exit 2). ``validate`` exits 1 when it finds errors.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable

from pt2chakra.astra import CHECK_TIMEOUT_S, CPU_MODES, DEFAULT_CPU_MODE, TOPOLOGIES
from pt2chakra.atomic import target_of
from pt2chakra.cli import options
from pt2chakra.cli.json_out import json_text, print_json
from pt2chakra.collect.profiler_cost import DEFAULT_CALLS, DEFAULT_REPEATS
from pt2chakra.errors import InputError, integer_in_text

EXIT_PROBLEMS = 1


def _os_errors_as_input_errors(func: Callable[[argparse.Namespace], int],
                               ) -> Callable[[argparse.Namespace], int]:
    """A missing output folder or a full disk is bad input too: one line, exit 2."""

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            target = exc.filename or getattr(args, "output", None) or "?"  # the file at fault
            target = target_of(os.fspath(target))
            raise InputError(str(target), f"cannot write: {exc.strerror or exc}") from exc

    return wrapper


def _cmd_inspect(args: argparse.Namespace) -> int:
    from pt2chakra.tools.inspect import inspect

    for path in args.input:
        report = inspect(path, top=args.top, compute_model=args.compute_model)
        if args.json:
            print_json(report.to_json())
        else:
            print(report.text())
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from pt2chakra.tools.validate import validate

    report = validate(args.input, consumer=args.consumer)
    if args.json:
        print_json(report.to_json())
    else:
        lines = report.lines()
        if args.quiet:
            lines = [line for line in lines[:-1] if ": error: " in line] + lines[-1:]
        print("\n".join(lines))
    return 0 if report.sound else EXIT_PROBLEMS


def _cmd_jsonize(args: argparse.Namespace) -> int:
    from pt2chakra.chakra.json_form import jsonize

    count = jsonize(args.input, args.output)
    if not args.quiet:
        print(f"{args.output}: {count} nodes")
    return 0


def _cmd_from_json(args: argparse.Namespace) -> int:
    from pt2chakra.chakra.json_form import from_json

    if args.consumer == "astra-sim":
        from pt2chakra.astra import convert_json

        written = convert_json(args.input, args.output, rank=args.rank)
        if not args.quiet:
            print("\n".join(written))
        return 0
    count = from_json(args.input, args.output)
    if not args.quiet:
        print(f"{args.output}: {count} nodes")
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from pt2chakra.tools.timeline import timeline

    stats = timeline(args.input, args.output, force=args.force)
    if not args.quiet:
        print(stats.summary())
    return 0


def _parse_range(text: str | None, what: str) -> tuple[int, int] | None:
    if text is None:
        return None
    low, colon, high = text.partition(":")
    first = integer_in_text(low) if low else 0
    last = integer_in_text(high) if high else 1 << 64
    if not colon or first is None or last is None:
        raise InputError(text, f"{what} must be LOW:HIGH (integers in ASCII decimal, either "
                         "side may be empty)")
    return first, last


def _cmd_graph(args: argparse.Namespace) -> int:
    from pt2chakra.tools.graph import Window, render_graph

    window = Window(ids=_parse_range(args.ids, "--ids"), time=_parse_range(args.time, "--time"),
                    around=args.around, hops=args.hops, max_nodes=args.max_nodes,
                    ctrl=args.ctrl)
    stats = render_graph(args.input, args.output, window)
    if not args.quiet:
        print(stats.summary())
    return 0


def _cmd_from_text(args: argparse.Namespace) -> int:
    from pt2chakra.tools.text_workload import from_text

    written = from_text(args.input, args.npus, args.output, passes=args.passes,
                        consumer=args.consumer)
    if not args.quiet:
        print(f"{len(written)} files: {written[0]} .. {written[-1]}")
    return 0


def _cmd_microbench(args: argparse.Namespace) -> int:
    if args.profiler_overhead:
        return _cmd_profiler_overhead(args)
    for flag, value in (("--size", args.size), ("--npus", args.npus), ("-o", args.output)):
        if value is None:
            raise InputError(f"microbench {flag}", "required (generated traces need --size, "
                             "--npus and -o; or give --profiler-overhead)")
    from pt2chakra.tools.microbench import microbench

    written = microbench(args.collective, args.size, args.npus, args.output,
                         steps=args.steps, compute_micros=args.compute)
    if not args.quiet:
        print(f"{len(written)} files: {written[0]} .. {written[-1]}")
    return 0


def _cmd_profiler_overhead(args: argparse.Namespace) -> int:
    """``microbench --profiler-overhead``: the figure for ``simulate --profiler-overhead``."""
    from pt2chakra.collect.profiler_cost import measure

    try:
        import torch  # noqa: F401
    except ImportError:
        print("microbench --profiler-overhead: skipped: needs torch (pip install "
              "'pt2chakra[collect]')", file=sys.stderr)
        return 0
    cost = measure(args.calls, args.repeats)
    if args.output:
        from pt2chakra.atomic import atomic_output

        with atomic_output(args.output) as out:
            out.write(json_text(cost.to_json()).encode())
    if args.json:
        print_json(cost.to_json())
    elif not args.quiet:
        print("\n".join(cost.lines()))
    return 0


def _cmd_astra_sim(args: argparse.Namespace) -> int:
    from pt2chakra.astra import (
        BINARY_ENV,
        NetworkChoice,
        check_job,
        check_job_outputs,
        format_job_check,
        write_job,
    )

    host_flag = options.hosts_given(args)
    if args.check is not None:
        for flag, given in (("input", args.input), ("-o", args.output),
                            ("--topology", args.topology), ("--bandwidth", args.bandwidth),
                            ("--latency", args.latency), ("--world-size", args.world_size),
                            ("--tensor-parallel", args.tensor_parallel),
                            ("--slow-rank", args.slow_rank), (host_flag or "", host_flag)):
            if given:
                raise InputError(flag, "not with --check (it runs the job as written)")
        binary = args.bin or os.environ.get(BINARY_ENV) or None
        if binary is not None and not os.access(binary, os.X_OK):
            raise InputError(binary, "not an executable ASTRA-sim binary (--bin / ASTRA_SIM_BIN)")
        print(format_job_check(check_job(args.check, binary, timeout_s=args.timeout)))
        return 0
    if not args.input or args.output is None:
        raise InputError("astra-sim", "needs the .et files (one per rank) and -o DIR/job, "
                         "or --check DIR/job")
    choice = NetworkChoice(args.topology, args.bandwidth, args.latency)
    world_size, tensor_parallel = options.target_ranks(args)
    if world_size is not None and args.slow_rank is not None:
        raise InputError("--slow-rank", "applies at the recorded scale (a scaled-out job's "
                         "clones are not one rank each)")
    if world_size is not None:
        from pt2chakra.scaleout import extrapolated_job

        check_job_outputs(args.input, args.output)  # the job is written from scratch copies
        job = extrapolated_job(args.input, world_size, args.output,
                               lambda files, predicted: write_job(
                                   files, args.output, cpu=args.cpu, choice=choice,
                                   force=args.force, predicted_step_us=predicted),
                               hosts=options.host_sharing(args), force=args.force,
                               tensor_parallel=tensor_parallel)
    else:
        if host_flag is not None:
            raise InputError(host_flag, "applies with --world-size (the recorded scale holds "
                             "its own hosts and links)")
        job = write_job(args.input, args.output, cpu=args.cpu, choice=choice, force=args.force,
                        slow=args.slow_rank)
    if not args.quiet:
        print("\n".join(job.written))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the companion tools' subcommands to the ``pt2chakra`` parser (in
    this order: the order ``--help`` lists them)."""
    for add in (_add_inspect, _add_validate, _add_jsonize, _add_from_json, _add_timeline,
                _add_graph, _add_from_text, _add_microbench, _add_astra_sim):
        add(sub, common)


def _add_inspect(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``inspect IN.et...``: a summary per file."""
    p = sub.add_parser("inspect", parents=[common],
                       description="Metadata, node counts, collectives, dependencies, lanes, "
                       "time span and top ops of Chakra .et files.")
    p.add_argument("input", nargs="+", help=".et file(s) (plain or gzip)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--top", type=options.count, default=10, help="top ops to list (default 10)")
    p.add_argument("--compute-model", action="store_true",
                   help="also fit each kind of op's time on the work its input shapes give "
                   "(matrix multiplies by FLOPs, other ops by elements): fixed cost, rate, "
                   "fit quality")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_inspect))


def _add_validate(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``validate IN.et...``: soundness checks, exit 1 on errors."""
    p = sub.add_parser("validate", parents=[common],
                       description="Dangling deps, cycles, duplicate ids, attribute types, comm "
                       "attributes and cross-rank collective alignment. Exit 0 when sound "
                       "(warnings allowed), 1 when errors are found, 2 on unreadable input.")
    p.add_argument("input", nargs="+", help=".et file(s); several = one per rank")
    p.add_argument("--json", action="store_true", help="print JSON")
    options.add_consumer(p, "also check what this consumer needs")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_validate))


def _add_jsonize(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``jsonize IN.et -o OUT.json``."""
    p = sub.add_parser("jsonize", parents=[common],
                       description="Write metadata + nodes as one valid JSON document, "
                       "streaming (one node per line).")
    p.add_argument("input", help=".et file")
    p.add_argument("-o", "--output", required=True, help="output .json")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_jsonize))


def _add_from_json(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``from-json IN.json -o OUT``: back to .et, or per rank for ASTRA-sim."""
    p = sub.add_parser("from-json", parents=[common],
                       description="Inverse of jsonize; byte-identical for pt2chakra's files.")
    p.add_argument("input", help="JSON written by jsonize")
    p.add_argument("-o", "--output", required=True,
                   help="output .et (with --consumer astra-sim: the <prefix>)")
    options.add_consumer(p, "write <prefix>.<rank>.et for this consumer")
    p.add_argument("--rank", type=options.rank,
                   help="rank for --consumer astra-sim (default: metadata or 0)")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_from_json))


def _add_timeline(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``timeline IN.et... -o OUT.json``: a Chrome/Perfetto trace."""
    p = sub.add_parser("timeline", parents=[common],
                       description="Recorded start/duration of every node; lanes by rank "
                       "(process), thread and stream.")
    p.add_argument("input", nargs="+", help=".et file(s); several = one per rank")
    p.add_argument("-o", "--output", required=True, help="output .json")
    options.add_force(p, "the files cannot be one job (a rank twice, no rank, a copy)")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_timeline))


def _add_graph(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``graph IN.et -o OUT``: a window of the dependency graph."""
    p = sub.add_parser("graph", parents=[common],
                       description="Write .dot, .graphml or .svg (svg needs graphviz dot).")
    p.add_argument("input", help=".et file")
    p.add_argument("-o", "--output", required=True, help="OUT.dot | OUT.graphml | OUT.svg")
    p.add_argument("--ids", metavar="LOW:HIGH", help="node id range (inclusive)")
    p.add_argument("--time", metavar="T0:T1", help="nodes starting in [T0, T1] (us)")
    p.add_argument("--around", type=options.int64, metavar="ID", help="centre node")
    p.add_argument("--hops", type=options.count, default=2, help="hops around --around (default 2)")
    p.add_argument("--max-nodes", type=options.positive_count, default=2000,
                   help="refuse windows larger than this (default 2000)")
    p.add_argument("--ctrl", action="store_true", help="also draw ctrl_deps (dashed)")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_graph))


def _add_from_text(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``from-text IN.txt --npus N -o PREFIX``: an ASTRA-sim text workload."""
    p = sub.add_parser("from-text", parents=[common],
                       description="DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, "
                       "HYBRID_DLRM[_ENHANCED], MICRO workloads -> <prefix>.<npu>.et.")
    p.add_argument("input", help="workload .txt")
    p.add_argument("--npus", type=options.npus, required=True, help="number of NPUs (files)")
    p.add_argument("-o", "--output", required=True, type=options.output_prefix,
                   help="output prefix")
    p.add_argument("--passes", type=options.passes, default=1, help="training passes (default 1)")
    options.add_consumer(p, "accepted for symmetry: from-text output already suits ASTRA-sim")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_from_text))


def _add_microbench(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``microbench --size B --npus N -o PREFIX``: generated traces."""
    p = sub.add_parser("microbench", parents=[common],
                       description="One collective per NPU (or STEPS compute+collective pairs) "
                       "-> <prefix>.<npu>.et, for simulator smoke tests.")
    p.add_argument("--collective", default="ALL_REDUCE",
                   help="collective type name, e.g. ALL_REDUCE, ALL_GATHER, ALL_TO_ALL")
    p.add_argument("--size", type=options.non_negative_int64, help="bytes per collective")
    p.add_argument("--npus", type=options.npus, help="number of NPUs (files)")
    p.add_argument("--steps", type=options.steps, default=1, help="chain length (default 1)")
    p.add_argument("--compute", type=options.non_negative_int64, default=0,
                   help="us of compute before each collective (0: none)")
    p.add_argument("-o", "--output", type=options.output_prefix,
                   help="output prefix (with --profiler-overhead: a JSON file "
                   "for the figure)")
    p.add_argument("--profiler-overhead", action="store_true",
                   help="instead: time ops of several kinds with and without the profiler "
                   "(ExecutionTraceObserver + Kineto, as collect records; needs torch) and print "
                   "the cost per recorded op, the figure simulate --profiler-overhead takes")
    p.add_argument("--calls", type=options.positive_count, default=DEFAULT_CALLS,
                   help=f"with --profiler-overhead: calls per kind of op (default {DEFAULT_CALLS}; "
                   "the training step runs 1/20 of them)")
    p.add_argument("--repeats", type=options.positive_count, default=DEFAULT_REPEATS,
                   help="with --profiler-overhead: timed loops per kind, the fastest kept "
                   f"(default {DEFAULT_REPEATS})")
    p.add_argument("--json", action="store_true", help="with --profiler-overhead: print JSON")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_microbench))


def _add_astra_sim(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``astra-sim IN.et... -o DIR/job``: the ASTRA-sim job; ``--check DIR/job`` runs it."""
    p = sub.add_parser("astra-sim", parents=[common],
                       description="Writes DIR/job.<rank>.et (no METADATA nodes, process groups "
                       "in the metadata), DIR/job.comm_groups.json, and network.yml (fitted to "
                       "the recorded collectives), system.json, memory.json and run.sh in DIR. "
                       "--check DIR/job runs the job beside the consumer model and the "
                       "measured step.")
    p.add_argument("input", nargs="*", help=".et file(s), one per rank")
    p.add_argument("-o", "--output", type=options.output_prefix,
                   help="output prefix DIR/job (DIR is created)")
    p.add_argument("--cpu", choices=list(CPU_MODES), default=DEFAULT_CPU_MODE,
                   help="serial (default): one serial compute chain per rank, CPU time as gaps; "
                   "drop: gaps per stream; keep: CPU nodes kept; drop-no-gaps: CPU time lost")
    p.add_argument("--topology", choices=list(TOPOLOGIES),
                   help="network.yml topology (default: Ring, the fit's ring algorithm)")
    p.add_argument("--bandwidth", type=options.bandwidth, metavar="GBps",
                   help="network.yml bandwidth in ASTRA-sim's GB/s (2^30 B) instead of the fit")
    p.add_argument("--latency", type=options.latency, metavar="US",
                   help="network.yml latency per message hop in us instead of the fit")
    p.add_argument("--world-size", type=options.npus, metavar="M",
                   help="the job of the data-parallel recording scaled out to M ranks "
                   "(pt2chakra extrapolate, then this command; docs/SCALE_OUT.md)")
    options.add_tensor_parallel(p)
    options.add_host_sharing(p)
    p.add_argument("--slow-rank", type=options.slow_rank, metavar="RANK:cpu=F,link=G",
                   help="the job with one rank slowed, as simulate --slow-rank replays it: "
                   "its CPU time x F, every collective it joins G times longer (at the "
                   "recorded scale)")
    p.add_argument("--check", metavar="DIR/job",
                   help="run a written job: ASTRA-sim's finish per rank (with --bin or "
                   "$ASTRA_SIM_BIN) beside the consumer model and the measured step")
    p.add_argument("--bin", metavar="PATH",
                   help="with --check: the ASTRA-sim binary (default: $ASTRA_SIM_BIN)")
    p.add_argument("--timeout", type=options.seconds, default=CHECK_TIMEOUT_S, metavar="S",
                   help=f"with --check: stop the binary after S seconds (default "
                   f"{CHECK_TIMEOUT_S:g})")
    options.add_force(p, "validate finds errors in the inputs")
    p.set_defaults(func=_os_errors_as_input_errors(_cmd_astra_sim))

"""``convert`` and ``link``: CLI wiring over :mod:`pt2chakra.conversion.api`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pt2chakra.astra import CPU_MODES, DEFAULT_CPU_MODE
from pt2chakra.cli import options
from pt2chakra.errors import InputError

if TYPE_CHECKING:
    from pt2chakra.astra import AstraSimProfile
    from pt2chakra.conversion import StepChoice

# Exit status when some ranks failed (as for one bad input: see cli.EXIT_BAD_INPUT).
EXIT_RANK_FAILED = 2

EPILOG_CONVERT = """examples:
  pt2chakra convert --host-trace rank0.host_et.json.gz --device-trace rank0.kineto.json.gz -o rank0.et
  pt2chakra convert --host-trace host_et.json -o host_only.et --report report.json
  pt2chakra convert --device-trace kineto.json.gz -o kineto_only.et   (no host ET)
  pt2chakra convert --device-trace kineto.json.gz --step median -o typical.et
  pt2chakra convert --host-trace cut_host_et.json --repair -o recovered.et
  pt2chakra convert --ranks 0-7 --host-trace 'd/rank{rank}.host_et.json.gz' \
      --device-trace 'd/rank{rank}.kineto.json.gz' -o 'out/job.{rank}.et' --jobs 2
  pt2chakra convert --ranks 0-7 --device-trace 'd/rank{rank}.kineto.json.gz' \
      -o 'out/k.{rank}.et' --jobs 2   (Kineto alone, one trace per rank)

with --ranks, {rank} in the paths is each rank's number; every rank is converted
as if alone (same bytes); a failing rank gets one line on stderr and the others'
outputs are still written (exit 2 when any rank failed). Ranks that disagree
about their collectives (a group's collective missing on one rank, or of
another type or size) make a job that validate and simulate refuse and that
ASTRA-sim hangs on: one line names the group and the first collective that
differs, the outputs are removed, exit 2 (--allow-mismatch keeps them).
"""

EPILOG_LINK = """examples:
  pt2chakra link --host-trace host_et.json.gz --device-trace kineto.json.gz -o linked.json
"""


def _add_trace_args(p: argparse.ArgumentParser, host_required: bool = True) -> None:
    p.add_argument("--host-trace", required=host_required, metavar="H",
                   help="PyTorch host execution trace (.json or .json.gz)"
                   + ("" if host_required else "; omit to convert the Kineto trace alone"))
    p.add_argument("--device-trace", metavar="K",
                   help="Kineto trace of the same step (.json or .json.gz); omit for host-only")


def _consumer_output(args: argparse.Namespace) -> AstraSimProfile | None:
    """``--consumer astra-sim --cpu MODE``: the export the conversion is written as.
    The export (and the serial chain, the collective model and the set checks
    it imports) loads only then: a plain ``convert`` does not pay for it."""
    if args.consumer != "astra-sim":
        return None
    from pt2chakra.astra import AstraSimProfile

    return AstraSimProfile(args.cpu)


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.ranks is not None:
        return _cmd_convert_ranks(args)
    for option, given in (("--jobs", args.jobs is not None), ("--ray", args.ray is not None),
                          ("--allow-mismatch", args.allow_mismatch)):
        if given:
            raise InputError(option, "only with --ranks (several ranks in one command)")
    from pt2chakra.atomic import StagedOutputs
    from pt2chakra.conversion import convert_run

    _check_traces(args, "convert")
    if args.html:
        _check_html(args)
    lines: list[str] = []  # printed once every output is in place (-q: --simulate's only)
    with StagedOutputs() as staged:  # .et, report and page: together or not at all
        run = convert_run(args.host_trace, args.device_trace, args.output, rank=args.rank,
                          break_cycles=args.break_cycles, progress=args.progress,
                          consumer=_consumer_output(args), report_path=args.report,
                          repair=args.repair, force=args.force, step=_step(args),
                          staged=staged)
        options.keep_until_exit(run)  # its million objects: not freed one by one before exit
        report = run.report
        if not args.quiet:
            lines.append(report.summary())
        if args.simulate and args.consumer is None:
            lines.append(_simulation_lines([args.output]))
        if args.html:
            from pt2chakra.report import write_report

            page = write_report([args.output], args.html, conversion=[report], staged=staged)
            if not args.quiet:
                lines.append(page.summary())
    if lines:
        print("\n".join(lines))
    return 0


def _simulation_lines(paths: list[str]) -> str:
    """``--simulate``: the short summary, and why a step is 0 us when it is."""
    from pt2chakra.simulation import simulate, timing_notes

    result = simulate(paths)
    return "\n".join([result.summary(), *timing_notes(result)])


def _check_traces(args: argparse.Namespace, where: str) -> None:
    """The trace choices of one ``convert`` and of ``--ranks`` alike: either
    trace alone or both, and ``--repair`` only with a host trace."""
    if args.host_trace is None and args.device_trace is None:
        raise InputError(where, "give --host-trace, --device-trace, or both")
    if args.repair and args.host_trace is None:
        raise InputError("--repair", "repairs a host trace: give --host-trace")


def _step(args: argparse.Namespace) -> StepChoice:
    """``--step``: which of a Kineto trace's steps is measured."""
    from pt2chakra.conversion import parse_step_choice

    return parse_step_choice(args.step)


def _check_html(args: argparse.Namespace) -> None:
    """Refuse an unusable ``--html`` before the conversion starts."""
    from pt2chakra.report import check_output

    if args.consumer is not None:
        raise InputError(args.html, "--html reports on the .et; it does not go with --consumer")
    check_output(args.html, [args.host_trace, args.device_trace], [args.output, args.report])


def _cmd_convert_ranks(args: argparse.Namespace) -> int:
    """``--ranks``: one conversion per rank, in a process pool or on Ray."""
    from pt2chakra.conversion import (
        RankOptions,
        RankTemplates,
        convert_ranks,
        parse_ranks,
    )

    for option, value in (("--rank", args.rank), ("--consumer", args.consumer),
                          ("--html", args.html)):
        if value is not None:
            raise InputError(option, "does not combine with --ranks")
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", f"must be >= 1, got {args.jobs}")
    _check_traces(args, "--ranks")
    templates = RankTemplates(args.host_trace, args.device_trace, args.output, args.report)
    result = convert_ranks(templates.jobs(parse_ranks(args.ranks)), workers=args.jobs,
                           use_ray=args.ray is not None, ray_address=args.ray or None,
                           options=RankOptions(break_cycles=args.break_cycles,
                                               force=args.force, repair=args.repair,
                                               step=_step(args)),
                           progress=args.progress, check_collectives=True,
                           allow_mismatch=args.allow_mismatch)
    for failed in result.failed:
        print(f"pt2chakra: error: {failed.line()}", file=sys.stderr)
    if result.rolled_back:
        print(f"pt2chakra: error: {result.mismatch}; outputs removed "
              "(--allow-mismatch keeps them)", file=sys.stderr)
        return EXIT_RANK_FAILED
    if result.mismatch is not None:
        print(f"pt2chakra: warning: {result.mismatch} (kept: --allow-mismatch)", file=sys.stderr)
    if not args.quiet:
        print(result.summary())
    if result.failed:
        return EXIT_RANK_FAILED
    if args.simulate:
        print(_simulation_lines(result.outputs))
    return 0


def _cmd_link(args: argparse.Namespace) -> int:
    from pt2chakra.conversion import write_linked

    summary = write_linked(args.host_trace, args.device_trace, args.output, force=args.force)
    if not args.quiet:
        print(f"{args.output}: {summary.host_ops_linked} host ops linked by {summary.method}, "
              f"{summary.gpu_activities_attached} GPU activities attached")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``convert`` and ``link`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("convert", parents=[common], epilog=EPILOG_CONVERT,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Link a host trace with its Kineto trace and write Chakra "
                       "(or convert either one alone).")
    _add_trace_args(p, host_required=False)
    p.add_argument("--repair", action="store_true",
                   help="read a host trace cut off mid-array up to its last complete op")
    p.add_argument("-o", "--output", required=True, help="output .et (.et.gz to compress)")
    p.add_argument("--step", default="last", metavar="N|median|last|all",
                   help="Kineto trace alone: the step measured, ProfilerStep#N, the median "
                   "period, the last one followed by another (default) or all of them")
    p.add_argument("--rank", type=options.rank, help="rank to record (default: from the Kineto trace)")
    p.add_argument("--report", metavar="R.json", help="write the accounting report as JSON")
    p.add_argument("--break-cycles", action="store_true",
                   help="drop the least reliable edge kind on each cycle instead of failing")
    p.add_argument("--simulate", action="store_true", help="simulate the result and report")
    p.add_argument("--html", metavar="OUT.html",
                   help="also write the HTML report of the result (see pt2chakra report)")
    options.add_consumer(p, "write for a consumer: astra-sim = no METADATA nodes, "
                         "OUTPUT is a prefix for OUTPUT.<rank>.et + OUTPUT.comm_groups.json")
    p.add_argument("--cpu", choices=list(CPU_MODES), default=DEFAULT_CPU_MODE,
                   help="with --consumer astra-sim: serial (default): one serial compute chain, CPU "
                        "time as gaps; drop: gaps per stream; keep: CPU nodes kept; "
                        "drop-no-gaps: CPU time lost")
    p.add_argument("--progress", action="store_true", default=None,
                   help="show progress even when stderr is not a terminal")
    options.add_force(p, "the two traces look like different ranks or runs")
    p.add_argument("--ranks", metavar="SPEC",
                   help="convert several ranks, e.g. 0-7,9: {rank} in --host-trace, "
                        "--device-trace, -o and --report is each rank's number")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="with --ranks: keep the outputs when the ranks disagree about their "
                        "collectives (a warning instead of exit 2)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="with --ranks: ranks converted at once (default: the CPU count)")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="with --ranks: run on Ray (pip install 'pt2chakra[ray]'); no ADDRESS "
                        "starts a local instance (or joins $RAY_ADDRESS), 'auto' or HOST:PORT "
                        "joins a cluster whose nodes read the same paths")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("link", parents=[common], epilog=EPILOG_LINK,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_trace_args(p)
    p.add_argument("-o", "--output", required=True, help="output JSON")
    options.add_force(p, "the two traces look like different ranks or runs")
    p.set_defaults(func=_cmd_link)

"""``pt2chakra diff``: CLI wiring over :func:`pt2chakra.diff.diff`."""

from __future__ import annotations

import argparse

from pt2chakra.cli import options
from pt2chakra.cli.json_out import print_json

SEPARATOR = "vs"  # between A's files and B's on the command line

EPILOG = """examples:
  pt2chakra diff a.0.et a.1.et vs b.0.et b.1.et        (two recordings of one step, 2 ranks)
  pt2chakra diff a.et b.et --top 20
  pt2chakra diff --a run1/job.*.et --b run2/job.*.et --json   (the shell expands *;
                                                      quoted patterns are file names)
  pt2chakra simulate m2g.*.et --bandwidth-scale 0.25 --write-et pred/m500
  pt2chakra diff pred/m500.*.et vs m500.*.et          (where the prediction is wrong)
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``diff`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("diff", parents=[common], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Align two runs of one training step (ops by name, call "
                       "path and order; kernels by launching op; collectives by process group "
                       "and sequence) and attribute the step difference B - A: compute by op, "
                       "kernels, each collective (waiting for the last peer vs transfer), CPU "
                       "gaps, and what one run only has. The parts add up to the difference; "
                       "the residual is printed.")
    p.add_argument("traces", nargs="*", metavar="ET",
                   help=f"A's .et files (one per rank), {SEPARATOR!r}, B's (or one file each)")
    p.add_argument("--a", nargs="+", default=[], metavar="ET", help="A's .et files")
    p.add_argument("--b", nargs="+", default=[], metavar="ET", help="B's .et files")
    p.add_argument("--top", type=options.int_range(1, 10_000), default=10, metavar="N",
                   help="rows per category (default 10)")
    p.add_argument("--json", action="store_true", help="print the typed result as JSON")
    options.add_force(p, "a run's files cannot be one job (a rank twice, no rank, a copy)")
    p.set_defaults(func=_cmd_diff)


def split_runs(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """A's and B's files: --a/--b, else the positionals split at ``vs``, else one each."""
    from pt2chakra.errors import InputError

    traces: list[str] = args.traces
    if args.a or args.b:
        if not (args.a and args.b) or traces:
            raise InputError("diff", "give both --a and --b, and no other file")
        return list(args.a), list(args.b)
    if traces.count(SEPARATOR) == 1:
        cut = traces.index(SEPARATOR)
        if 0 < cut < len(traces) - 1:
            return traces[:cut], traces[cut + 1:]
    if len(traces) == 2 and SEPARATOR not in traces:
        return [traces[0]], [traces[1]]
    raise InputError("diff", f"name A's files, then {SEPARATOR!r}, then B's (or --a ... --b ...)")


def _cmd_diff(args: argparse.Namespace) -> int:
    from pt2chakra.diff import diff, format_diff

    a, b = split_runs(args)
    result = diff(a, b, force=args.force)
    if args.json:
        print_json(result.to_json())
    elif not args.quiet:
        print(format_diff(result, top=args.top))
    return 0

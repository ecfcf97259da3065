"""``pt2chakra report``: CLI wiring over :func:`pt2chakra.report.api.write_report`."""

from __future__ import annotations

import argparse

from pt2chakra.cli.options import add_force
from pt2chakra.cli.simulate import add_model_args, options_from

EPILOG = """examples:
  pt2chakra report rank0.et -o report.html
  pt2chakra report rank*.et -o report.html --conversion-report rank*.report.json
  pt2chakra report rank*.et -o report.html --compute-scale 0.5 1 --bandwidth-scale 1 2
  pt2chakra report new/rank*.et -o report.html --baseline old/rank*.et
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``report`` to the ``pt2chakra`` parser."""
    p = sub.add_parser("report", parents=[common], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Replay one or more ranks' Chakra traces and write one HTML "
                       "page (no network needed to open it): predicted vs measured step, lane "
                       "timelines, critical path, top ops, collectives, what-ifs and, when "
                       "given, the conversion accounting. What-if options replace the "
                       "standard what-ifs (compute x0.5/x2, CPU x0.5, bandwidth x0.5/x2).")
    p.add_argument("traces", nargs="+", help=".et files (one per rank)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the page to write")
    p.add_argument("--conversion-report", nargs="+", default=[], metavar="R.json",
                   help="conversion reports (convert --report) to account for")
    p.add_argument("--baseline", nargs="+", default=[], metavar="B.et",
                   help="another run of the same job (one .et per rank): the page adds what "
                   "changed (pt2chakra diff: by category, the top changes, each collective's "
                   "straggler) and both runs' recorded lanes on one time axis")
    p.add_argument("--title", default="", help="page title (default: from the file names)")
    p.add_argument("--no-what-if", action="store_true", help="leave the standard what-ifs out")
    add_model_args(p)
    add_force(p, "the ranks are unsound (validate's errors) or nodes never run in the replay")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from pt2chakra.report import ReportOptions, write_report

    options = ReportOptions(simulation=options_from(args), title=args.title,
                            standard_what_ifs=not args.no_what_if)
    summary = write_report(args.traces, args.output, options, args.conversion_report,
                           args.baseline)
    if not args.quiet:
        print(summary.summary())
    return 0


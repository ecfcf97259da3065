"""``pt2chakra`` command line: a thin layer over ``pt2chakra.api``.

Bad input ends with one line on stderr naming the file and the problem and
exit status 2; no traceback, no output file left behind.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

import msgspec
import orjson

from pt2chakra import __version__, cli_simulate, cli_tools
from pt2chakra.astra_sim import CPU_MODES
from pt2chakra.atomic import refuse_overwriting_inputs, write_atomic
from pt2chakra.model import InputError

EXIT_BAD_INPUT = 2

EPILOG_CONVERT = """examples:
  pt2chakra convert --host-trace rank0.host_et.json.gz --device-trace rank0.kineto.json.gz -o rank0.et
  pt2chakra convert --host-trace host_et.json -o host_only.et --report report.json
"""

EPILOG_LINK = """examples:
  pt2chakra link --host-trace host_et.json.gz --device-trace kineto.json.gz -o linked.json
"""


def _add_trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host-trace", required=True, metavar="H",
                   help="PyTorch host execution trace (.json or .json.gz)")
    p.add_argument("--device-trace", metavar="K",
                   help="Kineto trace of the same step (.json or .json.gz); omit for host-only")


def _cmd_convert(args: argparse.Namespace) -> int:
    from pt2chakra.api import convert, write_report

    inputs = [args.host_trace, args.device_trace]
    refuse_overwriting_inputs(args.output, inputs)
    if args.report:
        refuse_overwriting_inputs(args.report, inputs + [args.output])
        _require_folder(args.report)  # fail before converting, not after
    report = convert(args.host_trace, args.device_trace, args.output, rank=args.rank,
                     break_cycles_=args.break_cycles, progress=args.progress,
                     profile=args.profile, cpu=args.cpu)
    if args.report:
        write_report(report, args.report)
    if not args.quiet:
        print(report.summary())
    if args.simulate and args.profile is None:
        print(cli_simulate.short_report([args.output]))
    return 0


def _require_folder(path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(path, "No such file or directory (its folder does not exist)")


def _cmd_link(args: argparse.Namespace) -> int:
    from pt2chakra.api import link_traces
    from pt2chakra.linker import thread_map

    refuse_overwriting_inputs(args.output, [args.host_trace, args.device_trace])

    linked = link_traces(args.host_trace, args.device_trace)
    doc = {
        "host_trace": args.host_trace,
        "device_trace": args.device_trace,
        "method": linked.method,
        "thread_map": {str(k): v for k, v in thread_map(linked).items()},
        "ops": [
            {"id": op.id, "name": op.name, "tid": op.tid, "parent": op.parent,
             "ts": ev.ts, "dur": ev.dur, "kineto_tid": ev.tid}
            for op in linked.host.ops
            if (ev := linked.cpu_event.get(op.id)) is not None
        ],
        "gpu_ops": [msgspec.to_builtins(g) for g in linked.gpu_ops],
        "gpu_dropped": linked.gpu_dropped,
    }
    write_atomic(args.output, orjson.dumps(doc))
    if not args.quiet:
        print(f"{args.output}: {len(doc['ops'])} host ops linked by {linked.method}, "
              f"{len(linked.gpu_ops)} GPU activities attached")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pt2chakra",
        description="Turn PyTorch host + Kineto traces into Chakra execution traces.")
    parser.add_argument("--version", action="version", version=f"pt2chakra {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="log details (-vv for debug)")
    common.add_argument("-q", "--quiet", action="store_true", help="print no summary")

    p = sub.add_parser("convert", parents=[common], epilog=EPILOG_CONVERT,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="link and convert to a Chakra .et",
                       description="Link a host trace with its Kineto trace and write Chakra.")
    _add_trace_args(p)
    p.add_argument("-o", "--output", required=True, help="output .et (.et.gz to compress)")
    p.add_argument("--rank", type=int, help="rank to record (default: from the Kineto trace)")
    p.add_argument("--report", metavar="R.json", help="write the accounting report as JSON")
    p.add_argument("--break-cycles", action="store_true",
                   help="drop the least reliable edge kind on each cycle instead of failing")
    p.add_argument("--simulate", action="store_true", help="simulate the result and report")
    p.add_argument("--for", dest="profile", choices=["astra-sim"],
                   help="write for a consumer: astra-sim = no METADATA nodes, "
                        "OUTPUT is a prefix for OUTPUT.<rank>.et + OUTPUT.comm_groups.json")
    p.add_argument("--cpu", choices=list(CPU_MODES), default="drop",
                   help="with --for astra-sim: drop CPU nodes, keeping their time as GPU-side "
                        "cpu_gap nodes (default); keep them; or drop-no-gaps")
    p.add_argument("--progress", action="store_true", default=None,
                   help="show progress even when stderr is not a terminal")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("link", parents=[common], epilog=EPILOG_LINK,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="write the linked intermediate JSON")
    _add_trace_args(p)
    p.add_argument("-o", "--output", required=True, help="output JSON")
    p.set_defaults(func=_cmd_link)

    cli_simulate.register(sub, common)
    cli_tools.register(sub, common)

    # Listed for --help only; main() hands "collect" to pt2chakra.collect.
    sub.add_parser("collect", help="record an ET + Kineto pair of one training step "
                   "(pt2chakra collect --help)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "collect":
        # collect owns its options (argparse REMAINDER cannot pass "--x" through).
        from pt2chakra import collect

        return collect.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    verbosity = getattr(args, "verbose", 0)
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except InputError as exc:
        print(f"pt2chakra: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # unreadable input, missing output folder, full disk...
        where = exc.filename if exc.filename is not None else "I/O"
        print(f"pt2chakra: error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def run() -> None:
    """Console entry point: ``main`` then a fast exit.

    Freeing the millions of objects of a large conversion one by one at
    interpreter shutdown takes a noticeable share of the run; the work is done
    and flushed by then, so skip it."""
    rc = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


if __name__ == "__main__":
    run()

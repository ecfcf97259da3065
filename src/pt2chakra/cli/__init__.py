"""``pt2chakra`` command line: a thin layer over the typed Python API.

Each command is one call into the API and prints what it gets back. Bad
input ends with one line on stderr naming the file and the problem and exit
status 2; no traceback, no output file left behind.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from pt2chakra.atomic import target_of
from pt2chakra.cli import collect, convert, diff, extrapolate, options, report, simulate, tools
from pt2chakra.errors import InputError, printable
from pt2chakra.version import __version__

EXIT_BAD_INPUT = options.EXIT_BAD_INPUT
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = options.OneLineParser(
        prog="pt2chakra",
        description="Turn PyTorch host + Kineto traces into Chakra execution traces.")
    parser.add_argument("--version", action="version", version=f"pt2chakra {__version__}")
    parser.add_argument("--max-input-size", type=options.byte_size, metavar="SIZE",
                        help="largest input content to read, after decompression "
                             "(default 4G; e.g. 16G)")
    sub = parser.add_subparsers(dest="command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="log details (-vv for debug)")
    common.add_argument("-q", "--quiet", action="store_true", help="print no summary")

    convert.register(sub, common)
    simulate.register(sub, common)
    extrapolate.register(sub, common)
    tools.register(sub, common)
    collect.register(sub, common)
    report.register(sub, common)
    diff.register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    from pt2chakra.files import DEFAULT_MAX_INPUT_BYTES, reset_standard_input, set_max_input_size

    set_max_input_size(args.max_input_size or DEFAULT_MAX_INPUT_BYTES)
    reset_standard_input()
    func: Callable[[argparse.Namespace], int] = args.func
    with options.session(getattr(args, "verbose", 0)) as release_warnings:
        try:
            status = func(args)
        except InputError as exc:
            print(f"pt2chakra: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except BrokenPipeError:  # the reader of our output went away (| head): quietly
            options.quiet_broken_pipe()
            return 0
        except OSError as exc:  # unreadable input, missing output folder, full disk...
            where = target_of(os.fspath(exc.filename)) if exc.filename is not None else "I/O"
            print(printable(f"pt2chakra: error: {where}: {exc.strerror or exc}"),
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: temp files are gone
            return options.exit_status_of(exc)
        release_warnings()
        return status


def run() -> None:
    """Console entry point: ``main`` then a fast exit.

    Freeing the millions of objects of a large conversion one by one at
    interpreter shutdown takes a noticeable share of the run; the work is done
    and flushed by then, so skip it."""
    options.exiting_without_freeing()
    rc = main()
    logging.shutdown()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        options.quiet_broken_pipe()
    sys.stderr.flush()
    os._exit(rc)

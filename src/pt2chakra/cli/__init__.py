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

from pt2chakra import __version__
from pt2chakra.cli import collect, convert, report, simulate, tools
from pt2chakra.errors import InputError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


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

    convert.register(sub, common)
    simulate.register(sub, common)
    tools.register(sub, common)
    collect.register(sub, common)
    report.register(sub, common)
    return parser


def _log_level(verbosity: int) -> int:
    return logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=_log_level(getattr(args, "verbose", 0)),
                        format="%(levelname)s %(name)s: %(message)s")
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except InputError as exc:
        print(f"pt2chakra: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # unreadable input, missing output folder, full disk...
        if isinstance(exc, BrokenPipeError):
            return 0
        where = exc.filename if exc.filename is not None else "I/O"
        print(f"pt2chakra: error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


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

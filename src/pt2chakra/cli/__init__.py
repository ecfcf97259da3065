"""``pt2chakra`` command line: a thin layer over the typed Python API.

Each command is one call into the API and prints what it gets back. Bad
input ends with one line on stderr naming the file and the problem and exit
status 2; no traceback, no output file left behind.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pt2chakra.cli import options
from pt2chakra.errors import InputError, printable
from pt2chakra.version import __version__

EXIT_BAD_INPUT = options.EXIT_BAD_INPUT
EXIT_INTERRUPTED = 130


class Command(NamedTuple):
    """A command's one line in ``pt2chakra --help`` and the module of ``cli``
    whose ``register`` builds its parser."""

    module: str
    help: str


# Every command, in the order of ``pt2chakra --help``. Only the module of the
# command being run is imported (with what its options list): start-up does
# not pay for the other commands' imports. A module registers its commands in
# this order.
COMMANDS: dict[str, Command] = {
    "convert": Command("convert", "link and convert to a Chakra .et"),
    "link": Command("convert", "write the linked intermediate JSON"),
    "simulate": Command("simulate", "replay .et files and report step time"),
    "extrapolate": Command("extrapolate",
                           "write the M-rank job of a data-parallel job recorded on N ranks"),
    "inspect": Command("tools", "summarise an .et file"),
    "validate": Command("tools", "check .et files are sound for replay"),
    "jsonize": Command("tools", ".et -> one JSON document"),
    "from-json": Command("tools", "JSON (from jsonize) -> .et"),
    "timeline": Command("tools", ".et -> Chrome/Perfetto trace JSON"),
    "graph": Command("tools", "draw a window of the dependency graph"),
    "from-text": Command("tools", "ASTRA-sim text workload -> .et per NPU"),
    "microbench": Command("tools", "generate micro-benchmark traces"),
    "astra-sim": Command("tools", "write an ASTRA-sim job (or check one)"),
    "collect": Command("collect", "record an ET + Kineto pair of one training step"),
    "report": Command("report", "write a self-contained HTML report of the simulated step"),
    "diff": Command("diff", "what changed between two runs (or a replay and a measurement)"),
}
# The top-level option that takes a value (the command is not that value).
_VALUED_OPTIONS = ("--max-input-size",)


class CommandParsers(argparse._SubParsersAction):
    """The subcommands; each gets its help line from ``COMMANDS``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return super().add_parser(name, help=COMMANDS[name].help, **kwargs)


def command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs (its first word that names one, past the
    top-level options), or None (``--help``, ``--version``, a typo)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in _VALUED_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``pt2chakra`` parser, with the full parsers of ``command``'s module
    (all modules when ``command`` is ``"*"``) and a bare one for every other
    command (enough for ``--help`` and for naming a typo's choices)."""
    parser = options.OneLineParser(
        prog="pt2chakra",
        description="Turn PyTorch host + Kineto traces into Chakra execution traces.")
    parser.add_argument("--version", action="version", version=f"pt2chakra {__version__}")
    parser.add_argument("--max-input-size", type=options.byte_size, metavar="SIZE",
                        help="largest input content to read, after decompression "
                             "(default 4G; e.g. 16G)")
    sub = parser.add_subparsers(dest="command", required=True, action=CommandParsers)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="log details (-vv for debug)")
    common.add_argument("-q", "--quiet", action="store_true", help="print no summary")

    chosen = COMMANDS[command].module if command in COMMANDS else None
    registered: set[str] = set()
    for name, entry in COMMANDS.items():
        if entry.module in registered:
            continue
        if command == "*" or entry.module == chosen:
            importlib.import_module(f"pt2chakra.cli.{entry.module}").register(sub, common)
            registered.add(entry.module)
        else:
            sub.add_parser(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_in(words))
    args = parser.parse_args(words)
    from pt2chakra.files import (
        DEFAULT_MAX_INPUT_BYTES,
        inputs_guarded,
        reset_standard_input,
        set_max_input_size,
    )

    set_max_input_size(args.max_input_size or DEFAULT_MAX_INPUT_BYTES)
    reset_standard_input()
    func: Callable[[argparse.Namespace], int] = args.func
    with options.session(getattr(args, "verbose", 0)) as release_warnings, inputs_guarded():
        try:
            status = func(args)
        except InputError as exc:
            print(f"pt2chakra: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except BrokenPipeError:  # the reader of our output went away (| head): quietly
            options.quiet_broken_pipe()
            return 0
        except OSError as exc:  # unreadable input, missing output folder, full disk...
            from pt2chakra.atomic import target_of

            where = target_of(os.fspath(exc.filename)) if exc.filename is not None else "I/O"
            print(printable(f"pt2chakra: error: {where}: {exc.strerror or exc}"),
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: temp files are gone
            return options.exit_status_of(exc)
        release_warnings()
        return status


def stop_before_start(signum: int, _frame: object) -> None:
    """Ctrl-C or SIGTERM while the command is still being imported or its
    arguments parsed (a second or more on a loaded machine): nothing has been
    read or written yet, so end at once, quietly (no traceback), with the
    status a shell expects."""
    os._exit(128 + signum)


def run() -> None:
    """Console entry point (``pt2chakra``, ``python -m pt2chakra``): ``main``
    then a fast exit.

    Signals end the process quietly from here on (``stop_before_start``) until
    ``options.session`` takes over for the command itself (temp files removed,
    workers and children stopped); only this light module was imported before.
    Freeing the millions of objects of a large conversion one by one at
    interpreter shutdown takes a noticeable share of the run; the work is done
    and flushed by then, so skip it."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop_before_start)
    options.exiting_without_freeing()
    rc = main()
    logging.shutdown()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        options.quiet_broken_pipe()
    sys.stderr.flush()
    os._exit(rc)

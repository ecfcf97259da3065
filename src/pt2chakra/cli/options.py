"""Option checking for the command line: one home for what a value may be,
and for how a failing command ends (one line, no partial output).

Every numeric option goes through one of the ``argparse`` types below, so a
NaN scale, a negative rank, a billion NPUs or ``0x10`` is refused before any
work with argparse's one line (exit 2); their text is read, and the ranges
that files hold too are defined, in ``pt2chakra.errors`` (the metadata and
side files are read with the same ranges). An output prefix must name files
(``output_prefix``). ``OneLineParser`` makes every argparse error a
single line; ``session`` turns SIGTERM and SIGHUP into the same clean exit as
Ctrl-C (temp files removed by ``pt2chakra.atomic``), and holds back warning
lines until the command succeeds, so that a failure prints only its error.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from pt2chakra.chakra.wire import I64_MAX
from pt2chakra.errors import (
    BANDWIDTH_GBPS,
    LATENCY_US,
    LINK_CPU_NS,
    SCALE,
    STEP_MS,
    Range,
    integer_in_text,
    number_in_text,
    printable,
)

if TYPE_CHECKING:
    from pt2chakra.scaleout import HostSharing
    from pt2chakra.simulation.results import SlowRank

# Ranks are int32 in Chakra's comm_src/comm_dst and in every launcher.
MAX_RANK = 2**31 - 1
# Generated traces (from-text, microbench): one file per NPU; 65536 NPUs is
# the largest system ASTRA-sim's examples describe, and every file is held in
# memory until the set is committed.
MAX_NPUS = 65536
# Chain length / training passes of generated traces: a million compute +
# collective pairs per NPU is already gigabytes of output.
MAX_STEPS = 1_000_000
MAX_PASSES = 100_000
# Communication streams a what-if may spread collectives over: NCCL uses a
# handful; thousands only multiply lanes.
MAX_COMM_STREAMS = 1024
# Exit statuses: 128 + the signal number, as shells report them.
EXIT_BAD_INPUT = 2
SIGNAL_EXITS = {signal.SIGINT: 130, signal.SIGTERM: 143}
if hasattr(signal, "SIGHUP"):
    SIGNAL_EXITS[signal.SIGHUP] = 129


class OneLineParser(argparse.ArgumentParser):
    """argparse, with errors as one line (no usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {' '.join(message.split())}\n")


def int_range(low: int, high: int) -> Callable[[str], int]:
    """An integer option within [low, high], in ASCII decimal
    (``errors.integer_in_text``: ``0x10`` and other scripts' digits are refused)."""

    def parse(text: str) -> int:
        value = integer_in_text(text)
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer (ASCII decimal "
                                             "digits)")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    parse.__name__ = "int"
    return parse


# The most ranks or cores one host is described with (--ranks-per-host,
# --cores-per-host): the generated-trace limit of --npus.
MAX_PER_HOST = 65536


def add_host_sharing(p: argparse.ArgumentParser) -> None:
    """``--ranks-per-host/--cores-per-host``: ranks that share a host's cores
    stretch each other's CPU time; ``--inter-host-bandwidth/-latency``: the
    uplinks that join the hosts pace every collective spanning them
    (docs/SCALE_OUT.md); absent, one rank per host shares nothing and every
    link is as recorded."""
    p.add_argument("--ranks-per-host", type=int_range(1, MAX_PER_HOST), metavar="R",
                   help="with --world-size: ranks on each host, the recorded job's and the "
                   "predicted one's (default 1: a host per rank, nothing shared); with "
                   "--cores-per-host, CPU time stretches by the ranks sharing a core")
    p.add_argument("--cores-per-host", type=int_range(1, MAX_PER_HOST), metavar="C",
                   help="with --ranks-per-host: each host's cores")
    p.add_argument("--inter-host-bandwidth", type=number_option(BANDWIDTH_GBPS), metavar="GBPS",
                   help="with --ranks-per-host: each host's uplink to the others, GB/s, the "
                   "rate it moves data both ways at once (as nccl-tests or a two-way iperf "
                   "measures it), not its line rate; a collective spanning hosts is paced by "
                   "its slowest hop")
    p.add_argument("--inter-host-latency", type=number_option(LATENCY_US), metavar="US",
                   help="with --inter-host-bandwidth: the uplinks' latency per message, us "
                   "(default 0)")
    p.add_argument("--link-cpu-cost", type=number_option(LINK_CPU_NS), metavar="NS",
                   help="with --cores-per-host: the host's CPU ns per byte of each rank's "
                   "link (kernel and collective library); its cores over its ranks' cost cap "
                   "each link (default: what collect measured, meta.json beside the traces; "
                   "none: no cap)")
    p.add_argument("--ranks-per-uplink", type=int_range(1, MAX_PER_HOST), metavar="U",
                   help="with --inter-host-bandwidth: consecutive ranks behind each uplink, "
                   "where they are not one host's cores (a test bed; default --ranks-per-host)")


HOST_OPTIONS = ("--ranks-per-host", "--cores-per-host", "--inter-host-bandwidth",
                "--inter-host-latency", "--ranks-per-uplink", "--link-cpu-cost")


def hosts_given(args: argparse.Namespace) -> str | None:
    """The first host option given (``HOST_OPTIONS``), else None: they
    describe the target of --world-size, not a recorded job."""
    for flag in HOST_OPTIONS:
        if getattr(args, flag[2:].replace("-", "_"), None) is not None:
            return flag
    return None


def host_sharing(args: argparse.Namespace) -> HostSharing:
    """The hosts ``add_host_sharing``'s options describe: cores with ranks
    per host (both or neither), uplinks with ranks per host."""
    from pt2chakra.errors import InputError
    from pt2chakra.scaleout import HostSharing

    r, c = args.ranks_per_host, args.cores_per_host
    up, up_latency = args.inter_host_bandwidth, args.inter_host_latency
    for flag, given in (("--inter-host-latency", up_latency),
                        ("--ranks-per-uplink", args.ranks_per_uplink)):
        if given is not None and up is None:
            raise InputError(flag, "needs --inter-host-bandwidth too")
    if up is not None and r is None:
        raise InputError("--inter-host-bandwidth", "needs --ranks-per-host too (which "
                         "consecutive ranks share a host)")
    if c is not None and r is None or (r is not None and c is None and up is None):
        given, missing = ("--ranks-per-host", "--cores-per-host") if c is None else \
            ("--cores-per-host", "--ranks-per-host")
        raise InputError(given, f"needs {missing} too (how many ranks share how many cores)")
    if args.link_cpu_cost is not None and c is None:
        raise InputError("--link-cpu-cost", "needs --cores-per-host too (the cores that "
                         "carry the links' bytes)")
    if r is None:
        return HostSharing()
    return HostSharing(r, c, up, up_latency or 0.0, args.ranks_per_uplink, args.link_cpu_cost)


def float_range(low: float, high: float, low_open: bool = False) -> Callable[[str], float]:
    """A finite float option within [low, high] (``(low, high]`` with
    ``low_open``), in ASCII decimal (``errors.number_in_text``)."""
    return number_option(Range(low, high, low_open))


def number_option(allowed: Range) -> Callable[[str], float]:
    """A number option within ``allowed`` (the range a file's field of the
    same meaning is read with: ``errors``)."""

    def parse(text: str) -> float:
        value = number_in_text(text)
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number (ASCII decimal, "
                                             "e.g. 1.5 or 2e-3)")
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if not allowed.holds(value):
            raise argparse.ArgumentTypeError(f"{text} is outside {allowed.describe()}")
        return value

    parse.__name__ = "float"
    return parse


rank = int_range(0, MAX_RANK)
non_negative_int64 = int_range(0, I64_MAX)
int64 = int_range(-I64_MAX - 1, I64_MAX)
npus = int_range(1, MAX_NPUS)
steps = int_range(1, MAX_STEPS)
passes = int_range(1, MAX_PASSES)
comm_streams = int_range(0, MAX_COMM_STREAMS)
count = int_range(0, I64_MAX)
positive_count = int_range(1, I64_MAX)
# The ranges of numbers that files hold too (``errors``: one reader for both).
scale = number_option(SCALE)


def slow_rank(value: str) -> SlowRank:
    """``--slow-rank RANK:cpu=F,link=G`` (either or both factors): one
    straggler what-if (``simulation.results.SlowRank``)."""
    from pt2chakra.simulation.results import SlowRank

    rank_text, _, factors = value.partition(":")
    try:
        rank = int(rank_text)
    except ValueError:
        rank = -1
    given: dict[str, float] = {}
    for part in factors.split(",") if factors else []:
        name, _, number = part.partition("=")
        if name not in ("cpu", "link") or name in given:
            raise argparse.ArgumentTypeError(f"{value!r}: expected RANK:cpu=F,link=G")
        given[name] = scale(number)
    if rank < 0 or not given:
        raise argparse.ArgumentTypeError(f"{value!r}: expected RANK:cpu=F and/or link=G "
                                         "(e.g. 3:link=2, a rank whose link is half as fast)")
    return SlowRank(rank, **given)
bandwidth = number_option(BANDWIDTH_GBPS)
latency = number_option(LATENCY_US)
real_step = number_option(STEP_MS)
# A child's time limit: a day is longer than any job we run.
MAX_SECONDS = 86_400.0
seconds = float_range(0.0, MAX_SECONDS, low_open=True)

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE | re.ASCII)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def byte_size(text: str) -> int:
    """``4G``, ``512M``, ``1024``: a positive size in bytes (binary units)."""
    m = _SIZE.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 8G, 512M or 1048576")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if not 0 < value <= I64_MAX:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return value


byte_size.__name__ = "size"


def output_prefix(text: str) -> str:
    """``-o DIR/PREFIX`` of a command that writes ``PREFIX.<rank>.et`` (and
    more): its file-name part may not be empty, ``.`` or ``..`` (``-o out/``
    would write the hidden files ``out/.0.et``, ``out/.1.et``...)."""
    if os.path.basename(text) in ("", os.curdir, os.pardir):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder, not the files' prefix: "
                                         "give DIR/PREFIX (e.g. out/job)")
    return text


output_prefix.__name__ = "prefix"


def add_tensor_parallel(p: argparse.ArgumentParser) -> None:
    """``--tensor-parallel T`` (``extrapolate``, ``simulate``)."""
    p.add_argument("--tensor-parallel", type=npus, metavar="T",
                   help="a job of one tensor-parallel group spanning every rank (DTensor) at "
                   "degree T: T ranks, the ops on a shard re-timed by the compute model "
                   "fitted on the recording (inspect --compute-model), collectives timed at "
                   "the new group size; see docs/SCALE_OUT.md")


def target_ranks(args: argparse.Namespace) -> tuple[int | None, bool]:
    """The ranks of the job to predict (``--world-size``, or the degree of
    ``--tensor-parallel``: the job has that one dimension) and whether the
    tensor-parallel degree changes; one line where the two disagree."""
    from pt2chakra.errors import InputError

    degree = args.tensor_parallel
    if degree is None:
        return args.world_size, False
    if args.world_size is not None and args.world_size != degree:
        raise InputError("--world-size", f"{args.world_size} with --tensor-parallel {degree}: "
                         "the job's one dimension is tensor parallel, so its ranks are its "
                         "degree (a data-parallel dimension beside it is not supported)")
    return degree, True


def add_force(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--force", action="store_true",
                   help=f"proceed (with a warning) when {what}")


# Who a trace is written, checked or replayed for: pt2chakra's own replay
# (first: the default) or a simulator with rules of its own. One name,
# ``--consumer``, on every command that takes one.
CONSUMERS = ("pt2chakra", "astra-sim")
OWN_CONSUMER = CONSUMERS[0]
# The consumers with a form or rules of their own (convert, validate,
# from-json, from-text: ours is what they do without one).
OTHER_CONSUMERS = CONSUMERS[1:]
# The spelling ``--consumer`` replaced on convert, validate, from-json and
# from-text: still read, so that old command lines run, but not shown.
OLD_CONSUMER_FLAG = "--for"


def add_consumer(p: argparse.ArgumentParser, help: str) -> None:
    """``--consumer NAME`` (one of ``OTHER_CONSUMERS``, default none: ours),
    and its old spelling, ``OLD_CONSUMER_FLAG``, hidden from ``--help``."""
    p.add_argument("--consumer", choices=OTHER_CONSUMERS, help=help)
    p.add_argument(OLD_CONSUMER_FLAG, dest="consumer", choices=OTHER_CONSUMERS,
                   default=argparse.SUPPRESS, help=argparse.SUPPRESS)


# --------------------------------------------------------------------------
# How a command ends
# --------------------------------------------------------------------------


class Terminated(KeyboardInterrupt):
    """SIGTERM / SIGHUP: unwinds like Ctrl-C, so every temp file is removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# The SIGTERM / SIGHUP that arrived, if any: a library that catches our
# Terminated and raises a plain KeyboardInterrupt in its place (Ray's ray.wait
# and ray.get do) must not turn exit 143 into Ctrl-C's 130.
_terminated_by: list[int] = []


def _raise_terminated(signum: int, _frame: object) -> None:
    _terminated_by.append(signum)
    raise Terminated(signum)


def exit_status_of(exc: KeyboardInterrupt) -> int:
    signum: int = getattr(exc, "signum", None) or next(iter(_terminated_by), signal.SIGINT)
    return 128 + signum if signum in SIGNAL_EXITS else SIGNAL_EXITS[signal.SIGINT]


class _HeldWarnings(logging.Handler):
    """Keeps warning lines until the command ends: printed after a success,
    dropped after a failure (whose one line says what matters)."""

    def __init__(self, target: logging.Handler) -> None:
        super().__init__(logging.NOTSET)
        self.target = target
        self.held: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.held.append(record)

    def pass_on(self) -> None:  # not ``release``: Handler's lock method has that name
        for record in self.held:
            self.target.handle(record)
        self.held.clear()


# Control characters a terminal acts on, other than the line and tab our own
# text is made of: from a trace's names they are printed escaped.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _escape_controls(text: str) -> str:
    return _TERMINAL_CONTROLS.sub(lambda m: printable(m.group()), text)


class _EscapingStream:
    """A text stream (stdout) whose writes have control characters escaped:
    an escape sequence in an op name cannot rewrite the screen."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        return self._inner.write(_escape_controls(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _EscapingFormatter(logging.Formatter):
    """Log lines (warnings name trace content) with every control character
    escaped: one record, one line."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


@contextlib.contextmanager
def session(verbosity: int) -> Iterator[Callable[[], None]]:
    """Signals handled as Ctrl-C and warnings held (at default verbosity)
    for the duration of one command; yields ``release`` to call on success.
    Restores the previous handlers after (``main`` may run in-process)."""
    logging.basicConfig(level=logging.WARNING if verbosity == 0 else
                        logging.INFO if verbosity == 1 else logging.DEBUG,
                        format="%(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    saved_handlers = root.handlers[:]
    held: _HeldWarnings | None = None
    stderr_handlers = [h for h in saved_handlers
                       if type(h) is logging.StreamHandler and h.stream is sys.stderr]
    saved_formats = [(h, h.formatter) for h in stderr_handlers]
    for stream_handler in stderr_handlers:
        fmt = stream_handler.formatter._fmt if stream_handler.formatter else None
        stream_handler.setFormatter(_EscapingFormatter(fmt))
    if verbosity == 0 and stderr_handlers:
        held = _HeldWarnings(stderr_handlers[0])
        root.handlers = [held if h is stderr_handlers[0] else h for h in saved_handlers]
    saved_stdout = sys.stdout
    if saved_stdout is not None and not isinstance(saved_stdout, _EscapingStream):
        sys.stdout = cast(TextIO, _EscapingStream(saved_stdout))
    previous = {}
    for signum in SIGNAL_EXITS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            previous[signum] = signal.signal(signum, signal.default_int_handler
                                             if signum == signal.SIGINT else _raise_terminated)
    try:
        yield held.pass_on if held is not None else (lambda: None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        root.handlers = saved_handlers
        for stream_handler, formatter in saved_formats:
            stream_handler.setFormatter(formatter)
        sys.stdout = saved_stdout


def quiet_broken_pipe() -> None:
    """The reader of our stdout went away (``| head``): point stdout at
    /dev/null so that the interpreter's final flush cannot complain."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


# What the console entry point leaves to the operating system: ``run()`` ends
# with ``os._exit``, and freeing a million-node replay one object at a time
# costs ~0.2 CPU-s after the work is done. None (the default) keeps nothing:
# ``main()`` called in-process (tests, embedding) frees as usual.
_KEPT_UNTIL_EXIT: list[object] | None = None


def exiting_without_freeing() -> None:
    """Called by ``run()``: from now on ``keep_until_exit`` keeps."""
    global _KEPT_UNTIL_EXIT
    _KEPT_UNTIL_EXIT = []


def keep_until_exit(obj: object) -> None:
    """Hold ``obj`` until the process exits, where ``run()`` exits without freeing."""
    if _KEPT_UNTIL_EXIT is not None:
        _KEPT_UNTIL_EXIT.append(obj)

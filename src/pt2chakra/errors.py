"""The one error type users see: bad input, reported as one line.

The CLI prints ``str(error)`` and exits 2; the Python API raises it for the
caller to handle. Messages name the file, the field and what was expected.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import NamedTuple, TypeVar

_T = TypeVar("_T")


class InputError(Exception):
    """Bad user input: the CLI prints ``str(self)`` as one line and exits 2.

    The message names the file, the field and what was expected.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(printable(f"{path}: {problem}"))
        self.path = path
        self.problem = problem


def renamed_keyword(new: _T | None, old: _T | None, where: str, new_name: str,
                    old_name: str) -> _T | None:
    """The value of an API keyword that was renamed: the new one, or the old
    one still read (with a ``DeprecationWarning``) so that callers written
    for the old name keep working; both at once is a caller's mistake."""
    if old is None:
        return new
    if new is not None:
        raise TypeError(f"{where}: give {new_name}= only ({old_name}= is its old name)")
    warnings.warn(f"{where}: {old_name}= is now {new_name}=", DeprecationWarning, stacklevel=3)
    return old


# Characters a terminal acts on (C0 and C1 controls, DEL) and the line and
# paragraph separators: in a name from a trace they could rewrite the screen
# or fake a line of output, so they are shown escaped.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7f, 0xa0))}
_CONTROL.update({0x2028: "\\u2028", 0x2029: "\\u2029"})


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters escaped
    (``\\x1b``, ``\\n``...), everything else as is."""
    if text.isprintable():
        return text
    return text.translate(_CONTROL)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a character ``printable`` escapes."""
    return any(ord(c) in _CONTROL for c in text)


# --------------------------------------------------------------------------
# Numbers from outside: the one reader of a number (formerly limits.py)
# --------------------------------------------------------------------------
# Numbers from outside: the one reader of a number, whether it comes from
# the command line, a trace's metadata or a file beside the traces.
#
# A number is refused in one line unless it is finite and within its named
# range (``Range``; the ranges every reader shares are defined here, each with
# its reason). Text is read as ASCII decimal only: ``0x10``, ``1_000`` and
# digits of other scripts (``١٢``, which Python's ``int`` and ``float``
# accept) are refused, so that a value means what it looks like to every
# reader of the command, the shell's and the log's included.
#
#     read_number(attrs.get(FIELD), SCALE, path, f"metadata {FIELD}")  # from a file
#     number_in_text(text)                                             # from an option


class Range(NamedTuple):
    """The numbers a field may hold: ``[low, high]`` (``(low, high]`` when
    ``low_open``), always finite."""

    low: float
    high: float
    low_open: bool = False

    def holds(self, value: float) -> bool:
        return math.isfinite(value) and (self.low < value if self.low_open
                                         else self.low <= value) and value <= self.high

    def describe(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


# What-if scales multiply measured durations or bandwidth: beyond a million
# (or below a millionth) they describe no machine, and float time sums lose
# the microsecond resolution the report prints. A scaled-out file's CPU
# stretch (``scaleout_cpu_stretch``) is such a factor too.
MIN_SCALE = 1e-6
MAX_SCALE = 1e6
SCALE = Range(MIN_SCALE, MAX_SCALE)
# A latency or a delay in us: up to a day (``--latency``, a scaled-out file's
# ``scaleout_hop_delay_us``).
MAX_LATENCY_US = 86_400e6
LATENCY_US = Range(0.0, MAX_LATENCY_US)
# A network's bandwidth in GB/s (``--bandwidth``, a system.json's memory
# bandwidth): below a kilobyte per second (1e-6) or above a petabyte per
# second nothing real is described, and the ASTRA-sim fit's squared errors
# overflow a float (1e-160 did).
MIN_BANDWIDTH_GBPS = 1e-6
MAX_BANDWIDTH_GBPS = 1e6
BANDWIDTH_GBPS = Range(MIN_BANDWIDTH_GBPS, MAX_BANDWIDTH_GBPS)
# A host's CPU cost per byte its ranks' links carry, in ns (``--link-cpu-cost``,
# ``meta.json``'s ``host_cpu_ns_per_link_byte``): a kernel and a collective
# library spend from a fraction of a ns per byte (a fast host, large
# messages) to tens (2 shared cores: 15.6); above a millisecond per byte a
# host moves under a kilobyte per second, nothing real; zero is no cost.
MAX_LINK_CPU_NS = 1e6
LINK_CPU_NS = Range(0.0, MAX_LINK_CPU_NS, low_open=True)
# A step time in ms (``--real-step``, ``meta.json``'s ``step_median_s`` in
# seconds): up to ~11 days; zero is no step.
MAX_STEP_MS = 1e9
STEP_MS = Range(0.0, MAX_STEP_MS, low_open=True)
STEP_S = Range(0.0, MAX_STEP_MS / 1e3, low_open=True)
# A predicted step in us (a job's ``prediction.json``): the same bound.
STEP_US = Range(0.0, MAX_STEP_MS * 1e3)

# ASCII decimal text: an optional sign, digits; a number may have a point and
# an exponent. ``re.ASCII``: ``\d`` is 0-9 only.
_INTEGER = re.compile(r"\s*[+-]?\d+\s*", re.ASCII)
_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*", re.ASCII)
# The most digits an integer's text may have (leading zeros aside), in an
# option or a trace: int64 has 19, so a longer one is out of range (and
# Python converts long ones in quadratic time).
MAX_INT_DIGITS = 20


def integer_in_text(text: str) -> int | None:
    """``text`` as an integer written in ASCII decimal; None otherwise."""
    if _INTEGER.fullmatch(text) is None \
            or len(text.strip().lstrip("+-").lstrip("0")) > MAX_INT_DIGITS:
        return None
    return int(text)


def number_in_text(text: str) -> float | None:
    """``text`` as a number written in ASCII decimal (``1.5``, ``2e-3``); None
    otherwise. Too large a number reads as infinite: ``Range`` refuses it."""
    return float(text) if _NUMBER.fullmatch(text) else None


def read_number(value: object, allowed: Range, where: str, field: str) -> float:
    """A number read from a file (a metadata attribute, a JSON field):
    ``InputError`` naming ``where`` (the file) and ``field`` unless it is a
    number (not a bool) within ``allowed``."""
    number = _as_float(value)
    if number is None or not allowed.holds(number):
        shown = repr(value[:40] if isinstance(value, str) else value)
        raise InputError(where, f"{field} is {shown[:60]}: expected a finite number in "
                         f"{allowed.describe()}")
    return number


def _as_float(value: object) -> float | None:
    """An int or float as a float (None for anything else, and for an
    integer beyond any float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None

"""Which CPU time a ``--cpu-scale`` what-if moves, when it names the ops.

A change of the model's work (more micro-batches, a wider layer) scales the
ops that do that work, not the optimizer step, DDP's bucket copies or the
gaps between steps. ``--cpu-scale-ops REGEX`` says which: every moment of a
thread spent inside an op whose name matches (its callees and the gaps
between them included) is scaled; the rest of the thread's time is not.

The replay holds a thread's time as op slices (an op's start to its first
callee) and delays (everything else: gaps, callers' time between and after
callees), so each of those intervals is scaled by the share of it that the
matching ops' spans cover.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable
from itertools import accumulate

from pt2chakra.errors import InputError
from pt2chakra.simulation.linear_regex import LinearRegex, Unsupported

OPTION = "--cpu-scale-ops"
# The pattern is searched in time linear in the name (``linear_regex``, not
# Python's backtracking ``re``: '(a+)+$' would never end on a long name, and
# '.*forward' took 23 s on one 100 kB name), and only a name's first 1024
# characters are searched (real op names are under ~300; the search costs
# ~1 us per character and automaton state set). A pattern is at most 1000
# characters (deep nesting overflows the parser's recursion).
MAX_MATCHED_NAME_CHARS = 1024
MAX_PATTERN_CHARS = 1000


def compile_ops(pattern: str) -> LinearRegex:
    """The user's op-name pattern, or one line naming the option."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(OPTION, f"the pattern has {len(pattern)} characters, over "
                         f"{MAX_PATTERN_CHARS}")
    try:
        return LinearRegex(pattern)
    except Unsupported as exc:
        raise InputError(OPTION, f"{exc} (op names are searched in linear time)") from None
    except (re.error, RecursionError, OverflowError, MemoryError) as exc:
        raise InputError(OPTION, f"not a regular expression (or too deeply nested): "
                         f"{str(exc) or type(exc).__name__}") from None


def matches(pattern: LinearRegex, name: str) -> bool:
    """Does ``pattern`` match ``name`` (its first ``MAX_MATCHED_NAME_CHARS``)?"""
    return pattern.search(name[:MAX_MATCHED_NAME_CHARS])


class CoveredTime:
    """Per thread, the union of the matching ops' spans, and how much of an
    interval it covers (a bisection per question)."""

    def __init__(self, spans: dict[int, list[tuple[float, float]]]) -> None:
        self._starts: dict[int, list[float]] = {}
        self._ends: dict[int, list[float]] = {}
        self._before: dict[int, list[float]] = {}  # covered time before each span
        for lane, lane_spans in spans.items():
            merged = _merged(sorted(lane_spans))
            self._starts[lane] = [s for s, _e in merged]
            self._ends[lane] = [e for _s, e in merged]
            self._before[lane] = list(accumulate((e - s for s, e in merged), initial=0.0))

    def within(self, lane: int, a: float, b: float) -> float:
        """Covered time in ``[a, b]`` on ``lane``."""
        if b <= a or lane not in self._starts:
            return 0.0
        return self._upto(lane, b) - self._upto(lane, a)

    def _upto(self, lane: int, t: float) -> float:
        """Covered time before ``t``."""
        starts, ends = self._starts[lane], self._ends[lane]
        k = bisect.bisect_right(starts, t) - 1
        if k < 0:
            return 0.0
        return self._before[lane][k] + min(t, ends[k]) - starts[k]


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted spans joined where they overlap (a matching op inside another)."""
    out: list[tuple[float, float]] = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def covered_time(names: Iterable[str], lanes: Iterable[int], starts: Iterable[float],
                 spans: Iterable[float], is_cpu: Iterable[bool],
                 pattern: LinearRegex) -> CoveredTime:
    """The spans (start, start + inclusive time) of the CPU ops whose name
    matches ``pattern``, per thread."""
    by_lane: dict[int, list[tuple[float, float]]] = defaultdict(list)
    found: dict[str, bool] = {}
    for name, lane, start, span, cpu in zip(names, lanes, starts, spans, is_cpu):
        if not cpu:
            continue
        hit = found.get(name)
        if hit is None:
            hit = found[name] = matches(pattern, name)
        if hit:
            by_lane[lane].append((float(start), float(start) + span))
    return CoveredTime(by_lane)

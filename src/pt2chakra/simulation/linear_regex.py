"""Regular expressions searched in time linear in the text (RE2's way, in Python).

Python's ``re`` backtracks: ``(a+)+$`` on a name of 30 ``a``'s and one ``b``
takes seconds and on 1024 of them longer than the universe, and ``.*forward``
is quadratic in the name. ``--cpu-scale-ops`` matches a user's pattern
against op names read from a trace, so it uses this instead::

    p = LinearRegex(r"aten::(conv|linear).*backward")
    p.search("aten::linear_backward")   # True

The pattern is parsed by Python's own parser (same syntax, flags, classes),
turned into Thompson's automaton, and searched with one pass over the text,
its deterministic states built as they are met and cached. The work is at
most ``MAX_STATES`` automaton steps per character of the text (and, once a
state is cached, one dictionary look-up). What needs backtracking (back
references, look-arounds, atomic groups, possessive repeats, conditionals)
is refused in one line; so is a pattern whose automaton would have more
than ``MAX_STATES`` states (``a{1000}{1000}``).
"""

from __future__ import annotations

import importlib
import re
from typing import Any, NamedTuple

# Python's own regular-expression parser and one-character compiler (named
# ``sre_*`` before Python 3.11).
try:
    _parser: Any = importlib.import_module("re._parser")
    _compiler: Any = importlib.import_module("re._compiler")
    _c: Any = importlib.import_module("re._constants")
except ImportError:  # Python 3.10
    _parser = importlib.import_module("sre_parse")
    _compiler = importlib.import_module("sre_compile")
    _c = importlib.import_module("sre_constants")

# The automaton's size bound: a repeat count is copied out, so
# ``(ab){50}`` costs ~100 states; real op-name patterns need tens.
MAX_STATES = 5000
# Cached deterministic steps before the cache starts over (memory bound;
# each entry is a small frozenset).
MAX_CACHED_STEPS = 20000

# State kinds.
_CHAR, _SPLIT, _AT, _MATCH = range(4)
_REFUSED = {getattr(_c, name): what for name, what in (
    ("GROUPREF", "back references"), ("GROUPREF_EXISTS", "conditional groups"),
    ("ASSERT", "look-arounds"), ("ASSERT_NOT", "look-arounds"),
    ("ATOMIC_GROUP", "atomic groups"), ("POSSESSIVE_REPEAT", "possessive repeats"))
    if hasattr(_c, name)}

_ASSERTIONS = frozenset({_c.AT_BEGINNING, _c.AT_BEGINNING_STRING, _c.AT_END, _c.AT_END_STRING,
                         _c.AT_BOUNDARY, _c.AT_NON_BOUNDARY})


class Unsupported(ValueError):
    """The pattern needs what a linear-time search cannot do (one line)."""


class _State:
    __slots__ = ("kind", "test", "at", "multiline", "out", "out2")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.test: re.Pattern[str] | None = None  # _CHAR: one character's test
        self.at: Any = None  # _AT: the assertion's code
        self.multiline = False
        self.out = -1
        self.out2 = -1


class _Where(NamedTuple):
    """What the zero-width assertions may ask about a position."""

    start: bool
    end: bool
    end_or_final_newline: bool
    line_start: bool
    line_end: bool
    boundary: bool


class LinearRegex:
    """``pattern``, searched in linear time (``search``)."""

    def __init__(self, pattern: str) -> None:
        parsed = _parser.parse(pattern)  # re.error for bad syntax, as re.compile
        self._flags = parsed.state.flags
        self._ascii = bool(self._flags & (re.ASCII | re.LOCALE))
        self._state = parsed.state
        self._states: list[_State] = []
        match = self._new(_MATCH)
        self._start = self._seq(list(parsed), match, ())
        # No assertion can hold strictly inside the text (no \b, \B, nor a
        # multi-line ^ or $): there, every position is alike (``_INSIDE``).
        self._plain_inside = not any(
            s.kind == _AT and (s.at in (_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY) or s.multiline)
            for s in self._states)
        self._inside: dict[tuple[frozenset[int], str], frozenset[int]] = {}
        self._closures: dict[tuple[frozenset[int], _Where], frozenset[int]] = {}
        self._steps: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    @property
    def states(self) -> int:
        return len(self._states)

    # -- building the automaton (backwards: each piece gets what follows) --

    def _new(self, kind: int) -> int:
        if len(self._states) >= MAX_STATES:
            raise Unsupported(f"the pattern needs more than {MAX_STATES} automaton states")
        self._states.append(_State(kind))
        return len(self._states) - 1

    def _seq(self, items: list[tuple[Any, Any]], nxt: int, scopes: tuple[Any, ...]) -> int:
        for op, av in reversed(items):
            nxt = self._item(op, av, nxt, scopes)
        return nxt

    def _item(self, op: Any, av: Any, nxt: int, scopes: tuple[Any, ...]) -> int:
        if op in _REFUSED:
            raise Unsupported(f"{_REFUSED[op]} need a backtracking search")
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return self._char(op, av, nxt, scopes)
        if op is _c.SUBPATTERN:
            _group, add, remove, body = av
            inner = scopes + ((add, remove),) if add or remove else scopes
            return self._seq(list(body), nxt, inner)
        if op is _c.BRANCH:
            alternatives = [self._seq(list(b), nxt, scopes) for b in av[1]]
            start = alternatives[-1]
            for alt in reversed(alternatives[:-1]):
                split = self._new(_SPLIT)
                self._states[split].out, self._states[split].out2 = alt, start
                start = split
            return start
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            return self._repeat(av, nxt, scopes)
        if op is _c.AT:
            if av not in _ASSERTIONS:
                raise Unsupported(f"{av} is not supported")
            state = self._new(_AT)
            self._states[state].at, self._states[state].out = av, nxt
            self._states[state].multiline = bool(self._scoped_flags(scopes) & re.MULTILINE)
            return state
        raise Unsupported(f"{op} is not supported")

    def _repeat(self, av: Any, nxt: int, scopes: tuple[Any, ...]) -> int:
        low, high, body = av
        body = list(body)
        if high is _c.MAXREPEAT:  # body*: a split that loops back through the body
            loop = self._new(_SPLIT)
            self._states[loop].out = self._seq(body, loop, scopes)
            self._states[loop].out2 = nxt
            nxt = loop
        else:
            for _ in range(high - low):  # each optional copy
                split = self._new(_SPLIT)
                self._states[split].out = self._seq(body, nxt, scopes)
                self._states[split].out2 = nxt
                nxt = split
        for _ in range(low):
            nxt = self._seq(body, nxt, scopes)
        return nxt

    def _scoped_flags(self, scopes: tuple[Any, ...]) -> int:
        flags = self._flags
        for add, remove in scopes:
            flags = (flags | add) & ~remove
        return flags

    def _char(self, op: Any, av: Any, nxt: int, scopes: tuple[Any, ...]) -> int:
        """A one-character test, compiled by ``re`` itself from the parsed
        item (so case folding, classes and ``.``'s newline rule are Python's)."""
        item: Any = _parser.SubPattern(self._state, [(op, av)])
        for add, remove in reversed(scopes):
            item = _parser.SubPattern(self._state, [(_c.SUBPATTERN, (None, add, remove, item))])
        state = self._new(_CHAR)
        self._states[state].test = _compiler.compile(item, self._flags)
        self._states[state].out = nxt
        return state

    # -- searching --

    def search(self, text: str) -> bool:
        """Does the pattern match anywhere in ``text``? One cached step per
        character inside the text; the positions where an assertion may
        hold (its ends, and every one for ``\\b`` or multi-line ``^ $``)
        take the longer way."""
        n = len(text)
        start = frozenset({self._start})
        current = self._closure(start, _where(text, 0, n, self._ascii))
        for pos in range(n):
            if 0 in current:  # state 0 is the match
                return True
            ch = text[pos]
            if self._plain_inside and 0 < pos + 1 < n - 1:
                current = self._next_inside(current, ch)
            else:
                current = self._closure(self._step(current, ch) | start,
                                        _where(text, pos + 1, n, self._ascii))
        return 0 in current

    def _next_inside(self, states: frozenset[int], ch: str) -> frozenset[int]:
        """The step to a position inside the text (where no assertion of a
        ``_plain_inside`` pattern holds), with a new search started there."""
        key = (states, ch)
        got = self._inside.get(key)
        if got is None:
            if len(self._inside) >= MAX_CACHED_STEPS:
                self._inside.clear()
            got = self._inside[key] = self._closure(self._step(states, ch) | {self._start},
                                                    _INSIDE)
        return got

    def _step(self, states: frozenset[int], ch: str) -> frozenset[int]:
        key = (states, ch)
        got = self._steps.get(key)
        if got is None:
            if len(self._steps) >= MAX_CACHED_STEPS:
                self._steps.clear()
            got = self._steps[key] = frozenset(
                s.out for s in map(self._states.__getitem__, states)
                if s.kind == _CHAR and s.test is not None and s.test.match(ch))
        return got

    def _closure(self, states: frozenset[int], where: _Where) -> frozenset[int]:
        """The states reachable without reading a character; only character
        tests and the match are kept (all a step needs)."""
        key = (states, where)
        got = self._closures.get(key)
        if got is not None:
            return got
        seen: set[int] = set()
        kept: set[int] = set()
        todo = list(states)
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            s = self._states[i]
            if s.kind in (_CHAR, _MATCH):
                kept.add(i)
            elif s.kind == _SPLIT:
                todo += (s.out, s.out2)
            elif s.kind == _AT and _holds(s.at, s.multiline, where):
                todo.append(s.out)
        if len(self._closures) >= MAX_CACHED_STEPS:
            self._closures.clear()
        got = self._closures[key] = frozenset(kept)
        return got


# A position strictly inside the text, for a pattern whose assertions can
# only hold at its ends.
_INSIDE = _Where(False, False, False, False, False, False)


def _is_word(ch: str, ascii_only: bool) -> bool:
    return bool(ch) and (ch.isalnum() or ch == "_") and (ch.isascii() or not ascii_only)


def _where(text: str, pos: int, n: int, ascii_only: bool) -> _Where:
    before = text[pos - 1] if pos else ""
    after = text[pos] if pos < n else ""
    return _Where(start=pos == 0, end=pos == n,
                  end_or_final_newline=pos == n or (pos == n - 1 and after == "\n"),
                  line_start=pos == 0 or before == "\n", line_end=pos == n or after == "\n",
                  boundary=_is_word(before, ascii_only) != _is_word(after, ascii_only))


def _holds(at: Any, multiline: bool, where: _Where) -> bool:
    if at is _c.AT_BEGINNING:
        return where.line_start if multiline else where.start
    if at is _c.AT_BEGINNING_STRING:
        return where.start
    if at is _c.AT_END:
        return where.line_end if multiline else where.end_or_final_newline
    if at is _c.AT_END_STRING:
        return where.end
    if where.start and where.end:  # Python's \b and \B both fail on an empty text
        return False
    if at is _c.AT_BOUNDARY:
        return where.boundary
    return not where.boundary  # AT_NON_BOUNDARY (the only one left, see _ASSERTIONS)  # AT_NON_BOUNDARY (the only one left, see _ASSERTIONS)

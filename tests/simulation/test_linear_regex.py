"""``linear_regex``: the same answers as Python's ``re.search``, in time
linear in the text (the ``--cpu-scale-ops`` rule, issue 25 class 6)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.simulation.linear_regex import MAX_STATES, LinearRegex, Unsupported

ATOMS = ["a", "b", "-", ".", "[ab]", "[^a]", r"\w", r"\d", r"\s", "^", "$", r"\b", r"\B", r"\A",
         r"\Z", "[a-c]", "A"]


def _pattern(depth: int) -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    if depth == 0:
        return atom
    inner = _pattern(depth - 1)
    return st.one_of(
        atom,
        st.lists(inner, min_size=1, max_size=3).map("".join),
        st.tuples(inner, inner).map(lambda ab: f"(?:{ab[0]}|{ab[1]})"),
        inner.map(lambda p: f"({p})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "*?", "{2}", "{0,2}", "{1,3}"])).map(
            lambda pq: f"(?:{pq[0]}){pq[1]}"),
    )


FLAGS = st.sampled_from(["", "(?i)", "(?m)", "(?s)", "(?a)", "(?ms)"])
TEXT = st.text(alphabet="abAB-1 \n_é", max_size=10)


@settings(max_examples=400, deadline=None)
@given(FLAGS, _pattern(3), TEXT)
def test_same_answer_as_re_search(flags: str, pattern: str, text: str) -> None:
    full = flags + pattern
    try:
        expected = re.search(full, text) is not None
    except re.error:
        return  # e.g. a repeat of an assertion: refused alike
    assert LinearRegex(full).search(text) == expected, (full, text)


@pytest.mark.parametrize(("pattern", "text", "found"), [
    (r"aten::(conv|linear).*backward", "aten::linear_backward", True),
    (r"(?i:FOO)bar", "fooBAR", False),
    (r"(?i:FOO)bar", "foobar", True),
    (r"^ab$", "ab\n", True),
    (r"(?m)^b$", "a\nb\nc", True),
    (r"é\b", "café au lait", True),
    (r"(?a)é\b", "café", False),
    (r"é\b", "café", True),
])
def test_flags_and_assertions(pattern: str, text: str, found: bool) -> None:
    assert LinearRegex(pattern).search(text) is found is (re.search(pattern, text) is not None)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"a(?=b)", r"(?<!x)a", r"(?>a*)a", r"a*+",
                                     r"(a)?(?(1)b|c)", "(?:a{1000}){1000}"])
def test_what_needs_backtracking_or_is_huge_is_refused(pattern: str) -> None:
    with pytest.raises(Unsupported):
        LinearRegex(pattern)


def _steps_taken(regex: LinearRegex, text: str) -> int:
    """How many positions a search visits: each is one cached step, or one
    closure over at most ``regex.states`` states (calls made inside another
    are not counted again)."""
    calls = depth = 0

    def counted(method: Callable[..., frozenset[int]]) -> Callable[..., frozenset[int]]:
        def call(*args: object) -> frozenset[int]:
            nonlocal calls, depth
            calls += depth == 0
            depth += 1
            try:
                return method(*args)
            finally:
                depth -= 1
        return call

    regex._next_inside = counted(regex._next_inside)  # type: ignore[method-assign]
    regex._closure = counted(regex._closure)  # type: ignore[method-assign]
    regex.search(text)
    return calls


@pytest.mark.parametrize(("pattern", "text"), [
    ("(a+)+$", "a" * 1024 + "b"),  # exponential for a backtracking search
    (".*forward", "x" * 100_000),  # quadratic for it (23 s per name before)
    ("(a|aa)*c", "a" * 5000),
    ("(.*){1,20}z", "y" * 2000),
])
def test_work_is_one_step_per_character(pattern: str, text: str) -> None:
    regex = LinearRegex(pattern)
    assert regex.states <= MAX_STATES
    t0 = time.perf_counter()
    assert _steps_taken(regex, text) == len(text) + 1  # no match: every position, once
    assert time.perf_counter() - t0 < 30  # generous: a backtracking search would not end


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["(a+)+$", "(a*)*b", "(a|a)*c", ".*.*.*x"]), st.integers(0, 3000))
def test_steps_never_exceed_the_text_length(pattern: str, n: int) -> None:
    assert _steps_taken(LinearRegex(pattern), "a" * n + "!") <= n + 2

"""Which node of one run is which node of the other: a key per node that is
equal on both runs when they recorded the same step.

* a CPU op: its name, its call path (the names of its callers, from the
  ``caller`` dependencies) and its occurrence among the ops of that name and
  path on its rank;
* a device op (kernel, copy): the key of the op that launched it (the
  ``launch`` dependency), its name and its occurrence under that op;
* a communication node: its rendezvous key (``rules.rendezvous``: process
  group and sequence number, or position in the group), which is how the
  ranks of one run meet too.

Every key holds the rank: ops on two ranks are two things. Names are taken
by role where two recordings of one program differ (``normalised``): a step
annotation without its number (``ProfilerStep#9`` of one recording is
``ProfilerStep#20`` of another) and Python frames without the object
addresses in them (``... of type object at 0x7bcd86e1df60>``, another in
every process). ``match_rules`` says which rule matched each pair of nodes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, NamedTuple

from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES, EdgeKind
from pt2chakra.diff.load import RankTrace
from pt2chakra.rules.rendezvous import RendezvousKey

CALLER_KIND = EDGE_KIND_NAMES[EdgeKind.CALLER]
LAUNCH_KIND = EDGE_KIND_NAMES[EdgeKind.LAUNCH]
# Call path levels shown in a label (the full path is in the key).
LABEL_CALLERS = 2

# A node key: (kind, rank, name, path or launcher, occurrence) or
# (kind, rank, name, rendezvous key) for communication.
NodeKey = tuple[Any, ...]

# How two nodes were matched: by their names as recorded, or by a name
# taken by role (``normalised``).
EXACT, STEP_ROLE, ADDRESS = "exact", "step by role", "addresses normalised"
MATCH_RULES = (EXACT, STEP_ROLE, ADDRESS)
_STEP = re.compile(r"^ProfilerStep#\d+$")
STEP_BY_ROLE = "ProfilerStep#*"
# An object address in a Python frame's name: 0x and at least 6 hex digits
# (shorter hex in names are values, e.g. a flag 0x1).
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
ADDRESS_BY_ROLE = "0x?"


def normalised(name: str) -> tuple[str, str]:
    """``name`` taken by role, and the rule that changed it (``EXACT`` when
    none did): a step annotation without its number, object addresses out."""
    if _STEP.match(name):
        return STEP_BY_ROLE, STEP_ROLE
    if "0x" in name:
        taken = _ADDRESS.sub(ADDRESS_BY_ROLE, name)
        if taken != name:
            return taken, ADDRESS
    return name, EXACT


class RankKeys(NamedTuple):
    """A key per node, and per key what its names were as recorded (equal on
    both runs: matched exactly) and the rule that took a name by role."""

    keys: list[NodeKey]
    recorded: dict[NodeKey, Any]
    rule: dict[NodeKey, str]


def node_keys(trace: RankTrace) -> list[NodeKey]:
    """A key per node of ``trace`` (see the module docstring)."""
    return rank_keys(trace).keys


def rank_keys(trace: RankTrace) -> RankKeys:
    """``node_keys`` with what ``match_rules`` needs."""
    n = len(trace.ids)
    caller, launcher = _callers_and_launchers(trace)
    taken = {name: normalised(name) for name in set(trace.names)}
    names = [taken[name][0] for name in trace.names]
    changed = [taken[name][1] for name in trace.names]
    paths: list[tuple[str, ...] | None] = [None] * n
    raw_paths: list[tuple[str, ...] | None] = [None] * n
    keys: list[NodeKey | None] = [None] * n
    recorded: dict[NodeKey, Any] = {}
    rule: dict[NodeKey, str] = {}
    seen: dict[tuple[Any, ...], int] = defaultdict(int)
    rank, raw, is_cpu, comm_key = trace.rank, trace.names, trace.is_cpu, trace.comm_key
    for _start, _id, i in sorted(zip(trace.start, trace.ids, range(n))):
        comm = comm_key.get(i)
        if comm is not None:
            key: NodeKey = ("comm", rank, names[i], tuple(comm))
            keys[i] = key
            recorded[key], rule[key] = raw[i], changed[i]
            continue
        how = changed[i]
        if is_cpu[i]:
            path = paths[i]
            if path is None:
                path = _path(i, caller, names, paths)
            ident: tuple[Any, ...] = ("op", rank, names[i], path)
            as_recorded: Any = (raw[i], _path(i, caller, raw, raw_paths))
            if how == EXACT and as_recorded[1] != path:
                how = _rule_of(as_recorded[1], taken)
        else:
            parent = launcher[i]
            above = keys[parent] if parent >= 0 else None
            ident = ("kernel", rank, names[i], above)
            as_recorded = (raw[i], recorded.get(above) if above is not None else None)
            if how == EXACT and above is not None:
                how = rule.get(above, EXACT)
        occurrence = seen[ident]
        seen[ident] = occurrence + 1
        key = (*ident, occurrence)
        keys[i] = key
        recorded[key], rule[key] = as_recorded, how
    out = [k if k is not None else ("op", rank, names[i], (), i) for i, k in enumerate(keys)]
    return RankKeys(out, recorded, rule)


def _rule_of(path: tuple[str, ...], taken: dict[str, tuple[str, str]]) -> str:
    """The rule that took a name of a call path by role (the first one)."""
    for name in path:
        how = taken.get(name, (name, EXACT))[1]
        if how != EXACT:
            return how
    return EXACT


def match_rules(a: list[RankKeys], b: list[RankKeys]) -> dict[str, int]:
    """How many nodes of A matched a node of B, by rule: their names as
    recorded (``EXACT``), or a name taken by role on either side."""
    recorded_a = {k: v for r in a for k, v in r.recorded.items()}
    rule_a = {k: v for r in a for k, v in r.rule.items()}
    counts = dict.fromkeys(MATCH_RULES, 0)
    for r in b:
        for key, as_recorded in r.recorded.items():
            if key not in recorded_a:
                continue
            if recorded_a[key] == as_recorded:
                counts[EXACT] += 1
            else:
                how = r.rule[key] if r.rule[key] != EXACT else rule_a[key]
                counts[how if how != EXACT else ADDRESS] += 1
    return counts


def _callers_and_launchers(trace: RankTrace) -> tuple[list[int], list[int]]:
    """Each node's caller and launching op (their index, -1 for none): the
    last dependency of that kind."""
    n = len(trace.ids)
    caller = [-1] * n
    launcher = [-1] * n
    for i, deps in enumerate(trace.deps):
        for d, kind in deps:
            if kind == CALLER_KIND:
                caller[i] = d
            elif kind == LAUNCH_KIND:
                launcher[i] = d
    return caller, launcher


def _path(i: int, caller: list[int], names: list[str],
          paths: list[tuple[str, ...] | None]) -> tuple[str, ...]:
    """Names of ``i``'s callers, outermost first (memoised in ``paths``;
    iterative, for deep stacks; a caller cycle ends the path)."""
    chain: list[int] = []
    cur = i
    while cur >= 0 and paths[cur] is None and len(chain) <= len(names):
        chain.append(cur)
        cur = caller[cur]
    for node in reversed(chain):
        above = caller[node]
        known = paths[above] if above >= 0 else None
        paths[node] = (*known, names[above]) if known is not None else ()
    result = paths[i]
    return result if result is not None else ()


def label_of(key: NodeKey) -> str:
    """A short readable name for a key (rank, name, nearest callers)."""
    kind, rank, name = key[0], key[1], key[2]
    if kind == "comm":
        return f"r{rank} {name} [{RendezvousKey(*key[3]).describe()}]"
    occurrence = key[-1]
    if kind == "kernel":
        above = key[3]
        by = f" <- {above[2]}" if above else ""
        return f"r{rank} {name}{by} #{occurrence}"
    path = key[3]
    callers = " < ".join(reversed(path[-LABEL_CALLERS:])) if path else ""
    where = f" < {callers}" if callers else ""
    return f"r{rank} {name}{where} #{occurrence}"

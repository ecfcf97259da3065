"""Step(B) - step(A), attributed: each run's critical-path charges summed per
aligned key, and the change of each.

Each run's charges tile its step, so the changes add up to the step
difference; the residual says by how much they do not (float rounding).
A node whose key the other run lacks is reported apart, as in one run only.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Any

from pt2chakra.diff.align import NodeKey, RankKeys, label_of, match_rules, rank_keys
from pt2chakra.diff.load import Run
from pt2chakra.diff.model import (
    CATEGORIES,
    GAP,
    ONLY_IN_A,
    ONLY_IN_B,
    Attribution,
    CategoryTotal,
    CollectiveArrival,
    DiffResult,
    RunStep,
)
from pt2chakra.diff.path import NONE, step_charges
from pt2chakra.rules.rendezvous import RendezvousKey

STEP_EDGE = "step edge"  # a gap before the first node or after the last

# (category, key of the node, or a step-edge marker) -> microseconds
Tally = dict[tuple[str, Any], float]


def run_keys(run: Run) -> dict[int, list[NodeKey]]:
    """rank -> each node's key."""
    return {rank: k.keys for rank, k in _run_keys(run).items()}


def _run_keys(run: Run) -> dict[int, RankKeys]:
    return {r.rank: rank_keys(r) for r in run.ranks}


def tally(run: Run, keys: dict[int, list[NodeKey]]) -> Tally:
    """The run's critical-path charges summed per (category, node key)."""
    out: Tally = defaultdict(float)
    for category, rank, node, us in step_charges(run):
        key = keys[rank][node] if node != NONE else (STEP_EDGE, rank)
        out[(category, key)] += us
    return out


def attribute(a: Run, b: Run) -> DiffResult:
    """The typed comparison of two loaded runs."""
    full_a, full_b = _run_keys(a), _run_keys(b)
    keys_a = {rank: k.keys for rank, k in full_a.items()}
    keys_b = {rank: k.keys for rank, k in full_b.items()}
    known_a = {k for ks in keys_a.values() for k in ks}
    known_b = {k for ks in keys_b.values() for k in ks}
    tally_a, tally_b = tally(a, keys_a), tally(b, keys_b)
    difference = b.step_us - a.step_us
    rows = [_row(charged[0], charged[1], tally_a.get(charged, 0.0), tally_b.get(charged, 0.0),
                 known_a, known_b, difference) for charged in tally_a.keys() | tally_b.keys()]
    # largest change first, then by category and label: three stable passes
    # (C-level keys) sort as the one tuple key would
    rows.sort(key=attrgetter("label"))
    rows.sort(key=attrgetter("category"))
    rows.sort(key=lambda r: -abs(r.delta_us))
    attributed = _exact_sum(r.delta_us for r in rows)
    residual = difference - attributed
    matched = len(known_a & known_b)
    return DiffResult(
        a=_run_step(a), b=_run_step(b), difference_us=difference, attributed_us=attributed,
        residual_us=residual, residual_pct=_share(residual, difference),
        categories=_totals(rows, difference), rows=rows,
        collectives=collective_arrivals(a, b),
        matched_nodes=matched, only_in_a_nodes=len(known_a) - matched,
        only_in_b_nodes=len(known_b) - matched,
        matched_by_rule=match_rules(list(full_a.values()), list(full_b.values())))


def _row(category: str, key: Any, a_us: float, b_us: float, known_a: set[NodeKey],
         known_b: set[NodeKey], difference: float) -> Attribution:
    if key[0] == STEP_EDGE:
        label, rank = f"r{key[1]} {STEP_EDGE}", key[1]
    else:
        label, rank = label_of(key), key[1]
        if category == GAP:
            label = f"before {label}"
        elif key not in known_b:
            category = ONLY_IN_A
        elif key not in known_a:
            category = ONLY_IN_B
    delta = b_us - a_us
    return Attribution(category=category, label=label, rank=rank, a_us=a_us, b_us=b_us,
                       delta_us=delta, share_pct=_share(delta, difference))


def _share(part: float, whole: float) -> float | None:
    return part / whole * 100 if whole else None


def _exact_sum(values: Iterable[float]) -> float:
    return math.fsum(values)


def _totals(rows: Sequence[Attribution], difference: float) -> list[CategoryTotal]:
    by_category: dict[str, list[Attribution]] = {category: [] for category in CATEGORIES}
    for r in rows:
        by_category[r.category].append(r)
    out = []
    for category, mine in by_category.items():
        a_us = _exact_sum(r.a_us for r in mine)
        b_us = _exact_sum(r.b_us for r in mine)
        out.append(CategoryTotal(category=category, a_us=a_us, b_us=b_us, delta_us=b_us - a_us,
                                 share_pct=_share(b_us - a_us, difference)))
    return out


def _run_step(run: Run) -> RunStep:
    return RunStep(sources=[r.source for r in run.ranks], ranks=len(run.ranks),
                   step_us=run.step_us, step_definition=run.step_definition,
                   step_rank=run.step_rank().rank, setting=run.ranks[0].setting)


def arrivals(run: Run) -> dict[RendezvousKey, tuple[int, float, str]]:
    """Each collective of the run (rendezvous key): the rank that started it
    last, the time the others waited for that rank (summed, on the run's
    common axis: ``Run.arrivals``) and its name."""
    names = {key: r.names[i] for r in run.ranks for i, key in r.comm_key.items()}
    return {key: (last.last_rank, last.others_wait_us, names[key])
            for key, last in run.arrivals.items()}


def collective_arrivals(a: Run, b: Run) -> list[CollectiveArrival]:
    """The straggler of each collective of the two runs (multi-rank runs
    only), the ones whose waits changed most first."""
    if len(a.ranks) < 2 and len(b.ranks) < 2:
        return []
    in_a, in_b = arrivals(a), arrivals(b)
    out = []
    for key in set(in_a) | set(in_b):
        ra, wa, name = in_a.get(key, (None, 0.0, ""))
        rb, wb, name_b = in_b.get(key, (None, 0.0, ""))
        label = f"{name or name_b} [{key.describe()}]"
        out.append(CollectiveArrival(label=label, last_rank_a=ra, others_wait_a_us=wa,
                                     last_rank_b=rb, others_wait_b_us=wb))
    out.sort(key=lambda c: (-abs(c.others_wait_b_us - c.others_wait_a_us), c.label))
    return out

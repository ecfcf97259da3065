"""Typed results of ``pt2chakra diff``."""

from __future__ import annotations

from typing import Any

import msgspec

# What a piece of the step is charged to: an op's exclusive CPU time, a device
# op, a collective's wait for its last peer or its transfer, a gap; and what
# only one run has. In the order reports list them.
COMPUTE, KERNEL, WAIT, TRANSFER, GAP = "compute", "kernel", "collective_wait", \
    "collective_transfer", "cpu_gap"
ONLY_IN_A, ONLY_IN_B = "only_in_a", "only_in_b"
CATEGORIES = (COMPUTE, KERNEL, WAIT, TRANSFER, GAP, ONLY_IN_A, ONLY_IN_B)
CATEGORY_TITLES = {
    "compute": "compute by op (exclusive CPU time)",
    "kernel": "kernels and copies (by launching op)",
    "collective_wait": "collectives: waiting for the last peer",
    "collective_transfer": "collectives: transfer",
    "cpu_gap": "CPU gaps and latencies (before the named node)",
    "only_in_a": "in A only",
    "only_in_b": "in B only",
}


class Attribution(msgspec.Struct, frozen=True):
    """One thing's time on the critical path in each run, and its change."""

    category: str
    label: str
    rank: int
    a_us: float
    b_us: float
    delta_us: float  # b_us - a_us
    share_pct: float | None  # of the step difference (None when it is 0)


class CategoryTotal(msgspec.Struct, frozen=True):
    category: str
    a_us: float
    b_us: float
    delta_us: float
    share_pct: float | None


class CollectiveArrival(msgspec.Struct, frozen=True):
    """A collective in both runs: the rank that arrived last (the straggler)
    and how long the other ranks waited for it, summed."""

    label: str
    last_rank_a: int | None
    others_wait_a_us: float
    last_rank_b: int | None
    others_wait_b_us: float


class RunStep(msgspec.Struct, frozen=True, omit_defaults=True):
    """One side of the comparison."""

    sources: list[str]
    ranks: int
    step_us: float
    step_definition: str  # period or span (conventions.STEP_DEFINITION_ATTR)
    step_rank: int  # the rank whose critical path was walked
    # a replay written by simulate --write-et: its setting (e.g. the profiler's
    # cost taken out, and the step with it in); "" for a recording
    setting: str = ""


class DiffResult(msgspec.Struct, frozen=True):
    """Step(B) - step(A), attributed. ``attributed_us + residual_us ==
    difference_us``; the residual is what the critical paths did not cover
    (rounding only, by construction: the charges tile each step)."""

    a: RunStep
    b: RunStep
    difference_us: float
    attributed_us: float
    residual_us: float
    residual_pct: float | None  # of the difference
    categories: list[CategoryTotal]
    rows: list[Attribution]  # every attributed thing, largest |delta| first
    collectives: list[CollectiveArrival] = []
    matched_nodes: int = 0
    only_in_a_nodes: int = 0
    only_in_b_nodes: int = 0
    # matched nodes by the rule that matched them (align.match_rules)
    matched_by_rule: dict[str, int] = {}

    def top(self, category: str, n: int) -> list[Attribution]:
        """The ``n`` rows of ``category`` that changed most."""
        return [r for r in self.rows if r.category == category][:n]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out

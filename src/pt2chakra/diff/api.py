"""``pt2chakra.diff``: what changed between two recordings of one training
step, or between a prediction (a replay written back as ``.et``) and the
measured run of that setting.

    from pt2chakra.diff import diff
    result = diff(["a.0.et", "a.1.et"], ["b.0.et", "b.1.et"])
    print(format_diff(result, top=10))
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pt2chakra.diff.align import normalised
from pt2chakra.diff.attribute import attribute
from pt2chakra.diff.load import Run, load_run
from pt2chakra.diff.model import CATEGORIES, CATEGORY_TITLES, DiffResult
from pt2chakra.errors import InputError
from pt2chakra.files import gc_paused

# Two recordings of one step share nearly every op name (two DLRM or gloo
# runs, a replay and its source: all of them); two different models share
# the framework's plumbing only. Below this share of op names in common
# (over the names of either), a rank pair is refused as two different jobs.
MIN_SHARED_NAMES = 0.5
DEFAULT_TOP = 10
# Collectives listed in the straggler table of the text report.
TOP_COLLECTIVES = 10


def diff(a: Sequence[str | os.PathLike[str]], b: Sequence[str | os.PathLike[str]],
         force: bool = False) -> DiffResult:
    """Compare run A (one ``.et`` per rank) with run B: B's step minus A's,
    attributed to ops, kernels, collectives (wait vs transfer), CPU gaps and
    what only one run has. Raises ``InputError`` for traces of different jobs,
    and for a run whose files cannot be one job (``chakra.ranks``) unless
    ``force``."""
    with gc_paused():  # columns and keys hold no cycles: the collector's passes find nothing
        run_a, run_b = load_run("A", a, force), load_run("B", b, force)
        refuse_other_job(run_a, run_b)
        return attribute(run_a, run_b)


def refuse_other_job(a: Run, b: Run) -> None:
    """One line when the two runs are not the same job: other ranks, or a
    rank whose op names mostly differ."""
    ranks_a, ranks_b = sorted(a.by_rank), sorted(b.by_rank)
    if ranks_a != ranks_b:
        raise InputError(b.ranks[0].source, f"not the same job as {a.ranks[0].source}: ranks "
                         f"{_ranks(ranks_b)} against {_ranks(ranks_a)}")
    for rank in ranks_a:
        ra, rb = a.by_rank[rank], b.by_rank[rank]
        # names by role: another recording's step numbers and addresses differ
        names_a = {normalised(n)[0] for n in set(ra.names)}
        names_b = {normalised(n)[0] for n in set(rb.names)}
        shared = len(names_a & names_b) / max(1, len(names_a | names_b))
        if shared < MIN_SHARED_NAMES:
            raise InputError(rb.source, f"not the same job as {ra.source}: only "
                             f"{shared:.0%} of op names in common (rank {rank})")


def _ranks(ranks: Sequence[int]) -> str:
    return ",".join(map(str, ranks)) if len(ranks) <= 8 else f"{len(ranks)} ranks"


def _prediction_note(setting: str) -> str:
    """A predicted ``.et``'s setting in the header (the step with the
    profiler's cost in, for one replayed without it); nothing for a recording."""
    return f"; a replay: {setting}" if setting else ""


def format_diff(result: DiffResult, top: int = DEFAULT_TOP) -> str:
    """The text report: steps, totals per category, the top rows of each."""
    a, b = result.a, result.b
    lines = [
        f"A: {_sources(a.sources)}: step {a.step_us:.0f} us ({a.step_definition}; "
        f"critical path on rank {a.step_rank}{_prediction_note(a.setting)})",
        f"B: {_sources(b.sources)}: step {b.step_us:.0f} us ({b.step_definition}; "
        f"critical path on rank {b.step_rank}{_prediction_note(b.setting)})",
        f"difference B - A: {result.difference_us:+.0f} us"
        f"{_pct_of(result.difference_us, a.step_us, ' of A')}; attributed "
        f"{result.attributed_us:+.1f} us, residual {result.residual_us:+.3f} us"
        f"{_pct(result.residual_pct)}",
        f"nodes: {result.matched_nodes} matched{_by_rule(result.matched_by_rule)}, "
        f"{result.only_in_a_nodes} in A only, {result.only_in_b_nodes} in B only",
        "",
        f"{'category':<24}{'A us':>12}{'B us':>12}{'B - A us':>12}{'% of diff':>11}",
    ]
    for c in result.categories:
        lines.append(f"{c.category:<24}{c.a_us:>12.0f}{c.b_us:>12.0f}{c.delta_us:>+12.0f}"
                     f"{_share(c.share_pct):>11}")
    for category in CATEGORIES:
        rows = [r for r in result.top(category, top) if r.delta_us or r.a_us or r.b_us]
        if not rows:
            continue
        lines += ["", f"{CATEGORY_TITLES[category]}, top {len(rows)}:",
                  f"{'B - A us':>11}{'% of diff':>11}{'A us':>10}{'B us':>10}  what"]
        for r in rows:
            lines.append(f"{r.delta_us:>+11.1f}{_share(r.share_pct):>11}{r.a_us:>10.1f}"
                         f"{r.b_us:>10.1f}  {r.label}")
    if result.collectives:
        lines += ["", "collectives: last rank to arrive (straggler) and the others' wait for it",
                  f"{'A last':>7}{'A wait us':>11}{'B last':>8}{'B wait us':>11}  collective"]
        for s in result.collectives[:TOP_COLLECTIVES]:
            lines.append(f"{_rank(s.last_rank_a):>7}{s.others_wait_a_us:>11.0f}"
                         f"{_rank(s.last_rank_b):>8}{s.others_wait_b_us:>11.0f}  {s.label}")
    return "\n".join(lines)


def _by_rule(counts: dict[str, int]) -> str:
    shown = [f"{n} {rule}" for rule, n in counts.items() if n]
    return f" ({', '.join(shown)})" if shown else ""


def _sources(sources: Sequence[str]) -> str:
    names = [os.path.basename(s) for s in sources]
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} ranks)"


def _pct(value: float | None) -> str:
    return f" ({value:+.3f} % of the difference)" if value is not None else ""


def _pct_of(part: float, whole: float, what: str) -> str:
    return f" ({part / whole * 100:+.2f} %{what})" if whole else ""


def _share(value: float | None) -> str:
    return f"{value:+.1f} %" if value is not None else "-"


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)

"""Human-readable report of a simulation (the ``--json`` form is
``result_json``: ``SimulationResult.to_json()`` and the notes)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pt2chakra.errors import printable
from pt2chakra.rules.conventions import STEP_PERIOD, STEP_SPAN, error_pct
from pt2chakra.simulation.results import RankResult, SimulationResult

if TYPE_CHECKING:
    from pt2chakra.simulation.collective_table import CollectiveRow, SlowRankCollectives

# Why a rank replays to 0 us: said once, here, for every output (text, --json, HTML).
NO_TIMING_WHY = ("no node has a duration or a recorded time (a host execution trace "
                 "converted without --device-trace carries no timing), so there is nothing "
                 "to predict or measure; convert with --device-trace for timing")


def untimed_ranks(result: SimulationResult) -> list[RankResult]:
    """Ranks with nodes whose replay and recording both last 0 us: nothing in
    the file is timed (a step of real work is never 0 us)."""
    return [r for r in result.ranks
            if r.nodes and r.predicted_step_us == 0 and r.measured_step_us == 0]


def timing_notes(result: SimulationResult) -> list[str]:
    """One line saying which files carry no timing and why, or none."""
    untimed = untimed_ranks(result)
    if not untimed:
        return []
    files = ", ".join(f"{os.path.basename(r.source)} (rank {r.rank})" for r in untimed)
    return [f"note: {files}: {NO_TIMING_WHY}"]


# What "measured" means, per definition (conversion/step.py has the rule).
STEP_MEANINGS = {
    STEP_PERIOD: "steady-state period: from the step's start to the next ProfilerStep's start "
                 "(GPU work still pending then belongs to the next step; the previous step's "
                 "was replayed as busy streams)",
    STEP_SPAN: "span: from the step's first op start to its last GPU activity's end",
}


def step_notes(result: SimulationResult) -> list[str]:
    """One line per step definition in use: what "measured" means; for
    scaled-out files first that nothing was measured at their size."""
    untimed = {id(r) for r in untimed_ranks(result)}
    used = dict.fromkeys(r.step_definition for r in result.ranks
                         if r.nodes and id(r) not in untimed)
    scaled = result.scaled
    head = [] if scaled is None else [
        f"a prediction at {scaled.world_size} ranks from a recording of "
        f"{scaled.recorded_world_size}: no step was measured at {scaled.world_size}; "
        f"'{result.measured_label}' is the step recorded at {scaled.recorded_world_size} "
        "(the naive copy)"]
    what = "measured" if scaled is None else "recorded"
    return head + [f"{what} step = {STEP_MEANINGS.get(d, d)}" for d in used]


# The rank table's error column: "+228.23 %" fits.
ERROR_COLUMN = 9
# Collectives in the text report's straggler table: the ones the other ranks
# waited longest for; the whole list is in --json and the HTML report.
TOP_STRAGGLERS = 5
# A collective name is cut to this many characters in the table (NCCL kernel
# names carry their whole signature).
STRAGGLER_NAME_CHARS = 48


def stragglers(rows: Sequence[CollectiveRow], by_replay: bool = False) -> list[CollectiveRow]:
    """The collectives with a straggler, longest recorded wait first (the
    replay's where nothing was recorded; ``by_replay``: the replay's, as for
    a what-if, whose effect is in the replay)."""
    waited = [r for r in rows if r.measured_last_rank is not None or r.replay_last_rank is not None]
    return sorted(waited, key=lambda r: (-_wait_of(r, by_replay), r.start_us))


def _wait_of(row: CollectiveRow, by_replay: bool = False) -> float:
    if row.measured_others_wait_us is not None and not by_replay:
        return row.measured_others_wait_us
    return row.replay_others_wait_us or 0.0


def result_json(result: SimulationResult, collectives: Sequence[CollectiveRow] = (),
                slow: Sequence[SlowRankCollectives] = ()) -> dict[str, Any]:
    """``--json``: the result, the notes the text report prints and, for a
    multi-rank run, each collective's straggler (``stragglers``), and per
    straggler what-if (``slow``) the same with that rank slowed."""
    doc = result.to_json()
    doc["notes"] = timing_notes(result) + result.lone_note.splitlines()
    if len(result.ranks) > 1 and collectives:
        doc["stragglers"] = [_straggler_json(r) for r in stragglers(collectives)]
    if slow:
        doc["slow_rank_stragglers"] = [
            {"slow_rank": s.slow_rank,
             "stragglers": [_straggler_json(r) for r in stragglers(s.rows, by_replay=True)]}
            for s in slow]
    return doc


def _straggler_json(row: CollectiveRow) -> dict[str, Any]:
    return {"name": row.name, "group": row.group, "start_us": row.start_us,
            "measured_last_rank": row.measured_last_rank,
            "measured_others_wait_us": row.measured_others_wait_us,
            "replay_last_rank": row.replay_last_rank,
            "replay_others_wait_us": row.replay_others_wait_us}


def straggler_lines(rows: Sequence[CollectiveRow], top: int = TOP_STRAGGLERS,
                    what_if: str = "") -> list[str]:
    """The text table: per collective, who arrived last and how long the
    others waited, recorded and replayed (the top ``top`` by wait); with
    ``what_if`` (a slow rank's label), the replay is that what-if's."""
    shown = stragglers(rows, by_replay=bool(what_if))[:top]
    if not shown:
        return []
    replay = f" (replay: {what_if})" if what_if else ""
    by = "replayed" if what_if else "recorded"
    out = ["", f"stragglers{replay}: the last rank to reach a collective and the others' wait "
           f"for it, summed (top {len(shown)} of {len(rows)} by {by} wait)",
           f"  {'measured last':>13} {'wait us':>10} {'replay last':>12} {'wait us':>10}  collective"]
    for r in shown:
        out.append(f"  {_rank(r.measured_last_rank):>13} {_us(r.measured_others_wait_us):>10} "
                   f"{_rank(r.replay_last_rank):>12} {_us(r.replay_others_wait_us):>10}  "
                   f"{_short(r.name)} [{r.group}]")
    return out


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _short(name: str) -> str:
    name = printable(name)  # a trace's name, on a terminal
    return name if len(name) <= STRAGGLER_NAME_CHARS else name[:STRAGGLER_NAME_CHARS - 3] + "..."


def _pct(value: float | None) -> str:
    return f"{value:+.2f} %" if value is not None else "n/a"


def _shares(parts: dict[str, float], total: float) -> list[str]:
    return [f"    {name:<16} {us:>12.0f} us  {us / total * 100 if total else 0:5.1f} %"
            for name, us in parts.items() if us > 0]


def measured_collectives(align: str) -> str:
    """How measured collectives are timed (durations.py): on a shared clock
    each participant from the last arrival to its own recorded end, else the
    minimum over the participants."""
    return "measured (from the last arrival)" if align == "recorded" \
        else "measured (min over participants)"


def profiler_lines(result: SimulationResult) -> list[str]:
    """``--without-profiler``: both steps, the figure and where it came from."""
    o = result.profiler_overhead
    if o is None:
        return []
    kind = "estimated" if o.estimate else ("fitted" if o.source == "fit" else "given")
    out = ["", f"without the profiler: predicted {result.predicted_step_us:.0f} us; with it (the "
           f"replay as recorded) {o.profiled_step_us:.0f} us",
           f"  profiler overhead: {o.figure} ({kind}: {o.source_detail}), "
           f"{o.taken_out_us:.0f} us taken out of {o.ops} recorded CPU ops"]
    if o.real_step_us is not None:
        out.append(f"  real step {o.real_step_us:.0f} us: predicted "
                   f"{_pct(error_pct(result.predicted_step_us, o.real_step_us))}")
    if o.note:
        out.append(f"  {o.note}")
    return out


def format_text_report(result: SimulationResult, lanes: bool = True,
                       collectives: Sequence[CollectiveRow] = (),
                       slow: Sequence[SlowRankCollectives] = ()) -> str:
    """The text report; ``collectives`` (``collective_rows`` of the replay)
    adds the straggler table of a multi-rank run, ``slow``
    (``slow_rank_collectives``) one per straggler what-if."""
    out = []
    out.append(f"ranks: {len(result.ranks)}, start offsets: {result.align}"
               + (f", network model: {result.network_model}" if result.network_model
                  else f", collectives: {measured_collectives(result.align)}")
               + (f", {result.inferred_stream_waits} cross-stream waits inferred"
                  if result.inferred_stream_waits else ""))
    out.append("")
    err_w = max(ERROR_COLUMN, len(result.error_label))
    out.append(f"{'rank':>4}  {'predicted us':>13}  {result.measured_label + ' us':>12}  "
               f"{result.error_label:>{err_w}}  {'nodes':>6}  source")
    for r in result.ranks:
        out.append(f"{r.rank:>4}  {r.predicted_step_us:>13.0f}  {r.measured_step_us:>12.0f}  "
                   f"{_pct(r.error_pct):>{err_w}}  {r.nodes:>6}  {os.path.basename(r.source)}"
                   + (f"  ({r.unfinished} nodes never ran)" if r.unfinished else ""))
    out.append(f"{'step':>4}  {result.predicted_step_us:>13.0f}  {result.measured_step_us:>12.0f}  "
               f"{_pct(result.error_pct):>{err_w}}")
    out += step_notes(result) + timing_notes(result) + profiler_lines(result)
    if result.lone_note:
        out.append(result.lone_note)
    if lanes:
        out.append("")
        out.append("lanes (simulated): busy / idle over the rank's predicted step")
        for r in result.ranks:
            for lane in r.lanes:
                span = lane.busy_us + lane.idle_us
                out.append(f"  rank {r.rank} {lane.lane:<22} busy {lane.busy_us:>11.0f} us "
                           f"({lane.busy_us / span * 100 if span else 0:5.1f} %)  idle "
                           f"{lane.idle_us:>11.0f} us in {lane.idle_gaps} gaps, "
                           f"{lane.nodes} nodes")
    cp = result.critical_path
    if cp is not None and cp.nodes:
        out.append("")
        out.append(f"critical path: {cp.length_us:.0f} us over {cp.nodes} nodes"
                   + (f", crossing ranks {cp.rank_crossings} times" if cp.rank_crossings else ""))
        out.append("  by node type:")
        out += _shares(cp.by_node_type, cp.length_us)
        out.append("  by edge kind (the dependency that made each step critical):")
        out += _shares(cp.by_edge_kind, cp.length_us)
        if cp.top_nodes:
            out.append("  longest nodes on it:")
            for t in cp.top_nodes[:5]:
                out.append(f"    rank {t['rank']} node {t['id']} {printable(t['name'][:60])} "
                           f"({t['category']}) {t['duration_us']:.0f} us")
    if len(result.ranks) > 1:
        out += straggler_lines(collectives)
        for what in slow:
            out += straggler_lines(what.rows, what_if=what.slow_rank)
    if result.what_if:
        out.append("")
        out.append("what-if (predicted step per setting):")
        out.append(f"  {'compute':>8} {'cpu':>6} {'bandwidth':>10} {'comm streams':>13} "
                   f"{'predicted us':>13} {'speedup':>8}")
        for w in result.what_if:
            streams = str(w.comm_streams) if w.comm_streams else "recorded"
            out.append(f"  {w.compute_scale:>7g}x {w.cpu_scale:>5g}x {w.bandwidth_scale:>9g}x "
                       f"{streams:>13} {w.predicted_step_us:>13.0f} {w.speedup:>7.3f}x"
                       + (f"  slow {w.slow_rank}" if w.slow_rank else ""))
    return "\n".join(out)

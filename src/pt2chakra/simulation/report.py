"""Human-readable report of a simulation (the ``--json`` form is
``result_json``: ``SimulationResult.to_json()`` and the notes)."""

from __future__ import annotations

import os
from typing import Any

from pt2chakra.chakra.conventions import STEP_PERIOD, STEP_SPAN
from pt2chakra.simulation.results import RankResult, SimulationResult

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
    """One line per step definition in use: what "measured" means."""
    untimed = {id(r) for r in untimed_ranks(result)}
    used = dict.fromkeys(r.step_definition for r in result.ranks
                         if r.nodes and id(r) not in untimed)
    return [f"measured step = {STEP_MEANINGS.get(d, d)}" for d in used]


def result_json(result: SimulationResult) -> dict[str, Any]:
    """``--json``: the result, and the notes the text report prints."""
    doc = result.to_json()
    doc["notes"] = timing_notes(result)
    return doc


def _pct(value: float | None) -> str:
    return f"{value:+.2f} %" if value is not None else "n/a"


def _shares(parts: dict[str, float], total: float) -> list[str]:
    return [f"    {name:<16} {us:>12.0f} us  {us / total * 100 if total else 0:5.1f} %"
            for name, us in parts.items() if us > 0]


def format_report(result: SimulationResult, lanes: bool = True) -> str:
    out = []
    out.append(f"ranks: {len(result.ranks)}, start offsets: {result.align}"
               + (f", network model: {result.network_model}" if result.network_model
                  else ", collectives: measured (min over participants)")
               + (f", {result.inferred_stream_waits} cross-stream waits inferred"
                  if result.inferred_stream_waits else ""))
    out.append("")
    out.append(f"{'rank':>4}  {'predicted us':>13}  {'measured us':>12}  {'error':>9}  "
               f"{'nodes':>6}  source")
    for r in result.ranks:
        out.append(f"{r.rank:>4}  {r.predicted_step_us:>13.0f}  {r.measured_step_us:>12.0f}  "
                   f"{_pct(r.error_pct):>9}  {r.nodes:>6}  {os.path.basename(r.source)}"
                   + (f"  ({r.unfinished} nodes never ran)" if r.unfinished else ""))
    out.append(f"{'step':>4}  {result.predicted_step_us:>13.0f}  {result.measured_step_us:>12.0f}  "
               f"{_pct(result.error_pct):>9}")
    out += step_notes(result) + timing_notes(result)
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
                out.append(f"    rank {t['rank']} node {t['id']} {t['name'][:60]} "
                           f"({t['category']}) {t['duration_us']:.0f} us")
    if result.what_if:
        out.append("")
        out.append("what-if (predicted step per setting):")
        out.append(f"  {'compute':>8} {'cpu':>6} {'bandwidth':>10} {'comm streams':>13} "
                   f"{'predicted us':>13} {'speedup':>8}")
        for w in result.what_if:
            streams = str(w.comm_streams) if w.comm_streams else "recorded"
            out.append(f"  {w.compute_scale:>7g}x {w.cpu_scale:>5g}x {w.bandwidth_scale:>9g}x "
                       f"{streams:>13} {w.predicted_step_us:>13.0f} {w.speedup:>7.3f}x")
    return "\n".join(out)

"""What the simulation's outputs say beyond the numbers: why a host-only
trace replays to 0 us, and the rank each file records (not its position
among the inputs) on the critical path."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli

from pt2chakra.report.api import write_report
from pt2chakra.simulation import simulate
from pt2chakra.simulation.text_report import NO_TIMING_WHY, format_text_report, timing_notes


def _notes(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("note:")]


def test_host_only_trace_says_why_it_has_no_step(converted: dict[str, Path],
                                                 tmp_path: Path) -> None:
    host_only = converted["resnet_1gpu_host"]
    proc = run_cli("simulate", host_only)
    assert proc.returncode == 0, proc.stderr
    notes = _notes(proc.stdout)
    assert len(notes) == 1 and host_only.name in notes[0] and "--device-trace" in notes[0]
    assert "no timing" in notes[0] and "nothing to predict or measure" in notes[0]
    doc = json.loads(run_cli("simulate", host_only, "--json").stdout)
    assert doc["predicted_step_us"] == 0 and doc["notes"] == notes
    page = tmp_path / "r.html"
    summary = write_report([host_only], page)
    assert summary.notes == notes and notes[0] in summary.summary()
    assert f'<p class="warn">{notes[0]}</p>' in page.read_text()


def test_timed_traces_have_no_note(converted: dict[str, Path]) -> None:
    result = simulate([converted["dlrm_rank0"]])
    assert result.predicted_step_us > 0 and timing_notes(result) == []
    assert NO_TIMING_WHY not in format_text_report(result)
    doc = json.loads(run_cli("simulate", converted["linear_1gpu"], "--json").stdout)
    assert doc["notes"] == []


def test_critical_path_names_the_recorded_rank(converted: dict[str, Path]) -> None:
    """DLRM's rank 3 alone is the first (and only) input, and still rank 3."""
    result = simulate([converted["dlrm_rank3"]])
    assert [r.rank for r in result.ranks] == [3]
    assert result.critical_path is not None and result.critical_path.top_nodes
    assert {t["rank"] for t in result.critical_path.top_nodes} == {3}
    lines = format_text_report(result).splitlines()
    longest = lines[lines.index("  longest nodes on it:") + 1:]
    assert longest and all(line.startswith("    rank 3 node ") for line in longest[:5])
    doc = json.loads(run_cli("simulate", converted["dlrm_rank3"], "--json").stdout)
    assert {t["rank"] for t in doc["critical_path"]["top_nodes"]} == {3}


def test_critical_path_ranks_of_a_whole_set_are_unchanged(converted: dict[str, Path]) -> None:
    """Given out of order, the ranks are replayed in rank order: the labels
    are the recorded ranks all the same."""
    result = simulate([converted["dlrm_rank5"], converted["dlrm_rank2"]])
    assert [r.rank for r in result.ranks] == [2, 5]
    assert result.critical_path is not None
    assert {t["rank"] for t in result.critical_path.top_nodes} <= {2, 5}

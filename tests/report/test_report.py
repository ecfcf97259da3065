"""The HTML report: what the page holds, its limits, and its CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from builders import IS_GPU, node, write_nodes
from helpers import SAMPLE, assert_one_line_failure, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.report.api import MAX_PAGE_BYTES, write_report
from pt2chakra.report.gather import STANDARD_WHAT_IFS, ReportOptions, build_report
from pt2chakra.report.render import render
from pt2chakra.simulation import SimulationOptions

SECTIONS = ("summary", "timeline", "critical", "ops", "comm", "whatif")


def timeline_json(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', page,
                  re.S)
    assert m
    return json.loads(m.group(1))


def labelled_nodes(tl: dict) -> tuple[int, int]:
    """Nodes the simulated and the measured bars stand for."""
    sim = meas = 0
    for rank in tl["ranks"]:
        for row in rank["rows"]:
            labels = row["bars"][3::4]
            n = sum(-x if x < 0 else 1 for x in labels)
            if row["measured"]:
                meas += n
            else:
                sim += n
    return sim, meas


def test_sample_page_draws_every_node(sample_et: tuple[Path, Path], tmp_path: Path,
                                      page_check: ModuleType) -> None:
    et, rep = sample_et
    out = tmp_path / "r.html"
    summary = write_report([et], out, conversion=[rep])
    page = out.read_text()
    assert summary.bytes == len(page.encode()) and summary.ranks == 1
    assert page_check.external_refs(page) == []
    for section in (*SECTIONS, "conversion"):
        assert f'<section id="{section}">' in page
    tl = timeline_json(page)
    assert tl["merged_below_us"] == 0
    _md, nodes = read_et(str(et))
    timed = sum(1 for n in nodes if n.start_time_micros or n.duration_micros)
    assert labelled_nodes(tl) == (summary.nodes, timed)
    # The standard what-ifs, each a replay of its own.
    assert page.count("<tr>") >= len(STANDARD_WHAT_IFS) + 1
    assert "compute x0.5" in page and "bandwidth x2" in page


def test_small_budget_merges_and_counts_every_node(sample_et: tuple[Path, Path]) -> None:
    data = build_report([sample_et[0]], ReportOptions(bar_budget=300))
    tl = data.timeline
    assert tl.merged_below_us > 0
    lanes = sum(len(r.rows) for r in tl.ranks)
    assert tl.bars <= 300 + 2 * lanes + 200 * lanes  # the per-lane floor
    full = build_report([sample_et[0]], ReportOptions(standard_what_ifs=False))
    assert labelled_nodes(timeline_json(render(data))) == \
        labelled_nodes(timeline_json(render(full)))


def test_user_what_ifs_replace_the_standard_ones(sample_et: tuple[Path, Path]) -> None:
    opts = ReportOptions(simulation=SimulationOptions(cpu_scale=[0.25, 1.0]))
    data = build_report([sample_et[0]], opts)
    assert [w.label for w in data.what_if] == ["CPU x0.25", "baseline"]
    assert data.what_if[0].row.predicted_step_us < data.result.predicted_step_us
    assert build_report([sample_et[0]], ReportOptions(standard_what_ifs=False)).what_if == []


def test_dlrm_page(dlrm_ets: tuple[list[Path], list[Path]], tmp_path: Path,
                   page_check: ModuleType) -> None:
    ets, reports = dlrm_ets
    out = tmp_path / "dlrm.html"
    summary = write_report(ets, out, conversion=reports)
    page = out.read_text()
    assert summary.ranks == 8 and summary.bytes < MAX_PAGE_BYTES
    assert page_check.external_refs(page) == []
    assert "http://" not in page and "https://" not in page
    assert "predicted step" in page and "measured step" in page
    assert "Critical path by node type" in page and "Critical path by dependency kind" in page
    data = build_report(ets)
    assert data.collectives_total > 0
    assert all(c.algbw_gbps is not None and c.algbw_gbps > 0 for c in data.collectives
               if c.size_bytes and c.measured_us > 0)
    assert {len(c.ranks) for c in data.collectives} >= {8}
    assert len(timeline_json(page)["ranks"]) == 8
    assert page.count("dlrm.") >= 8 * 2  # per-rank table and conversion table


@pytest.mark.slow
def test_cli_report_and_errors(sample_et: tuple[Path, Path], tmp_path: Path) -> None:
    et, rep = sample_et
    out = tmp_path / "r.html"
    proc = run_cli("report", str(et), "-o", str(out), "--conversion-report", str(rep),
                   "--compute-scale", "0.5", "1")
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and "MB" in proc.stdout and "compute x0.5" in out.read_text()
    assert_one_line_failure(run_cli("report", str(et), "-o", str(tmp_path / "r.png")), ".html")
    assert_one_line_failure(run_cli("report", str(et), "-o", str(tmp_path / "no" / "r.html")),
                            "folder")
    assert_one_line_failure(run_cli("report", str(et), "-o", str(tmp_path / "x.html"),
                                    "--conversion-report", str(et)), "not a conversion report")
    assert not (tmp_path / "x.html").exists()


@pytest.mark.slow
def test_convert_html(tmp_path: Path) -> None:
    et, html = tmp_path / "s.et", tmp_path / "s.html"
    args = ("convert", "--host-trace", f"{SAMPLE}.host_et.json.gz", "--device-trace",
            f"{SAMPLE}.kineto.json.gz", "-o", str(et))
    proc = run_cli(*args, "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    assert '<section id="conversion">' in html.read_text()
    bad = tmp_path / "a.et"
    assert_one_line_failure(run_cli(*args[:-1], str(bad), "--consumer", "astra-sim", "--html",
                                    str(tmp_path / "b.html")), "--html")
    assert not bad.exists()


@pytest.mark.slow
def test_64_ranks(many_ranks: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "dp.html"
    summary = write_report(many_ranks, out)
    assert summary.ranks == 64
    data = build_report(many_ranks, ReportOptions(standard_what_ifs=False))
    assert data.collectives_total == 40
    assert all(len(c.ranks) == 64 for c in data.collectives)
    assert [r.rank for r in data.timeline.ranks] == list(range(64))
    # All-reduce of 4 MiB over 64 ranks in 40 us: busbw = algbw * 2 * 63 / 64.
    c = data.collectives[0]
    assert c.algbw_gbps is not None
    assert c.busbw_gbps == pytest.approx(c.algbw_gbps * 2 * 63 / 64)
    assert len(timeline_json(out.read_text())["ranks"]) == 64


def test_untimed_graph_has_no_measured_lanes(tmp_path: Path) -> None:
    """Another tool's graph without start times: simulated lanes only, and
    the error is n/a rather than a division by zero."""
    attrs = [IS_GPU, ("stream", "int64_val", 7)]  # no start times, no device
    et = write_nodes(tmp_path / "u.et", [node(k, [k - 1] if k else [], name=f"k{k}", dur=10,
                                              attrs=attrs) for k in range(5)])
    data = build_report([et])
    rows = [row for rank in data.timeline.ranks for row in rank.rows]
    assert rows and not any(row.measured for row in rows)
    assert data.result.predicted_step_us == 50
    page = render(data)
    assert "n/a" in page

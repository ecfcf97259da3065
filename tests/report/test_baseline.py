"""``report --baseline``: the page's comparison with another run of the job
(pt2chakra diff's numbers, both runs' recorded lanes on one axis), and the
straggler columns of the collectives table."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from builders import dp_layer, metadata
from helpers import assert_one_line_failure, run_cli

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.diff import diff
from pt2chakra.errors import InputError
from pt2chakra.report.api import write_report
from pt2chakra.report.gather import BASELINE_RUN, THIS_RUN, build_report
from pt2chakra.report.render import fmt_us, render

LAYERS = 4
SLOW_LAYER, SLOW_FACTOR = LAYERS - 1, 5  # this run: the last kernel 5x longer
GEMM_US = 20


def _rank(rank: int, slow: bool, op: str = "aten::mm") -> tuple[GlobalMetadata, list[ChakraNode]]:
    """Per layer: a CPU op, the kernel it launches, an all-reduce after it;
    rank 1 reaches each all-reduce later (a longer op)."""
    nodes: list[ChakraNode] = []
    t = 1000
    for k in range(LAYERS):
        gemm_us = GEMM_US * (SLOW_FACTOR if slow and k == SLOW_LAYER else 1)
        nodes += dp_layer(k, rank, t, 5 + 10 * rank, gemm_us, op=op)
        t += 200
    return metadata(rank), nodes


def _run(folder: Path, slow: bool, op: str = "aten::mm") -> list[Path]:
    folder.mkdir()
    paths = []
    for rank in (0, 1):
        md, nodes = _rank(rank, slow, op)
        write_et(folder / f"run.{rank}.et", md, nodes)
        paths.append(folder / f"run.{rank}.et")
    return paths


def _timeline(page: str, element_id: str) -> dict:
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


def test_page_compares_with_the_baseline(tmp_path: Path) -> None:
    baseline, this = _run(tmp_path / "a", False), _run(tmp_path / "b", True)
    data = build_report(this, baseline=baseline)
    assert data.comparison is not None
    expected = diff(baseline, this)
    assert data.comparison.result == expected  # diff's result, as computed
    assert expected.difference_us > 0
    page = render(data)
    assert '<section id="baseline"><h2>Compared with the baseline</h2>' in page
    assert f"+{fmt_us(expected.difference_us)}" in page
    first = expected.rows[0]
    assert html.escape(first.label, quote=True) in page and "gemm_kernel" in first.label
    for c in expected.collectives:
        assert html.escape(c.label, quote=True) in page
    tl = _timeline(page, "base-timeline-data")
    for rank in tl["ranks"]:
        runs = [row["run"] for row in rank["rows"]]
        assert runs == sorted(runs, key=[BASELINE_RUN, THIS_RUN].index)  # baseline above
        assert set(runs) == {BASELINE_RUN, THIS_RUN}
        assert all(row["measured"] for row in rank["rows"])
    plain = render(build_report(this))  # no baseline, no section
    assert 'id="baseline"' not in plain and 'id="base-timeline-data"' not in plain


def test_collectives_table_names_the_straggler(tmp_path: Path) -> None:
    data = build_report(_run(tmp_path / "a", False))
    row = data.collectives[0]
    assert row.measured_last_rank == 1 and row.replay_last_rank == 1
    assert row.measured_others_wait_us == pytest.approx(10)  # rank 1's op is 10 us longer
    page = render(data)
    assert "last (measured)" in page and "others waited (replay)" in page


def test_baseline_of_another_job_is_refused(tmp_path: Path) -> None:
    this, other = _run(tmp_path / "b", True), _run(tmp_path / "o", False, op="aten::conv2d")
    other_names = _rank(0, False, "aten::conv2d")[1]
    assert {n.name for n in other_names} != {n.name for n in _rank(0, False)[1]}
    out = tmp_path / "r.html"
    with pytest.raises(InputError, match="not the same job"):
        write_report(this, out, baseline=[*other[:1]])
    assert not out.exists()


@pytest.mark.slow
def test_cli_baseline(tmp_path: Path) -> None:
    baseline, this = _run(tmp_path / "a", False), _run(tmp_path / "b", True)
    out = tmp_path / "r.html"
    proc = run_cli("report", *this, "--baseline", *baseline, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "compared with the baseline: measured step +" in proc.stdout
    assert 'id="baseline"' in out.read_text()
    bad = run_cli("report", *this, "--baseline", baseline[0], "-o", tmp_path / "x.html")
    assert_one_line_failure(bad, "not the same job")
    assert not (tmp_path / "x.html").exists()

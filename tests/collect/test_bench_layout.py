"""The layout benchmark's parts that need neither root nor torch: the
one-line skip, the ranks' command lines, the table, and ``--reuse`` on a
kept folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, load_script

from pt2chakra.simulation.profiler_overhead import META_NAME

bench_layout = load_script("bench_layout")
bench_machine = bench_layout.machine  # the module bench_layout itself uses
SAMPLE = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"


def test_without_root_it_skips_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(bench_machine.os, "geteuid", lambda: 1000)
    assert bench_layout.main(["--jobs", "tp2"]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [
        "bench-layout: skipped: needs root to create network namespaces and shape links with tc"]


def test_without_ip_it_skips_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(bench_machine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bench_machine.shutil, "which", lambda tool: None if tool == "ip" else tool)
    assert bench_layout.main([]) == 0
    assert capsys.readouterr().out.strip() == "bench-layout: skipped: needs ip (iproute2)"


def test_every_layout_the_issue_asks_for_is_a_job_collect_accepts() -> None:
    from pt2chakra.collect.layouts import LayoutConfig

    labels = [job.label for job in bench_layout.JOBS]
    assert labels == ["tp2", "tp4", "pp2-gpipe", "pp2-1f1b", "pp4-gpipe", "pp4-1f1b",
                      "tp2xdp2", "pp2xdp2-gpipe", "pp2xdp2-1f1b"]
    for job in bench_layout.JOBS:
        opts = dict(zip(job.options[::2], job.options[1::2]))
        cfg = LayoutConfig(tp=int(opts.get("--tp", 1)), pp=int(opts.get("--pp", 1)),
                           dp=int(opts.get("--dp", 1)), schedule=opts.get("--schedule", "gpipe"))
        assert (cfg.label, cfg.world_size) == (job.label, job.world_size)
        assert job.world_size <= 4  # 2 cores: more ranks measure the scheduler


def test_each_rank_is_started_alone_toward_rank_0() -> None:
    job = bench_layout.JOBS[-1]
    cmd = bench_layout.collect_command(job, 3, Path("/o"), 2)
    assert cmd[cmd.index("collect") + 1:][:len(job.options)] == list(job.options)
    text = " ".join(cmd)
    assert "--rank 3" in text and f"--master-addr {bench_machine.rank_addr(0)}" in text
    assert "--steps 2" in text and "--out-dir /o" in text


def test_recorded_step_prefixes() -> None:
    assert bench_layout.step_prefixes(Path("r"), 1) == [Path("r/l")]
    assert bench_layout.step_prefixes(Path("r"), 2) == [Path("r/l.step0"), Path("r/l.step1")]


def _row(failures: tuple[str, ...] = ("", "")) -> Any:
    job = bench_layout.JOBS[0]
    steps = [bench_layout.Step(["a"], profiled_us=100e3 + 10e3 * i, replay_us=105e3 + 10e3 * i,
                               rank_errors=[1.0, -7.5], without_profiler_us=90e3,
                               astra_us=None, failure=f)
             for i, f in enumerate(failures)]
    return bench_layout.Row(job, steps, real_us=100e3, other_cores=0.1)


def test_a_row_gives_each_error() -> None:
    line = bench_layout.format_row(_row())
    cells = line.split()
    assert cells[:2] == ["tp2", "2"] and "105.0" in line  # the profiled median, ms
    assert "+4.76%" in line or "+4.77%" in line  # the replay's median step error
    assert "-7.50%" in line  # the worst rank, by magnitude
    assert "-10.00%" in line  # --without-profiler against the real step
    assert "n/a" in line  # no ASTRA-sim


def test_failed_steps_are_named_not_averaged() -> None:
    line = bench_layout.format_row(_row(("", "simulate: bad")))
    assert "(1 step(s) failed)" in line and "+5.00%" in line
    line = bench_layout.format_row(_row(("simulate: no\nmore", "simulate: bad")))
    assert line.split()[:2] == ["tp2", "2"] and line.endswith("simulate: no")
    header = bench_layout.format_table([])
    assert len(header) == 2 and "worst rank" in header[1]


@pytest.mark.slow
def test_reuse_prints_the_table_from_a_kept_folder_without_root(tmp_path, monkeypatch,
                                                                 capsys) -> None:
    """A kept run (here the 2-rank gloo sample in place of TP2's) is
    converted and replayed with ``--reuse``: no root, no torch, no recording."""
    monkeypatch.setattr(bench_machine.os, "geteuid", lambda: 1000)
    monkeypatch.delenv(bench_layout.ASTRA_BIN_ENV, raising=False)
    run = tmp_path / "tp2" / "run0"
    run.mkdir(parents=True)
    for r in (0, 1):
        for kind in ("host_et", "kineto"):
            shutil.copy(f"{SAMPLE}.rank{r}.{kind}.json.gz", run / f"l.rank{r}.{kind}.json.gz")
    (run / bench_layout.RUN_NOTE).write_text(json.dumps({"steps": 1, "other_cores": 0.1}))
    (run / META_NAME).write_text(json.dumps({"step_median_s": 0.05, "step_s": [0.05]}))
    assert bench_layout.main(["--reuse", "--out", str(tmp_path), "--jobs", "tp2", "tp4"]) == 0
    out = capsys.readouterr().out
    assert f"tp4: no recording in {tmp_path / 'tp4'}" in out
    assert any(line.split()[:2] == ["tp4", "4"] and "no recording" in line
               for line in out.splitlines())
    row = next(line for line in out.splitlines() if line.split()[:2] == ["tp2", "2"])
    assert "50.0" in row and "failed" not in row  # the real step, ms
    assert (run / "l.0.et").exists() and (run / "l.1.et").exists()

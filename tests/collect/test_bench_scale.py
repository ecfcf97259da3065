"""The scale-out benchmark's parts that need neither root nor torch: the
one-line skip, the table math, and the ranks' command lines."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import ROOT, load_script

bench_scale = load_script("bench_scale")
bench_machine = bench_scale.machine  # the module bench_scale itself uses


def test_without_root_it_skips_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(bench_machine.os, "geteuid", lambda: 1000)
    assert bench_scale.main(["--modes", "ddp"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["bench-scale: skipped: needs root to create network namespaces and shape "
                   "links with tc"]


def test_without_tc_it_skips_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(bench_machine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bench_machine.shutil, "which", lambda tool: None if tool == "tc" else tool)
    assert bench_scale.main([]) == 0
    assert capsys.readouterr().out.strip() == "bench-scale: skipped: needs tc (iproute2)"


def test_error_and_spread_math() -> None:
    assert bench_scale.err_pct(95.0, 100.0) == pytest.approx(-5.0)
    assert bench_scale.err_pct(110.0, 100.0) == pytest.approx(10.0)
    s = bench_scale.Spread.of([100.0, 90.0, 120.0])
    assert s is not None and (s.median, s.low, s.high, s.n) == (100.0, 90.0, 120.0, 3)
    assert s.spread_pct == pytest.approx(30.0)
    assert bench_scale.Spread.of([]) is None


def _row(**methods: float | None) -> Any:
    measured = bench_scale.Spread.of([200.0, 210.0, 190.0])
    real = bench_scale.Spread.of([180.0])
    assert measured and real
    return bench_scale.Prediction("ddp", 2, 8, 100.0, measured, real, dict(methods))


def test_prediction_errors_against_profiled_and_real() -> None:
    row = _row(sim=190.0, astra=None)
    assert row.errors(200.0) == {"naive": pytest.approx(-50.0), "sim": pytest.approx(-5.0),
                                 "astra": None}
    assert row.errors(180.0)["sim"] == pytest.approx(190 / 180 * 100 - 100)
    # 2 -> 8: the goal is 10 %
    assert row.within_goal("sim") is True and row.within_goal("astra") is None
    assert _row(sim=178.0).within_goal("sim") is False


def test_prediction_table_has_a_cell_per_method() -> None:
    lines = bench_scale.format_prediction_table([_row(sim=190.0, astra=None)])
    assert len(lines) == 2 and "naive" in lines[0] and "sim" in lines[0]
    assert "-50.0%" in lines[1] and "-5.0%" in lines[1] and "n/a" in lines[1]
    assert "+5.6" in lines[1]  # 190 against the real 180


def test_each_rank_runs_in_its_namespace_on_its_link() -> None:
    cmd = bench_machine.rank_command(3, bench_scale.collect_command("fsdp2", 4, 3,
                                                                   ROOT / "x", 2), -10)
    assert cmd[:7] == ["nice", "-n", "-10", "ip", "netns", "exec", "p2cns3"]
    assert "GLOO_SOCKET_IFNAME=p2cn3" in cmd
    i = cmd.index("--master-addr")
    assert cmd[i + 1] == bench_machine.rank_addr(0) == "10.231.0.1"
    assert cmd[cmd.index("--parallel") + 1] == "fsdp2" and cmd[cmd.index("--rank") + 1] == "3"


def test_real_step_read_from_the_stored_meta(tmp_path) -> None:
    from pt2chakra.simulation.profiler_overhead import META_NAME, META_STEP_FIELD

    assert bench_scale.real_step_us(tmp_path) is None
    (tmp_path / META_NAME).write_text(f'{{"{META_STEP_FIELD}": 0.0125}}')  # what collect writes
    assert bench_scale.real_step_us(tmp_path) == pytest.approx(12500.0)

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
    return bench_scale.Prediction("ddp", 2, 8, 100.0, measured, real, dict(methods),
                                  baseline_us=None, goal_pct=10.0)


def test_prediction_errors_against_profiled_and_real() -> None:
    row = _row(sim=190.0, astra=None)
    assert row.errors(200.0) == {"naive": pytest.approx(-50.0), "bytes": None,
                                 "sim": pytest.approx(-5.0), "astra": None}
    assert row.errors(180.0)["sim"] == pytest.approx(190 / 180 * 100 - 100)
    # 2 -> 8: the goal is 10 %; the first method is the one judged
    assert row.within_goal("sim") is True and row.within_goal("astra") is None
    assert row.judged() == "sim" and row.within_goal() is True
    assert _row(sim=178.0).within_goal() is False


def test_prediction_table_has_a_cell_per_method() -> None:
    lines = bench_scale.format_prediction_table([_row(sim=190.0, astra=None)])
    assert len(lines) == 2 and "naive" in lines[0] and "sim" in lines[0]
    assert "bytes" in lines[0] and "goal" in lines[0] and "met" in lines[0]
    assert "-50.0%" in lines[1] and "-5.0%" in lines[1] and "n/a" in lines[1]
    assert "+5.6" in lines[1]  # 190 against the real 180
    assert lines[1].rstrip().endswith("10%  yes (sim)")


def test_prediction_table_shows_the_baseline_astra_against_sim_and_a_missed_goal() -> None:
    measured = bench_scale.Spread.of([1000.0])
    assert measured
    row = bench_scale.Prediction("ddp-2tier", 2, 4, 600.0, measured, None,
                                 {"extrap+sim": 880.0, "sim --world-size": 900.0,
                                  "ASTRA-sim": 945.0}, baseline_us=1100.0, goal_pct=10.0)
    line = bench_scale.format_prediction_table([row])[1]
    assert "+10.0%" in line  # the baseline
    assert "-12.0%" in line and "+5.0%" in line  # extrap+sim; ASTRA-sim vs simulate
    assert line.rstrip().endswith("NO (extrap+sim)")


def test_each_rank_runs_in_its_namespace_on_its_link() -> None:
    job = bench_scale.JOBS[1]
    cmd = bench_machine.rank_command(3, bench_scale.collect_command(job, 4, 3, ROOT / "x", 2),
                                     -10)
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


def test_the_job_table_holds_the_issue_jobs() -> None:
    jobs = {j.name: j for j in bench_scale.JOBS}
    # today's jobs keep their names (their folders, --reuse, bench_scale_astra)
    for name in ("ddp", "fsdp2"):
        j = jobs[name]
        assert (j.mode, j.hidden, j.layers, j.batch, j.bucket_mb, j.rate_mbit) == \
            (name, 512, 4, 16, 1.0, 100.0)
        assert j.world_sizes == (2, 3, 4, 8)
    one = jobs["ddp-1bucket"]  # all 33.55 MB of gradients in one bucket
    assert (one.hidden, one.layers, one.rate_mbit) == (2048, 2, 200.0)
    assert one.gradient_mb() < one.bucket_mb and one.gradient_mb() == pytest.approx(33.55, 0.01)
    assert (jobs["ddp-w1280"].bucket_mb, jobs["ddp-w1280"].rate_mbit) == (8.0, 120.0)
    assert (jobs["ddp-w1024"].bucket_mb, jobs["ddp-w1024"].rate_mbit) == (4.0, 200.0)
    assert (jobs["fsdp2-w1280"].mode, jobs["fsdp2-w1280"].hidden) == ("fsdp2", 1280)
    for j in bench_scale.JOBS:  # every target is recorded, and its goal is the issue's
        for t in j.targets:
            assert t.dst in j.world_sizes
            src_job = jobs[j.topology.base] if isinstance(j.topology, bench_scale.SlowLink) \
                else j
            assert t.src in src_job.world_sizes
        goals = {(t.src, t.dst): t.goal_pct for t in j.targets}
        if isinstance(j.topology, bench_scale.Flat):
            assert goals.get((2, 4)) == 5.0 and goals.get((2, 8)) == 10.0 and \
                goals.get((4, 8)) == 5.0
    two = jobs["ddp-2tier"]
    assert [two.layout(w).ranks_per_host for w in two.world_sizes] == [2, 2, 4]
    assert two.topology.uplink_mbit < two.rate_mbit
    slow = jobs["ddp-slow1"]
    assert slow.layout(4) == bench_machine.Layout(slow_rank=1, slow_mbit=50.0)
    assert jobs["ddp"].layout(8) == bench_machine.FLAT


def test_a_slow_link_selected_alone_brings_its_base_job() -> None:
    jobs = bench_scale.selected_jobs(["ddp-slow1"])
    assert [j.name for j in jobs] == ["ddp", "ddp-slow1"]
    sizes = bench_scale.wanted_sizes(jobs, [2, 4])
    assert sizes == {"ddp": [2, 4], "ddp-slow1": [2, 4]}
    assert [j.name for j in bench_scale.selected_jobs(None)] == list(bench_scale.JOB_NAMES)


def test_the_two_tier_bed_puts_consecutive_ranks_on_a_host() -> None:
    layout = bench_machine.Layout(ranks_per_host=4, uplink_mbit=100.0)
    assert [layout.host_of(r) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert layout.hosts(8) == 2 and layout.hosts(2) == 1
    assert bench_machine.FLAT.host_of(5) is None and bench_machine.FLAT.hosts(8) == 0
    slow = bench_machine.Layout(slow_rank=1, slow_mbit=50.0)
    assert [slow.rate_of(r, 100.0) for r in range(3)] == [100.0, 50.0, 100.0]


def test_byte_volume_baseline() -> None:
    C = bench_scale.Collective
    mb = 1_000_000
    # 100 Mbit/s = 12.5 bytes/us; one 1 MB all-reduce: 2 ranks move 1 MB per link
    # (80 ms), 4 ranks 1.5 MB (120 ms): the step grows by 40 ms
    assert bench_scale.byte_volume_step_us(500_000.0, [C("ALL_REDUCE", mb)], 2, 4, 100.0,
                                           100.0) == pytest.approx(540_000.0)
    # an all-gather moves (M-1)/M of the full tensor: 0.5 -> 0.875 MB (+30 ms)
    assert bench_scale.byte_volume_step_us(500_000.0, [C("ALL_GATHER", mb)], 2, 8, 100.0,
                                           100.0) == pytest.approx(530_000.0)
    # the same ranks on a link half as fast: the link time doubles
    assert bench_scale.byte_volume_step_us(500_000.0, [C("ALL_REDUCE", mb)], 2, 2, 100.0,
                                           50.0) == pytest.approx(580_000.0)
    assert bench_scale.link_fraction("BARRIER", 8) == 0.0
    assert bench_scale.link_fraction("REDUCE_SCATTER", 4) == pytest.approx(0.75)


def test_the_baseline_reads_the_recorded_collectives(tmp_path) -> None:
    from pt2chakra import convert

    sample = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu.rank0"
    et = tmp_path / "r.0.et"
    convert(f"{sample}.host_et.json.gz", f"{sample}.kineto.json.gz", str(et))
    colls = bench_scale.recorded_collectives(str(et))
    assert colls and all(c.kind in ("ALL_REDUCE", "BROADCAST", "ALL_GATHER") for c in colls)
    assert any(c.kind == "ALL_REDUCE" and c.nbytes > 0 for c in colls)


def test_two_tier_targets_are_told_their_hosts_and_uplink(tmp_path) -> None:
    jobs = {j.name: j for j in bench_scale.JOBS}
    flat = ["--ranks-per-host", "8", "--cores-per-host", "2"]
    assert bench_scale.host_options(jobs["ddp"], 8, flat) == flat
    hosts = bench_scale.host_options(jobs["ddp-2tier"], 8, flat)
    # every rank shares the machine's cores; 4 ranks behind each uplink
    assert hosts[:4] == flat and hosts[hosts.index("--ranks-per-uplink") + 1] == "4"
    # 100 Mbit/s = 12.5 MB/s = 0.0125 GB/s; the rate the bed moved, where measured
    assert hosts[hosts.index("--inter-host-bandwidth") + 1] == "0.0125"
    probed = bench_scale.host_options(jobs["ddp-2tier"], 8, flat, 86.0)
    assert probed[probed.index("--inter-host-bandwidth") + 1] == "0.01075"
    assert "--inter-host-latency" in hosts
    cmds = bench_scale.scaleout_commands(["a.0.et", "a.1.et"], 8, tmp_path, hosts)
    assert cmds["extrap+sim"][:5] == ["extrapolate", "a.0.et", "a.1.et", "--world-size", "8"]
    for method in ("extrap+sim", "sim --world-size", "ASTRA-sim", "--without-profiler"):
        assert " ".join(hosts) in " ".join(cmds[method])
    assert cmds["ASTRA-sim"][0] == "astra-sim" and "--world-size" in cmds["ASTRA-sim"]
    assert cmds["--without-profiler"][-2:] == ["--without-profiler", "--json"]


def test_the_slow_link_what_if_command_and_its_row() -> None:
    assert bench_scale.slow_rank_command(["a.0.et", "a.1.et"], 1, 2.0) == \
        ["simulate", "a.0.et", "a.1.et", "--slow-rank", "1:link=2", "--json"]
    report = {"predicted_step_us": 1.0,
              "what_if": [{"label": "bandwidth x2", "slow_rank": "", "predicted_step_us": 5.0},
                           {"slow_rank": "rank 1 link x2", "predicted_step_us": 7.0}]}
    assert bench_scale.slow_rank_step_us(report) == 7.0
    assert bench_scale.slow_rank_step_us({"predicted_step_us": 1.0}) is None
    assert bench_scale.slow_rank_step_us({"what_if": [{"predicted_step_us": 3.0}]}) is None


def _bed_calls(monkeypatch, world_size: int, layout: Any) -> tuple[list[tuple[str, ...]],
                                                                   dict[str, float]]:
    """The ``ip`` calls and each shaped device's rate of one bed, built and
    torn down with nothing run (no root)."""
    calls: list[tuple[str, ...]] = []
    shaped: dict[str, float] = {}
    monkeypatch.setattr(bench_machine, "_ip", lambda *a, check=True: calls.append(a))
    monkeypatch.setattr(bench_machine, "_shape",
                        lambda dev, rate, netns=None: shaped.__setitem__(dev, rate))
    monkeypatch.setattr(bench_machine, "teardown", lambda world_size=0: calls.append(("down",)))
    with bench_machine.bed(world_size, 200.0, layout):
        pass
    return calls, shaped


def test_the_two_tier_bed_joins_host_bridges_by_shaped_uplinks(monkeypatch) -> None:
    calls, shaped = _bed_calls(monkeypatch, 4, bench_machine.Layout(ranks_per_host=2,
                                                                    uplink_mbit=100.0))
    assert calls[0] == ("down",) and calls[-1] == ("down",)  # torn down before and after
    masters = {a[2]: a[4] for a in calls if a[:2] == ("link", "set") and "master" in a}
    # ranks 0, 1 on host 0's bridge, 2, 3 on host 1's; each uplink between its host and the spine
    assert [masters[f"p2ch{r}"] for r in range(4)] == ["p2cbh0", "p2cbh0", "p2cbh1", "p2cbh1"]
    assert masters["p2cus0"] == masters["p2cus1"] == "p2cbr"
    assert (masters["p2cuh0"], masters["p2cuh1"]) == ("p2cbh0", "p2cbh1")
    # both ends of each uplink at its rate, both ends of each rank's link at the rank's
    assert {d: shaped[d] for d in ("p2cus0", "p2cuh0", "p2cus1", "p2cuh1")} == \
        dict.fromkeys(("p2cus0", "p2cuh0", "p2cus1", "p2cuh1"), 100.0)
    assert all(shaped[f"p2ch{r}"] == shaped[f"p2cn{r}"] == 200.0 for r in range(4))
    # one subnet: every rank's address in 10.231.0.0/24
    addrs = [a[4] for a in calls if a[0] == "-n" and a[2:4] == ("addr", "add")]
    assert addrs == [f"10.231.0.{r + 1}/24" for r in range(4)]


def test_the_slow_link_is_shaped_on_both_ends_and_the_flat_bed_is_as_before(monkeypatch) -> None:
    _calls, shaped = _bed_calls(monkeypatch, 3, bench_machine.Layout(slow_rank=1,
                                                                     slow_mbit=50.0))
    assert shaped == {"p2ch0": 200.0, "p2cn0": 200.0, "p2ch1": 50.0, "p2cn1": 50.0,
                      "p2ch2": 200.0, "p2cn2": 200.0}
    calls, _ = _bed_calls(monkeypatch, 2, bench_machine.FLAT)
    assert not any("p2cbh0" in a for a in calls)
    assert {a[2]: a[4] for a in calls if "master" in a} == {"p2ch0": "p2cbr", "p2ch1": "p2cbr"}


def test_teardown_removes_every_name_of_the_bed(monkeypatch) -> None:
    import subprocess

    listed = {"netns": "p2cns0 (id: 0)\nother (id: 3)\np2cns1\n",
              "link": "lo UNKNOWN ...\np2cbr UP ...\np2ch0@if5 UP ...\np2cuh1@p2cus1 UP\n"}
    deleted: list[tuple[str, ...]] = []

    def run(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 0, listed["netns" if "netns" in cmd else "link"],
                                           "")
    monkeypatch.setattr(bench_machine.subprocess, "run", run)
    monkeypatch.setattr(bench_machine, "_ip", lambda *a, check=True: deleted.append(a))
    bench_machine.teardown()
    assert deleted == [("netns", "del", "p2cns0"), ("netns", "del", "p2cns1"),
                       ("link", "del", "p2cbr"), ("link", "del", "p2ch0"),
                       ("link", "del", "p2cuh1")]

"""``simulate --without-profiler``: the profiler's per-op cost, injected into
a built chain of ops, comes back out exactly; none changes nothing; GPU work
is untouched; the fit finds the injected figure; bad figures get one line."""

from __future__ import annotations

import json

import pytest
from builders import MD, cpu, gpu, write_nodes
from helpers import ROOT, assert_one_line_failure, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.errors import InputError
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.simulation import profiler_overhead as po
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.prepared import GPU_COMPUTE
from pt2chakra.simulation.results import SimConfig


def chain(durs: list[int], gaps: list[int], cost: int, share: float = 0.5,
          kernel: int = 0) -> list:
    """A thread's ops back to back (op k: ``durs[k]`` us after a ``gaps[k]``
    us gap), each paying ``cost`` us of profiler, ``share`` of it in the gap
    before the op and the rest in the op; with ``kernel`` > 0, op 0 launches a
    kernel of that many us that the last op waits for. (The step starts at
    the first op: its whole cost is in the op.)"""
    nodes, t = [], 0
    for k, (d, g) in enumerate(zip(durs, gaps)):
        in_gap = round(cost * share) if k else 0
        t += g + in_gap
        deps = [k] if k else []
        op = cpu(k + 1, t, d + cost - in_gap, deps=deps)
        nodes.append(op)
        t += d + cost - in_gap
    if kernel:
        nodes.append(gpu(100, nodes[0].start_time_micros + 1, kernel, deps=[1], kinds=["launch"]))
        last = nodes[len(durs) - 1]
        last.data_deps.append(100)
        for a in last.attrs:
            if a[0] == "data_dep_kinds":
                last.attrs[last.attrs.index(a)] = (a[0], a[1], [*a[2], "gpu_sync"])
    return nodes


def predicted(nodes: list, per_op: float = 0.0) -> float:
    sim = Simulator([(MD, nodes)])
    return sim.run(SimConfig(profiler_overhead_us=per_op))[0].predicted_step_us


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 200), min_size=1, max_size=12), st.integers(0, 60),
       st.floats(0.0, 1.0), st.data())
def test_an_injected_per_op_cost_comes_back_exactly(durs: list[int], cost: int, share: float,
                                                    data: st.DataObject) -> None:
    # Every clean op lasts 1 us or more: a zero-length op is untimed and opens no
    # step window, so a clean chain starting with one would start its step later.
    gaps = data.draw(st.lists(st.integers(0, 100), min_size=len(durs), max_size=len(durs)))
    clean = predicted(chain(durs, gaps, 0))
    assert predicted(chain(durs, gaps, cost, share), cost) == pytest.approx(clean)


def test_zero_overhead_changes_nothing() -> None:
    nodes = chain([30, 5, 80, 12], [0, 10, 3, 0], 20, kernel=500)
    sim = Simulator([(MD, nodes)])
    plain, plain_schedule = sim.run(SimConfig())
    zero, zero_schedule = sim.run(SimConfig(profiler_overhead_us=0.0))
    assert plain.to_json() == zero.to_json()
    assert plain_schedule.start == zero_schedule.start
    assert "profiler_overhead" not in plain.to_json()


def test_gpu_work_is_untouched() -> None:
    nodes = chain([30, 5, 80, 12], [0, 10, 3, 0], 20, kernel=500)
    sim = Simulator([(MD, nodes)])
    _, before = sim.run(SimConfig())
    _, after = sim.run(SimConfig(profiler_overhead_us=20.0))
    gpu_nodes = [i for i, c in enumerate(after.category) if c == GPU_COMPUTE]
    assert gpu_nodes
    for i in gpu_nodes:
        assert after.end[i] - after.start[i] == before.end[i] - before.start[i] == 500
    # the kernel is launched earlier and the wait for it holds: the step is
    # the one of the chain recorded without the profiler
    clean = chain([30, 5, 80, 12], [0, 10, 3, 0], 0, kernel=500)
    assert predicted(nodes, 20.0) == predicted(clean) < predicted(nodes)


def test_the_fit_finds_the_injected_figure(tmp_path) -> None:
    durs, gaps = [40, 5, 90, 12, 60, 3], [0, 10, 3, 0, 7, 2]
    real = predicted(chain(durs, gaps, 0))
    et = write_nodes(tmp_path / "c.et", chain(durs, gaps, 25))
    result = simulate([et], SimulationOptions(real_step_ms=real / 1000))
    o = result.profiler_overhead
    assert o is not None and o.source == "fit" and o.reachable
    assert o.per_op_us == pytest.approx(25, abs=2 * po.FIT_RESOLUTION_US)
    assert result.predicted_step_us == pytest.approx(real, abs=0.1)
    low, high = po.parse_figure(o.fit_low or ""), po.parse_figure(o.fit_high or "")
    assert low < 25 < high
    # the printed figure reads back as it is
    assert po.parse_figure(o.figure) == pytest.approx(o.per_op_us, abs=0.005)


def test_a_step_below_the_gpu_floor_is_not_reachable(tmp_path) -> None:
    et = write_nodes(tmp_path / "g.et", chain([30, 5, 80, 12], [0, 10, 3, 0], 20, kernel=500))
    result = simulate([et], SimulationOptions(real_step_ms=0.1))
    o = result.profiler_overhead
    assert o is not None and not o.reachable and o.fit_low is None and o.fit_high is None
    assert "not reachable" in o.note


def test_a_step_at_the_gpu_floor_bounds_the_figure_from_below_only(tmp_path) -> None:
    nodes = chain([30, 5, 80, 12], [0, 10, 3, 0], 20, kernel=500)
    floor = predicted(nodes, po.largest_figure(Simulator([(MD, nodes)]).prepared(0)))
    et = write_nodes(tmp_path / "g.et", nodes)
    o = simulate([et], SimulationOptions(real_step_ms=floor / 1000)).profiler_overhead
    assert o is not None and o.reachable and o.fit_low is not None and o.fit_high is None
    assert "from below only" in o.note


def test_meta_json_beside_the_traces_gives_the_real_step(tmp_path) -> None:
    durs, gaps = [40, 5, 90, 12], [0, 10, 3, 0]
    real = predicted(chain(durs, gaps, 0))
    et = write_nodes(tmp_path / "c.et", chain(durs, gaps, 10))
    po.write_meta(str(tmp_path / po.META_NAME), [real / 1e6] * 3, {"job": "test"})
    o = simulate([et], SimulationOptions(without_profiler=True)).profiler_overhead
    assert o is not None and o.source == "fit" and o.source_detail.endswith(po.META_NAME)
    assert o.per_op_us == pytest.approx(10, abs=2 * po.FIT_RESOLUTION_US)


def test_without_a_source_the_figure_is_an_estimate(tmp_path) -> None:
    et = write_nodes(tmp_path / "c.et", [cpu(1, 0, 50, incl=100), cpu(2, 20, 10, deps=[1]),
                                         cpu(3, 60, 10, deps=[2]), cpu(4, 400, 30, deps=[3])])
    o = simulate([et], SimulationOptions(without_profiler=True)).profiler_overhead
    assert o is not None and o.estimate and o.source == "estimate"
    # callee 1's caller time outside its two callees: (100 - 20) / 2, plus the
    # cheapest leaf's span (10)
    assert o.per_op_us == pytest.approx(50)


@pytest.mark.parametrize("text", ["32.95us/op", "32.95 us/op", "32.95", "0", "1e1us"])
def test_figures_read(text: str) -> None:
    assert po.parse_figure(text) >= 0


@pytest.mark.parametrize("text", ["-3us/op", "abc", "nan", "inf", "3 ms/op", ""])
def test_bad_figures_are_refused(text: str) -> None:
    with pytest.raises(InputError, match="--profiler-overhead"):
        po.parse_figure(text)


@pytest.mark.parametrize(("args", "needle"), [
    (["--profiler-overhead=-5us/op"], "negative"),
    (["--profiler-overhead", "fast"], "not a figure"),
    (["--profiler-overhead", "5000us/op"], "larger than the recorded ops"),
    (["--real-step=-1"], "--real-step"),
    (["--real-step", "x"], "--real-step"),
    (["--real-step", "1", "--profiler-overhead", "3"], "--real-step"),
])
def test_bad_figures_get_one_line_exit_2(tmp_path, args: list[str], needle: str) -> None:
    et = write_nodes(tmp_path / "c.et", chain([40, 5, 90], [0, 10, 3], 10))
    proc = run_cli("simulate", et, *args)
    assert proc.returncode == 2
    assert_one_line_failure(proc, needle)
    assert proc.stdout == ""


def test_json_carries_the_figure_beside_the_step(tmp_path) -> None:
    et = write_nodes(tmp_path / "c.et", chain([40, 5, 90], [0, 10, 3], 10))
    proc = run_cli("simulate", et, "--json", "--profiler-overhead", "10us/op",
                   "--cpu-scale", "1", "2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    o = doc["profiler_overhead"]
    assert o["figure"] == "10.00us/op" and o["source"] == "given"
    assert doc["predicted_step_us"] < o["profiled_step_us"]
    assert po.parse_figure(o["figure"]) == 10
    # the what-if rows are taken from the step without the profiler
    assert doc["what_if"][0]["predicted_step_us"] == pytest.approx(doc["predicted_step_us"])
    plain = json.loads(run_cli("simulate", et, "--json").stdout)
    assert "profiler_overhead" not in plain


def test_world_size_takes_the_figure_fitted_on_the_recorded_ranks(tmp_path) -> None:
    """The real step is the recorded job's: the fit is made on the recorded
    ranks and the scaled-out replay takes that figure."""
    src = ROOT / "samples" / "gloo_ddp_cpu"
    ets = []
    for r in (0, 1):
        out = tmp_path / f"g.{r}.et"
        assert run_cli("convert", "--rank", r, "--host-trace",
                       src / f"gloo_ddp_cpu.rank{r}.host_et.json.gz", "--device-trace",
                       src / f"gloo_ddp_cpu.rank{r}.kineto.json.gz", "-o", out).returncode == 0
        ets.append(out)
    recorded = json.loads(run_cli("simulate", *ets, "--json", "--real-step", "14").stdout)
    scaled = run_cli("simulate", *ets, "--json", "--real-step", "14", "--world-size", "4")
    assert scaled.returncode == 0, scaled.stderr
    got = json.loads(scaled.stdout)["profiler_overhead"]
    assert got["figure"] == recorded["profiler_overhead"]["figure"]
    assert got["source"] == "fit" and "recorded ranks" in got["source_detail"]
    assert got["real_step_us"] is None  # the real step is not the scaled job's
    given = json.loads(run_cli("simulate", *ets, "--json", "--world-size", "4",
                               "--profiler-overhead", got["figure"]).stdout)
    assert given["predicted_step_us"] == json.loads(scaled.stdout)["predicted_step_us"]


def test_the_text_report_the_html_report_and_diff_show_both_steps(tmp_path) -> None:
    nodes = chain([40, 5, 90, 12], [0, 10, 3, 0], 10)
    et = write_nodes(tmp_path / "c.et", nodes)
    proc = run_cli("simulate", et, "--profiler-overhead", "10us/op", "--no-lanes")
    assert proc.returncode == 0, proc.stderr
    clean, recorded = predicted(chain([40, 5, 90, 12], [0, 10, 3, 0], 0)), predicted(nodes)
    assert f"without the profiler: predicted {clean:.0f} us; with it (the replay as " \
        f"recorded) {recorded:.0f} us" in proc.stdout
    page = tmp_path / "r.html"
    assert run_cli("report", et, "-o", page, "--profiler-overhead", "10us/op",
                   "--no-what-if").returncode == 0
    html = page.read_text()
    assert "with the profiler (replay)" in html and "10.00us/op (given" in html
    assert run_cli("simulate", et, "--profiler-overhead", "10us/op", "--write-et",
                   tmp_path / "p", "-q").returncode == 0
    diffed = run_cli("diff", et, tmp_path / "p.0.et")
    assert diffed.returncode == 0, diffed.stderr
    b_line = diffed.stdout.splitlines()[1]
    assert f"step {clean:.0f} us" in b_line and "profiler's cost out 10.00 us/op" in b_line
    assert f"with the profiler's cost in: {recorded:.0f} us" in b_line
    assert "a replay" not in diffed.stdout.splitlines()[0]  # A is a recording

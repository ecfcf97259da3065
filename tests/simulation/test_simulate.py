"""Simulator semantics on small hand-made graphs."""

from __future__ import annotations

import json
import logging

import pytest
from builders import IS_CPU, IS_GPU, MD, cpu, gpu, node, write_nodes

from pt2chakra.chakra.records import CollectiveType, GlobalMetadata, NodeType
from pt2chakra.simulation.engine import Simulator, simulate_graphs
from pt2chakra.simulation.network import collective_time, cost_factors
from pt2chakra.simulation.results import CATEGORY_NAMES, SimConfig
from pt2chakra.simulation.views import chrome_trace, write_chrome_trace, write_plot


def run(*ranks, cfg=None):
    return simulate_graphs([(MD, list(nodes)) for nodes in ranks], config=cfg)


def test_completion_based_release():
    # b depends on a: b starts when a *completes* (10), not when a starts.
    nodes = [gpu(1, 0, 10, stream=7), gpu(2, 0, 5, deps=[1], kinds=["stream_wait"], stream=8)]
    res, sched = Simulator([(MD, nodes)]).run()
    assert sched.start[1] == 10 and sched.end[1] == 15
    assert res.predicted_step_us == 15


def test_lane_exclusivity():
    # Two independent kernels on one stream never overlap; on two streams they do.
    same = [gpu(1, 0, 10, stream=7), gpu(2, 0, 10, stream=7)]
    _, sched = Simulator([(MD, same)]).run()
    spans = sorted(zip(sched.start, sched.end))
    assert spans[0][1] <= spans[1][0]
    assert max(sched.end) == 20
    apart = [gpu(1, 0, 10, stream=7), gpu(2, 0, 10, stream=8)]
    assert run(apart).predicted_step_us == 10


def test_cpu_idle_gaps_are_replayed_as_delays():
    nodes = [cpu(1, 100, 10), cpu(2, 150, 20, deps=[1])]
    res = run(nodes)
    # step = 100..170 measured; replay: 10 + 40 gap + 20
    assert res.measured_step_us == 70
    assert res.predicted_step_us == pytest.approx(70)


def test_callee_slices_preserve_caller_time():
    # Caller 0..100 with a callee at 40..60: caller holds the thread until 40,
    # the callee 20, the caller's remaining 40 us replay as a gap.
    nodes = [cpu(1, 0, 80, incl=100), cpu(2, 40, 20, deps=[1], kinds=["caller"]),
             cpu(3, 100, 5, deps=[2])]
    res, sched = Simulator([(MD, nodes)]).run()
    assert sched.start[1] == 40
    assert res.predicted_step_us == pytest.approx(105)


def test_halving_compute_halves_a_compute_bound_chain():
    chain = [gpu(1, 0, 100)] + [gpu(i, 100 * (i - 1), 100, deps=[i - 1]) for i in range(2, 11)]
    sim = Simulator([(MD, chain)])
    full = sim.predict(SimConfig())
    half = sim.predict(SimConfig(compute_scale=0.5))
    assert full == 1000
    assert half == pytest.approx(full / 2)


def test_cross_rank_rendezvous_uses_last_arrival_and_intrinsic_duration():
    # Rank 0 reaches the all-reduce at 0 and its kernel measured 90 us (it
    # waited 80 for rank 1); rank 1 arrives at 80 and took 10.
    r0 = [gpu(1, 0, 90, comm=CollectiveType.ALL_REDUCE, seq=5)]
    r1 = [gpu(1, 0, 80, stream=7), gpu(2, 80, 10, deps=[1], comm=CollectiveType.ALL_REDUCE,
                                       seq=5)]
    res, sched = Simulator([(MD, r0), (MD, r1)]).run(SimConfig(align="together"))
    assert sched.start[0] == 80 and sched.start[2] == 80  # both start at the last arrival
    assert sched.end[0] == sched.end[2] == 90  # and end together (no double counting)
    assert res.predicted_step_us == 90


def test_collectives_match_by_order_without_seq():
    r0 = [gpu(1, 0, 30, comm=CollectiveType.ALL_GATHER), gpu(2, 30, 5, deps=[1],
                                                             comm=CollectiveType.ALL_GATHER)]
    r1 = [gpu(1, 0, 25, stream=3), gpu(2, 25, 5, deps=[1], kinds=["stream_wait"],
                                       comm=CollectiveType.ALL_GATHER),
          gpu(3, 30, 5, deps=[2], comm=CollectiveType.ALL_GATHER)]
    _, sched = Simulator([(MD, r0), (MD, r1)]).run(SimConfig(align="together"))
    assert sched.start[0] == sched.start[3] == 25


def test_gpu_sync_wait_is_not_double_counted():
    # The CPU op 2 (10..60) blocked on kernel 100 (launched by op 1) until 55.
    nodes = [cpu(1, 0, 10), cpu(2, 10, 50, deps=[1]),
             gpu(100, 10, 45, deps=[1], kinds=["launch"]),
             cpu(3, 60, 5, deps=[2, 100], kinds=["thread_order", "gpu_sync"])]
    sim = Simulator([(MD, nodes)])
    assert sim.predict(SimConfig()) == pytest.approx(65)
    # Halving the kernel shortens the wait: the CPU is released earlier.
    assert sim.predict(SimConfig(compute_scale=0.5)) < 65 - 15


def test_network_model_and_bandwidth_scale():
    assert cost_factors(int(CollectiveType.ALL_REDUCE), 4) == (6.0, 1.5)
    assert cost_factors(int(CollectiveType.ALL_GATHER), 4, "tree") == (2.0, 0.75)
    t = collective_time(int(CollectiveType.ALL_REDUCE), 1_000_000, 4, 100.0, 5.0)
    assert t == pytest.approx(6 * 5 + 1.5 * 1_000_000 / 100e3)
    r = [[gpu(1, 0, 50, comm=CollectiveType.ALL_REDUCE, seq=1)] for _ in range(4)]
    graphs = [(MD, nodes) for nodes in r]
    sim = Simulator(graphs)
    model = sim.predict(SimConfig(bandwidth_gbps=100.0, latency_us=5.0, align="together"))
    expected = 6 * 5 + 1.5 * (1 << 20) / 100e3
    assert model == pytest.approx(expected)
    assert sim.predict(SimConfig(bandwidth_scale=2.0, align="together")) == pytest.approx(25)


def test_comm_streams_what_if_overlaps_independent_collectives():
    def rank():
        return [gpu(1, 0, 10, comm=CollectiveType.ALL_REDUCE, seq=1, stream=9),
                gpu(2, 10, 10, deps=[1], comm=CollectiveType.ALL_REDUCE, seq=2, stream=9)]
    sim = Simulator([(MD, rank()), (MD, rank())])
    assert sim.predict(SimConfig(align="together")) == 20
    assert sim.predict(SimConfig(comm_streams=2, align="together")) == 10


def test_verbose_log_lines(caplog):
    nodes = [gpu(107132, 0, 3)]
    with caplog.at_level(logging.INFO, logger="pt2chakra.simulation"):
        Simulator([(MD, nodes)]).run()
    msgs = [r.getMessage() for r in caplog.records]
    assert "Issuing GPU node 107132 (gpu107132) at 0us on stream 7 with duration 3us" in msgs
    assert "GPU node 107132 completed at 3us" in msgs


def test_critical_path_shares_add_up():
    nodes = [cpu(1, 0, 10), gpu(2, 10, 100, deps=[1], kinds=["launch"]),
             cpu(3, 10, 5, deps=[1]), cpu(4, 110, 5, deps=[3, 2], kinds=["thread_order",
                                                                        "gpu_sync"])]
    res = run(nodes)
    cp = res.critical_path
    assert cp is not None
    assert cp.length_us == pytest.approx(res.predicted_step_us)
    assert sum(cp.by_node_type.values()) == pytest.approx(cp.length_us)
    assert sum(cp.by_edge_kind.values()) == pytest.approx(cp.length_us)
    assert cp.by_node_type["gpu_compute"] == 100


def test_timeline_json_format(tmp_path):
    nodes = [cpu(1, 0, 10), gpu(2, 10, 100, deps=[1], kinds=["launch"])]
    _, sched = Simulator([(MD, nodes)]).run()
    doc = chrome_trace(sched)
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 4  # 2 simulated + 2 measured
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"]
    meta = [e for e in events if e["ph"] == "M"]
    names = {e["name"] for e in meta}
    assert {"process_name", "thread_name"} <= names
    procs = {e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert procs == {"rank 0 simulated", "rank 0 measured"}
    # every (pid, tid) used by an X event has a thread name
    named = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in complete} <= named
    path = tmp_path / "t.json"
    write_chrome_trace(sched, str(path))
    assert json.loads(path.read_text())["traceEvents"]


@pytest.mark.slow
def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    nodes = [cpu(1, 0, 10), gpu(2, 10, 100, deps=[1], kinds=["launch"])]
    _, sched = Simulator([(MD, nodes)]).run()
    out = tmp_path / "t.png"
    write_plot(sched, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_json(tmp_path, capsys):
    from pt2chakra.cli import main

    path = write_nodes(tmp_path / "r.et", [cpu(1, 0, 10), gpu(2, 10, 100, deps=[1], kinds=["launch"])])
    assert main(["simulate", str(path), "--json", "--compute-scale", "0.5", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in ("predicted_step_us", "measured_step_us", "error_pct"):
        assert key in doc and key in doc["ranks"][0]
    assert [w["compute_scale"] for w in doc["what_if"]] == [0.5, 1.0]
    assert doc["what_if"][0]["predicted_step_us"] == pytest.approx(60)


# --------------------------------------------------------------------------
# Other tools' .et files: attributes of unexpected types, untimed graphs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("attrs,md_attrs,bad", [
    ([("data_dep_kinds", "int64_val", 3)], [], "data_dep_kinds"),
    ([("comm_seq", "string_val", "abc")], [], "comm_seq"),
    ([("comm_size", "string_val", "x")], [], "comm_size"),
    ([("comm_type", "string_val", "x")], [], "comm_type"),
    ([("is_cpu_op", "bool_val", True), ("tid", "int64_list", [1, 2])], [], "tid"),
    ([("stream", "int64_list", [1, 2])], [], "stream"),
    ([("is_cpu_op", "bool_val", True), ("inclusive_duration_micros", "string_val", "x")], [],
     "inclusive_duration_micros"),
    ([], [("step_start_micros", "string_val", "a"), ("step_end_micros", "string_val", "b")],
     "step_start_micros"),
])
def test_attributes_of_unexpected_type_count_as_absent(tmp_path, caplog, capsys, attrs,
                                                       md_attrs, bad):
    from pt2chakra.cli import main

    ntype = NodeType.COMM_COLL_NODE if bad.startswith("comm") else NodeType.COMP_NODE
    if bad in ("comm_seq", "comm_type"):  # a communication node has a size (else refused)
        attrs = [*attrs, ("comm_size", "int64_val", 8)]
    nodes = [node(1, name="a", start=5, dur=10),
             node(2, [1], name="b", node_type=ntype, start=15, dur=5, attrs=attrs)]
    path = write_nodes(tmp_path / "other.et", nodes, GlobalMetadata(version="0.0.4", attrs=md_attrs))
    if bad == "comm_size":  # a size of the wrong type is no size: refused (item 7 of issue 25)
        assert main(["simulate", str(path)]) == 2
        assert "comm-size-missing" in capsys.readouterr().err
        return
    with caplog.at_level(logging.WARNING, logger="pt2chakra.simulation"):
        assert main(["simulate", str(path), "--json", "--timeline",
                     str(tmp_path / "t.json")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predicted_step_us"] == 15
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and bad in warnings[0] and "other.et" in warnings[0]


def test_untimed_chain_keeps_full_durations():
    # 10 -> 20 -> 30 us with no start times: 60, whether the nodes say
    # is_cpu_op false, true, or nothing (absent means a device op).
    for attrs, category in (([], "gpu_compute"), ([IS_GPU], "gpu_compute"), ([IS_CPU], "cpu_op")):
        chain = [node(i, [i - 1] if i > 1 else [], dur=10 * i, attrs=attrs) for i in (1, 2, 3)]
        sim = Simulator([(MD, chain)])
        res, sched = sim.run()
        assert res.predicted_step_us == 60
        assert res.error_pct is None and res.measured_step_us == 0  # nothing measured
        assert {CATEGORY_NAMES[c] for c in sched.category} == {category}
        scaled = sim.predict(SimConfig(compute_scale=2.0, cpu_scale=2.0))
        assert scaled == 120
    # Independent device ops without a stream share the rank's device lane.
    free = [node(i, name="k", dur=10) for i in (1, 2)]
    _, sched = Simulator([(MD, free)]).run()
    assert sched.lane_names[sched.lane[0]] == (0, "gpu", "device")
    assert max(sched.end) == 20
    assert chrome_trace(sched)["traceEvents"]  # no measured schedule, no crash


def test_microbench_is_replayed_step_after_step(tmp_path, capsys):
    from pt2chakra.cli import main

    prefix = tmp_path / "mb"
    assert main(["microbench", "--size", "1048576", "--npus", "2", "--steps", "3",
                 "--compute", "100", "-o", str(prefix)]) == 0
    capsys.readouterr()
    assert main(["simulate", f"{prefix}.0.et", f"{prefix}.1.et", "--json",
                 "--compute-scale", "1", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predicted_step_us"] >= 300
    assert [w["predicted_step_us"] for w in doc["what_if"]] == [doc["predicted_step_us"],
                                                                2 * doc["predicted_step_us"]]
    for r in doc["ranks"]:
        assert not any(lane["lane"].startswith("cpu") for lane in r["lanes"])


# --------------------------------------------------------------------------
# --plot / --timeline paths
# --------------------------------------------------------------------------


def _one_rank(tmp_path):
    return write_nodes(tmp_path / "r.et", [cpu(1, 0, 10), gpu(2, 10, 100, deps=[1], kinds=["launch"])])


@pytest.mark.parametrize("name", ["t.xyz", "noext", "", "r.et"])
def test_plot_path_checked_before_simulating(tmp_path, capsys, name):
    from pt2chakra.cli import main

    plot = str(tmp_path / name) if name else str(tmp_path) + "/"
    # A missing trace would fail the load: the plot path is refused first.
    assert main(["simulate", str(tmp_path / "missing.et"), "--plot", plot]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ".png, .svg or .pdf" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("option,name", [("--plot", "r.png"), ("--timeline", "r.et")])
def test_outputs_never_overwrite_an_input(tmp_path, capsys, option, name):
    from pt2chakra.cli import main

    if option == "--plot":  # without the [plot] extra, --plot is refused for that first
        pytest.importorskip("matplotlib")
    trace = _one_rank(tmp_path)
    target = tmp_path / name
    if name != trace.name:  # an input that happens to end in .png
        trace = trace.rename(target)
    before = trace.read_bytes()
    assert main(["simulate", str(trace), option, str(target)]) == 2
    assert "refusing to overwrite an input" in capsys.readouterr().err
    assert trace.read_bytes() == before


def test_plot_is_written_atomically(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from pt2chakra.cli import main

    trace = _one_rank(tmp_path)
    out = tmp_path / "p.svg"
    assert main(["simulate", str(trace), "-q", "--plot", str(out)]) == 0
    assert b"<svg" in out.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.svg", "r.et"]  # no temp file left
    out.write_bytes(b"previous")

    def broken(self, fname, **kw):
        with open(fname, "wb") as f:
            f.write(b"half")
        raise RuntimeError("disk trouble")

    monkeypatch.setattr(Figure, "savefig", broken)
    with pytest.raises(RuntimeError):
        main(["simulate", str(trace), "-q", "--plot", str(out)])
    assert out.read_bytes() == b"previous"  # the old plot is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.svg", "r.et"]


def test_no_files_is_refused_not_a_zero_step():
    from pt2chakra.errors import InputError
    from pt2chakra.simulation import simulate

    with pytest.raises(InputError, match="no .et file"):
        simulate([])

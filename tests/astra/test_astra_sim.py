"""The --consumer astra-sim export: no METADATA or CPU nodes, process groups in
the metadata, <prefix>.<rank>.et, communicator-group JSON, order kept."""

from __future__ import annotations

import json

import pytest
from builders import IS_CPU, IS_GPU, cpu_attrs, gpu_attrs, metadata, node
from helpers import GLOO_SAMPLE, assert_one_line_failure, run_cli

from pt2chakra.astra import AstraSimProfile
from pt2chakra.astra.export import convert_files, profile, write_astra_sim
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.json_form import jsonize
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType, attr_dict
from pt2chakra.conversion import convert
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import CPU_GAP_CATEGORY
from pt2chakra.simulation.engine import Simulator, simulate_graphs
from pt2chakra.tools.validate import validate


def test_dlrm_ranks_pass_astra_sim_validation(converted, tmp_path):  # noqa: F811
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    assert not validate(files, consumer="astra-sim").sound
    prefix = tmp_path / "dlrm"
    proc = run_cli("astra-sim", *files, "-o", prefix, "--cpu", "drop")
    assert proc.returncode == 0, proc.stderr
    outs = [tmp_path / f"dlrm.{r}.et" for r in range(8)]
    report = validate(outs, consumer="astra-sim")
    assert report.sound and not report.problems, report.lines()
    for src, out in zip(files, outs):
        before = list(read_et(src)[1])
        after = list(read_et(out)[1])
        gpu_before = [n for n in before if not attr_dict(n.attrs)["is_cpu_op"]]
        real = [n for n in after if n.name != CPU_GAP_CATEGORY]
        gaps = [n for n in after if n.name == CPU_GAP_CATEGORY]
        assert [n.id for n in real] == [n.id for n in gpu_before]
        assert all(n.type != NodeType.METADATA_NODE for n in after)
        assert not any(attr_dict(n.attrs)["is_cpu_op"] for n in after)
        colls = [n for n in after if n.type == NodeType.COMM_COLL_NODE]
        assert len(colls) == 8
        # a collective still waits for the kernels its launch order implied
        assert all(n.data_deps for n in colls)
        # the CPU time is there as GPU-side COMP_NODEs on the streams, each
        # right before the node that waited for it (the last one: the tail)
        assert gaps and all(n.type == NodeType.COMP_NODE and n.duration_micros > 0
                            and "stream" in attr_dict(n.attrs) for n in gaps)
        position = {n.id: k for k, n in enumerate(after)}
        for gap in gaps[:-1]:
            waiter = after[position[gap.id] + 1]
            assert gap.id in waiter.data_deps
            assert gap.start_time_micros + gap.duration_micros == waiter.start_time_micros
            assert attr_dict(gap.attrs)["stream"] == attr_dict(waiter.attrs)["stream"]
        assert not any(gaps[-1].id in n.data_deps for n in after)


def test_process_groups_move_to_metadata_and_groups_json(converted, tmp_path):  # noqa: F811
    md, nodes = read_et(converted["chakra_pg_host"])
    written = write_astra_sim(md, nodes, tmp_path / "pg", rank=1)
    # its only group, "0", is the whole machine, which ASTRA-sim's comm-groups
    # file cannot hold (it asserts id > 0): no file
    assert written == [str(tmp_path / "pg.1.et")]
    out_md, read_nodes = read_et(written[0])
    assert "process_groups" in attr_dict(out_md.attrs)
    out_nodes = list(read_nodes)
    assert {n.type for n in out_nodes} == {NodeType.COMM_COLL_NODE}


def test_groups_file_leaves_out_the_whole_machine_and_refuses_names():
    from pt2chakra.astra.export import groups_file

    assert groups_file({"0": [0, 1, 2, 3], "1": [0, 2], "2": [1, 3]}, "x") == {
        "1": [0, 2], "2": [1, 3]}
    with pytest.raises(InputError, match="numeric"):
        groups_file({"default_pg": [0, 1]}, "x.et")


def test_metadata_node_facts_recovered_when_metadata_lacks_them():
    pg_json = '[{"pg_name": "7", "ranks": [0, 2], "group_size": 2}]'
    nodes = [node(1, name="## process_group:init ##", node_type=NodeType.METADATA_NODE,
                  inputs=(json.dumps([pg_json]), "[[]]", '["String"]')),
             node(2, [1], name="k", attrs=[IS_GPU])]
    md, out = profile(GlobalMetadata(version=""), nodes)
    assert attr_dict(md.attrs)["process_groups"] == pg_json
    assert [n.id for n in out] == [2] and out[0].data_deps == []


def test_keep_mode_and_from_json_profile(converted, tmp_path):  # noqa: F811
    src = converted["dlrm_rank0"]
    written = convert_files([src], tmp_path / "k", cpu="keep")
    report = validate(written, consumer="astra-sim")
    assert any("CPU node" in p.message for p in report.errors)
    doc = tmp_path / "h.json"
    jsonize(src, doc)
    proc = run_cli("from-json", doc, "--consumer", "astra-sim", "--rank", "3", "-o", tmp_path / "j")
    assert proc.returncode == 0, proc.stderr
    assert validate([tmp_path / "j.3.et"], consumer="astra-sim").sound


def test_unwritable_output_is_one_line(converted, tmp_path):  # noqa: F811
    """A missing output folder is created (the job folder); one that cannot
    be (a file is in the way) is one line."""
    (tmp_path / "no").write_text("a file, not a folder")
    proc = run_cli("astra-sim", converted["dlrm_rank0"], "-o", tmp_path / "no" / "x")
    assert_one_line_failure(proc, "cannot write")


def _replay_errors(files: list) -> dict[str, float]:
    """Predicted step vs the full trace's measured step, in %, per CPU mode."""
    graphs = [(md, list(nodes)) for md, nodes in map(read_et, files)]
    full = simulate_graphs(graphs)
    measured = full.measured_step_us
    errors = {"full": (full.predicted_step_us - measured) / measured * 100}
    for mode in ("keep", "drop", "drop-no-gaps"):
        predicted = simulate_graphs([profile(md, nodes, mode) for md, nodes in graphs]).predicted_step_us
        errors[mode] = (predicted - measured) / measured * 100
    return errors


# Measured (docs/TOOLS.md): full / keep / drop / drop-no-gaps, error in %:
# DLRM 8 ranks -0.51 / -0.51 / 0.00 / -48.08; linear_1gpu -0.66 / -0.66 /
# 0.00 / -52.28; hta_simple_add -0.01 / -0.01 / 0.00 / -1.13.
@pytest.mark.parametrize(("names", "no_gaps_below"), [
    ([f"dlrm_rank{r}" for r in range(8)], -40.0),
    (["linear_1gpu"], -35.0),
    (["hta_simple_add"], -1.0),
])
def test_drop_with_gaps_replays_the_measured_step(converted, names, no_gaps_below):  # noqa: F811
    errors = _replay_errors([converted[n] for n in names])
    assert abs(errors["drop"]) < 0.05, errors
    assert abs(errors["drop"]) < abs(errors["keep"]), errors
    assert abs(errors["keep"] - errors["full"]) < 1e-9, errors  # keep = the full replay
    assert errors["drop-no-gaps"] < no_gaps_below, errors  # GPU work replays too early


def _tiny(gap_us: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """Thread 1: A launches K1 (5 us), then X us of CPU work after K1 ended,
    then B launches K2 on the same stream. Step 100..300."""
    k2_start = 117 + gap_us
    nodes = [
        node(1, name="A", start=100, dur=10, attrs=cpu_attrs()),
        node(2, [1], ["thread_order"], name="B", start=k2_start - 3, dur=5, attrs=cpu_attrs()),
        node(3, [1], ["launch"], name="K1", start=112, dur=5, attrs=gpu_attrs()),
        node(4, [2, 3], ["launch", "stream_order"], name="K2", start=k2_start, dur=5,
             attrs=gpu_attrs()),
    ]
    return metadata(step=(100, 300)), nodes


@pytest.mark.parametrize("gap_us", [0, 7, 45])
def test_cpu_gap_before_a_kernel_becomes_a_gpu_side_delay(gap_us):
    md, nodes = _tiny(gap_us)
    out_md, out = profile(md, nodes, "drop")
    by_name: dict[str, list[ChakraNode]] = {}
    for n in out:
        by_name.setdefault(n.name, []).append(n)
    assert not any(attr_dict(n.attrs)["is_cpu_op"] for n in out)
    k2 = by_name["K2"][0]
    before_k2 = [n for n in by_name[CPU_GAP_CATEGORY] if n.id in k2.data_deps]
    if gap_us:
        (gap,) = before_k2
        assert gap.duration_micros == gap_us
        assert gap.data_deps == [3]  # it starts when K1 has ended
        assert attr_dict(gap.attrs)["stream"] == 7 and not attr_dict(gap.attrs)["is_cpu_op"]
    else:
        assert not before_k2
    # K1 waited 12 us for A's launch from the step start; the step's last
    # 300 - (122 + gap) us are CPU time after K2: a tail gap
    (k1_gap,) = [n for n in by_name[CPU_GAP_CATEGORY] if n.id in by_name["K1"][0].data_deps]
    assert (k1_gap.duration_micros, k1_gap.data_deps) == (12, [])
    tail = out[-1]
    assert tail.name == CPU_GAP_CATEGORY and tail.duration_micros == 300 - (122 + gap_us)
    # replayed: K2 starts X us after K1 ends, and the step is the measured one
    result, schedule = Simulator([(out_md, out)]).run()
    start = {n.name: schedule.start[i] for i, n in enumerate(schedule.nodes) if n.name != CPU_GAP_CATEGORY}
    assert start["K1"] == 12 and start["K2"] == 17 + gap_us
    assert result.predicted_step_us == result.measured_step_us == 200
    # without gaps K2 follows K1 at once and the step is only the GPU work
    _, old = profile(md, nodes, "drop-no-gaps")
    assert [n.name for n in old] == ["K1", "K2"]
    result, schedule = Simulator([(md, old)]).run()
    k2_index = [n.name for n in schedule.nodes].index("K2")
    assert schedule.start[k2_index] == 17


def test_drop_with_gaps_validates_for_astra_sim(converted, tmp_path):  # noqa: F811
    """(A 1-rank trace is refused: see test_serial_chain.)"""
    written = convert_files([converted["dlrm_rank0"]], tmp_path / "lin", cpu="drop")
    report = validate(written, consumer="astra-sim")
    assert report.sound and not [p for p in report.problems if p.severity == "error"]
    nodes = list(read_et(written[0])[1])
    assert any(n.name == CPU_GAP_CATEGORY for n in nodes)
    assert not any(attr_dict(n.attrs).get("is_cpu_op", False) for n in nodes)
    assert attr_dict(read_et(written[0])[0].attrs)["consumer_profile"] == "astra-sim (cpu=drop)"


def test_dropped_chains_hand_down_the_latest_kernel_per_stream_and_cut_cycles():
    def gpu(i: int, start: int, deps: list[int]) -> ChakraNode:
        return node(i, deps, name=f"K{i}", start=start, dur=1,
                    attrs=[IS_GPU, ("stream", "int64_val", 7)])

    def cpu(i: int, deps: list[int]) -> ChakraNode:
        return node(i, deps, name=f"C{i}", attrs=[IS_CPU])

    # C3 <-> C4 is a cycle of dropped nodes; K1 and K2 share a stream
    nodes = [gpu(1, 10, []), gpu(2, 20, []), cpu(3, [1, 4]), cpu(4, [3, 2]),
             gpu(5, 30, [3, 2])]
    md, out = profile(GlobalMetadata(version=""), nodes, "drop-no-gaps")
    k5 = out[-1]
    assert [n.id for n in out] == [1, 2, 5]
    assert k5.data_deps == [2]  # K1 is implied by stream order; K2 once
    assert attr_dict(k5.attrs).get("data_dep_kinds") is None
    assert attr_dict(md.attrs)["consumer_profile"] == "astra-sim (cpu=drop-no-gaps)"


def test_convert_still_reads_the_old_profile_keyword(tmp_path):
    """``profile=``, the name ``consumer=`` replaced, writes the same export
    (with a DeprecationWarning); both at once is refused."""
    host, kineto = f"{GLOO_SAMPLE}.rank0.host_et.json.gz", f"{GLOO_SAMPLE}.rank0.kineto.json.gz"
    convert(host, kineto, tmp_path / "new", consumer=AstraSimProfile())
    with pytest.warns(DeprecationWarning, match="profile= is now consumer="):
        convert(host, kineto, tmp_path / "old", profile=AstraSimProfile())
    assert (tmp_path / "old.0.et").read_bytes() == (tmp_path / "new.0.et").read_bytes()
    with pytest.raises(TypeError, match="consumer= only"):
        convert(host, kineto, tmp_path / "both", consumer=AstraSimProfile(),
                profile=AstraSimProfile())

"""End to end on the real traces in ../shared/traces: convert, account, no
cycles, right collectives, and the reference decoder reads the same graph."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import framed_bytes, read_with_reference

from pt2chakra.astra.export import AstraSimProfile
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.conversion.api import convert
from pt2chakra.rules.cycles import check_graph

PAIRS = ["linear_1gpu", "hta_simple_add"] + [f"dlrm_8gpu/rank{r}" for r in range(8)]
HOST_ONLY = ["linear_1gpu", "hta_simple_add", "resnet_2gpu_host", "resnet_1gpu_host", "gpt2_host",
             "chakra_pg_host"] + [f"dlrm_8gpu/rank{r}" for r in range(8)]
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "gpt_tiny_cpu" / "gpt_tiny_cpu"


def pair_paths(traces: Path, name: str) -> tuple[Path, Path]:
    if name.startswith("dlrm_8gpu/"):
        folder, rank = name.split("/")
        return (traces / folder / f"{rank}.host_et.json.gz", traces / folder / f"{rank}.kineto.json.gz")
    return traces / name / "host_et.json.gz", traces / name / "kineto.json.gz"


def attrs(node):
    return {a[0]: a[2] for a in node.attrs}


@pytest.mark.parametrize("name", PAIRS)
def test_pair_converts_with_gpu_nodes_and_full_accounting(traces, tmp_path, name):
    host, kineto = pair_paths(traces, name)
    out = tmp_path / "out.et"
    report = convert(host, kineto, out)
    assert report.accounted()
    assert report.host_ops_linked / report.host_ops_kept > 0.9
    assert report.gpu_activities_kept > 0
    nodes = list(read_et(str(out))[1])
    problems = check_graph(nodes)
    assert not problems.cycle and not problems.dangling and not problems.duplicate_ids
    gpu = [n for n in nodes if not attrs(n)["is_cpu_op"]]
    assert len(gpu) == report.gpu_activities_kept + sum(report.stand_in_nodes.values())
    # every GPU node follows its stream predecessor or is its stream's first
    for n in gpu:
        assert n.start_time_micros > 0 and n.duration_micros >= 0
    assert any(k == "launch" for n in gpu for k in attrs(n).get("data_dep_kinds", []))


@pytest.mark.parametrize("rank", range(8))
def test_dlrm_collectives_have_types_and_sizes(traces, tmp_path, rank):
    host, kineto = pair_paths(traces, f"dlrm_8gpu/rank{rank}")
    out = tmp_path / "dlrm.et"
    convert(host, kineto, out)
    _, nodes = read_et(str(out))
    comms = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    kinds = sorted(attrs(n)["comm_type"] for n in comms)
    # DLRM step: 5 all-to-all (embedding exchange) and 3 all-reduce (gradients)
    assert kinds == [CollectiveType.ALL_REDUCE] * 3 + [CollectiveType.ALL_TO_ALL] * 5
    assert all(attrs(n)["comm_size"] > 0 for n in comms)
    # all-reduce of the 394241-float gradient bucket = 1576964 bytes on every rank
    assert 394241 * 4 in [attrs(n)["comm_size"] for n in comms]


@pytest.mark.parametrize("name", HOST_ONLY)
def test_host_only_converts(traces, tmp_path, name):
    host = pair_paths(traces, name)[0] if name in PAIRS else traces / name / "host_et.json.gz"
    out = tmp_path / "host.et"
    report = convert(host, None, out)
    assert report.accounted()
    assert report.host_ops_linked == 0 and report.gpu_activities_in == 0
    _, nodes = read_et(str(out))
    assert not check_graph(list(nodes)).cycle


def test_host_only_collectives_become_comm_nodes(traces, tmp_path):
    out = tmp_path / "pg.et"
    convert(traces / "chakra_pg_host" / "host_et.json.gz", None, out)
    nodes = list(read_et(str(out))[1])
    assert sum(n.type == NodeType.METADATA_NODE for n in nodes) == 1
    comms = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    assert comms and all(attrs(n)["comm_size"] > 0 for n in comms)


def test_bundled_sample_links_by_record_function_id(tmp_path):
    out = tmp_path / "sample.et"
    report = convert(f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz", out)
    assert report.link_method == "rf_id"
    assert report.host_ops_linked >= 0.99 * report.host_ops_kept
    assert report.accounted()
    assert report.edges_by_kind["caller"] > 0 and report.edges_by_kind["thread_order"] > 0


# --------------------------------------------------------------------------
# Wire compatibility: the reference decoder reads the same graph
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAIRS + [f"{n}:host" for n in HOST_ONLY])
def test_reference_decoder_reads_what_we_write(traces, tmp_path, name):
    if name.endswith(":host"):
        name = name[: -len(":host")]
        host = pair_paths(traces, name)[0] if name in PAIRS else traces / name / "host_et.json.gz"
        kineto = None
    else:
        host, kineto = pair_paths(traces, name)
    out = tmp_path / "x.et"
    convert(host, kineto, out)
    ref_meta, ref_nodes = read_with_reference(out)
    meta, read_nodes = read_et(str(out))
    ours = list(read_nodes)
    assert ref_meta.version == meta.version
    assert len(ref_nodes) == len(ours)
    for ref, node in zip(ref_nodes, ours):
        assert (ref.id, ref.name, ref.type) == (node.id, node.name, int(node.type))
        assert list(ref.data_deps) == node.data_deps
        assert list(ref.ctrl_deps) == node.ctrl_deps
        assert (ref.start_time_micros, ref.duration_micros) == (node.start_time_micros,
                                                                 node.duration_micros)
        ref_attrs = {a.name: getattr(a, a.WhichOneof("value")) for a in ref.attr}
        assert ref_attrs["is_cpu_op"] is attrs(node)["is_cpu_op"]
        if node.type == NodeType.COMM_COLL_NODE:
            assert ref.attr[[a.name for a in ref.attr].index("comm_type")].WhichOneof("value") \
                == "int64_val"
            assert ref_attrs["comm_size"] == attrs(node)["comm_size"]


# --------------------------------------------------------------------------
# Bad input through the CLI: one line, non-zero exit, no traceback, no output
# --------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pt2chakra", *args], capture_output=True,
                          text=True, timeout=120)


def assert_clean_failure(proc, out: Path, *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0]
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith((".", out.name))]


def test_truncated_host_trace(tmp_path):
    data = gzip.decompress(Path(f"{SAMPLE}.host_et.json.gz").read_bytes())
    bad = tmp_path / "truncated.json"
    bad.write_bytes(data[: len(data) // 2])
    out = tmp_path / "o" / "x.et"
    out.parent.mkdir()
    proc = run_cli("convert", "--host-trace", str(bad), "-o", str(out))
    assert_clean_failure(proc, out, str(bad), "truncated")


def test_garbage_kineto_trace(tmp_path):
    bad = tmp_path / "garbage.json"
    bad.write_bytes(b"\x00\x01not json at all")
    out = tmp_path / "o" / "x.et"
    out.parent.mkdir()
    proc = run_cli("convert", "--host-trace", f"{SAMPLE}.host_et.json.gz", "--device-trace",
                   str(bad), "-o", str(out))
    assert_clean_failure(proc, out, str(bad))


@pytest.mark.slow
def test_wrong_field_type_and_unknown_schema(tmp_path):
    out = tmp_path / "o" / "x.et"
    out.parent.mkdir()
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "", "start_ts": 0, '
                     '"finish_ts": 1, "nodes": [{"id": "seven", "name": "x", "ctrl_deps": 1}]}')
    proc = run_cli("convert", "--host-trace", str(wrong), "-o", str(out))
    assert_clean_failure(proc, out, str(wrong), "id")
    future = tmp_path / "future.json"
    future.write_text('{"schema": "9.0.0", "pid": 1, "start_ts": 0, "finish_ts": 1, "nodes": []}')
    proc = run_cli("convert", "--host-trace", str(future), "-o", str(out))
    assert_clean_failure(proc, out, str(future), "schema")


def test_pair_from_different_runs_is_refused(traces, tmp_path):
    out = tmp_path / "o" / "x.et"
    out.parent.mkdir()
    proc = run_cli("convert", "--host-trace", str(traces / "dlrm_8gpu" / "rank0.host_et.json.gz"),
                   "--device-trace", str(traces / "linear_1gpu" / "kineto.json.gz"), "-o", str(out))
    assert_clean_failure(proc, out, "same run")


def test_missing_file(tmp_path):
    out = tmp_path / "o" / "x.et"
    out.parent.mkdir()
    proc = run_cli("convert", "--host-trace", str(tmp_path / "nope.json"), "-o", str(out))
    assert_clean_failure(proc, out, "nope.json")


def test_cli_convert_writes_report_and_summary(tmp_path):
    out = tmp_path / "s.et"
    report = tmp_path / "r.json"
    proc = run_cli("convert", "--host-trace", f"{SAMPLE}.host_et.json.gz", "--device-trace",
                   f"{SAMPLE}.kineto.json.gz", "-o", str(out), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    assert "host ops:" in proc.stdout and out.exists()
    import json

    doc = json.loads(report.read_text())
    assert doc["host_ops_in"] == doc["host_ops_kept"] + sum(doc["host_ops_dropped"].values())


@pytest.mark.parametrize("name", ["dlrm_8gpu/rank3", "chakra_pg_host", "sample"])
def test_fast_encoder_matches_generic_encoder(traces, name):
    from pt2chakra.chakra.encode import _framed, encode_node, node_count
    from pt2chakra.conversion.graph_builder import build_graph
    from pt2chakra.conversion.linker import link
    from pt2chakra.pytorch.host_trace import load_host_trace
    from pt2chakra.pytorch.kineto_trace import load_kineto_trace

    host: str | Path
    kineto: str | Path | None
    if name == "sample":
        host, kineto = f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz"
    elif name == "chakra_pg_host":
        host, kineto = traces / name / "host_et.json.gz", None
    else:
        host, kineto = pair_paths(traces, name)
    graph = build_graph(link(load_host_trace(host),
                             load_kineto_trace(kineto) if kineto else None))
    generic = [encode_node(n) for n in graph.nodes()]
    assert sum(map(node_count, graph.framed_nodes())) == len(generic)
    assert framed_bytes(graph) == _framed(generic)


def test_missing_output_folder(tmp_path):
    out = tmp_path / "no" / "such" / "x.et"
    proc = run_cli("convert", "--host-trace", f"{SAMPLE}.host_et.json.gz", "-o", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    # refused before any work, the folder named as the reason
    assert proc.stderr.strip() == (f"pt2chakra: error: {out}: No such file or directory "
                                   "(its folder does not exist)")


def test_convert_for_astra_sim_writes_rank_files(traces, tmp_path):
    host, kineto = pair_paths(traces, "dlrm_8gpu/rank2")
    report = convert(host, kineto, tmp_path / "dlrm", consumer=AstraSimProfile())
    assert report.accounted()
    nodes = list(read_et(str(tmp_path / "dlrm.2.et"))[1])
    assert nodes and all(n.type != NodeType.METADATA_NODE for n in nodes)
    assert sum(n.type == NodeType.COMM_COLL_NODE for n in nodes) == 8


def test_progress_goes_to_stderr_and_does_not_change_the_output(tmp_path):
    plain, shown = tmp_path / "a.et", tmp_path / "b.et"
    quiet = run_cli("convert", "-q", "--host-trace", f"{SAMPLE}.host_et.json.gz", "--device-trace",
                    f"{SAMPLE}.kineto.json.gz", "-o", str(plain))
    loud = run_cli("convert", "-q", "--progress", "--host-trace", f"{SAMPLE}.host_et.json.gz",
                   "--device-trace", f"{SAMPLE}.kineto.json.gz", "-o", str(shown))
    assert quiet.returncode == loud.returncode == 0
    assert quiet.stderr == "" and quiet.stdout == "" and loud.stdout == ""
    assert "[5/5] wrote" in loud.stderr and "linked" in loud.stderr
    assert plain.read_bytes() == shown.read_bytes()


# --------------------------------------------------------------------------
# Bad input found in review: each is one line, exit 2, nothing written
# --------------------------------------------------------------------------

import json as _json  # noqa: E402


def _host_doc(nodes):
    root = [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1},
            {"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1}]
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "start_ts": 0, "finish_ts": 1,
            "nodes": root + nodes}


def _op(i, name, parent, **attrs):
    attrs = {"rf_id": i, "tid": 1, **attrs}
    return {"id": i, "name": name, "ctrl_deps": parent,
            "attrs": [{"name": k, "type": "uint64", "value": v} for k, v in attrs.items()]}


def _kineto_doc(events):
    return {"traceEvents": events}


def _cpu(name, ts, dur, rf):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"Record function id": rf}}


def _write(path, doc):
    path.write_text(_json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("case,host_nodes,events,needle", [
    ("negative-duration", [_op(3, "aten::mm", 2)], [_cpu("aten::mm", 10, -5, 3)], "dur"),
    ("missing-ts", [_op(3, "aten::mm", 2)],
     [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "dur": 5,
       "args": {"Record function id": 3}}], "without `ts`"),
    ("huge-stream", [_op(3, "aten::mm", 2)],
     [_cpu("aten::mm", 10, 5, 3), {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                                    "ts": 12, "dur": 1, "args": {"stream": 2**63,
                                                                 "correlation": 1}}], "stream"),
    ("tid-not-int", [_op(3, "aten::mm", 2, tid=1.5)], [_cpu("aten::mm", 10, 5, 3)], "`tid`"),
    ("parent-loop", [_op(3, "a", 4), _op(4, "b", 3)],
     [_cpu("a", 10, 5, 3), _cpu("b", 11, 2, 4)], "loop"),
    ("no-operators", [], [_cpu("aten::mm", 10, 5, 3)], "no operators"),
])
def test_review_bad_inputs_fail_cleanly(tmp_path, case, host_nodes, events, needle):
    host = _write(tmp_path / "h.json", _host_doc(host_nodes))
    kineto = _write(tmp_path / "k.json", _kineto_doc(events))
    out = tmp_path / "o" / "x.et"
    out.parent.mkdir()
    proc = run_cli("convert", "--host-trace", host, "--device-trace", kineto, "-o", str(out))
    assert_clean_failure(proc, out, needle)


def test_output_equal_to_an_input_is_refused(tmp_path):
    host = tmp_path / "h.json.gz"
    host.write_bytes(Path(f"{SAMPLE}.host_et.json.gz").read_bytes())
    before = host.read_bytes()
    proc = run_cli("convert", "--host-trace", str(host), "-o", str(host))
    assert proc.returncode == 2 and "refusing to overwrite an input" in proc.stderr
    assert host.read_bytes() == before


def test_report_into_missing_folder_fails_before_writing_the_trace(tmp_path):
    out = tmp_path / "x.et"
    proc = run_cli("convert", "--host-trace", f"{SAMPLE}.host_et.json.gz", "-o", str(out),
                   "--report", str(tmp_path / "nope" / "r.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_nan_tokens_are_nulled_but_strings_keep_their_text(tmp_path):
    from pt2chakra.pytorch.host_trace import load_host_trace

    path = tmp_path / "nan.json"
    path.write_text('{"schema":"1.1.1","pid":1,"start_ts":0,"finish_ts":1,"nodes":[{"id":1,'
                    '"name":"weird,NaN,name","ctrl_deps":0,"attrs":[{"name":"scale",'
                    '"type":"double","value":NaN}]}]}')
    op = load_host_trace(path).ops[0]
    assert op.name == "weird,NaN,name" and op.attrs == {"scale": None}

"""jsonize / from-json round trips, timeline (Chrome trace format) and graph
(graphviz renders the .dot) on every converted trace and the reference's."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from builders import node, write_nodes
from helpers import ALL, assert_one_line_failure, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.json_form import from_json, jsonize, read_json
from pt2chakra.chakra.records import GlobalMetadata, NodeType
from pt2chakra.tools.graph import GraphStats, Window, render_graph
from pt2chakra.tools.timeline import TimelineStats, timeline


@pytest.mark.parametrize("name", sorted(ALL))
def test_json_round_trip_is_byte_identical(converted, tmp_path, name):  # noqa: F811
    src = converted[name]
    doc = tmp_path / "t.json"
    back = tmp_path / "t.et"
    n = jsonize(src, doc)
    parsed = json.loads(doc.read_text())  # one valid JSON document
    assert len(parsed["nodes"]) == n and parsed["metadata"]["version"] == "0.0.4"
    assert from_json(doc, back) == n
    assert back.read_bytes() == src.read_bytes()


def test_json_round_trip_reference_output(reference, tmp_path):  # noqa: F811
    for path in reference.values():
        doc, back = tmp_path / "r.json", tmp_path / "r.et"
        proc = run_cli("jsonize", path, "-o", doc)
        assert proc.returncode == 0, proc.stderr
        json.loads(doc.read_text())
        assert run_cli("from-json", doc, "-o", back).returncode == 0
        md1, n1 = read_et(path)
        md2, n2 = read_et(back)
        assert md1 == md2 and list(n1) == list(n2)  # node for node


def test_json_keeps_every_attribute_kind_and_reformatted_input(tmp_path):
    attrs = [("d", "double_val", -0.0), ("dn", "double_val", math.inf),
             ("fl", "float_list", [1.5, -2.25]), ("i32", "int32_val", -5),
             ("u64", "uint64_val", (1 << 64) - 1), ("s64", "sint64_list", [-(1 << 63), 3]),
             ("b", "bytes_val", b"\x00\xff"), ("bl", "bytes_list", [b"", b"a"]),
             ("t", "bool_list", [True, False]), ("s", "string_val", 'line\n"q"'),
             ("empty", "int64_list", []), ("none", "", None), ("f64", "sfixed64_val", -7)]
    built = [node(1 << 63, [1, 2], name="x", inputs=("a", "", "c"), attrs=attrs),
             node(1, name="y", node_type=NodeType.COMM_COLL_NODE)]
    md = GlobalMetadata(version="v", attrs=[("n", "string_list", ["p", "q"])])
    src = write_nodes(tmp_path / "a.et", built, md)
    doc = tmp_path / "a.json"
    jsonize(src, doc)
    back = tmp_path / "b.et"
    from_json(doc, back)
    assert back.read_bytes() == src.read_bytes()
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(doc.read_text()), indent=2))
    from_json(pretty, tmp_path / "c.et")
    assert (tmp_path / "c.et").read_bytes() == src.read_bytes()
    _, nodes = read_json(pretty)
    assert list(nodes)[0].attrs[1][2] == math.inf


@pytest.mark.parametrize("text, needle", [
    ('{"format":"pt2chakra.et.json/1","metadata":{"version":"v","attrs":[]},"nodes":[\n'
     '{"id":1,"name":"a","type":"COMP_NODE"},\n', "truncated"),
    ('{"format":"pt2chakra.et.json/1","metadata":{"version":"v","attrs":[]},"nodes":[\n'
     '{"id":1,"name":"a","type":"NOPE"}\n]}\n', "unknown node type"),
    ("[1, 2", "not JSON"),
    ('{"metadata": {"version": "v"}, "nodes": [{"id": -1}]}', "nodes[0]"),
])
def test_from_json_bad_input_one_line(tmp_path, text, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    out = tmp_path / "o.et"
    proc = run_cli("from-json", bad, "-o", out)
    assert_one_line_failure(proc, needle)
    assert not out.exists() and not list(tmp_path.glob(".o.et*"))


def test_timeline_follows_chrome_trace_format(converted, tmp_path):  # noqa: F811
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    out = tmp_path / "tl.json"
    proc = run_cli("timeline", *files, "-o", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    assert complete and meta
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"]
    assert {e["pid"] for e in complete} == set(range(8))  # one process per rank
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert all((e["pid"], e["tid"]) in names for e in complete)
    lane_names = set(names.values())
    assert any(n.startswith("CPU thread") for n in lane_names)
    assert any(n.startswith("GPU 0 stream") for n in lane_names)
    assert {e["args"]["name"].split(" (")[0] for e in meta if e["name"] == "process_name"} == {
        f"rank {r}" for r in range(8)}
    # µs: a kernel's event spans its recorded start and duration
    _, nodes = read_et(files[0])
    first_gpu = next(n for n in nodes if n.name.startswith("ncclKernel"))
    ev = next(e for e in complete if e["pid"] == 0 and e["args"]["id"] == first_gpu.id)
    assert ev["ts"] == first_gpu.start_time_micros and ev["dur"] == first_gpu.duration_micros


@pytest.mark.parametrize("name", sorted(ALL))
def test_timeline_every_trace(converted, tmp_path, name):  # noqa: F811
    stats = timeline([converted[name]], tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    assert len([e for e in doc["traceEvents"] if e["ph"] == "X"]) == stats.events
    _, nodes = read_et(converted[name])
    assert stats.events + stats.untimed == sum(1 for _ in nodes)


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz dot not on PATH")


@needs_dot
@pytest.mark.parametrize("name", sorted(ALL))
def test_graph_dot_renders_with_graphviz(converted, tmp_path, name):  # noqa: F811
    path = converted[name]
    _, nodes = read_et(path)
    ids = [n.id for n in nodes]
    window = Window(ids=(min(ids), min(ids) + 60), ctrl=True)
    out = tmp_path / "g.dot"
    stats = render_graph(path, out, window)
    assert 0 < stats.nodes <= 61 and stats.edges >= 0 and stats.total == len(ids)
    proc = subprocess.run(["dot", "-Tsvg", str(out)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert b"<svg" in proc.stdout


@needs_dot
def test_graph_reference_and_windows(converted, reference, tmp_path):  # noqa: F811
    ref = reference["chakra_pg_host"]
    svg = tmp_path / "ref.svg"
    assert run_cli("graph", ref, "-o", svg).returncode == 0
    ET.parse(svg)
    dlrm = converted["dlrm_rank0"]
    _, nodes = read_et(dlrm)
    comm = next(n for n in nodes if n.type == NodeType.COMM_COLL_NODE)
    out = tmp_path / "around.dot"
    proc = run_cli("graph", dlrm, "-o", out, "--around", comm.id, "--hops", "1")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert f"n{comm.id} [" in text
    for dep in comm.data_deps:
        assert f"n{dep} -> n{comm.id}" in text
    gml = tmp_path / "w.graphml"
    start = comm.start_time_micros
    assert run_cli("graph", dlrm, "-o", gml, "--time", f"{start}:{start + 1000}").returncode == 0
    root = ET.parse(gml).getroot()
    assert len(root.findall(".//{http://graphml.graphdrawing.org/xmlns}node")) >= 1
    big = run_cli("graph", converted["gpt2_host"], "-o", tmp_path / "big.dot")
    assert_one_line_failure(big, "--max-nodes")
    missing = run_cli("graph", dlrm, "-o", tmp_path / "m.dot", "--around", "999999999")
    assert_one_line_failure(missing, "no node with that id")
    fmt = run_cli("graph", dlrm, "-o", tmp_path / "m.png")
    assert_one_line_failure(fmt, "unknown output format")


def test_stats_summaries_are_the_cli_lines(converted, tmp_path):  # noqa: F811
    assert TimelineStats(output="t.json", events=3, lanes=2).summary() == (
        "t.json: 3 events in 2 lanes")
    assert TimelineStats(output="t.json", events=0, lanes=0, untimed=5).summary() == (
        "t.json: 0 events in 0 lanes; 5 nodes without a start time left out")
    assert GraphStats(output="g.dot", nodes=4, edges=3, total=4).summary() == (
        "g.dot: 4 nodes, 3 edges")
    assert GraphStats(output="g.dot", nodes=4, edges=3, total=9).summary() == (
        "g.dot: 4 nodes, 3 edges (window of 9)")
    out = tmp_path / "cli.json"
    proc = run_cli("timeline", converted["hta_simple_add"], "-o", out)
    assert proc.returncode == 0, proc.stderr
    stats = timeline([converted["hta_simple_add"]], tmp_path / "api.json")
    cli_stats = TimelineStats(output=str(out), events=stats.events, lanes=stats.lanes,
                              untimed=stats.untimed)
    assert proc.stdout == cli_stats.summary() + "\n"

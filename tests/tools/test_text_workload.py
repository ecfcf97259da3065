"""ASTRA-sim text workloads and micro-benchmarks: the output validates, has
the collectives and sizes asked for, and (without NONE entries) is the same
graph the reference's text_converter writes."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import assert_one_line_failure, read_with_reference, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, NodeType
from pt2chakra.tools.microbench import microbench
from pt2chakra.tools.text_workload import from_text
from pt2chakra.tools.validate import validate

LAYERS = [
    "conv1 -1 10 ALLTOALL 100 11 REDUCESCATTER 200 12 ALLREDUCE 300 5",
    "conv2 -1 20 ALLTOALL 400 21 ALLGATHER 500 22 ALLREDUCE 600 5",
    "fc1 -1 30 ALLREDUCE 700 31 ALLTOALL 800 32 ALLREDUCE 900 5",
    "fc2 -1 40 ALLGATHER 110 41 ALLREDUCE 120 42 ALLTOALL 130 5",
]
WORKLOADS = {
    "DATA": "DATA", "MODEL": "MODEL", "HYBRID_DATA_MODEL": "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA": "HYBRID_MODEL_DATA", "MICRO": "MICRO",
    "HYBRID_DLRM": "HYBRID_DLRM 1",
}
CT = {"ALLREDUCE": CollectiveType.ALL_REDUCE, "ALLGATHER": CollectiveType.ALL_GATHER,
      "REDUCESCATTER": CollectiveType.REDUCE_SCATTER, "ALLTOALL": CollectiveType.ALL_TO_ALL}


def _workload(tmp_path, header, layers=LAYERS):
    path = tmp_path / "w.txt"
    path.write_text(f"{header}\n{len(layers)}\n" + "\n".join(layers) + "\n")
    return path


def _colls(path):
    _, nodes = read_et(path)
    out = []
    for n in nodes:
        if n.type == NodeType.COMM_COLL_NODE:
            a = {x[0]: x[2] for x in n.attrs}
            out.append((CollectiveType(a["comm_type"]), a["comm_size"]))
    return out


def _expected(kind, passes=1):
    cols = [line.split() for line in LAYERS]
    wg = [(CT[c[9]], int(c[10])) for c in cols]
    fwd = [(CT[c[3]], int(c[4])) for c in cols]
    ig = [(CT[c[6]], int(c[7])) for c in cols]
    if kind == "MICRO":
        return Counter(wg * passes)
    if kind == "DATA":
        return Counter(wg * passes)
    if kind == "MODEL":
        return Counter((fwd + ig[1:]) * passes)
    if kind.startswith("HYBRID_DLRM"):
        return Counter(([f for f, c in zip(fwd, cols) if c[3] == "ALLTOALL"] + wg + [ig[0]])
                       * passes)
    return Counter((fwd + ig[1:] + wg) * passes)


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
@pytest.mark.parametrize("passes", [1, 2])
def test_from_text_validates_and_has_the_collectives(tmp_path, kind, passes):
    path = _workload(tmp_path, WORKLOADS[kind])
    written = from_text(path, 4, tmp_path / "out", passes=passes)
    assert written == [str(tmp_path / f"out.{i}.et") for i in range(4)]
    report = validate(written, consumer="astra-sim")
    assert report.sound and not report.problems, report.lines()
    assert Counter(_colls(written[0])) == _expected(kind, passes)


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_from_text_matches_reference_text_converter(tmp_path, kind):
    ref_mod = pytest.importorskip("chakra.src.converter.text_converter")
    path = _workload(tmp_path, WORKLOADS[kind])
    ref_mod.TextConverter(str(path), str(tmp_path / "ref"), 1, 1).convert()
    ours = from_text(path, 1, tmp_path / "ours")
    _, ref_nodes = read_with_reference(tmp_path / "ref.0.et")
    mine = list(read_et(ours[0])[1])
    assert len(mine) == len(ref_nodes)
    for a, r in zip(mine, ref_nodes):
        assert (a.id, a.name, int(a.type), a.duration_micros) == (
            r.id, r.name, r.type, r.duration_micros)
        assert sorted(a.data_deps) == sorted(r.data_deps)
        ra = {x.name: x.int64_val for x in r.attr}
        aa = {x[0]: x[2] for x in a.attrs if x[0] != "is_cpu_op"}
        assert aa == ra


def test_from_text_none_entries_are_left_out(tmp_path):
    layers = ["a -1 5 NONE 0 6 NONE 0 7 ALLREDUCE 64 1", "b -1 5 NONE 0 6 NONE 0 7 NONE 0 1"]
    path = _workload(tmp_path, "DATA", layers)
    written = from_text(path, 2, tmp_path / "n")
    assert _colls(written[0]) == [(CollectiveType.ALL_REDUCE, 64)]
    assert validate(written).sound


@pytest.mark.parametrize("text, needle", [
    ("BOGUS\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", "unknown workload type"),
    ("DATA\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", "says 2 layers"),
    ("DATA\n1\na -1 1 NONE 0\n", "12 columns"),
    ("DATA\n1\na -1 x NONE 0 1 NONE 0 1 NONE 0 1\n", "integers"),
    ("DATA\n1\na -1 1 BCAST 0 1 NONE 0 1 NONE 0 1\n", "unknown comm type"),
])
def test_from_text_bad_input_one_line(tmp_path, text, needle):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    proc = run_cli("from-text", path, "--npus", "2", "-o", tmp_path / "o")
    assert_one_line_failure(proc, needle)
    assert not list(tmp_path.glob("o.*"))


@pytest.mark.parametrize("collective", ["ALL_REDUCE", "allgather", "ALL_TO_ALL", "BARRIER"])
def test_microbench(tmp_path, collective):
    proc = run_cli("microbench", "--collective", collective, "--size", "1048576", "--npus", "4",
                   "--steps", "3", "--compute", "50", "-o", tmp_path / "mb")
    assert proc.returncode == 0, proc.stderr
    files = [tmp_path / f"mb.{i}.et" for i in range(4)]
    assert validate(files, consumer="astra-sim").sound
    cols = _colls(files[2])
    assert len(cols) == 3 and {s for _, s in cols} == {1048576}
    nodes = list(read_et(files[0])[1])
    assert [n.type for n in nodes].count(NodeType.COMP_NODE) == 3
    assert all(n.data_deps == [n.id - 1] for n in nodes[1:])  # one chain


def test_microbench_single_collective_api(tmp_path):
    files = microbench("REDUCE_SCATTER", 4096, 2, tmp_path / "one")
    assert _colls(files[0]) == [(CollectiveType.REDUCE_SCATTER, 4096)]

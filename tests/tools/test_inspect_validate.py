"""inspect and validate on real converted traces, the reference's output and
hand-made broken graphs; malformed .et input through the CLI."""

from __future__ import annotations

import json
from functools import partial

import pytest
from builders import IS_GPU, node, write_nodes
from helpers import ALL, assert_one_line_failure, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import NodeType
from pt2chakra.cli import main
from pt2chakra.rules.checks import Problem
from pt2chakra.tools.inspect import inspect
from pt2chakra.tools.validate import validate


def _attrs(node):
    return {a[0]: a[2] for a in node.attrs}


@pytest.mark.parametrize("name", sorted(ALL))
def test_inspect_counts_match_the_file(converted, name):  # noqa: F811
    path = converted[name]
    info = inspect(path)
    nodes = list(read_et(path)[1])
    assert info.nodes == len(nodes)
    assert sum(info.nodes_by_type.values()) == len(nodes)
    assert info.cpu_nodes + info.gpu_nodes == len(nodes)
    comm = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    assert sum(c.count for c in info.collectives.values()) == len(comm)
    assert sum(c.bytes for c in info.collectives.values()) == sum(
        _attrs(n)["comm_size"] for n in comm)
    assert sum(info.dependencies.data_by_kind.values()) == sum(len(n.data_deps) for n in nodes)
    doc = info.to_json()
    json.dumps(doc)  # JSON-able
    assert list(doc) == ["file", "metadata", "nodes", "nodes_by_type", "cpu_nodes", "gpu_nodes",
                         "collectives", "dependencies", "lanes", "time_span_micros",
                         "top_ops_by_duration", "layout"]
    assert doc["nodes"] == info.nodes and doc["time_span_micros"]["start"] == (
        info.time_span_micros.start)


def test_inspect_dlrm_lanes_and_cli_json(converted):  # noqa: F811
    proc = run_cli("inspect", converted["dlrm_rank0"], "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["collectives"]["ALL_TO_ALL"]["count"] >= 1
    assert info["collectives"]["ALL_REDUCE"]["count"] >= 1
    assert info["lanes"]["threads"] and info["lanes"]["streams"]
    assert info["time_span_micros"]["duration"] > 0
    assert info["top_ops_by_duration"][0]["total_micros"] > 0
    text = run_cli("inspect", converted["dlrm_rank0"])
    assert text.returncode == 0 and "collectives: ALL_REDUCE" in text.stdout


@pytest.mark.parametrize("name", sorted(ALL))
def test_validate_passes_our_outputs_without_warnings(converted, name):  # noqa: F811
    report = validate([converted[name]])
    assert report.sound, report.lines()
    assert not report.warnings, report.lines()


def test_validate_dlrm_ranks_align_and_cli_exit_0(converted):  # noqa: F811
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    report = validate(files)
    assert report.sound and not report.problems, report.lines()
    proc = run_cli("validate", *files, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["sound"] is True


def test_validate_reference_output_warns_not_fails(reference):  # noqa: F811
    for path in reference.values():
        report = validate([path])
        assert report.sound, report.lines()
        checks = {p.check for p in report.warnings}
        # known weaknesses of mlc-chakra's output: no version, collectives as compute
        assert "metadata" in checks and "collective-as-compute" in checks
        proc = run_cli("validate", path)
        assert proc.returncode == 0 and "warning:" in proc.stdout
        assert run_cli("inspect", path).returncode == 0


def test_validate_astra_sim_profile_flags_metadata_and_cpu_nodes(converted, reference):  # noqa: F811
    report = validate([converted["chakra_pg_host"]], consumer="astra-sim")
    assert not report.sound
    messages = " ".join(p.message for p in report.errors)
    assert "METADATA_NODE" in messages and "CPU node" in messages
    proc = run_cli("validate", "--consumer", "astra-sim", reference["chakra_pg_host"])
    assert proc.returncode == 1


# A 1 us GPU op unless told otherwise.
_n = partial(node, dur=1, attrs=[IS_GPU])


def test_validate_finds_each_broken_rule(tmp_path):
    comm = NodeType.COMM_COLL_NODE
    nodes = [
        _n(1), _n(2, [1, 99]),  # dangling 99
        _n(3, [5]), _n(4, [3]), _n(5, [4]),  # cycle 3 -> 4 -> 5 -> 3
        _n(2),  # duplicate id
        _n(6, attrs=[("is_cpu_op", "int64_val", 0)]),  # wrong member
        _n(7, node_type=comm, attrs=[("comm_type", "int32_val", 0), ("comm_size", "int64_val", 8)]),
        _n(8, node_type=comm, attrs=[("comm_type", "int64_val", 0)]),  # no size
        _n(9, node_type=comm, attrs=[("comm_size", "int64_val", 8), ("pg_name", "int64_val", 0)]),
    ]
    path = write_nodes(tmp_path / "g.et", nodes)
    report = validate([path])
    assert not report.sound
    by_check: dict[str, list[Problem]] = {}
    for p in report.errors:
        by_check.setdefault(p.check, []).append(p)
    assert by_check["dangling-dep"][0].node == 2 and "99" in by_check["dangling-dep"][0].message
    cycle = by_check["cycle"][0].message
    assert all(f"{i} (n{i})" in cycle for i in (3, 4, 5))
    assert by_check["duplicate-id"][0].node == 2
    attr_nodes = {p.node for p in by_check["attr-type"]}
    assert attr_nodes == {6, 7, 9}
    assert {p.node for p in by_check["comm-attrs"]} == {7, 9}
    assert {p.node for p in by_check["comm-size-missing"]} == {8}
    assert all(p.hint for p in report.errors)
    proc = run_cli("validate", path)
    assert proc.returncode == 1
    assert "[cycle] node" in proc.stdout and "hint:" in proc.stdout
    assert json.loads(run_cli("validate", path, "--json").stdout)["sound"] is False


def test_validate_cross_rank_misalignment(tmp_path):
    comm = NodeType.COMM_COLL_NODE

    def rank(r, sizes, types):
        nodes = [_n(10 + i, node_type=comm, start=100 + i,
                    attrs=[("is_cpu_op", "bool_val", False), ("comm_type", "int64_val", t),
                           ("comm_size", "int64_val", s), ("pg_name", "string_val", "0")])
                 for i, (s, t) in enumerate(zip(sizes, types))]
        return write_nodes(tmp_path / f"w.{r}.et", nodes)

    ok = [rank(0, [8, 16], [0, 2]), rank(1, [8, 16], [0, 2])]
    assert validate(ok).sound
    bad_size = rank(2, [8, 32], [0, 2])
    report = validate(ok + [bad_size])
    assert not report.sound and "32 B here" in report.errors[0].message
    bad_order = rank(3, [16, 8], [2, 0])
    report = validate(ok + [bad_order])
    assert not report.sound and "ALL_GATHER here but ALL_REDUCE" in report.errors[0].message
    missing = rank(4, [8], [0])
    assert not validate(ok + [missing]).sound


def test_validate_warns_on_gpu_ops_without_stream_order(tmp_path):
    def gpu(i, deps, start):
        return _n(i, deps, start=start, attrs=[("is_cpu_op", "bool_val", False),
                                               ("device", "int64_val", 0),
                                               ("stream", "int64_val", 7)])

    path = write_nodes(tmp_path / "g.et", [gpu(1, [], 10), gpu(2, [], 20), gpu(3, [2], 30)])
    report = validate([path])
    assert report.sound
    assert [p.check for p in report.warnings] == ["stream-order"]
    assert report.warnings[0].node == 2


@pytest.mark.parametrize("command", ["inspect", "validate", "jsonize", "timeline", "graph"])
@pytest.mark.parametrize("damage", ["truncated", "garbage", "zero-length", "empty"])
def test_malformed_et_gives_one_line_error(converted, tmp_path, command, damage):  # noqa: F811
    data = converted["hta_simple_add"].read_bytes()
    bad = tmp_path / "bad.et"
    if damage == "truncated":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        bad.write_bytes(b"\xff" * 64 + b"not a trace at all")
    elif damage == "zero-length":
        length, shift, pos = 0, 0, 0
        while True:  # the metadata's length varint
            length |= (data[pos] & 0x7F) << shift
            shift += 7
            pos += 1
            if data[pos - 1] < 0x80:
                break
        end = pos + length
        bad.write_bytes(data[:end] + b"\x00" + data[end:])
    else:
        bad.write_bytes(b"")
    extra = {"jsonize": ["-o", tmp_path / "o.json"], "timeline": ["-o", tmp_path / "o.json"],
             "graph": ["-o", tmp_path / "o.dot"]}.get(command, [])
    proc = run_cli(command, bad, *extra)
    assert_one_line_failure(proc, str(bad))
    assert proc.returncode == 2
    assert not list(tmp_path.glob("o.*")) and not list(tmp_path.glob(".o.*"))


def test_the_old_consumer_spellings_still_work(tmp_path, capsys):
    """``--for`` and ``profile=``, the names ``--consumer`` and ``consumer=``
    replaced, still run old command lines and callers (hidden from --help)."""
    path = write_nodes(tmp_path / "t.0.et", [node(1, dur=1)])  # one rank: not for ASTRA-sim
    new = validate([path], consumer="astra-sim")
    assert new.consumer == "astra-sim" and any(p.check == "astra-sim" for p in new.problems)
    with pytest.warns(DeprecationWarning, match="profile= is now consumer="):
        assert validate([path], profile="astra-sim") == new
    with pytest.raises(TypeError, match="consumer= only"):
        validate([path], consumer="astra-sim", profile="astra-sim")
    outputs = []
    for flag in ("--consumer", "--for"):
        assert main(["validate", flag, "astra-sim", "--json", str(path)]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] and outputs[0]["consumer"] == outputs[0]["profile"] == "astra-sim"
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    shown = capsys.readouterr().out
    assert "--consumer" in shown and "--for" not in shown

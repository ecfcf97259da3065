"""Host execution trace loader: real traces, every schema version, bad input."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from builders import (
    COMM_HOST_ATTRS,
    EXTRAS_BY_VERSION,
    KERNEL_HOST_ATTRS,
    TENSOR,
    flat_et,
    host_attr,
    nested_et,
)

from pt2chakra.errors import InputError
from pt2chakra.pytorch.host_decode import (
    SCHEMA_LAYOUTS,
    dangling_parents,
    layout_for,
    schema_version,
)
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.json_input import TRUNCATED

# --------------------------------------------------------------------------
# Real traces. Facts below were counted independently with ``json`` + ``gzip``
# (see reference_ops) and cross-checked against shared/traces/README.md.
# --------------------------------------------------------------------------

REAL = {
    # file: (schema, op count, pid)
    "linear_1gpu/host_et.json.gz": ("1.0.1", 931, 24248),
    "resnet_2gpu_host/host_et.json.gz": ("1.1.0-chakra.0.0.4", 14392, 1734239),
    "resnet_1gpu_host/host_et.json.gz": ("1.0.3-chakra.0.0.4", 14391, 3233936),
    "gpt2_host/host_et.json.gz": ("1.1.0-chakra.0.0.4", 27156, 512643),
    "chakra_pg_host/host_et.json.gz": ("1.0.2-chakra.0.0.4", 263, 788625),
    "hta_simple_add/host_et.json.gz": ("1.0.1", 38, 563677),
    **{f"dlrm_8gpu/rank{r}.host_et.json.gz": ("1.0.1", 1675, 59811 + r) for r in range(8)},
}
LIFTED = ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema")


def reference_ops(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trace as plain dicts, normalised with the stdlib only."""
    with gzip.open(path) as f:
        doc = json.load(f)
    out = []
    for n in doc["nodes"]:
        if "attrs" in n:  # nested layout
            # empty-string attrs carry nothing; the loader drops them
            attrs = {a["name"]: a["value"] for a in n["attrs"] if a["value"] != ""}
            for k in LIFTED:
                if k not in attrs and k == "op_schema":
                    attrs[k] = ""
            row = {k: attrs.pop(k) for k in LIFTED if k in attrs}
            row.update(id=n["id"], name=n["name"], parent=n["ctrl_deps"], attrs=attrs)
            row.update(inputs=n["inputs"]["values"], shapes=n["inputs"]["shapes"])
        else:
            row = {k: n[k] for k in LIFTED}
            row.update(id=n["id"], name=n["name"], parent=n["parent"], attrs={})
            row.update(inputs=n["inputs"], shapes=n["input_shapes"])
        if row["parent"] == row["id"]:
            row["parent"] = 0  # loader's documented normalisation of the root
        out.append(row)
    return doc, out


@pytest.mark.parametrize("rel", sorted(REAL))
def test_real_trace_loads_and_matches_stdlib_json(traces: Path, rel: str) -> None:
    schema, count, pid = REAL[rel]
    trace = load_host_trace(traces / rel)
    assert (trace.schema, len(trace.ops), trace.pid) == (schema, count, pid)
    doc, ref = reference_ops(traces / rel)
    assert (trace.start_ts, trace.finish_ts) == (doc["start_ts"], doc["finish_ts"])
    for op, want in zip(trace.ops, ref, strict=True):
        got = {k: getattr(op, k) for k in (*LIFTED, "id", "name", "parent")}
        got.update(attrs=op.attrs, inputs=op.inputs.values, shapes=op.inputs.shapes)
        assert got == want
    roots = [op for op in trace.ops if op.parent == 0]
    assert [op.name for op in roots] in (
        ["[pytorch|profiler|execution_trace|process]"],
        ["[pytorch|profiler|execution_graph|process]"],
    )
    assert dangling_parents(trace.ops) == []


def test_real_process_groups(traces: Path) -> None:
    pg = load_host_trace(traces / "chakra_pg_host/host_et.json.gz").process_groups
    assert [(g.pg_name, g.pg_desc, g.ranks, g.group_size, g.backend) for g in pg] == [("0", "", [], 2, "cuda:nccl")]
    pg = load_host_trace(traces / "resnet_2gpu_host/host_et.json.gz").process_groups
    assert [(g.pg_name, g.pg_desc, g.group_size) for g in pg] == [("0", "default_pg", 1)]
    assert load_host_trace(traces / "gpt2_host/host_et.json.gz").process_groups == []


def test_real_comm_attrs_and_kernel_attrs(traces: Path) -> None:
    trace = load_host_trace(traces / "resnet_2gpu_host/host_et.json.gz")
    comms = [op for op in trace.ops if "collective_name" in op.attrs]
    assert len(comms) == 27
    first = comms[0]
    assert first.name == "record_param_comms"
    assert first.attrs["collective_name"] == "broadcast"
    assert first.attrs["in_msg_nelems"] == 53120
    assert first.attrs["pg_desc"] == "default_pg"
    assert all(v != "" for op in trace.ops for v in op.attrs.values())  # empty attrs dropped
    assert not any(k in op.attrs for op in trace.ops for k in LIFTED)


def test_real_thread_split(traces: Path) -> None:
    trace = load_host_trace(traces / "linear_1gpu/host_et.json.gz")
    by_tid: dict[int, int] = {}
    for op in trace.ops:
        by_tid[op.tid] = by_tid.get(op.tid, 0) + 1
    assert by_tid == {0: 1, 1: 312, 2: 618}


# --------------------------------------------------------------------------
# Hand-made traces, one per schema version
# --------------------------------------------------------------------------

SUFFIXES = ("", "-chakra.0.0.4", "-chakra.1.0.0")
def write(tmp_path: Path, doc: Any, name: str = "et.json", compress: bool = False) -> Path:
    path = tmp_path / name
    data = (json.dumps(doc) if not isinstance(doc, (bytes, str)) else doc)
    data = data.encode() if isinstance(data, str) else data
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def check_add(op: Any) -> None:
    assert (op.id, op.name, op.parent, op.tid, op.rf_id) == (3, "aten::add", 2, 1, 7)
    assert op.inputs.values == [TENSOR, 1]
    assert op.inputs.shapes == [[2, 3], []]
    assert op.inputs.types == ["Tensor(float)", "Int"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_schema_1_0_1_flat(tmp_path: Path, suffix: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    trace = load_host_trace(write(tmp_path, flat_et("1.0.1" + suffix)))
    assert trace.schema == "1.0.1" + suffix
    assert (trace.pid, trace.start_ts, trace.finish_ts) == (42, 100, 200)
    check_add(trace.ops[1])
    assert trace.ops[1].attrs == {}
    assert trace.ops[2].parent == 0  # self-parented root normalised
    assert caplog.records == []


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("version", sorted(EXTRAS_BY_VERSION))
def test_nested_schemas(tmp_path: Path, version: str, suffix: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    extras = EXTRAS_BY_VERSION[version]
    doc = nested_et(version + suffix, extras, strides=version == "1.1.1")
    trace = load_host_trace(write(tmp_path, doc, compress=True))
    op = trace.ops[1]
    check_add(op)
    assert (op.seq_id, op.op_schema) == (5, "aten::add.Tensor(...)")
    assert op.attrs == {a["name"]: a["value"] for a in extras}
    assert op.inputs.strides == ([[3, 1], []] if version == "1.1.1" else None)
    assert caplog.records == []  # every attr is known for its version


def test_unknown_attr_is_kept_and_noted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    trace = load_host_trace(write(tmp_path, nested_et("1.0.3", [host_attr("shiny_new", 3, "int64")])))
    assert trace.ops[1].attrs == {"shiny_new": 3}
    assert len(caplog.records) == 1 and "shiny_new" in caplog.text


@pytest.mark.parametrize("schema", ["1.1.5", "1.2.0-chakra.1.0.0", "1.0.5"])
def test_unknown_newer_minor_warns_once(tmp_path: Path, schema: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    trace = load_host_trace(write(tmp_path, nested_et(schema, KERNEL_HOST_ATTRS + COMM_HOST_ATTRS, strides=True)))
    check_add(trace.ops[1])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and schema in warnings[0].getMessage()


def test_schema_table_choice() -> None:
    assert set(SCHEMA_LAYOUTS) == {(1, 0, 1), (1, 0, 2), (1, 0, 3), (1, 0, 4), (1, 1, 0), (1, 1, 1)}
    assert layout_for("f", "1.0.1-chakra.0.0.4").name == "flat"
    assert layout_for("f", "1.1.1-chakra.1.0.0").name == "nested"
    assert schema_version("f", " 1.1.1-chakra.1.0.0 ") == (1, 1, 1)


# --------------------------------------------------------------------------
# Structure checks
# --------------------------------------------------------------------------


def test_dangling_parent_is_tolerated_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    doc = nested_et("1.1.0")
    doc["nodes"][1]["ctrl_deps"] = 999
    trace = load_host_trace(write(tmp_path, doc))
    assert [op.id for op in dangling_parents(trace.ops)] == [3]
    assert len(caplog.records) == 1 and "3->999" in caplog.text


def test_parent_zero_is_top_level(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    doc = flat_et()
    doc["nodes"][2]["parent"] = 0
    assert load_host_trace(write(tmp_path, doc)).ops[2].parent == 0
    assert caplog.records == []


# --------------------------------------------------------------------------
# Malformed input: one-line InputError starting with the path
# --------------------------------------------------------------------------


def raises_one_line(path: Path, *fragments: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_host_trace(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    assert "\n" not in text
    for fragment in fragments:
        assert fragment in text
    return info.value


def test_truncated_json(tmp_path: Path) -> None:
    text = json.dumps(nested_et("1.1.0"))
    raises_one_line(write(tmp_path, text[: len(text) // 2]), TRUNCATED)


def test_truncated_json_in_gzip(tmp_path: Path) -> None:
    text = json.dumps(flat_et())
    raises_one_line(write(tmp_path, text[:-3], compress=True), "truncated")


def test_garbage_bytes(tmp_path: Path) -> None:
    raises_one_line(write(tmp_path, b"\x00\x07not json at all\xff"), "not valid JSON")


def test_gzip_of_garbage(tmp_path: Path) -> None:
    raises_one_line(write(tmp_path, b"garbage\nmore garbage", compress=True), "not valid JSON")


def test_corrupt_and_cut_gzip(tmp_path: Path) -> None:
    raises_one_line(write(tmp_path, b"\x1f\x8b" + b"\x00" * 40, "bad.gz"), "gzip")
    whole = gzip.compress(json.dumps(flat_et()).encode())
    raises_one_line(write(tmp_path, whole[: len(whole) // 2], "cut.gz"), "truncated gzip")


def test_wrong_field_type_names_json_path(tmp_path: Path) -> None:
    doc = nested_et("1.1.0")
    doc["nodes"][1]["id"] = "three"
    raises_one_line(write(tmp_path, doc), "$.nodes[1].id", "Expected `int`")


def test_negative_id(tmp_path: Path) -> None:
    doc = flat_et()
    doc["nodes"][1]["id"] = -3
    raises_one_line(write(tmp_path, doc), "$.nodes[1].id")


def test_duplicate_id(tmp_path: Path) -> None:
    doc = nested_et("1.0.2")
    doc["nodes"][1]["id"] = 2
    raises_one_line(write(tmp_path, doc), "duplicate op id 2")


def test_non_root_self_parent(tmp_path: Path) -> None:
    doc = nested_et("1.0.2")
    doc["nodes"][1]["ctrl_deps"] = 3
    raises_one_line(write(tmp_path, doc), "op 3", "own parent")


@pytest.mark.parametrize("schema", ["2.0.0", "2.1.0-chakra.0.0.4", "0.9.0"])
def test_unknown_major(tmp_path: Path, schema: str) -> None:
    doc = nested_et(schema)
    if schema.startswith("0."):
        # older than anything known but same-major rule does not apply
        raises_one_line(write(tmp_path, doc), "`schema`", "major version 0")
    else:
        raises_one_line(write(tmp_path, doc), "`schema`", "major version 2")


@pytest.mark.parametrize("schema", ["abc", "1.1", "1.1.0-beta", ""])
def test_non_version_schema(tmp_path: Path, schema: str) -> None:
    raises_one_line(write(tmp_path, nested_et(schema)), "field `schema`")


def test_missing_schema(tmp_path: Path) -> None:
    doc = nested_et("1.1.0")
    del doc["schema"]
    raises_one_line(write(tmp_path, doc), "`schema`")


def test_missing_nodes(tmp_path: Path) -> None:
    doc = nested_et("1.1.0")
    del doc["nodes"]
    raises_one_line(write(tmp_path, doc), "`nodes`")


def test_wrong_layout_for_schema(tmp_path: Path) -> None:
    # A 1.0.1 header over nested nodes: the missing field is named.
    doc = nested_et("1.0.1")
    raises_one_line(write(tmp_path, doc), "$.nodes[0]", "`parent`", "flat node layout (`parent`")


def test_missing_file(tmp_path: Path) -> None:
    raises_one_line(tmp_path / "nope.json", "no such file")


def test_top_level_array(tmp_path: Path) -> None:
    raises_one_line(write(tmp_path, [1, 2]), "Expected `object`")


def test_bad_process_group_json(tmp_path: Path) -> None:
    doc = nested_et("1.0.2")
    doc["nodes"][1]["name"] = "## process_group:init ##"
    doc["nodes"][1]["inputs"]["values"] = ["[{not json"]
    raises_one_line(write(tmp_path, doc), "process-group JSON")


def test_process_groups_tolerate_missing_fields(tmp_path: Path) -> None:
    doc = nested_et("1.1.0")
    groups = [
        {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "ranks": [0, 1], "group_size": 2, "group_count": 2},
        {"pg_name": 1},
    ]
    doc["nodes"][1]["name"] = "## process_group:init ##"
    doc["nodes"][1]["inputs"]["values"] = [json.dumps(groups)]
    pgs = load_host_trace(write(tmp_path, doc)).process_groups
    assert [(g.pg_name, g.pg_desc, g.ranks, g.group_size, g.backend) for g in pgs] == [
        ("0", "default_pg", [0, 1], 2, "cuda:nccl"),
        ("1", "", [], 0, ""),
    ]


def test_bom_and_plain_json_with_gz_suffix(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + json.dumps(flat_et()).encode()
    assert len(load_host_trace(write(tmp_path, data, "et.json.gz")).ops) == 3


def test_tar_gz_with_one_member(tmp_path: Path) -> None:
    import io
    import tarfile

    payload = json.dumps(flat_et()).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("et.json")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    assert len(load_host_trace(write(tmp_path, buf.getvalue(), "et.tar.gz")).ops) == 3


def test_bad_attrs_are_one_line_errors(tmp_path: Path) -> None:
    doc = nested_et("1.1.0")
    doc["nodes"][1]["attrs"] = [{"name": "rf_id", "type": "uint64"}, "not an attr"]
    raises_one_line(write(tmp_path, doc), "$.nodes[1].attrs")

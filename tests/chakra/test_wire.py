"""Chakra wire format: hand encoder vs protobuf, file I/O, reference interop."""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from builders import I32, I64, U64, WRITER_ATTRS, attrs_strategy, nodes_strategy
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from helpers import read_with_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import decode as chakra_io
from pt2chakra.chakra import schema as pb
from pt2chakra.chakra.decode import decode_node, from_proto, iter_messages, to_proto
from pt2chakra.chakra.encode import (
    AttrSpec,
    FramedNodes,
    NodeWriter,
    encode_metadata,
    encode_node,
    ioinfo_body,
    ioinfo_texts,
    uvarint,
)
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType
from pt2chakra.errors import InputError

PROTO_PATH = Path(__file__).resolve().parents[2] / "src" / "pt2chakra" / "chakra" / "et_def.proto"
SETTINGS = settings(
    deadline=None, max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

METADATA = GlobalMetadata(
    version="0.0.4",
    attrs=[("schema", "string_val", "1.1.1-chakra.0.0.4"), ("pid", "int64_val", 7)],
)


def sample_nodes() -> list[ChakraNode]:
    return [
        ChakraNode(id=1, name="root", type=NodeType.COMP_NODE),
        ChakraNode(
            id=2,
            name="aten::mm",
            type=NodeType.COMP_NODE,
            start_time_micros=100,
            duration_micros=5,
            ctrl_deps=[1],
            data_deps=[1],
            inputs=("[[1,2]]", "[[2,3]]", '["Tensor(float)"]'),
            outputs=("", "", ""),
            attrs=[("is_cpu_op", "bool_val", False), ("num_ops", "int64_val", -3)],
        ),
        ChakraNode(
            id=U64,
            name="ncclDevKernel_AllReduce",
            type=NodeType.COMM_COLL_NODE,
            data_deps=[2, U64 - 1],
            attrs=[
                ("comm_type", "int64_val", 0),
                ("comm_size", "int64_val", 1 << 40),
                ("pg_name", "string_val", "0"),
                ("ranks", "string_list", ["0", "1"]),
                ("tensor_size", "uint64_val", 0),
            ],
        ),
    ]


# --------------------------------------------------------------------------
# Encoder == protobuf
# --------------------------------------------------------------------------


@pytest.mark.slow
@SETTINGS
@given(nodes_strategy())
def test_encode_node_matches_protobuf(node: ChakraNode) -> None:
    expected = to_proto(node).SerializeToString()
    if not expected:
        with pytest.raises(ValueError, match="zero bytes"):
            encode_node(node)
        return
    assert encode_node(node) == expected


@pytest.mark.slow
@SETTINGS
@given(st.text(max_size=10), attrs_strategy(exact_floats=False))
def test_encode_metadata_matches_protobuf(version: str, attrs: list) -> None:
    md = GlobalMetadata(version=version, attrs=attrs)
    expected = to_proto(md).SerializeToString()
    if not expected:
        with pytest.raises(ValueError, match="zero bytes"):
            encode_metadata(md)
        return
    assert encode_metadata(md) == expected


@pytest.mark.parametrize(
    "attr",
    [
        ("x", "int32_val", 0),  # a set oneof member is written even when zero
        ("x", "string_val", ""),
        ("x", "bool_val", False),
        ("x", "int64_list", []),  # empty list: tag + length 0
        ("x", "int32_val", -1),  # negative int32: 10-byte varint
        ("x", "float_val", 1e300),  # float overflow -> inf, like protobuf
        ("x", "float_val", -1e300),
        ("x", "double_val", -0.0),
    ],
)
def test_encode_edge_attrs(attr: tuple) -> None:
    node = ChakraNode(id=1, name="n", type=NodeType.COMP_NODE, attrs=[attr, attr])
    assert encode_node(node) == to_proto(node).SerializeToString()


def test_negative_int_is_ten_byte_varint() -> None:
    node = ChakraNode(id=0, name="", type=NodeType.INVALID_NODE, attrs=[("", "int64_val", -1)])
    # attr field tag, length 11, int64_val tag (9 << 3), then 10 bytes
    assert encode_node(node) == b"\x52\x0b\x48" + b"\xff" * 9 + b"\x01"


def test_empty_ioinfo_is_written() -> None:
    node = ChakraNode(id=0, name="", type=NodeType.INVALID_NODE, inputs=("", "", ""))
    assert encode_node(node) == b"\x42\x00"


def test_all_default_node_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_node(ChakraNode(id=0, name="", type=NodeType.INVALID_NODE))
    with pytest.raises(ValueError):
        encode_metadata(GlobalMetadata(version=""))


@pytest.mark.parametrize(
    "attr",
    [
        ("x", "int32_val", 1 << 31),
        ("x", "uint64_val", -1),
        ("x", "uint32_list", [1 << 32]),
        ("x", "fixed32_val", -1),
        ("x", "sint64_val", 1 << 63),
        ("x", "no_such_member", 1),
    ],
)
def test_out_of_range_values_raise_like_protobuf(attr: tuple) -> None:
    node = ChakraNode(id=1, name="n", type=NodeType.COMP_NODE, attrs=[attr])
    with pytest.raises(ValueError):
        encode_node(node)
    with pytest.raises((ValueError, AttributeError)):
        to_proto(node)


def test_bad_ids_raise() -> None:
    for bad in (-1, 1 << 64):
        with pytest.raises(ValueError):
            encode_node(ChakraNode(id=bad, name="n", type=NodeType.COMP_NODE))
        with pytest.raises(ValueError):
            encode_node(ChakraNode(id=1, name="n", type=NodeType.COMP_NODE, data_deps=[bad]))


# --------------------------------------------------------------------------
# NodeWriter (the converter's fast path) vs encode_node
# --------------------------------------------------------------------------

ID = st.integers(0, (1 << 62))
IO_TEXT = st.one_of(st.just(""), st.text(max_size=40), st.text(min_size=100, max_size=200))


def _encoded_io(texts: tuple[str, str, str], tail: bytes) -> Any:
    """An ``EncodedIOInfo`` of three texts, with ``tail`` after the body."""
    from types import SimpleNamespace

    values, shapes, types = (t.encode() for t in texts)
    body = ioinfo_body(values, shapes, types, tail)
    return SimpleNamespace(ioinfo=body, ioinfo_size=len(body) - len(tail))


@pytest.mark.slow
@SETTINGS
@given(st.tuples(IO_TEXT, IO_TEXT, IO_TEXT), IO_TEXT)
def test_ioinfo_texts_undo_ioinfo_body(texts: tuple[str, str, str], tail: str) -> None:
    encoded = [t.encode() for t in texts]
    body = ioinfo_body(*encoded)
    assert ioinfo_texts(body) == tuple(encoded)
    assert ioinfo_body(encoded[0], encoded[1], encoded[2], tail.encode()) == body + tail.encode()


@st.composite
def raw_nodes(draw: st.DrawFn) -> tuple[tuple, ChakraNode]:
    """(NodeWriter tuple, the equivalent ChakraNode)."""
    node_id, name = draw(ID), draw(st.text(max_size=8))
    node_type = draw(st.sampled_from(list(NodeType)))
    ctrl = draw(st.none() | ID)
    deps = draw(st.lists(st.tuples(ID, st.integers(0, 3)), max_size=3))
    start = draw(st.none() | st.integers(0, (1 << 64) - 1))
    duration = draw(st.none() | st.integers(0, 1 << 40))
    ios = [draw(st.none() | st.tuples(IO_TEXT, IO_TEXT, IO_TEXT)) for _ in range(2)]
    tails = [draw(IO_TEXT).encode() for _ in range(2)]  # kept beside, never written
    attrs = [draw(st.none() | st.booleans()), draw(st.none() | st.integers(*I64)),
             draw(st.none() | st.integers(*I64)), draw(st.none() | st.text(max_size=4)),
             draw(st.none() | st.tuples(st.text(max_size=3))), draw(st.none() | st.integers(*I32))]
    raw = (node_id, name, node_type, ctrl, deps, start, duration,
           *[None if io is None else _encoded_io(io, tail) for io, tail in zip(ios, tails)],
           *attrs)
    node = ChakraNode(
        id=node_id, name=name, type=node_type, ctrl_deps=[] if ctrl is None else [ctrl],
        data_deps=[src for src, _ in deps], start_time_micros=start or 0,
        duration_micros=duration or 0,
        inputs=ios[0], outputs=ios[1],
        attrs=[(spec.name, spec.member, value if spec.plain is None else spec.plain(value))
               for spec, value in zip(WRITER_ATTRS, attrs) if value is not None])
    return raw, node


@pytest.mark.slow  # a long property run
@SETTINGS
@given(st.lists(raw_nodes(), min_size=1, max_size=8))
def test_node_writer_matches_encode_node(pairs: list[tuple[tuple, ChakraNode]]) -> None:
    writer = NodeWriter(WRITER_ATTRS)  # one writer: its caches must not leak across nodes
    for raw, node in pairs:
        try:
            expected = encode_node(node)
        except ValueError:
            continue  # an all-default node
        assert writer.encode(raw) == expected  # compiled where built
        assert writer.encode_python(raw) == expected


def test_node_writer_refuses_what_it_cannot_cache() -> None:
    with pytest.raises(ValueError):
        NodeWriter([AttrSpec("x", "double_val")])  # 0.0 == -0.0, different bytes
    with pytest.raises(ValueError):
        NodeWriter([AttrSpec("x", "string_val", repeats=False)])
    with pytest.raises(ValueError):  # int64 out of range, as encode_node
        NodeWriter([AttrSpec("x", "int64_val", repeats=False)]).encode(
            (1, "n", NodeType.COMP_NODE, None, [], 0, 0, None, None, 1 << 63))


# --------------------------------------------------------------------------
# write_et / read_et
# --------------------------------------------------------------------------


@pytest.mark.slow  # a long property run
@SETTINGS
@given(st.lists(nodes_strategy(exact_floats=True, named=True), max_size=5), st.booleans())
def test_round_trip(tmp_path: Path, nodes: list[ChakraNode], gz: bool) -> None:
    path = tmp_path / ("t.et.gz" if gz else "t.et")
    assert write_et(path, METADATA, iter(nodes)) == len(nodes)
    metadata, read = read_et(path)
    assert metadata == METADATA
    assert list(read) == nodes
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == gz


@pytest.mark.parametrize("name", ["t.et", "t.et.gz"])
def test_round_trip_samples_and_raw_messages(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    nodes = sample_nodes()
    write_et(path, METADATA, nodes)
    metadata, read = read_et(str(path))
    assert metadata == METADATA and list(read) == nodes
    raw = list(iter_messages(path))
    assert raw == [encode_metadata(METADATA)] + [encode_node(n) for n in nodes]


def test_large_message_spanning_read_chunks(tmp_path: Path) -> None:
    big = ChakraNode(id=1, name="x" * 3_000_000, type=NodeType.COMP_NODE)
    nodes = [big, *sample_nodes(), big]
    path = tmp_path / "big.et"
    write_et(path, METADATA, nodes)
    assert list(read_et(path)[1]) == nodes


@pytest.mark.slow
def test_many_nodes_stream(tmp_path: Path) -> None:
    nodes = [
        ChakraNode(id=i, name=f"op{i}", type=NodeType.COMP_NODE, data_deps=[i - 1] if i else [])
        for i in range(50_000)
    ]
    path = tmp_path / "many.et.gz"
    assert write_et(path, METADATA, (n for n in nodes)) == len(nodes)
    assert list(read_et(path)[1]) == nodes


def test_gzip_is_detected_by_magic_not_name(tmp_path: Path) -> None:
    path = tmp_path / "t.et.gz"
    write_et(path, METADATA, sample_nodes())
    renamed = tmp_path / "plain_name.et"
    path.rename(renamed)
    assert list(read_et(renamed)[1]) == sample_nodes()


def _failing_nodes(count: int):
    yield from sample_nodes()[:count]
    raise RuntimeError("boom")


@pytest.mark.parametrize("name", ["out.et", "out.et.gz"])
def test_atomic_write_leaves_nothing_behind(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with pytest.raises(RuntimeError, match="boom"):
        write_et(path, METADATA, _failing_nodes(2))
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "out.et"
    write_et(path, METADATA, sample_nodes())
    before = path.read_bytes()
    bad = ChakraNode(id=-1, name="bad", type=NodeType.COMP_NODE)
    with pytest.raises(InputError, match="cannot encode: value out of range"):
        write_et(path, METADATA, [*sample_nodes(), bad])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.et"]


def test_written_file_respects_umask(tmp_path: Path) -> None:
    path = tmp_path / "out.et"
    write_et(path, METADATA, sample_nodes())
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


# --------------------------------------------------------------------------
# Malformed input
# --------------------------------------------------------------------------


def _frame(data: bytes) -> bytes:
    assert len(data) < 128
    return bytes([len(data)]) + data


GOOD_HEAD = _frame(encode_metadata(METADATA)) + _frame(encode_node(sample_nodes()[0]))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty file"),
        (GOOD_HEAD + b"\x80", "truncated length varint of message #2"),
        (GOOD_HEAD + b"\x80" * 11, "malformed length varint"),
        (GOOD_HEAD + b"\x0a\x08\x01", "truncated message #2 at (decompressed )?byte offset"),
        (
            GOOD_HEAD + _frame(b"\x12\x05ab"),
            "message #2 at .*byte offset 59 does not parse as a Node",
        ),
        (GOOD_HEAD + b"\x00" + GOOD_HEAD[1:], "zero-length message #2 .*reference Chakra reader"),
        (b"\x00" + GOOD_HEAD, "zero-length message #0"),
        (GOOD_HEAD[len(_frame(encode_metadata(METADATA))) :], "message #0 .* not a GlobalMetadata"),
        (_frame(b"\x0a\x09abc") + GOOD_HEAD, "message #0 .* not a GlobalMetadata"),
        (GOOD_HEAD + _frame(b"\x18\x63"), "message #2 .*99 is not a valid NodeType"),
        (b'{\n  "schema": "1.1.1-chakra.0.0.4", "nodes": []}', "this is JSON .*pt2chakra convert"),
        (b' [{"ph": "X"}]', "this is JSON .*pt2chakra convert"),
    ],
    ids=[
        "empty",
        "truncated-varint",
        "overlong-varint",
        "truncated-message",
        "garbage",
        "zero-length",
        "zero-length-first",
        "node-first",
        "garbage-first",
        "unknown-node-type",
        "host-et-json",
        "kineto-json-list",
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_malformed_input_raises_input_error(
    tmp_path: Path, content: bytes, problem: str, gz: bool
) -> None:
    path = tmp_path / "bad.et"
    path.write_bytes(gzip.compress(content) if gz else content)
    with pytest.raises(InputError) as info:
        _metadata, nodes = read_et(path)
        list(nodes)
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: ")
    assert re.search(problem, info.value.problem), info.value.problem
    assert "\n" not in str(info.value)


def test_corrupt_gzip_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.et.gz"
    path.write_bytes(gzip.compress(GOOD_HEAD * 1000)[:-20])
    with pytest.raises(InputError, match="gzip"):
        list(read_et(path)[1])
    with pytest.raises(InputError, match="cannot open"):
        read_et(tmp_path / "missing.et")


def test_iter_messages_reports_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.et"
    path.write_bytes(GOOD_HEAD + b"\x05ab")
    with pytest.raises(InputError, match=r"truncated message #2 at byte offset \d+: needs 5"):
        list(iter_messages(path))


# --------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------


def _our_file_proto() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    pb.FILE_DESCRIPTOR.CopyToProto(proto)
    return proto


_FIELD_RE = re.compile(r"^\s*(repeated\s+)?(\w+)\s+(\w+)\s*=\s*(\d+);", re.M)
_BLOCK_RE = re.compile(r"^(message|enum)\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)


def test_proto_file_matches_embedded_descriptor() -> None:
    """The .proto shipped in the package and the embedded blob agree."""
    text = PROTO_PATH.read_text()
    assert "package ChakraProtoMsg;" in text and 'syntax = "proto3";' in text
    blocks = {name: body for _kind, name, body in _BLOCK_RE.findall(text)}
    file_proto = _our_file_proto()
    assert sorted(blocks) == sorted(
        [m.name for m in file_proto.message_type] + [e.name for e in file_proto.enum_type]
    )
    for message in file_proto.message_type:
        declared = {
            (name, int(num)) for _rep, _type, name, num in _FIELD_RE.findall(blocks[message.name])
        }
        assert declared == {(f.name, f.number) for f in message.field}, message.name
    for enum in file_proto.enum_type:
        declared_values = set(re.findall(r"(\w+)\s*=\s*(\d+);", blocks[enum.name]))
        assert declared_values == {(v.name, str(v.number)) for v in enum.value}, enum.name


def test_enums_match_model() -> None:
    node_type = pb.FILE_DESCRIPTOR.enum_types_by_name["NodeType"]
    assert {v.name: v.number for v in node_type.values} == {t.name: t.value for t in NodeType}


def test_schema_matches_reference() -> None:
    reference = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    theirs = descriptor_pb2.FileDescriptorProto()
    reference.DESCRIPTOR.CopyToProto(theirs)
    ours = _our_file_proto()
    assert ours.package == theirs.package == "ChakraProtoMsg"
    assert ours.syntax == theirs.syntax
    assert list(ours.message_type) == list(theirs.message_type)
    assert list(ours.enum_type) == list(theirs.enum_type)
    ours.name = theirs.name
    assert ours.SerializeToString() == theirs.SerializeToString()


# --------------------------------------------------------------------------
# Interop with mlc-chakra's own reader and classes
# --------------------------------------------------------------------------


def _reference_attr(attr) -> tuple:
    member = attr.WhichOneof("value")
    value = getattr(attr, member)
    return (attr.name, member, list(value.values) if member.endswith("_list") else value)


@pytest.mark.parametrize("name", ["t.et", "t.et.gz"])
def test_reference_reader_reads_our_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    nodes = sample_nodes()
    write_et(path, METADATA, nodes)
    metadata, decoded = read_with_reference(path)
    assert metadata.version == METADATA.version
    assert len(decoded) == len(nodes)
    for theirs, ours in zip(decoded, nodes):
        assert theirs.id == ours.id
        assert theirs.name == ours.name
        assert theirs.type == ours.type
        assert list(theirs.ctrl_deps) == ours.ctrl_deps
        assert list(theirs.data_deps) == ours.data_deps
        assert theirs.start_time_micros == ours.start_time_micros
        assert theirs.duration_micros == ours.duration_micros
        assert [_reference_attr(a) for a in theirs.attr] == ours.attrs
        assert theirs.HasField("inputs") == (ours.inputs is not None)


def test_we_read_reference_written_file(tmp_path: Path) -> None:
    reference = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    first = reference.Node(id=7, name="aten::add", type=reference.COMP_NODE, data_deps=[3, 4])
    first.attr.add(name="is_cpu_op", bool_val=True)
    first.attr.add(name="streams").string_list.values.extend(["a", "b"])
    first.inputs.values = "[1]"
    second = reference.Node(id=8, name="nccl", type=reference.COMM_COLL_NODE, ctrl_deps=[7])
    second.attr.add(name="comm_type", int64_val=reference.ALL_GATHER)
    second.attr.add(name="comm_size", int64_val=-5)
    path = tmp_path / "ref.et"
    with open(path, "wb") as out:
        protolib.encodeMessage(out, reference.GlobalMetadata(version="0.0.4"))
        protolib.encodeMessage(out, first)
        protolib.encodeMessage(out, second)
    metadata, nodes = read_et(path)
    assert metadata == GlobalMetadata(version="0.0.4")
    assert list(nodes) == [
        ChakraNode(
            id=7,
            name="aten::add",
            type=NodeType.COMP_NODE,
            data_deps=[3, 4],
            inputs=("[1]", "", ""),
            attrs=[("is_cpu_op", "bool_val", True), ("streams", "string_list", ["a", "b"])],
        ),
        ChakraNode(
            id=8,
            name="nccl",
            type=NodeType.COMM_COLL_NODE,
            ctrl_deps=[7],
            attrs=[("comm_type", "int64_val", 2), ("comm_size", "int64_val", -5)],
        ),
    ]
    # Our encoder reproduces the reference's bytes exactly.
    assert list(iter_messages(path))[1:] == [
        encode_node(cast(ChakraNode, from_proto(first))),
        encode_node(cast(ChakraNode, from_proto(second))),
    ]


def test_both_schemas_coexist_in_one_process() -> None:
    reference = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    ours = pb.Node(id=1, name="x")
    assert reference.Node.FromString(ours.SerializeToString()).name == "x"
    assert pb.Node is not reference.Node


def test_metadata_without_version_is_accepted(tmp_path: Path) -> None:
    # mlc-chakra's converter writes a GlobalMetadata with attrs and no version.
    path = tmp_path / "ref.et"
    node = encode_node(ChakraNode(id=1, name="n", type=NodeType.COMP_NODE))
    path.write_bytes(_frame(b"\x12\x00") + _frame(node))
    metadata, nodes = read_et(path)
    assert metadata.version == ""
    assert [n.name for n in nodes] == ["n"]


# --------------------------------------------------------------------------
# Fast reader == protobuf + from_proto
# --------------------------------------------------------------------------


def _protobuf_read(data: bytes) -> ChakraNode | str:
    """The reference: protobuf parse + from_proto, or the expected error text."""
    try:
        msg = pb.Node.FromString(data)
    except DecodeError as exc:
        return f"message does not parse as a Node: {exc}"
    try:
        return cast(ChakraNode, from_proto(msg))
    except ValueError as exc:
        return f"message: {exc}"


def _fast_read(data: bytes) -> ChakraNode | str:
    try:
        return decode_node(data)
    except InputError as exc:
        return exc.problem


def _key(field: int, wire: int) -> bytes:
    return uvarint((field << 3) | wire)


def _unpacked(node: ChakraNode) -> bytes:
    """encode_node with ctrl_deps / data_deps written one varint field each."""
    plain = msgspec.structs.replace(node, ctrl_deps=[], data_deps=[])
    data = encode_node(plain) if encode_node_ok(plain) else b""
    extra = b"".join(_key(4, 0) + uvarint(d) for d in node.ctrl_deps)
    extra += b"".join(_key(5, 0) + uvarint(d) for d in node.data_deps)
    return data + extra


def encode_node_ok(node: ChakraNode) -> bool:
    try:
        encode_node(node)
    except ValueError:
        return False
    return True


varint_bytes = st.integers(0, U64).map(uvarint) | st.binary(min_size=1, max_size=11)
unknown_field = st.one_of(
    st.tuples(st.integers(11, 2000), varint_bytes).map(lambda t: _key(t[0], 0) + t[1]),
    st.tuples(st.integers(11, 2000), st.binary(max_size=8)).map(
        lambda t: _key(t[0], 2) + uvarint(len(t[1])) + t[1]
    ),
    st.tuples(st.integers(1, 2000), st.binary(min_size=8, max_size=8)).map(
        lambda t: _key(t[0], 1) + t[1]
    ),
    st.tuples(st.integers(1, 2000), st.binary(min_size=4, max_size=4)).map(
        lambda t: _key(t[0], 5) + t[1]
    ),
    # known field numbers with the wrong wire type, repeated scalars, odd types
    st.sampled_from([1, 3, 6, 7]).map(lambda f: _key(f, 2) + b"\x01\x05"),
    st.sampled_from([2, 8, 9, 10]).map(lambda f: _key(f, 0) + b"\x07"),
    st.tuples(st.sampled_from([1, 3, 6, 7]), varint_bytes).map(lambda t: _key(t[0], 0) + t[1]),
    st.sampled_from([b"\x42\x00", b"\x4a\x03\x0a\x01x", b"\x52\x00", b"\x52\x02\x08\x01"]),
    st.binary(max_size=6),  # anything at all, usually malformed
)


@SETTINGS
@given(
    nodes_strategy(exact_floats=True),
    st.booleans(),
    st.lists(unknown_field, max_size=3),
    st.randoms(use_true_random=False),
)
@pytest.mark.slow
def test_fast_reader_matches_protobuf(node: ChakraNode, unpacked: bool, extra: list, rnd) -> None:
    data = _unpacked(node) if unpacked else (encode_node(node) if encode_node_ok(node) else b"")
    if data and not extra:  # clean input takes the fast path
        assert chakra_io._fast_node(data) == node
    for field in extra:  # at the start, the end, or anywhere (usually malformed)
        where = rnd.choice([0, len(data), rnd.randint(0, len(data))])
        data = data[:where] + field + data[where:]
    expected = _protobuf_read(data)
    assert _fast_read(data) == expected
    assert _fast_read(data) == expected  # again: now from the attribute caches


EDGE_TAILS = [
    uvarint(v)
    for v in (0, 1, 127, 128, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 63) - 1,
              1 << 63, U64)
] + [b"\x80\x00", b"\xff" * 9 + b"\x01", b"\xff" * 9 + b"\x7f", b"\xff" * 10 + b"\x01", b"\x80"]


@SETTINGS
@given(
    st.sampled_from(["int32_val", "int64_val", "uint32_val", "uint64_val", "sint32_val",
                     "sint64_val", "bool_val"]),
    st.text(max_size=8),
    st.lists(
        st.binary(min_size=1, max_size=11)
        | st.integers(0, U64).map(uvarint),
        min_size=1,
        max_size=4,
    ),
)
@pytest.mark.slow
def test_varint_attribute_tails_match_protobuf(member: str, name: str, tails: list) -> None:
    """Per-node numbers take the "name + one varint" path: any tail bytes
    (overlong, over 64 bits, truncated, trailing fields) read as protobuf does."""
    first = encode_node(ChakraNode(id=1, name="n", type=NodeType.COMP_NODE, attrs=[(name, member, 1)]))
    assert _fast_read(first) == _protobuf_read(first)  # registers the prefix
    attr_tag = first[first.index(b"\x52") :]
    body = attr_tag[2:]  # name field + member tag + 0x01
    prefix = body[:-1]
    for tail in tails + EDGE_TAILS:
        new_body = prefix + tail
        data = b"\x08\x01\x12\x01n\x18\x04\x52" + uvarint(len(new_body)) + new_body
        assert _fast_read(data) == _protobuf_read(data)


def test_attribute_list_values_are_fresh_lists() -> None:
    node = ChakraNode(id=1, name="n", type=NodeType.COMP_NODE,
                      attrs=[("kinds", "string_list", ["a"]), ("xs", "int64_list", [1, -2])])
    data = encode_node(node)
    decoded = [decode_node(data) for _ in range(3)]  # a cache miss, then hits
    assert decoded == [node] * 3
    for copy in decoded:
        copy.attrs[0][2].append("b")
        copy.attrs[1][2].append(3)
    assert decode_node(data) == node


def test_bad_attribute_body_raises_like_protobuf(tmp_path: Path) -> None:
    good = encode_node(sample_nodes()[1])
    bad_attr = b"\x52\x03\x0a\x05a"  # name claims 5 bytes, has 1
    path = tmp_path / "bad.et"
    bad = good + bad_attr
    path.write_bytes(_frame(encode_metadata(METADATA)) + uvarint(len(good)) + good
                     + uvarint(len(bad)) + bad)
    metadata, nodes = read_et(path)
    assert next(nodes) == sample_nodes()[1]
    with pytest.raises(InputError, match=r"message #2 at byte offset \d+ does not parse as a Node"):
        next(nodes)


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_framing_across_small_chunks(tmp_path: Path, monkeypatch, chunk: int) -> None:
    """Lengths of 1, 2 and 3 varint bytes, messages split across reads."""
    nodes = [ChakraNode(id=i, name="x" * (i * 37 % 20_000 + 1), type=NodeType.COMP_NODE)
             for i in range(1, 60)]
    for gz in (False, True):
        path = tmp_path / ("t.et.gz" if gz else "t.et")
        write_et(path, METADATA, nodes)
        monkeypatch.setattr(chakra_io, "ET_READ_CHUNK", chunk)
        metadata, read = read_et(path)
        assert metadata == METADATA and list(read) == nodes
        assert list(iter_messages(path))[1:] == [encode_node(n) for n in nodes]
        monkeypatch.undo()


def test_error_comes_after_the_nodes_before_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.et"
    path.write_bytes(GOOD_HEAD + GOOD_HEAD[len(_frame(encode_metadata(METADATA))):] + b"\x80")
    _metadata, nodes = read_et(path)
    assert next(nodes) == sample_nodes()[0] and next(nodes) == sample_nodes()[0]
    with pytest.raises(InputError, match="truncated length varint of message #3"):
        next(nodes)


REAL = ["linear_1gpu", "dlrm_8gpu/rank0", "resnet_1gpu_host"]


@pytest.mark.parametrize("name", REAL)
def test_real_trace_reads_like_protobuf(traces: Path, tmp_path: Path, name: str) -> None:
    from pt2chakra.conversion.api import convert

    folder = traces / name.split("/")[0]
    if "/" in name:
        rank = name.split("/")[1]
        host, kineto = folder / f"{rank}.host_et.json.gz", folder / f"{rank}.kineto.json.gz"
    else:
        host, kineto = folder / "host_et.json.gz", folder / "kineto.json.gz"
    out = tmp_path / "real.et"
    convert(host, kineto if kineto.exists() else None, out)
    _metadata, nodes = read_et(out)
    fast = list(nodes)
    reference = [from_proto(pb.Node.FromString(m)) for m in list(iter_messages(out))[1:]]
    assert fast == reference and len(fast) > 10


# Where a varint grows a byte, and where NodeWriter's table lookups change form.
VARINT_EDGES = [0, 1, 127, 128, 2**14 - 1, 2**14, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**35]


@pytest.mark.parametrize("value", VARINT_EDGES)
def test_node_writer_at_varint_length_edges(value: int) -> None:
    writer = NodeWriter(WRITER_ATTRS)
    raw = (value or 1, "n", NodeType.COMP_NODE, value, [(value, 0)], value, value, None, None,
           True, value, value, None, None, None)
    node = ChakraNode(id=value or 1, name="n", type=NodeType.COMP_NODE, ctrl_deps=[value],
                      data_deps=[value], start_time_micros=value, duration_micros=value,
                      attrs=[("flag", "bool_val", True), ("per_node", "int64_val", value),
                             ("tid", "int64_val", value)])
    assert writer.encode(raw) == encode_node(node)


def test_frames_of_batches_mixed_and_long_messages(tmp_path: Path) -> None:
    # Over one batch of nodes, encoded ones among ChakraNodes, and messages
    # whose length takes a 3-byte varint: the file is each node framed in turn.
    nodes: list[ChakraNode | bytes] = []
    for i in range(1, 2 * 2048 + 10):
        node = ChakraNode(id=i, name="x" * (20_000 if i % 1000 == 0 else i % 7), type=NodeType.COMP_NODE)
        nodes.append(encode_node(node) if i % 3 else node)
    path = tmp_path / "t.et"
    metadata = GlobalMetadata(version="0.0.4")
    assert write_et(path, metadata, nodes) == len(nodes)
    messages = [encode_metadata(metadata)] + [
        n if isinstance(n, bytes) else encode_node(n) for n in nodes]
    assert path.read_bytes() == b"".join(uvarint(len(m)) + m for m in messages)


def test_framed_batches_are_written_in_order_as_they_come(tmp_path: Path) -> None:
    # FramedNodes among encoded nodes and ChakraNodes: each written as it
    # comes (not held for a batch), in order, counted by the nodes it holds.
    from io import BytesIO

    from pt2chakra.chakra.encode import _write_frames, node_count

    def frames(nodes: list[ChakraNode]) -> bytes:
        return b"".join(uvarint(len(m)) + m for m in map(encode_node, nodes))

    nodes = [ChakraNode(id=i, name=f"n{i % 5}", type=NodeType.COMP_NODE) for i in range(1, 40)]
    items: list[ChakraNode | bytes | FramedNodes] = [
        encode_node(nodes[0]), FramedNodes(frames(nodes[1:4]), 3), FramedNodes(b"", 0),
        FramedNodes(frames(nodes[4:5]), 1), nodes[5], encode_node(nodes[6]),
        FramedNodes(frames(nodes[7:30]), 23), *nodes[30:35], *map(encode_node, nodes[35:])]
    assert sum(map(node_count, items)) == len(nodes)
    out = BytesIO()
    metadata = GlobalMetadata(version="0.0.4")
    head = uvarint(len(encode_metadata(metadata))) + encode_metadata(metadata)

    def checked() -> Iterator[ChakraNode | bytes | FramedNodes]:
        before: object = None
        for item in items:
            if isinstance(before, FramedNodes):  # the batch before was written
                assert out.getvalue().endswith(before.data)
            yield item
            before = item

    assert _write_frames(out, metadata, checked()) == len(nodes)
    assert out.getvalue() == head + frames(nodes)
    path = tmp_path / "t.et.gz"
    assert write_et(path, metadata, items) == len(nodes)
    assert gzip.decompress(path.read_bytes()) == head + frames(nodes)


def test_varint_tables_and_their_stand_ins(monkeypatch) -> None:
    # The tables hold every 1- and 2-byte varint and every continued low 14
    # bits; until built, their stand-ins give the same bytes and errors, and
    # the last lookup they answer builds both into the module.
    from pt2chakra.chakra import encode

    size = 1 << 14
    small, continued = encode._varint_tables()
    assert list(small) == [encode._build_varint(i) for i in range(size)]
    assert list(continued) == [encode._build_varint(i + size)[:2] for i in range(size)]
    monkeypatch.setattr(encode._UnbuiltVarints, "lookups", -4 * size)  # none builds here
    for table, stand_in in ((small, encode._UnbuiltVarints(continued=False)),
                            (continued, encode._UnbuiltVarints(continued=True))):
        assert [stand_in[i] for i in range(-size, size)] == list(table) * 2
        for bad in (size, -size - 1, 1.5, "1", None):
            with pytest.raises((IndexError, TypeError)) as expected:
                table[bad]  # type: ignore[index]
            with pytest.raises(expected.type, match=f"^{re.escape(str(expected.value))}$"):
                stand_in[bad]  # type: ignore[index]
    for name, continued_table in (("_VARINT_CACHE", False), ("_VARINT_CONTINUED", True)):
        monkeypatch.setattr(encode, name, encode._UnbuiltVarints(continued=continued_table))
    monkeypatch.setattr(encode._UnbuiltVarints, "lookups", encode._LOOKUPS_BEFORE_BUILDING - 2)
    assert encode.uvarint(300) == small[300]  # answered one at a time
    assert not isinstance(encode._VARINT_CACHE, tuple)
    assert encode.uvarint(1 << 20) == continued[0] + small[1 << 6]  # builds
    assert encode._VARINT_CACHE == small and encode._VARINT_CONTINUED == continued

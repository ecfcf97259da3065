"""The compiled CPU-node encoder (``_fast.encode_node``, NodeWriter.encode
where built) gives NodeWriter.encode_python's bytes, or its error, for any
node tuple: the converter's output is the same with or without a compiler."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from builders import WRITER_ATTRS  # the NodeWriter table test_wire checks too
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.chakra.encode import NodeWriter
from pt2chakra.chakra.records import NodeType
from pt2chakra.conversion.graph_builder import CPU_ATTRS

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

U64 = 1 << 64
ints = st.one_of(st.integers(0, 300), st.integers(0, U64 - 1), st.integers(-U64, U64 * 2),
                 st.booleans())
odd = st.one_of(st.none(), st.floats(allow_nan=False), st.text(max_size=3), st.just([1]))
maybe_int = st.one_of(st.none(), ints, odd)


@st.composite
def io_infos(draw: st.DrawFn) -> Any:
    body = draw(st.binary(max_size=40))
    size = draw(st.one_of(st.just(len(body)), st.integers(-2, len(body) + 3), odd))
    return SimpleNamespace(ioinfo=draw(st.one_of(st.just(body), st.just(bytearray(body)))),
                           ioinfo_size=size)


deps = st.one_of(
    st.lists(st.tuples(ints, st.integers(0, 3)), max_size=3),
    st.lists(st.one_of(st.tuples(ints), st.tuples(ints, ints, ints), st.just([5, 1])),
             min_size=1, max_size=2),
    st.tuples(st.tuples(ints, st.integers(0, 3))), st.none(), st.just(7))
attr_values = st.tuples(
    st.one_of(st.none(), st.booleans(), ints), maybe_int, maybe_int,
    st.one_of(st.none(), st.text(max_size=4), ints),
    st.one_of(st.none(), st.tuples(st.text(max_size=3)), st.just("ab")),
    maybe_int)


@st.composite
def node_tuples(draw: st.DrawFn) -> tuple[Any, ...]:
    name = draw(st.one_of(st.sampled_from(["", "aten::mm", "op"]), st.text(max_size=4), odd))
    node_type = draw(st.one_of(st.sampled_from(list(NodeType)), st.integers(-3, 12), odd))
    io = [draw(st.one_of(st.none(), io_infos())) for _ in range(2)]
    fields = (draw(maybe_int), name, node_type, draw(maybe_int), draw(deps), draw(maybe_int),
              draw(maybe_int), *io, *draw(attr_values))
    cut = draw(st.one_of(st.just(len(fields)), st.integers(0, len(fields))))
    return fields[:cut]


def _outcome(encode: Any, values: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        return ("bytes", encode(values))
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.slow  # a long property run
@settings(max_examples=400, deadline=None)
@given(st.lists(node_tuples(), min_size=1, max_size=6))
def test_any_node_tuple(nodes: list[tuple[Any, ...]]) -> None:
    fast, python = NodeWriter(WRITER_ATTRS), NodeWriter(WRITER_ATTRS)
    assert fast.encode != fast.encode_python  # the compiled one
    for values in nodes:
        assert _outcome(fast.encode, values) == _outcome(python.encode_python, values)


def _handing_writer() -> tuple[NodeWriter, Any, list[tuple[Any, ...]], Any, Any]:
    """The converter's writer, its ``encode_python``, the rows handed back to
    it, a fallback that records them, and the compiled module."""
    handed: list[tuple[Any, ...]] = []
    writer = NodeWriter(CPU_ATTRS)
    python = writer.encode_python

    def counting(values: tuple[Any, ...]) -> bytes:
        handed.append(values)
        return python(values)

    fast = compiled.FAST
    assert fast is not None
    return writer, python, handed, counting, fast


def test_converter_writer_takes_ordinary_cpu_nodes() -> None:
    """The converter's own table: an ordinary CPU node is encoded in C (not
    handed back), once its name is known, with encode_python's bytes."""
    writer, python, handed, counting, fast = _handing_writer()
    tables = writer.encode.args[0]  # type: ignore[attr-defined]  # the partial's tables
    writer.encode = lambda values: fast.encode_node(tables, counting, values)
    io = SimpleNamespace(ioinfo=b"\n\x02[]", ioinfo_size=4)
    node = (12345, "aten::mm", NodeType.COMP_NODE, 17, [(12000, 0)], 1_700_000_000_123, 42, io,
            io, True, 999, 3, "aten::mm(Tensor self, Tensor mat2) -> Tensor", 50, 0)
    first, second = writer.encode(node), writer.encode(node)
    assert first == second == python(node)
    assert len(handed) == 1  # the first, whose name the writer had not met


# Rows as the converter gives them (tuples), or as the C path hands them on
# (lists: not a node tuple it reads); now and then one that is no row at all.
rows = st.one_of(node_tuples(), node_tuples().map(list), st.sampled_from([None, 5, b"x"]))


def _framed_outcome(frame: Any, batch: Any) -> tuple[Any, ...]:
    try:
        return ("bytes", frame(batch))
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.slow  # a long property run
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(rows, max_size=6), min_size=1, max_size=3), st.booleans())
def test_any_rows_framed(batches: list[list[Any]], as_tuple: bool) -> None:
    """``frame`` (C: ``frame_nodes``) gives ``frame_python``'s bytes or its
    error, for rows it encodes, rows it hands to the fallback and rows that
    raise; batches in turn, so that the tables fill as they would."""
    fast, python = NodeWriter(WRITER_ATTRS), NodeWriter(WRITER_ATTRS)
    assert fast.frame != fast.frame_python  # the compiled one
    for batch in batches:
        given_rows = tuple(batch) if as_tuple else batch
        assert _framed_outcome(fast.frame, given_rows) == _framed_outcome(
            python.frame_python, given_rows)
    assert _framed_outcome(fast.frame, iter(batches[0])) == _framed_outcome(
        python.frame_python, iter(batches[0]))
    assert _framed_outcome(fast.frame, 5) == _framed_outcome(python.frame_python, 5)


def test_frame_takes_ordinary_cpu_nodes_in_c() -> None:
    """The converter's own table: a batch of ordinary CPU nodes is framed in
    C, each handed back only until its name is known, with the bytes of
    ``encode_python`` framed."""
    writer, python, handed, counting, fast = _handing_writer()
    tables = writer.frame.args[0]  # type: ignore[attr-defined]  # the partial's tables
    io = SimpleNamespace(ioinfo=b"\n\x02[]", ioinfo_size=4)
    long_name = "aten::" + "x" * 3000  # a message past the C encoder's stack buffer
    batch = [(node_id, "aten::mm" if node_id % 2 == 0 else long_name, NodeType.COMP_NODE, 17,
              [(node_id - 1, 0)], 1_700_000_000_123, 42, io, io, True, 999, 3,
              "aten::mm(Tensor self, Tensor mat2) -> Tensor", 50, 0)
             for node_id in range(20, 2100)]
    framed = fast.frame_nodes(tables, counting, batch)
    assert framed == writer.frame_python(batch)
    assert [values[1] for values in handed] == ["aten::mm", long_name]
    assert fast.frame_nodes(tables, counting, []) == b""

"""The lean reader gives read_et's nodes, less the fields nobody asked for."""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
import pytest
from builders import metadata, node, nodes_strategy, write_nodes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.chakra.encode import encode_metadata, encode_node, uvarint
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.lean_read import read_et_apart, read_et_lean
from pt2chakra.chakra.records import Attr, ChakraNode, NodeType
from pt2chakra.errors import InputError
from pt2chakra.simulation.prepare import SIM_ATTRS

META = metadata(rank=3)
TID: Attr = ("tid", "int64_val", 1)


@pytest.fixture(autouse=True, params=["compiled", "python"])
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on the compiled fast path and on the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(compiled, "FAST", None)
    elif compiled.FAST is None:
        pytest.skip("the compiled fast path is not built here (no C compiler at install)")
    return str(request.param)


def _lean_view(node: ChakraNode, names: frozenset[str]) -> ChakraNode:
    """What the lean reader should give for ``node``."""
    return ChakraNode(node.id, node.name, node.type, node.start_time_micros, node.duration_micros,
                      [], list(node.data_deps), None, None,
                      [a for a in node.attrs if a[0] in names])


def _same_as_read_et(path: Path, names: frozenset[str]) -> None:
    md, full = read_et(path)
    lean_md, lean = read_et_lean(path, names)
    assert lean_md == md
    lean_nodes = list(lean)
    assert all(n.ctrl_deps == () for n in lean_nodes)  # type: ignore[comparison-overlap]  # the lean reader leaves them empty, a tuple
    assert [msgspec.structs.replace(n, ctrl_deps=[]) for n in lean_nodes] == \
        [_lean_view(n, names) for n in full]


@pytest.mark.parametrize("name", ["dlrm_rank0", "resnet_2gpu_host", "chakra_pg_host", "gpt2_host"])
def test_real_traces(converted: dict[str, Path], name: str) -> None:
    _same_as_read_et(converted[name], SIM_ATTRS)


@pytest.mark.slow  # a long property run
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(nodes_strategy(named=True), min_size=1, max_size=12))
def test_any_nodes_any_filter(tmp_path: Path, nodes: list[ChakraNode]) -> None:
    path = write_nodes(tmp_path / "n.et", nodes, META)
    names = frozenset(a[0] for n in nodes for a in n.attrs[::2])  # every other name
    _same_as_read_et(path, names)
    _same_as_read_et(path, SIM_ATTRS)


def test_gzip_and_many_buffer_fills(tmp_path: Path) -> None:
    nodes = [node(i, [i - 1] if i else [], name=f"op{i % 7}", start=10 * i, dur=5,
                  inputs=("[1]", "[[2]]", '["Int"]'),
                  attrs=[TID, ("rf_id", "int64_val", i), ("op_schema", "string_val", "x" * 300)])
             for i in range(5000)]  # > 1 MiB: several buffer fills
    path = write_nodes(tmp_path / "n.et.gz", nodes, META)
    _same_as_read_et(path, frozenset({"tid"}))
    names = {n.name for n in read_et_lean(path, ())[1]}
    assert names == {f"op{k}" for k in range(7)}


def _raw_file(path: Path, *messages: bytes) -> None:
    path.write_bytes(b"".join(uvarint(len(m)) + m for m in messages))


def test_bad_node_gives_read_et_error(tmp_path: Path) -> None:
    good = encode_node(ChakraNode(1, "a", NodeType.COMP_NODE, attrs=[TID]))
    bad_type = bytes([0x08, 2, 0x18, 99])  # id 2, type 99: not a NodeType
    path = tmp_path / "bad.et"
    _raw_file(path, encode_metadata(META), good, bad_type)
    with pytest.raises(InputError) as full:
        list(read_et(path)[1])
    with pytest.raises(InputError) as lean:
        list(read_et_lean(path, SIM_ATTRS)[1])
    assert str(lean.value) == str(full.value)


def test_garbage_gives_read_et_error(tmp_path: Path) -> None:
    good = encode_node(ChakraNode(1, "a", NodeType.COMP_NODE))
    path = tmp_path / "bad.et"
    _raw_file(path, encode_metadata(META), good, b"\xff\xff\xff")
    with pytest.raises(InputError) as full:
        list(read_et(path)[1])
    with pytest.raises(InputError) as lean:
        list(read_et_lean(path, SIM_ATTRS)[1])
    assert str(lean.value) == str(full.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.et"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        read_et_lean(path, SIM_ATTRS)


def test_gzip_of_plain(tmp_path: Path) -> None:
    plain = write_nodes(tmp_path / "a.et", [node(1, name="a", attrs=[TID])], META)
    gz = tmp_path / "a.bin"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(read_et_lean(gz, SIM_ATTRS)[1]) == list(read_et_lean(plain, SIM_ATTRS)[1])


INCL = "inclusive_duration_micros"


def _same_apart(path: Path, names: frozenset[str]) -> None:
    """``read_et_apart`` = ``read_et_lean`` with the inclusive time moved to
    the column, where every copy on the node is a usable number."""
    _md, lean = read_et_lean(path, names)
    lean_nodes = list(lean)
    _md, apart = read_et_apart(path, names, INCL)
    assert len(apart) == len(apart.apart) == len(lean_nodes)
    for got, whole, value in zip(apart, lean_nodes, apart.apart):
        assert msgspec.structs.replace(got, attrs=[]) == msgspec.structs.replace(whole, attrs=[])
        assert [a for a in got.attrs if a[0] != INCL] == [a for a in whole.attrs if a[0] != INCL]
        incl = [a for a in whole.attrs if a[0] == INCL]
        if value == value:
            assert incl and float(incl[-1][2]) == value
            assert all(a[0] != INCL for a in got.attrs)
        else:
            assert [a for a in got.attrs if a[0] == INCL] == incl


def test_apart_column(tmp_path: Path) -> None:
    kinds: list[list[Attr]] = [[], [(INCL, "int64_val", 7)], [(INCL, "double_val", 2.5)],
             [(INCL, "double_val", float("nan"))], [(INCL, "string_val", "x")],
             [(INCL, "int64_val", 3), (INCL, "uint64_val", 4)],
             [(INCL, "int64_val", 3), (INCL, "string_val", "y")], [(INCL, "bool_val", True)]]
    nodes = [node(i, name="op", start=10 * i, dur=5,
                  attrs=[TID, *kinds[i % len(kinds)], ("rf_id", "int64_val", i)])
             for i in range(3000)]
    path = write_nodes(tmp_path / "n.et", nodes, META)
    _same_apart(path, SIM_ATTRS)
    _md, apart = read_et_apart(path, SIM_ATTRS, INCL)
    assert apart.apart[1] == 7.0 and apart.apart[2] == 2.5 and apart.apart[5] == 4.0
    assert len({id(n.attrs) for n in apart[::len(kinds)]}) == 1  # equal sets: one shared list


@pytest.mark.parametrize("name", ["dlrm_rank0", "gpt2_host"])
def test_apart_real_traces(converted: dict[str, Path], name: str) -> None:
    _same_apart(converted[name], SIM_ATTRS)


@pytest.mark.slow  # a long property run
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(nodes_strategy(named=True), min_size=1, max_size=12))
def test_apart_any_nodes(tmp_path: Path, nodes: list[ChakraNode]) -> None:
    path = write_nodes(tmp_path / "n.et", nodes, META)
    names = frozenset(a[0] for n in nodes for a in n.attrs)
    _same_apart(path, names | {INCL})

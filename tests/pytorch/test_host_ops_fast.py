"""Host ET nodes normalised by the compiled path (``_fast.host_ops``) are the
ops ``_nested_to_op`` makes: for any attrs text, the compiled path either
leaves the node to the twin or gives the same op; whole traces load to equal
ops either way."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.pytorch.host_decode import (
    _NO_EXTRAS,
    _SHARED_STRINGS,
    SCHEMA_LAYOUTS,
    _nested_to_op,
    _NestedNode,
    _shared,
    normalise,
)
from pt2chakra.pytorch.records import HostOp, IOValues

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")

_NODE = msgspec.json.Decoder(_NestedNode)
_NAMES = ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema",
          "kernel_backend", "kernel_file", "tensor_range")
_KINDS = ("uint64", "uint64", "int64", "uint64", "uint64", "uint64", "string", "string",
          "string", "string")
_ints = st.one_of(st.integers(-5, 300), st.integers(-2**70, 2**70),
                  st.sampled_from([0, -1, 10**17, 10**18, -10**18, 2**63 - 1, 2**63]))
_strings = st.one_of(st.just(""), st.text(max_size=6),
                     st.sampled_from(["aten::mm(Tensor self) -> Tensor", "é", "\\", '"', "\n"]))
_value = st.one_of(_ints, _strings, st.floats(allow_nan=False), st.none(), st.booleans(),
                   st.lists(st.integers(), max_size=2))
_ws = st.sampled_from(["", " ", "\n", "\t ", "\r"])


@st.composite
def _attrs_text(draw: st.DrawFn) -> bytes:
    """The observer's attrs as torch writes them (any values, spacing), and
    half the time with one twist at one entry: another name, value type,
    number spelling or key order, an extra key, a cut, stray bytes."""
    count = draw(st.sampled_from([7, 9, 10, 10, 10, 0, 6, 8, 11]))
    twist = draw(st.sampled_from(["none"] * 6 + ["name", "value", "number", "order", "key",
                                                 "cut"]))
    at = draw(st.integers(0, max(count - 1, 0)))
    items = []
    for k in range(count):
        name, kind = _NAMES[k % len(_NAMES)], _KINDS[k % len(_KINDS)]
        if kind == "string":
            value: Any = "" if k >= 7 and draw(st.integers(0, 5)) else draw(_strings)
        else:
            value = draw(_ints)
        mine = k == at
        if mine and twist == "name":
            name = draw(st.sampled_from(_NAMES + ("pg_name", "n\\u0061me")))
        if mine and twist == "value":
            value = draw(_value)
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
        if mine and twist == "number":
            text = draw(st.sampled_from(["-0", "01", "1.0", "1e2", "-", "2 ", "- 1", "00"]))
        ws = draw(_ws)
        keys = [f'"name":{ws}"{name}"', f'"type": "{kind}"', f'"value":{ws}{text}']
        if mine and twist == "order":
            keys = draw(st.permutations(keys))
        if mine and twist == "key":
            keys.insert(draw(st.integers(0, 3)), '"type": 1')
        items.append("{" + ws + f",{draw(_ws)}".join(keys) + draw(_ws) + "}")
    raw = (draw(_ws) + "[" + f",{draw(_ws)}".join(items) + "]" + draw(_ws)).encode()
    if twist == "cut":  # bytes that may not be JSON at all
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=3)) + raw[cut + 1:]
    return raw


def _node(attrs: bytes, name: str = "aten::mm") -> _NestedNode:
    head = json.dumps({"id": 5, "name": name, "ctrl_deps": 3,
                       "inputs": {"values": [[1, 2]], "shapes": [[4]], "types": ["Tensor"]}})
    return _NODE.decode(head[:-1].encode() + b', "attrs": ' + attrs + b"}")


def _python(node: _NestedNode, shared: dict[IOValues, IOValues]) -> Any:
    """The twin's op and extras, or its error's type."""
    saved = compiled.FAST
    compiled.FAST = None
    try:
        return _nested_to_op(node, shared)
    except msgspec.MsgspecError as e:
        return type(e)
    finally:
        compiled.FAST = saved


@settings(max_examples=1500, deadline=None)
@given(st.lists(_attrs_text(), min_size=1, max_size=4), st.sampled_from(["aten::mm", "", "é"]))
def test_any_attrs(texts: list[bytes], name: str) -> None:
    fast = compiled.FAST
    assert fast is not None
    nodes = []
    for raw in texts:
        try:
            nodes.append(_node(raw, name))
        except msgspec.MsgspecError:  # not JSON: a Raw holding the bytes anyway
            nodes.append(_NestedNode(5, name, 3, attrs=msgspec.Raw(raw)))
    shared_fast: dict[IOValues, IOValues] = {}
    shared_python: dict[IOValues, IOValues] = {}
    for node in nodes:
        ops: list[HostOp] = []
        taken = fast.host_ops([node], 0, ops, shared_fast, IOValues, HostOp, _SHARED_STRINGS,
                              _shared, _NO_EXTRAS)
        want = _python(node, shared_python)
        assert taken == len(ops)
        if taken:
            op, extras = want  # the twin makes an op (no error) without extras
            assert extras == {}
            assert ops[0] == op
            assert ops[0].attrs is _NO_EXTRAS
            assert ops[0].inputs is shared_fast[op.inputs]
    assert list(shared_fast) == list(shared_python)[:len(shared_fast)]


def test_torch_layout_is_taken() -> None:
    """The attrs torch writes (10 entries, the last three empty) are the
    compiled path's, with every field in its place."""
    attrs = [{"name": n, "type": k, "value": v} for n, k, v in zip(
        _NAMES, _KINDS, [7, 1, -1, 2, 3, 4, "aten::mm(Tensor self)", "", "", ""])]
    node = _node(json.dumps(attrs).encode())
    fast = compiled.FAST
    assert fast is not None
    ops: list[HostOp] = []
    assert fast.host_ops([node, node], 0, ops, {}, IOValues, HostOp, _SHARED_STRINGS,
                         _shared, _NO_EXTRAS) == 2
    assert ops[0] == _python(node, {})[0]
    assert (ops[0].rf_id, ops[0].fw_parent, ops[0].seq_id, ops[0].scope, ops[0].tid,
            ops[0].fw_tid, ops[0].op_schema) == (7, 1, -1, 2, 3, 4, "aten::mm(Tensor self)")
    attrs[7]["value"] = "triton"  # an extra: the twin's
    node = _node(json.dumps(attrs).encode())
    assert fast.host_ops([node], 0, ops, {}, IOValues, HostOp, _SHARED_STRINGS,
                         _shared, _NO_EXTRAS) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(_attrs_text(), min_size=1, max_size=8))
def test_normalise_same_ops(texts: list[bytes]) -> None:
    """A run of nodes, some for each path: the same ops and the same error."""
    nodes = []
    for raw in texts:
        try:
            nodes.append(_node(raw))
        except msgspec.MsgspecError:
            nodes.append(_NestedNode(5, "x", 3, attrs=msgspec.Raw(raw)))
    layout = SCHEMA_LAYOUTS[(1, 1, 1)]

    def run() -> Any:
        try:
            return msgspec.msgpack.encode(normalise("t", nodes, layout))
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            return str(e)

    fast_result = run()
    saved = compiled.FAST
    compiled.FAST = None
    try:
        assert run() == fast_result
    finally:
        compiled.FAST = saved

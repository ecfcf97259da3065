"""Host ET nodes normalised by the compiled path (``_fast.host_ops``) are the
ops ``_nested_to_op`` makes: for any attrs text, the compiled path either
leaves the node to the twin or gives the same op; whole traces load to equal
ops either way. A slice's text read straight into ops (``_fast.nested_ops``,
through ``slice_ops``) gives the twin's ops, or its error, for any text."""

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
    slice_ops,
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


_json_leaf = st.one_of(_ints, st.floats(allow_nan=False, allow_infinity=False), _strings,
                       st.none(), st.booleans())
_json_value = st.recursive(
    _json_leaf, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.text(max_size=3), kids, max_size=2), max_leaves=8)
# Spellings a JSON writer would not use, or that are not JSON (number forms,
# literals cut short, a \u escape, nesting past the compiled path's depth).
_odd_values = st.sampled_from(["1.5e400", "-0", "1E+2", "[1,]", "tru", "01", "1.", ".5", "-",
                               '"\\u0041"', '"a\\qb"', "[" * 70 + "]" * 70, "{1: 2}", "nul",
                               "1e", "[1 2]", '{"a" 1}', "\"\x01\"", "+1", "NaN"])
_id_texts = st.one_of(_ints.map(str), st.sampled_from(
    ["4611686018427387904", "4611686018427387905", "1.0", "01", "-0", "1e2", '"5"', "null"]))


def _json_text(draw: st.DrawFn, value: Any) -> str:
    return json.dumps(value, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))


_ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=5)
_plain_leaf = st.one_of(st.integers(-10**18, 10**18), st.floats(allow_nan=False,
                                                                allow_infinity=False),
                        _ascii_text, st.none(), st.booleans())
# What torch writes in inputs/outputs: ASCII, numbers, nested lists.
_plain_value = st.recursive(
    _plain_leaf, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        _ascii_text, kids, max_size=2), max_leaves=8)


@st.composite
def _io_text(draw: st.DrawFn, plain: bool) -> str:
    """An inputs/outputs object: its four keys (or others, twice, none), any values."""
    if plain:
        keys = draw(st.lists(st.sampled_from(["values", "shapes", "types", "strides"]),
                             max_size=4, unique=True))
    else:
        keys = draw(st.lists(st.sampled_from(["values", "shapes", "types", "strides", "values",
                                              "other"]), max_size=5))
    members = []
    for key in keys:
        if plain:
            value = _json_text(draw, draw(_plain_value))
        else:
            value = draw(_odd_values) if not draw(st.integers(0, 3)) else _json_text(
                draw, draw(_json_value))
        members.append(f'"{key}":{draw(_ws)}{value}')
    if not plain and not draw(st.integers(0, 5)):
        return draw(st.sampled_from(["null", "[]", '"x"']))
    return "{" + draw(_ws) + f",{draw(_ws)}".join(members) + "}"


@st.composite
def _plain_attrs(draw: st.DrawFn) -> str:
    """The observer's attrs as torch writes them, any values it could write."""
    count = draw(st.sampled_from([7, 9, 10]))
    values = [*draw(st.tuples(*[st.integers(-10**17, 10**17)] * 6)),
              draw(st.sampled_from(['aten::gelu(Tensor self, *, str approximate="none")', "",
                                    "é(\\)", "a\tb/c"])), "", "", ""]
    return json.dumps([{"name": n, "type": k, "value": v} for n, k, v in zip(
        _NAMES[:count], _KINDS, values)], ensure_ascii=False)


@st.composite
def _node_text(draw: st.DrawFn) -> str:
    """A node as the observer writes it (half of them plain: the compiled
    reader's), the others anything near it: a key dropped, added, repeated
    or moved, odd values, odd spellings."""
    plain = draw(st.booleans())
    if plain:
        ids = st.integers(0, 2**62).map(str)
        name = draw(st.sampled_from(["aten::mm", "", "é", "a\\b", 'q"t', "x\ty"]))
        attrs = draw(_plain_attrs())
    else:
        ids = _id_texts
        name = draw(st.sampled_from(["aten::mm", "é"])) if draw(st.booleans()) else draw(_strings)
        attrs = draw(_attrs_text()).decode(errors="replace")
    fields = {"id": draw(ids), "name": _json_text(draw, name), "ctrl_deps": draw(ids),
              "inputs": draw(_io_text(plain)), "outputs": draw(_io_text(plain)), "attrs": attrs}
    keys = list(fields)
    if not plain:
        keys = [k for k in keys if draw(st.integers(0, 6))]  # now and then one left out
        if not draw(st.integers(0, 4)):
            keys.insert(draw(st.integers(0, len(keys))), draw(st.sampled_from(["extra", "id"])))
    if draw(st.booleans()):
        keys = draw(st.permutations(keys))
    body = f",{draw(_ws)}".join(f'"{k}": {fields.get(k, "1")}' for k in keys)
    return "{" + draw(_ws) + body + draw(_ws) + "}"


def _slice_outcome(text: bytes, compiled_path: bool, shared: dict[IOValues, IOValues]) -> Any:
    """``slice_ops`` of a slice (as json_slices hands it out: a view of a
    bytearray), with or without the compiled path: its ops, or its error's type."""
    saved = compiled.FAST
    if not compiled_path:
        compiled.FAST = None
    try:
        return slice_ops("t", memoryview(bytearray(text)), SCHEMA_LAYOUTS[(1, 1, 1)], shared)
    except Exception as e:  # noqa: BLE001 - the error is the result compared
        return type(e)
    finally:
        compiled.FAST = saved


@settings(max_examples=600, deadline=None)
@given(st.lists(_node_text(), max_size=5), _ws, st.integers(0, 9), st.data())
def test_any_slice_text(nodes: list[str], ws: str, damage: int, data: st.DataObject) -> None:
    text = (ws + "[" + f",\n{ws}".join(nodes) + "]" + ws).encode()
    if not damage:  # bytes that may not be JSON at all
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(st.binary(max_size=3)) + text[cut + 1:]
    shared_fast: dict[IOValues, IOValues] = {}
    shared_python: dict[IOValues, IOValues] = {}
    fast = _slice_outcome(text, True, shared_fast)
    assert fast == _slice_outcome(text, False, shared_python)
    if isinstance(fast, list):
        assert all(op.inputs is shared_fast[op.inputs] for op in fast)
        assert set(shared_fast) == set(shared_python)


def test_plain_nodes_are_read_in_one_pass() -> None:
    """Nodes as torch writes them, an escaped schema included, are all the
    compiled reader's: it returns -1 (nothing left to the twin)."""
    attrs = [{"name": n, "type": k, "value": v} for n, k, v in zip(
        _NAMES, _KINDS, [7, 1, -1, 2, 3, 4, 'aten::gelu(Tensor self, *, str approximate="none")',
                         "", "", ""])]
    node = {"id": 220, "name": "aten::gelu", "ctrl_deps": 2,
            "inputs": {"values": [[219, 215, 0, 2048, 4, "cpu"], "none"], "shapes": [[2, 8], []],
                       "types": ["Tensor(float)", "String"], "strides": [[8, 1], []]},
            "outputs": {"values": [], "shapes": [], "types": [], "strides": []}, "attrs": attrs}
    text = ("[" + ",\n".join(json.dumps(dict(node, id=i)) for i in (220, 221)) + "]").encode()
    fast = compiled.FAST
    assert fast is not None
    ops: list[HostOp] = []
    assert fast.nested_ops(text, ops, {}, IOValues, HostOp, _SHARED_STRINGS, _shared,
                           _NO_EXTRAS) == -1
    assert ops == _slice_outcome(text, False, {})
    assert ops[0].op_schema == attrs[6]["value"]
    assert ops[0].inputs.values == [[219, 215, 0, 2048, 4, "cpu"], "none"]

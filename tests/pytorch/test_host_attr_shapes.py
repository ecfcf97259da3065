"""The observer's attrs shapes (tagged tuples) give the ops the generic
``_Attr`` list gives, and anything else still takes the generic path."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from builders import host_attr, host_doc, host_node, write_json
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.errors import InputError
from pt2chakra.pytorch import host_decode
from pt2chakra.pytorch.host_decode import _OBSERVER_ATTRS, _OBSERVER_SHAPES, _NestedNode
from pt2chakra.pytorch.host_trace import load_host_trace

_NODE = msgspec.json.Decoder(_NestedNode)


def _op(attrs: list[dict[str, Any]], fast: bool) -> tuple[Any, Any]:
    node = _NODE.decode(json.dumps({"id": 5, "name": "aten::mm", "ctrl_deps": 1,
                                    "attrs": attrs}).encode())
    if fast:
        return host_decode._nested_to_op(node, {})
    with pytest.MonkeyPatch.context() as m:  # no shape fits: the generic path
        m.setattr(host_decode, "_SHAPE_DECODERS", [_refuse])
        m.setattr(host_decode, "_observer_attrs", lambda _raw, _first=0: None)
        return host_decode._nested_to_op(node, {})


def _refuse(_raw: Any) -> Any:
    raise msgspec.ValidationError("not this shape")


def _attr(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "type": "uint64" if isinstance(value, int) else "string",
            "value": value}


_values = st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(max_size=8), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False), st.booleans())


@given(shape=st.sampled_from(_OBSERVER_SHAPES),
       ints=st.lists(st.integers(-(2**63), 2**64 - 1), min_size=6, max_size=6),
       texts=st.lists(st.sampled_from(["", "x", "triton", "aten::mm(Tensor a)"]),
                      min_size=4, max_size=4),
       odd=st.one_of(st.none(), st.tuples(st.integers(0, 9), _values)),
       extra=st.booleans(), swap=st.booleans())
def test_tagged_shapes_match_the_generic_path(shape: int, ints: list[int], texts: list[str],
                                              odd: tuple[int, Any] | None, extra: bool,
                                              swap: bool) -> None:
    values: list[Any] = [*ints, *texts][:shape]
    if odd is not None and odd[0] < shape:  # a value of another type somewhere
        values[odd[0]] = odd[1]
    attrs = [_attr(name, value) for (name, _), value in zip(_OBSERVER_ATTRS, values)]
    if swap:
        attrs[0], attrs[1] = attrs[1], attrs[0]
    if extra:  # a collective's attrs after the observer's own
        attrs.append(_attr("pg_name", "0"))
    fast_op, fast_extras = _op(attrs, fast=True)
    slow_op, slow_extras = _op(attrs, fast=False)
    assert fast_op == slow_op
    assert fast_extras == slow_extras


def test_appended_attrs_that_say_something_are_kept() -> None:
    values = [3, 0, -1, 0, 1, 0, "aten::mm()", "triton", "", "0:4"]
    attrs = [_attr(name, value) for (name, _), value in zip(_OBSERVER_ATTRS, values)]
    op, extras = _op(attrs, fast=True)
    assert (op.rf_id, op.seq_id, op.tid, op.op_schema) == (3, -1, 1, "aten::mm()")
    assert op.attrs == extras == {"kernel_backend": "triton", "tensor_range": "0:4"}


@pytest.mark.parametrize("schema", [["aten::mm"], {"a": 1}, 7])
def test_a_schema_that_is_not_a_string_is_one_line_naming_the_field(
        tmp_path: Any, schema: Any) -> None:
    """A list (unhashable) once crashed the name sharing before the check."""
    odd = host_node(5, "aten::mm", 2, 12)
    odd["attrs"] = [a for a in odd["attrs"] if a["name"] != "op_schema"]
    odd["attrs"].append(host_attr("op_schema", schema, "string"))
    path = write_json(tmp_path / "h.json", host_doc(odd))
    with pytest.raises(InputError, match=r"op 5 \('aten::mm'\): `op_schema` should be a string"):
        load_host_trace(path)

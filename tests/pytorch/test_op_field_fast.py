"""A field of every op read at the slots (``_fast.op_field``) is what
``attrgetter`` reads (``records._op_field_python``), the same objects, for
any ops and field; or the list is left to the twin, which gives its error."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from helpers import on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.pytorch.records import HostOp, _op_field_python, op_field

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")


class _OtherOp(msgspec.Struct):
    """Ops of another type: the compiled path reads them only alone."""

    id: Any
    name: Any


class _Plain:
    """An op without slots: the twin reads it."""

    def __init__(self, op_id: Any) -> None:
        self.id, self.name = op_id, "plain"


_value = st.one_of(st.integers(), st.text(max_size=4), st.none())
_op = st.one_of(
    st.builds(HostOp, _value, _value, _value, _value),
    st.builds(HostOp, _value, _value, _value, _value),
    st.builds(_OtherOp, _value, _value),
    st.builds(_Plain, _value),
)
_fields = st.sampled_from(["id", "name", "parent", "tid", "rf_id", "attrs", "inputs",
                           "missing", "__class__", "__struct_fields__"])


def _read(ops: list[Any], field: str) -> Any:
    try:
        values = op_field(ops, field)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    return [id(value) for value in values]


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=6), _fields)
def test_same_fields(ops: list[Any], field: str) -> None:
    fast, python = on_both_paths(lambda: _read(ops, field))
    assert fast == python
    try:
        expected: Any = [id(value) for value in _op_field_python(ops, field)]
    except Exception as exc:  # noqa: BLE001
        expected = ("error", type(exc).__name__)
    assert fast == expected


def test_host_ops_take_the_compiled_path() -> None:
    fast = compiled.fast_path()
    assert fast is not None
    ops = [HostOp(1, "a", 0, 1), HostOp(2, "b", 1, 1)]
    assert fast.op_field(ops, "name") == ["a", "b"] and fast.op_field([], "x") == []
    assert fast.op_field(ops + [_OtherOp(3, "c")], "name") is None
    assert fast.op_field(ops, "__class__") is None

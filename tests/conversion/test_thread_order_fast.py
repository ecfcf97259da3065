"""The thread order's compiled pass (``_fast.thread_order``) gives the
twin's columns (``deps._thread_order_python``) for any ops and channels, or
leaves them to it; either way the columns are ``thread_order_edges``."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from helpers import compiled_module, on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.chakra.dep_kinds import EdgeKind
from pt2chakra.conversion.deps import (
    EdgeColumns,
    _thread_order_python,
    thread_order_columns,
    thread_order_edges,
)
from pt2chakra.pytorch.records import HostOp

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")


class _OtherOp(msgspec.Struct):
    """An op of another type: the compiled pass leaves the list to the twin."""

    id: Any
    parent: Any
    tid: Any


_odd = st.sampled_from([2**63, -2**63, 2**70, -1, True, None, "1", 1.0])
_small = st.integers(0, 40)
_value = st.one_of(_small, _small, _small, _odd)


@st.composite
def _ops(draw: st.DrawFn) -> tuple[list[Any], dict[Any, Any]]:
    """Ops in id order most of the time (as ``link`` leaves them), else in
    any; a twist at one of them a third of the time."""
    plain = draw(st.integers(0, 3)) > 0
    ids = draw(st.lists(st.integers(0, 60), max_size=12, unique=plain or draw(st.booleans())))
    if plain or draw(st.booleans()):
        ids.sort()
    ops: list[Any] = [HostOp(i, "op", draw(st.one_of(st.sampled_from(ids or [0]), _small)),
                             draw(st.integers(0, 3))) for i in ids]
    if ops and draw(st.integers(0, 2)) == 0:
        at = draw(st.integers(0, len(ops) - 1))
        field = draw(st.sampled_from(["id", "parent", "tid", "type"]))
        if field == "type":
            op = ops[at]
            ops[at] = _OtherOp(op.id, op.parent, op.tid)
        else:
            setattr(ops[at], field, draw(_odd))
    channels = draw(st.dictionaries(st.one_of(st.sampled_from(ids or [0]), _small),
                                    _value if draw(st.booleans()) else _small, max_size=3))
    return ops, channels


def _columns(run: Any) -> Any:
    try:
        columns = run()
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    return (columns.dsts.tolist(), columns.srcs.tolist(), columns.kinds.tolist(),
            columns.ascending)


@settings(max_examples=300, deadline=None)
@given(_ops())
def test_same_columns(case: tuple[list[Any], dict[Any, Any]]) -> None:
    ops, channels = case
    fast, python = on_both_paths(lambda: _columns(lambda: thread_order_columns(ops, channels)))
    assert fast == python == _columns(lambda: _thread_order_python(ops, channels))
    if python[0] != "error":  # the edges the rule gives, one at a time
        edges = list(thread_order_edges(
            (op.id, op.parent, channels.get(op.id, op.tid))
            for op in sorted(ops, key=lambda op: op.id)))
        assert list(zip(python[1], python[0], python[2])) == [
            (src, dst, int(kind)) for src, dst, kind in edges]


def test_ops_in_id_order_take_the_compiled_pass() -> None:
    ops = [HostOp(1, "a", 0, 1), HostOp(2, "b", 1, 1), HostOp(3, "c", 0, 2),
           HostOp(5, "d", 2, 1), HostOp(6, "e", 3, 2)]
    n = len(ops)
    from array import array
    dsts, srcs, kinds = array("q", [0]) * n, array("q", [0]) * n, array("B", [0]) * n
    count = compiled_module().thread_order(ops, {6: 1}, EdgeKind.CALLER, EdgeKind.THREAD_ORDER,
                                       dsts, srcs, kinds)
    assert count == 3
    assert list(zip(srcs[:3], dsts[:3], kinds[:3])) == [
        (1, 2, EdgeKind.CALLER), (2, 5, EdgeKind.CALLER), (5, 6, EdgeKind.THREAD_ORDER)]
    one = [HostOp(1, "a", 0, -2**63)]  # a thread that is the thread table's mark: the twin's
    assert compiled_module().thread_order(one, {}, 0, 1, dsts[:1], srcs[:1], kinds[:1]) is None
    with pytest.raises(TypeError):  # columns of len(ops) items, no other
        compiled_module().thread_order(one, {}, 0, 1, dsts, srcs, kinds)
    assert list(EdgeColumns(dsts[:3], srcs[:3], kinds[:3], True)) == [
        (1, 2, EdgeKind.CALLER), (2, 5, EdgeKind.CALLER), (5, 6, EdgeKind.THREAD_ORDER)]

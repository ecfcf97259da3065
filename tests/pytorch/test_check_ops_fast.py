"""The structure check's compiled pass (``_fast.check_ops``) does what its
twin (``host_decode._check_ops_python``) does, for any ops: the same
parents (sharing the same id objects), the same dangling ops and answer, or
leaves the ops untouched to the twin, which gives its error; whole
``check_structure`` calls raise and warn alike on both paths."""

from __future__ import annotations

import copy
import logging
from typing import Any

import msgspec
import pytest
from helpers import compiled_module, on_both_paths
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra import compiled
from pt2chakra.errors import InputError
from pt2chakra.names import OBSERVER_PREFIX
from pt2chakra.pytorch.host_decode import MAX_ID, _check_ops_python, check_structure
from pt2chakra.pytorch.records import HostOp

pytestmark = pytest.mark.skipif(compiled.FAST is None,
                                reason="the compiled fast path is not built here")


class _OtherOp(msgspec.Struct):
    """An op of another type: the compiled pass leaves the list to the twin."""

    id: Any
    name: Any
    parent: Any
    tid: Any
    rf_id: Any = None
    op_schema: Any = ""


_odd = st.sampled_from([MAX_ID, MAX_ID + 1, -MAX_ID, -MAX_ID - 1, 2**63, -2**63, 2**70, -1,
                        True, None, "1", 1.0])
_ROOT = OBSERVER_PREFIX + "execution_trace|process]"


@st.composite
def _ops(draw: st.DrawFn) -> list[Any]:
    """Ops as a trace gives them most of the time (unique ids, in any order,
    above the small ints: parents then share objects), with roots, dangling
    and later parents; a twist at one op a third of the time."""
    base = draw(st.sampled_from([0, 1000]))
    ids = [base + i for i in draw(st.lists(st.integers(0, 40), max_size=10,
                                           unique=draw(st.integers(0, 5)) > 0))]
    ops: list[Any] = []
    for op_id in ids:
        parent = draw(st.one_of(st.sampled_from(ids), st.just(0), st.just(op_id),
                                st.integers(0, 50).map(lambda k: base + k)))
        name = draw(st.sampled_from([_ROOT, "aten::mm", OBSERVER_PREFIX + "x"]))
        ops.append(HostOp(op_id, name, int(str(parent)), draw(st.integers(0, 3)),
                          rf_id=draw(st.one_of(st.none(), st.integers(0, 9))),
                          op_schema=draw(st.sampled_from(["", "aten::mm(Tensor) -> Tensor"]))))
    if ops and draw(st.integers(0, 2)) == 0:
        at = draw(st.integers(0, len(ops) - 1))
        field = draw(st.sampled_from(["id", "name", "parent", "tid", "rf_id", "op_schema",
                                      "type"]))
        if field == "type":
            op = ops[at]
            ops[at] = _OtherOp(op.id, op.name, op.parent, op.tid, op.rf_id, op.op_schema)
        else:
            setattr(ops[at], field, draw(_odd))
    return ops


def _outcome(ops: list[Any], run: Any) -> Any:
    """What a check left: its answer (or error), the parents, which of them
    are their op's id object, the dangling ops by place."""
    ids = {id(op.id): op.id for op in ops}
    try:
        later, dangling = run(ops)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__, str(exc))
    place = {id(op): k for k, op in enumerate(ops)}
    return (later, [op.parent for op in ops], [id(op.parent) in ids for op in ops],
            [place[id(op)] for op in dangling])


def _compiled(ops: list[Any]) -> tuple[Any, list[Any]]:
    dangling: list[Any] = []
    later = compiled_module().check_ops(ops, OBSERVER_PREFIX, MAX_ID, dangling)
    return later, dangling


@settings(max_examples=400, deadline=None)
@given(_ops())
def test_same_checks(ops: list[Any]) -> None:
    mine, theirs = copy.deepcopy(ops), copy.deepcopy(ops)
    before = [op.parent for op in mine]
    fast = _outcome(mine, _compiled)
    python = _outcome(theirs, lambda ops: _check_ops_python("t.json", ops))
    if fast[0] is None:  # left to the twin: nothing changed
        assert [op.parent for op in mine] == before and fast[3] == []
        assert _outcome(mine, lambda ops: _check_ops_python("t.json", ops)) == python
    else:
        assert fast == python


def _checked(ops: list[Any]) -> Any:
    ops = copy.deepcopy(ops)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("pt2chakra.pytorch.host_decode")
    logger.addHandler(handler)
    try:
        check_structure("t.json", ops)
    except InputError as exc:
        return ("error", str(exc))
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("error", type(exc).__name__)
    finally:
        logger.removeHandler(handler)
    return [op.parent for op in ops], records


@settings(max_examples=200, deadline=None)
@given(_ops())
def test_same_structure_check(ops: list[Any]) -> None:
    fast, python = on_both_paths(lambda: _checked(ops))
    assert fast == python


def test_a_plain_trace_takes_the_compiled_pass() -> None:
    ops = [HostOp(1, _ROOT, 1, 0), HostOp(1002, "a", 1, 1), HostOp(1005, "b", 1002, 1),
           HostOp(1003, "c", 1005, 1), HostOp(1004, "d", 77, 1), HostOp(7, "e", -2**63, 1)]
    later, dangling = _compiled(ops)
    assert later is True and dangling == [ops[4], ops[5]]  # no op's id is the table's mark
    assert [op.parent for op in ops] == [0, 1, 1002, 1005, 77, -2**63]
    assert ops[2].parent is ops[1].id and ops[3].parent is ops[2].id

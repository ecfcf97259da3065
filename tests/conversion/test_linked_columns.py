"""The column forms of linking (issue 29): ``CpuColumns`` (Kineto CPU events
read for linking) and ``LinkedEvents`` (host op id -> linked times), dense
and sparse, give what the lists and dicts they replace gave."""

from __future__ import annotations

import math

import pytest

from pt2chakra.conversion.linker import (
    DENSE_MIN,
    LinkedEvent,
    LinkedEvents,
    link_by_rf_id,
)
from pt2chakra.errors import InputError
from pt2chakra.pytorch.records import CollectiveInfo, CpuColumns, CpuEvent, HostOp


def _columns(events: list[CpuEvent]) -> CpuColumns:
    cols = CpuColumns()
    for e in events:
        cols.append(e.name, e.cat, e.ts, e.dur, e.pid, e.tid, e.record_function_id, e.collective)
    return cols


EVENTS = [CpuEvent("b", "cpu_op", 30.0, 1.0, 7, 1, record_function_id=5),
          CpuEvent("a", "cpu_op", 10.0, 2.0, 7, 2, record_function_id=3,
                   collective=CollectiveInfo(name="allreduce")),
          CpuEvent("c", "user_annotation", 10.0, 9.0, 7, 1, record_function_id=-1),
          CpuEvent("d", "cpu_op", 20.0, 3.0, 7, 1, record_function_id=5)]


def test_columns_give_back_the_events_sorted_stably_and_joined() -> None:
    cols = _columns(EVENTS)
    assert list(cols) == EVENTS and cols[-1] == EVENTS[-1] and cols[1:3] == EVENTS[1:3]
    by_ts = sorted(EVENTS, key=lambda e: e.ts)  # stable: a before c
    assert list(cols.by_time()) == by_ts
    assert cols.by_time().by_time() == cols.by_time()
    joined = CpuColumns.joined([_columns(EVENTS[:2]), _columns(EVENTS[2:])])
    assert joined == cols and list(joined) == EVENTS


def _op(op_id: int, name: str, rf: int | None) -> HostOp:
    return HostOp(id=op_id, name=name, parent=0, tid=1, rf_id=rf)


@pytest.mark.parametrize("scale", [1, 10 * DENSE_MIN])  # dense ids, then sparse
def test_rf_id_link_of_columns_is_the_link_of_the_events(scale: int) -> None:
    events = [CpuEvent(e.name, e.cat, e.ts, e.dur, e.pid, e.tid,
                       record_function_id=e.record_function_id * scale
                       if e.record_function_id >= 0 else -1) for e in EVENTS]
    ops = [_op(1 * scale, "a", 3 * scale), _op(2 * scale, "d", 5 * scale),
           _op(3 * scale, "x", None), _op(4 * scale, "y", 99 * scale)]
    from_list = link_by_rf_id(ops, events)
    from_columns = link_by_rf_id(ops, _columns(events))
    # a repeated rf_id keeps its last event (d), as the dict did
    assert from_list == from_columns == {1 * scale: LinkedEvent(10.0, 2.0, 2),
                                         2 * scale: LinkedEvent(20.0, 3.0, 1)}
    with pytest.raises(InputError, match="names agree"):
        link_by_rf_id([_op(1, "zz", 3 * scale)], _columns(events))


@pytest.mark.parametrize("ids", [[4, 1, 9], [4, 1, 10 * DENSE_MIN], [-3, 1, 9]])
def test_linked_events_dense_or_sparse_read_the_same(ids: list[int]) -> None:
    linked = LinkedEvents(ids, [5.0, 1.0, 7.5], [1.0, 2.0, 0.5], [1, 2, 3], bound=20)
    assert dict(linked) == {4 if ids[0] == 4 else -3: LinkedEvent(5.0, 1.0, 1),
                            1: LinkedEvent(1.0, 2.0, 2), ids[2]: LinkedEvent(7.5, 0.5, 3)}
    assert list(linked) == sorted(ids) and len(linked) == 3
    assert linked.get(2) is None and 2 not in linked and ids[2] in linked
    assert linked.get(10**12) is None and linked.get(-10) is None
    with pytest.raises(KeyError):
        linked[2]
    assert linked.span() == (1.0, 8.0)
    ts, _dur, _tid, lo, hi = linked.columns()
    assert all(math.isnan(ts[i]) for i in (0, 2, 3) if lo <= i < hi)


@pytest.mark.parametrize("ids", [[3, 1, 3, 0], [3, 1, 3, 10 * DENSE_MIN], [-2, 1, 3, 1]])
def test_ops_by_id_reads_as_the_dict_of_the_ops(ids: list[int]) -> None:
    from pt2chakra.conversion.graph_builder import OpsById

    ops = [_op(i, f"op{k}", None) for k, i in enumerate(ids)]
    table = OpsById(ops)
    expected = {op.id: op for op in ops}  # a repeated id keeps its last op
    assert dict(table) == expected and len(table) == len(expected)
    assert sorted(table) == sorted(expected)
    assert all(table[i] is expected[i] and i in table for i in expected)
    assert table.get(2) is None and 2 not in table and table.get(-5, "x") == "x"
    with pytest.raises(KeyError):
        table[10**12]


@pytest.mark.parametrize("seed", range(6))
def test_inter_thread_edges_from_columns_are_those_of_the_spans(seed: int) -> None:
    """The graph reads the inter-thread edges from the ops and the linked
    columns (no span an op): the same edges as from the spans, with dense
    and sparse ids, some ops not linked, and ties in time."""
    import random

    from builders import cpu_event, host_op, host_trace, kineto_trace

    from pt2chakra.conversion.deps import inter_thread_edges
    from pt2chakra.conversion.graph_builder import (
        OpsById,
        _cpu_spans,
        _inter_thread_edges,
        comm_context,
    )
    from pt2chakra.conversion.linker import link

    rnd = random.Random(seed)
    step = 1 if seed % 2 == 0 else 10 * DENSE_MIN  # dense ids, then sparse
    ops, events = [], []
    for k in range(200):
        op_id = 2 + k * step
        tid = rnd.choice([1, 1, 1, 2, 3])
        ops.append(host_op(op_id, f"op{k % 7}", tid=tid, rf=k))
        if rnd.random() < 0.9:  # a few ops Kineto did not record
            events.append(cpu_event(f"op{k % 7}", rnd.randrange(0, 400), rnd.randrange(0, 30),
                                    tid=100 + tid, rf=k))
    linked = link(host_trace(ops), kineto_trace(events))
    comm = comm_context(linked, OpsById(linked.host.ops))
    expected = inter_thread_edges(_cpu_spans(linked, linked.ops, comm))
    assert expected  # the test can fail
    assert _inter_thread_edges(linked, linked.ops, comm) == expected

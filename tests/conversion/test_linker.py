"""Linking host ops to Kineto events on small hand-made traces."""

import pytest
from builders import cpu_event as ev
from builders import host_op as op
from builders import host_trace as host
from builders import kineto_trace as kineto
from helpers import framed_bytes

from pt2chakra.conversion.graph_builder import build_graph
from pt2chakra.conversion.linker import (
    LinkedEvent,
    best_alignment,
    enclosing_host_ops,
    link,
    link_by_order,
    link_by_rf_id,
    linked_events,
    release_linked_inputs,
)
from pt2chakra.errors import InputError
from pt2chakra.pytorch.records import (
    GpuActivity,
    RuntimeEvent,
    SyncEvent,
)


def test_rf_id_links_by_record_function_id():
    ops = [op(2, "aten::mm", rf=7), op(3, "aten::add", rf=8), op(4, "aten::relu", rf=99)]
    events = [ev("aten::mm", 10, 5, rf=7), ev("aten::add", 20, 5, rf=8)]
    linked = link_by_rf_id(ops, events)
    assert linked == {2: LinkedEvent(10, 5, 100), 3: LinkedEvent(20, 5, 100)}


def test_rf_id_from_another_run_is_refused():
    ops = [op(2, "aten::mm", rf=7), op(3, "aten::add", rf=8)]
    events = [ev("aten::conv2d", 10, 5, rf=7), ev("aten::relu", 20, 5, rf=8)]
    with pytest.raises(InputError, match="different runs"):
        link_by_rf_id(ops, events, "h.json", "k.json")


def test_order_alignment_finds_the_recorded_iteration_despite_gaps():
    it = ["aten::zero_", "aten::mm", "aten::add", "aten::relu", "aten::sum", "Optimizer.step"]
    # Kineto holds three iterations; the first lacks an op.
    names = it[:3] + it[4:] + ["ProfilerStep#1"] + it + ["ProfilerStep#2"] + it
    events = [ev(n, 10 * k, 5) for k, n in enumerate(names)]
    # ET: one iteration with an extra op the profiler did not record.
    et_names = it[:2] + ["aten::view"] + it[2:]
    ops = [op(10 + k, n) for k, n in enumerate(et_names)]
    linked = link_by_order(ops, events)
    assert len(linked) == len(it)
    assert all(linked[o.id].name == o.name for o in ops if o.id in linked)
    assert 12 not in linked  # aten::view has no Kineto counterpart


def test_best_alignment_empty_inputs():
    assert best_alignment([], [1, 2]) == []
    assert best_alignment([1], []) == []
    assert best_alignment([1], [2]) == []


def test_enclosing_host_op_is_innermost_linked():
    outer = ev("aten::linear", 0, 100)
    inner = ev("aten::addmm", 10, 50)
    unlinked = ev("aten::something", 20, 5)
    launch_inner = RuntimeEvent(name="cudaLaunchKernel", ts=22, dur=2, pid=1, tid=100, correlation=1)
    launch_outer = RuntimeEvent(name="cudaLaunchKernel", ts=70, dur=2, pid=1, tid=100, correlation=2)
    stray = RuntimeEvent(name="cudaLaunchKernel", ts=500, dur=2, pid=1, tid=100, correlation=3)
    owners = enclosing_host_ops([launch_inner, launch_outer, stray],
                                linked_events({1: outer, 2: inner}))
    assert owners[id(launch_inner)] == 2
    assert owners[id(launch_outer)] == 1
    assert id(stray) not in owners
    del unlinked


def test_link_attaches_gpu_work_and_drops_other_iterations():
    linked = link(*_gpu_pair(stray_launch=True))
    assert linked.method == "rf_id"
    assert [(g.activity.name, g.host_op_id) for g in linked.gpu_ops] == [
        ("gemm", 2), ("Memcpy DtoH", 3)]
    assert linked.gpu_dropped == {"outside the recorded step": 1}
    assert [(s.kind, s.stream) for s in linked.cpu_syncs] == [("Stream Sync", 7)]


def _gpu_pair(stray_launch: bool = False):
    """Two ops in one recorded step, a kernel and a copy launched by them, a
    stream sync; ``stray_launch``: one more kernel launched at 900 us, after
    the step (another iteration's)."""
    ops = [op(2, "aten::mm", rf=1), op(3, "aten::item", rf=2)]
    cpu = [ev("aten::mm", 100, 20, rf=1), ev("aten::item", 130, 30, rf=2),
           ev("ProfilerStep#1", 90, 100)]
    runtime = [
        RuntimeEvent(name="cudaLaunchKernel", ts=105, dur=3, pid=1, tid=100, correlation=11),
        RuntimeEvent(name="cudaMemcpyAsync", ts=132, dur=3, pid=1, tid=100, correlation=12),
    ]
    gpu = [
        GpuActivity(name="gemm", cat="kernel", ts=110, dur=10, device=0, stream=7, correlation=11),
        GpuActivity(name="Memcpy DtoH", cat="gpu_memcpy", ts=140, dur=2, device=0, stream=7,
                    correlation=12),
    ]
    if stray_launch:
        runtime.append(RuntimeEvent(name="cudaLaunchKernel", ts=900, dur=3, pid=1, tid=100,
                                    correlation=13))
        gpu.append(GpuActivity(name="gemm", cat="kernel", ts=905, dur=10, device=0, stream=7,
                               correlation=13))
    sync = [SyncEvent(kind="Stream Sync", ts=136, dur=10, pid=1, tid=100, stream=7, device=0)]
    return host(ops), kineto(cpu, runtime, gpu, sync)


def test_link_keeps_each_linked_event_times_and_thread():
    linked = link(*_gpu_pair())
    assert linked.cpu_event == {2: LinkedEvent(100, 20, 100), 3: LinkedEvent(130, 30, 100)}


def test_released_inputs_leave_the_graph_as_it_was():
    """What the graph reads survives ``release_linked_inputs``: the same
    nodes, byte for byte, and the report's counts; the events are gone."""
    host_trace, kineto_trace = _gpu_pair()
    whole = build_graph(link(host_trace, kineto_trace))
    linked = link(host_trace, kineto_trace)
    release_linked_inputs(linked)
    assert linked.kineto is not None and linked.kineto.cpu_events == []
    assert linked.kineto.runtime_events == [] and linked.kineto.sync_events == []
    assert len(kineto_trace.cpu_events) == 3  # the caller's trace is left whole
    released = build_graph(linked)
    assert framed_bytes(released) == framed_bytes(whole)
    assert (released.gpu_in, released.gpu_kept, released.linked_ops) == (
        whole.gpu_in, whole.gpu_kept, whole.linked_ops) == (2, 2, 2)


def test_link_refuses_unrelated_traces():
    ops = [op(i, f"op{i}") for i in range(2, 12)]
    cpu = [ev(f"other{i}", i * 10, 5) for i in range(10)]
    with pytest.raises(InputError, match="same run"):
        link(host(ops), kineto(cpu))


def test_host_only_link_is_empty():
    linked = link(host([op(2, "aten::mm")]), None)
    assert linked.method == "none" and linked.gpu_ops == [] and linked.cpu_event == {}

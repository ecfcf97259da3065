"""The graph builder on a small hand-made linked trace that exercises every
dependency kind: two CPU threads, two GPU streams, a cross-stream event wait
and GPU->CPU synchronisation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from builders import cpu_event as cpu
from builders import gpu_kernel as kernel
from builders import host_op as op
from builders import runtime_event as launch
from helpers import GLOO_SAMPLE, SAMPLE, framed_bytes

from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR
from pt2chakra.chakra.records import NodeType
from pt2chakra.conversion.graph_builder import build_graph
from pt2chakra.conversion.linker import LinkedEvent, LinkedEvents, link
from pt2chakra.pytorch.records import (
    CpuEvent,
    GpuActivity,
    HostOp,
    HostTrace,
    KinetoTrace,
    RuntimeEvent,
    SyncEvent,
)
from pt2chakra.rules.cycles import find_cycle

MAIN, BW = 100, 200  # Kineto thread ids


def traces():
    host = HostTrace(path="h.json", schema="1.1.1-chakra.0.0.4", pid=1, start_ts=0, finish_ts=1, ops=[
        op(1, "[pytorch|profiler|execution_trace|thread]", 0, 1, 0),
        op(2, "aten::mm", 1, 1, 1),            # launches k1 on stream 7
        op(3, "aten::add", 1, 1, 2),           # launches k2 on stream 9 after a wait event
        op(4, "autograd::backward", 1, 1, 3),  # main thread blocks while thread 2 runs
        op(5, "aten::mul", 4, 2, 4),           # on the autograd thread
        op(6, "aten::item", 1, 1, 5),          # synchronises with the GPU
        op(7, "aten::relu", 1, 1, 6),
        op(8, "aten::sum", 1, 1, 7),           # after a device synchronize
    ])
    kineto = KinetoTrace(
        path="k.json",
        cpu_events=[
            cpu("aten::mm", 10, 10, MAIN, 1), cpu("aten::add", 25, 10, MAIN, 2),
            cpu("autograd::backward", 40, 40, MAIN, 3), cpu("aten::mul", 50, 10, BW, 4),
            cpu("aten::item", 85, 30, MAIN, 5), cpu("aten::relu", 120, 5, MAIN, 6),
            cpu("aten::sum", 140, 5, MAIN, 7),
        ],
        runtime_events=[
            launch("cudaLaunchKernel", 12, 1), launch("cudaEventRecord", 15, 90),
            launch("cudaStreamWaitEvent", 26, 91), launch("cudaLaunchKernel", 28, 2),
            launch("cudaLaunchKernel", 52, 3, tid=BW), launch("cudaMemcpyAsync", 87, 4),
            launch("cudaEventRecord", 89, 92), launch("cudaEventSynchronize", 90, 93),
            launch("cudaDeviceSynchronize", 130, 94),
        ],
        gpu_activities=[
            kernel("k1", 14, 20, 7, 1), kernel("k2", 35, 5, 9, 2), kernel("k3", 55, 10, 7, 3),
            GpuActivity(name="Memcpy DtoH", cat="gpu_memcpy", ts=90, dur=15, device=0,
                        stream=7, correlation=4),
        ],
        sync_events=[
            SyncEvent(kind="Stream Wait Event", ts=26, dur=1, pid=1, tid=MAIN, stream=9,
                      device=0, wait_on_stream=7, wait_on_event_record_corr_id=90),
            SyncEvent(kind="Event Sync", ts=90, dur=20, pid=1, tid=MAIN, device=0,
                      wait_on_stream=7, wait_on_event_record_corr_id=92),
            SyncEvent(kind="Context Sync", ts=130, dur=5, pid=1, tid=MAIN, device=0),
        ],
    )
    return host, kineto


def graph_nodes():
    host, kineto = traces()
    return list(build_graph(link(host, kineto)).nodes())


def edges(nodes):
    out = set()
    by_id = {n.id: n for n in nodes}
    for n in nodes:
        kinds = dict((a[0], a[2]) for a in n.attrs).get(DEP_KINDS_ATTR, [])
        for src, kind in zip(n.data_deps, kinds):
            out.add((by_id[src].name, n.name, kind))
    return out


def test_every_dependency_kind_is_emitted_and_the_graph_is_acyclic():
    nodes = graph_nodes()
    found = edges(nodes)
    assert ("aten::mm", "aten::add", "thread_order") in found
    assert ("autograd::backward", "aten::mul", "caller") not in found  # other thread: no caller edge
    assert ("aten::mm", "k1", "launch") in found
    assert ("k1", "k3", "stream_order") in found
    assert ("k1", "k2", "stream_wait") in found          # stream 9 waited for k1's event
    assert ("Memcpy DtoH", "aten::relu", "gpu_sync") in found  # event sync inside aten::item
    assert ("k2", "aten::sum", "gpu_sync") in found      # device sync waits for every stream
    # the autograd thread starts after the last op that *finished* elsewhere,
    # not after the still-running backward call; the main thread resumes after it
    assert ("aten::add", "aten::mul", "inter_thread") in found
    assert not any(s == "autograd::backward" and d == "aten::mul" for s, d, _ in found)
    assert ("aten::mul", "aten::item", "inter_thread") in found
    assert {k for _, _, k in found} == {"thread_order", "launch", "stream_order",
                                        "stream_wait", "gpu_sync", "inter_thread"}
    assert find_cycle(nodes) == []


def test_caller_edges_within_a_thread():
    host, kineto = traces()
    host.ops.append(op(9, "aten::addmm", 8, 1, 8))
    kineto.cpu_events.append(cpu("aten::addmm", 141, 2, MAIN, 8))
    found = edges(list(build_graph(link(host, kineto)).nodes()))
    assert ("aten::sum", "aten::addmm", "caller") in found


def test_node_semantics_and_timing():
    nodes = {n.name: n for n in graph_nodes()}
    assert "[pytorch|profiler|execution_trace|thread]" not in nodes
    mm = nodes["aten::mm"]
    attrs = {a[0]: a for a in mm.attrs}
    assert attrs["is_cpu_op"] == ("is_cpu_op", "bool_val", True)
    assert (mm.start_time_micros, mm.duration_micros) == (10, 10)
    backward = nodes["autograd::backward"]
    # thread-2 callee is not subtracted from the caller's exclusive time
    assert backward.duration_micros == 40
    k1 = nodes["k1"]
    k1_attrs = {a[0]: a[2] for a in k1.attrs}
    assert k1_attrs["is_cpu_op"] is False and k1_attrs["stream"] == 7
    assert (k1.start_time_micros, k1.duration_micros) == (14, 20)  # GPU time untouched
    assert k1.type == NodeType.COMP_NODE and k1.ctrl_deps == [2]


def test_link_cli_writes_linked_json(tmp_path):
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "samples" / "gpt_tiny_cpu" / "gpt_tiny_cpu"
    out = tmp_path / "linked.json"
    proc = subprocess.run([sys.executable, "-m", "pt2chakra", "link", "--host-trace",
                           f"{sample}.host_et.json.gz", "--device-trace",
                           f"{sample}.kineto.json.gz", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["method"] == "rf_id" and len(doc["ops"]) > 1000
    assert all(op["dur"] >= 0 for op in doc["ops"])


def test_convert_refuses_a_cycle_and_names_it_unless_asked_to_break_it():
    import pytest

    from pt2chakra.chakra.dep_kinds import EdgeKind
    from pt2chakra.conversion.api import CycleError, _ensure_acyclic

    host, kineto = traces()
    graph = build_graph(link(host, kineto))
    # a bogus inter-thread edge from a later op back to an earlier one
    graph.deps.setdefault(2, []).append((7, EdgeKind.INTER_THREAD))
    with pytest.raises(CycleError) as info:
        _ensure_acyclic(graph, "out.et", fix=False)
    text = str(info.value)
    assert text.startswith("out.et: not written: dependency cycle")
    assert "(aten::relu) -[inter_thread]->" in text and "--break-cycles" in text
    dropped = _ensure_acyclic(graph, "out.et", fix=True)
    assert dropped == ["dropped inter_thread edge 7 -> 2"]
    assert find_cycle(list(graph.nodes())) == []


def test_fast_encoder_matches_generic_for_large_ids_times_and_rf_ids():
    from pt2chakra.chakra.encode import _framed, encode_node

    big = [5, 200, 16383, 16384, 20_000, 2**28 - 1, 2**28, 3 * 10**9]
    ops = [op(1, "[pytorch|profiler|execution_trace|thread]", 0, 1, 0)]
    events = []
    parent = 1
    for k, i in enumerate(big):
        op_id = 10 + i
        ops.append(op(op_id, f"aten::op{k}", parent, 1, i))
        events.append(cpu(f"aten::op{k}", 1.7e15 + 37 * k + 0.4, 20000.6 - k, MAIN, i))
        parent = op_id
    host = HostTrace(path="h.json", schema="1.1.1", pid=1, start_ts=0, finish_ts=1, ops=ops)
    kineto = KinetoTrace(path="k.json", cpu_events=events, runtime_events=[], gpu_activities=[],
                         sync_events=[])
    graph = build_graph(link(host, kineto))
    assert framed_bytes(graph) == _framed([encode_node(n) for n in graph.nodes()])


def test_cpu_fields_follow_the_attribute_table():
    # _cpu_fields gives one value per CPU_ATTRS row, in order, for both paths.
    from pt2chakra.chakra.dep_kinds import EdgeKind
    from pt2chakra.chakra.encode import NODE_FIELDS, encode_node
    from pt2chakra.conversion.graph_builder import (
        CPU_ATTRS,
        CommContext,
        CpuNodeSources,
        _cpu_fields,
        _cpu_node,
        cpu_node_writer,
    )

    host_op = HostOp(id=3, name="aten::mm", parent=1, tid=1, rf_id=-7, op_schema="aten::mm(...)")
    caller = HostOp(id=1, name="caller", parent=0, tid=1)
    events = LinkedEvents([3], [10.4], [5.6], [1])
    assert events == {3: LinkedEvent(10.4, 5.6, 1)}
    deps = [(2, EdgeKind.THREAD_ORDER), (9, EdgeKind.CALLER)]
    sources = CpuNodeSources(events, {3: 1.1}, {3: deps}, {1: caller, 3: host_op},
                             frozenset())
    fields = _cpu_fields(host_op, sources, NodeType.COMP_NODE, True, deps)
    assert len(fields) == len(NODE_FIELDS) + len(CPU_ATTRS)
    assert fields[3] == 1 and fields[5:7] == (10, 4)  # caller kept; start, exclusive duration
    assert _cpu_fields(host_op, sources._replace(dropped=frozenset({1})),
                       NodeType.COMP_NODE, True, deps)[3] is None  # a dropped caller is no ctrl dep
    node = _cpu_node(host_op, sources, CommContext({}, frozenset(), "", 0))
    assert [name for name, _, _ in node.attrs] == [attr.name for attr in CPU_ATTRS]
    assert node.attrs[-1] == (DEP_KINDS_ATTR, "string_list", ["thread_order", "caller"])
    assert cpu_node_writer().encode(fields) == encode_node(node)


# --------------------------------------------------------------------------
# Semantics found in review
# --------------------------------------------------------------------------


def _graph(host_ops, kineto):
    host = HostTrace(path="h.json", schema="1.1.1", pid=1, start_ts=0, finish_ts=1,
                     ops=[op(1, "[pytorch|profiler|execution_trace|thread]", 0, 1, 0)] + host_ops)
    return build_graph(link(host, kineto))


def test_sync_events_on_gpu_rows_reach_the_waiting_cpu_thread():
    # Kineto puts cuda_sync events on the GPU's row (pid = device, tid = stream);
    # the waiting thread is the one that made the runtime call (same correlation).
    kineto = KinetoTrace(
        path="k.json",
        cpu_events=[cpu("aten::item", 10, 30, MAIN, 1), cpu("aten::mul", 50, 5, MAIN, 2)],
        runtime_events=[launch("cudaMemcpyAsync", 12, 1),
                        RuntimeEvent(name="cudaStreamSynchronize", ts=15, dur=20, pid=1, tid=MAIN,
                                     correlation=2)],
        gpu_activities=[GpuActivity(name="Memcpy DtoH", cat="gpu_memcpy", ts=20, dur=10,
                                    device=0, stream=7, correlation=1)],
        sync_events=[SyncEvent(kind="Stream Sync", ts=15, dur=20, pid=0, tid=7, stream=7,
                               device=0, correlation=2)],
    )
    nodes = list(_graph([op(3, "aten::item", 1, 1, 1), op(4, "aten::mul", 1, 1, 2)],
                        kineto).nodes())
    assert ("Memcpy DtoH", "aten::mul", "gpu_sync") in edges(nodes)


def test_exclusive_time_subtracts_callees_reached_through_unrecorded_callers():
    kineto = KinetoTrace(path="k.json", cpu_events=[cpu("outer", 10, 30, MAIN, 1),
                                                    cpu("inner", 15, 20, MAIN, 3)],
                         runtime_events=[], gpu_activities=[], sync_events=[])
    ops = [op(3, "outer", 1, 1, 1), op(4, "mid", 3, 1, 2), op(5, "inner", 4, 1, 3)]
    nodes = {n.name: n for n in _graph(ops, kineto).nodes()}
    assert nodes["outer"].duration_micros == 10  # 30 inclusive - 20 of inner
    assert nodes["inner"].duration_micros == 20
    assert nodes["mid"].duration_micros == 0  # not recorded by Kineto


def test_a_callee_the_et_misfiles_after_its_caller_ended_is_not_subtracted():
    # A gloo worker thread: the host ET files the bucket's second all-reduce
    # under the first (its record stack), but it ran after the first ended
    # (a recorded 8-rank DDP step: 330 ms written as 2.5 ms).
    worker = 300
    kineto = KinetoTrace(path="k.json", cpu_events=[
        cpu("gloo:all_reduce", 10, 330, worker, 1), cpu("gloo:all_reduce", 345, 328, worker, 2),
        cpu("outer", 700, 30, MAIN, 3), cpu("inner", 700, 30, MAIN, 4)],
        runtime_events=[], gpu_activities=[], sync_events=[])
    ops = [op(3, "gloo:all_reduce", 1, 1, 1), op(4, "gloo:all_reduce", 3, 1, 2),
           op(5, "outer", 1, 1, 3), op(6, "inner", 5, 1, 4)]
    nodes = {n.id: n for n in _graph(ops, kineto).nodes()}
    assert nodes[3].duration_micros == 330  # was 2: the later one subtracted
    assert nodes[4].duration_micros == 328
    assert nodes[5].duration_micros == 0  # a callee of the same span still is


def test_launch_without_correlation_is_found_through_its_flow():
    kineto = KinetoTrace(
        path="k.json", cpu_events=[cpu("aten::mm", 10, 20, MAIN, 1)],
        runtime_events=[RuntimeEvent(name="cudaLaunchKernel", ts=12, dur=3, pid=1, tid=MAIN)],
        gpu_activities=[kernel("gemm", 16, 5, 7, 77)], sync_events=[],
        flow_starts={77: (12.0, MAIN)})
    nodes = list(_graph([op(3, "aten::mm", 1, 1, 1)], kineto).nodes())
    assert ("aten::mm", "gemm", "launch") in edges(nodes)


def test_order_linking_keeps_every_thread_in_the_same_iteration():
    from pt2chakra.conversion.linker import link_by_order

    iteration = ["fwd_a", "fwd_b", "fwd_c", "opt_step"]
    backward = ["bwd_x", "bwd_y", "bwd_z"]
    events = []
    for it in range(3):
        base = 1000 * it
        names = iteration + (["special"] if it == 2 else [])
        events += [CpuEvent(name=n, cat="cpu_op", ts=base + 10 * k, dur=5, pid=1, tid=MAIN)
                   for k, n in enumerate(names)]
        events += [CpuEvent(name=n, cat="cpu_op", ts=base + 100 + 10 * k, dur=5, pid=1, tid=BW)
                   for k, n in enumerate(backward)]
    ops = [op(10 + k, n, 1, 1, None) for k, n in enumerate(iteration + ["special"])]
    ops += [op(30 + k, n, 1, 2, None) for k, n in enumerate(backward)]
    linked = link_by_order(ops, events)
    assert all(2000 <= ev.ts < 3000 for ev in linked.values())  # iteration 2 on both threads
    assert len(linked) == len(ops)


def test_dropped_ids_are_the_host_ops_left_out():
    from pt2chakra.conversion.graph_builder import _dropped_ids
    from pt2chakra.names import OBSERVER_PREFIX

    root = HostOp(id=1, name=OBSERVER_PREFIX + "process]", parent=0, tid=0)
    thread = HostOp(id=2, name=OBSERVER_PREFIX + "thread]", parent=1, tid=1)
    mm = HostOp(id=3, name="aten::mm", parent=2, tid=1)
    assert _dropped_ids([root, thread, mm], [mm]) == {1, 2}
    assert _dropped_ids([root, thread, mm], [thread, mm]) == {1}  # not the containers: by id
    assert _dropped_ids([mm], [mm]) == frozenset()


@pytest.mark.parametrize("kineto", [True, False], ids=["pair", "host-only"])
@pytest.mark.parametrize("sample", ["gloo", "gpt"])
def test_framed_nodes_frame_every_node_in_order(tmp_path, monkeypatch, sample, kineto):
    # The writer's batches hold every node's encode_node framed, in order, special ops
    # (the gloo sample's transfers and process-group op) and GPU nodes among
    # them; small batches so that runs split. The file is what they frame.
    from pt2chakra.chakra import encode
    from pt2chakra.chakra.encode import FramedNodes, encode_metadata, encode_node, node_count
    from pt2chakra.conversion.api import convert_run

    host = f"{GLOO_SAMPLE}.rank0" if sample == "gloo" else str(SAMPLE)
    monkeypatch.setattr(encode, "_FRAME_BATCH", 5)
    out = tmp_path / "out.et"
    graph = convert_run(f"{host}.host_et.json.gz", f"{host}.kineto.json.gz" if kineto else None,
                        out).graph
    items = list(graph.framed_nodes())
    messages = [encode_node(n) for n in graph.nodes()]
    framed = [item for item in items if isinstance(item, FramedNodes)]
    assert len(framed) > 2 and all(0 < item.n_nodes <= 5 for item in framed)
    assert (sample == "gloo") == bool(graph._special_ids())
    assert sum(map(node_count, items)) == len(messages)
    assert framed_bytes(graph) == encode._framed(messages)
    head = encode_metadata(graph.metadata)
    assert out.read_bytes() == encode._framed([head, *messages])

"""Kineto loader: real traces, hand-made event shapes, bad input."""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders import trace_event

from pt2chakra.errors import InputError
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.json_input import TRUNCATED
from pt2chakra.pytorch.kineto_trace import load_kineto_trace

# --------------------------------------------------------------------------
# Real traces. Counts were taken independently with ``json`` (ph == "X"
# events per category; ``s`` flows) and are re-derived by stdlib_counts.
# --------------------------------------------------------------------------

REAL = {
    # file: (cpu_op, user_annotation, runtime, kernel, memcpy, memset, flow starts, rank, world)
    "dlrm_8gpu/rank0.kineto.json.gz": (1633, 40, 525, 245, 16, 0, 261, 0, 8),
    "dlrm_8gpu/rank3.kineto.json.gz": (1633, 40, 541, 315, 16, 6, 273, 3, 8),
    "dlrm_8gpu/rank7.kineto.json.gz": (1633, 40, 504, 246, 16, 0, 262, 7, 8),
    "hta_simple_add/kineto.json.gz": (28, 8, 15, 4, 0, 0, 9, 0, 0),
    "linear_1gpu/kineto.json.gz": (36998, 80, 14515, 8716, 0, 1640, 10356, -1, 0),
    "resnet_kineto_only/kineto.json.gz": (39416, 90, 25928, 9628, 123, 362, 10323, -1, 0),
}
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def stdlib_counts(path: Path) -> tuple[int, ...]:
    with gzip.open(path) as f:
        doc = json.load(f)
    cats = Counter(e.get("cat") for e in doc["traceEvents"] if e.get("ph") == "X")
    flows = sum(1 for e in doc["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "ac2g")
    info = doc.get("distributedInfo", {})
    return (
        cats["cpu_op"], cats["user_annotation"], cats["cuda_runtime"] + cats["cuda_driver"],
        *(cats[c] for c in GPU_CATS), flows, info.get("rank", -1), info.get("world_size", 0),
    )  # fmt: skip


def counts(trace: Any) -> tuple[int, ...]:
    cpu = Counter(e.cat for e in trace.cpu_events)
    gpu = Counter(e.cat for e in trace.gpu_activities)
    return (
        cpu["cpu_op"], cpu["user_annotation"], len(trace.runtime_events),
        *(gpu[c] for c in GPU_CATS), len(trace.flow_starts), trace.rank, trace.world_size,
    )  # fmt: skip


@pytest.mark.parametrize("rel", sorted(REAL))
def test_real_trace_counts(traces: Path, rel: str) -> None:
    ignored: Counter[str] = Counter()
    trace = load_kineto_trace(traces / rel, ignored)
    assert counts(trace) == REAL[rel] == stdlib_counts(traces / rel)
    assert trace.sync_events == []  # none of these was recorded with sync events
    for group in (trace.cpu_events, trace.runtime_events, trace.gpu_activities):
        ts = [e.ts for e in group]
        assert ts == sorted(ts)
    assert ignored["Trace"] == 1 and ignored["ph=M"] > 0


def test_all_dlrm_ranks(traces: Path) -> None:
    for rank in range(8):
        trace = load_kineto_trace(traces / f"dlrm_8gpu/rank{rank}.kineto.json.gz")
        assert (trace.rank, trace.world_size, trace.distributed_info["backend"]) == (rank, 8, "nccl")


def test_real_field_values(traces: Path) -> None:
    trace = load_kineto_trace(traces / "dlrm_8gpu/rank0.kineto.json.gz")
    launch = next(e for e in trace.runtime_events if e.correlation == 40875)
    assert (launch.name, launch.pid, launch.tid, launch.dur) == ("cudaLaunchKernel", 59811, 59811, 12)
    kernel = next(g for g in trace.gpu_activities if g.correlation == 40875)
    assert (kernel.device, kernel.stream, kernel.external_id, kernel.cat) == (0, 7, 40875, "kernel")
    assert trace.flow_starts[40875] == (launch.ts, 59811)
    memcpy = next(g for g in trace.gpu_activities if g.cat == "gpu_memcpy")
    assert memcpy.bytes == 832
    op = next(e for e in trace.cpu_events if e.external_id == 1025)
    assert op.name == "autograd::engine::evaluate_function: SumBackward1"
    assert (op.fwd_thread_id, op.seq_num, op.record_function_id, op.pid, op.tid) == (1, 519, -1, 59811, 59976)


def test_real_rf_id_matches_external_id(traces: Path) -> None:
    """ET rf_id == Kineto External id (same name) for 36 of 37 ops."""
    for host, kineto, want in [
        ("hta_simple_add/host_et.json.gz", "hta_simple_add/kineto.json.gz", (36, 37)),
        ("dlrm_8gpu/rank0.host_et.json.gz", "dlrm_8gpu/rank0.kineto.json.gz", (79, 1674)),
    ]:
        names: dict[int, set[str]] = {}
        for e in load_kineto_trace(traces / kineto).cpu_events:
            names.setdefault(e.external_id, set()).add(e.name)
        ops = [op for op in load_host_trace(traces / host).ops if op.parent != 0]
        matched = sum(op.rf_id is not None and op.name in names.get(op.rf_id, ()) for op in ops)
        assert (matched, len(ops)) == want


# --------------------------------------------------------------------------
# Hand-made traces
# --------------------------------------------------------------------------


ev = partial(trace_event, pid=10, tid=11)


def write(tmp_path: Path, doc: Any, name: str = "kineto.json") -> Path:
    path = tmp_path / name
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


def load(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> Any:
    return load_kineto_trace(write(tmp_path, {"schemaVersion": 1, "traceEvents": events, **top}))


def test_sync_events_all_four_kinds(tmp_path: Path) -> None:
    events = [
        ev("cuda_sync", "Stream Wait Event", 40, pid=0, tid=7, cuda_sync_kind="Stream Wait Event", stream=7,
           device=0, correlation=5, wait_on_stream=20, wait_on_cuda_event_record_corr_id=3, wait_on_cuda_event_id=2),
        ev("cuda_sync", "Context Sync", 10, pid=0, tid=-1, cuda_sync_kind="Context Sync", device=0, correlation=1),
        ev("cuda_sync", "Stream Sync", 20, pid=0, tid=7, cuda_sync_kind="Stream Sync", stream=7, device=0, correlation=2),
        ev("cuda_sync", "Event Sync", 30, pid=0, tid=7, cuda_sync_kind="Event Sync", device=0, correlation=4,
           wait_on_cuda_event_record_corr_id="3", wait_on_cuda_event_id=2),
    ]  # fmt: skip
    s = load(tmp_path, events).sync_events
    assert [e.kind for e in s] == ["Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event"]
    assert [(e.stream, e.device, e.correlation) for e in s] == [(-1, 0, 1), (7, 0, 2), (-1, 0, 4), (7, 0, 5)]
    assert (s[2].wait_on_event_record_corr_id, s[2].wait_on_event_id, s[2].wait_on_stream) == (3, 2, -1)
    assert (s[3].wait_on_stream, s[3].wait_on_event_record_corr_id, s[3].wait_on_event_id) == (20, 3, 2)


def test_sync_kind_falls_back_to_name(tmp_path: Path) -> None:
    s = load(tmp_path, [ev("cuda_sync", "Stream Sync", 1, stream=7)]).sync_events
    assert s[0].kind == "Stream Sync"


NUMERIC_COLL = {
    "Collective name": "all_to_allv", "dtype": "Float", "In msg nelems": 8, "Out msg nelems": 8,
    "In split size": [2, 2, 2, 2], "Out split size": [1, 3, 2, 2], "Group size": 4,
    "Process Group Name": "1", "Process Group Description": "sub", "Process Group Ranks": [0, 1, 2, 3],
    "Rank": 1, "Seq": 7,
}  # fmt: skip
STRING_COLL = {
    "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": "1024", "Out msg nelems": "1024",
    "In split size": "[]", "Out split size": "[]", "Group size": "2", "Process Group Name": 0,
    "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]", "Rank": "0", "Seq": "12",
}  # fmt: skip


def test_collective_args_numeric_and_string(tmp_path: Path) -> None:
    events = [
        ev("cpu_op", "record_param_comms", 1, **NUMERIC_COLL, **{"External id": 3, "Record function id": 9}),
        ev("kernel", "ncclKernel_AllReduce", 5, pid=0, tid=20, device=0, stream=20, correlation=50, **STRING_COLL),
        ev("kernel", "ncclDevKernel_SendRecv", 6, pid=0, tid=21, device=0, stream=21, correlation=51,
           **{"Collective name": "send", "Src Rank": 0, "Dst Rank": "1", "Group size": 2}),
    ]  # fmt: skip
    t = load(tmp_path, events)
    c = t.cpu_events[0].collective
    assert c is not None and (t.cpu_events[0].external_id, t.cpu_events[0].record_function_id) == (3, 9)
    assert (c.name, c.dtype, c.in_msg_nelems, c.in_split_size, c.out_split_size) == ("all_to_allv", "Float", 8, [2, 2, 2, 2], [1, 3, 2, 2])
    assert (c.group_size, c.pg_name, c.pg_desc, c.pg_ranks, c.rank, c.seq) == (4, "1", "sub", [0, 1, 2, 3], 1, 7)
    k = t.gpu_activities[0].collective
    assert k is not None
    assert (k.name, k.dtype, k.in_msg_nelems, k.out_msg_nelems, k.in_split_size) == ("allreduce", "BFloat16", 1024, 1024, [])
    assert (k.group_size, k.pg_name, k.pg_ranks, k.rank, k.seq, k.src_rank) == (2, "0", [0, 1], 0, 12, -1)
    p2p = t.gpu_activities[1].collective
    assert p2p is not None and (p2p.src_rank, p2p.dst_rank, p2p.seq) == (0, 1, -1)
    assert t.runtime_events == [] and t.cpu_events[0].collective is not None


def test_truncated_list_arg_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ranks = "[" + ", ".join(str(r) for r in range(30)) + ", ...]"
    t = load(tmp_path, [ev("cpu_op", "c10d::allreduce_", 1, **{**STRING_COLL, "Process Group Ranks": ranks})])
    assert t.cpu_events[0].collective.pg_ranks == list(range(30))
    assert "Process Group Ranks" in caplog.text


def test_no_collective_without_name(tmp_path: Path) -> None:
    t = load(tmp_path, [ev("kernel", "k", 1, device=0, stream=7, correlation=1)])
    assert t.gpu_activities[0].collective is None


def test_memset_memcpy_and_driver_launch(tmp_path: Path) -> None:
    events = [
        ev("cuda_driver", "cuLaunchKernelEx", 1, correlation=1, **{"External id": 8}),
        ev("cuda_runtime", "cudaMemsetAsync", 2, correlation=2),
        ev("cuda_runtime", "cudaMemcpyAsync", 3, correlation=3),
        ev("kernel", "triton_poi_fused_add_0", 4, pid=0, tid=7, device=0, stream=7, correlation=1),
        ev("gpu_memset", "Memset (Device)", 5, pid=1, tid=9, device=1, stream=9, correlation=2, bytes=4096),
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 6, pid=0, tid=7, device=0, stream=7, correlation=3, bytes=64),
        {"ph": "s", "id": 1, "pid": 10, "tid": 11, "ts": 1, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 4, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
    t = load(tmp_path, events)
    assert [(r.name, r.correlation, r.external_id) for r in t.runtime_events] == [
        ("cuLaunchKernelEx", 1, 8), ("cudaMemsetAsync", 2, -1), ("cudaMemcpyAsync", 3, -1),
    ]  # fmt: skip
    assert [(g.cat, g.device, g.stream, g.correlation, g.bytes) for g in t.gpu_activities] == [
        ("kernel", 0, 7, 1, 0), ("gpu_memset", 1, 9, 2, 4096), ("gpu_memcpy", 0, 7, 3, 64),
    ]  # fmt: skip
    assert t.flow_starts == {1: (1.0, 11)}


def test_hip_names_and_categories(tmp_path: Path) -> None:
    events = [
        ev("cuda_runtime", "hipLaunchKernel", 1, correlation=1),
        ev("hip_runtime", "hipExtLaunchKernel", 2, correlation=2),
        ev("Kernel", "Cijk_Ailk_Bljk_SB_MT64x64x16", 3, pid=0, tid="stream 7", device=0, correlation=1),
        ev("Runtime", "hipMemcpyAsync", 4, correlation=3),
        ev("Operator", "aten::mm", 0.5, dur=10),
    ]
    t = load(tmp_path, events)
    assert [r.name for r in t.runtime_events] == ["hipLaunchKernel", "hipExtLaunchKernel", "hipMemcpyAsync"]
    assert [(g.cat, g.stream) for g in t.gpu_activities] == [("kernel", 7)]  # stream from "stream 7"
    assert [(c.cat, c.name) for c in t.cpu_events] == [("cpu_op", "aten::mm")]


def test_string_pids_and_ignored_events(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0, "dur": 9},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": "Spans", "tid": 0, "args": {"name": "Spans"}},
        {"name": "Iteration Start", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 0},
        ev("python_function", "nn.Module: Linear", 1, **{"Python id": 3}),
        ev("gpu_user_annotation", "ProfilerStep#1", 1, pid=0, tid=7, device=0, stream=7),
        ev("cpu_op", "aten::add", 2, pid="123", tid="456", **{"External id": 1}),
        ev("cpu_op", "aten::begin_only", 3, ph="B"),
        ev("user_annotation", "ProfilerStep#1", 0.5, dur=100.25),
    ]
    ignored: Counter[str] = Counter()
    t = load_kineto_trace(write(tmp_path, {"traceEvents": events}), ignored)
    assert [(c.name, c.cat, c.pid, c.tid) for c in t.cpu_events] == [
        ("ProfilerStep#1", "user_annotation", 10, 11), ("aten::add", "cpu_op", 123, 456),
    ]  # fmt: skip
    assert t.cpu_events[0].dur == 100.25
    assert ignored == Counter({"Trace": 1, "ph=M": 1, "ph=i": 1, "gpu_user_annotation": 1, "cpu_op:ph=B": 1})
    # Python frames are kept apart: only Kineto-only conversion nests them with the ops.
    assert [(p.name, p.cat) for p in t.python_events] == [("nn.Module: Linear", "python_function")]
    assert (t.rank, t.world_size, t.distributed_info) == (-1, 0, {})


def test_sorted_by_ts_and_float_ts(tmp_path: Path) -> None:
    events = [ev("cpu_op", f"op{i}", ts) for i, ts in enumerate([5.5, 1.25, 3.0, 1.0])]
    assert [e.name for e in load(tmp_path, events).cpu_events] == ["op3", "op1", "op2", "op0"]


def test_distributed_info(tmp_path: Path) -> None:
    info = {"backend": "nccl", "rank": 3, "world_size": 4, "pg_count": 1, "pg_config": [{"pg_name": "0", "pg_size": 4, "ranks": [0, 1, 2, 3]}]}
    t = load(tmp_path, [], distributedInfo=info)
    assert (t.rank, t.world_size, t.distributed_info) == (3, 4, info)


def test_array_format(tmp_path: Path) -> None:
    t = load_kineto_trace(write(tmp_path, [ev("cpu_op", "a", 1)]))
    assert len(t.cpu_events) == 1


def test_nan_tokens_are_tolerated(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [ev("kernel", "k", 1, device=0, stream=7, correlation=1, occupancy=float("nan"))]})
    assert "NaN" in text
    assert len(load_kineto_trace(write(tmp_path, text.encode())).gpu_activities) == 1


# --------------------------------------------------------------------------
# Malformed input
# --------------------------------------------------------------------------


def raises_one_line(path: Path, *fragments: str) -> None:
    with pytest.raises(InputError) as info:
        load_kineto_trace(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    for fragment in fragments:
        assert fragment in text


def test_truncated(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [ev("cpu_op", "a", 1)] * 5})
    raises_one_line(write(tmp_path, text[:-20].encode()), TRUNCATED)


def test_garbage_and_gzip_garbage(tmp_path: Path) -> None:
    raises_one_line(write(tmp_path, b"<html>oops</html>"), "not valid JSON")
    raises_one_line(write(tmp_path, gzip.compress(b"\x00\x01\x02"), "g.json.gz"), "not valid JSON")


def test_missing_trace_events(tmp_path: Path) -> None:
    raises_one_line(write(tmp_path, {"schemaVersion": 1}), "`traceEvents`")


def test_wrong_field_type(tmp_path: Path) -> None:
    events = [ev("cpu_op", "a", 1), ev("kernel", "k", "late")]
    raises_one_line(write(tmp_path, {"traceEvents": events}), "$.traceEvents[1].ts")


def test_logging_is_quiet_on_clean_input(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    load(tmp_path, [ev("cpu_op", "a", 1, **STRING_COLL)])
    assert caplog.records == []

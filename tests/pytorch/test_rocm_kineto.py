"""ROCm Kineto traces: AMD's tracer writes numeric args as strings ("128",
"0x0") and launches through HIP calls; they load, link and convert like
their CUDA twins, and a string that is no number is one line naming it."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders import trace_event
from helpers import assert_one_line_failure, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import CollectiveType, attr_dict
from pt2chakra.chakra.wire import I64_MAX, I64_MIN
from pt2chakra.conversion.api import convert
from pt2chakra.conversion.collective import collective_from_kernel
from pt2chakra.conversion.kineto_only import kineto_event_counts, link_kineto_only
from pt2chakra.conversion.linker import is_launch
from pt2chakra.errors import InputError
from pt2chakra.names import LAUNCH_PREFIXES, SYNC_CALLS, is_nccl_kernel
from pt2chakra.pytorch.kineto_decode import numeric_text
from pt2chakra.pytorch.kineto_stream import load_streamed
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.rules.conventions import COMM_NODE_TYPES, is_gpu

PID, TID = 4242, 4243  # the host thread; GPU rows use pid = device, tid = stream


_x = partial(trace_event, pid=PID, tid=TID)


def _op(name: str, ts: float, dur: float, ext: str, **args: Any) -> dict[str, Any]:
    return _x("cpu_op", name, ts, dur, **{"External id": ext, "Record function id": ext}, **args)


def _call(name: str, ts: float, corr: str, ext: str, **args: Any) -> dict[str, Any]:
    return _x("cuda_runtime", name, ts, 2.0, correlation=corr, **{"External id": ext}, **args)


def _gpu(cat: str, name: str, ts: float, corr: str, ext: str, **args: Any) -> dict[str, Any]:
    return _x(cat, name, ts, 5.0, pid=0, tid=0, device="0", stream="0x0", correlation=corr,
              **{"External id": ext}, **args)


# As AMD's tracer writes them: numbers in strings, streams in hex, copies with
# their "kind" and "size", HIP calls (hipExtModuleLaunchKernel: hipBLASLt's).
ROCM_EVENTS = [
    _x("user_annotation", "ProfilerStep#1", 0, 100),
    _op("aten::mm", 10, 10, "5"),
    _call("hipExtModuleLaunchKernel", 11, "101", "5"),
    _gpu("kernel", "Cijk_Ailk_Bljk_BBS_BH_MT128x128x32", 20, "101", "5"),
    _op("aten::copy_", 30, 10, "6"),
    _call("hipMemcpyWithStream", 31, "102", "6", bytes="128", kind="1", size="128",
          stream="0x1f"),
    _gpu("gpu_memcpy", "Memcpy DtoH (Device -> Host)", 32, "102", "6", bytes="128"),
    _op("aten::zero_", 40, 10, "7"),
    _call("hipMemsetAsync", 41, "103", "7"),
    _gpu("gpu_memset", "Memset (Device)", 42, "103", "7", bytes="0x400"),
    _op("nccl:all_reduce", 50, 20, "8"),
    _call("hipLaunchKernel", 51, "104", "8"),
    _gpu("kernel", "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", 55, "104", "8"),
    _call("hipDeviceSynchronize", 80, "105", "0"),
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": "101", "pid": PID, "tid": TID, "ts": 11},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": "101", "pid": 0, "tid": 0, "ts": 20,
     "bp": "e"},
]


def _torch_layout(events: list[dict[str, Any]]) -> bytes:
    blocks = ",\n".join("  {\n    " + json.dumps(e)[1:-1] + "\n  }" for e in events)
    return f'{{\n  "schemaVersion": 1,\n  "traceEvents": [\n{blocks}\n  ]\n}}'.encode()


@pytest.fixture
def rocm_trace(tmp_path: Path) -> Path:
    path = tmp_path / "rocm.kineto.json"
    path.write_bytes(_torch_layout(ROCM_EVENTS))
    return path


def test_string_and_hex_args_load_as_numbers(rocm_trace: Path) -> None:
    trace = load_kineto_trace(rocm_trace)
    assert [(g.cat, g.device, g.stream, g.correlation, g.external_id, g.bytes)
            for g in trace.gpu_activities] == [
        ("kernel", 0, 0, 101, 5, 0), ("gpu_memcpy", 0, 0, 102, 6, 128),
        ("gpu_memset", 0, 0, 103, 7, 1024), ("kernel", 0, 0, 104, 8, 0)]
    copy = next(r for r in trace.runtime_events if r.name == "hipMemcpyWithStream")
    assert (copy.correlation, copy.external_id, copy.stream) == (102, 6, 0x1F)
    assert [(c.external_id, c.record_function_id) for c in trace.cpu_events[1:]] == [
        (5, 5), (6, 6), (7, 7), (8, 8)]
    assert trace.flow_starts == {101: (11.0, TID)}
    assert load_streamed(rocm_trace) == trace


def test_hip_launches_link_to_their_ops_and_convert(rocm_trace: Path, tmp_path: Path) -> None:
    ignored: Counter[str] = Counter()
    trace = load_kineto_trace(rocm_trace, ignored)
    assert sum(kineto_event_counts(trace, ignored).values()) == len(ROCM_EVENTS)
    linked = link_kineto_only(trace).linked
    ops = {op.id: op.name for op in linked.ops}
    assert {g.activity.name[:12]: ops.get(g.host_op_id) for g in linked.gpu_ops} == {
        "Cijk_Ailk_Bl": "aten::mm", "Memcpy DtoH ": "aten::copy_",
        "Memset (Devi": "aten::zero_", "ncclDevKerne": "nccl:all_reduce"}
    assert [s.kind for s in linked.cpu_syncs] == ["Context Sync"]  # hipDeviceSynchronize

    out = tmp_path / "rocm.et"
    report = convert(None, rocm_trace, out)
    assert report.accounted()
    _meta, nodes = read_et(str(out))
    by_id = {n.id: n for n in nodes}
    launched_by = {n.name[:12]: sorted(by_id[d].name for d in n.ctrl_deps)
                   for n in by_id.values() if is_gpu(attr_dict(n.attrs))}
    assert launched_by["Cijk_Ailk_Bl"] == ["aten::mm"]
    assert launched_by["Memcpy DtoH "] == ["aten::copy_"]
    # RCCL's generic kernel names no collective: the launching op does.
    comm = [n for n in by_id.values() if n.type in COMM_NODE_TYPES and is_gpu(attr_dict(n.attrs))]
    assert [attr_dict(n.attrs)["comm_type"] for n in comm] == [int(CollectiveType.ALL_REDUCE)]


def test_cli_converts_a_rocm_trace(rocm_trace: Path, tmp_path: Path) -> None:
    proc = run_cli("convert", "--device-trace", rocm_trace, "-o", tmp_path / "x.et")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x.et").stat().st_size > 0


@pytest.mark.parametrize(("key", "value"), [
    ("bytes", "128 bytes"), ("stream", "0xZZ"), ("correlation", "12.5"), ("device", ""),
    ("External id", "99999999999999999999"), ("stream", "-0x8000000000000001"),
])
def test_a_string_that_is_no_int64_is_one_line(tmp_path: Path, key: str, value: str) -> None:
    events = [*ROCM_EVENTS]
    events[6] = _gpu("gpu_memcpy", "Memcpy DtoH", 32, "102", "6") | {"args": {key: value}}
    path = tmp_path / "bad.json"
    path.write_bytes(_torch_layout(events))
    with pytest.raises(InputError) as info:
        load_kineto_trace(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    assert f"`$.traceEvents[6].args.{key}`" in text and repr(value) in text
    proc = run_cli("convert", "--device-trace", path, "-o", tmp_path / "x.et")
    assert_one_line_failure(proc, f"$.traceEvents[6].args.{key}")


def _spellings(value: int) -> st.SearchStrategy[Any]:
    """``value`` as an int and as each text AMD's tracer (or a hand) writes."""
    forms: list[Any] = [value, str(value), hex(value), hex(value).upper().replace("X", "x"),
                        f"{value}.0", f" {value} "]
    if value >= 0:
        forms.append(f"{value:020d}")  # leading zeros ("007")
    return st.sampled_from(forms)


_INT64 = st.integers(I64_MIN, I64_MAX)


@given(value=_INT64.flatmap(lambda v: st.tuples(st.just(v), _spellings(v))))
def test_numeric_text_reads_every_spelling(value: tuple[int, Any]) -> None:
    number, spelled = value
    assert (numeric_text(spelled) if isinstance(spelled, str) else spelled) == number


@given(values=st.lists(_INT64.flatmap(lambda v: st.tuples(st.just(v), _spellings(v))),
                       min_size=6, max_size=6))
@settings(max_examples=60, deadline=None)
def test_an_int_as_int_decimal_or_hex_text_loads_the_same(tmp_path_factory: pytest.TempPathFactory,
                                                          values: list[tuple[int, Any]]) -> None:
    keys = ["correlation", "stream", "device", "bytes", "External id", "Record function id"]
    as_ints = {k: n for k, (n, _) in zip(keys, values)}
    as_text = {k: s for k, (_, s) in zip(keys, values)}
    loaded = []
    for name, args in (("ints", as_ints), ("text", as_text)):
        path = tmp_path_factory.mktemp(name) / "k.json"
        events = [_x("kernel", "k", 1, pid=0, tid=0, **args),
                  _x("cuda_runtime", "hipLaunchKernel", 0, **args),
                  _x("cpu_op", "aten::mm", 0, 3, **args)]
        path.write_bytes(_torch_layout(events))
        trace = load_kineto_trace(path)
        loaded.append((trace.gpu_activities, trace.runtime_events, trace.cpu_events))
    assert loaded[0] == loaded[1]


HIP_LAUNCHES = ["hipLaunchKernel", "hipExtLaunchKernel", "hipExtModuleLaunchKernel",
                "hipModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipLaunchByPtr",
                "hipLaunchCooperativeKernel", "hipLaunchCooperativeKernelMultiDevice",
                "hipModuleLaunchCooperativeKernel", "hipExtLaunchMultiKernelMultiDevice",
                "hipGraphLaunch", "hipMemcpy", "hipMemcpyAsync", "hipMemcpyWithStream",
                "hipMemcpyDtoDAsync", "hipMemsetAsync", "hipMemsetD32Async",
                "hipDrvLaunchKernelEx"]


@pytest.mark.parametrize("name", HIP_LAUNCHES)
def test_hip_launch_names_launch(name: str) -> None:
    assert is_launch(name)


@pytest.mark.parametrize("name", ["hipStreamSynchronize", "hipEventRecord", "hipGetDevice",
                                  "hipMalloc", "hipStreamWaitEvent", "hipFree"])
def test_other_hip_calls_do_not(name: str) -> None:
    assert not is_launch(name)


def test_every_cuda_rule_has_its_hip_twin() -> None:
    for prefix in LAUNCH_PREFIXES:
        if prefix.startswith("cuda"):
            assert is_launch("hip" + prefix[len("cuda"):]), prefix
    for name, kind in SYNC_CALLS.items():
        if name.startswith("cuda"):
            assert SYNC_CALLS["hip" + name[len("cuda"):]] == kind


@pytest.mark.parametrize(("kernel", "collective"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_bf16(ncclDevComm*, channelMasks, ncclWork*)",
     CollectiveType.ALL_REDUCE),
    ("ncclDevKernel_AllGather_RING_LL", CollectiveType.ALL_GATHER),
    ("ncclSymkDevKernel_ReduceScatter_RailA2A_LsaLD_sum_bf16", CollectiveType.REDUCE_SCATTER),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", None),  # the op decides
    ("ncclDevKernel_Generic", None),
    ("ncclDevKernelDebug_Generic_1", None),
])
def test_rccl_kernels_are_communication(kernel: str, collective: CollectiveType | None) -> None:
    assert is_nccl_kernel(kernel)
    assert collective_from_kernel(kernel) == collective

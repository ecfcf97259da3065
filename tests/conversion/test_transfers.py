"""The one rule of which record is a collective's transfer
(``pytorch.transfers``), one synthetic trace per pattern a backend leaves:
the host op alone; the host op and its ``user_annotation`` on a worker
thread (gloo, CPU tensors); the same with device copies on the backend's own
stream under a ``gpu_user_annotation`` (gloo, CUDA tensors), filed by the ET
under whatever op the caller had open; and an NCCL kernel on its own stream.
Then the real pair (``h200/gloo2``) when ``../shared`` is there."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from builders import (
    OBSERVER_ROOT,
    OBSERVER_THREAD,
    cpu_attrs,
    gpu,
    host_attr,
    host_node,
    node,
    trace_event,
    write_json,
    write_nodes,
)
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra import convert
from pt2chakra.astra.job import BINARY_ENV, check_job, write_job
from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, CollectiveType, NodeType, attr_dict
from pt2chakra.pytorch.records import CollectiveInfo, HostOp
from pt2chakra.pytorch.transfers import is_device_transfer, own_transfers
from pt2chakra.rules.checks import check_files, collective_mismatch
from pt2chakra.rules.conventions import COMM_CHANNEL

MAIN, WORKER = 1, 2  # Kineto thread ids: the caller's and gloo's worker thread
COMPUTE_STREAM, GLOO_STREAM, NCCL_STREAM = 7, 84, 20
NUMEL = 1024  # float32 elements all-reduced: 4096 B
GROUPS = {"backend": "gloo", "rank": 0, "world_size": 2,
          "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]}


def _tensor(tensor_id: int, device: str = "cuda:0") -> dict[str, Any]:
    return {"values": [[tensor_id, tensor_id, 0, NUMEL, 4, device]], "shapes": [[NUMEL]],
            "types": ["Tensor(float)"]}


def _host(*ops: dict[str, Any]) -> dict[str, Any]:
    nodes = [host_node(1, OBSERVER_ROOT, 1, 0), host_node(2, OBSERVER_THREAD, 1, 1), *ops]
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "2026-01-01 00:00:00",
            "start_ts": 0, "finish_ts": 1, "nodes": nodes}


def _op(ts: float, dur: float, name: str, rf: int, tid: int = MAIN,
        cat: str = "cpu_op") -> dict[str, Any]:
    return trace_event(cat, name, ts, dur, pid=1, tid=tid, **{"External id": rf,
                                                              "Record function id": rf})


def _launch(ts: float, corr: int, tid: int = MAIN, name: str = "cudaLaunchKernel",
            ) -> dict[str, Any]:
    return trace_event("cuda_runtime", name, ts, 2, pid=1, tid=tid, correlation=corr)


def _gpu(ts: float, dur: float, name: str, stream: int, corr: int,
         cat: str = "kernel") -> dict[str, Any]:
    return trace_event(cat, name, ts, dur, pid=0, tid=stream, device=0, stream=stream,
                       correlation=corr)


def _convert(tmp_path: Path, host: dict[str, Any] | None, events: list[dict[str, Any]],
             ) -> tuple[Path, dict[str, ChakraNode]]:
    hpath = write_json(tmp_path / "h.json", host) if host is not None else None
    kpath = write_json(tmp_path / "k.json", {"schemaVersion": 1, "traceEvents": events,
                                              "distributedInfo": GROUPS}) if events else None
    out = tmp_path / "out.et"
    convert(hpath, kpath, out, progress=False)
    return out, {n.name: n for n in read_et(out)[1]}


def _gloo_host(device: str) -> dict[str, Any]:
    """c10d::allreduce_ and gloo:all_reduce as torch 2.11's observer files
    them: the gloo op ran on the worker thread, so its recorded caller is
    the calling thread's root and a main-thread op (aten::add) is filed
    under it; the worker's own copy (aten::copy_) is a root of its own."""
    return _host(
        host_node(3, "aten::mm", 2, 10),
        host_node(4, "c10d::allreduce_", 2, 11, inputs=_tensor(40, device)),
        host_node(5, "gloo:all_reduce", 2, 12, inputs=_tensor(40, device)),
        host_node(6, "aten::add", 5, 13),
        host_node(7, "aten::copy_", 2, 14))


def _gloo_events(cuda: bool) -> list[dict[str, Any]]:
    events = [_op(0, 10, "aten::mm", 10), _launch(2, 100), _gpu(12, 5, "gemm", COMPUTE_STREAM, 100),
              _op(20, 10, "c10d::allreduce_", 11),
              _op(30, 100, "gloo:all_reduce", 12, tid=WORKER, cat="user_annotation"),
              _op(40, 10, "aten::add", 13), _launch(42, 102), _gpu(45, 3, "add", COMPUTE_STREAM, 102),
              _op(120, 8, "aten::copy_", 14, tid=WORKER)]
    if cuda:  # gloo's staging copies of CUDA tensors, on its own stream
        events += [_launch(22, 101, name="cudaMemcpyAsync"),
                   _gpu(24, 5, "Memcpy DtoH (Device -> Pinned)", GLOO_STREAM, 101, "gpu_memcpy"),
                   _launch(122, 103, WORKER, "cudaMemcpyAsync"),
                   _gpu(131, 6, "Memcpy HtoD (Pinned -> Device)", GLOO_STREAM, 103, "gpu_memcpy"),
                   trace_event("gpu_user_annotation", "gloo:all_reduce", 131, 6, pid=0,
                               tid=GLOO_STREAM, **{"External id": 12})]
    return events


def _assert_gloo_transfer(node: ChakraNode, duration: int | None) -> None:
    """``duration`` None: a host ET alone (no times, no process groups)."""
    a = attr_dict(node.attrs)
    assert node.type == NodeType.COMM_COLL_NODE
    assert (a["comm_type"], a["comm_size"]) == (CollectiveType.ALL_REDUCE, 4 * NUMEL)
    assert a.get("pg_name") == (None if duration is None else "0")
    if duration is not None:  # its time is the worker thread's, on that lane
        assert (node.duration_micros, a[COMM_CHANNEL]) == (duration, WORKER)


def test_host_op_alone_is_the_transfer(tmp_path: Path) -> None:
    out, nodes = _convert(tmp_path, _gloo_host("cpu"), [])
    _assert_gloo_transfer(nodes["gloo:all_reduce"], None)
    assert nodes["c10d::allreduce_"].type == NodeType.COMP_NODE
    assert not check_files([out]).warnings


@pytest.mark.parametrize("cuda", [False, True], ids=["cpu-tensors", "cuda-tensors"])
def test_worker_thread_annotation_is_the_transfer_and_its_time(tmp_path: Path, cuda: bool) -> None:
    out, nodes = _convert(tmp_path, _gloo_host("cuda:0" if cuda else "cpu"), _gloo_events(cuda))
    _assert_gloo_transfer(nodes["gloo:all_reduce"], 100)
    assert sum(n.type == NodeType.COMM_COLL_NODE for n in nodes.values()) == 1
    if cuda:  # the staging copies stay device copies (on gloo's stream), not collectives
        copies = [n for n in nodes.values() if n.name.startswith("Memcpy")]
        assert [attr_dict(n.attrs)["stream"] for n in copies] == [GLOO_STREAM, GLOO_STREAM]
        assert all(n.type == NodeType.COMP_NODE for n in copies)
    assert not [p for p in check_files([out]).warnings if p.check == "collective-as-compute"]


def test_kineto_alone_finds_the_worker_thread_transfer(tmp_path: Path) -> None:
    _out, nodes = _convert(tmp_path, None, _gloo_events(cuda=True))
    node = nodes["gloo:all_reduce"]
    assert node.type == NodeType.COMM_COLL_NODE
    assert attr_dict(node.attrs)[COMM_CHANNEL] == WORKER


def test_kineto_alone_keeps_the_callees_of_a_backend_op_that_launched_a_kernel(
        tmp_path: Path) -> None:
    """The same rule as with a host ET: the NCCL kernel is the transfer, so its
    backend op only enqueued it and what runs under that op stays its own op
    (a transfer's callees would be folded into its time)."""
    kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    events = [_op(0, 20, "c10d::allreduce_", 11), _op(4, 10, "nccl:all_reduce", 13),
              _op(5, 2, "aten::empty", 14), _launch(9, 100),
              _gpu(20, 50, kernel, NCCL_STREAM, 100)]
    _out, nodes = _convert(tmp_path, None, events)
    assert nodes[kernel].type == NodeType.COMM_COLL_NODE
    assert nodes["nccl:all_reduce"].type == NodeType.COMP_NODE
    assert "aten::empty" in nodes


def test_nccl_kernel_on_its_own_stream_is_the_transfer(tmp_path: Path) -> None:
    host = _host(host_node(3, "c10d::allreduce_", 2, 11, inputs=_tensor(40)),
                 host_node(4, "record_param_comms", 3, 12, inputs=_tensor(40), attrs=[
                     host_attr("collective_name", "allreduce", "string"),
                     host_attr("dtype", "Float", "string"), host_attr("in_msg_nelems", NUMEL),
                     host_attr("out_msg_nelems", NUMEL), host_attr("pg_name", "0", "string")]),
                 host_node(5, "nccl:all_reduce", 4, 13, inputs=_tensor(40)))
    events = [_op(0, 20, "c10d::allreduce_", 11), _op(2, 15, "record_param_comms", 12),
              _op(4, 10, "nccl:all_reduce", 13), _launch(6, 100),
              _gpu(20, 50, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", NCCL_STREAM, 100)]
    out, nodes = _convert(tmp_path, host, events)
    kernel = nodes["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    a = attr_dict(kernel.attrs)
    assert kernel.type == NodeType.COMM_COLL_NODE
    assert (a["comm_size"], a["pg_name"], a["stream"]) == (4 * NUMEL, "0", NCCL_STREAM)
    assert nodes["nccl:all_reduce"].type == NodeType.COMP_NODE  # it only enqueued the kernel
    assert not check_files([out]).warnings


def test_rule_device_transfers_and_ownership() -> None:
    ops = {i: HostOp(id=i, name=n, parent=p, tid=1) for i, n, p in
           [(2, "c10d::allreduce_", 1), (3, "nccl:all_reduce", 2), (4, "aten::copy_", 3),
            (5, "gloo:all_reduce", 1), (6, "aten::copy_", 5)]}
    assert is_device_transfer("ncclKernel_AllGather_RING_LL_Sum_float", None)
    assert is_device_transfer("anything", CollectiveInfo(name="allreduce"))
    assert not is_device_transfer("Memcpy HtoD (Pinned -> Device)", None)
    # a kernel launched under nccl:all_reduce owns it; gloo's copy does not count
    assert own_transfers([3, 5], [4], ops, host_only=False) == {5}
    assert own_transfers([3, 5], [], ops, host_only=False) == {3, 5}
    assert own_transfers([3, 5], [4], ops, host_only=True) == {3, 5}


def _host_comm(nid: int, name: str, parent: int) -> ChakraNode:
    return node(nid, name=name, ctrl=[parent] if parent else [], attrs=cpu_attrs())


@pytest.mark.parametrize("kinds", [["launch"], ["data"]], ids=["launch-edges", "unknown-kinds"])
def test_validate_applies_the_rule_to_a_written_file(tmp_path: Path, kinds: list[str]) -> None:
    """A file as main 9227b81 wrote gloo2's rank 1: an NCCL-style transfer
    (its kernel launched under the backend op's callee) and a backend op
    typed as compute that no communication node belongs to, beside it.
    Before, validate said nothing once the file had any communication node.
    With another tool's edges (no recorded kinds) it cannot tell, and keeps
    quiet as before."""
    path = write_nodes(tmp_path / "r1.et", [
        _host_comm(1, "c10d::allreduce_", 0), _host_comm(2, "nccl:all_reduce", 1),
        _host_comm(3, "cudaLaunchKernel", 2),
        gpu(4, 10, 5, deps=[3], kinds=kinds, stream=NCCL_STREAM, comm=CollectiveType.ALL_REDUCE),
        _host_comm(5, "c10d::allreduce_", 0), _host_comm(6, "gloo:all_reduce", 5)])
    warned = [p for p in check_files([path]).warnings if p.check == "collective-as-compute"]
    if kinds == ["data"]:
        assert warned == []
        return
    assert [(p.node, p.message) for p in warned] == [
        (6, "'gloo:all_reduce' is a collective but typed COMP_NODE and no communication node "
            "of the file was launched under it")]


def _rank_pair(tmp_path: Path, second_has_it: bool) -> None:
    """rank0/rank1 pairs of the gloo trace; rank 1 without the all-reduce
    when not ``second_has_it`` (its host op and annotation left out)."""
    for rank in (0, 1):
        host, events = _gloo_host("cpu"), _gloo_events(cuda=False)
        if rank == 1 and not second_has_it:
            host["nodes"] = [{**n, "ctrl_deps": 2} if n["ctrl_deps"] == 5 else n
                             for n in host["nodes"] if n["name"] != "gloo:all_reduce"]
            events = [e for e in events if e["name"] != "gloo:all_reduce"]
        write_json(tmp_path / f"h{rank}.json", host)
        write_json(tmp_path / f"k{rank}.json", {"schemaVersion": 1, "traceEvents": events,
                                                 "distributedInfo": {**GROUPS, "rank": rank}})


def _convert_ranks(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("convert", "--ranks", "0-1", "--host-trace", tmp_path / "h{rank}.json",
                   "--device-trace", tmp_path / "k{rank}.json", "-o", tmp_path / "o.{rank}.et",
                   "--jobs", "1", "-q", *extra)


def test_ranks_that_agree_convert(tmp_path: Path) -> None:
    _rank_pair(tmp_path, second_has_it=True)
    proc = _convert_ranks(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert collective_mismatch([str(tmp_path / "o.0.et"), str(tmp_path / "o.1.et")]) is None


def test_ranks_that_disagree_are_refused_in_one_line(tmp_path: Path) -> None:
    _rank_pair(tmp_path, second_has_it=False)
    proc = _convert_ranks(tmp_path)
    assert proc.returncode == 2
    assert_one_line_failure(proc, "process group '0'", "collective #0", "ALL_REDUCE 4096 B",
                            "absent on rank 1", "--allow-mismatch")
    assert not list(tmp_path.glob("o.*.et"))  # no job that would hang
    kept = _convert_ranks(tmp_path, "--allow-mismatch")
    assert kept.returncode == 0 and "warning: ranks disagree" in kept.stderr
    assert len(list(tmp_path.glob("o.*.et"))) == 2
    # validate agrees: rank 1 is in group '0' and never reaches its collective
    report = check_files(sorted(tmp_path.glob("o.*.et")))
    assert [p.message for p in report.errors if p.check == "alignment"] == [
        f"rank 1 has none of the 1 collectives of process group '0' that rank 0 "
        f"({tmp_path / 'o.0.et'}) runs"]


def test_allow_mismatch_goes_with_ranks(tmp_path: Path) -> None:
    proc = run_cli("convert", "--host-trace", "h.json", "-o", tmp_path / "o.et", "--allow-mismatch")
    assert_one_line_failure(proc, "--allow-mismatch", "only with --ranks")


GLOO2 = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "h200" / "gloo2"
GLOO2_SIZES = [26232832, 28366848, 30445568]  # DDP's three buckets, in bytes
SIMULATE_TOLERANCE_PCT = 1.0  # the bound on each rank's replayed step


@pytest.mark.slow
@pytest.mark.skipif(not GLOO2.is_dir(), reason="../shared/traces/h200/gloo2 not present")
def test_real_gloo_cuda_pair_has_every_all_reduce(tmp_path: Path) -> None:
    outs = []
    for rank in (0, 1):
        out = tmp_path / f"job.{rank}.et"
        convert(GLOO2 / f"rank{rank}.host_et.json.gz", GLOO2 / f"rank{rank}.kineto.json.gz", out,
                progress=False)
        comm = [n for n in read_et(out)[1] if n.type == NodeType.COMM_COLL_NODE]
        assert sorted(attr_dict(n.attrs)["comm_size"] for n in comm) == GLOO2_SIZES
        assert {attr_dict(n.attrs)["comm_type"] for n in comm} == {CollectiveType.ALL_REDUCE}
        outs.append(out)
    report = check_files(outs)
    assert report.sound and not [p for p in report.warnings if p.check == "collective-as-compute"]
    proc = run_cli("simulate", *outs, "--bandwidth-scale", "0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    sim = json.loads(proc.stdout)
    assert all(abs(r["error_pct"]) <= SIMULATE_TOLERANCE_PCT for r in sim["ranks"])
    # the all-reduces are communication now: a slower network moves the step
    assert sim["what_if"][0]["predicted_step_us"] > sim["predicted_step_us"] * 1.1


# ASTRA-sim finishes the gloo job near the consumer model (the bound).
ASTRA_VS_MODEL_PCT = 3.0


@pytest.mark.slow
@pytest.mark.skipif(not GLOO2.is_dir(), reason="../shared/traces/h200/gloo2 not present")
def test_real_gloo_cuda_pair_runs_in_astra_sim(tmp_path: Path) -> None:
    binary = os.environ.get(BINARY_ENV, "")
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip(f"{BINARY_ENV} does not name an ASTRA-sim binary")
    outs = []
    for rank in (0, 1):
        outs.append(str(tmp_path / f"job.{rank}.et"))
        convert(GLOO2 / f"rank{rank}.host_et.json.gz", GLOO2 / f"rank{rank}.kineto.json.gz",
                outs[-1], progress=False)
    write_job(outs, tmp_path / "astra" / "job")
    check = check_job(tmp_path / "astra" / "job", binary)
    assert check.binary is not None and sorted(check.binary.finished) == [0, 1]
    assert check.model_vs_binary_pct is not None
    assert check.model_vs_binary_pct <= ASTRA_VS_MODEL_PCT


@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=30),
       st.sets(st.integers(min_value=1, max_value=31)), st.sets(st.integers(min_value=1, max_value=31)))
def test_a_backend_op_is_a_transfer_iff_no_device_transfer_is_below_it(
        parents: list[int], backend: set[int], launchers: set[int]) -> None:
    # op i + 1 is called by an earlier op (or none: 0), so callers form a tree
    ops = {i + 1: HostOp(id=i + 1, name="op", parent=min(p, i), tid=1)
           for i, p in enumerate(parents)}
    backend_ops = sorted(b for b in backend if b in ops)

    def ancestors(i: int) -> set[int]:
        seen = set()
        while i in ops:
            seen.add(i)
            i = ops[i].parent
        return seen

    owned = set().union(*(ancestors(launcher) for launcher in launchers)) if launchers else set()
    assert own_transfers(backend_ops, launchers, ops, host_only=False) == \
        {b for b in backend_ops if b not in owned}
    assert own_transfers(backend_ops, launchers, ops, host_only=True) == set(backend_ops)


def test_a_refused_mismatch_leaves_the_previous_outputs(tmp_path: Path) -> None:
    """The check runs before the outputs are final: refused, the folder is
    as it was (the previous run's files back), not emptied."""
    _rank_pair(tmp_path, second_has_it=False)
    (tmp_path / "o.0.et").write_bytes(b"previous run")
    proc = _convert_ranks(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert (tmp_path / "o.0.et").read_bytes() == b"previous run"
    assert not (tmp_path / "o.1.et").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

"""Collectives of every backend (nccl, gloo, ucc, mpi, c10d functional):
which op is the transfer, its size with all-gather / reduce-scatter /
all-to-all semantics, its process group and point-to-point peers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.records import CollectiveType, NodeType, attr_dict
from pt2chakra.conversion import collective as coll
from pt2chakra.conversion.graph_builder import build_graph
from pt2chakra.conversion.linker import link
from pt2chakra.names import COMM_BACKEND_PREFIXES
from pt2chakra.pytorch.records import (
    CpuEvent,
    GpuActivity,
    HostOp,
    HostTrace,
    IOValues,
    KinetoTrace,
    ProcessGroup,
    RuntimeEvent,
)
from pt2chakra.rules.conventions import COMM_CHANNEL

THREAD = "[pytorch|profiler|execution_trace|thread]"


def _tensor(numel: int, itemsize: int = 4) -> list[object]:
    return [1, 2, 0, numel, itemsize, "cpu"]


NO_IO = IOValues()


def _op(op_id: int, name: str, parent: int, inputs: IOValues = NO_IO, rf: int | None = None,
        outputs: IOValues = NO_IO) -> HostOp:
    return HostOp(id=op_id, name=name, parent=parent, tid=1, rf_id=rf, inputs=inputs,
                  outputs=outputs)


@pytest.mark.parametrize("prefix", COMM_BACKEND_PREFIXES)
@pytest.mark.parametrize("name, ctype", [("all_reduce", CollectiveType.ALL_REDUCE),
                                         ("allgather", CollectiveType.ALL_GATHER),
                                         ("reduce_scatter", CollectiveType.REDUCE_SCATTER),
                                         ("alltoall_base", CollectiveType.ALL_TO_ALL),
                                         ("broadcast", CollectiveType.BROADCAST)])
def test_every_backend_prefix_names_its_collective(prefix: str, name: str, ctype) -> None:
    assert coll.collective_from_name(prefix + name) == ctype


@pytest.mark.parametrize("name, ctype", [
    ("_c10d_functional::all_reduce", CollectiveType.ALL_REDUCE),
    ("_c10d_functional::all_gather_into_tensor", CollectiveType.ALL_GATHER),
    ("_c10d_functional::reduce_scatter_tensor", CollectiveType.REDUCE_SCATTER),
    ("_c10d_functional::all_to_all_single", CollectiveType.ALL_TO_ALL),
    ("c10d_functional::broadcast", CollectiveType.BROADCAST),
    ("_c10d_functional::wait_tensor", None)])
def test_functional_collectives(name: str, ctype) -> None:
    assert coll.collective_from_name(name) == ctype


def test_all_gather_known_by_its_input_moves_every_shard() -> None:
    op = _op(2, "gloo:all_gather", 1, IOValues.of([_tensor(10)], [[10]], ["Tensor(float)"]))
    assert coll.comm_size_from_host_op(CollectiveType.ALL_GATHER, op, group_size=4) == 160
    # with its output recorded, the output is the payload
    op.outputs = IOValues.of([[_tensor(40)]], [[[40]]], ["GenericList[Tensor(float)]"])
    assert coll.comm_size_from_host_op(CollectiveType.ALL_GATHER, op, group_size=4) == 160


def test_reduce_scatter_and_all_to_all_are_sized_by_their_whole_input() -> None:
    inputs = IOValues.of([_tensor(64, 2)], [[64]], ["Tensor(c10::Half)"])
    for ctype in (CollectiveType.REDUCE_SCATTER, CollectiveType.ALL_TO_ALL,
                  CollectiveType.ALL_REDUCE):
        assert coll.comm_size_from_host_op(ctype, _op(2, "ucc:x", 1, inputs), 8) == 128


def test_size_from_shapes_and_dtype_when_no_values() -> None:
    # Kineto's Input Dims / Input type, as a Kineto-only conversion keeps them
    op = _op(2, "mpi:all_reduce", 1, IOValues.of(None, [[8, 16], []], ["float", "Scalar"]))
    assert coll.comm_size_from_host_op(CollectiveType.ALL_REDUCE, op) == 8 * 16 * 4
    op = _op(2, "gloo:all_gather", 1, IOValues.of(None, [[3]], ["double"]))
    assert coll.comm_size_from_host_op(CollectiveType.ALL_GATHER, op, group_size=2) == 48


@given(st.lists(st.integers(0, 64), min_size=1, max_size=4), st.sampled_from(sorted(coll.DTYPE_BYTES)))
def test_shape_bytes_is_numel_times_itemsize(shape: list[int], dtype: str) -> None:
    numel = 1
    for d in shape:
        numel *= d
    assert coll.shapes_bytes([shape], [dtype]) == numel * coll.DTYPE_BYTES[dtype]


def _host(ops: list[HostOp], groups: list[ProcessGroup] | None = None) -> HostTrace:
    return HostTrace(path="h.json", schema="1.1.1", pid=1, start_ts=0, finish_ts=1,
                     ops=[HostOp(1, THREAD, 0, 1)] + ops, process_groups=groups or [])


def _cpu(name: str, ts: float, dur: float, rf: int, tid: int = 10) -> CpuEvent:
    return CpuEvent(name, "cpu_op", ts, dur, 1, tid, rf, rf)


def test_cpu_backend_op_is_the_transfer_but_a_launching_one_is_not() -> None:
    tensor = IOValues.of([_tensor(256)], [[256]], ["Tensor(float)"])
    host = _host([_op(2, "c10d::allreduce_", 1, rf=2), _op(3, "gloo:all_reduce", 2, tensor, rf=3),
                  _op(4, "c10d::allreduce_", 1, rf=4), _op(5, "nccl:all_reduce", 4, tensor, rf=5)],
                 [ProcessGroup("0", ranks=[0, 1], group_size=2)])
    kineto = KinetoTrace(
        "k.json",
        [_cpu("c10d::allreduce_", 0, 10, 2), _cpu("gloo:all_reduce", 2, 30, 3, tid=11),
         _cpu("c10d::allreduce_", 40, 10, 4), _cpu("nccl:all_reduce", 41, 8, 5)],
        [RuntimeEvent("cudaLaunchKernel", 42, 2, 1, 10, correlation=7)],
        [GpuActivity("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel", 45, 20, 0, 7, 7)], [])
    graph = build_graph(link(host, kineto))
    nodes = {n.name + str(n.id): n for n in graph.nodes()}
    gloo, nccl = nodes["gloo:all_reduce3"], nodes["nccl:all_reduce5"]
    assert gloo.type == NodeType.COMM_COLL_NODE and nccl.type == NodeType.COMP_NODE
    a = attr_dict(gloo.attrs)
    assert (a["comm_size"], a["pg_name"], a[COMM_CHANNEL], a["is_cpu_op"]) == (1024, "0", 11, False)
    kernel = next(n for n in graph.nodes() if n.name.startswith("ncclKernel"))
    assert kernel.type == NodeType.COMM_COLL_NODE and attr_dict(kernel.attrs)["pg_name"] == "0"


def test_host_only_p2p_becomes_send_and_recv_with_peers() -> None:
    tensor = IOValues.of([_tensor(4)], [[4]], ["Tensor(float)"])
    send_args = IOValues.of([[_tensor(4)], "<Object>", 1, 0], [[[4]], [], [], []],
                            ["GenericList[Tensor(float)]", "Object", "Int", "Int"])
    recv_args = IOValues.of([[_tensor(4)], "<Object>", 3, 0], [[[4]], [], [], []],
                            ["GenericList[Tensor(float)]", "Object", "Int", "Int"])
    host = _host([_op(2, "c10d::send", 1, send_args), _op(3, "gloo:send", 2, tensor),
                  _op(4, "c10d::recv_", 1, recv_args), _op(5, "gloo:recv", 4, tensor)])
    nodes = {n.name: n for n in build_graph(link(host, None)).nodes()}
    send, recv = nodes["gloo:send"], nodes["gloo:recv"]
    assert send.type == NodeType.COMM_SEND_NODE and attr_dict(send.attrs)["comm_dst"] == 1
    assert recv.type == NodeType.COMM_RECV_NODE and attr_dict(recv.attrs)["comm_src"] == 3
    assert attr_dict(send.attrs)["comm_size"] == 16


def test_peer_from_kineto_concrete_inputs_text() -> None:
    op = _op(2, "c10d::send", 1, IOValues.of(["", "", "5", "0"]))
    assert coll.p2p_peer(op) == 5
    assert coll.p2p_peer(_op(2, "c10d::send", 1, IOValues.of(["", ""]))) == -1
    assert coll.p2p_peer(_op(2, "aten::mm", 1)) == -1


def test_process_group_from_kineto_when_the_et_has_none() -> None:
    tensor = IOValues.of([_tensor(8)], [[8]], ["Tensor(float)"])
    host = _host([_op(2, "gloo:broadcast", 1, tensor, rf=2)])
    kineto = KinetoTrace("k.json", [_cpu("gloo:broadcast", 0, 10, 2)], [], [], [],
                         world_size=2, distributed_info={"pg_config": [
                             {"pg_name": "7", "pg_desc": "default_pg", "pg_size": 2,
                              "ranks": [0, 1], "backend_config": "cpu:gloo"}]})
    node = next(n for n in build_graph(link(host, kineto)).nodes() if n.name == "gloo:broadcast")
    assert node.type == NodeType.COMM_COLL_NODE
    assert attr_dict(node.attrs)["pg_name"] == "7" and attr_dict(node.attrs)["comm_size"] == 32

"""Collective type and size rules."""

import pytest

from pt2chakra.chakra.records import CollectiveType as C
from pt2chakra.conversion import collective as coll
from pt2chakra.pytorch.records import CollectiveInfo, HostOp, IOValues


@pytest.mark.parametrize("name,expected", [
    ("nccl:all_reduce", C.ALL_REDUCE), ("allreduce", C.ALL_REDUCE),
    ("allreduce_coalesced", C.ALL_REDUCE), ("reduce", C.REDUCE),
    ("_allgather_base", C.ALL_GATHER), ("all_gather_into_tensor", C.ALL_GATHER),
    ("gather", C.GATHER), ("scatter", C.SCATTER), ("broadcast", C.BROADCAST),
    ("all_to_allv", C.ALL_TO_ALL), ("c10d::alltoall_base_", C.ALL_TO_ALL),
    ("reduce_scatter_tensor", C.REDUCE_SCATTER), ("_reduce_scatter_base", C.REDUCE_SCATTER),
    ("barrier", C.BARRIER), ("nccl:send", coll.SEND), ("recv", coll.RECV),
    ("record_param_comms", None), ("aten::add", None), ("", None),
])
def test_collective_from_name(name, expected):
    assert coll.collective_from_name(name) == expected


@pytest.mark.parametrize("kernel,expected", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", C.ALL_REDUCE),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", C.ALL_GATHER),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(x)", C.REDUCE_SCATTER),
    ("ncclKernel_Reduce_RING_LL_Sum_float(x)", C.REDUCE),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(x)", C.BROADCAST),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)", "sendrecv"),
    ("volta_sgemm_64x64_tn", None),
])
def test_collective_from_kernel(kernel, expected):
    assert coll.collective_from_kernel(kernel) == expected


def test_comm_size_all_gather_counts_output_not_input():
    info = CollectiveInfo(name="allgather", dtype="Float", in_msg_nelems=100,
                          out_msg_nelems=800, group_size=8)
    assert coll.comm_size_from_info(C.ALL_GATHER, info) == 3200
    # reduce-scatter: the input holds the whole payload
    info = CollectiveInfo(name="reduce_scatter", dtype="c10::BFloat16", in_msg_nelems=800,
                          out_msg_nelems=100, group_size=8)
    assert coll.comm_size_from_info(C.REDUCE_SCATTER, info) == 1600


def test_comm_size_from_host_tensors_and_attrs():
    t = [5, 6, 0, 6144, 4, "cuda:0"]
    op = HostOp(id=1, name="nccl:all_to_all", parent=0, tid=1,
                inputs=IOValues.of(values=[t], shapes=[[6144]], types=["Tensor(float)"]))
    assert coll.comm_size_from_host_op(C.ALL_TO_ALL, op) == 6144 * 4
    listed = HostOp(id=2, name="record_param_comms", parent=0, tid=1,
                    inputs=IOValues.of(values=[[t, t]], shapes=[[[6144], [6144]]],
                                    types=["GenericList[Tensor(float),Tensor(float)]"]))
    assert coll.comm_size_from_host_op(C.ALL_REDUCE, listed) == 2 * 6144 * 4
    with_attrs = HostOp(id=3, name="record_param_comms", parent=0, tid=1,
                        attrs={"in_msg_nelems": 10, "out_msg_nelems": 80, "dtype": "Half",
                               "pg_size": 8})
    assert coll.comm_size_from_host_op(C.ALL_GATHER, with_attrs) == 160


def test_dtype_size():
    assert coll.dtype_size("Tensor(c10::BFloat16)") == 2
    assert coll.dtype_size("long int") == 8
    assert coll.dtype_size("mystery") == 0

"""Names with a meaning in PyTorch's traces: the observer's own nodes, the
process-group node, the prefixes that mark communication ops, and the GPU
runtime calls (CUDA and ROCm's HIP) that launch GPU work or wait for it.

Every consumer (loaders, linker, graph builder, ``validate``, the exports,
``collect``) imports these; none spells them again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# The ET node holding the process groups' JSON (a METADATA node in Chakra).
PROCESS_GROUP_INIT = "## process_group:init ##"

# Nodes the ExecutionTraceObserver writes about itself: the process root and
# one per thread (``[pytorch|profiler|execution_trace|thread]``), no work.
OBSERVER_PREFIX = "[pytorch|profiler|"

# A communication backend's own op (``nccl:all_reduce``, ``gloo:broadcast``...):
# in a host-only trace it is the only record of the transfer, so it becomes
# the communication node.
COMM_BACKEND_PREFIXES = ("nccl:", "gloo:", "mpi:", "rccl:", "ucc:")

# The c10d dispatcher's ops (``c10d::allreduce_``) name a collective too, but
# they wrap the backend op: a trace holds both, so only the backend op is the
# transfer. They still tell which collective a launch belongs to.
C10D_PREFIX = "c10d::"
# Functional collectives (torch.compile, DTensor): ``_c10d_functional::all_reduce``
# launches the backend's work like a c10d op does.
C10D_FUNCTIONAL_PREFIXES = ("_c10d_functional::", "c10d_functional::")
COLLECTIVE_NAME_PREFIXES = (*COMM_BACKEND_PREFIXES, C10D_PREFIX, *C10D_FUNCTIONAL_PREFIXES)


def functional_group(name: str, values: Sequence[Any], types: Sequence[Any]) -> str | None:
    """A functional collective's process group: its ``group_name``, the last
    String input (``_c10d_functional::all_reduce(input, reduce_op,
    group_name)``); None for any other op, or one without it
    (``wait_tensor``). The one name a gloo collective's trace gives its group."""
    if not name.startswith(C10D_FUNCTIONAL_PREFIXES):
        return None
    for value, kind in reversed(list(zip(values, types))):
        if kind == "String" and isinstance(value, str):
            return value
    return None

# The c10d point-to-point ops and the input holding their peer (the group
# rank sent to / received from): ``c10d::send(tensors, pg, dst, tag)``.
C10D_P2P_PEER_INPUT = {"c10d::send": 2, "c10d::recv_": 2}

# The op PyTorch records around every collective, carrying its metadata
# (``collective_name``, sizes, ``pg_name``; positional inputs in schema 1.0.x).
RECORD_PARAM_COMMS = "record_param_comms"


def is_observer_node(name: str) -> bool:
    return name.startswith(OBSERVER_PREFIX)


def is_backend_comm_op(name: str) -> bool:
    """A backend's own communication op (the transfer itself)."""
    return name.startswith(COMM_BACKEND_PREFIXES)


def strip_collective_prefix(name: str) -> str:
    """``nccl:all_reduce`` -> ``all_reduce``; names without a prefix unchanged.
    Case-insensitive, as published traces differ in case."""
    lowered = name.lower()
    for prefix in COLLECTIVE_NAME_PREFIXES:
        if lowered.startswith(prefix):
            return name[len(prefix):]
    return name


def comm_backend(name: str) -> str:
    """The backend a collective's name says ran it (``gloo`` for
    ``gloo:all_reduce``), or "" when the name does not say."""
    for prefix in COMM_BACKEND_PREFIXES:
        if name.startswith(prefix):
            return prefix[:-1]
    return ""


# Runtime / driver calls that launch GPU work (Kineto ``cuda_runtime`` /
# ``cuda_driver`` events; ROCm's are HIP twins of the CUDA ones), matched by
# prefix so variants count too: ``cudaLaunchKernelExC``, ``cuLaunchKernelEx``,
# ``hipMemcpyAsync``, ``hipMemcpyWithStream``, ``hipMemsetAsync``,
# ``hipExtLaunchMultiKernelMultiDevice``, ``hipModuleLaunchCooperativeKernel``.
# HIP's list is the kernel-launch calls ROCm's tracers correlate with a
# dispatch, plus its copies and fills.
LAUNCH_PREFIXES = (
    "cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel",
    "cudaMemcpy", "cudaMemset", "cudaGraphLaunch", "cuMemcpy", "cuMemset",
    "cuLaunchCooperativeKernel", "cuGraphLaunch",
    "hipLaunchKernel", "hipExtLaunch", "hipModuleLaunch", "hipExtModuleLaunchKernel",
    "hipHccModuleLaunchKernel", "hipLaunchByPtr", "hipDrvLaunchKernel", "hipMemcpy",
    "hipMemset", "hipGraphLaunch", "hipLaunchCooperativeKernel",
)

# Runtime calls that block the CPU until GPU work completes, used when the
# trace has no ``cuda_sync`` events (recorded without enable_cuda_sync_events).
SYNC_CALLS = {
    "cudaDeviceSynchronize": "Context Sync",
    "hipDeviceSynchronize": "Context Sync",
    "cudaStreamSynchronize": "Stream Sync",
    "hipStreamSynchronize": "Stream Sync",
    "cudaEventSynchronize": "Event Sync",
    "hipEventSynchronize": "Event Sync",
}


# NCCL/RCCL kernel names look like ncclKernel_AllReduce_RING_LL_Sum_float,
# ncclDevKernel_AllGather_RING_LL or (NCCL >= 2.27) ncclSymkDevKernel_AllReduce_...;
# the collective is the word after the prefix. RCCL (and NCCL >= 2.19) also
# run every collective in one ncclDevKernel_Generic[_N] (ncclDevKernelDebug_...
# in RCCL's COLLTRACE builds): that word names none, so the launching op does.
NCCL_KERNEL = re.compile(r"^(?:void\s+)?(?:nccl|rccl)(?:Symk)?(?:Dev)?Kernel(?:Debug)?_([A-Za-z]+)")


def nccl_kernel_word(kernel_name: str) -> str | None:
    """The word after an NCCL/RCCL kernel's prefix (``AllReduce``), or None
    for a kernel that is not NCCL's."""
    match = NCCL_KERNEL.match(kernel_name)
    return None if match is None else match.group(1)


def is_nccl_kernel(kernel_name: str) -> bool:
    return NCCL_KERNEL.match(kernel_name) is not None


def looks_collective(name: str) -> bool:
    """A node name that can be a collective's transfer (``transfers``): a
    backend op or an NCCL/RCCL kernel; ``validate`` warns when one is compute."""
    return is_backend_comm_op(name) or is_nccl_kernel(name)


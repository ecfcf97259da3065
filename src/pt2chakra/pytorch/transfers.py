"""Which record of a collective is its transfer: the one rule, for every
backend (NCCL, RCCL, gloo, MPI, UCC) and wherever the backend runs it.

A collective shows up in a trace as several records of one thing: the c10d
op (``c10d::allreduce_``), the backend's own op (``gloo:all_reduce``,
``nccl:all_reduce``), and what actually moved the bytes. The rule:

* an NCCL/RCCL kernel (or any device activity carrying collective metadata)
  is the transfer when the backend launched one; its backend op is then an
  ordinary CPU op (it only enqueued the kernel);
* otherwise the backend op itself is the transfer, wherever it ran: on the
  caller's thread (MPI, UCC), or on one of the backend's worker threads, as
  gloo does, where Kineto records it as a ``user_annotation`` with the
  op's ``Record function id`` and its device copies under a
  ``gpu_user_annotation`` on a stream of its own, joined by ``External id``.
  The worker thread is the transfer's lane (``comm_channel``); its time
  there is the collective's time, not compute.

Copies and syncs the backend launches around its transfer (gloo's
device <-> pinned host copies of CUDA tensors) are not a transfer: they
do not make a backend op lose its transfer, whatever the ET nests under it
(the ET observer files a worker-thread op under whatever op the calling
thread had open, so its recorded callees are not its own).

``conversion.graph_builder`` (host ET + Kineto, host ET alone) and
``conversion.kineto_only`` (Kineto alone) apply it; ``validate``
(``rules.checks``) applies it again to a written file, over its caller
(``ctrl_deps``) and launch edges, and warns about each backend op typed
as compute that no communication node belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pt2chakra.names import is_nccl_kernel
from pt2chakra.pytorch.records import CollectiveInfo

# How far up the callers of a device transfer's launcher the backend op that
# owns it may sit (launch <- nccl:all_reduce <- record_param_comms <- c10d op,
# with unrecorded ops between them on old traces).
MAX_OWNER_HOPS = 64


class HasCaller(Protocol):
    """An op with its caller's id (``HostOp``; a node of a written file)."""

    @property
    def parent(self) -> int: ...


def is_device_transfer(name: str, info: CollectiveInfo | None) -> bool:
    """A device activity that moves a collective's bytes itself: an NCCL/RCCL
    kernel, or one that Kineto tagged with collective metadata."""
    return info is not None or is_nccl_kernel(name)


def own_transfers(backend_ops: Sequence[int], device_transfer_launchers: Iterable[int],
                  ops_by_id: Mapping[int, HasCaller], host_only: bool) -> frozenset[int]:
    """Which of ``backend_ops`` (ids of ops that ``is_backend_comm_op``) are
    their collective's transfer: in a host-only trace every one (the only
    record of it), else each one that no device transfer belongs to. A
    device transfer belongs to the op that launched it and to every caller
    above that op (``device_transfer_launchers``: the launching host op ids)."""
    if host_only or not backend_ops:
        return frozenset(backend_ops)
    owning: set[int] = set()
    for launcher in device_transfer_launchers:
        cur, hops = launcher, 0
        while cur in ops_by_id and cur not in owning and hops < MAX_OWNER_HOPS:
            owning.add(cur)
            cur, hops = ops_by_id[cur].parent, hops + 1
    return frozenset(i for i in backend_ops if i not in owning)

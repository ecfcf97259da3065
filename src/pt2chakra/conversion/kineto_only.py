"""Kineto-only conversion: a ``torch.profiler`` trace without a host ET.

Most users have exactly this. Rather than a second converter, the Kineto CPU
events of the step are turned into the host ops the normal pipeline expects
(ids in start order, each op's caller the innermost event that holds it on
its thread, shapes from ``Input Dims``, collective metadata from the args),
paired one to one with themselves; launches, GPU work, syncs and stream
waits then go through the linker's own rules and the graph builder.

The step, and the GPU work the previous step left running, come from
:mod:`pt2chakra.conversion.step`. A trace without any CPU op (kernels and
copies alone) converts to its GPU streams, each in recorded order with its
idle gaps.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from pt2chakra.conversion.linker import (
    LinkedTrace,
    collect_cpu_syncs,
    collect_stream_waits,
    is_launch,
    link_gpu_activities,
    linked_events,
    with_stand_ins,
)
from pt2chakra.conversion.step import STEP_LAST, RecordedStep, StepChoice, kineto_step
from pt2chakra.errors import InputError
from pt2chakra.names import is_backend_comm_op
from pt2chakra.pytorch.records import (
    CollectiveInfo,
    CpuEvent,
    GpuActivity,
    HostOp,
    HostTrace,
    IOValues,
    KinetoTrace,
    ProcessGroup,
    RuntimeEvent,
)
from pt2chakra.pytorch.transfers import is_device_transfer, own_transfers

log = logging.getLogger(__name__)

# What a Kineto-only conversion records as its "host trace schema" and link method.
KINETO_ONLY = "kineto-only"
OUTSIDE_STEP = "outside the step window"
INSIDE_TRANSFER = "inside a CPU transfer (gloo's own copies, part of its time)"
# Kineto writes µs with a fractional part; an event that ends this close
# after its caller (rounding of ts + dur) is still its callee.
NESTING_SLACK_US = 0.01


def _in_window(ev: CpuEvent, window: RecordedStep) -> bool:
    return window.start <= ev.ts and ev.ts + ev.dur <= window.end + NESTING_SLACK_US


def _ordered(events: Sequence[CpuEvent]) -> list[CpuEvent]:
    """Start order; a caller before its callees when they start together
    (the longer first), then by thread for a stable id assignment."""
    return sorted(events, key=lambda ev: (ev.ts, -ev.dur, ev.tid))


def _callers(events: Sequence[CpuEvent]) -> list[int]:
    """Index of each event's caller in ``events`` (start-ordered), -1 for
    none: the innermost earlier event on its thread that still holds it."""
    parent = [-1] * len(events)
    stacks: dict[int, list[int]] = {}
    for k, ev in enumerate(events):
        stack = stacks.setdefault(ev.tid, [])
        end = ev.ts + ev.dur
        while stack:
            top = events[stack[-1]]
            if top.ts + top.dur + NESTING_SLACK_US >= end:
                break
            stack.pop()
        if stack:
            parent[k] = stack[-1]
        stack.append(k)
    return parent


def _json(value: Any) -> bytes:
    return msgspec.json.encode(value) if value is not None else b""


def _collective_attrs(info: CollectiveInfo | None) -> dict[str, Any]:
    """The record_param_comms attributes a host ET would carry (schema 1.1.0
    names), so the graph builder sizes and groups the collective alike."""
    if info is None:
        return {}
    attrs: dict[str, Any] = {"collective_name": info.name}
    if info.dtype:
        attrs["dtype"] = info.dtype
    attrs["in_msg_nelems"] = info.in_msg_nelems
    attrs["out_msg_nelems"] = info.out_msg_nelems
    if info.group_size:
        attrs["pg_size"] = info.group_size
    if info.pg_name:
        attrs["pg_name"] = info.pg_name
    if info.pg_desc:
        attrs["pg_desc"] = info.pg_desc
    return attrs


def _host_op(op_id: int, parent: int, ev: CpuEvent) -> HostOp:
    inputs = IOValues.from_json(_json(ev.concrete_inputs), _json(ev.input_dims),
                                _json(ev.input_types))
    return HostOp(id=op_id, name=ev.name, parent=parent, tid=ev.tid,
                  rf_id=ev.record_function_id if ev.record_function_id >= 0 else None,
                  seq_id=ev.seq_num, fw_tid=max(ev.fwd_thread_id, 0), inputs=inputs,
                  attrs=_collective_attrs(ev.collective))


def process_groups(kineto: KinetoTrace) -> list[ProcessGroup]:
    """``distributedInfo.pg_config`` (torch >= 2.2) as the ET's process-group records."""
    found = []
    for pg in kineto.distributed_info.get("pg_config") or []:
        if not isinstance(pg, dict):
            continue
        ranks = pg.get("ranks")
        size = pg.get("pg_size", pg.get("group_size", 0))
        found.append(ProcessGroup(
            pg_name=str(pg.get("pg_name", "")), pg_desc=str(pg.get("pg_desc", "")),
            ranks=[r for r in ranks if isinstance(r, int)] if isinstance(ranks, list) else [],
            group_size=size if isinstance(size, int) else 0,
            backend=str(pg.get("backend_config", ""))))
    return found


class _Caller(NamedTuple):
    """An event of the step as ``own_transfers`` walks it: its caller's index."""

    parent: int  # -1 for none


def _cpu_transfers(events: Sequence[CpuEvent], callers: list[int],
                   runtime: Sequence[RuntimeEvent], gpu: Sequence[GpuActivity]) -> list[bool]:
    """Per event: does it run inside a backend op that is its own transfer
    (``pytorch.transfers.own_transfers``: no NCCL kernel launched under it; a
    gloo collective on its worker thread, its tensors on the CPU or on a GPU)?
    Such an op is one transfer node; the copies its algorithm does are part of
    its time, not ops of their own (the ET does not record them under it either)."""
    backend = [k for k, ev in enumerate(events) if is_backend_comm_op(ev.name)]
    if not backend:
        return [False] * len(events)
    transfers = {a.correlation for a in gpu if is_device_transfer(a.name, a.collective)}
    launches: dict[int, list[float]] = {}
    for rt in runtime:
        # a launch whose activity is unknown may be a kernel's: it counts
        if is_launch(rt.name) and (rt.correlation < 0 or rt.correlation in transfers):
            launches.setdefault(rt.tid, []).append(rt.ts)
    own = own_transfers(backend, _launchers(events, callers, launches),
                        {k: _Caller(p) for k, p in enumerate(callers)}, host_only=False)
    inside = [False] * len(events)
    for k, p in enumerate(callers):
        if p >= 0 and (inside[p] or p in own):
            inside[k] = True
    return inside


def _launchers(events: Sequence[CpuEvent], callers: list[int],
               launches: dict[int, list[float]]) -> list[int]:
    """The index of each launch's host op (Kineto keeps no caller for a
    runtime call): the innermost event of its thread that holds its start,
    ends included; launches outside every event have none."""
    on_thread: dict[int, list[int]] = {}
    for k, ev in enumerate(events):  # start order, the innermost last among equal starts
        on_thread.setdefault(ev.tid, []).append(k)
    found = []
    for tid, times in launches.items():
        ks = on_thread.get(tid)
        if not ks:
            continue
        starts = [events[k].ts for k in ks]
        for t in times:
            j = bisect.bisect_right(starts, t) - 1
            cur = ks[j] if j >= 0 else -1
            while cur >= 0 and events[cur].ts + events[cur].dur < t:
                cur = callers[cur]
            if cur >= 0:
                found.append(cur)
    return found


class KinetoOnly(NamedTuple):
    linked: LinkedTrace
    window: RecordedStep
    dropped: dict[str, int]  # Kineto CPU (and Python) events not made nodes, by reason


def link_kineto_only(kineto: KinetoTrace, step: StepChoice = STEP_LAST) -> KinetoOnly:
    """The ``LinkedTrace`` of a Kineto trace alone (see the module docstring);
    ``step`` picks the measured step (``step.kineto_step``)."""
    window = kineto_step(kineto, step)
    events = [*kineto.cpu_events, *kineto.python_events]
    inside = _ordered([ev for ev in events if _in_window(ev, window)])
    gpu_only = not events  # kernels and copies alone (kineto_step refused an empty trace)
    if not inside and not gpu_only:
        raise InputError(kineto.path, f"no CPU op in the step ({window.label}): nothing to convert")
    callers = _callers(inside)
    folded = _cpu_transfers(inside, callers, kineto.runtime_events, kineto.gpu_activities)
    new_id = [0] * len(inside)  # 0: folded into its transfer (ids start at 1)
    ops: list[HostOp] = []
    for k, ev in enumerate(inside):
        if not folded[k]:
            new_id[k] = len(ops) + 1
            ops.append(_host_op(new_id[k], new_id[callers[k]] if callers[k] >= 0 else 0, ev))
    kept = [ev for k, ev in enumerate(inside) if not folded[k]]
    pid = kept[0].pid if kept else kineto.gpu_activities[0].device
    host = HostTrace(path=kineto.path, schema=KINETO_ONLY, pid=pid,
                     start_ts=round(window.start), finish_ts=round(window.end), ops=ops,
                     process_groups=process_groups(kineto))
    cpu_event = linked_events({op.id: ev for op, ev in zip(ops, kept)})
    # GPU-only: the window is the activities' own span, so every one is in it
    # (their launches, before it, are no reason to drop them)
    low, high = (-math.inf, math.inf) if gpu_only else (window.start, window.end)
    gpu_ops, gpu_dropped = link_gpu_activities(kineto, cpu_event, low, high)
    gpu_ops = with_stand_ins(kineto, gpu_ops, window.start, gpu_only=gpu_only, step_end=window.end)
    linked = LinkedTrace(
        host=host, kineto=kineto, method=KINETO_ONLY, ops=ops, cpu_event=cpu_event,
        gpu_ops=gpu_ops, cpu_syncs=collect_cpu_syncs(kineto, window.start, window.end),
        stream_waits=collect_stream_waits(kineto, window.start, window.end),
        gpu_dropped=gpu_dropped, step_start=window.start, step_end=window.end,
        step_definition=window.definition)
    log.info("%s: Kineto only, step %s: %d CPU ops, %d GPU activities", kineto.path,
             window.describe(), len(ops), len(gpu_ops))
    dropped = {OUTSIDE_STEP: len(events) - len(inside), INSIDE_TRANSFER: len(inside) - len(ops)}
    return KinetoOnly(linked, window, {k: v for k, v in dropped.items() if v})


def kineto_event_counts(kineto: KinetoTrace, ignored: Counter[str]) -> dict[str, int]:
    """Every event of the file by what became of it: the CPU ops and GPU
    activities (accounted op by op in the report), and the rest by kind."""
    counts = {
        "cpu ops and annotations": len(kineto.cpu_events),
        "python functions": len(kineto.python_events),
        "runtime calls (launches, syncs, others)": len(kineto.runtime_events),
        "GPU activities": len(kineto.gpu_activities),
        "cuda_sync events": len(kineto.sync_events),
        "ac2g flow starts": len(kineto.flow_starts),
    }
    counts.update((f"not used: {cat}", n) for cat, n in sorted(ignored.items()))
    return {k: v for k, v in counts.items() if v}

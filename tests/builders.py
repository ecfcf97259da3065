"""Builders of test data: Chakra nodes, metadata and small ``.et`` files,
host-ET and Kineto JSON documents, and hypothesis strategies of nodes.

One home for them (``tests`` is on ``sys.path``, see pyproject), so that a
test says which node it means in one line and every suite builds a "GPU
kernel on stream 7" the same way. Other helpers (running the CLI, the real
traces' whereabouts, damaging files) live in ``helpers.py``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import strategies as st

from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR
from pt2chakra.chakra.encode import AttrSpec
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import (
    Attr,
    ChakraNode,
    CollectiveType,
    GlobalMetadata,
    NodeType,
    attr_dict,
)
from pt2chakra.pytorch.records import (
    CpuEvent,
    GpuActivity,
    HostOp,
    HostTrace,
    KinetoTrace,
    RuntimeEvent,
    SyncEvent,
)
from pt2chakra.rules.conventions import INCLUSIVE_ATTR, is_gpu

# --------------------------------------------------------------------------
# Chakra attributes
# --------------------------------------------------------------------------

IS_CPU: Attr = ("is_cpu_op", "bool_val", True)
IS_GPU: Attr = ("is_cpu_op", "bool_val", False)


def cpu_attrs(tid: int = 1) -> list[Attr]:
    """A host op on thread ``tid``."""
    return [IS_CPU, ("tid", "int64_val", tid)]


def gpu_attrs(stream: int = 7, device: int = 0) -> list[Attr]:
    """A kernel on ``stream`` of ``device``."""
    return [IS_GPU, ("device", "int64_val", device), ("stream", "int64_val", stream)]


def comm_attrs(comm_type: int = 0, size: int | None = 1024, pg: str | None = "0",
               seq: int | None = None) -> list[Attr]:
    """What a collective carries: its type, bytes, process group and sequence
    number (each left out when None)."""
    attrs: list[Attr] = [("comm_type", "int64_val", int(comm_type))]
    if size is not None:
        attrs.append(("comm_size", "int64_val", size))
    if pg is not None:
        attrs.append(("pg_name", "string_val", pg))
    if seq is not None:
        attrs.append(("comm_seq", "int64_val", seq))
    return attrs


def dep_kinds(kinds: Sequence[str]) -> Attr:
    """The ``data_dep_kinds`` attribute: one kind per data dependency."""
    return (DEP_KINDS_ATTR, "string_list", list(kinds))


# --------------------------------------------------------------------------
# Chakra nodes and metadata
# --------------------------------------------------------------------------

MD = GlobalMetadata(version="0.0.4")


def node(nid: int, deps: Sequence[int] = (), kinds: Sequence[str] | None = None, *,
         name: str | None = None, node_type: NodeType = NodeType.COMP_NODE, start: int = 0,
         dur: int = 0, ctrl: Sequence[int] = (), attrs: Sequence[Attr] = (),
         inputs: tuple[str, str, str] | None = None) -> ChakraNode:
    """Any node: named ``n<id>`` unless told, ``kinds`` (when given) appended
    as ``data_dep_kinds`` after ``attrs``; ``inputs`` its IOInfo (values,
    shapes, types)."""
    all_attrs = list(attrs)
    if kinds is not None:
        all_attrs.append(dep_kinds(kinds))
    return ChakraNode(id=nid, name=f"n{nid}" if name is None else name, type=node_type,
                      start_time_micros=start, duration_micros=dur, ctrl_deps=list(ctrl),
                      data_deps=list(deps), inputs=inputs, attrs=all_attrs)


def cpu(nid: int, start: int, dur: int, deps: Sequence[int] = (),
        kinds: Sequence[str] | None = None, tid: int = 1, incl: int | None = None) -> ChakraNode:
    """A host op ``cpu<id>`` as the converter writes it; its deps default to
    thread order and its inclusive time to ``dur``."""
    attrs = [*cpu_attrs(tid), ("inclusive_duration_micros", "int64_val", dur if incl is None else incl)]
    return node(nid, deps, (kinds or ["thread_order"] * len(deps)) if deps else None,
                name=f"cpu{nid}", start=start, dur=dur, attrs=attrs)


def gpu(nid: int, start: int, dur: int, deps: Sequence[int] = (),
        kinds: Sequence[str] | None = None, stream: int = 7, comm: CollectiveType | None = None,
        seq: int | None = None) -> ChakraNode:
    """A kernel ``gpu<id>`` on device 0, or a 1 MiB collective on group "0"
    when ``comm`` is given; its deps default to stream order."""
    attrs = [*gpu_attrs(stream), ("category", "string_val", "kernel")]
    if deps:
        attrs.append(dep_kinds(kinds or ["stream_order"] * len(deps)))
    node_type = NodeType.COMP_NODE
    if comm is not None:
        node_type = NodeType.COMM_COLL_NODE
        attrs += comm_attrs(comm, 1 << 20, "0", seq)
    return node(nid, deps, name=f"gpu{nid}", node_type=node_type, start=start, dur=dur,
                attrs=attrs)


def comp_node(nid: int, deps: Sequence[int] = ()) -> ChakraNode:
    """A 5 us kernel ``kernel_<id>`` on stream 7, starting at 10 * id."""
    return node(nid, deps, name=f"kernel_{nid}", start=10 * nid, dur=5, attrs=gpu_attrs())


def comm_node(nid: int, deps: Sequence[int] = (), size: int | None = 1024,
              seq: int = 0) -> ChakraNode:
    """A 5 us all-reduce ``nccl:all_reduce_<id>`` on group "0", starting at
    10 * id; ``size=None`` leaves its size out."""
    attrs: list[Attr] = [IS_GPU, ("comm_type", "int64_val", 0), ("pg_name", "string_val", "0"),
                         ("comm_seq", "int64_val", seq)]
    if size is not None:
        attrs.append(("comm_size", "int64_val", size))
    return node(nid, deps, name=f"nccl:all_reduce_{nid}", node_type=NodeType.COMM_COLL_NODE,
                start=10 * nid, dur=5, attrs=attrs)


def coll(nid: int, seq: int | None = None, deps: Sequence[int] = (), *, start: int = 0,
         stream: int | None = None, comm_type: int = 0, pg: str = "0") -> ChakraNode:
    """A 10 us, 1 KiB collective ``nccl<id>`` with sequence number ``seq``, on
    ``stream`` of device 0 when one is given."""
    attrs: list[Attr] = [IS_GPU, *comm_attrs(comm_type, 1024, pg, seq)]
    if stream is not None:
        attrs += gpu_attrs(stream)[1:]
    return node(nid, deps, name=f"nccl{nid}", node_type=NodeType.COMM_COLL_NODE, start=start,
                dur=10, attrs=attrs)


def comm_op(nid: int, node_type: NodeType, start: int, deps: Sequence[int] = (), *,
            peer: int | None = None, seq: int | None = None, pg: str = "0") -> ChakraNode:
    """A 5 us, 4 KiB GPU communication node on stream 7 of device 0: a send
    to ``peer``, a receive from it, or an all-reduce; named after its type."""
    attrs: list[Attr] = [*gpu_attrs(), ("comm_size", "int64_val", 4096), ("pg_name", "string_val", pg)]
    if node_type == NodeType.COMM_COLL_NODE:
        attrs.append(("comm_type", "int64_val", int(CollectiveType.ALL_REDUCE)))
    if node_type == NodeType.COMM_SEND_NODE and peer is not None:
        attrs.append(("comm_dst", "int32_val", peer))
    if node_type == NodeType.COMM_RECV_NODE and peer is not None:
        attrs.append(("comm_src", "int32_val", peer))
    if seq is not None:
        attrs.append(("comm_seq", "int64_val", seq))
    return node(nid, deps, ["stream_order"] * len(deps) if deps else None,
                name=f"{node_type.name.lower()}{nid}", node_type=node_type, start=start, dur=5,
                attrs=attrs)


def dp_layer(layer: int, rank: int, start: int, op_us: int, gemm_us: int, *,
             comm_bytes: int = 1 << 20, op: str = "aten::mm", launch_us: int = 0,
             comm_start: int | None = None) -> list[ChakraNode]:
    """One layer of a data-parallel step on ``rank``: a host op (ids from
    ``3 * layer + 1``, after the previous layer's op), the kernel it launches
    on stream 7 and an all-reduce on stream 20 matched across ranks by
    ``comm_seq = layer``. The kernel starts ``launch_us`` after the op ends,
    the all-reduce when the kernel ends unless ``comm_start`` says."""
    base = 3 * layer + 1
    kernel_start = start + op_us + launch_us
    return [
        node(base, [base - 3] if layer else [], name=op, start=start, dur=op_us,
             attrs=cpu_attrs()),
        node(base + 1, [base], name="gemm_kernel", start=kernel_start, dur=gemm_us,
             attrs=gpu_attrs(7, rank)),
        node(base + 2, [base + 1], name="nccl:all_reduce", node_type=NodeType.COMM_COLL_NODE,
             start=kernel_start + gemm_us if comm_start is None else comm_start, dur=40,
             attrs=[*gpu_attrs(20, rank),
                    *comm_attrs(CollectiveType.ALL_REDUCE, comm_bytes, "0", layer)])]


def metadata(rank: int | None = None, world_size: int | None = None,
             step: tuple[int, int] | None = None, version: str = "0.0.4") -> GlobalMetadata:
    """Metadata with the rank, world size and step window (start, end us)
    that are given, in that order."""
    attrs: list[Attr] = []
    if rank is not None:
        attrs.append(("rank", "int64_val", rank))
    if step is not None:
        attrs += [("step_start_micros", "int64_val", step[0]),
                  ("step_end_micros", "int64_val", step[1])]
    if world_size is not None:
        attrs.append(("world_size", "int64_val", world_size))
    return GlobalMetadata(version=version, attrs=attrs)


def write_nodes(path: Path, nodes: Sequence[ChakraNode], md: GlobalMetadata = MD) -> Path:
    """``nodes`` written as an ``.et`` at ``path`` (no rank unless ``md`` says)."""
    write_et(path, md, list(nodes))
    return path


def write_rank(path: Path, nodes: Sequence[ChakraNode], rank: int = 0,
               world_size: int | None = None) -> Path:
    """``nodes`` written as rank ``rank``'s ``.et`` at ``path``."""
    return write_nodes(path, nodes, metadata(rank, world_size))


def sound_et(path: Path, rank: int = 0) -> Path:
    """A compute node then a collective after it: sound, replays."""
    return write_rank(path, [comp_node(1), comm_node(2, [1])], rank)


# --------------------------------------------------------------------------
# Host execution traces (JSON)
# --------------------------------------------------------------------------

PID = 4242
OBSERVER_ROOT = "[pytorch|profiler|execution_trace|process]"
OBSERVER_THREAD = "[pytorch|profiler|execution_trace|thread]"
EMPTY_IO: dict[str, list[Any]] = {"values": [], "shapes": [], "types": []}


def host_attr(name: str, value: Any, type_: str = "uint64") -> dict[str, Any]:
    """One entry of a host op's ``attrs``."""
    return {"name": name, "type": type_, "value": value}


def host_node(nid: int, name: str, parent: int, rf_id: int, **extra: Any) -> dict[str, Any]:
    """A schema 1.1 host op; ``attrs`` in ``extra`` come after the usual ones."""
    attrs = [host_attr("rf_id", rf_id), host_attr("fw_parent", 0),
             host_attr("seq_id", -1, "int64"), host_attr("scope", 0), host_attr("tid", 1),
             host_attr("fw_tid", 0), host_attr("op_schema", "", "string")]
    attrs += extra.pop("attrs", [])
    return {"id": nid, "name": name, "ctrl_deps": parent, "inputs": extra.pop("inputs", EMPTY_IO),
            "outputs": extra.pop("outputs", EMPTY_IO), "attrs": attrs, **extra}


def host_doc(*extra_nodes: dict[str, Any], pid: int = PID) -> dict[str, Any]:
    """Schema 1.1.0: the observer's root and thread, then two ops."""
    nodes = [host_node(1, OBSERVER_ROOT, 1, 0), host_node(2, OBSERVER_THREAD, 1, 1),
             host_node(3, "aten::add", 2, 10), host_node(4, "aten::mul", 2, 11), *extra_nodes]
    return {"schema": "1.1.0-chakra.0.0.4", "pid": pid, "time": "2026-01-01 00:00:00",
            "start_ts": 100, "finish_ts": 200, "nodes": nodes}


TENSOR = [10, 11, 0, 6, 4, "cuda:0"]


def flat_et(schema: str = "1.0.1", nodes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A three-op ET in the 1.0.1 layout (root, thread, aten::add)."""

    def flat_node(id_: int, name: str, parent: int, tid: int, rf_id: int, **io: Any) -> dict[str, Any]:
        return {
            "name": name, "id": id_, "rf_id": rf_id, "parent": parent, "fw_parent": 0,
            "seq_id": -1, "scope": 0, "tid": tid, "fw_tid": 0, "op_schema": "",
            "inputs": io.get("inputs", []), "input_shapes": io.get("shapes", []),
            "input_types": io.get("types", []), "outputs": [], "output_shapes": [],
            "output_types": [],
        }  # fmt: skip

    default = [
        flat_node(2, "[pytorch|profiler|execution_graph|thread]", 1, 1, 0),
        flat_node(3, "aten::add", 2, 1, 7, inputs=[TENSOR, 1], shapes=[[2, 3], []], types=["Tensor(float)", "Int"]),
        flat_node(1, "[pytorch|profiler|execution_graph|process]", 1, 0, 0),
    ]
    return {"schema": schema, "pid": 42, "time": "x", "start_ts": 100, "finish_ts": 200, "nodes": nodes or default}


def nested_et(schema: str, extra_attrs: Sequence[dict[str, Any]] = (), strides: bool = False) -> dict[str, Any]:
    """A three-op ET in the nested (1.0.2+) layout."""

    def nested_node(id_: int, name: str, parent: int, tid: int, rf_id: int, extra: Sequence[Any] = (), inputs: Any = None) -> dict[str, Any]:
        attrs = [
            {"name": "rf_id", "type": "uint64", "value": rf_id},
            {"name": "fw_parent", "type": "uint64", "value": 0},
            {"name": "seq_id", "type": "int64", "value": 5},
            {"name": "scope", "type": "uint64", "value": 0},
            {"name": "tid", "type": "uint64", "value": tid},
            {"name": "fw_tid", "type": "uint64", "value": 0},
            {"name": "op_schema", "type": "string", "value": "aten::add.Tensor(...)"},
            *extra,
        ]
        empty: dict[str, list[Any]] = {"values": [], "shapes": [], "types": []}
        return {"id": id_, "name": name, "ctrl_deps": parent, "inputs": inputs or empty, "outputs": empty, "attrs": attrs}

    inputs: dict[str, Any] = {"values": [TENSOR, 1], "shapes": [[2, 3], []], "types": ["Tensor(float)", "Int"]}
    if strides:
        inputs["strides"] = [[3, 1], []]
    nodes = [
        nested_node(2, "[pytorch|profiler|execution_trace|thread]", 1, 1, 0),
        nested_node(3, "aten::add", 2, 1, 7, extra=extra_attrs, inputs=inputs),
        nested_node(1, "[pytorch|profiler|execution_trace|process]", 1, 0, 0),
    ]
    return {"schema": schema, "pid": 42, "time": "x", "start_ts": 100, "finish_ts": 200, "nodes": nodes}


# The attributes each schema version adds to aten::add (a collective's from 1.1.0).
COMM_HOST_ATTRS = [
    host_attr("collective_name", "allreduce", "string"), host_attr("dtype", "Float", "string"),
    host_attr("in_msg_nelems", 6), host_attr("out_msg_nelems", 6),
    host_attr("in_split_size", "[]", "string"), host_attr("out_split_size", "[]", "string"),
    host_attr("global_rank_start", 0), host_attr("global_rank_stride", 1),
    host_attr("pg_name", "0", "string"), host_attr("pg_desc", "default_pg", "string"),
    host_attr("pg_size", 2),
]  # fmt: skip
KERNEL_HOST_ATTRS = [host_attr("kernel_backend", "triton", "string"),
                     host_attr("kernel_file", "/tmp/k.py", "string")]
EXTRAS_BY_VERSION: dict[str, list[dict[str, Any]]] = {
    "1.0.2": [],
    "1.0.3": [],
    "1.0.4": KERNEL_HOST_ATTRS,
    "1.1.0": KERNEL_HOST_ATTRS + COMM_HOST_ATTRS,
    "1.1.1": KERNEL_HOST_ATTRS + COMM_HOST_ATTRS + [host_attr("tensor_range", "[0, 9]", "string"),
                                                    host_attr("is_asynchronized_op", True, "bool")],
}


# --------------------------------------------------------------------------
# Kineto traces (JSON)
# --------------------------------------------------------------------------


def trace_event(cat: str, name: str, ts: Any, dur: Any = 1.0, pid: Any = 1, tid: Any = 1,
                ph: Any = "X", **args: Any) -> dict[str, Any]:
    """One Chrome-trace event as Kineto writes it (a complete ``X`` event by
    default); ``args`` are its ``args``, keys as Kineto spells them."""
    return {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def late_launch_kineto(folder: Path, setup_us: int, t0: int = 0) -> Path:
    """A Kineto trace of a late launch (issue 28): ``aten::conv2d`` runs a
    quick callee, ``setup_us`` of its own time (cuDNN set-up), then launches
    its kernel; a device synchronize waits for the kernel, and ``aten::add``
    runs once it returned, from ``t0`` on. Written as ``folder/k<setup_us>.json.gz``."""
    x = partial(trace_event, pid=1, tid=1)
    launch = t0 + 20 + setup_us
    done = launch + 5 + 300  # the kernel's end
    events = [
        x("cpu_op", "aten::conv2d", t0, launch + 15 - t0),
        x("cpu_op", "aten::empty", t0 + 2, 8),
        x("cuda_runtime", "cudaLaunchKernel", launch, 5, correlation=1),
        x("kernel", "conv", launch + 5, 300, tid=7, correlation=1, stream=7, device=0),
        x("cuda_runtime", "cudaDeviceSynchronize", launch + 20, done + 3 - (launch + 20),
          correlation=2),
        x("cpu_op", "aten::add", done + 5, 20),
    ]
    path = folder / f"k{setup_us}.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    return path


def kineto_event(name: str, ts: float, rf_id: int, pid: Any = PID, **args: Any) -> dict[str, Any]:
    """A 5 us ``cpu_op`` on thread 1 that links to host op ``rf_id``."""
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": 5,
            "args": {"External id": rf_id, "Record function id": rf_id, **args}}


def kineto_doc(*extra_events: dict[str, Any], pid: Any = PID, **top: Any) -> dict[str, Any]:
    """The Kineto side of ``host_doc``: its two ops, then ``extra_events``."""
    events = [kineto_event("aten::add", 1000.0, 10, pid), kineto_event("aten::mul", 1010.0, 11, pid),
              *extra_events]
    return {"schemaVersion": 1, "traceEvents": events, **top}


def write_json(path: Path, doc: Any, gz: bool = False) -> Path:
    """``doc`` (or raw bytes) written at ``path``, gzipped when ``gz``."""
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


# --------------------------------------------------------------------------
# Hypothesis strategies of nodes
# --------------------------------------------------------------------------

U64 = (1 << 64) - 1
I32 = (-(1 << 31), (1 << 31) - 1)
I64 = (-(1 << 63), (1 << 63) - 1)


def _numeric_kinds(exact_floats: bool) -> dict[str, st.SearchStrategy[Any]]:
    """Oneof kind -> element strategy. ``exact_floats``: values that survive a
    round trip and compare equal (no NaN, float32-representable floats)."""
    floats32 = st.floats(width=32, allow_nan=False) if exact_floats else st.floats()
    return {
        "double": st.floats(allow_nan=not exact_floats),
        "float": floats32,
        "int32": st.integers(*I32),
        "int64": st.integers(*I64),
        "uint32": st.integers(0, (1 << 32) - 1),
        "uint64": st.integers(0, U64),
        "sint32": st.integers(*I32),
        "sint64": st.integers(*I64),
        "fixed32": st.integers(0, (1 << 32) - 1),
        "fixed64": st.integers(0, U64),
        "sfixed32": st.integers(*I32),
        "sfixed64": st.integers(*I64),
        "bool": st.booleans(),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=12),
    }


def attrs_strategy(exact_floats: bool) -> st.SearchStrategy[list[Attr]]:
    """Attribute lists of every oneof member, scalar and list, and unset."""
    options: list[st.SearchStrategy[Attr]] = []
    for kind, values in _numeric_kinds(exact_floats).items():
        scalar = st.tuples(st.text(max_size=10), st.just(f"{kind}_val"), values)
        listed = st.tuples(
            st.text(max_size=10), st.just(f"{kind}_list"), st.lists(values, max_size=5)
        )
        options += [scalar, listed]
    options.append(st.tuples(st.text(max_size=10), st.just(""), st.none()))  # no member set
    return st.lists(st.one_of(options), max_size=6)


ids = st.integers(0, U64)
ioinfo = st.none() | st.tuples(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))


def nodes_strategy(exact_floats: bool = False, named: bool = False) -> st.SearchStrategy[ChakraNode]:
    """Any node the wire format can carry (``named``: a non-empty name)."""
    return st.builds(
        ChakraNode,
        id=ids,
        name=st.text(min_size=1 if named else 0, max_size=30),
        type=st.sampled_from(list(NodeType)),
        start_time_micros=ids,
        duration_micros=ids,
        ctrl_deps=st.lists(ids, max_size=6),
        data_deps=st.lists(ids, max_size=6),
        inputs=ioinfo,
        outputs=ioinfo,
        attrs=attrs_strategy(exact_floats),
    )


# The attribute table the NodeWriter tests write with (one of each kind of spec).
WRITER_ATTRS = (
    AttrSpec("flag", "bool_val"),
    AttrSpec("per_node", "int64_val", repeats=False),
    AttrSpec("tid", "int64_val"),
    AttrSpec("label", "string_val"),
    AttrSpec("kinds", "string_list", plain=list),
    AttrSpec("small", "int32_val"),
)


# --------------------------------------------------------------------------
# A planted change: a copy of a trace where one CPU op ran ``factor`` times
# longer and everything that started after it ended is pushed back by the
# extra time (its callers' inclusive times grow by it, the step ends later),
# as if the op really had been that slow.
# --------------------------------------------------------------------------



def leaf_cpu_ops(path: Path) -> list[ChakraNode]:
    """CPU ops that call nothing, with time, longest first."""
    nodes = list(read_et(path)[1])
    callers = {n.ctrl_deps[0] for n in nodes if n.ctrl_deps}
    leaves = [n for n in nodes if n.id not in callers and n.duration_micros > 0
              and n.start_time_micros and not is_gpu(attr_dict(n.attrs))]
    return sorted(leaves, key=lambda n: (-n.duration_micros, n.id))


def plant_slowdown(source: Path, target: Path, node_id: int, factor: float) -> int:
    """Write the slowed copy; returns the extra microseconds."""
    metadata, nodes_iter = read_et(source)
    nodes = list(nodes_iter)
    by_id = {n.id: n for n in nodes}
    op = by_id[node_id]
    extra = round(op.duration_micros * (factor - 1))
    end = op.start_time_micros + op.duration_micros
    callers = set()
    cur = op
    while cur.ctrl_deps and cur.ctrl_deps[0] in by_id and cur.ctrl_deps[0] not in callers:
        callers.add(cur.ctrl_deps[0])
        cur = by_id[cur.ctrl_deps[0]]
    out = [_moved(n, op, end, extra, callers) for n in nodes]
    attrs = [(name, member, value + extra if name == "step_end_micros" else value)
             for name, member, value in metadata.attrs]
    write_et(target, GlobalMetadata(version=metadata.version, attrs=attrs), out)
    return extra


def _moved(n: ChakraNode, op: ChakraNode, end: int, extra: int, callers: set[int]) -> ChakraNode:
    if n.id == op.id:
        return _grown(msgspec.structs.replace(n, duration_micros=n.duration_micros + extra), extra)
    if n.id in callers:
        return _grown(n, extra)
    if n.start_time_micros >= end:
        return msgspec.structs.replace(n, start_time_micros=n.start_time_micros + extra)
    return n


def _grown(n: ChakraNode, extra: int) -> ChakraNode:
    attrs = [(name, member, value + extra if name == INCLUSIVE_ATTR else value)
             for name, member, value in n.attrs]
    return msgspec.structs.replace(n, attrs=attrs)

# --------------------------------------------------------------------------
# Typed records of the inputs (what the loaders give the linker)
# --------------------------------------------------------------------------

KINETO_MAIN_TID = 100  # the Kineto thread id the linker tests give the main thread


def host_op(i: int, name: str, parent: int = 1, tid: int = 1, rf: int | None = None) -> HostOp:
    """A host ET op with its caller, ET thread and rf_id."""
    return HostOp(id=i, name=name, parent=parent, tid=tid, rf_id=rf)


def cpu_event(name: str, ts: float, dur: float, tid: int = KINETO_MAIN_TID,
              rf: int = -1) -> CpuEvent:
    """A Kineto ``cpu_op`` with its Record function id (-1: none)."""
    return CpuEvent(name=name, cat="cpu_op", ts=ts, dur=dur, pid=1, tid=tid,
                    record_function_id=rf)


def runtime_event(name: str, ts: float, corr: int, tid: int = KINETO_MAIN_TID) -> RuntimeEvent:
    """A 2 us runtime call (a launch, a sync) with its correlation id."""
    return RuntimeEvent(name=name, ts=ts, dur=2, pid=1, tid=tid, correlation=corr)


def gpu_kernel(name: str, ts: float, dur: float, stream: int, corr: int) -> GpuActivity:
    """A kernel on device 0."""
    return GpuActivity(name=name, cat="kernel", ts=ts, dur=dur, device=0, stream=stream,
                       correlation=corr)


def host_trace(ops: Sequence[HostOp]) -> HostTrace:
    """A host ET of ``ops`` under the observer's thread node (id 1)."""
    return HostTrace(path="h.json", schema="1.1.1-chakra.0.0.4", pid=1, start_ts=0, finish_ts=1,
                     ops=[host_op(1, OBSERVER_THREAD, parent=0), *ops])


def kineto_trace(cpu: Sequence[CpuEvent], runtime: Sequence[RuntimeEvent] = (),
                 gpu: Sequence[GpuActivity] = (), sync: Sequence[SyncEvent] = ()) -> KinetoTrace:
    return KinetoTrace(path="k.json", cpu_events=list(cpu), runtime_events=list(runtime),
                       gpu_activities=list(gpu), sync_events=list(sync))


# --------------------------------------------------------------------------
# Parallel layouts: one rank of a tiny job as PyTorch records each layout
# (the real recordings' op names and callers, rules/layout.py's evidence)
# --------------------------------------------------------------------------

LAYOUT_KINDS = ("ddp", "ddp_orphan", "fsdp2", "fsdp2_norm", "tp", "tp_dp", "pp", "pp_dp", "ep",
                "mixed")
# The sizes of a tiny layout job's payloads (bytes): an activation, a bucket,
# a parameter block, a micro-batch's hand-off.
LAYOUT_ACTIVATION, LAYOUT_BUCKET, LAYOUT_BLOCK, LAYOUT_HANDOFF = 4096, 8192, 16384, 2048


class LayoutTrace:
    """One rank's nodes, built caller first (ids ascending, as recorded)."""

    def __init__(self) -> None:
        self.nodes: list[ChakraNode] = []

    def op(self, name: str, parent: int | None = None,
           inputs: tuple[str, str, str] | None = None) -> int:
        nid = len(self.nodes) + 1
        self.nodes.append(node(nid, name=name, start=10 * nid, dur=5,
                               ctrl=[] if parent is None else [parent], attrs=cpu_attrs(),
                               inputs=inputs))
        return nid

    def comm(self, name: str, ctype: CollectiveType | None, size: int, pg: str | None,
             parent: int | None = None, deps: Sequence[int] = (), peer: int | None = None) -> int:
        """A backend op (the transfer); ``ctype`` None: a send or receive by its name."""
        nid = len(self.nodes) + 1
        attrs: list[Attr] = [IS_CPU, ("tid", "int64_val", 1), ("comm_size", "int64_val", size)]
        if pg is not None:
            attrs.append(("pg_name", "string_val", pg))
        node_type = NodeType.COMM_COLL_NODE
        if ctype is None:
            send = name.endswith("send")
            node_type = NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE
            if peer is not None:
                attrs.append(("comm_dst" if send else "comm_src", "int32_val", peer))
        else:
            attrs.insert(0, ("comm_type", "int64_val", int(ctype)))
        self.nodes.append(node(nid, deps, name=name, node_type=node_type, start=10 * nid, dur=5,
                               ctrl=[] if parent is None else [parent], attrs=attrs))
        return nid

    # The layouts' pieces.

    def bucket(self, pg: str | None, orphan: bool = False) -> None:
        """DDP's reducer: a bucket all-reduced from backward (``orphan``: the
        gloo op recorded under no caller, after the backward op, as on rank 0
        of the bundled pair)."""
        grad = self.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad")
        if orphan:
            self.comm("gloo:all_reduce", CollectiveType.ALL_REDUCE, LAYOUT_BUCKET, pg, deps=[grad])
            return
        call = self.op("c10d::allreduce_", grad)
        self.comm("gloo:all_reduce", CollectiveType.ALL_REDUCE, LAYOUT_BUCKET, pg, parent=call)

    def broadcast(self, pg: str | None) -> None:
        call = self.op("c10d::broadcast_")
        self.comm("gloo:broadcast", CollectiveType.BROADCAST, 4, pg, parent=call)

    def fsdp(self, pg: str | None, layer: int = 0) -> None:
        """FSDP2: a block gathered in forward, its gradient reduced under the
        annotation (gloo's all-reduce for the reduce-scatter, on a copy)."""
        mark = self.op(f"FSDP::all_gather ({layer})")
        call = self.op("c10d::_allgather_base_", mark)
        self.comm("gloo:all_gather", CollectiveType.ALL_GATHER, LAYOUT_BLOCK, pg, parent=call)
        reduce = self.op(f"FSDP::post_backward_reduce ({layer})")
        call = self.op("c10d::_reduce_scatter_base_", reduce)
        self.comm("gloo:all_reduce", CollectiveType.ALL_REDUCE, LAYOUT_BLOCK, pg, parent=reduce,
                  deps=[call])

    def functional(self, parent: int, group: str, size: int = LAYOUT_ACTIVATION) -> int:
        """``_c10d_functional::all_reduce(input, "sum", group_name)`` and its c10d call."""
        values = json.dumps([[1, 2, 0, size // 4, 4, "cpu"], "sum", group])
        call = self.op("_c10d_functional::all_reduce", parent,
                       (values, f"[[{size // 4}],[],[]]", '["Tensor(float)","String","String"]'))
        self.op("c10d::allreduce_", call)
        return call

    def tp_forward(self, group: str, pg: str | None, size: int = LAYOUT_ACTIVATION) -> None:
        """A rowwise layer's output made whole: DTensor's Redistribute, the
        gloo op under the functional collective's wrapper."""
        redistribute = self.op("Redistribute")
        call = self.functional(redistribute, group, size)
        wrap = self.op("_c10d_functional::_wrap_tensor_autograd", redistribute)
        self.comm("gloo:all_reduce", CollectiveType.ALL_REDUCE, size, pg, parent=wrap,
                  deps=[call])

    def tp_backward(self, group: str, pg: str | None) -> None:
        """A colwise layer's input gradient reduced in backward; the gloo op
        under ``wait_tensor``, depending on no c10d call."""
        engine = self.op("autograd::engine::evaluate_function: _FromTorchTensorBackward")
        backward = self.op("_FromTorchTensorBackward", engine)
        self.functional(backward, group)
        wait = self.op("_c10d_functional::wait_tensor", backward)
        self.comm("gloo:all_reduce", CollectiveType.ALL_REDUCE, LAYOUT_ACTIVATION, pg,
                  parent=wait)

    def sharded_addmm(self, degree: int) -> None:
        """DTensor's dispatch of a colwise addmm: the op on global shapes, its
        ``PythonSubclass``, the op again on the local shard."""
        def shapes(out: int) -> tuple[str, str, str]:
            return ("[]", f"[[{out}],[256,512],[512,{out}],[],[]]",
                    '["Tensor(float)","Tensor(float)","Tensor(float)","Int","Int"]')
        whole = self.op("aten::addmm", inputs=shapes(2048))
        dispatch = self.op("PythonSubclass", whole)
        self.op("aten::addmm", dispatch, shapes(2048 // degree))
        replicated = self.op("aten::gelu", inputs=("[]", "[[256,512]]", '["Tensor(float)"]'))
        dispatch = self.op("PythonSubclass", replicated)
        self.op("aten::gelu", dispatch, ("[]", "[[256,512]]", '["Tensor(float)"]'))

    def stage(self, stage: int, stages: int, pg: str | None, micro: int = 2) -> None:
        """A GPipe stage: activations received from the one before and sent on,
        gradients back the other way (peers are group ranks)."""
        for m in range(micro):
            forward = self.op(f"Forward {m}")
            if stage > 0:
                self.comm("gloo:recv", None, LAYOUT_HANDOFF, pg,
                          self.op("c10d::recv_", forward), peer=stage - 1)
            if stage < stages - 1:
                self.comm("gloo:send", None, LAYOUT_HANDOFF, pg,
                          self.op("c10d::send", forward), peer=stage + 1)
        for m in range(micro):
            backward = self.op(f"Backward {m}")
            if stage < stages - 1:
                self.comm("gloo:recv", None, LAYOUT_HANDOFF, pg,
                          self.op("c10d::recv_", backward), peer=stage + 1)
            if stage > 0:
                self.comm("gloo:send", None, LAYOUT_HANDOFF, pg,
                          self.op("c10d::send", backward), peer=stage - 1)


def _layout_groups(world: int, extra: Sequence[tuple[str, str, list[int]]]) -> str:
    groups: list[dict[str, Any]] = [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [],
                                     "group_size": world}]
    groups += [{"pg_name": name, "pg_desc": desc, "ranks": ranks, "group_size": len(ranks)}
               for name, desc, ranks in extra]
    return json.dumps(groups, separators=(",", ":"))


def _mesh_groups(rank: int, inner: str) -> list[tuple[str, str, list[int]]]:
    """A (2, 2) device mesh ("dp", ``inner``) on 4 ranks: dp groups '1'
    {0, 2} and '2' {1, 3}, inner groups '3' {0, 1} and '4' {2, 3}; this rank's two."""
    dp = ("1", "mesh_dp", [0, 2]) if rank % 2 == 0 else ("2", "mesh_dp", [1, 3])
    low = ("3", f"mesh_{inner}", [0, 1]) if rank < 2 else ("4", f"mesh_{inner}", [2, 3])
    return [dp, low]


def layout_rank(kind: str, rank: int, world: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """One rank of a tiny job of ``kind`` (``LAYOUT_KINDS``): the layout's
    collectives as the real recordings hold them. ``tp_dp`` and ``pp_dp``
    are 4-rank (2, 2) meshes whose gloo ops name no group (a job of several
    groups over gloo records none), as real ones."""
    t = LayoutTrace()
    extra: list[tuple[str, str, list[int]]] = []
    if kind in ("ddp", "ddp_orphan"):
        t.broadcast("0")
        t.bucket("0", orphan=kind == "ddp_orphan")
        t.bucket("0", orphan=kind == "ddp_orphan")
    elif kind in ("fsdp2", "fsdp2_norm"):
        t.fsdp("0", 0)
        t.fsdp("0", 1)
        if kind == "fsdp2_norm":  # clip_grad_norm_ on DTensor parameters: a scalar
            t.tp_forward("0", "0", size=4)
    elif kind == "tp":  # a 1-D mesh over the whole world: the default group
        t.sharded_addmm(world)
        t.tp_forward("0", "0")
        t.tp_forward("0", "0")
        t.tp_backward("0", "0")
        t.tp_backward("0", "0")
    elif kind == "tp_dp":
        extra = _mesh_groups(rank, "tp")
        tp_group = extra[1][0]
        t.fsdp(None, 0)
        t.sharded_addmm(2)
        t.tp_forward(tp_group, None)
        t.tp_backward(tp_group, None)
        t.fsdp(None, 1)
    elif kind == "pp":
        t.stage(rank, world, "0")
    elif kind == "pp_dp":
        extra = _mesh_groups(rank, "pp")
        t.fsdp(None, 0)
        t.stage(rank // 2, 2, None)
    elif kind == "ep":
        call = t.op("c10d::alltoall_base_")
        t.comm("gloo:all_to_all", CollectiveType.ALL_TO_ALL, LAYOUT_ACTIVATION, "0", parent=call)
    elif kind == "mixed":
        t.tp_forward("0", "0")
        t.bucket("0")
    else:
        raise ValueError(kind)
    md = GlobalMetadata(version="0.0.4", attrs=[
        ("rank", "int64_val", rank), ("world_size", "int64_val", world),
        ("process_groups", "string_val", _layout_groups(world, extra)),
        ("step_start_micros", "int64_val", 0), ("step_end_micros", "int64_val", 10_000)])
    return md, t.nodes


def write_job_ranks(folder: Path, kind: str, world: int,
                    graph: Callable[[str, int, int], tuple[GlobalMetadata, list[ChakraNode]]],
                    ) -> list[Path]:
    """Every rank of a small ``kind`` job, ``graph(kind, rank, world)``, as
    ``folder/<kind>.<rank>.et`` (the folder made)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(world):
        md, nodes = graph(kind, rank, world)
        path = folder / f"{kind}.{rank}.et"
        write_et(path, md, nodes)
        paths.append(path)
    return paths


def write_layout_job(folder: Path, kind: str, world: int) -> list[Path]:
    """Every rank of a tiny ``kind`` job (``layout_rank``)."""
    return write_job_ranks(folder, kind, world, layout_rank)

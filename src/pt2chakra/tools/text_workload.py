"""ASTRA-sim text workloads -> one ``.et`` per NPU, and micro-benchmarks.

Text format (as ASTRA-sim and mlc-chakra's ``text_converter`` read it)::

    DATA                      # or MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA,
                              # HYBRID_DLRM <last_bottom_layer>, MICRO
    3                         # number of layers
    name -1 fwd_comp fwd_comm_type fwd_comm_size ig_comp ig_comm_type ig_comm_size \
        wg_comp wg_comm_type wg_comm_size update_time

Comm types are ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL or NONE; sizes
are bytes, compute times go to ``duration_micros`` as the reference does. The
dependency structure follows the reference converter, with two fixes: a
``NONE`` communication is left out (the reference writes an ALL_REDUCE of
size 0) and dependents attach to the compute node before it; and the layer
count on line 2 is checked. Every node is a device node (``is_cpu_op``
false), so the files suit today's ASTRA-sim as they are.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pt2chakra.atomic import StagedOutputs, check_prefix_outputs
from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import (
    CHAKRA_VERSION,
    Attr,
    ChakraNode,
    CollectiveType,
    GlobalMetadata,
    NodeType,
)
from pt2chakra.chakra.wire import I64_MAX
from pt2chakra.errors import InputError, renamed_keyword
from pt2chakra.files import gunzip, is_gzip, read_input

TEXT_COMM_TYPES = {
    "ALLREDUCE": CollectiveType.ALL_REDUCE,
    "ALLGATHER": CollectiveType.ALL_GATHER,
    "REDUCESCATTER": CollectiveType.REDUCE_SCATTER,
    "ALLTOALL": CollectiveType.ALL_TO_ALL,
    "NONE": None,
}
WORKLOADS = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_DLRM",
             "HYBRID_DLRM_ENHANCED", "MICRO")


class Layer:
    def __init__(self, path: str, lineno: int, line: str) -> None:
        col = line.split()
        if len(col) < 12:
            raise InputError(path, f"line {lineno}: a layer needs 12 columns (name, reserved, "
                             "then fwd/ig/wg compute, comm type, comm size, update time), "
                             f"got {len(col)}")
        self.name = col[0]
        try:
            self.fwd_comp, self.ig_comp_time, self.wg_comp_time = (int(col[2]), int(col[5]),
                                                                   int(col[8]))
            self.fwd_size, self.ig_size, self.wg_size = int(col[4]), int(col[7]), int(col[10])
        except ValueError:
            raise InputError(path, f"line {lineno}: compute times and comm sizes must be "
                             "integers") from None
        values = (self.fwd_comp, self.ig_comp_time, self.wg_comp_time, self.fwd_size,
                  self.ig_size, self.wg_size)
        if min(values) < 0:
            raise InputError(path, f"line {lineno}: negative time or size")
        if max(values) > I64_MAX:  # written as int64 attributes and durations
            raise InputError(path, f"line {lineno}: a time or size over int64's range")
        types = []
        for text in (col[3], col[6], col[9]):
            if text not in TEXT_COMM_TYPES:
                raise InputError(path, f"line {lineno}: unknown comm type {text!r}; known: "
                                 + ", ".join(TEXT_COMM_TYPES))
            types.append(text)
        self.fwd_type, self.ig_type, self.wg_type = types
        self.reset()

    def reset(self) -> None:
        self.fwd_node: int | None = None  # fwd compute
        self.fwd_comm: int | None = None
        self.ig_node: int | None = None
        self.ig_comm: int | None = None
        self.wg_node: int | None = None
        self.wg_comm: int | None = None


class WorkloadBuilder:
    def __init__(self) -> None:
        self.nodes: list[ChakraNode] = []

    def add(self, name: str, type_: NodeType, deps: Iterable[int | None], dur: int,
             attrs: list[Attr]) -> int:
        node_id = len(self.nodes)
        seen: list[int] = []
        for d in deps:
            if d is not None and d not in seen:
                seen.append(d)
        self.nodes.append(ChakraNode(id=node_id, name=name, type=type_, duration_micros=dur,
                                     data_deps=seen,
                                     attrs=[("is_cpu_op", "bool_val", False)] + attrs))
        return node_id

    def comp(self, layer: str, phase: str, dur: int, deps: Iterable[int | None]) -> int:
        return self.add(f"COMP_NODE_{layer}_{phase}", NodeType.COMP_NODE, deps, dur, [])

    def comm(self, layer: str, text_type: str, size: int, deps: Iterable[int | None],
             ) -> int | None:
        ctype = TEXT_COMM_TYPES[text_type]
        if ctype is None:
            return None
        return self.add(f"COMM_COLL_NODE_{layer}_{text_type}", NodeType.COMM_COLL_NODE, deps,
                         0, [("comm_type", "int64_val", int(ctype)),
                             ("comm_size", "int64_val", size)])


def _either(*ids: int | None) -> int | None:
    return next((i for i in ids if i is not None), None)


def _data(b: WorkloadBuilder, layers: list[Layer], passes: int) -> None:
    n = len(layers)
    for _ in range(passes):
        fwd = None
        for idx, layer in enumerate(layers):
            fwd = b.comp(layer.name, "FWD", layer.fwd_comp,
                         [layers[idx - 1].fwd_node if idx else None, layer.wg_comm])
            layer.fwd_node = fwd
        for idx, layer in enumerate(reversed(layers)):
            wg = b.comp(layer.name, "BWD_WG", layer.wg_comp_time,
                        [fwd if idx == 0 else layers[n - idx].ig_node])
            layer.wg_comm = b.comm(layer.name, layer.wg_type, layer.wg_size, [wg])
            if layer.wg_comm is None:
                layer.wg_comm = wg
            if idx != n - 1:
                layer.ig_node = b.comp(layer.name, "BWD_IG", layer.ig_comp_time, [wg])


def _model(b: WorkloadBuilder, layers: list[Layer], passes: int, hybrid: bool,
           ig_suffix: str = "") -> None:
    n = len(layers)
    for _ in range(passes):
        out = None
        for idx, layer in enumerate(layers):
            prev = layers[idx - 1].fwd_comm if idx else None
            carried = layer.wg_comm if hybrid else layer.wg_node
            deps = [carried, prev] if hybrid else [prev, carried]
            fwd = b.comp(layer.name, "FWD", layer.fwd_comp, deps)
            layer.fwd_node = fwd
            layer.fwd_comm = _either(b.comm(layer.name, layer.fwd_type, layer.fwd_size, [fwd]),
                                     fwd)
            out = layer.fwd_comm
        for idx, layer in enumerate(reversed(layers)):
            if idx == 0:
                deps = [out]
            else:
                later = layers[n - idx]
                deps = [later.wg_node, later.ig_comm]
            ig = b.comp(layer.name, "BWD_IG", layer.ig_comp_time, deps)
            layer.ig_comm = ig
            if idx != n - 1:
                name = layer.name + ig_suffix
                layer.ig_comm = _either(b.comm(name, layer.ig_type, layer.ig_size, [ig]), ig)
            wg = b.comp(layer.name, "BWD_WG", layer.wg_comp_time, [ig])
            layer.wg_node = wg
            if hybrid:
                layer.wg_comm = _either(b.comm(layer.name, layer.wg_type, layer.wg_size, [wg]),
                                        wg)


def _dlrm(b: WorkloadBuilder, layers: list[Layer], passes: int, last_bottom: int) -> None:
    n = len(layers)
    for _ in range(passes):
        fwd = None
        for idx, layer in enumerate(layers):
            deps = [_either(layer.wg_comm, layer.wg_node),
                    layers[idx - 1].fwd_node if idx else None,
                    layers[0].fwd_comm if idx == last_bottom else None]
            fwd = b.comp(layer.name, "FWD", layer.fwd_comp, deps)
            layer.fwd_node = fwd
            if layer.fwd_type == "ALLTOALL":
                layer.fwd_comm = b.comm(layer.name, layer.fwd_type, layer.fwd_size, [fwd])
        for idx, layer in enumerate(reversed(layers)):
            deps = [fwd] if idx == 0 else [layers[n - idx].ig_node, layers[n - idx - 1].ig_comm]
            wg = b.comp(layer.name, "BWD_WG", layer.wg_comp_time, deps)
            layer.wg_node = wg
            layer.wg_comm = b.comm(layer.name, layer.wg_type, layer.wg_size, [wg])
            ig = None
            if idx != n - 1:
                ig = b.comp(layer.name, "BWD_IG", layer.ig_comp_time, [wg])
                layer.ig_node = ig
            if n - idx - 1 == last_bottom + 1:
                first = layers[0]
                first.ig_comm = b.comm(first.name, first.ig_type, first.ig_size, [ig])


def _micro(b: WorkloadBuilder, layers: list[Layer], passes: int) -> None:
    for _ in range(passes):
        for layer in layers:
            b.comm(layer.name, layer.wg_type, layer.wg_size, [])


def parse(path: str | os.PathLike[str]) -> tuple[str, list[str], list[Layer], str]:
    """(workload type, header tokens, layers, file text)."""
    path = os.fspath(path)
    data = read_input(path)
    if is_gzip(data):
        data = gunzip(path, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"cannot read: not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start})") from None
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if len(lines) < 2:
        raise InputError(path, "expected a workload type line and a layer count line")
    header = lines[0][1].split()
    kind = header[0]
    if kind not in WORKLOADS:
        raise InputError(path, f"line {lines[0][0]}: unknown workload type {kind!r}; known: "
                         + ", ".join(WORKLOADS))
    try:
        count = int(lines[1][1].split()[0])
    except ValueError:
        raise InputError(path, f"line {lines[1][0]}: expected the number of layers") from None
    layers = [Layer(path, i, line) for i, line in lines[2:]]
    if len(layers) != count or count < 1:
        raise InputError(path, f"line {lines[1][0]} says {count} layers, the file has "
                         f"{len(layers)}")
    return kind, header, layers, text


def build(path: str | os.PathLike[str], passes: int = 1) -> tuple[GlobalMetadata,
                                                                 list[ChakraNode]]:
    """The nodes of one NPU (every NPU runs the same graph)."""
    kind, header, layers, text = parse(path)
    if passes < 1:
        raise InputError(os.fspath(path), "--passes must be at least 1")
    b = WorkloadBuilder()
    if kind == "DATA":
        _data(b, layers, passes)
    elif kind == "MODEL":
        _model(b, layers, passes, hybrid=False)
    elif kind in ("HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA"):
        _model(b, layers, passes, hybrid=True,
               ig_suffix="_IG_COMM_" if kind == "HYBRID_DATA_MODEL" else "")
    elif kind.startswith("HYBRID_DLRM"):
        try:
            last_bottom = int(header[1])
        except (IndexError, ValueError):
            raise InputError(os.fspath(path), f"{kind} needs the last bottom layer index after "
                             "it on line 1") from None
        if not 0 <= last_bottom < len(layers) - 1:
            raise InputError(os.fspath(path), f"last bottom layer {last_bottom} is out of range")
        _dlrm(b, layers, passes, last_bottom)
    else:
        _micro(b, layers, passes)
    metadata = GlobalMetadata(version=CHAKRA_VERSION, attrs=[
        ("generator", "string_val", "pt2chakra from-text"), ("workload", "string_val", kind),
        ("input_file", "string_val", text), ("passes", "int64_val", passes)])
    return metadata, b.nodes


def _check_npus(npus: int, prefix: str, inputs: list[str]) -> None:
    if npus < 1:
        raise InputError(prefix, "--npus must be at least 1")
    check_prefix_outputs(inputs, prefix)


def write_npus(metadata: GlobalMetadata, nodes: list[ChakraNode], npus: int,
                prefix: str) -> list[str]:
    """All or nothing: the files are staged and moved into place together."""
    _check_npus(npus, prefix, [])
    written = []
    with StagedOutputs() as staged:
        for npu in range(npus):
            out = f"{prefix}.{npu}.et"
            md = GlobalMetadata(version=metadata.version, attrs=metadata.attrs + [
                ("rank", "int64_val", npu), ("world_size", "int64_val", npus)])
            try:
                write_et(staged.stage(out), md, nodes)
            except OSError as exc:  # name the target, not the temp file
                raise OSError(exc.errno, exc.strerror, out) from exc
            except InputError as exc:
                raise InputError(out, exc.problem) from exc
            written.append(out)
        staged.commit()
    return written


def from_text(path: str | os.PathLike[str], npus: int, prefix: str | os.PathLike[str],
              passes: int = 1, consumer: str | None = None, *,
              profile: str | None = None) -> list[str]:
    """Write ``<prefix>.<npu>.et`` for every NPU; returns the paths.
    ``consumer`` (``profile``: its old name) changes nothing: the output
    already has no METADATA or CPU nodes, as ASTRA-sim needs."""
    renamed_keyword(consumer, profile, "from_text", "consumer", "profile")
    _check_npus(npus, os.fspath(prefix), [os.fspath(path)])
    metadata, nodes = build(path, passes)
    return write_npus(metadata, nodes, npus, os.fspath(prefix))


def collective_type(name: str) -> CollectiveType:
    key = name.strip().upper()
    if key in TEXT_COMM_TYPES and TEXT_COMM_TYPES[key] is not None:
        return TEXT_COMM_TYPES[key]  # type: ignore[return-value]
    try:
        return CollectiveType[key.replace("-", "_")]
    except KeyError:
        raise InputError(name, "unknown collective; known: "
                         + ", ".join(t.name for t in CollectiveType)) from None

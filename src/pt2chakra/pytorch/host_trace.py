"""Load a PyTorch host execution trace (ET) into a ``HostTrace``: the sliced
reader (``host_stream``) where the observer's layout allows it, else the whole
file at once; both decode with ``host_decode``. A file cut off mid-array is
refused with a hint, or read up to its last complete op with ``repair``."""

from __future__ import annotations

import logging
from os import PathLike

from pt2chakra.errors import InputError
from pt2chakra.files import gc_paused
from pt2chakra.pytorch import host_stream  # looked up per call: tests swap in the whole-file path
from pt2chakra.pytorch.host_decode import (
    SCHEMA_PEEK,
    SCHEMA_PEEK_BYTES,
    HostHeader,
    check_structure,
    decode_doc,
    decode_nodes,
    layout_for,
    normalise,
    process_groups_of,
)
from pt2chakra.pytorch.json_input import decode, read_json_bytes
from pt2chakra.pytorch.records import HostTrace

log = logging.getLogger(__name__)


def load_host_trace(path: str | PathLike[str], repair: bool = False) -> HostTrace:
    """Read a host ET JSON (plain or gzip) and return it normalised.

    A file cut off mid-array is refused with a hint, or, with ``repair``,
    read up to its last complete node (see ``pt2chakra.pytorch.repair``)."""
    if not repair:
        streamed = host_stream.load_streamed(path)  # the observer's layout, a slice at a time
        if streamed is not None:
            return streamed
    where = str(path)
    if repair:
        return _load_repaired(where)
    try:
        return _load_bytes(where, read_json_bytes(path))
    except InputError as e:
        if not e.problem.startswith("truncated"):
            raise
        from pt2chakra.pytorch.repair import REPAIR_HINT

        raise InputError(where, f"{e.problem}; {REPAIR_HINT}") from None


def _load_repaired(where: str) -> HostTrace:
    from pt2chakra.pytorch import repair

    data = repair.read_partial(where)
    try:
        return _load_bytes(where, data)
    except InputError as e:
        if not e.problem.startswith("truncated"):
            raise
    whole, tail = repair.close_truncated(where, data)
    del data
    trace = _load_bytes(where, whole)
    orphans = repair.hang_orphans_from_root(trace.ops)
    trace.repair = repair.repair_info(trace.ops, tail, orphans)
    log.warning("%s: truncated; recovered %d complete ops, lost the %d-byte tail, hung %d "
                "orphaned ops from the root", where, len(trace.ops), tail, orphans)
    return trace


def _load_bytes(where: str, data: bytes) -> HostTrace:
    head = SCHEMA_PEEK.search(data, 0, SCHEMA_PEEK_BYTES)
    with gc_paused():
        if head is not None and data.lstrip()[:1] == b"{":
            layout = layout_for(where, head.group(1).decode())
            doc = decode_doc(where, data, layout)
            schema, pid, start_ts, finish_ts, raw_nodes = (
                doc.schema, doc.pid, doc.start_ts, doc.finish_ts, doc.nodes)
        else:
            header = decode(where, data, HostHeader)
            if header.schema is None:
                raise InputError(where, "no top-level field `schema`: not a PyTorch host execution trace?")
            layout = layout_for(where, header.schema)
            if len(header.nodes) == 0:
                raise InputError(where, "no top-level field `nodes`: not a PyTorch host execution trace?")
            schema, pid, start_ts, finish_ts = header.schema, header.pid, header.start_ts, header.finish_ts
            raw_nodes = decode_nodes(where, header.nodes, header.schema, layout)
            del header
        del data
        if schema is None:
            raise InputError(where, "no top-level field `schema`: not a PyTorch host execution trace?")
        if raw_nodes is None:
            raise InputError(where, "no top-level field `nodes`: not a PyTorch host execution trace?")
        ops = normalise(where, raw_nodes, layout)
        del raw_nodes
        check_structure(where, ops)
    return HostTrace(
        path=where,
        schema=schema,
        pid=pid,
        start_ts=start_ts,
        finish_ts=finish_ts,
        ops=ops,
        process_groups=process_groups_of(where, ops),
    )

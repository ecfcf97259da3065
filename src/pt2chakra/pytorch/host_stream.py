"""Streaming host ET loading: the observer's own layout, a slice of nodes at a time.

The whole-file loader holds the decompressed JSON (about 1 KB per op: 1 GB
for a million ops) and every decoded node at once, on top of the ops it
builds. The observer writes one node per block, so the ``nodes`` array is
read a slice of whole nodes at a time (:mod:`pt2chakra.pytorch.json_slices`)
and each slice is decoded and normalised by the whole-file loader's own
functions, so the ops are the same; the header and the trailer (``schema``,
``pid``, ``finish_ts``...) are decoded as a document whose ``nodes`` is
empty.

Anything else (another layout, minified JSON, a tar member, a byte-order
mark) and every error make :func:`load_streamed` return None: the caller
then runs the whole-file loader, which gives its result or names the
problem as always.
"""

from __future__ import annotations

from os import PathLike

from pt2chakra.files import gc_paused
from pt2chakra.pytorch.host_decode import (
    SCHEMA_LAYOUTS,
    SCHEMA_PEEK,
    SCHEMA_PEEK_BYTES,
    Layout,
    SharedIO,
    check_structure,
    decode_doc,
    process_groups_of,
    schema_version,
    slice_ops,
)
from pt2chakra.pytorch.json_slices import NOT_STREAMABLE, NotSliceable, read_sliced
from pt2chakra.pytorch.records import HostOp, HostTrace


def load_streamed(path: str | PathLike[str]) -> HostTrace | None:
    """The host trace at ``path``, read a slice of nodes at a time; None when
    it is not laid out as the observer writes it, or has any problem (the
    whole-file loader then reads it, or names the problem)."""
    where = str(path)
    try:
        with gc_paused():
            return _load(where)
    except NOT_STREAMABLE:
        return None


def _load(where: str) -> HostTrace:
    layouts: list[Layout] = []

    def check_head(first: bytes) -> None:
        """As the whole-file loader: ``schema`` near the start picks the layout."""
        peek = SCHEMA_PEEK.search(first, 0, SCHEMA_PEEK_BYTES)
        if peek is None or first.lstrip()[:1] != b"{":
            raise NotSliceable
        layout = SCHEMA_LAYOUTS.get(schema_version(where, peek.group(1).decode()))
        if layout is None:  # an unknown version: the whole-file loader warns and picks
            raise NotSliceable
        layouts.append(layout)

    ops: list[HostOp] = []
    shared: SharedIO = {}

    def on_slice(nodes: memoryview) -> None:
        ops.extend(slice_ops(where, nodes, layouts[0], shared))

    head, trailer = read_sliced(where, b"nodes", check_head, on_slice)
    shared.clear()  # each op keeps the values it shares
    doc = decode_doc(where, head + b'"nodes": []' + trailer, layouts[0])
    if doc.schema is None:
        raise NotSliceable
    check_structure(where, ops)
    return HostTrace(path=where, schema=doc.schema, pid=doc.pid, start_ts=doc.start_ts,
                     finish_ts=doc.finish_ts, ops=ops,
                     process_groups=process_groups_of(where, ops))

"""Streaming host ET loading: the observer's own layout, a slice of nodes at a time.

The whole-file loader holds the decompressed JSON (about 1 KB per op: 1 GB
for a million ops) and every decoded node at once, on top of the ops it
builds. The observer writes one node per block, each opening with ``{`` and
closing with ``}`` alone on a line at the node indentation, so the ``nodes``
array splits between nodes at ``\\n<indent>},\\n<indent>{`` (a JSON string
cannot hold a raw newline, so that text is never inside one). Here the file
is decompressed a chunk at a time, cut at the last such boundary, and each
slice of nodes is decoded and normalised by the whole-file loader's own
functions, so the ops are the same; the header and the trailer (``schema``,
``pid``, ``finish_ts``...) are decoded as a document whose ``nodes`` is
empty.

Anything else (another layout, minified JSON, a tar member, a byte-order
mark) and every error make :func:`load_streamed` return None: the caller
then runs the whole-file loader, which gives its result or names the
problem as always.
"""

from __future__ import annotations

import re
import zlib
from os import PathLike

import msgspec

from pt2chakra.errors import InputError
from pt2chakra.files import open_input
from pt2chakra.pytorch.host_trace import (
    _SCHEMA_PEEK,
    SCHEMA_LAYOUTS,
    SCHEMA_PEEK_BYTES,
    Layout,
    _check_structure,
    _decode_doc,
    _decode_nodes,
    _normalise,
    _process_groups,
    schema_version,
)
from pt2chakra.pytorch.json_input import gc_paused
from pt2chakra.pytorch.records import HostOp, HostTrace

# Decompressed bytes read at a time: large enough that decoding a slice
# costs what decoding the whole would per node, small next to a big trace.
READ_CHUNK = 8 << 20
_NODES_KEY = re.compile(rb'"nodes"\s*:\s*\[')
_FIRST_NODE = re.compile(rb"[ \t\r]*\n( +)\{")  # the line that opens the first node


class _NotStreamable(Exception):
    """Not the observer's layout: the whole-file loader decides."""


def load_streamed(path: str | PathLike[str]) -> HostTrace | None:
    """The host trace at ``path``, read a slice of nodes at a time; None when
    it is not laid out as the observer writes it, or has any problem (the
    whole-file loader then reads it, or names the problem)."""
    where = str(path)
    try:
        with gc_paused():
            return _load(where)
    except (_NotStreamable, InputError, OSError, EOFError, zlib.error, ValueError,
            msgspec.MsgspecError):
        return None


def _load(where: str) -> HostTrace:
    stream, _gzipped = open_input(where)
    with stream:
        buf = stream.read(READ_CHUNK)
        key = _NODES_KEY.search(buf)
        peek = _SCHEMA_PEEK.search(buf, 0, SCHEMA_PEEK_BYTES)
        if key is None or peek is None or buf.lstrip()[:1] != b"{":
            raise _NotStreamable
        head = buf[:key.start()]
        layout = SCHEMA_LAYOUTS.get(schema_version(where, peek.group(1).decode()))
        if layout is None:  # an unknown version: the whole-file loader warns and picks
            raise _NotStreamable
        first = _FIRST_NODE.match(buf, key.end())
        if first is None:
            raise _NotStreamable
        indent = first.group(1)
        sep = b"\n" + indent + b"},\n" + indent + b"{"
        data = buf[first.end() - 1:]  # from the first node's "{"
        del buf
        ops: list[HostOp] = []
        while True:
            more = stream.read(READ_CHUNK)
            if not more:
                break
            data += more
            cut = data.rfind(sep)
            if cut >= 0:  # nodes up to their "}", the rest from the next "{"
                ops += _ops(where, layout, data[:cut + len(indent) + 2])
                data = data[cut + len(sep) - 1:]
    last = re.compile(rb"\n" + re.escape(indent) + rb"\}\s*\]").search(data)
    if last is None:
        raise _NotStreamable
    trailer = data[last.end():]
    if _NODES_KEY.search(trailer):
        raise _NotStreamable  # a second "nodes": the whole-file decoder keeps the last
    ops += _ops(where, layout, data[:last.start() + len(indent) + 2])
    doc = _decode_doc(where, head + b'"nodes": []' + trailer, layout)
    if doc.schema is None:
        raise _NotStreamable
    _check_structure(where, ops)
    return HostTrace(path=where, schema=doc.schema, pid=doc.pid, start_ts=doc.start_ts,
                     finish_ts=doc.finish_ts, ops=ops,
                     process_groups=_process_groups(where, ops))


def _ops(where: str, layout: Layout, nodes_text: bytes) -> list[HostOp]:
    """One slice of whole nodes (``{...},\\n  {...}``), decoded and normalised."""
    raw = _decode_nodes(where, msgspec.Raw(b"[" + nodes_text + b"]"), "", layout)
    return _normalise(where, raw, layout)

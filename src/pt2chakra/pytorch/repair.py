"""Recover a host ET cut off mid-array (the observer was not stopped cleanly).

The observer writes ``{"schema": ..., "nodes": [ {...}, {...}, ...`` one
node as each op completes, so a cut file holds every op that completed
before the cut, whole, and then a partial node. ``close_truncated`` finds
the last complete node and closes the array and the document after it;
msgspec is the judge of "complete" (a candidate end that is not a node's
closing brace fails to decode), so no hand-written JSON scanner is needed.

Ops complete before their callers, so the recovered callees of ops still
running at the cut name a caller that is not in the file: they are hung
from the root (``parent`` 0, no caller) and counted.
"""

from __future__ import annotations

import zlib

import msgspec

from pt2chakra.errors import InputError
from pt2chakra.files import is_gzip, read_input
from pt2chakra.pytorch.json_input import UTF8_BOM
from pt2chakra.pytorch.records import HostOp, RepairInfo

# What closes the nodes array and the document after the last whole node.
CLOSING = b"]}"
# A node holds a few dozen nested objects (attrs, inputs, outputs); the last
# whole node's brace is found well within this many tries from the cut.
MAX_CLOSING_TRIES = 4096
# gzip's window bits for zlib (header and trailer expected, RFC 1952).
GZIP_WBITS = 16 + zlib.MAX_WBITS

REPAIR_HINT = "use --repair to recover the complete ops before the cut"


def read_partial(path: str) -> bytes:
    """The JSON text of ``path``, as much as there is: a gzip stream cut
    short is inflated up to its cut instead of refused."""
    data = read_input(path)
    if is_gzip(data):
        inflater = zlib.decompressobj(GZIP_WBITS)
        try:
            data = inflater.decompress(data)
        except zlib.error as e:
            raise InputError(path, f"corrupt gzip data ({e}), not only truncated") from None
    return data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data


def _is_json(candidate: bytes) -> bool:
    try:
        msgspec.json.decode(candidate)
    except msgspec.DecodeError:
        return False
    return True


def close_truncated(where: str, data: bytes) -> tuple[bytes, int]:
    """(a whole document holding every complete node, bytes of the cut tail)."""
    start = data.find(b'"nodes"')
    if start < 0:
        raise InputError(where, "truncated before its `nodes` array: nothing to recover")
    first = data.find(b"[", start)
    end = len(data)
    for _ in range(MAX_CLOSING_TRIES):
        brace = data.rfind(b"}", first, end)
        if brace < 0:
            break
        candidate = data[:brace + 1] + CLOSING
        if _is_json(candidate):
            return candidate, len(data) - brace - 1
        end = brace
    empty = data[:first + 1] + CLOSING
    if first >= 0 and _is_json(empty):
        return empty, len(data) - first - 1
    raise InputError(where, "truncated, and no complete node could be found before the cut")


def hang_orphans_from_root(ops: list[HostOp]) -> int:
    """Ops whose caller was cut off become top-level; returns how many."""
    ids = {op.id for op in ops}
    orphans = 0
    for op in ops:
        if op.parent and op.parent not in ids:
            op.parent = 0
            orphans += 1
    return orphans


def repair_info(ops: list[HostOp], tail_bytes: int, orphans: int) -> RepairInfo:
    return RepairInfo(ops_recovered=len(ops), tail_bytes_lost=tail_bytes,
                      orphans_to_root=orphans)

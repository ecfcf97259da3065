"""The one read path and the one write path of ``.et`` files.

``read_et`` is :func:`pt2chakra.chakra.decode.decode_et_file` (any tool's
``.et``, plain or gzip); ``write_et`` encodes atomically and turns an
encoder refusal into ``InputError`` naming the output, so no caller leaks a
traceback. Framing, truncation, garbage and zero-length messages raise
``InputError`` on reading.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from pt2chakra.chakra.encode import NodeItem, encode_et_file
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.errors import InputError


def read_et(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """(metadata, lazy iterator of nodes) of any ``.et`` / ``.et.gz`` file."""
    from pt2chakra.chakra.decode import decode_et_file  # protobuf: imported only when reading

    return decode_et_file(path)


def read_et_whole(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """``read_et`` with every node in memory (a ``RankSet.load`` reader)."""
    metadata, nodes = read_et(path)
    return metadata, list(nodes)


def write_et(path: str | os.PathLike[str], metadata: GlobalMetadata,
             nodes: Iterable[NodeItem]) -> int:
    """Atomic ``.et`` writer (gzip when the name ends in ``.gz``); returns the
    node count. Items may be ``ChakraNode``s, already-encoded Node messages or
    ``FramedNodes``."""
    try:
        return encode_et_file(path, metadata, nodes)
    except ValueError as exc:
        raise InputError(os.fspath(path), f"cannot encode: {exc}") from exc

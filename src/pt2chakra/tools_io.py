"""Reading and writing ``.et`` files for the companion tools.

``read`` is :func:`pt2chakra.chakra_io.read_et` made tolerant of one thing the
reference toolchain does: mlc-chakra's converter writes a ``GlobalMetadata``
without ``version``. Everything else (framing, truncation, garbage,
zero-length messages) is checked by ``chakra_io`` and raises ``InputError``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from google.protobuf.message import DecodeError

from pt2chakra import chakra_io
from pt2chakra import chakra_schema as pb
from pt2chakra.model import ChakraNode, GlobalMetadata, InputError


def _metadata(path: str, where: str, data: bytes) -> GlobalMetadata:
    try:
        fields = chakra_io._wire_fields(data)
    except ValueError as exc:
        raise InputError(path, f"{where} is not a GlobalMetadata: {exc}") from exc
    for field, wire in fields:
        if field not in (1, 2) or wire != chakra_io._WIRE_LEN:
            raise InputError(path, f"{where} is not a GlobalMetadata: it has field {field} "
                             f"with wire type {wire} (only version=1, attr=2 exist)")
    try:
        md = chakra_io.from_proto(pb.GlobalMetadata.FromString(data))
    except DecodeError as exc:
        raise InputError(path, f"{where} is not a GlobalMetadata: {exc}") from exc
    assert isinstance(md, GlobalMetadata)
    return md


def read(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """(metadata, lazy iterator of nodes) of an ``.et`` / ``.et.gz`` file.

    Accepts metadata without a version (mlc-chakra writes none)."""
    path = os.fspath(path)
    frames = chakra_io._frames(path)
    first = next(frames, None)
    if first is None:
        raise InputError(path, "empty file: expected a GlobalMetadata message first")
    _index, where, data = first
    return _metadata(path, where, data), chakra_io._decode_nodes(path, frames)


def write(path: str | os.PathLike[str], metadata: GlobalMetadata,
          nodes: Iterable[ChakraNode]) -> int:
    """Atomic ``.et`` writer (gzip when the name ends in ``.gz``); returns node count."""
    try:
        return chakra_io.write_et(path, metadata, nodes)
    except ValueError as exc:
        raise InputError(os.fspath(path), f"cannot encode: {exc}") from exc


def attr_dict(attrs: Iterable[tuple[str, str, Any]]) -> dict[str, Any]:
    """name -> value (the last one wins)."""
    return {name: value for name, _member, value in attrs}


def attr_members(attrs: Iterable[tuple[str, str, Any]]) -> dict[str, tuple[str, Any]]:
    return {name: (member, value) for name, member, value in attrs}


def is_gpu(attrs: dict[str, Any]) -> bool:
    """A node is a GPU/device op when ``is_cpu_op`` is false or absent (the
    simulator's reading: absent means false)."""
    return not attrs.get("is_cpu_op", False)


def rank_of(metadata: GlobalMetadata, path: str, default: int) -> int:
    """Rank from the metadata, else from a ``<prefix>.<rank>.et`` name, else ``default``."""
    value = attr_dict(metadata.attrs).get("rank")
    if isinstance(value, int):
        return value
    base = os.path.basename(path)
    for suffix in (".et.gz", ".et"):
        if base.endswith(suffix):
            stem = base[: -len(suffix)]
            tail = stem.rsplit(".", 1)[-1]
            if "." in stem and tail.isdigit():
                return int(tail)
    return default

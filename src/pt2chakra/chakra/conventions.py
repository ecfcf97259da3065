"""Conventions every reader of a Chakra trace shares: attributes by name,
device or host node, the rank of a file.

Each rule lives here once; the simulator, ``validate``, ``timeline``,
``inspect`` and the exports call it instead of re-deriving it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from pt2chakra.chakra.records import GlobalMetadata


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

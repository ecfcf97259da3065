"""Why a dependency exists: the edge kinds the converter writes, and how any
reader decodes them from a node.

Each entry of ``data_deps`` has a kind, named in the parallel string-list
attribute ``data_dep_kinds``. Readers call :func:`dep_kinds_of` instead of
reading the attribute themselves, so that every tool treats a trace without
kinds (other tools' ``.et``) the same way.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any


class EdgeKind(enum.IntEnum):
    """Why a dependency exists; lower value = less reliable (dropped first
    when the user asks to break cycles)."""

    INTER_THREAD = 0  # inferred from timing across CPU threads
    GPU_SYNC = 1  # GPU op -> CPU op after a device/stream/event synchronize
    STREAM_WAIT = 2  # GPU op -> GPU op on another stream (cudaStreamWaitEvent)
    THREAD_ORDER = 3  # previous op -> next op on one CPU thread
    CALLER = 4  # caller -> callee (parent before child)
    LAUNCH = 5  # CPU op -> GPU op it launched
    STREAM_ORDER = 6  # GPU op -> next GPU op on the same stream


# Node attribute naming the kind of each entry of ``data_deps`` (same order),
# so users can inspect and filter dependencies by why they exist.
DEP_KINDS_ATTR = "data_dep_kinds"

# EdgeKind -> the name written in ``data_dep_kinds``.
EDGE_KIND_NAMES: dict[EdgeKind, str] = {kind: kind.name.lower() for kind in EdgeKind}

# The kind of a dependency whose writer recorded none (other tools' .et).
UNRECORDED_KIND = "data"


def recorded_dep_kinds(attrs: Mapping[str, Any], count: int) -> list[str] | None:
    """The kinds the writer recorded for a node's ``count`` data deps, or
    None when there are none usable (absent, not strings, wrong length)."""
    kinds = attrs.get(DEP_KINDS_ATTR)
    if isinstance(kinds, (list, tuple)) and len(kinds) == count and \
            all(isinstance(k, str) for k in kinds):
        return list(kinds)
    return None


def dep_kinds_of(data_deps: list[int], attrs: Mapping[str, Any]) -> list[str]:
    """One kind per entry of ``data_deps``: the recorded ones, else
    ``UNRECORDED_KIND`` for all."""
    kinds = recorded_dep_kinds(attrs, len(data_deps))
    return kinds if kinds is not None else [UNRECORDED_KIND] * len(data_deps)

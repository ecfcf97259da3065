"""Typed records of a Chakra execution trace (``et_def.proto``): nodes,
metadata and the enums consumers read; a node's attributes by name, and the
schema version we write.

Structs are ``msgspec.Struct`` with ``gc=False``: millions of them are created
and the cyclic collector would otherwise dominate run time.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import msgspec


class NodeType(enum.IntEnum):
    """Values of Chakra's ``NodeType`` enum (et_def.proto)."""

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CollectiveType(enum.IntEnum):
    """Values of Chakra's ``CollectiveCommType`` enum (et_def.proto)."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


# Attribute value: (name, chakra oneof member, python value). The member is the
# AttributeProto field name, e.g. "bool_val", "int64_val", "string_list".
Attr = tuple[str, str, Any]


class ChakraNode(msgspec.Struct, gc=False):
    id: int
    name: str
    type: NodeType
    start_time_micros: int = 0
    duration_micros: int = 0
    ctrl_deps: list[int] = []
    data_deps: list[int] = []
    inputs: tuple[str, str, str] | None = None  # IOInfo values/shapes/types
    outputs: tuple[str, str, str] | None = None
    attrs: list[Attr] = []


class GlobalMetadata(msgspec.Struct, gc=False):
    version: str
    attrs: list[Attr] = []


# The Chakra schema version we write (what mlc-chakra's converter writes).
CHAKRA_VERSION = "0.0.4"


def attr_dict(attrs: Iterable[tuple[str, str, Any]]) -> dict[str, Any]:
    """name -> value (the last one wins)."""
    return {name: value for name, _member, value in attrs}


def attr_members(attrs: Iterable[tuple[str, str, Any]]) -> dict[str, tuple[str, Any]]:
    return {name: (member, value) for name, member, value in attrs}

"""``.et`` <-> JSON, both ways, streaming.

The JSON is one valid document (unlike the reference jsonizer, which
concatenates objects)::

    {"format":"pt2chakra.et.json/1","metadata":{...},"nodes":[
    {...node...},
    {...node...}
    ]}

one node per line, so both directions stream: a million-node trace never
sits in memory. Fields mirror ``et_def.proto``; an attribute is
``{"name": N, "<oneof member>": value}`` (no member key when none is set),
``bytes`` values are base64, non-finite floats are the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"``. ``from_json`` also accepts the same document
reformatted (e.g. pretty-printed), reading it whole.

Round trip ``.et -> JSON -> .et`` is byte-identical for files written by
pt2chakra's encoder (and by protobuf's own serializer); other writers give the
same nodes (``doc_string`` and unknown fields are not kept).
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from pt2chakra.atomic import atomic_output, check_outputs
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata, NodeType
from pt2chakra.chakra.schema import ATTR_MEMBERS
from pt2chakra.errors import InputError
from pt2chakra.files import open_input

FORMAT = "pt2chakra.et.json/1"
_HEAD_PREFIX = b'{"format":"' + FORMAT.encode() + b'",'
_NODES_OPEN = b',"nodes":['
_TAIL = b"]}"
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_MEMBERS = frozenset(ATTR_MEMBERS)


# --------------------------------------------------------------------------
# To JSON
# --------------------------------------------------------------------------


def _float_out(value: float) -> Any:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _value_out(member: str, value: Any) -> Any:
    if member.startswith(("double", "float")):
        return [_float_out(v) for v in value] if member.endswith("_list") else _float_out(value)
    if member.startswith("bytes"):
        enc = base64.b64encode
        return [enc(v).decode() for v in value] if member.endswith("_list") else enc(value).decode()
    return value


def attr_to_json(attr: Attr) -> dict[str, Any]:
    name, member, value = attr
    if not member:
        return {"name": name}
    return {"name": name, member: _value_out(member, value)}


def _io_out(info: tuple[str, str, str]) -> dict[str, str]:
    return {"values": info[0], "shapes": info[1], "types": info[2]}


def node_to_json(node: ChakraNode) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": node.id, "name": node.name, "type": node.type.name,
                           "start_time_micros": node.start_time_micros,
                           "duration_micros": node.duration_micros,
                           "ctrl_deps": node.ctrl_deps, "data_deps": node.data_deps}
    if node.inputs is not None:
        doc["inputs"] = _io_out(node.inputs)
    if node.outputs is not None:
        doc["outputs"] = _io_out(node.outputs)
    doc["attrs"] = [attr_to_json(a) for a in node.attrs]
    return doc


def metadata_to_json(md: GlobalMetadata) -> dict[str, Any]:
    return {"version": md.version, "attrs": [attr_to_json(a) for a in md.attrs]}


def write_json(path: str | os.PathLike[str], metadata: GlobalMetadata,
               nodes: Iterable[ChakraNode]) -> int:
    """Write the JSON document atomically; returns the node count."""
    count = 0
    with atomic_output(path) as out:
        out.write(_HEAD_PREFIX[:-1] + b',"metadata":'
                  + orjson.dumps(metadata_to_json(metadata)) + _NODES_OPEN + b"\n")
        prev: bytes | None = None
        batch: list[bytes] = []
        for node in nodes:
            if prev is not None:
                batch.append(prev + b",\n")
                if len(batch) >= 1024:
                    out.write(b"".join(batch))
                    batch.clear()
            prev = orjson.dumps(node_to_json(node))
            count += 1
        if prev is not None:
            batch.append(prev + b"\n")
        batch.append(_TAIL + b"\n")
        out.write(b"".join(batch))
    return count


def jsonize(et_path: str | os.PathLike[str], json_path: str | os.PathLike[str]) -> int:
    """``.et`` -> JSON document; returns the node count. Refuses (``InputError``)
    to overwrite the input."""
    check_outputs([et_path], [json_path])
    metadata, nodes = read_et(et_path)
    return write_json(json_path, metadata, nodes)


# --------------------------------------------------------------------------
# From JSON
# --------------------------------------------------------------------------


class _Bad(Exception):
    pass


def _float_in(value: Any) -> float:
    if isinstance(value, str):
        if value in _NONFINITE:
            return _NONFINITE[value]
        raise _Bad(f"float value {value!r} (only NaN, Infinity, -Infinity as strings)")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"expected a number, got {value!r}")
    return float(value)


def _scalar_in(member: str, value: Any) -> Any:
    if member.startswith(("double", "float")):
        return _float_in(value)
    if member.startswith("bytes"):
        if not isinstance(value, str):
            raise _Bad(f"{member}: expected base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError as exc:
            raise _Bad(f"{member}: bad base64 ({exc})") from None
    if member.startswith("string"):
        if not isinstance(value, str):
            raise _Bad(f"{member}: expected a string, got {value!r}")
        return value
    if member.startswith("bool"):
        if not isinstance(value, bool):
            raise _Bad(f"{member}: expected true/false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{member}: expected an integer, got {value!r}")
    low, high = _INT_RANGES.get(member.removesuffix("s").removesuffix("_val"), _INT_RANGES["int64"])
    if not low <= value <= high:
        raise _Bad(f"{member}: {value} is outside the {member.split('_')[0]} range")
    return value


# The range of each protobuf integer kind (the oneof member's name without
# ``_val``/``_vals``); a value outside cannot be encoded.
_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1), "sint32": (-(2**31), 2**31 - 1),
    "sfixed32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "fixed32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "sint64": (-(2**63), 2**63 - 1),
    "sfixed64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1), "fixed64": (0, 2**64 - 1),
}


def attr_from_json(doc: Any) -> Attr:
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        raise _Bad(f"attribute must be an object with a string name, got {doc!r}")
    members = [k for k in doc if k != "name"]
    if not members:
        return (doc["name"], "", None)
    if len(members) > 1 or members[0] not in _MEMBERS:
        raise _Bad(f"attribute {doc['name']!r}: expected one AttributeProto member, got "
                   f"{members}")
    member = members[0]
    value = doc[member]
    if member.endswith("_list"):
        if not isinstance(value, list):
            raise _Bad(f"attribute {doc['name']!r}: {member} must be a list")
        return (doc["name"], member, [_scalar_in(member, v) for v in value])
    return (doc["name"], member, _scalar_in(member, value))


def _io_in(doc: Any) -> tuple[str, str, str] | None:
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise _Bad("inputs/outputs must be an object {values, shapes, types}")
    parts = tuple(doc.get(k, "") for k in ("values", "shapes", "types"))
    if not all(isinstance(p, str) for p in parts):
        raise _Bad("inputs/outputs values, shapes and types must be strings")
    return parts


def _ints(doc: dict[str, Any], key: str) -> list[int]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise _Bad(f"{key} must be a list of non-negative integers")
    return value


def _uint(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"{key} must be a non-negative integer, got {value!r}")
    return value


def node_from_json(doc: Any) -> ChakraNode:
    if not isinstance(doc, dict):
        raise _Bad("a node must be an object")
    type_value = doc.get("type", "INVALID_NODE")
    try:
        node_type = NodeType[type_value] if isinstance(type_value, str) else NodeType(type_value)
    except (KeyError, ValueError):
        raise _Bad(f"unknown node type {type_value!r}") from None
    name = doc.get("name", "")
    if not isinstance(name, str):
        raise _Bad("name must be a string")
    attrs = doc.get("attrs", [])
    if not isinstance(attrs, list):
        raise _Bad("attrs must be a list")
    return ChakraNode(
        id=_uint(doc, "id"), name=name, type=node_type,
        start_time_micros=_uint(doc, "start_time_micros"),
        duration_micros=_uint(doc, "duration_micros"),
        ctrl_deps=_ints(doc, "ctrl_deps"), data_deps=_ints(doc, "data_deps"),
        inputs=_io_in(doc.get("inputs")), outputs=_io_in(doc.get("outputs")),
        attrs=[attr_from_json(a) for a in attrs])


def metadata_from_json(doc: Any) -> GlobalMetadata:
    if not isinstance(doc, dict):
        raise _Bad("metadata must be an object")
    version = doc.get("version", "")
    attrs = doc.get("attrs", [])
    if not isinstance(version, str) or not isinstance(attrs, list):
        raise _Bad("metadata needs a string version and an attrs list")
    return GlobalMetadata(version=version, attrs=[attr_from_json(a) for a in attrs])


def _stream_nodes(path: str, stream: IO[bytes], first_line: int) -> Iterator[ChakraNode]:
    with stream:
        lineno = first_line
        ended = False
        for line in stream:
            lineno += 1
            text = line.strip()
            if not text:
                continue
            if ended:
                raise InputError(path, f"line {lineno}: data after the closing ]}}")
            if text == _TAIL:
                ended = True
                continue
            if text.endswith(b","):
                text = text[:-1]
            try:
                yield node_from_json(orjson.loads(text))
            except orjson.JSONDecodeError as exc:
                raise InputError(path, f"line {lineno}: not JSON ({exc})") from exc
            except _Bad as exc:
                raise InputError(path, f"line {lineno}: {exc}") from exc
        if not ended:
            raise InputError(path, f"truncated: no closing ]}} after line {lineno}")


def read_json(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """(metadata, lazy nodes) of a jsonize document."""
    path = os.fspath(path)
    stream, _gzipped = open_input(path)
    try:
        head = stream.readline()
    except (OSError, EOFError) as exc:
        stream.close()
        raise InputError(path, f"cannot read: {exc}") from exc
    head = head.strip()
    if head.startswith(_HEAD_PREFIX[:-1]) and head.endswith(_NODES_OPEN):
        try:
            top = orjson.loads(head[: -len(_NODES_OPEN)] + b"}")
            return metadata_from_json(top.get("metadata")), _stream_nodes(path, stream, 1)
        except (orjson.JSONDecodeError, _Bad) as exc:
            stream.close()
            raise InputError(path, f"line 1: {exc}") from exc
    with stream:
        try:
            doc = orjson.loads(head + stream.read())
        except (orjson.JSONDecodeError, OSError, EOFError) as exc:
            raise InputError(path, f"not JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise InputError(path, "expected an object with metadata and a nodes list "
                         "(as written by pt2chakra jsonize)")
    try:
        metadata = metadata_from_json(doc.get("metadata", {}))
    except _Bad as exc:
        raise InputError(path, f"metadata: {exc}") from exc
    return metadata, _nodes_of(path, doc["nodes"])


def _nodes_of(path: str, docs: list[Any]) -> Iterator[ChakraNode]:
    for i, doc in enumerate(docs):
        try:
            yield node_from_json(doc)
        except _Bad as exc:
            raise InputError(path, f"nodes[{i}]: {exc}") from exc


def from_json(json_path: str | os.PathLike[str], et_path: str | os.PathLike[str]) -> int:
    """JSON document -> ``.et`` (atomic); returns the node count. Refuses
    (``InputError``) to overwrite the input."""
    check_outputs([json_path], [et_path])
    metadata, nodes = read_json(json_path)
    return write_et(et_path, metadata, nodes)

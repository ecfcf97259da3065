"""Read Chakra ``.et`` files (ours or any other tool's), and convert between
``ChakraNode`` and protobuf messages.

Reading parses with protobuf (C code) into a ``Node`` variant whose attributes
stay raw bytes, decoded through a cache (see "Fast Node decoding"); anything
unusual goes through the ``Node`` class of :mod:`pt2chakra.chakra.schema` and
:func:`from_proto`, whose results and errors the fast path reproduces.
Writing lives in :mod:`pt2chakra.chakra.encode`; the wire constants both
share in :mod:`pt2chakra.chakra.wire`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, NamedTuple

# No type stubs for protobuf here: its message classes are Any to mypy.
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)
from google.protobuf.message import DecodeError, Message

from pt2chakra.chakra import schema as pb
from pt2chakra.chakra.compiled import fast_path
from pt2chakra.chakra.encode import ATTR_MEMBERS, MEMBER_ENCODERS
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata, NodeType
from pt2chakra.chakra.wire import (
    ET_READ_CHUNK,
    MAX_MESSAGE_BYTES,
    MAX_VARINT_BYTES,
    TWO_64,
    U32_MAX,
    U64_MAX,
    WIRE_I32,
    WIRE_I64,
    WIRE_LEN,
    WIRE_VARINT,
)
from pt2chakra.errors import InputError
from pt2chakra.files import GZIP_ERRORS, open_input

assert pb.ATTR_MEMBERS == ATTR_MEMBERS, "chakra_wire.ATTR_MEMBERS out of sync with et_def.proto"

# --------------------------------------------------------------------------
# Converters to / from protobuf messages
# --------------------------------------------------------------------------


def _attr_to_proto(attr: Attr, target: Message) -> None:
    name, member, value = attr
    target.name = name
    if not member:
        return
    if member not in MEMBER_ENCODERS:
        raise ValueError(f"attr {name!r}: unknown AttributeProto member {member!r}")
    if member.endswith("_list"):
        values = getattr(target, member)
        values.SetInParent()  # an empty list still selects the oneof member
        values.values.extend(value)
    else:
        setattr(target, member, value)


def _attr_from_proto(attr: Message) -> Attr:
    member = attr.WhichOneof("value")
    if member is None:
        return (attr.name, "", None)
    value = getattr(attr, member)
    if member.endswith("_list"):
        value = list(value.values)
    return (attr.name, member, value)


def _node_to_proto(node: ChakraNode) -> Message:
    msg = pb.Node(
        id=node.id,
        name=node.name,
        type=int(node.type),
        ctrl_deps=node.ctrl_deps,
        data_deps=node.data_deps,
        start_time_micros=node.start_time_micros,
        duration_micros=node.duration_micros,
    )
    for field, info in (("inputs", node.inputs), ("outputs", node.outputs)):
        if info is not None:
            target = getattr(msg, field)
            target.SetInParent()
            target.values, target.shapes, target.types = info
    for attr in node.attrs:
        _attr_to_proto(attr, msg.attr.add())
    return msg


def _metadata_to_proto(md: GlobalMetadata) -> Message:
    msg = pb.GlobalMetadata(version=md.version)
    for attr in md.attrs:
        _attr_to_proto(attr, msg.attr.add())
    return msg


def to_proto(record: ChakraNode | GlobalMetadata) -> Message:
    """``ChakraNode`` -> ``Node`` message, ``GlobalMetadata`` -> ``GlobalMetadata``."""
    if isinstance(record, ChakraNode):
        return _node_to_proto(record)
    if isinstance(record, GlobalMetadata):
        return _metadata_to_proto(record)
    raise TypeError(f"expected ChakraNode or GlobalMetadata, got {type(record).__name__}")


def _ioinfo_from_proto(msg: Message, field: str) -> tuple[str, str, str] | None:
    if not msg.HasField(field):
        return None
    info = getattr(msg, field)
    return (info.values, info.shapes, info.types)


def _node_from_proto(msg: Message) -> ChakraNode:
    return ChakraNode(
        id=msg.id,
        name=msg.name,
        type=NodeType(msg.type),  # ValueError for values this enum lacks
        start_time_micros=msg.start_time_micros,
        duration_micros=msg.duration_micros,
        ctrl_deps=list(msg.ctrl_deps),
        data_deps=list(msg.data_deps),
        inputs=_ioinfo_from_proto(msg, "inputs"),
        outputs=_ioinfo_from_proto(msg, "outputs"),
        attrs=[_attr_from_proto(a) for a in msg.attr],
    )


def _metadata_from_proto(msg: Message) -> GlobalMetadata:
    return GlobalMetadata(version=msg.version, attrs=[_attr_from_proto(a) for a in msg.attr])


def from_proto(msg: Message) -> ChakraNode | GlobalMetadata:
    """Inverse of :func:`to_proto`; also accepts mlc-chakra's own classes.

    ``doc_string`` of attributes is dropped (the model has no place for it).
    """
    full_name = msg.DESCRIPTOR.full_name
    if full_name == f"{pb.PACKAGE}.Node":
        return _node_from_proto(msg)
    if full_name == f"{pb.PACKAGE}.GlobalMetadata":
        return _metadata_from_proto(msg)
    raise TypeError(f"expected a Chakra Node or GlobalMetadata message, got {full_name}")


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def _read(stream: BinaryIO, size: int, path: str, offset: int) -> bytes:
    try:
        return stream.read(size)
    except GZIP_ERRORS as exc:
        raise InputError(
            path, f"corrupt gzip data after decompressed byte {offset}: {exc}"
        ) from exc


def _decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position); value -1 if the buffer ends inside the varint,
    -2 if it runs past 10 bytes."""
    result = 0
    shift = 0
    end = min(len(buf), pos + MAX_VARINT_BYTES)
    for i in range(pos, end):
        byte = buf[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i + 1
        shift += 7
    return (-2 if end - pos == MAX_VARINT_BYTES else -1), end


def _frame_length(buf: bytes, pos: int, where: str, path: str) -> tuple[int, int]:
    length, body = _decode_varint(buf, pos)
    if length == -1:  # only at eof: the buffer is refilled to 10+ bytes before
        raise InputError(path, f"truncated length varint of {where}")
    if length == -2:
        raise InputError(path, f"malformed length varint (over 10 bytes) of {where}")
    if length == 0:
        raise InputError(
            path,
            f"zero-length {where}: the reference Chakra reader stops at the first "
            "zero-length message, so the rest of the file would be ignored",
        )
    if length > MAX_MESSAGE_BYTES:
        raise InputError(path, f"{where} claims {length} bytes, over protobuf's 2 GiB limit")
    return length, body


# (buffer, stream offset of buffer[0], index of the first message, position of
# its length varint, body start of every message, body end of every message).
# Messages are contiguous: each one's length varint starts where the last ended.
Batch = tuple[bytes, int, int, int, list[int], list[int]]


def _where(unit: str, index: int, offset: int) -> str:
    return f"message #{index} at {unit} offset {offset}"


def _frame_batches(stream: BinaryIO, path: str, unit: str) -> Iterator[Batch]:
    """Frames every complete message of each buffer fill in one tight loop.

    Reads ``ET_READ_CHUNK`` bytes at a time (the same reads, so the same error
    offsets, as a message-at-a-time reader); memory stays at about one chunk
    plus the largest message. A framing error is raised only after the
    messages before it were handed out, as a message-at-a-time reader would.
    Closes ``stream`` when done.
    """
    with stream:
        buf = b""
        pos = 0  # position in buf
        base = 0  # stream offset of buf[0]
        eof = False
        index = 0
        while True:
            size = len(buf)
            if size - pos < MAX_VARINT_BYTES and not eof:
                chunk = _read(stream, ET_READ_CHUNK, path, base + size)
                eof = not chunk
                buf, base, pos = buf[pos:] + chunk, base + pos, 0
                continue
            if pos == size:
                return
            # Frames starting past ``limit`` wait for a refill (unless at eof):
            # their length varint may continue in the next chunk.
            scan = _scan_frames(buf, pos, size if eof else size - MAX_VARINT_BYTES,
                                base, index, unit, path)
            if scan.bodies:
                yield buf, base, index, pos, scan.bodies, scan.ends
            index += len(scan.bodies)
            pos = scan.pos
            if scan.error is not None:
                raise scan.error
            if scan.end > size:  # a message longer than the rest of the buffer
                where = _where(unit, index, base + pos)
                buf, body, end = _long_message(stream, path, where, buf, base, pos, scan)
                base, pos = base + pos, 0
                yield buf, base, index, 0, [body], [end]
                pos = end
                index += 1


class _Scan(NamedTuple):
    """What _scan_frames framed in one buffer, and where it stopped: at
    ``pos``, before a frame whose body (``body``..``end``, ``length`` bytes)
    runs past the buffer, or at a framing ``error``."""

    bodies: list[int]
    ends: list[int]
    pos: int
    body: int
    end: int
    length: int
    error: InputError | None


def _scan_frames(buf: bytes, pos: int, limit: int, base: int, index: int, unit: str,
                 path: str) -> _Scan:
    """Frames the messages of ``buf`` that start at or before ``limit``.

    One tight loop per buffer fill: 1- and 2-byte lengths are read inline,
    anything else (and every error) goes through _frame_length."""
    size = len(buf)
    fast = fast_path()
    bodies: list[int]
    ends: list[int]
    if fast is not None:  # the plain frames; the loop below takes the rest (and errors)
        bodies, ends, pos = fast.scan_frames(buf, pos, limit)
        index += len(bodies)
    else:
        bodies, ends = [], []
    error: InputError | None = None
    length = body = end = 0
    while pos <= limit and pos < size:
        length = buf[pos]
        if 0 < length < 0x80:
            body = pos + 1
        else:  # a 2-byte length, else (0 here) the checks of _frame_length
            second = buf[pos + 1] if pos + 1 < size else 0x80
            length = (length & 0x7F) | (second << 7) if second < 0x80 <= length else 0
            body = pos + 2
        if not length:
            try:
                length, body = _frame_length(buf, pos, _where(unit, index, base + pos), path)
            except InputError as exc:
                error = exc
                break
        end = body + length
        if end > size:
            break
        bodies.append(body)
        ends.append(end)
        pos = end
        index += 1
    return _Scan(bodies, ends, pos, body, end, length, error)


def _long_message(stream: BinaryIO, path: str, where: str, buf: bytes, base: int, pos: int,
                  scan: _Scan) -> tuple[bytes, int, int]:
    """(buffer, body start, body end) of the message at ``pos`` that runs past
    ``buf`` (at stream offset ``base``): the buffer from ``pos`` on, completed
    with one read of the rest."""
    more = _read(stream, scan.end - len(buf), path, base + len(buf))
    buf, body, end = buf[pos:] + more, scan.body - pos, scan.end - pos
    if end > len(buf):
        have = len(buf) - body
        raise InputError(path, f"truncated {where}: needs {scan.length} bytes, file has {have}")
    return buf, body, end


def _unit(gzipped: bool) -> str:
    return "decompressed byte" if gzipped else "byte"


def _frames(path: str) -> Iterator[tuple[int, str, bytes]]:
    """Yields (message index, "message #i at <unit> offset N", message bytes)."""
    stream, gzipped = open_input(path)
    unit = _unit(gzipped)
    for buf, base, index, pos, bodies, ends in _frame_batches(stream, path, unit):
        for body, end in zip(bodies, ends):
            yield index, _where(unit, index, base + pos), buf[body:end]
            index += 1
            pos = end


def iter_messages(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Raw bytes of every framed message (metadata first), streamed."""
    for _index, _where_text, data in _frames(os.fspath(path)):
        yield data


def _wire_fields(data: bytes) -> list[tuple[int, int]]:
    """Top-level (field number, wire type) pairs; raises ValueError if malformed."""
    fields = []
    pos = 0
    while pos < len(data):
        key, pos = _decode_varint(data, pos)
        if key < 0:
            raise ValueError("malformed field key")
        field, wire = key >> 3, key & 7
        if wire == WIRE_VARINT:
            value, pos = _decode_varint(data, pos)
            if value < 0:
                raise ValueError("malformed varint")
        elif wire == WIRE_LEN:
            length, pos = _decode_varint(data, pos)
            if length < 0:
                raise ValueError("malformed length")
            pos += length
        elif wire in (WIRE_I64, WIRE_I32):
            pos += 8 if wire == WIRE_I64 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.append((field, wire))
    if pos != len(data):
        raise ValueError("last field runs past the end")
    return fields


def _metadata_problem(data: bytes) -> str | None:
    """Why ``data`` is not a GlobalMetadata (protobuf would parse a Node as one,
    keeping its fields as unknown ones), or None."""
    try:
        fields = _wire_fields(data)
    except ValueError as exc:
        return str(exc)
    for field, wire in fields:
        if field not in (1, 2) or wire != WIRE_LEN:
            return f"it has field {field} with wire type {wire} (only version=1, attr=2 exist)"
    return None  # no version is fine: mlc-chakra's converter writes none


def _decode_metadata(path: str, where: str, data: bytes) -> GlobalMetadata:
    problem = _metadata_problem(data)
    if problem is None:
        try:
            return _metadata_from_proto(pb.GlobalMetadata.FromString(data))
        except DecodeError as exc:
            problem = f"it does not parse ({exc})"
    raise InputError(path, f"{where} is not a GlobalMetadata: {problem}")


# --------------------------------------------------------------------------
# Fast Node decoding
#
# protobuf's parser is C, but ``from_proto`` on a ``Node`` costs a message
# object and several Python-level accesses per attribute, and reading the
# whole file was dominated by that. ``_fast_node`` parses with ``_RawNode``
# (a ``Node`` whose attributes stay raw bytes), then maps each attribute body
# through a cache keyed by its bytes: flags, thread ids, op schemas and
# dependency kinds repeat on most nodes; per-node numbers (rf_id, durations)
# take a hand-decoded "name + one varint" path. Anything the fast path does
# not handle exactly (a bad attribute body, an unknown node type) raises one
# of ``FAST_FAILURES`` and the message goes through protobuf ``Node`` +
# ``from_proto`` instead, so results and error messages are those of the
# protobuf path by construction.
# --------------------------------------------------------------------------


class _Unhandled(Exception):
    """The fast decoder leaves this message to protobuf."""


FAST_FAILURES = (_Unhandled, DecodeError, KeyError, IndexError)

_TWO_31, _TWO_32, _TWO_63 = 1 << 31, 1 << 32, 1 << 63


def varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """(uint64 value, next position); _Unhandled past 10 bytes or 64 bits
    (what protobuf does then is left to protobuf), IndexError if truncated."""
    value = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > U64_MAX:
                raise _Unhandled
            return value, pos
        shift += 7
        if shift == 70:
            raise _Unhandled


def _signed64(value: int) -> int:
    return value - TWO_64 if value >= _TWO_63 else value


def _signed32(value: int) -> int:
    value &= U32_MAX
    return value - _TWO_32 if value >= _TWO_31 else value


def _zigzag32(value: int) -> int:
    value &= U32_MAX
    return (value >> 1) ^ -(value & 1)


# Varint oneof member with a one-byte tag -> (the tag, uint64 -> the Python
# value protobuf gives). sint64_val and bool_val have two-byte tags.
_VARINT_MEMBERS: dict[str, tuple[int, Callable[[int], Any]]] = {
    "int32_val": (7 << 3, _signed32),
    "int64_val": (9 << 3, _signed64),
    "uint32_val": (11 << 3, lambda v: v & U32_MAX),
    "uint64_val": (13 << 3, lambda v: v),
    "sint32_val": (15 << 3, _zigzag32),
}

# AttributeProto body -> attr, for bodies that repeat (flags, thread ids, op
# schemas, dependency kinds). List values are copied on every hit. Cleared
# when full, so per-node values cannot grow it without bound.
ATTR_CACHE: dict[bytes, Attr] = {}
_ATTR_CACHE_MAX = 1 << 14
_ATTR_CACHE_MAX_BODY = 1 << 11
# Body up to and including the member tag -> (name, member, converter), for
# "name + one varint member" bodies whose value changes per node (rf_id,
# durations): the varint tail is decoded by hand.
_ATTR_PREFIXES: dict[bytes, tuple[str, str, Callable[[int], Any]]] = {}
_ATTR_PREFIXES_MAX = 1 << 12
_SMALL_CACHED_VALUES = 256  # per-node varint values below this are cached whole


def _cache_attr(body: bytes, attr: Attr) -> None:
    if len(body) <= _ATTR_CACHE_MAX_BODY:
        if len(ATTR_CACHE) >= _ATTR_CACHE_MAX:
            ATTR_CACHE.clear()
        ATTR_CACHE[body] = attr


def decode_attr(body: bytes) -> Attr:
    """AttributeProto body -> attr, on a miss of ``ATTR_CACHE``."""
    head = body[1] + 3 if len(body) > 2 and body[0] == 0x0A and body[1] < 0x80 else 0
    prefix = _ATTR_PREFIXES.get(body[:head]) if head else None
    if prefix is not None:
        value, pos = varint_at(body, head)
        if pos == len(body):
            name, member, convert = prefix
            attr = (name, member, convert(value))
            if value < _SMALL_CACHED_VALUES:
                _cache_attr(body, attr)
            return attr
    try:
        msg = pb.AttributeProto.FromString(body)
    except DecodeError as exc:  # the whole Node goes to protobuf for the error
        raise _Unhandled from exc
    attr = _attr_from_proto(msg)
    name, member, value = attr
    varint = _VARINT_MEMBERS.get(member)
    if varint is not None and head and body[head - 1] == varint[0]:
        try:
            _, pos = varint_at(body, head)
        except FAST_FAILURES:
            pos = -1
        if pos == len(body):  # exactly "name + member": any value fits this prefix
            if len(_ATTR_PREFIXES) >= _ATTR_PREFIXES_MAX:
                _ATTR_PREFIXES.clear()
            _ATTR_PREFIXES[body[:head]] = (name, member, varint[1])
    _cache_attr(body, attr)
    if type(value) is list:
        return (name, member, value[:])
    return attr


def _raw_node_class() -> type[Message]:
    """``Node`` with ``attr`` as ``repeated bytes`` and ``type`` as int32.

    Same field numbers and wire types, so protobuf frames every field exactly
    as it does for ``Node`` (same unknown fields, same errors for broken
    framing or bad UTF-8), but hands out each attribute as its raw body, a
    cache key, instead of building a message object per attribute. An
    open proto3 enum and an int32 hold the same values.
    """
    file = descriptor_pb2.FileDescriptorProto()
    pb.FILE_DESCRIPTOR.CopyToProto(file)
    raw = descriptor_pb2.FileDescriptorProto(
        name="pt2chakra_raw_node.proto", package="pt2chakra_raw", syntax=file.syntax
    )
    for message in file.message_type:
        if message.name in ("Node", "IOInfo"):
            raw.message_type.add().CopyFrom(message)
    for message in raw.message_type:
        for field in message.field:
            if field.name == "type":
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_INT32
                field.ClearField("type_name")
            elif field.name == "attr":
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                field.ClearField("type_name")
            elif field.type_name:
                field.type_name = field.type_name.replace(f".{pb.PACKAGE}.", ".pt2chakra_raw.")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(raw)
    descriptor = pool.FindMessageTypeByName("pt2chakra_raw.Node")
    get_message_class = getattr(message_factory, "GetMessageClass", None)
    if get_message_class is not None:  # protobuf >= 4.22
        return get_message_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


_RawNode = _raw_node_class()
NODE_TYPE_BY_INT: dict[int, NodeType] = {int(t): t for t in NodeType}


def _fast_node(data: bytes) -> ChakraNode:
    """``from_proto(Node.FromString(data))``, or one of ``FAST_FAILURES``
    (then the protobuf path gives the result or the error)."""
    msg = _RawNode.FromString(data)
    get = ATTR_CACHE.get
    attrs: list[Attr] = []
    for body in msg.attr[:]:  # a slice is a list: cheaper than iterating the container
        attr = get(body)
        if attr is None:
            attr = decode_attr(body)
        elif type(attr[2]) is list:
            attr = (attr[0], attr[1], attr[2][:])
        attrs.append(attr)
    if msg.HasField("inputs"):
        info = msg.inputs
        inputs = (info.values, info.shapes, info.types)
    else:
        inputs = None
    if msg.HasField("outputs"):
        info = msg.outputs
        outputs = (info.values, info.shapes, info.types)
    else:
        outputs = None
    return ChakraNode(
        msg.id,
        msg.name,
        NODE_TYPE_BY_INT[msg.type],  # KeyError for values NodeType lacks
        msg.start_time_micros,
        msg.duration_micros,
        msg.ctrl_deps[:],  # a new list
        msg.data_deps[:],
        inputs,
        outputs,
        attrs,
    )


def _protobuf_node(path: str, where: str, data: bytes) -> ChakraNode:
    """The reference path: protobuf parse + ``from_proto``; raises InputError."""
    try:
        msg = pb.Node.FromString(data)
    except DecodeError as exc:
        raise InputError(path, f"{where} does not parse as a Node: {exc}") from exc
    try:
        return _node_from_proto(msg)
    except ValueError as exc:
        raise InputError(path, f"{where}: {exc}") from exc


def decode_node(data: bytes) -> ChakraNode:
    """One Node message -> ChakraNode, as ``from_proto(Node.FromString(data))``.

    Raises InputError (path "<bytes>") where that would raise.
    """
    try:
        return _fast_node(data)
    except FAST_FAILURES:
        pass
    return _protobuf_node("<bytes>", "message", data)


def _decode_nodes(path: str, frames: Iterator[tuple[int, str, bytes]]) -> Iterator[ChakraNode]:
    for _index, where, data in frames:
        try:
            node = _fast_node(data)
        except FAST_FAILURES:
            node = None  # outside the except block: no chained traceback
        if node is None:
            node = _protobuf_node(path, where, data)
        yield node


def nodes_from_batches(path: str, unit: str, batches: Iterable[Batch]) -> Iterator[ChakraNode]:
    fast = _fast_node
    for buf, base, index, pos, bodies, ends in batches:
        for body, end in zip(bodies, ends):
            try:
                node = fast(buf[body:end])
            except FAST_FAILURES:
                node = None  # outside the except block: no chained traceback
            if node is None:
                node = _protobuf_node(path, _where(unit, index, base + pos), buf[body:end])
            yield node
            index += 1
            pos = end


def _rest_of(first: Batch, batches: Iterator[Batch]) -> Iterator[Batch]:
    """The first batch less its first message, then the other batches."""
    buf, base, index, _pos, bodies, ends = first
    if len(bodies) > 1:
        yield buf, base, index + 1, ends[0], bodies[1:], ends[1:]
    yield from batches


def decode_et_file(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """Reads the metadata now and returns it with a lazy iterator of nodes.

    Plain or gzip (detected by magic bytes). Malformed input raises
    ``InputError`` naming the message index and byte offset, either here
    (metadata) or while iterating (nodes).
    """
    path = os.fspath(path)
    unit, metadata, batches = open_et_frames(path)
    return metadata, nodes_from_batches(path, unit, batches)


# A file whose first message is no GlobalMetadata and that starts with '{' or
# '[' (after whitespace) is the JSON a user passed by mistake.
JSON_OPENERS = (b"{", b"[")
JSON_LOOKAHEAD = 64  # bytes of leading whitespace a JSON writer may put first


def open_et_frames(path: str) -> tuple[str, GlobalMetadata, Iterator[Batch]]:
    """(offset unit, metadata, the batches of node frames after it): the
    framing every ``.et`` reader starts with (``read_et``, the lean reader)."""
    stream, gzipped = open_input(path)
    unit = _unit(gzipped)
    batches = _frame_batches(stream, path, unit)
    try:
        first = next(batches, None)
        if first is None:
            raise InputError(path, "empty file: expected a GlobalMetadata message first")
        buf, base, _index, pos, bodies, ends = first
        metadata = _decode_metadata(path, _where(unit, 0, base + pos), buf[bodies[0] : ends[0]])
    except InputError:
        _refuse_json(path)
        raise
    return unit, metadata, _rest_of(first, batches)


def _refuse_json(path: str) -> None:
    """A file that is no .et from its first message and starts like JSON is
    the host ET or Kineto trace a user passed by mistake: say so."""
    try:
        stream, _gzipped = open_input(path)
        with stream:
            head = stream.read(JSON_LOOKAHEAD)
    except (InputError, OSError):  # GZIP_ERRORS are InputErrors or OSErrors here
        return  # the first error stands
    if head.lstrip()[:1] in JSON_OPENERS:
        raise InputError(path, "this is JSON (a host ET or Kineto trace?), not a Chakra .et: "
                         "convert it first with pt2chakra convert") from None


# --------------------------------------------------------------------------
# Pre-encoded fields, for writers that emit millions of similar nodes
# --------------------------------------------------------------------------



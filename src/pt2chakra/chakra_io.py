"""Read and write Chakra execution trace (``.et``) files.

Framing: ``varint(length) || message`` repeated, a ``GlobalMetadata`` first and
a ``Node`` for every later message, optionally gzip-compressed.

Writing uses a hand-written proto3 encoder instead of protobuf's
``SerializeToString``: building a protobuf message from Python costs one
attribute set per field, which dominates; the hand encoder goes straight from
``ChakraNode`` to bytes and is byte-identical to protobuf's output (tested).
Reading parses with protobuf (C code) into a ``Node`` variant whose attributes
stay raw bytes, decoded through a cache (see "Fast Node decoding"); anything
unusual goes through the ``Node`` class of :mod:`pt2chakra.chakra_schema` and
:func:`from_proto`, whose results and errors the fast path reproduces.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from pt2chakra import chakra_schema as pb
from pt2chakra.model import Attr, ChakraNode, GlobalMetadata, InputError, NodeType

# --------------------------------------------------------------------------
# Wire-format constants
# --------------------------------------------------------------------------

_WIRE_VARINT = 0
_WIRE_I64 = 1
_WIRE_LEN = 2
_WIRE_I32 = 5

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_TWO_64 = 1 << 64

_MAX_VARINT_BYTES = 10
_MAX_MESSAGE_BYTES = (1 << 31) - 1  # protobuf refuses to parse larger messages
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_LEVEL = 6  # zlib's default: level 9 is several times slower for ~1% less
_READ_CHUNK = 1 << 20
_FLUSH_BYTES = 1 << 20

# Precomputed varints: ids, lengths and small attribute values hit this table.
_VARINT_CACHE_SIZE = 1 << 14  # every 1- and 2-byte varint
_LOW_14_BITS = _VARINT_CACHE_SIZE - 1
_FOUR_BYTE_LIMIT = 1 << 28


def _build_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINT_CACHE: tuple[bytes, ...] = tuple(_build_varint(i) for i in range(_VARINT_CACHE_SIZE))
# The low 14 bits of a longer varint: two bytes, both with the continuation bit.
_VARINT_CONTINUED: tuple[bytes, ...] = tuple(
    bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(_VARINT_CACHE_SIZE)
)


def _tag(field: int, wire_type: int) -> bytes:
    return _build_varint((field << 3) | wire_type)


# Node (field numbers 1..10) and GlobalMetadata / AttributeProto / IOInfo tags.
_NODE_ID = _tag(1, _WIRE_VARINT)
_NODE_NAME = _tag(2, _WIRE_LEN)
_NODE_TYPE = _tag(3, _WIRE_VARINT)
_NODE_CTRL_DEPS = _tag(4, _WIRE_LEN)
_NODE_DATA_DEPS = _tag(5, _WIRE_LEN)
_NODE_START = _tag(6, _WIRE_VARINT)
_NODE_DURATION = _tag(7, _WIRE_VARINT)
_NODE_INPUTS = _tag(8, _WIRE_LEN)
_NODE_OUTPUTS = _tag(9, _WIRE_LEN)
_NODE_ATTR = _tag(10, _WIRE_LEN)
_META_VERSION = _tag(1, _WIRE_LEN)
_META_ATTR = _tag(2, _WIRE_LEN)
_ATTR_NAME = _tag(1, _WIRE_LEN)
_IOINFO_VALUES = _tag(1, _WIRE_LEN)
_IOINFO_SHAPES = _tag(2, _WIRE_LEN)
_IOINFO_TYPES = _tag(3, _WIRE_LEN)
_LIST_VALUES = _tag(1, _WIRE_LEN)  # ``values = 1`` of every XList message


# --------------------------------------------------------------------------
# Scalar encoders
# --------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    """Varint of an unsigned 64-bit value (also used for lengths)."""
    if 0 <= value < _VARINT_CACHE_SIZE:
        return _VARINT_CACHE[value]
    if _VARINT_CACHE_SIZE <= value < _FOUR_BYTE_LIMIT:  # ids of mid-size traces
        return _VARINT_CONTINUED[value & _LOW_14_BITS] + _VARINT_CACHE[value >> 14]
    return _uvarint_large(value)


def _uvarint_large(value: int) -> bytes:
    """14 bits at a time from tables: a bytearray loop costs ~1 us per value."""
    if value < 0 or value > _U64_MAX:
        raise ValueError(f"value out of range for uint64: {value}")
    out = b""
    while value >= _VARINT_CACHE_SIZE:
        out += _VARINT_CONTINUED[value & _LOW_14_BITS]
        value >>= 14
    return out + _VARINT_CACHE[value]


def _checked(value: int, low: int, high: int, kind: str) -> int:
    if value < low or value > high:
        raise ValueError(f"value out of range for {kind}: {value}")
    return value


def _int32(value: int) -> bytes:
    """int32 and enums: negatives are sign-extended to 64 bits (10 bytes)."""
    _checked(value, _I32_MIN, _I32_MAX, "int32")
    return _uvarint(value + _TWO_64 if value < 0 else value)


def _int64(value: int) -> bytes:
    _checked(value, _I64_MIN, _I64_MAX, "int64")
    return _uvarint(value + _TWO_64 if value < 0 else value)


def _uint32(value: int) -> bytes:
    return _uvarint(_checked(value, 0, _U32_MAX, "uint32"))


def _sint32(value: int) -> bytes:
    _checked(value, _I32_MIN, _I32_MAX, "sint32")
    return _uvarint(value << 1 if value >= 0 else ((-value) << 1) - 1)


def _sint64(value: int) -> bytes:
    _checked(value, _I64_MIN, _I64_MAX, "sint64")
    return _uvarint(value << 1 if value >= 0 else ((-value) << 1) - 1)


# NodeType -> encoded ``type`` field (the default INVALID_NODE is omitted).
_NODE_TYPES: dict[int, bytes] = {int(t): _NODE_TYPE + _int32(t) for t in NodeType if t}


def _bool(value: Any) -> bytes:
    return b"\x01" if value else b"\x00"


def _len_prefixed(data: bytes) -> bytes:
    return _uvarint(len(data)) + data


def _utf8(value: str) -> bytes:
    data = value.encode()
    size = len(data)
    if size < _VARINT_CACHE_SIZE:
        return _VARINT_CACHE[size] + data
    return _uvarint_large(size) + data


def _raw_bytes(value: bytes) -> bytes:
    return _len_prefixed(bytes(value))


def _float32(values: Iterable[float]) -> bytes:
    """Packs float32s as a C cast does (what protobuf does): overflow -> inf."""
    values = list(values)
    try:
        return struct.pack(f"<{len(values)}f", *values)
    except OverflowError:
        return b"".join(struct.pack("<f", _clamp_float32(v)) for v in values)


def _clamp_float32(value: float) -> float:
    try:
        struct.pack("<f", value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")
    return value


def _fixed_width(fmt: str, low: int | None, high: int | None, kind: str) -> Callable:
    """Packer for a list of fixed-width numbers, range-checked like protobuf."""

    def pack(values: Iterable[Any]) -> bytes:
        values = list(values)
        if low is not None and values and (min(values) < low or max(values) > high):
            bad = next(v for v in values if v < low or v > high)
            raise ValueError(f"value out of range for {kind}: {bad}")
        return struct.pack(f"<{len(values)}{fmt}", *values)

    return pack


# --------------------------------------------------------------------------
# AttributeProto
# --------------------------------------------------------------------------

# Oneof member kind -> (field number of <kind>_val, wire type, element encoder).
# <kind>_list is field number + 1, a nested XList with packed (numeric) or
# repeated (string/bytes) ``values``. Fixed-width encoders take a sequence.
_VARINT_KINDS: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "int32": (7, _int32),
    "int64": (9, _int64),
    "uint32": (11, _uint32),
    "uint64": (13, _uvarint),
    "sint32": (15, _sint32),
    "sint64": (17, _sint64),
    "bool": (27, _bool),
}
_FIXED_KINDS: dict[str, tuple[int, int, Callable[[Iterable[Any]], bytes]]] = {
    "double": (3, _WIRE_I64, _fixed_width("d", None, None, "double")),
    "float": (5, _WIRE_I32, _float32),
    "fixed32": (19, _WIRE_I32, _fixed_width("I", 0, _U32_MAX, "fixed32")),
    "fixed64": (21, _WIRE_I64, _fixed_width("Q", 0, _U64_MAX, "fixed64")),
    "sfixed32": (23, _WIRE_I32, _fixed_width("i", _I32_MIN, _I32_MAX, "sfixed32")),
    "sfixed64": (25, _WIRE_I64, _fixed_width("q", _I64_MIN, _I64_MAX, "sfixed64")),
}
_LEN_KINDS: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "string": (29, _utf8),
    "bytes": (31, _raw_bytes),
}


def _packed_list(tag: bytes, payload: bytes) -> bytes:
    """An XList submessage field; an empty list is still written (tag, len 0)."""
    inner = _LIST_VALUES + _len_prefixed(payload) if payload else b""
    return tag + _len_prefixed(inner)


def _varint_encoders(field: int, encode: Callable[[Any], bytes]) -> tuple[Callable, Callable]:
    val_tag, list_tag = _tag(field, _WIRE_VARINT), _tag(field + 1, _WIRE_LEN)

    def scalar(value: Any) -> bytes:
        return val_tag + encode(value)

    def packed(values: Iterable[Any]) -> bytes:
        return _packed_list(list_tag, b"".join(map(encode, values)))

    return scalar, packed


def _fixed_encoders(field: int, wire: int, pack: Callable) -> tuple[Callable, Callable]:
    val_tag, list_tag = _tag(field, wire), _tag(field + 1, _WIRE_LEN)

    def scalar(value: Any) -> bytes:
        return val_tag + pack((value,))

    def packed(values: Iterable[Any]) -> bytes:
        return _packed_list(list_tag, pack(values))

    return scalar, packed


def _len_encoders(field: int, encode: Callable[[Any], bytes]) -> tuple[Callable, Callable]:
    val_tag, list_tag = _tag(field, _WIRE_LEN), _tag(field + 1, _WIRE_LEN)

    def scalar(value: Any) -> bytes:
        return val_tag + encode(value)

    def repeated(values: Iterable[Any]) -> bytes:
        inner = b"".join(_LIST_VALUES + encode(v) for v in values)
        return list_tag + _len_prefixed(inner)

    return scalar, repeated


def _build_member_encoders() -> dict[str, Callable[[Any], bytes]]:
    encoders: dict[str, Callable[[Any], bytes]] = {}
    pairs = [(k, _varint_encoders(f, e)) for k, (f, e) in _VARINT_KINDS.items()]
    pairs += [(k, _fixed_encoders(f, w, p)) for k, (f, w, p) in _FIXED_KINDS.items()]
    pairs += [(k, _len_encoders(f, e)) for k, (f, e) in _LEN_KINDS.items()]
    for kind, (scalar, listed) in pairs:
        encoders[f"{kind}_val"] = scalar
        encoders[f"{kind}_list"] = listed
    assert sorted(encoders) == sorted(pb.ATTR_MEMBERS), "encoder table out of sync with schema"
    return encoders


# Oneof member name (e.g. "int64_val") -> encoder of that field (tag included).
_MEMBER_ENCODERS = _build_member_encoders()


# Attribute name -> its encoded ``name`` field; names repeat on every node.
_ATTR_NAME_CACHE: dict[str, bytes] = {}
_ATTR_NAME_CACHE_MAX = 4096


def _attr_name_field(name: str) -> bytes:
    field = _ATTR_NAME_CACHE.get(name)
    if field is None:
        field = _ATTR_NAME + _utf8(name) if name else b""
        if len(_ATTR_NAME_CACHE) < _ATTR_NAME_CACHE_MAX:
            _ATTR_NAME_CACHE[name] = field
    return field


def _encode_attr(attr: Attr) -> bytes:
    """AttributeProto body. Member "" means no oneof member is set."""
    name, member, value = attr
    encode = _MEMBER_ENCODERS.get(member)
    if encode is None:
        if member:
            raise ValueError(f"attr {name!r}: unknown AttributeProto member {member!r}")
        return _attr_name_field(name)
    return _attr_name_field(name) + encode(value)


def _encode_attrs(tag: bytes, attrs: Iterable[Attr]) -> list[bytes]:
    parts: list[bytes] = []
    for attr in attrs:
        body = _encode_attr(attr)
        parts += (tag, _uvarint(len(body)), body)
    return parts


# --------------------------------------------------------------------------
# Node / GlobalMetadata
# --------------------------------------------------------------------------


# Framed node attribute -> bytes, for members whose equal values encode
# equally (not floats: -0.0 == 0.0) and are hashable (not lists). Flags such as
# is_cpu_op, comm_type or pg_name repeat on most nodes; the cache is cleared
# when full so that per-node values (num_ops) cannot grow it without bound.
_CACHEABLE_MEMBERS = frozenset(
    m for m in pb.ATTR_MEMBERS if not m.endswith("_list") and m not in ("double_val", "float_val")
)
_NODE_ATTR_CACHE: dict[Attr, bytes] = {}
_NODE_ATTR_CACHE_MAX = 1 << 16


def _cache_node_attr(attr: Attr) -> bytes:
    body = _encode_attr(attr)
    field = _NODE_ATTR + _uvarint(len(body)) + body
    if len(_NODE_ATTR_CACHE) >= _NODE_ATTR_CACHE_MAX:
        _NODE_ATTR_CACHE.clear()
    _NODE_ATTR_CACHE[attr] = field
    return field


def _encode_ioinfo(tag: bytes, info: tuple[str, str, str]) -> bytes:
    values, shapes, types = info
    body = b""
    if values:
        body = _IOINFO_VALUES + _utf8(values)
    if shapes:
        body += _IOINFO_SHAPES + _utf8(shapes)
    if types:
        body += _IOINFO_TYPES + _utf8(types)
    return tag + _uvarint(len(body)) + body


def encode_node(node: ChakraNode) -> bytes:
    """Serialize like ``to_proto(node).SerializeToString()``, only faster.

    Raises ValueError for an all-default node: its encoding would be empty,
    and the reference reader stops at the first zero-length message.
    Written flat (few calls per field): this runs once per node.
    """
    parts: list[bytes] = []
    if node.id:
        parts += (_NODE_ID, _uvarint(node.id))
    if node.name:
        parts += (_NODE_NAME, _utf8(node.name))
    if node.type:
        parts.append(_NODE_TYPES.get(node.type) or _NODE_TYPE + _int32(node.type))
    if node.ctrl_deps:
        packed = b"".join(map(_uvarint, node.ctrl_deps))
        parts += (_NODE_CTRL_DEPS, _uvarint(len(packed)), packed)
    if node.data_deps:
        packed = b"".join(map(_uvarint, node.data_deps))
        parts += (_NODE_DATA_DEPS, _uvarint(len(packed)), packed)
    if node.start_time_micros:
        parts += (_NODE_START, _uvarint(node.start_time_micros))
    if node.duration_micros:
        parts += (_NODE_DURATION, _uvarint(node.duration_micros))
    if node.inputs is not None:
        parts.append(_encode_ioinfo(_NODE_INPUTS, node.inputs))
    if node.outputs is not None:
        parts.append(_encode_ioinfo(_NODE_OUTPUTS, node.outputs))
    for attr in node.attrs:
        if attr[1] in _CACHEABLE_MEMBERS:
            field = _NODE_ATTR_CACHE.get(attr)
            if field is None:
                field = _cache_node_attr(attr)
        else:
            body = _encode_attr(attr)
            field = _NODE_ATTR + _uvarint(len(body)) + body
        parts.append(field)
    if not parts:
        raise ValueError("all-default Node encodes to zero bytes; readers stop at it")
    return b"".join(parts)


def encode_metadata(md: GlobalMetadata) -> bytes:
    """Serialize like ``to_proto(md).SerializeToString()``; never empty."""
    parts: list[bytes] = []
    if md.version:
        parts += (_META_VERSION, _utf8(md.version))
    parts += _encode_attrs(_META_ATTR, md.attrs)
    if not parts:
        raise ValueError("empty GlobalMetadata encodes to zero bytes; set a version")
    return b"".join(parts)


# --------------------------------------------------------------------------
# Converters to / from protobuf messages
# --------------------------------------------------------------------------


def _attr_to_proto(attr: Attr, target: Message) -> None:
    name, member, value = attr
    target.name = name
    if not member:
        return
    if member not in _MEMBER_ENCODERS:
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


def from_proto(msg: Message) -> ChakraNode | GlobalMetadata:
    """Inverse of :func:`to_proto`; also accepts mlc-chakra's own classes.

    ``doc_string`` of attributes is dropped (the model has no place for it).
    """
    full_name = msg.DESCRIPTOR.full_name
    if full_name == f"{pb.PACKAGE}.Node":
        return _node_from_proto(msg)
    if full_name == f"{pb.PACKAGE}.GlobalMetadata":
        return GlobalMetadata(version=msg.version, attrs=[_attr_from_proto(a) for a in msg.attr])
    raise TypeError(f"expected a Chakra Node or GlobalMetadata message, got {full_name}")


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _write_frames(out: BinaryIO, metadata: GlobalMetadata, nodes: Iterable[ChakraNode]) -> int:
    """Writes metadata then nodes, batching small frames into ~1 MiB writes."""
    first = encode_metadata(metadata)
    pending = [_uvarint(len(first)), first]
    pending_bytes = len(first)
    count = 0
    for node in nodes:
        # Writers with their own fast path hand over already-encoded nodes.
        data = node if type(node) is bytes else encode_node(node)
        pending += (_uvarint(len(data)), data)
        pending_bytes += len(data)
        count += 1
        if pending_bytes >= _FLUSH_BYTES:
            out.write(b"".join(pending))
            pending.clear()
            pending_bytes = 0
    out.write(b"".join(pending))
    return count


def _write_stream(raw: BinaryIO, gzipped: bool, metadata: GlobalMetadata, nodes: Iterable) -> int:
    if not gzipped:
        return _write_frames(raw, metadata, nodes)
    # filename="" and mtime=0: no temp name or time stamp in the header, so
    # equal inputs give equal files.
    with gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0
    ) as stream:
        return _write_frames(stream, metadata, nodes)


def _temp_path(path: str) -> str:
    """Hidden sibling of ``path``: same directory, so ``os.replace`` is atomic."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")


def write_et(
    path: str | os.PathLike[str], metadata: GlobalMetadata, nodes: Iterable[ChakraNode | bytes]
) -> int:
    """Write an ``.et`` file (gzip if the name ends in ``.gz``); returns node count.

    Atomic: output goes to a temp file that replaces ``path`` only on success,
    so a failure (bad node, full disk, Ctrl-C) never leaves a truncated trace.
    """
    path = os.fspath(path)
    tmp = _temp_path(path)
    # os.open with 0o666 lets the umask decide permissions, as open() would.
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:  # name the file the user asked for, not the temp file
        raise OSError(exc.errno, exc.strerror, path) from exc
    try:
        with os.fdopen(fd, "wb") as raw:
            count = _write_stream(raw, path.lower().endswith(".gz"), metadata, nodes)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return count


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def _open_for_read(path: str) -> tuple[BinaryIO, bool]:
    """Opens plain or gzip (by magic bytes, not by name); returns (stream, gzipped)."""
    try:
        raw = open(path, "rb")  # closed by the caller
    except OSError as exc:
        raise InputError(path, f"cannot open: {exc.strerror or exc}") from exc
    if raw.peek(len(_GZIP_MAGIC))[: len(_GZIP_MAGIC)] != _GZIP_MAGIC:
        return raw, False
    return gzip.GzipFile(fileobj=raw, mode="rb"), True


def _read(stream: BinaryIO, size: int, path: str, offset: int) -> bytes:
    try:
        return stream.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(
            path, f"corrupt gzip data after decompressed byte {offset}: {exc}"
        ) from exc


def _decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position); value -1 if the buffer ends inside the varint,
    -2 if it runs past 10 bytes."""
    result = 0
    shift = 0
    end = min(len(buf), pos + _MAX_VARINT_BYTES)
    for i in range(pos, end):
        byte = buf[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i + 1
        shift += 7
    return (-2 if end - pos == _MAX_VARINT_BYTES else -1), end


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
    if length > _MAX_MESSAGE_BYTES:
        raise InputError(path, f"{where} claims {length} bytes, over protobuf's 2 GiB limit")
    return length, body


# (buffer, stream offset of buffer[0], index of the first message, position of
# its length varint, body start of every message, body end of every message).
# Messages are contiguous: each one's length varint starts where the last ended.
_Batch = tuple[bytes, int, int, int, list[int], list[int]]


def _where(unit: str, index: int, offset: int) -> str:
    return f"message #{index} at {unit} offset {offset}"


def _frame_batches(stream: BinaryIO, path: str, unit: str) -> Iterator[_Batch]:
    """Frames every complete message of each buffer fill in one tight loop.

    Reads ``_READ_CHUNK`` bytes at a time (the same reads, so the same error
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
            if size - pos < _MAX_VARINT_BYTES and not eof:
                chunk = _read(stream, _READ_CHUNK, path, base + size)
                eof = not chunk
                buf, base, pos = buf[pos:] + chunk, base + pos, 0
                continue
            if pos == size:
                return
            first_index, first_pos = index, pos
            bodies: list[int] = []
            ends: list[int] = []
            # Frames starting past ``limit`` wait for a refill (unless at eof):
            # their length varint may continue in the next chunk.
            limit = size if eof else size - _MAX_VARINT_BYTES
            error: InputError | None = None
            end = 0
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
            if bodies:
                yield buf, base, first_index, first_pos, bodies, ends
            if error is not None:
                raise error
            if end > size:  # a message longer than the rest of the buffer
                where = _where(unit, index, base + pos)
                more = _read(stream, end - size, path, base + size)
                buf, base, body, end = buf[pos:] + more, base + pos, body - pos, end - pos
                pos = 0
                if end > len(buf):
                    have = len(buf) - body
                    raise InputError(path, f"truncated {where}: needs {length} bytes, file has {have}")
                yield buf, base, index, 0, [body], [end]
                pos = end
                index += 1


def _unit(gzipped: bool) -> str:
    return "decompressed byte" if gzipped else "byte"


def _frames(path: str) -> Iterator[tuple[int, str, bytes]]:
    """Yields (message index, "message #i at <unit> offset N", message bytes)."""
    stream, gzipped = _open_for_read(path)
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
        if wire == _WIRE_VARINT:
            value, pos = _decode_varint(data, pos)
            if value < 0:
                raise ValueError("malformed varint")
        elif wire == _WIRE_LEN:
            length, pos = _decode_varint(data, pos)
            if length < 0:
                raise ValueError("malformed length")
            pos += length
        elif wire in (_WIRE_I64, _WIRE_I32):
            pos += 8 if wire == _WIRE_I64 else 4
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
        if field not in (1, 2) or wire != _WIRE_LEN:
            return f"it has field {field} with wire type {wire} (only version=1, attr=2 exist)"
    return None  # no version is fine: mlc-chakra's converter writes none


def _decode_metadata(path: str, where: str, data: bytes) -> GlobalMetadata:
    problem = _metadata_problem(data)
    if problem is None:
        try:
            return from_proto(pb.GlobalMetadata.FromString(data))
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
# of ``_FAST_FAILURES`` and the message goes through protobuf ``Node`` +
# ``from_proto`` instead, so results and error messages are those of the
# protobuf path by construction.
# --------------------------------------------------------------------------


class _Unhandled(Exception):
    """The fast decoder leaves this message to protobuf."""


_FAST_FAILURES = (_Unhandled, DecodeError, KeyError, IndexError)

_TWO_31, _TWO_32, _TWO_63 = 1 << 31, 1 << 32, 1 << 63


def _varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """(uint64 value, next position); _Unhandled past 10 bytes or 64 bits
    (what protobuf does then is left to protobuf), IndexError if truncated."""
    value = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > _U64_MAX:
                raise _Unhandled
            return value, pos
        shift += 7
        if shift == 70:
            raise _Unhandled


def _signed64(value: int) -> int:
    return value - _TWO_64 if value >= _TWO_63 else value


def _signed32(value: int) -> int:
    value &= _U32_MAX
    return value - _TWO_32 if value >= _TWO_31 else value


def _zigzag32(value: int) -> int:
    value &= _U32_MAX
    return (value >> 1) ^ -(value & 1)


# Varint oneof member with a one-byte tag -> (the tag, uint64 -> the Python
# value protobuf gives). sint64_val and bool_val have two-byte tags.
_VARINT_MEMBERS: dict[str, tuple[int, Callable[[int], Any]]] = {
    "int32_val": (7 << 3, _signed32),
    "int64_val": (9 << 3, _signed64),
    "uint32_val": (11 << 3, lambda v: v & _U32_MAX),
    "uint64_val": (13 << 3, lambda v: v),
    "sint32_val": (15 << 3, _zigzag32),
}

# AttributeProto body -> attr, for bodies that repeat (flags, thread ids, op
# schemas, dependency kinds). List values are copied on every hit. Cleared
# when full, so per-node values cannot grow it without bound.
_ATTR_CACHE: dict[bytes, Attr] = {}
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
        if len(_ATTR_CACHE) >= _ATTR_CACHE_MAX:
            _ATTR_CACHE.clear()
        _ATTR_CACHE[body] = attr


def _decode_attr(body: bytes) -> Attr:
    """AttributeProto body -> attr, on a miss of ``_ATTR_CACHE``."""
    head = body[1] + 3 if len(body) > 2 and body[0] == 0x0A and body[1] < 0x80 else 0
    prefix = _ATTR_PREFIXES.get(body[:head]) if head else None
    if prefix is not None:
        value, pos = _varint_at(body, head)
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
            _, pos = _varint_at(body, head)
        except _FAST_FAILURES:
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
_NODE_TYPE_BY_INT: dict[int, NodeType] = {int(t): t for t in NodeType}


def _fast_node(data: bytes) -> ChakraNode:
    """``from_proto(Node.FromString(data))``, or one of ``_FAST_FAILURES``
    (then the protobuf path gives the result or the error)."""
    msg = _RawNode.FromString(data)
    get = _ATTR_CACHE.get
    attrs: list[Attr] = []
    for body in msg.attr[:]:  # a slice is a list: cheaper than iterating the container
        attr = get(body)
        if attr is None:
            attr = _decode_attr(body)
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
        _NODE_TYPE_BY_INT[msg.type],  # KeyError for values NodeType lacks
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
        return from_proto(msg)
    except ValueError as exc:
        raise InputError(path, f"{where}: {exc}") from exc


def decode_node(data: bytes) -> ChakraNode:
    """One Node message -> ChakraNode, as ``from_proto(Node.FromString(data))``.

    Raises InputError (path "<bytes>") where that would raise.
    """
    try:
        return _fast_node(data)
    except _FAST_FAILURES:
        pass
    return _protobuf_node("<bytes>", "message", data)


def _decode_nodes(path: str, frames: Iterator[tuple[int, str, bytes]]) -> Iterator[ChakraNode]:
    for _index, where, data in frames:
        try:
            node = _fast_node(data)
        except _FAST_FAILURES:
            node = None  # outside the except block: no chained traceback
        if node is None:
            node = _protobuf_node(path, where, data)
        yield node


def _nodes_from_batches(path: str, unit: str, batches: Iterable[_Batch]) -> Iterator[ChakraNode]:
    fast = _fast_node
    for buf, base, index, pos, bodies, ends in batches:
        for body, end in zip(bodies, ends):
            try:
                node = fast(buf[body:end])
            except _FAST_FAILURES:
                node = None  # outside the except block: no chained traceback
            if node is None:
                node = _protobuf_node(path, _where(unit, index, base + pos), buf[body:end])
            yield node
            index += 1
            pos = end


def _rest_of(first: _Batch, batches: Iterator[_Batch]) -> Iterator[_Batch]:
    """The first batch less its first message, then the other batches."""
    buf, base, index, _pos, bodies, ends = first
    if len(bodies) > 1:
        yield buf, base, index + 1, ends[0], bodies[1:], ends[1:]
    yield from batches


def read_et(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """Reads the metadata now and returns it with a lazy iterator of nodes.

    Plain or gzip (detected by magic bytes). Malformed input raises
    ``InputError`` naming the message index and byte offset, either here
    (metadata) or while iterating (nodes).
    """
    path = os.fspath(path)
    stream, gzipped = _open_for_read(path)
    unit = _unit(gzipped)
    batches = _frame_batches(stream, path, unit)
    first = next(batches, None)
    if first is None:
        raise InputError(path, "empty file: expected a GlobalMetadata message first")
    buf, base, _index, pos, bodies, ends = first
    metadata = _decode_metadata(path, _where(unit, 0, base + pos), buf[bodies[0] : ends[0]])
    return metadata, _nodes_from_batches(path, unit, _rest_of(first, batches))


# --------------------------------------------------------------------------
# Pre-encoded fields, for writers that emit millions of similar nodes
# --------------------------------------------------------------------------


class FieldEncoder:
    """Encoded ``Node`` fields with the repetitive parts cached, so a writer
    can assemble a node's bytes from a few lookups and joins instead of going
    through ``ChakraNode`` + ``encode_node`` (same bytes, tested).

    Callers join fields in field-number order: id, name, type, ctrl_deps,
    data_deps, start, duration, inputs, outputs, attrs.
    """

    def __init__(self) -> None:
        self._names: dict[str, bytes] = {}
        self._attrs: dict[tuple[str, str, Any], bytes] = {}
        self._int64_prefix: dict[str, tuple[bytes, ...]] = {}

    @staticmethod
    def varint_field(tag: bytes, value: int) -> bytes:
        """tag + uint64 varint, omitted (b"") when zero as proto3 does."""
        return tag + _uvarint(value) if value else b""

    @staticmethod
    def packed_uint64(tag: bytes, values: Iterable[int]) -> bytes:
        packed = b"".join([_uvarint(v) for v in values])
        return tag + _uvarint(len(packed)) + packed if packed else b""

    def name(self, name: str) -> bytes:
        field = self._names.get(name)
        if field is None:
            field = _NODE_NAME + _utf8(name) if name else b""
            self._names[name] = field
        return field

    @staticmethod
    def node_type(node_type: int) -> bytes:
        return _NODE_TYPES.get(node_type, b"")

    @staticmethod
    def ioinfo(tag: bytes, values: bytes, shapes: bytes, types: bytes) -> bytes:
        """IOInfo from UTF-8 JSON texts (empty ones omitted)."""
        body = b"".join((
            _IOINFO_VALUES + _uvarint(len(values)) + values if values else b"",
            _IOINFO_SHAPES + _uvarint(len(shapes)) + shapes if shapes else b"",
            _IOINFO_TYPES + _uvarint(len(types)) + types if types else b"",
        ))
        return tag + _uvarint(len(body)) + body

    def attr(self, name: str, member: str, value: Any) -> bytes:
        """A framed ``attr`` field for a value that repeats across nodes
        (flags, thread ids, op schemas, dependency-kind tuples)."""
        key = (name, member, value)
        field = self._attrs.get(key)
        if field is None:
            listed = list(value) if isinstance(value, tuple) else value
            body = _encode_attr((name, member, listed))
            field = _NODE_ATTR + _uvarint(len(body)) + body
            if len(self._attrs) < _NODE_ATTR_CACHE_MAX:
                self._attrs[key] = field
        return field

    def attr_int64(self, name: str, value: int) -> bytes:
        """A framed ``int64_val`` attr for per-node values (no caching of the
        value; the name and framing are precomputed per varint length)."""
        if value < 0:
            return self.attr(name, "int64_val", value)
        prefixes = self._int64_prefix.get(name)
        if prefixes is None:
            name_field = _attr_name_field(name)
            tag = _MEMBER_ENCODERS["int64_val"](0)[:-1]
            prefixes = tuple(_NODE_ATTR + _uvarint(len(name_field) + len(tag) + n) + name_field + tag
                             for n in range(_MAX_VARINT_BYTES + 1))
            self._int64_prefix[name] = prefixes
        v = _uvarint(value)
        return prefixes[len(v)] + v


# Public names for writers with their own fast path (see FieldEncoder).
uvarint = _uvarint
SMALL_VARINTS = _VARINT_CACHE
IOINFO_TAGS = (_IOINFO_VALUES, _IOINFO_SHAPES, _IOINFO_TYPES)
NODE_TAGS = {
    "ctrl_deps": _NODE_CTRL_DEPS, "data_deps": _NODE_DATA_DEPS, "start_time_micros": _NODE_START,
    "duration_micros": _NODE_DURATION, "inputs": _NODE_INPUTS, "outputs": _NODE_OUTPUTS,
    "id": _NODE_ID,
}

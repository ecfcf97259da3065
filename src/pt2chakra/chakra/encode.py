"""Chakra ``.et`` encoding and writing, without protobuf.

Framing: ``varint(length) || message`` repeated, a ``GlobalMetadata`` first and
a ``Node`` for every later message, optionally gzip-compressed.

A hand-written proto3 encoder instead of protobuf's ``SerializeToString``:
building a protobuf message from Python costs one attribute set per field,
which dominates; the hand encoder goes straight from ``ChakraNode`` to bytes
and is byte-identical to protobuf's output (tested). Keeping protobuf out of
this module also keeps it out of the start-up of every conversion.
"""

from __future__ import annotations

import gzip
import operator
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import chain, groupby, islice
from typing import Any, BinaryIO, NamedTuple, Protocol, cast

from pt2chakra.atomic import atomic_output
from pt2chakra.chakra.compiled import fast_path
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata, NodeType
from pt2chakra.chakra.wire import (
    I32_MAX,
    I32_MIN,
    I64_MAX,
    I64_MIN,
    MAX_VARINT_BYTES,
    TWO_64,
    U32_MAX,
    U64_MAX,
    WIRE_I32,
    WIRE_I64,
    WIRE_LEN,
    WIRE_VARINT,
)

# AttributeProto's oneof members in field order (3..32): ``<kind>_val`` then
# ``<kind>_list`` per kind. chakra_schema derives the same tuple from the
# descriptor and the reader checks that the two agree.
ATTR_MEMBERS: tuple[str, ...] = tuple(
    f"{kind}_{suffix}"
    for kind in ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
                 "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes")
    for suffix in ("val", "list")
)

# --------------------------------------------------------------------------
# Wire-format constants
# --------------------------------------------------------------------------

_GZIP_LEVEL = 6  # zlib's default: level 9 is several times slower for ~1% less
# Nodes framed and written at a time: about 1 MiB of a typical trace's nodes.
_FRAME_BATCH = 2048

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


def _varint_tables() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """Every 1- and 2-byte varint (``_VARINT_CACHE``), and the low 14 bits of
    a longer one: two bytes, both with the continuation bit
    (``_VARINT_CONTINUED``), each by value below ``_VARINT_CACHE_SIZE``.

    Built from the two bytes of value i's 2-byte varint as columns: the low
    7 bits with the continuation bit (0x80..0xFF over and over), then i >> 7
    (each 0..0x7F for 128 values in a row; ``translate`` adds 0x80), paired
    up in C (map, zip): ~4 ms, where a Python loop per value cost ~10."""
    low = bytes(range(0x80, 0x100)) * (_VARINT_CACHE_SIZE >> 7)
    high = b"".join(bytes((byte,)) * 0x80 for byte in range(_VARINT_CACHE_SIZE >> 7))
    small = tuple(map(bytes, zip(range(0x80)))) + tuple(map(bytes, zip(low[0x80:], high[0x80:])))
    continued = tuple(map(bytes, zip(low, high.translate(bytes(range(0x80, 0x100)) * 2))))
    return small, continued


class _Varints(Protocol):
    """A varint table: ``_VARINT_CACHE`` or ``_VARINT_CONTINUED``, built or not."""

    def __getitem__(self, value: int, /) -> bytes: ...


# Lookups the stand-ins answer (~0.5 us each) before they build the tables:
# a compiled conversion makes a few hundred (names and attribute values met
# first; 886 on a 25k-op host trace), a Python path about ten per node (it
# gets the tables within a few hundred nodes).
_LOOKUPS_BEFORE_BUILDING = 4096
# Indexed as a table of that size is, for the same IndexError or TypeError.
_NO_VARINTS = (None,) * _VARINT_CACHE_SIZE


class _UnbuiltVarints:
    """A varint table until it is built: its 32k bytes objects cost ~4 ms of
    every import, yet a compiled conversion looks up only a few hundred
    varints in Python. This answers the first ``_LOOKUPS_BEFORE_BUILDING``
    one at a time, then builds both tables and puts them in the module in
    its place: the per-node Python paths read ``_VARINT_CACHE`` and
    ``_VARINT_CONTINUED`` as module globals, so they index tuples from then
    on. Answers and errors are the tables' own."""

    lookups = 0  # by both stand-ins together

    def __init__(self, continued: bool) -> None:
        self._continued = continued

    def __getitem__(self, value: int) -> bytes:
        _NO_VARINTS[value]  # the table's IndexError or TypeError, if any
        cls = _UnbuiltVarints
        cls.lookups += 1
        if cls.lookups >= _LOOKUPS_BEFORE_BUILDING:
            return _build_tables()[self._continued][value]
        value = operator.index(value) % _VARINT_CACHE_SIZE
        low = (value & 0x7F) | 0x80
        if self._continued:
            return bytes((low, (value >> 7) | 0x80))
        return bytes((value,)) if value < 0x80 else bytes((low, value >> 7))


def _build_tables() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """Builds the varint tables into the module (see ``_UnbuiltVarints``)."""
    global _VARINT_CACHE, _VARINT_CONTINUED
    tables = _varint_tables()
    _VARINT_CACHE, _VARINT_CONTINUED = tables
    return tables


_VARINT_CACHE: _Varints = _UnbuiltVarints(continued=False)
_VARINT_CONTINUED: _Varints = _UnbuiltVarints(continued=True)


def _tag(field: int, wire_type: int) -> bytes:
    return _build_varint((field << 3) | wire_type)


# Node (field numbers 1..10) and GlobalMetadata / AttributeProto / IOInfo tags.
_NODE_ID = _tag(1, WIRE_VARINT)
_NODE_NAME = _tag(2, WIRE_LEN)
_NODE_TYPE = _tag(3, WIRE_VARINT)
_NODE_CTRL_DEPS = _tag(4, WIRE_LEN)
_NODE_DATA_DEPS = _tag(5, WIRE_LEN)
_NODE_START = _tag(6, WIRE_VARINT)
_NODE_DURATION = _tag(7, WIRE_VARINT)
_NODE_INPUTS = _tag(8, WIRE_LEN)
_NODE_OUTPUTS = _tag(9, WIRE_LEN)
_NODE_ATTR = _tag(10, WIRE_LEN)
_META_VERSION = _tag(1, WIRE_LEN)
_META_ATTR = _tag(2, WIRE_LEN)
_ATTR_NAME = _tag(1, WIRE_LEN)
_IOINFO_VALUES = _tag(1, WIRE_LEN)
_IOINFO_SHAPES = _tag(2, WIRE_LEN)
_IOINFO_TYPES = _tag(3, WIRE_LEN)
_LIST_VALUES = _tag(1, WIRE_LEN)  # ``values = 1`` of every XList message


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
    if value < 0 or value > U64_MAX:
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
    _checked(value, I32_MIN, I32_MAX, "int32")
    return _uvarint(value + TWO_64 if value < 0 else value)


def _int64(value: int) -> bytes:
    _checked(value, I64_MIN, I64_MAX, "int64")
    return _uvarint(value + TWO_64 if value < 0 else value)


def _uint32(value: int) -> bytes:
    return _uvarint(_checked(value, 0, U32_MAX, "uint32"))


def _sint32(value: int) -> bytes:
    _checked(value, I32_MIN, I32_MAX, "sint32")
    return _uvarint(value << 1 if value >= 0 else ((-value) << 1) - 1)


def _sint64(value: int) -> bytes:
    _checked(value, I64_MIN, I64_MAX, "sint64")
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
    "double": (3, WIRE_I64, _fixed_width("d", None, None, "double")),
    "float": (5, WIRE_I32, _float32),
    "fixed32": (19, WIRE_I32, _fixed_width("I", 0, U32_MAX, "fixed32")),
    "fixed64": (21, WIRE_I64, _fixed_width("Q", 0, U64_MAX, "fixed64")),
    "sfixed32": (23, WIRE_I32, _fixed_width("i", I32_MIN, I32_MAX, "sfixed32")),
    "sfixed64": (25, WIRE_I64, _fixed_width("q", I64_MIN, I64_MAX, "sfixed64")),
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
    val_tag, list_tag = _tag(field, WIRE_VARINT), _tag(field + 1, WIRE_LEN)

    def scalar(value: Any) -> bytes:
        return val_tag + encode(value)

    def packed(values: Iterable[Any]) -> bytes:
        return _packed_list(list_tag, b"".join(map(encode, values)))

    return scalar, packed


def _fixed_encoders(field: int, wire: int, pack: Callable) -> tuple[Callable, Callable]:
    val_tag, list_tag = _tag(field, wire), _tag(field + 1, WIRE_LEN)

    def scalar(value: Any) -> bytes:
        return val_tag + pack((value,))

    def packed(values: Iterable[Any]) -> bytes:
        return _packed_list(list_tag, pack(values))

    return scalar, packed


def _len_encoders(field: int, encode: Callable[[Any], bytes]) -> tuple[Callable, Callable]:
    val_tag, list_tag = _tag(field, WIRE_LEN), _tag(field + 1, WIRE_LEN)

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
    assert sorted(encoders) == sorted(ATTR_MEMBERS), "encoder table out of sync with schema"
    return encoders


# Oneof member name (e.g. "int64_val") -> encoder of that field (tag included).
MEMBER_ENCODERS = _build_member_encoders()


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
    encode = MEMBER_ENCODERS.get(member)
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
    m for m in ATTR_MEMBERS if not m.endswith("_list") and m not in ("double_val", "float_val")
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
# Writing
# --------------------------------------------------------------------------


class FramedNodes(NamedTuple):
    """Nodes already framed (``varint(len) || message`` each, joined), as a
    writer with its own fast path hands over a batch (``NodeWriter.framed``):
    written as they are, with no bytes object or Python step per node."""

    data: bytes
    n_nodes: int  # how many nodes ``data`` holds


# An item of the node stream ``encode_et_file`` writes.
NodeItem = ChakraNode | bytes | FramedNodes


def node_count(item: NodeItem) -> int:
    """How many nodes an item of a node stream stands for (progress counts them)."""
    return item.n_nodes if isinstance(item, FramedNodes) else 1


def _write_frames(out: BinaryIO | gzip.GzipFile, metadata: GlobalMetadata,
                  nodes: Iterable[NodeItem]) -> int:
    """Writes metadata then nodes: ``FramedNodes`` each as it comes, other
    items ``_FRAME_BATCH`` at a time, each batch framed and joined in one
    write (about 1 MiB). Runs of one type are found in C (``groupby``), so
    a stream of single nodes still takes no Python step per node."""
    first = encode_metadata(metadata)
    out.write(_uvarint(len(first)) + first)
    count = 0
    batch: list[ChakraNode | bytes] = []  # single nodes not yet written
    for kind, run in groupby(nodes, type):
        if kind is FramedNodes:
            if batch:
                out.write(_framed(batch))
                count += len(batch)
                batch = []
            for framed in cast("Iterator[FramedNodes]", run):
                out.write(framed.data)
                count += framed.n_nodes
            continue
        single = cast("Iterator[ChakraNode | bytes]", run)
        batch += islice(single, _FRAME_BATCH - len(batch))
        while len(batch) == _FRAME_BATCH:
            out.write(_framed(batch))
            count += len(batch)
            batch = list(islice(single, _FRAME_BATCH))
    if batch:
        out.write(_framed(batch))
        count += len(batch)
    return count


def _framed(batch: Sequence[ChakraNode | bytes]) -> bytes:
    """``varint(len) || message`` of each node, joined. Writers with their own
    fast path hand over already-encoded nodes: a batch of them (messages
    under 16 KiB, as nearly all are) is framed by built-ins, with no Python
    step per node."""
    if set(map(type, batch)) == {bytes}:
        messages = cast("Sequence[bytes]", batch)
        sizes = list(map(len, messages))
        if max(sizes) < _VARINT_CACHE_SIZE:
            return b"".join(chain.from_iterable(zip(map(_VARINT_CACHE.__getitem__, sizes),
                                                    messages)))
    parts: list[bytes] = []
    for node in batch:
        data = node if isinstance(node, bytes) else encode_node(node)
        parts += (_uvarint(len(data)), data)
    return b"".join(parts)


def _write_stream(raw: BinaryIO, gzipped: bool, metadata: GlobalMetadata,
                  nodes: Iterable[NodeItem]) -> int:
    if not gzipped:
        return _write_frames(raw, metadata, nodes)
    # filename="" and mtime=0: no temp name or time stamp in the header, so
    # equal inputs give equal files.
    with gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0
    ) as stream:
        return _write_frames(stream, metadata, nodes)


def encode_et_file(
    path: str | os.PathLike[str], metadata: GlobalMetadata, nodes: Iterable[NodeItem]
) -> int:
    """Write an ``.et`` file (gzip if the name ends in ``.gz``); returns node count.

    Atomic: output goes to a temp file that replaces ``path`` only on success,
    so a failure (bad node, full disk, Ctrl-C) never leaves a truncated trace.
    Items may be ``ChakraNode``s, already-encoded Node messages or
    ``FramedNodes``.
    """
    path = os.fspath(path)
    with atomic_output(path) as raw:
        return _write_stream(raw, path.lower().endswith(".gz"), metadata, nodes)


# --------------------------------------------------------------------------
# Fast path: nodes from flat tuples of raw values
# --------------------------------------------------------------------------
#
# A converter that emits millions of similar nodes skips ``ChakraNode``: it
# hands ``NodeWriter`` one tuple of raw values per node and gets the bytes
# ``encode_node`` would give (tested). Every tag, length and varint is still
# written in this module, so the two paths share one wire format.

# The Node fields at the head of every NodeWriter tuple, in field order.
NODE_FIELDS = ("id", "name", "type", "ctrl_deps", "data_deps", "start_time_micros",
               "duration_micros", "inputs", "outputs")


class EncodedIOInfo(Protocol):
    """IOInfo already encoded (see ``ioinfo_body``): the message body in the
    first ``ioinfo_size`` bytes of ``ioinfo``; what follows is not written."""

    @property
    def ioinfo(self) -> bytes: ...

    @property
    def ioinfo_size(self) -> int: ...


# ``ioinfo_body``'s common case: three texts whose lengths and whose
# body's length are each one table lookup.
_SHORT_IOINFO = _VARINT_CACHE_SIZE - 16


def ioinfo_body(values: Any, shapes: Any, types: Any, tail: Any = b"") -> bytes:
    """The body of an IOInfo message holding the JSON texts ``values``,
    ``shapes`` and ``types`` (any bytes-like objects; empty ones are left
    out, as ``encode_node`` leaves out empty strings), followed by ``tail``,
    kept beside it but not written (see ``EncodedIOInfo``). A host trace's
    inputs and outputs are held this way from loading on: one bytes object
    instead of one per text, and nothing left to do when writing them."""
    n_values, n_shapes, n_types = len(values), len(shapes), len(types)
    if n_values and n_shapes and n_types and n_values + n_shapes + n_types < _SHORT_IOINFO:
        return b"".join((_IOINFO_VALUES, _VARINT_CACHE[n_values], values,
                         _IOINFO_SHAPES, _VARINT_CACHE[n_shapes], shapes,
                         _IOINFO_TYPES, _VARINT_CACHE[n_types], types, tail))
    return b"".join((
        _IOINFO_VALUES + _uvarint(n_values) + values if n_values else b"",
        _IOINFO_SHAPES + _uvarint(n_shapes) + shapes if n_shapes else b"",
        _IOINFO_TYPES + _uvarint(n_types) + types if n_types else b"",
        tail,
    ))


def ioinfo_texts(body: bytes | memoryview) -> tuple[bytes, bytes, bytes]:
    """The (values, shapes, types) texts of an ``ioinfo_body`` (b"" for one
    left out); the inverse of ``ioinfo_body`` without its tail."""
    texts = [b"", b"", b""]
    view = memoryview(body)
    pos, end = 0, len(view)
    while pos < end:
        field = view[pos] >> 3
        pos += 1
        size = shift = 0
        while True:  # the length's varint
            byte = view[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if not 1 <= field <= len(texts) or pos + size > end:
            raise ValueError("not an IOInfo body made by ioinfo_body")
        texts[field - 1] = bytes(view[pos:pos + size])
        pos += size
    return texts[0], texts[1], texts[2]


class AttrSpec(NamedTuple):
    """An attribute of the nodes a NodeWriter encodes, after the Node fields.

    ``repeats``: its values recur across nodes (flags, thread ids, schemas),
    so each is encoded once and then looked up. Otherwise it must be an
    ``int64_val`` that is new on every node (ids, durations): caching those
    would only grow, so its framing is precomputed per varint length.
    ``plain`` turns the value a node tuple holds into the attribute's value
    where they differ (a hashable key standing for a list).
    """

    name: str
    member: str
    repeats: bool = True
    plain: Callable[[Any], Any] | None = None


def _framed_node_attr(attr: Attr) -> bytes:
    body = _encode_attr(attr)
    return _NODE_ATTR + _uvarint(len(body)) + body


class _RepeatedAttr(dict[Any, bytes]):
    """Value -> framed ``attr`` field, filled on first use. It stops growing
    at ``_NODE_ATTR_CACHE_MAX`` values, so that an attribute declared
    repeating but unique per node cannot exhaust memory."""

    def __init__(self, spec: AttrSpec) -> None:
        if spec.member not in _CACHEABLE_MEMBERS and spec.plain is None:
            # Floats that compare equal can differ in bytes (0.0, -0.0); lists
            # are unhashable (a ``plain`` may turn a hashable key into one).
            raise ValueError(f"attr {spec.name!r}: {spec.member} values cannot be cached")
        super().__init__()
        self._spec = spec

    def __missing__(self, key: Any) -> bytes:
        name, member, _, plain = self._spec
        field = _framed_node_attr((name, member, key if plain is None else plain(key)))
        if len(self) < _NODE_ATTR_CACHE_MAX:
            self[key] = field
        return field


def _int64_prefixes(spec: AttrSpec) -> tuple[bytes, ...]:
    """An ``int64_val`` attr's bytes before its value's varint, indexed by
    the length of that varint (1..10 bytes)."""
    if spec.member != "int64_val" or spec.plain is not None:
        raise ValueError(f"attr {spec.name!r}: only a plain int64_val may vary on every node")
    head = _attr_name_field(spec.name) + _tag(_VARINT_KINDS["int64"][0], WIRE_VARINT)
    return tuple(_NODE_ATTR + _uvarint(len(head) + n) + head for n in range(MAX_VARINT_BYTES + 1))


# The code per attribute of a compiled attribute encoder (see _compile_attrs):
# ``{i}`` is the attribute's position in the table, ``{index}`` its value's in
# the node tuple. None leaves the attribute out.
_REPEATED_ATTR_CODE = """
    value = values[{index}]
    if value is not None:
        parts.append(fields_{i}[value])"""
_INT64_ATTR_CODE = """
    value = values[{index}]
    if value is not None:
        if _VARINT_CACHE_SIZE <= value < _FOUR_BYTE_LIMIT:
            high = _VARINT_CACHE[value >> 14]
            parts += (prefixes_{i}[2 + len(high)], _VARINT_CONTINUED[value & _LOW_14_BITS], high)
        else:
            varint = _VARINT_CACHE[value] if 0 <= value < _VARINT_CACHE_SIZE else _int64(value)
            parts += (prefixes_{i}[len(varint)], varint)"""


# Per attribute of a NodeWriter: its encoded fields by value (repeating), or
# its int64 prefixes by varint length (new on every node).
AttrTable = _RepeatedAttr | tuple[bytes, ...]


def _attr_tables(attrs: Sequence[AttrSpec]) -> tuple[AttrTable, ...]:
    """Each attribute's table, shared by the compiled Python encoder and the C one."""
    return tuple(_RepeatedAttr(spec) if spec.repeats else _int64_prefixes(spec)
                 for spec in attrs)


def _compile_attrs(tables: Sequence[AttrTable], first: int,
                   ) -> Callable[[list[bytes], Sequence[Any]], None]:
    """The attributes' encoder, compiled from their table into one
    straight-line function (as ``dataclasses`` compiles ``__init__``): it
    appends the fields of the values at ``first``... of a node tuple.

    A loop over the table would interpret it again on every node: about 10%
    more time per CPU node (measured on a 100k-op trace). Where the compiled
    ``encode_node`` is built it takes most nodes, but this is still the path
    of every node it hands back and of every node without a C compiler or
    with ``PT2CHAKRA_PURE_PYTHON``, so it stays. Only positions
    enter the source; names and encoded forms are bound as closures
    (``fields_<i>``, ``prefixes_<i>``)."""
    names = [f"fields_{i}" if isinstance(table, _RepeatedAttr) else f"prefixes_{i}"
             for i, table in enumerate(tables)]
    source = [f"def make({', '.join(names)}):", "  def encode_attrs(parts, values):", "    pass"]
    for i, table in enumerate(tables):
        code = _REPEATED_ATTR_CODE if isinstance(table, _RepeatedAttr) else _INT64_ATTR_CODE
        source.append(code.format(i=i, index=first + i))
    source.append("  return encode_attrs")
    # The module's globals: the varint tables are read as they are when it
    # runs (built on first use, see _UnbuiltVarints); the tables as closures.
    made: dict[str, Any] = {}
    exec(compile("\n".join(source), "<NodeWriter attributes>", "exec"), globals(), made)
    encode_attrs: Callable[[list[bytes], Sequence[Any]], None] = made["make"](*tables)
    return encode_attrs


class NodeWriter:
    """Encodes nodes given as flat tuples of raw values: the ``NODE_FIELDS``
    in order, then one value per ``AttrSpec`` the writer was built with.

    Raw means as a converter holds them, so nothing is converted per node:
    at most one control dependency (an id, or None), data dependencies as
    ``(source id, anything)`` pairs, IOInfo as ``EncodedIOInfo``. A Node field of
    None or 0 is left out, as is an attribute of None, as ``encode_node``
    leaves out defaults. Ids must be non-negative (host traces are checked on
    loading); ``encode_node`` raises for a negative one.
    """

    def __init__(self, attrs: Iterable[AttrSpec]) -> None:
        tables = _attr_tables(tuple(attrs))
        self._encode_attrs = _compile_attrs(tables, len(NODE_FIELDS))
        self._names: dict[str, bytes] = _NameFields()
        # ``ts >> 14`` -> its varint: timestamps share their high bits.
        self._time_high: dict[int, bytes] = {}
        fast = fast_path()
        # One node's message (unframed): the compiled encoder where built (it
        # reads the same tables, and hands any node it does not take, such as
        # one with a name not yet in ``_names``, to ``encode_python``).
        self.encode: Callable[[Sequence[Any]], bytes] = self.encode_python if fast is None \
            else partial(fast.encode_node, (self._names, _NODE_TYPES, tables), self.encode_python)
        # Rows' messages framed and joined, in C where built (the same
        # tables and fallback as ``encode``).
        self.frame: Callable[[Iterable[Sequence[Any]]], bytes] = (
            self.frame_python if fast is None
            else partial(fast.frame_nodes, (self._names, _NODE_TYPES, tables), self.encode_python))

    def framed(self, rows: Iterable[Sequence[Any]]) -> Iterator[FramedNodes]:
        """``rows`` framed ``_FRAME_BATCH`` at a time, for ``encode_et_file``."""
        items = iter(rows)
        while batch := list(islice(items, _FRAME_BATCH)):
            yield FramedNodes(self.frame(batch), len(batch))

    def frame_python(self, rows: Iterable[Sequence[Any]]) -> bytes:
        """``frame`` in Python: ``_framed`` of the rows' ``encode_python``."""
        return _framed(list(map(self.encode_python, rows)))

    def encode_python(self, values: Sequence[Any]) -> bytes:
        """One node's message (unframed). Written flat, ``_uvarint`` inlined
        as table lookups (one below 2**14, two below 2**28): this runs once
        per node, and a call costs more than encoding a field."""
        node_id, name, node_type, ctrl_dep, data_deps, start, duration, inputs, outputs = (
            values[:9])
        # A varint of 2**14 <= v < 2**28 is two table parts, low bits then
        # high, handed to the join as they are (concatenating them first
        # made a bytes object more per field).
        if not node_id:
            parts = []
        elif node_id < _VARINT_CACHE_SIZE:
            parts = [_NODE_ID, _VARINT_CACHE[node_id]]
        elif node_id < _FOUR_BYTE_LIMIT:
            parts = [_NODE_ID, _VARINT_CONTINUED[node_id & _LOW_14_BITS],
                     _VARINT_CACHE[node_id >> 14]]
        else:
            parts = [_NODE_ID, _uvarint(node_id)]
        parts.append(self._names[name])
        if node_type:
            parts.append(_NODE_TYPES.get(node_type) or _NODE_TYPE + _int32(node_type))
        if ctrl_dep is not None:
            if _VARINT_CACHE_SIZE <= ctrl_dep < _FOUR_BYTE_LIMIT:  # most: a packed varint
                high = _VARINT_CACHE[ctrl_dep >> 14]
                parts += (_CTRL_DEPS_OF_SIZE[2 + len(high)],
                          _VARINT_CONTINUED[ctrl_dep & _LOW_14_BITS], high)
            else:
                packed = (_VARINT_CACHE[ctrl_dep] if ctrl_dep < _VARINT_CACHE_SIZE
                          else _uvarint(ctrl_dep))
                parts += (_CTRL_DEPS_OF_SIZE[len(packed)], packed)
        if data_deps:
            if len(data_deps) == 1:  # most nodes
                source = data_deps[0][0]
                if _VARINT_CACHE_SIZE <= source < _FOUR_BYTE_LIMIT:
                    high = _VARINT_CACHE[source >> 14]
                    parts += (_DATA_DEPS_OF_SIZE[2 + len(high)],
                              _VARINT_CONTINUED[source & _LOW_14_BITS], high)
                else:
                    packed = (_VARINT_CACHE[source] if source < _VARINT_CACHE_SIZE
                              else _uvarint(source))
                    parts += (_DATA_DEPS_OF_SIZE[len(packed)], packed)
            else:
                packed = b"".join([_uvarint(source) for source, _ in data_deps])
                parts += (_NODE_DATA_DEPS, _uvarint(len(packed)), packed)
        if start:
            start_high = self._time_high.get(start >> 14)  # only ever set for start >= 2**14
            if start_high is not None:
                parts += (_NODE_START, _VARINT_CONTINUED[start & _LOW_14_BITS], start_high)
            else:
                parts += (_NODE_START, self._timestamp(start))
        if duration:
            parts += (_NODE_DURATION, _VARINT_CACHE[duration] if 0 < duration < _VARINT_CACHE_SIZE
                      else _uvarint(duration))
        if inputs is not None:
            body, size = inputs.ioinfo, inputs.ioinfo_size
            parts += (_NODE_INPUTS, _VARINT_CACHE[size] if size < _VARINT_CACHE_SIZE
                      else _uvarint(size), body if size == len(body) else body[:size])
        if outputs is not None:
            body, size = outputs.ioinfo, outputs.ioinfo_size
            parts += (_NODE_OUTPUTS, _VARINT_CACHE[size] if size < _VARINT_CACHE_SIZE
                      else _uvarint(size), body if size == len(body) else body[:size])
        self._encode_attrs(parts, values)
        return b"".join(parts)

    def _timestamp(self, value: int) -> bytes:
        """A timestamp's varint where the high-bits cache cannot give it:
        small ones, and the first of each high part (range-checked by
        ``_uvarint``, then cached)."""
        varint = _uvarint(value)
        if value >= _VARINT_CACHE_SIZE:
            self._time_high[value >> 14] = varint[2:]
        return varint


class _NameFields(dict[str, bytes]):
    """Node name -> its encoded ``name`` field (none for ""), filled on first use."""

    def __missing__(self, name: str) -> bytes:
        field = self[name] = _NODE_NAME + _utf8(name) if name else b""
        return field


# A packed field of one varint of 1..10 bytes: its tag and length.
_CTRL_DEPS_OF_SIZE = tuple(_NODE_CTRL_DEPS + _build_varint(n) for n in range(MAX_VARINT_BYTES + 1))
_DATA_DEPS_OF_SIZE = tuple(_NODE_DATA_DEPS + _build_varint(n) for n in range(MAX_VARINT_BYTES + 1))


# Public names for tests and tools.
uvarint = _uvarint


"""A lean ``.et`` reader: only the node fields a consumer asks for.

Nodes read here share equal attribute values (lists included): treat them as
read only. ``read_et`` decodes every field of every node (inputs, outputs, control
dependencies, every attribute); a consumer such as the simulator reads a
handful. Here each buffer fill of framed messages is parsed by protobuf's C
parser in one call, as one message whose ``repeated Node node = 1`` holds
them all (a frame's length varint is exactly the length of a field-1
submessage, so inserting the one-byte tag before each frame is enough). The
``Node`` class used there declares only id, name, type, data_deps, the times
and the attributes (as raw bytes); the other fields are skipped as unknown
fields. Only the attributes whose names the caller lists are decoded
(through :mod:`pt2chakra.chakra.decode`'s cached attribute decoder, so their
values are those ``read_et`` gives).

Errors: a buffer fill that does not parse this way, or holds a node type
``NodeType`` lacks or an attribute body the attribute decoder does not
handle, is decoded message by message through ``read_et``'s own path, which
gives its result or its ``InputError``. Fields this reader skips are not
checked (``validate`` checks the whole file).
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from pt2chakra.chakra.compiled import fast_path
from pt2chakra.chakra.decode import (
    ATTR_CACHE,
    FAST_FAILURES,
    NODE_TYPE_BY_INT,
    Batch,
    decode_attr,
    nodes_from_batches,
    open_et_frames,
    varint_at,
)
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata

_F = descriptor_pb2.FieldDescriptorProto
# Node fields kept (name, number, type, label); numbers as in et_def.proto.
_LEAN_FIELDS = (
    ("id", 1, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
    ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL),
    ("type", 3, _F.TYPE_INT32, _F.LABEL_OPTIONAL),  # open enum: same values as int32
    ("data_deps", 5, _F.TYPE_UINT64, _F.LABEL_REPEATED),
    ("start_time_micros", 6, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
    ("duration_micros", 7, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
    ("attr", 10, _F.TYPE_BYTES, _F.LABEL_REPEATED),
)
_PACKAGE = "pt2chakra_lean"
_FRAME_TAG = b"\n"  # field 1, wire type 2 (length-delimited)
# An attribute body starts with its name: tag 0x0A, a one-byte length, the name.
_NAME_TAG = 0x0A
_ONE_BYTE_LEN = 0x80
# Attribute bodies remembered (flags, thread ids and dependency kinds repeat
# on most nodes); cleared when full, as per-node numbers never repeat.
_SEEN_MAX = 1 << 14
_MISS = object()
# One shared empty ``ctrl_deps`` (a tuple: nothing can append to it by mistake).
_NO_DEPS = cast(list[int], ())
_NAN = math.nan
# NodeType by value, as the compiled path indexes it (values 0..7, contiguous).
_NODE_TYPES = tuple(NODE_TYPE_BY_INT[v] for v in range(len(NODE_TYPE_BY_INT)))


class _PythonPath(Exception):
    """Raised through the compiled path: this batch takes the Python path."""


class LeanNodes(list[ChakraNode]):
    """Nodes of ``read_et_apart``: the attribute ``apart_name`` is held apart,
    ``apart[k]`` being node k's value as a float (NaN where it is absent, or
    where the node's ``attrs`` hold it instead: a value that is not a finite
    int or float). The nodes' attribute lists are shared between nodes with
    equal attributes (read only)."""

    __slots__ = ("apart_name", "apart")

    def __init__(self, apart_name: str) -> None:
        super().__init__()
        self.apart_name = apart_name
        self.apart = array("d")


def _usable_number(value: object) -> bool:
    """An int or float value, not bool, not NaN/inf (what a column holds)."""
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _batch_class() -> type[Message]:
    """``message Batch { repeated Node node = 1; }`` over the lean ``Node``."""
    file = descriptor_pb2.FileDescriptorProto(name="pt2chakra_lean.proto", package=_PACKAGE,
                                              syntax="proto3")
    node = file.message_type.add(name="Node")
    for name, number, kind, label in _LEAN_FIELDS:
        node.field.add(name=name, number=number, type=kind, label=label)
    batch = file.message_type.add(name="Batch")
    batch.field.add(name="node", number=1, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                    type_name=f".{_PACKAGE}.Node")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.Batch")
    get_message_class = getattr(message_factory, "GetMessageClass", None)
    if get_message_class is not None:  # protobuf >= 4.22
        return get_message_class(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


_LeanBatch = _batch_class()


class _Lean:
    """The attribute filter and the name pool of one read."""

    def __init__(self, attr_names: Iterable[str], apart: str | None = None) -> None:
        self.wanted_str = frozenset(attr_names)
        self.wanted = frozenset(n.encode() for n in self.wanted_str)
        self.names: dict[str, str] = {}  # one str per distinct node name
        self.seen: dict[bytes, Attr | None] = {}  # body -> its attr, None: not wanted
        # The attribute held apart: its body prefix (name tag, length, name).
        self.apart_name = apart
        self.apart_head = b"" if apart is None else bytes([_NAME_TAG, len(apart.encode())]) + \
            apart.encode()
        self.apart_seen: dict[bytes, Attr] = {}  # its bodies (durations repeat too)
        self.lists: dict[tuple[int, ...], list[Attr]] = {}  # attr ids -> one shared list
        # The compiled path's keys (a node's wanted bodies less the one held
        # apart, each after its length varint) -> one shared list.
        self.keyed: dict[bytes, list[Attr]] = {}
        self.wanted_tuple = tuple(sorted(self.wanted))
        self.apart_bytes = b"" if apart is None else apart.encode()

    def fast_nodes(self, batch: Batch, column: array[float] | None) -> list[ChakraNode] | None:
        """The batch's nodes by the compiled path (the attribute held apart
        going to ``column``); None where it is not built or leaves the batch
        to the Python path. Raises one of ``FAST_FAILURES`` where the exact
        path must decide."""
        fast = fast_path()
        if fast is None:
            return None
        buf, _base, _index, _pos, bodies, ends = batch
        try:
            got = fast.lean_nodes(buf, bodies, ends, self.wanted_tuple, self.apart_bytes,
                                  ChakraNode, _NODE_TYPES, _NO_DEPS, self.names, self.keyed,
                                  self.key_miss)
        except _PythonPath:
            got = None
        if got is None:
            return None
        nodes, values = got
        if column is not None:
            column.frombytes(values)
        return nodes

    def key_miss(self, key: bytes) -> list[Attr]:
        """The attribute list of a key the compiled path has not met yet,
        decoded as ``attrs`` decodes the same bodies, and remembered."""
        bodies = []
        pos = 0
        while pos < len(key):
            length, pos = varint_at(key, pos)
            bodies.append(key[pos:pos + length])
            pos += length
        out = self.attrs(bodies)
        if self.apart_name is not None and any(a[0] == self.apart_name for a in out):
            # A body whose first name is another (the compiled path sorts by
            # that) decodes as the held-apart attribute (protobuf keeps the
            # last name): the Python path moves it to the column.
            raise _PythonPath
        if len(self.keyed) >= _SEEN_MAX:
            self.keyed.clear()
        self.keyed[key] = out
        return out

    def attrs(self, bodies: list[bytes]) -> list[Attr]:
        """The wanted attributes, decoded as ``read_et`` decodes them. Equal
        bodies give the same attribute object (list values included: read
        only), which keeps a million nodes small."""
        out: list[Attr] = []
        seen = self.seen
        for body in bodies:
            got: Any = seen.get(body, _MISS)
            attr = self.first_sight(body) if got is _MISS else got
            if attr is not None:
                out.append(attr)
        return out

    def first_sight(self, body: bytes) -> Attr | None:
        """Decode (or skip) one attribute body and remember the outcome. A
        body that starts with its name (as every writer puts it) is skipped
        unread when that name is not wanted."""
        named = len(body) > 1 and body[0] == _NAME_TAG and body[1] < _ONE_BYTE_LEN
        attr: Attr | None = None
        if not named or body[2:2 + body[1]] in self.wanted:
            attr = ATTR_CACHE.get(body)
            if attr is None:
                attr = decode_attr(body)  # list values come copied
            elif type(attr[2]) is list:  # not decode's own cached list
                attr = (attr[0], attr[1], attr[2][:])
            if not named and attr[0] not in self.wanted_str:
                attr = None
        if len(self.seen) >= _SEEN_MAX:
            self.seen.clear()
        self.seen[body] = attr
        return attr

    def attrs_apart(self, bodies: list[bytes], column: array[float]) -> list[Attr]:
        """``attrs`` less the attribute held apart, whose value goes to
        ``column`` (NaN: absent; all its copies stay in the list, and NaN goes
        to the column, when one is not a usable number). Equal lists are one
        shared list."""
        out: list[Attr] = []
        apart: list[Attr] | None = None
        seen, apart_seen, head, name = self.seen, self.apart_seen, self.apart_head, self.apart_name
        for body in bodies:
            got: Any = seen.get(body, _MISS)
            if got is _MISS:
                got = apart_seen.get(body)
                if got is None:
                    got = self.apart_sight(body) if body.startswith(head) else \
                        self.first_sight(body)
            if got is None:
                continue
            if got[0] == name:  # by its decoded name (a body may be named twice)
                seen.pop(body, None)
                if apart is None:
                    apart = [got]
                else:
                    apart.append(got)
                continue
            out.append(got)
        if apart is None:
            column.append(_NAN)
        elif len(apart) == 1 and type(apart[0][2]) is int:  # the common case
            column.append(float(apart[0][2]))
        elif all(_usable_number(a[2]) for a in apart):
            column.append(float(apart[-1][2]))
        else:
            column.append(_NAN)
            out.extend(apart)
        key = tuple(map(id, out))
        shared = self.lists.get(key)
        if shared is None:
            shared = self.lists[key] = out
        return shared

    def apart_sight(self, body: bytes) -> Attr | None:
        """A body named as the attribute held apart (its value differs per
        node: not remembered); None if its name is not wanted after all."""
        attr = ATTR_CACHE.get(body) or decode_attr(body)
        if type(attr[2]) is list:
            attr = (attr[0], attr[1], attr[2][:])
        if attr[0] not in self.wanted_str:
            return None
        if attr[0] == self.apart_name:
            if len(self.apart_seen) >= _SEEN_MAX:
                self.apart_seen.clear()
            self.apart_seen[body] = attr
        return attr

    def nodes(self, data: bytes, column: array[float] | None = None) -> list[ChakraNode]:
        """Every node of one joined buffer fill (the attribute held apart
        going to ``column``); raises one of ``FAST_FAILURES`` where the
        exact path must decide."""
        out = []
        types, names = NODE_TYPE_BY_INT, self.names
        batch = _LeanBatch.FromString(data).node
        if column is None:
            attrs = self.attrs
            for m in batch:
                name = m.name
                out.append(ChakraNode(m.id, names.setdefault(name, name), types[m.type],
                                      m.start_time_micros, m.duration_micros, _NO_DEPS,
                                      m.data_deps[:], None, None, attrs(m.attr[:])))
            return out
        apart, mark = self.attrs_apart, len(column)
        try:
            for m in batch:
                name = m.name
                out.append(ChakraNode(m.id, names.setdefault(name, name), types[m.type],
                                      m.start_time_micros, m.duration_micros, _NO_DEPS,
                                      m.data_deps[:], None, None, apart(m.attr[:], column)))
        except BaseException:
            del column[mark:]  # the exact path redoes this batch
            raise
        return out


def _joined(batch: Batch) -> bytes:
    """The batch's frames, each preceded by the Batch.node field tag."""
    buf, _base, _index, pos, _bodies, ends = batch
    starts = [pos, *ends[:-1]]
    return _FRAME_TAG + _FRAME_TAG.join([buf[s:e] for s, e in zip(starts, ends)])


def _batch_nodes(lean: _Lean, batch: Batch, column: array[float] | None,
                 ) -> list[ChakraNode] | None:
    """The batch's nodes by the compiled path, else by protobuf's parser;
    None where the exact path must decide."""
    try:
        nodes = lean.fast_nodes(batch, column)
        return nodes if nodes is not None else lean.nodes(_joined(batch), column)
    except (*FAST_FAILURES, DecodeError, UnicodeDecodeError):
        return None


def _lean_nodes(path: str, unit: str, lean: _Lean,
                batches: Iterable[Batch]) -> Iterator[ChakraNode]:
    for batch in batches:
        nodes = _batch_nodes(lean, batch, None)
        if nodes is None:  # the exact path: its result or its error
            yield from _exact_nodes(path, unit, lean, batch)
            continue
        yield from nodes


def _exact_nodes(path: str, unit: str, lean: _Lean, batch: Batch) -> Iterator[ChakraNode]:
    """One batch through ``read_et``'s path, trimmed to what ``lean`` keeps."""
    for node in nodes_from_batches(path, unit, [batch]):
        node.attrs = [a for a in node.attrs if a[0] in lean.wanted_str]
        node.inputs = node.outputs = None
        node.ctrl_deps = _NO_DEPS
        yield node


def read_et_apart(path: str | os.PathLike[str], attr_names: Iterable[str], apart: str,
                  ) -> tuple[GlobalMetadata, LeanNodes]:
    """``read_et_lean``, all nodes at once, with the attribute ``apart`` (one
    of ``attr_names``, a number that differs on most nodes) held in a column
    (see ``LeanNodes``): a million per-node attribute tuples cost seconds."""
    path = os.fspath(path)
    unit, metadata, batches = open_et_frames(path)
    lean = _Lean(attr_names, apart)
    out = LeanNodes(apart)
    column = out.apart
    for batch in batches:
        nodes = _batch_nodes(lean, batch, column)
        if nodes is None:  # the exact path: its result or its error; attributes kept
            nodes = list(_exact_nodes(path, unit, lean, batch))
            column.extend([_NAN] * len(nodes))
        out.extend(nodes)
    return metadata, out


def read_et_lean(path: str | os.PathLike[str], attr_names: Iterable[str],
                 ) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """(metadata, lazy iterator of nodes) like ``read_et``, but the nodes hold
    only id, name, type, times, ``data_deps`` and the attributes named in
    ``attr_names`` (no inputs, outputs or ``ctrl_deps``). The metadata is whole."""
    path = os.fspath(path)
    unit, metadata, batches = open_et_frames(path)
    return metadata, _lean_nodes(path, unit, _Lean(attr_names), batches)

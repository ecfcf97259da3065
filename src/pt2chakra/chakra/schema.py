"""Chakra ``et_def.proto`` message classes, built at import time.

Why not a protoc-generated ``_pb2`` module: generated code pins the protobuf
runtime version it may run under, and pt2chakra must work with every runtime
from 4.21 on. Why a private pool: mlc-chakra's own ``et_def_pb2`` registers the
same file name and message names in the default pool, and both must be
importable in one process (tests compare against it).

``_SERIALIZED_FILE`` is the ``FileDescriptorProto`` of ``et_def.proto`` next to
this module, byte-identical to the one embedded in mlc-chakra's
``et_def_pb2.py``. To regenerate after editing the ``.proto``::

    python -m grpc_tools.protoc -I src/pt2chakra \\
        --descriptor_set_out=et.ds et_def.proto
    # then take FileDescriptorSet.file[0], clear every field's json_name
    # (protoc's generated _pb2 files omit it too) and SerializeToString().
"""

from __future__ import annotations

# No type stubs for protobuf here: its message classes are Any to mypy.
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message

PACKAGE = "ChakraProtoMsg"

_SERIALIZED_FILE = (
    b'\n\x0cet_def.proto\x12\x0eChakraProtoMsg"\x82\t\n\x0eAttributeProto'
    b"\x12\x0c\n\x04name\x18\x01 \x01(\t\x12\x12\n\ndoc_string\x18\x02 \x01"
    b"(\t\x12\x14\n\ndouble_val\x18\x03 \x01(\x01H\x00\x121\n\x0bdouble_lis"
    b"t\x18\x04 \x01(\x0b2\x1a.ChakraProtoMsg.DoubleListH\x00\x12\x13\n\tfl"
    b"oat_val\x18\x05 \x01(\x02H\x00\x12/\n\nfloat_list\x18\x06 \x01(\x0b2"
    b"\x19.ChakraProtoMsg.FloatListH\x00\x12\x13\n\tint32_val\x18\x07 \x01("
    b"\x05H\x00\x12/\n\nint32_list\x18\x08 \x01(\x0b2\x19.ChakraProtoMsg.In"
    b"t32ListH\x00\x12\x13\n\tint64_val\x18\t \x01(\x03H\x00\x12/\n\nint64_"
    b"list\x18\n \x01(\x0b2\x19.ChakraProtoMsg.Int64ListH\x00\x12\x14\n\nui"
    b"nt32_val\x18\x0b \x01(\rH\x00\x121\n\x0buint32_list\x18\x0c \x01(\x0b"
    b"2\x1a.ChakraProtoMsg.Uint32ListH\x00\x12\x14\n\nuint64_val\x18\r \x01"
    b"(\x04H\x00\x121\n\x0buint64_list\x18\x0e \x01(\x0b2\x1a.ChakraProtoMs"
    b"g.Uint64ListH\x00\x12\x14\n\nsint32_val\x18\x0f \x01(\x11H\x00\x121\n"
    b"\x0bsint32_list\x18\x10 \x01(\x0b2\x1a.ChakraProtoMsg.Sint32ListH\x00"
    b"\x12\x14\n\nsint64_val\x18\x11 \x01(\x12H\x00\x121\n\x0bsint64_list"
    b"\x18\x12 \x01(\x0b2\x1a.ChakraProtoMsg.Sint64ListH\x00\x12\x15\n\x0bf"
    b"ixed32_val\x18\x13 \x01(\x07H\x00\x123\n\x0cfixed32_list\x18\x14 \x01"
    b"(\x0b2\x1b.ChakraProtoMsg.Fixed32ListH\x00\x12\x15\n\x0bfixed64_val"
    b"\x18\x15 \x01(\x06H\x00\x123\n\x0cfixed64_list\x18\x16 \x01(\x0b2\x1b"
    b".ChakraProtoMsg.Fixed64ListH\x00\x12\x16\n\x0csfixed32_val\x18\x17 "
    b"\x01(\x0fH\x00\x125\n\rsfixed32_list\x18\x18 \x01(\x0b2\x1c.ChakraPro"
    b"toMsg.Sfixed32ListH\x00\x12\x16\n\x0csfixed64_val\x18\x19 \x01(\x10H"
    b"\x00\x125\n\rsfixed64_list\x18\x1a \x01(\x0b2\x1c.ChakraProtoMsg.Sfix"
    b"ed64ListH\x00\x12\x12\n\x08bool_val\x18\x1b \x01(\x08H\x00\x12-\n\tbo"
    b"ol_list\x18\x1c \x01(\x0b2\x18.ChakraProtoMsg.BoolListH\x00\x12\x14\n"
    b"\nstring_val\x18\x1d \x01(\tH\x00\x121\n\x0bstring_list\x18\x1e \x01("
    b"\x0b2\x1a.ChakraProtoMsg.StringListH\x00\x12\x13\n\tbytes_val\x18\x1f"
    b" \x01(\x0cH\x00\x12/\n\nbytes_list\x18  \x01(\x0b2\x19.ChakraProtoMsg"
    b'.BytesListH\x00B\x07\n\x05value"\x1c\n\nDoubleList\x12\x0e\n\x06value'
    b's\x18\x01 \x03(\x01"\x1b\n\tFloatList\x12\x0e\n\x06values\x18\x01 '
    b'\x03(\x02"\x1b\n\tInt32List\x12\x0e\n\x06values\x18\x01 \x03(\x05"'
    b'\x1b\n\tInt64List\x12\x0e\n\x06values\x18\x01 \x03(\x03"\x1c\n\nUint3'
    b'2List\x12\x0e\n\x06values\x18\x01 \x03(\r"\x1c\n\nUint64List\x12\x0e'
    b'\n\x06values\x18\x01 \x03(\x04"\x1c\n\nSint32List\x12\x0e\n\x06values'
    b'\x18\x01 \x03(\x11"\x1c\n\nSint64List\x12\x0e\n\x06values\x18\x01 '
    b'\x03(\x12"\x1d\n\x0bFixed32List\x12\x0e\n\x06values\x18\x01 \x03(\x07'
    b'"\x1d\n\x0bFixed64List\x12\x0e\n\x06values\x18\x01 \x03(\x06"\x1e\n'
    b'\x0cSfixed32List\x12\x0e\n\x06values\x18\x01 \x03(\x0f"\x1e\n\x0cSfix'
    b'ed64List\x12\x0e\n\x06values\x18\x01 \x03(\x10"\x1a\n\x08BoolList\x12'
    b'\x0e\n\x06values\x18\x01 \x03(\x08"\x1c\n\nStringList\x12\x0e\n\x06va'
    b'lues\x18\x01 \x03(\t"\x1b\n\tBytesList\x12\x0e\n\x06values\x18\x01 '
    b'\x03(\x0c"O\n\x0eGlobalMetadata\x12\x0f\n\x07version\x18\x01 \x01(\t'
    b'\x12,\n\x04attr\x18\x02 \x03(\x0b2\x1e.ChakraProtoMsg.AttributeProto"'
    b"\xa1\x02\n\x04Node\x12\n\n\x02id\x18\x01 \x01(\x04\x12\x0c\n\x04name"
    b"\x18\x02 \x01(\t\x12&\n\x04type\x18\x03 \x01(\x0e2\x18.ChakraProtoMsg"
    b".NodeType\x12\x11\n\tctrl_deps\x18\x04 \x03(\x04\x12\x11\n\tdata_deps"
    b"\x18\x05 \x03(\x04\x12\x19\n\x11start_time_micros\x18\x06 \x01(\x04"
    b"\x12\x17\n\x0fduration_micros\x18\x07 \x01(\x04\x12&\n\x06inputs\x18"
    b"\x08 \x01(\x0b2\x16.ChakraProtoMsg.IOInfo\x12'\n\x07outputs\x18\t "
    b"\x01(\x0b2\x16.ChakraProtoMsg.IOInfo\x12,\n\x04attr\x18\n \x03(\x0b2"
    b'\x1e.ChakraProtoMsg.AttributeProto"7\n\x06IOInfo\x12\x0e\n\x06values'
    b"\x18\x01 \x01(\t\x12\x0e\n\x06shapes\x18\x02 \x01(\t\x12\r\n\x05types"
    b'\x18\x03 \x01(\t"u\n\x06Tensor\x12\x11\n\ttensor_id\x18\x01 \x01(\x04'
    b"\x12\x12\n\nstorage_id\x18\x02 \x01(\x04\x12\x0e\n\x06offset\x18\x03 "
    b"\x01(\x04\x12\x10\n\x08num_elem\x18\x04 \x01(\x04\x12\x12\n\nelem_byt"
    b"es\x18\x05 \x01(\x04\x12\x0e\n\x06device\x18\x06 \x01(\t*\xa1\x01\n"
    b"\x08NodeType\x12\x10\n\x0cINVALID_NODE\x10\x00\x12\x11\n\rMETADATA_NO"
    b"DE\x10\x01\x12\x11\n\rMEM_LOAD_NODE\x10\x02\x12\x12\n\x0eMEM_STORE_NO"
    b"DE\x10\x03\x12\r\n\tCOMP_NODE\x10\x04\x12\x12\n\x0eCOMM_SEND_NODE\x10"
    b"\x05\x12\x12\n\x0eCOMM_RECV_NODE\x10\x06\x12\x12\n\x0eCOMM_COLL_NODE"
    b"\x10\x07*\xb3\x01\n\x12CollectiveCommType\x12\x0e\n\nALL_REDUCE\x10"
    b"\x00\x12\n\n\x06REDUCE\x10\x01\x12\x0e\n\nALL_GATHER\x10\x02\x12\n\n"
    b"\x06GATHER\x10\x03\x12\x0b\n\x07SCATTER\x10\x04\x12\r\n\tBROADCAST"
    b"\x10\x05\x12\x0e\n\nALL_TO_ALL\x10\x06\x12\x12\n\x0eREDUCE_SCATTER"
    b"\x10\x07\x12\x18\n\x14REDUCE_SCATTER_BLOCK\x10\x08\x12\x0b\n\x07BARRI"
    b"ER\x10\tb\x06proto3"
)

POOL = descriptor_pool.DescriptorPool()
FILE_DESCRIPTOR = POOL.AddSerializedFile(_SERIALIZED_FILE)
if FILE_DESCRIPTOR is None:  # very old runtimes return nothing
    FILE_DESCRIPTOR = POOL.FindFileByName("et_def.proto")


def _message_class(name: str) -> type[Message]:
    """Concrete class for ``ChakraProtoMsg.<name>`` from the private pool."""
    descriptor = POOL.FindMessageTypeByName(f"{PACKAGE}.{name}")
    get_message_class = getattr(message_factory, "GetMessageClass", None)
    if get_message_class is not None:  # protobuf >= 4.22
        return get_message_class(descriptor)
    return message_factory.MessageFactory(POOL).GetPrototype(descriptor)


AttributeProto = _message_class("AttributeProto")
GlobalMetadata = _message_class("GlobalMetadata")
Node = _message_class("Node")
IOInfo = _message_class("IOInfo")
Tensor = _message_class("Tensor")

# The XList wrapper of each *_list oneof member of AttributeProto.
DoubleList = _message_class("DoubleList")
FloatList = _message_class("FloatList")
Int32List = _message_class("Int32List")
Int64List = _message_class("Int64List")
Uint32List = _message_class("Uint32List")
Uint64List = _message_class("Uint64List")
Sint32List = _message_class("Sint32List")
Sint64List = _message_class("Sint64List")
Fixed32List = _message_class("Fixed32List")
Fixed64List = _message_class("Fixed64List")
Sfixed32List = _message_class("Sfixed32List")
Sfixed64List = _message_class("Sfixed64List")
BoolList = _message_class("BoolList")
StringList = _message_class("StringList")
BytesList = _message_class("BytesList")

# Names of AttributeProto's ``value`` oneof members, in field-number order.
ATTR_MEMBERS: tuple[str, ...] = tuple(
    field.name for field in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields
)

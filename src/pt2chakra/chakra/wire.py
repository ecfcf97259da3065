"""The protobuf wire format as Chakra's ``.et`` uses it: wire types, integer
ranges and framing limits. The one public home of these constants: the
encoder, both decoders and the lean reader all read them here."""

from __future__ import annotations

# Wire types of a field's tag (protobuf encoding spec).
WIRE_VARINT = 0
WIRE_I64 = 1
WIRE_LEN = 2
WIRE_I32 = 5

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
TWO_64 = 1 << 64  # added to a negative int64 to give its two's-complement varint

MAX_VARINT_BYTES = 10  # a 64-bit varint never takes more
MAX_MESSAGE_BYTES = (1 << 31) - 1  # protobuf refuses to parse larger messages
ET_READ_CHUNK = 1 << 20  # bytes read at a time by the framed readers

"""One big JSON array read a slice of whole elements at a time.

torch's writers (the execution trace observer, the Kineto profiler) put every
element of their big array (``nodes``, ``traceEvents``) in its own block: it
opens with ``{`` and closes with ``}`` alone on a line at the element
indentation, so the array splits between elements at
``\\n<indent>},\\n<indent>{`` (a JSON string cannot hold a raw newline, so
that text is never inside one, and nested objects sit deeper). Reading the
file a chunk at a time and cutting at the last such boundary hands out runs
of whole elements without ever holding the whole text. Any other layout
raises :class:`NotSliceable`; the caller then reads the file whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from pt2chakra.errors import InputError
from pt2chakra.files import GZIP_ERRORS, STDIN, ErrorTypes, open_input

# Decompressed bytes read at a time: large enough that decoding a slice
# costs what decoding the whole would per element, small next to a big trace.
# A slice's bytes and its decoded events are transient at convert's peak (the
# Kineto read, the host ops already held): 8 MiB slices cost ~15 MiB more
# peak at 1M ops than 1 MiB ones, for no CPU measured (issue 29).
JSON_READ_CHUNK = 1 << 20
# The text before the array is read whole; past this much, read the file whole.
HEAD_LIMIT = 16 << 20
_FIRST_ELEMENT = re.compile(rb"\s*\n( +)\{")  # the line that opens the first element


class NotSliceable(Exception):
    """Not laid out one element per block: read the file whole instead."""


# What a streamed loader gives up on, leaving the file to its whole-file
# loader (which names any problem in its own words).
NOT_STREAMABLE: ErrorTypes = (NotSliceable, InputError, *GZIP_ERRORS, ValueError,
                              msgspec.MsgspecError)


def read_sliced(path: str, key: bytes, check_head: Callable[[bytes], None],
                on_slice: Callable[[memoryview], None]) -> tuple[bytes, bytes]:
    """Read ``path`` (plain or gzip), calling ``check_head`` with its first
    chunk (it raises NotSliceable to refuse) and ``on_slice`` with each run of
    whole elements of the array under ``key`` as JSON (``[{...},{...}]``);
    returns the text before ``"key": [`` and the text after the array's ``]``.
    Standard input is not sliced: a refused layout falls back to reading the
    whole file, which a pipe read once cannot give again.

    A slice is a view of the read buffer, valid during the call only: its
    brackets are written over the space before its first element and the
    comma after its last (copying each slice out, with brackets added, cost
    four copies of a trace's text)."""
    if path == STDIN:
        raise NotSliceable(path)
    chunk = JSON_READ_CHUNK
    opening = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*\[')
    stream, _gzipped = open_input(path)
    with stream:
        buf = stream.read(chunk)
        check_head(buf)
        found = opening.search(buf)
        while found is None and len(buf) < HEAD_LIMIT and (more := stream.read(chunk)):
            buf += more  # a long header (Kineto's deviceProperties) or small chunks
            found = opening.search(buf)
        first = _FIRST_ELEMENT.match(buf, found.end()) if found is not None else None
        if found is None or first is None:
            raise NotSliceable
        head = buf[:found.start()]
        indent = first.group(1)
        sep = b"\n" + indent + b"},\n" + indent + b"{"
        # From the indent's last space before the first element's "{".
        data = bytearray(memoryview(buf)[first.end() - 2:])
        del buf
        while more := stream.read(chunk):
            data += more
            cut = data.rfind(sep)
            if cut >= 0:  # elements up to their "}", the rest from the next "{"
                _hand_out(data, cut + len(indent) + 2, on_slice)
                data = _drop_front(data, cut + len(sep) - 2)
    last = re.compile(rb"\n" + re.escape(indent) + rb"\}\s*\]").search(data)
    if last is None:
        raise NotSliceable
    trailer = bytes(data[last.end():])
    if opening.search(trailer):
        raise NotSliceable  # the key twice: a whole-file decoder keeps the last
    _hand_out(data, last.start() + len(indent) + 2, on_slice)
    return head, trailer


def _hand_out(data: bytearray, end: int, on_slice: Callable[[memoryview], None]) -> None:
    """``on_slice`` of ``data[:end + 1]`` as a JSON array: ``data`` starts
    with the space before an element's "{" and ``end`` is the byte after an
    element's "}" (a comma or a space), both overwritten with brackets."""
    data[0] = _OPEN
    data[end] = _CLOSE
    on_slice(memoryview(data)[:end + 1])


def _drop_front(data: bytearray, count: int) -> bytearray:
    """``data`` without its first ``count`` bytes, in place when it can be."""
    try:
        del data[:count]
    except BufferError:  # something decoded from the last slice still views it
        return data[count:]
    return data


_OPEN, _CLOSE = ord("["), ord("]")

"""Read (possibly gzipped) JSON files and decode them into typed structs.

Every failure becomes one ``InputError`` line that names the file and, when
msgspec knows it, the JSON path of the bad value (``$.nodes[3].id``).
"""

from __future__ import annotations

import io
import re
from functools import lru_cache
from os import PathLike
from typing import Any, TypeVar, overload

import msgspec

from pt2chakra.errors import InputError
from pt2chakra.files import gc_paused, gunzip, is_gzip, read_input

T = TypeVar("T")

# POSIX tar puts "ustar" at byte 257 of the first header; published traces
# (param's et_replay inputs) ship as ``.tar.gz`` holding one JSON file.
TAR_MAGIC_OFFSET = 257
TAR_MAGIC = b"ustar"
# A UTF-8 byte-order mark is legal for editors but not for msgspec's parser.
UTF8_BOM = b"\xef\xbb\xbf"
# Bare NaN / Infinity tokens (Python's json.dumps writes them; strict JSON and
# msgspec refuse them). Replaced by null only after a first decode fails.
# Strings are matched as whole tokens first so that a "NaN" inside a string
# is left alone; only bare tokens between separators are replaced.
_NON_FINITE = re.compile(
    rb'("(?:[^"\\]|\\.)*")|(?<=[:\[,])(\s*)-?(?:NaN|Infinity)(?=\s*[,\]}])')

# msgspec (like json) recurses once per nesting level and stops at the
# interpreter's recursion limit; no trace nests more than a few levels, so
# reaching it means a damaged or hostile file.
TOO_DEEP = "values nested too deeply (over the parser's depth limit): not a trace"

TRUNCATED = "truncated: the JSON ends before its closing brackets — did the observer stop cleanly?"

PathArg = str | PathLike[str]


def read_json_bytes(path: PathArg) -> bytes:
    """Return the JSON text of ``path``, gunzipped (and untarred) if needed."""
    where = str(path)
    data = read_input(path)
    if is_gzip(data):
        data = gunzip(where, data)
        if data[TAR_MAGIC_OFFSET : TAR_MAGIC_OFFSET + len(TAR_MAGIC)] == TAR_MAGIC:
            data = _single_tar_member(where, data)
    if data[:3] == UTF8_BOM:
        data = data[3:]
    return data


def _single_tar_member(where: str, data: bytes) -> bytes:
    """Unpack a ``.tar.gz`` holding exactly one regular file."""
    import tarfile  # here: only a tar input needs it (~1 ms at every start-up otherwise)

    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            files = [m for m in tar.getmembers() if m.isfile()]
            if len(files) != 1:
                names = ", ".join(m.name for m in files[:3])
                raise InputError(where, f"tar archive holds {len(files)} files ({names}); expected one JSON file")
            extracted = tar.extractfile(files[0])
            assert extracted is not None  # isfile() guarantees a file object
            return extracted.read()
    except tarfile.TarError as e:
        raise InputError(where, f"corrupt tar archive ({_one_line(str(e))})") from None


@lru_cache(maxsize=64)
def _decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    # Building a Decoder compiles the type; cache it so repeated loads are cheap.
    return msgspec.json.Decoder(type_)


@overload
def decode(path: PathArg, data: bytes | memoryview | msgspec.Raw, type: type[T], *,
           where: str = "$") -> T: ...


@overload
def decode(path: PathArg, data: bytes | memoryview | msgspec.Raw, type: Any, *,
           where: str = "$") -> Any: ...


def decode(path: PathArg, data: bytes | memoryview | msgspec.Raw, type: Any, *,
           where: str = "$") -> Any:
    """Decode ``data`` as ``type``; any failure becomes an ``InputError``.

    The cyclic GC is paused: decoding allocates millions of containers and
    each allocation burst would otherwise trigger a full collection.
    ``where`` replaces the root ``$`` in error paths, for callers decoding a
    sub-document (e.g. ``$.nodes`` kept as ``msgspec.Raw``).
    """
    decoder = _decoder(type)
    try:
        return _decode_no_gc(decoder, data)
    except RecursionError:
        raise InputError(str(path), TOO_DEEP) from None
    except msgspec.ValidationError as e:
        raise InputError(str(path), _validation_problem(str(e), where)) from None
    except msgspec.DecodeError as e:
        message = str(e)
        if "truncated" in message:
            raise InputError(str(path), TRUNCATED) from None
        patched = _replace_non_finite(data)
        if patched is not None:
            return decode(path, patched, type, where=where)
        raise InputError(str(path), f"not valid JSON ({_one_line(message)})") from None


def _decode_no_gc(decoder: msgspec.json.Decoder[Any], data: Any) -> Any:
    with gc_paused():
        return decoder.decode(data)


def _replace_non_finite(data: Any) -> bytes | None:
    raw = bytes(data)
    if b"NaN" not in raw and b"Infinity" not in raw:
        return None
    patched = _NON_FINITE.sub(lambda m: m.group(1) or m.group(2) + b"null", raw)
    return None if patched == raw else patched


def _validation_problem(message: str, where: str) -> str:
    if where != "$":
        message = message.replace("at `$", f"at `{where}", 1)
    return f"unexpected content: {_one_line(message)}"


def _one_line(text: str) -> str:
    return " ".join(text.split())

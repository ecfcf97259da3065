"""Opening the user's input files: the one gzip-aware opener.

Compression is told by gzip's magic bytes, not by the name, because traces
are often renamed (``.json`` holding gzip, ``.gz`` holding plain text).
Every failure to open becomes one ``InputError`` naming the file.
"""

from __future__ import annotations

import gzip
import io
import os
from typing import BinaryIO, cast

from pt2chakra.errors import InputError

# gzip's two magic bytes (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"


def _open_raw(where: str) -> io.BufferedReader:
    try:
        return open(where, "rb")
    except FileNotFoundError:
        raise InputError(where, "cannot open: no such file") from None
    except IsADirectoryError:
        raise InputError(where, "cannot open: is a directory, expected a file") from None
    except OSError as exc:
        raise InputError(where, f"cannot open: {exc.strerror or exc}") from None


def open_input(path: str | os.PathLike[str]) -> tuple[BinaryIO, bool]:
    """(stream, gzipped): a binary stream of ``path``'s content, gunzipped on
    the fly when it starts with gzip's magic. The caller closes it."""
    raw = _open_raw(os.fspath(path))
    if raw.peek(len(GZIP_MAGIC))[: len(GZIP_MAGIC)] != GZIP_MAGIC:
        return raw, False
    return cast(BinaryIO, gzip.GzipFile(fileobj=raw, mode="rb")), True


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The raw bytes of ``path`` (still compressed: whole-buffer inflating, by
    the caller, is faster than streaming)."""
    where = os.fspath(path)
    with _open_raw(where) as raw:
        try:
            return raw.read()
        except OSError as exc:
            raise InputError(where, f"cannot read: {exc.strerror or exc}") from None


def is_gzip(data: bytes) -> bool:
    return data[: len(GZIP_MAGIC)] == GZIP_MAGIC

"""Opening the user's input files: the one gzip-aware opener, and its limits.

Compression is told by gzip's magic bytes, not by the name, because traces
are often renamed (``.json`` holding gzip, ``.gz`` holding plain text).
Every failure to open or read becomes one ``InputError`` naming the file.

Every file opened here is noted as this command's input (``note_input``,
``opened_input``): ``atomic`` refuses to replace any of them, whatever
command planned the write, so an input can never become an output.

Inputs are checked here, once, before anything is read: only regular files
(a FIFO without a writer would block forever, ``/dev/zero`` never ends) or
``-`` for standard input; and no more than ``max_input_size()`` bytes of
content, compressed or not, nor a gzip stream that inflates far more than
any trace does (a "gzip bomb"). ``set_max_input_size`` (the CLI's
``--max-input-size``) raises the limit for users with larger traces.
"""

from __future__ import annotations

import gc
import gzip
import io
import os
import stat
import sys
import types
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, TypeVar, cast, overload

from pt2chakra.errors import InputError

ErrorTypes = tuple[type[BaseException], ...]


def _inflaters() -> tuple[types.ModuleType, types.ModuleType, ErrorTypes]:
    """(gzip module, zlib module, what a damaged stream raises): ISA-L's
    (the ``isal`` package, a dependency) where it imports, 5-8x faster than
    zlib's on trace JSON (a 1M-op host ET inflates in 0.2 CPU-s instead of
    1.0-1.5); else the standard library's, with the same results."""
    try:
        from isal import igzip, isal_zlib
    except ImportError:  # pragma: no cover - isal ships wheels for the usual platforms
        return gzip, zlib, (OSError, EOFError, zlib.error)
    return igzip, isal_zlib, (OSError, EOFError, zlib.error,
                              cast(type[BaseException], isal_zlib.error))


_gzip_module, _zlib_module, GZIP_ERRORS = _inflaters()

# gzip's two magic bytes (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"
# The name that reads standard input.
STDIN = "-"

GIB = 1 << 30
MIB = 1 << 20
# Default ceiling on an input's content (after inflating): a 1M-op host ET is
# about 1 GiB of JSON and loading it takes several times that in memory, so
# 4 GiB covers traces of ~4M ops; beyond that a machine runs out of memory
# rather than failing cleanly. ``--max-input-size`` raises it.
DEFAULT_MAX_INPUT_BYTES = 4 * GIB
# The most a gzip input may inflate relative to its compressed size. Real
# traces inflate 18-32x (JSON) and protobuf .et files less; deflate's ceiling
# is about 1032x, which is where gzip bombs sit. 200x leaves 6x headroom.
MAX_GZIP_RATIO = 200
# Below this much inflated content the ratio is not checked: small, very
# repetitive files are harmless whatever their ratio.
RATIO_FREE_BYTES = 64 * MIB
# Inflating in steps of this size bounds the memory a bomb can take before it
# is caught.
INFLATE_STEP = 64 * MIB

_max_input_bytes = DEFAULT_MAX_INPUT_BYTES
# Standard input can be read once per command: a second ``-`` (``diff - -``,
# ``report - --baseline -``) is refused instead of reading a closed stream.
_stdin_read = False


def reset_standard_input() -> None:
    """A new command starts (``cli.main``): standard input is unread again."""
    global _stdin_read
    _stdin_read = False


# --------------------------------------------------------------------------
# What this command read: never an output
# --------------------------------------------------------------------------

# Every input opened since the guard began (``inputs_guarded``): identity ->
# the name it was opened by. Outside a guard nothing is noted: a library
# user may read a file and later, deliberately, write it again.
_opened: dict[object, str] = {}
_guard_depth = 0


def file_identities(path: str) -> set[object]:
    """What makes two names one file: the resolved, case-normalised path
    (for files not written yet) and the device and inode of an existing file
    (hard links). The one rule ``atomic`` compares outputs by."""
    keys: set[object] = {os.path.normcase(os.path.realpath(path))}
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return keys
    keys.add((info.st_dev, info.st_ino))
    return keys


@contextmanager
def inputs_guarded() -> Iterator[None]:
    """While inside (re-entrant; ``cli.main`` wraps every command), every
    input opened is noted, and ``atomic`` refuses to replace any of them.
    The outermost exit forgets them."""
    global _guard_depth
    _guard_depth += 1
    try:
        yield
    finally:
        _guard_depth -= 1
        if _guard_depth == 0:
            _opened.clear()


def note_input(path: str | os.PathLike[str]) -> None:
    """``path`` is read by this command (the opener calls this for every
    file; a reader that must open a file itself calls it too)."""
    where = os.fspath(path)
    if _guard_depth and where != STDIN:
        for key in file_identities(where):
            _opened.setdefault(key, where)


def opened_input(path: str | os.PathLike[str]) -> str | None:
    """The name of the input that ``path`` is (the same file by any name),
    or None."""
    if not _opened:
        return None
    for key in file_identities(os.fspath(path)):
        if key in _opened:
            return _opened[key]
    return None


def opened_inputs() -> list[str]:
    """Every input noted so far, by the name it was opened by."""
    return list(dict.fromkeys(_opened.values()))


def max_input_size() -> int:
    return _max_input_bytes


def set_max_input_size(limit: int) -> None:
    """Raise (or lower) the ceiling on an input's content, in bytes."""
    global _max_input_bytes
    if limit <= 0:
        raise ValueError("the input size limit must be positive")
    _max_input_bytes = limit


def _size_words(count: int) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB else f"{count / MIB:.1f} MiB"


def _too_large(where: str, what: str) -> InputError:
    return InputError(where, f"{what} is over the input size limit of "
                      f"{_size_words(_max_input_bytes)} (raise it with --max-input-size)")


def _check_inflated(where: str, inflated: int, compressed: int | None) -> None:
    """Refuse content over the absolute limit, or a gzip bomb."""
    if inflated > _max_input_bytes:
        raise _too_large(where, "the decompressed content")
    if compressed and inflated > RATIO_FREE_BYTES and inflated > MAX_GZIP_RATIO * compressed:
        raise InputError(where, f"gzip content inflates over {MAX_GZIP_RATIO}x its compressed "
                         f"size ({_size_words(inflated)} from {_size_words(compressed)}): "
                         "not a trace (a gzip bomb?)")


def check_regular(where: str) -> int:
    """The size of ``where`` when it is a regular file within the limit;
    ``InputError`` otherwise (without opening it: opening a FIFO blocks)."""
    try:
        info = os.stat(where)
    except FileNotFoundError:
        raise InputError(where, "cannot open: no such file") from None
    except OSError as exc:
        raise InputError(where, f"cannot open: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(where, "cannot open: is a directory, expected a file")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "not a plain file")
        raise InputError(where, f"cannot read: {kind}, expected a regular file "
                         f"(use {STDIN} to read standard input)")
    if info.st_size > _max_input_bytes:
        raise _too_large(where, "the file")
    return info.st_size


def _open_raw(where: str) -> io.BufferedReader:
    global _stdin_read
    if where == STDIN:
        if _stdin_read or sys.stdin is None or sys.stdin.buffer.closed:
            raise InputError(STDIN, "standard input is given more than once; it can be read "
                             "once: give each input but one as a file")
        _stdin_read = True
        return cast(io.BufferedReader, sys.stdin.buffer)
    check_regular(where)
    note_input(where)
    try:
        return open(where, "rb")
    except OSError as exc:
        raise InputError(where, f"cannot open: {exc.strerror or exc}") from None


def _gzip_error(where: str, exc: BaseException) -> InputError:
    if isinstance(exc, EOFError):
        return InputError(where, "truncated gzip: the compressed stream ends early")
    text = " ".join(str(exc).split()) or type(exc).__name__
    return InputError(where, f"corrupt gzip data ({text})")


class _GuardedStream:
    """A read-only stream over an inflating (or unbounded) source that counts
    what it hands out against the limits and names ``where`` in every error,
    so a bad CRC found while writing an output is blamed on the input."""

    def __init__(self, where: str, inner: BinaryIO, compressed: int | None) -> None:
        self._where = where
        self._inner = inner
        self._compressed = compressed
        self._count = 0

    def _counted(self, data: bytes) -> bytes:
        self._count += len(data)
        if self._count > RATIO_FREE_BYTES or self._count > _max_input_bytes:
            _check_inflated(self._where, self._count, self._compressed)
        return data

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:  # whole rest: in steps, so a bomb is caught early
            parts = []
            while part := self.read(INFLATE_STEP):
                parts.append(part)
            return b"".join(parts)
        try:
            return self._counted(self._inner.read(size))
        except GZIP_ERRORS as exc:
            raise _gzip_error(self._where, exc) from None

    def readline(self, size: int = -1) -> bytes:
        try:
            return self._counted(self._inner.readline(size))
        except GZIP_ERRORS as exc:
            raise _gzip_error(self._where, exc) from None

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _GuardedStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_input(path: str | os.PathLike[str]) -> tuple[BinaryIO, bool]:
    """(stream, gzipped): a binary stream of ``path``'s content, gunzipped on
    the fly when it starts with gzip's magic. The caller closes it."""
    where = os.fspath(path)
    raw = _open_raw(where)
    compressed = None if where == STDIN else os.fstat(raw.fileno()).st_size
    try:
        gzipped = raw.peek(len(GZIP_MAGIC))[: len(GZIP_MAGIC)] == GZIP_MAGIC
    except OSError as exc:
        raw.close()
        raise InputError(where, f"cannot read: {exc.strerror or exc}") from None
    if not gzipped and where != STDIN:
        return raw, False  # a regular file: its size was checked
    inner = cast(BinaryIO, _gzip_module.GzipFile(fileobj=raw, mode="rb")) if gzipped else raw
    return cast(BinaryIO, _GuardedStream(where, inner, compressed)), gzipped


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The raw bytes of ``path`` (still compressed: whole-buffer inflating, by
    the caller, is faster than streaming; see ``gunzip``)."""
    where = os.fspath(path)
    with _open_raw(where) as raw:
        try:
            data = raw.read(_max_input_bytes + 1) if where == STDIN else raw.read()
        except OSError as exc:
            raise InputError(where, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > _max_input_bytes:
        raise _too_large(where, "standard input")
    return data


def gunzip(where: str, data: bytes) -> bytes:
    """Inflate a whole gzip buffer (every member), within the limits; damage
    becomes one ``InputError`` naming ``where``."""
    parts: list[bytes] = []
    total = 0
    rest = data
    try:
        while rest:
            inflater = _zlib_module.decompressobj(16 + zlib.MAX_WBITS)
            pending = rest
            while pending and not inflater.eof:
                part = inflater.decompress(pending, INFLATE_STEP)
                total += len(part)
                _check_inflated(where, total, len(data))
                parts.append(part)
                pending = inflater.unconsumed_tail
            if not inflater.eof:
                raise EOFError("compressed stream ends early")
            rest = inflater.unused_data.lstrip(b"\x00")  # gzip allows zero padding
            if rest and not is_gzip(rest):
                raise OSError("trailing garbage after the gzip stream")
    except GZIP_ERRORS as exc:
        raise _gzip_error(where, exc) from None
    return b"".join(parts)


def is_gzip(data: bytes) -> bool:
    return data[: len(GZIP_MAGIC)] == GZIP_MAGIC


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC (re-entrant); loaders wrap decode + normalise in it.

    Building millions of containers triggers repeated full collections that
    find nothing (trace records hold no cycles) yet dominate run time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------
# Small JSON documents beside the traces (formerly side_json.py)
# --------------------------------------------------------------------------
# Small JSON documents from outside the traces: the one reader of the files
# beside them (``meta.json``, a job's ``prediction.json`` and ``system.json``,
# ``convert --report``'s accounting) and of the JSON a trace's metadata holds
# (``process_groups``).
#
# Every document is decoded with a nesting limit (``MAX_DEPTH``), so a
# hostile or broken file is one line naming it, never a ``RecursionError``;
# a typed document is then checked against its type in the same line. Numbers
# in it are read with ``errors.read_number`` by the caller, which knows each
# field's range.
#
#     doc = read_side_json("run/meta.json")                 # any JSON value
#     report = read_side_json(path, ConversionReport)       # typed (msgspec)

# Nesting of arrays and objects a document may have: orjson's own limit,
# which refuses deeper documents itself (with JSONDecodeError), so nothing
# recurses past it; Python's recursion limit (1000 frames) is about as deep.
# Our side files nest 4 levels at most.
MAX_DEPTH = 1024

T = TypeVar("T")


def decode_json(data: bytes | str, where: str, what: str = "") -> Any:
    """``data`` (a JSON document) as Python values; ``InputError`` naming
    ``where`` (a file) and ``what`` (a field of it, if the document is one)
    when it is not JSON or nests deeper than ``MAX_DEPTH``."""
    import orjson  # here: a plain convert reads no side file and never loads it

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        field = f"{what}: " if what else ""
        raise InputError(where, f"{field}not readable JSON (nested at most {MAX_DEPTH} "
                         f"levels): {exc}") from None


@overload
def read_side_json(path: str | os.PathLike[str]) -> Any: ...


@overload
def read_side_json(path: str | os.PathLike[str], kind: type[T], what: str = ...) -> T: ...


def read_side_json(path: str | os.PathLike[str], kind: Any = None,
                   what: str = "the document expected") -> Any:
    """The JSON document in ``path`` (gzip allowed), as ``kind`` (a msgspec
    struct or any type msgspec converts to) when given; one ``InputError``
    naming the file otherwise (``what``: the document ``kind`` is, for it)."""
    where = os.fspath(path)
    data = read_input(where)
    try:
        doc = decode_json(gunzip(where, data) if is_gzip(data) else data, where)
    except InputError as exc:
        if kind is None:
            raise
        raise InputError(where, f"not {what}: {exc.problem}") from None
    if kind is None:
        return doc
    import msgspec

    try:
        return msgspec.convert(doc, type=kind)
    except msgspec.ValidationError as exc:
        raise InputError(where, f"not {what}: {exc}") from None

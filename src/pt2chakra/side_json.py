"""Small JSON documents from outside the traces: the one reader of the files
beside them (``meta.json``, a job's ``prediction.json`` and ``system.json``,
``convert --report``'s accounting) and of the JSON a trace's metadata holds
(``process_groups``).

Every document is decoded with a nesting limit (``MAX_DEPTH``), so a
hostile or broken file is one line naming it, never a ``RecursionError``;
a typed document is then checked against its type in the same line. Numbers
in it are read with ``limits.read_number`` by the caller, which knows each
field's range.

    doc = read_side_json("run/meta.json")                 # any JSON value
    report = read_side_json(path, ConversionReport)       # typed (msgspec)
"""

from __future__ import annotations

import os
from typing import Any, TypeVar, overload

import msgspec
import orjson

from pt2chakra.errors import InputError
from pt2chakra.files import gunzip, is_gzip, read_input

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
    doc = decode_json(gunzip(where, data) if is_gzip(data) else data, where)
    if kind is None:
        return doc
    try:
        return msgspec.convert(doc, type=kind)
    except msgspec.ValidationError as exc:
        raise InputError(where, f"not {what}: {exc}") from None

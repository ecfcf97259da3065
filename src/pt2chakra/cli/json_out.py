"""``--json``: the one encoder every command's JSON goes through.

It cannot fail on what a command hands it, so a command never ends with a
traceback after its outputs are written: msgspec structs, dataclasses, named
tuples, enums, sets and paths become plain JSON; a mapping's keys become
strings (``{0: 5}`` prints as ``{"0": 5}``: JSON has only string keys); a
value of no JSON kind prints as its ``str``. A number that is not finite
(NaN, an infinite time) prints as ``null``: JSON has no such number, and a
reader told "no value" is not misled, where a refusal here would come after
the work is done (numbers from the inputs are bounded before it starts,
``pt2chakra.errors``). Text is UTF-8 JSON, indented by two spaces, one
newline at the end.

    text = json_text(result.to_json())   # before committing outputs, where it can
    print_json(result.to_json())
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import msgspec
import orjson


def json_text(doc: object) -> str:
    """``doc`` as indented JSON text and a newline (see the module's rules)."""
    try:
        plain = msgspec.to_builtins(doc, str_keys=True, enc_hook=_leaf)
    except TypeError:  # keys msgspec does not turn into strings (tuples, None, bools)
        plain = msgspec.to_builtins(_keys_as_text(doc), str_keys=True, enc_hook=_leaf)
    return orjson.dumps(plain, option=orjson.OPT_INDENT_2).decode() + "\n"


def print_json(doc: object) -> None:
    """``json_text(doc)`` on standard output."""
    sys.stdout.write(json_text(doc))


def _leaf(value: Any) -> Any:
    """A value msgspec has no JSON form for: a path as its name, anything else
    as its ``str`` (never an error)."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _keys_as_text(value: Any) -> Any:
    """``value`` with every mapping's keys made strings (the slow path, for
    keys of a kind msgspec will not stringify: tuples, None, bools)."""
    if isinstance(value, dict):
        return {_key_text(k): _keys_as_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_keys_as_text(v) for v in value]
    if isinstance(value, msgspec.Struct):
        return {f: _keys_as_text(getattr(value, f)) for f in value.__struct_fields__}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _keys_as_text(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _key_text(key: object) -> str:
    """A key as JSON would spell it: ``true``, ``null``, else its ``str``."""
    if isinstance(key, bool) or key is None:
        return orjson.dumps(key).decode()
    return key if isinstance(key, str) else str(key)

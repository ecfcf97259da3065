"""Atomic output files: never leave a half-written output behind.

Output goes to a hidden temp file beside the target (same directory, so the
final ``os.replace`` is atomic) and replaces the target only when writing
succeeded; on any error, Ctrl-C included, the temp file is removed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from typing import BinaryIO


def temp_path(path: str) -> str:
    """Hidden sibling of ``path`` with a random suffix."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """``with atomic_output(p) as f: f.write(...)`` writes ``p`` all or nothing.

    A folder that does not exist raises ``OSError`` naming ``path`` (not the
    temp file), so the CLI's one-line error names what the user asked for."""
    target = os.fspath(path)
    tmp = temp_path(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, target) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        try:
            os.replace(tmp, target)
        except OSError as exc:  # e.g. the target is a directory: name it, not the temp file
            raise OSError(exc.errno, exc.strerror, target) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_output(path) as out:
        out.write(data)


def refuse_overwriting_inputs(output: str | os.PathLike[str],
                              inputs: list[str | os.PathLike[str] | None]) -> None:
    """Raise ``InputError`` when ``output`` is one of ``inputs``: the atomic
    rename would silently replace the user's trace with our output."""
    from pt2chakra.model import InputError

    out = os.path.realpath(output)
    for item in inputs:
        if item is not None and os.path.realpath(item) == out:
            raise InputError(os.fspath(output), "refusing to overwrite an input file; "
                             "choose another output path")

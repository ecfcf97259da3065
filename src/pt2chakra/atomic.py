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
def atomic_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[str]:
    """A temp path beside ``path``, renamed over it when the block succeeds
    and removed otherwise. For writers that need a file name rather than a
    stream (matplotlib's ``savefig`` goes by the extension: ``suffix``)."""
    target = os.fspath(path)
    tmp = temp_path(target) + suffix
    try:
        yield tmp
        try:
            os.replace(tmp, target)
        except OSError as exc:  # e.g. the target is a directory: name it, not the temp file
            raise OSError(exc.errno, exc.strerror, target) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """``with atomic_output(p) as f: f.write(...)`` writes ``p`` all or nothing.

    A folder that does not exist raises ``OSError`` naming ``path`` (not the
    temp file), so the CLI's one-line error names what the user asked for."""
    with atomic_path(path) as tmp:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, os.fspath(path)) from exc
        with os.fdopen(fd, "wb") as out:
            yield out


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_output(path) as out:
        out.write(data)


def refuse_overwriting_inputs(output: str | os.PathLike[str],
                              inputs: list[str | os.PathLike[str] | None]) -> None:
    """Raise ``InputError`` when ``output`` is one of ``inputs``: the atomic
    rename would silently replace the user's trace with our output."""
    from pt2chakra.errors import InputError

    out = os.path.realpath(output)
    for item in inputs:
        if item is not None and os.path.realpath(item) == out:
            raise InputError(os.fspath(output), "refusing to overwrite an input file; "
                             "choose another output path")


class StagedOutputs:
    """Several output files, all or nothing.

    ``stage(target)`` names a hidden temp file beside ``target`` (keeping a
    ``.gz`` suffix, which decides compression) to write instead; ``commit()``
    renames every temp file onto its target. Any failure before the commit
    (``with`` block left by an exception) removes the temp files, so the
    targets are untouched; a rename failing midway removes the targets this
    commit already replaced. Use as ``with StagedOutputs() as staged: ...;
    staged.commit()``."""

    def __init__(self) -> None:
        self._temps: dict[str, str] = {}  # target -> temp file, in staging order

    def stage(self, target: str | os.PathLike[str]) -> str:
        target = os.fspath(target)
        old = self._temps.pop(target, None)
        if old is not None:  # staged again: the later content wins
            _unlink_quietly(old)
        tmp = temp_path(target)
        if target.lower().endswith(".gz"):
            tmp += ".gz"
        self._temps[target] = tmp
        return tmp

    @property
    def targets(self) -> list[str]:
        return list(self._temps)

    def discard(self) -> None:
        for tmp in self._temps.values():
            _unlink_quietly(tmp)
        self._temps.clear()

    def commit(self) -> list[str]:
        """Move every staged file into place; returns the targets."""
        done: list[str] = []
        try:
            for target, tmp in self._temps.items():
                try:
                    os.replace(tmp, target)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, target) from exc
                done.append(target)
        except BaseException:
            for target in done:
                _unlink_quietly(target)
            self.discard()
            raise
        self._temps.clear()
        return done

    def __enter__(self) -> StagedOutputs:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.discard()  # no-op after a commit


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

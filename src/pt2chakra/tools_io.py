"""Reading and writing ``.et`` files for the companion tools.

``read`` is :func:`pt2chakra.chakra_io.read_et` (which also accepts the
version-less ``GlobalMetadata`` mlc-chakra writes); framing, truncation,
garbage and zero-length messages raise ``InputError`` there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from pt2chakra.chakra_wire import write_et
from pt2chakra.model import ChakraNode, GlobalMetadata, InputError


def read(path: str | os.PathLike[str]) -> tuple[GlobalMetadata, Iterator[ChakraNode]]:
    """(metadata, lazy iterator of nodes) of any ``.et`` / ``.et.gz`` file."""
    from pt2chakra.chakra_io import read_et  # protobuf: imported only when reading

    return read_et(path)


def write(path: str | os.PathLike[str], metadata: GlobalMetadata,
          nodes: Iterable[ChakraNode]) -> int:
    """Atomic ``.et`` writer (gzip when the name ends in ``.gz``); returns node count."""
    try:
        return write_et(path, metadata, nodes)
    except ValueError as exc:
        raise InputError(os.fspath(path), f"cannot encode: {exc}") from exc


def attr_dict(attrs: Iterable[tuple[str, str, Any]]) -> dict[str, Any]:
    """name -> value (the last one wins)."""
    return {name: value for name, _member, value in attrs}


def attr_members(attrs: Iterable[tuple[str, str, Any]]) -> dict[str, tuple[str, Any]]:
    return {name: (member, value) for name, member, value in attrs}


def is_gpu(attrs: dict[str, Any]) -> bool:
    """A node is a GPU/device op when ``is_cpu_op`` is false or absent (the
    simulator's reading: absent means false)."""
    return not attrs.get("is_cpu_op", False)


def rank_of(metadata: GlobalMetadata, path: str, default: int) -> int:
    """Rank from the metadata, else from a ``<prefix>.<rank>.et`` name, else ``default``."""
    value = attr_dict(metadata.attrs).get("rank")
    if isinstance(value, int):
        return value
    base = os.path.basename(path)
    for suffix in (".et.gz", ".et"):
        if base.endswith(suffix):
            stem = base[: -len(suffix)]
            tail = stem.rsplit(".", 1)[-1]
            if "." in stem and tail.isdigit():
                return int(tail)
    return default


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
        from pt2chakra.atomic import temp_path

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

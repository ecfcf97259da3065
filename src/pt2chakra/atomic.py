"""Outputs that never hurt what was there: no input overwritten, no half-written
file, no old output lost.

* By construction: every file this command opened as an input (``files``
  notes each one it opens) is refused as an output by every way out of
  this module: ``check_outputs``, ``check_prefix_outputs``, a staged file,
  an ``atomic_path``, and again at the commit itself. A command that forgets
  to name an input to its checks still cannot replace it.
* ``check_outputs`` (one home, every command calls it once before any work):
  no output is one of the inputs (the same file by ``os.path.samefile``,
  links included, or the same path for a file not yet written), no two
  outputs are one file, no output is a folder.
* One file: output goes to a hidden temp file beside the target (same
  directory, so the final ``os.replace`` is atomic) and replaces the target
  only when writing succeeded; on any error, Ctrl-C included, the temp file
  is removed (``atomic_output``, ``write_atomic``).
* Several files of one command: ``StagedOutputs`` stages them all and
  commits them together; a failure before, during or after the commit (until
  the ``with`` block ends) puts back exactly the files that were there before.

Every error names the user's file, never a temp file (``target_of``).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from pt2chakra.errors import InputError, has_control
from pt2chakra.files import file_identities, opened_input, opened_inputs

Path = str | os.PathLike[str]
# The name that reads standard input / writes standard output: not a file.
STDIO = "-"
# Suffix of every temp file this module makes (tests look for leftovers by it).
TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"^\.(?P<base>.+)\.[0-9a-f]{8}\.tmp(\.[a-z]{1,4})?$")


def temp_path(path: str, token: str | None = None) -> str:
    """Hidden sibling of ``path`` with a random suffix (or ``token``: a caller
    that must find the temp file again, e.g. after a worker was stopped)."""
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{token or new_token()}{TEMP_SUFFIX}")


# Random bytes in a temp name's token (8 hex digits, as _TEMP_NAME expects).
_TOKEN_BYTES = 4


def new_token() -> str:
    """``os.urandom`` rather than ``secrets``: the same bytes (secrets.token_hex
    calls it), without the ~3 ms that importing secrets (hmac, hashlib, random)
    adds to every command."""
    return os.urandom(_TOKEN_BYTES).hex()


def target_of(path: str) -> str:
    """The output a temp file of this module stands for (else ``path``):
    errors raised while writing a temp file name what the user asked for."""
    directory, base = os.path.split(path)
    while (m := _TEMP_NAME.match(base)) is not None:  # a temp file of a staged temp file...
        base = m["base"]
    return os.path.join(directory, base)


def _named(exc: OSError, target: str) -> OSError:
    """``exc`` naming ``target`` (a full disk says which output it hit)."""
    if exc.filename is not None and target_of(os.fspath(exc.filename)) != target:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), target)


# --------------------------------------------------------------------------
# Outputs checked against inputs
# --------------------------------------------------------------------------


_OVERWRITE = "refusing to overwrite an input file; choose another output path"


def refuse_opened_input(output: str) -> None:
    """An output that is a file this command opened as an input is refused
    (``files.opened_input``), whoever planned the write."""
    if opened_input(output) is not None:
        raise InputError(output, _OVERWRITE)


def check_outputs(inputs: Iterable[Path | None], outputs: Iterable[Path | None], *,
                  folders_exist: bool = True) -> None:
    """Refuse, before any work, an output that is one of ``inputs`` (the
    atomic rename would replace the user's trace), two outputs that are one
    file, an output that is a folder, or (``folders_exist``) an output whose
    folder does not exist. ``-`` (standard input/output) is not a file."""
    seen: dict[object, str] = {}
    for item in [*inputs, *opened_inputs()]:
        if item is not None and os.fspath(item) != STDIO:
            for key in file_identities(os.fspath(item)):
                seen.setdefault(key, "input")
    written: dict[object, str] = {}
    for item in outputs:
        if item is None or os.fspath(item) == STDIO:
            continue
        out = os.fspath(item)
        refuse_control_names(out)
        keys = file_identities(out)
        if any(seen.get(k) == "input" for k in keys):
            raise InputError(out, _OVERWRITE)
        clash = next((written[k] for k in keys if k in written), None)
        if clash is not None:
            raise InputError(out, f"is also another output ({clash}): each output needs its "
                             "own file")
        if os.path.isdir(out):
            raise InputError(out, "is a directory, expected a file name")
        folder = os.path.dirname(os.path.abspath(out))
        if folders_exist and not os.path.isdir(folder):
            raise InputError(out, "No such file or directory (its folder does not exist)")
        written.update(dict.fromkeys(keys, out))


def refuse_control_names(output: str) -> None:
    """An output name with a control character (a newline, an escape) is
    refused: written into a script, a config file or a terminal it could end
    a line and start a command."""
    if has_control(output):
        raise InputError(output, "the output name holds a control character (a newline, tab "
                         "or escape); choose a plain name")


def refuse_overwriting_inputs(output: Path, inputs: Iterable[Path | None]) -> None:
    """``check_outputs`` for a single output."""
    check_outputs(inputs, [output], folders_exist=False)


# What follows ``<prefix>.`` in the files of a per-rank output set.
RANK_FILES = r"\d+\.et(\.gz)?"


def check_prefix_outputs(inputs: Iterable[Path | None], prefix: Path,
                         tail: str = RANK_FILES) -> None:
    """Outputs named ``<prefix>.<tail>`` (a regular expression; e.g. one
    ``.et`` per rank) whose full list is known only later: refuse, before
    any work, any input that such a name could be (links resolved)."""
    prefix = os.fspath(prefix)
    refuse_control_names(prefix)
    folder, name = os.path.split(os.path.abspath(prefix))
    place = os.path.normcase(os.path.realpath(folder))
    pattern = re.compile(re.escape(os.path.normcase(name)) + r"\." + f"(?:{tail})")
    for item in [*inputs, *opened_inputs()]:
        if item is None or os.fspath(item) == STDIO:
            continue
        real = os.path.realpath(os.fspath(item))
        if (os.path.normcase(os.path.dirname(real)) == place
                and pattern.fullmatch(os.path.normcase(os.path.basename(real)))):
            raise InputError(os.fspath(item), f"is in the way of the outputs {prefix}.*: "
                             "refusing to overwrite an input file; choose another prefix")


# --------------------------------------------------------------------------
# One file
# --------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_path(path: Path, suffix: str = "") -> Iterator[str]:
    """A temp path beside ``path``, renamed over it when the block succeeds
    and removed otherwise. For writers that need a file name rather than a
    stream (matplotlib's ``savefig`` goes by the extension: ``suffix``)."""
    target = os.fspath(path)
    refuse_opened_input(target)
    tmp = temp_path(target) + suffix
    try:
        try:
            yield tmp
            refuse_opened_input(target)  # an input opened while it was written
            os.replace(tmp, target)
        except OSError as exc:  # a full disk, a directory in the way: name the output
            raise _named(exc, target_of(target)) from exc
    except BaseException:
        _unlink_quietly(tmp)
        raise


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """``with atomic_output(p) as f: f.write(...)`` writes ``p`` all or nothing.

    A folder that does not exist raises ``OSError`` naming ``path`` (not the
    temp file), so the CLI's one-line error names what the user asked for."""
    with atomic_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
        with os.fdopen(fd, "wb") as out:
            yield out


def write_atomic(path: Path, data: bytes) -> None:
    with atomic_output(path) as out:
        out.write(data)


# --------------------------------------------------------------------------
# The files of one command, together
# --------------------------------------------------------------------------


class StagedOutputs:
    """Several output files, all or nothing, the old ones kept on failure.

    ``stage(target)`` names a hidden temp file beside ``target`` (keeping a
    ``.gz`` suffix, which decides compression) to write instead; ``commit()``
    moves every staged file onto its target, keeping the file it replaces
    aside (a hard link). Leaving the ``with`` block normally forgets those;
    leaving it by an exception (a later output failing, a rename failing
    midway, Ctrl-C) removes the temp files and puts every replaced file back,
    so the folder is exactly as it was before the command. ``commit`` may be
    called more than once (outputs written after others were committed).
    Use as ``with StagedOutputs() as staged: ...; staged.commit()``."""

    def __init__(self, token: str | None = None, hold: bool = False) -> None:
        """``token``: the temp files' names are ``temp_path(target, token)``
        (8 hex digits, see ``new_token``), for a caller that must find them
        (``remove_temps``). ``hold``: ``commit`` leaves the files staged, for
        another process to ``detach`` and commit with its own."""
        self._temps: dict[str, str] = {}  # target -> temp file, in staging order
        self._done: list[tuple[str, str | None]] = []  # committed: (target, old file kept)
        self._token = token
        self._hold = hold

    def stage(self, target: Path) -> str:
        target = os.fspath(target)
        refuse_opened_input(target)
        old = self._temps.pop(target, None)
        if old is not None:  # staged again: the later content wins
            _unlink_quietly(old)
        tmp = temp_path(target, self._token)
        if target.lower().endswith(".gz"):
            tmp += ".gz"
        self._temps[target] = tmp
        return tmp

    def temp_of(self, target: Path) -> str:
        """Where ``target``'s staged content is, before the commit."""
        return self._temps[os.fspath(target)]

    @property
    def targets(self) -> list[str]:
        return list(self._temps)

    def detach(self) -> dict[str, str]:
        """Hand the staged files (target -> temp) to another ``StagedOutputs``
        (``adopt``), e.g. from a worker process to the one that commits."""
        temps, self._temps = self._temps, {}
        return temps

    def adopt(self, temps: dict[str, str]) -> None:
        self._temps.update(temps)

    def discard(self) -> None:
        for tmp in self._temps.values():
            _unlink_quietly(tmp)
        self._temps.clear()

    def commit(self) -> list[str]:
        """Move every staged file into place; returns the targets."""
        if self._hold:
            return list(self._temps)
        moved: list[str] = []
        try:
            for target in self._temps:  # all checked before the first is moved
                refuse_opened_input(target)
            for target, tmp in self._temps.items():
                kept = _keep_old(target)
                self._done.append((target, kept))
                try:
                    os.replace(tmp, target)
                except OSError as exc:
                    self._done.pop()
                    if kept is not None:
                        _unlink_quietly(kept)
                    raise _named(exc, target) from exc
                moved.append(target)
        except BaseException:
            self.rollback()
            raise
        self._temps.clear()
        return moved

    def rollback(self) -> None:
        """Remove what is staged and undo every commit: old files back."""
        self.discard()
        while self._done:
            target, kept = self._done.pop()
            _put_back(target, kept)

    def _forget_old(self) -> None:
        for _, kept in self._done:
            if kept is not None:
                _unlink_quietly(kept)
        self._done.clear()

    def __enter__(self) -> StagedOutputs:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.discard()  # staged but never committed: not asked for
            self._forget_old()
        else:
            self.rollback()


def remove_temps(targets: Iterable[str], token: str) -> None:
    """Remove the temp files a ``StagedOutputs(token)`` would have made for
    ``targets`` (a worker stopped before it could hand them over)."""
    for target in targets:
        tmp = temp_path(target, token)
        _unlink_quietly(tmp)
        _unlink_quietly(tmp + ".gz")


def _keep_old(target: str) -> str | None:
    """A hidden hard link to the file ``target`` names now (None when there
    is none), so that a failed commit can put it back."""
    try:
        if stat.S_ISDIR(os.lstat(target).st_mode):
            return None
    except OSError:
        return None
    kept = temp_path(target)
    try:
        os.link(target, kept, follow_symlinks=False)  # a link itself, not what it points to
    except OSError:  # no hard links here: keep it by renaming (gone until replaced)
        try:
            os.replace(target, kept)
        except OSError:
            return None
    return kept


def _put_back(target: str, kept: str | None) -> None:
    if kept is None:
        _unlink_quietly(target)
    else:
        with contextlib.suppress(OSError):
            os.replace(kept, target)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

#!/usr/bin/env python3
"""Build ASTRA-sim's two analytical binaries once, into a cache outside the clone.

ASTRA-sim is on no package registry: its public source is one tarball in
``../shared/astra-sim-src/`` (checked against its ``SHA256SUMS``), and
``../shared/scripts/build_astra_sim.sh`` builds it offline (6 minutes on a quiet
2-core machine, up to 17 on a busy one; root, for its apt-get). This script calls
it once per tarball and keeps the binaries in

    ${XDG_CACHE_HOME:-~/.cache}/pt2chakra/astra-sim-<first 12 hex of the tarball's sha256>/

so that every clone and every later run reuses them in seconds. The build goes to
a temporary folder renamed at the end: a half-finished build never counts. The
binaries' sha256 are recorded there (``BINARIES.sha256``) and checked on every
call: only regular executable files that match count as built.

    python3 scripts/astra_sim_cache.py          # build if absent; print the binary's path
    python3 scripts/astra_sim_cache.py --find   # print it if built (exit 1 if not)

The path printed is the congestion-unaware binary, what ``ASTRA_SIM_BIN`` takes
(the congestion-aware one is next to it). Standard library only: it runs before
the project is installed. Every refusal is one line and exit 2, checked before a
build starts; SIGINT, SIGTERM or SIGHUP stop the build's whole process group,
remove its folders and exit 128 + the signal. docs/GETTING_ASTRA_SIM.md has the rules.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple, NoReturn

ROOT = Path(__file__).resolve().parent.parent
SHARED_ENV = "PT2CHAKRA_SHARED"
"""Stands in for ``../shared`` (its ``astra-sim-src/`` and ``scripts/build_astra_sim.sh``):
the tests point it at a stand-in builder, so the cache's rules run in a second,
not in the real 6-17 minute build."""
SHARED = Path(os.path.abspath(os.environ.get(SHARED_ENV) or ROOT.parent / "shared"))
SOURCE_DIR = SHARED / "astra-sim-src"
SUMS_FILE = SOURCE_DIR / "SHA256SUMS"
BUILD_SCRIPT = SHARED / "scripts" / "build_astra_sim.sh"
TARBALL_PREFIX = "astra-sim-"
TARBALL_SUFFIX = ".tar.gz"
KEY_HEX_CHARS = 12
"""Hex digits of the sha256 in the cache folder's name: enough to tell tarballs
apart, short enough to read (and the key earlier caches were made with)."""
BINARIES = ("AstraSim_Analytical_Congestion_Unaware", "AstraSim_Analytical_Congestion_Aware")
BUILD_INFO = "BUILD_INFO.json"
MANIFEST = "BINARIES.sha256"
"""The binaries' sha256, in ``sha256sum`` form (``sha256sum -c BINARIES.sha256``
in the folder checks them by hand); written last, so a folder without it is no
build of this version."""
SUMS_LINE = re.compile(r"([0-9a-fA-F]{64})\s+\*?(\S+)\s*")
"""A ``sha256sum`` line, text (``<hash>  <name>``) or binary (``<hash> *<name>``,
``sha256sum -b``) form: the ``*`` only says how the file was read, the hash is the same."""
ELF_MAGIC = b"\x7fELF"
"""What the build's compiler writes first: a build from before the manifest is
adopted only when both binaries start so (a script or an empty file never does)."""
PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"))
"""Views of the kernel, not storage: a cache there fails in odd ways, so it is refused by name."""
HASH_CHUNK = 1 << 20
STDERR_FD = 2
"""The build script's output (its log's tail on failure) goes to stderr: stdout
carries only the path, for ``$(...)``."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, ``kill``, a closed terminal: each stops the build (in its own session,
it hears none of them itself) and leaves nothing behind."""
GRACE_S = 5.0
"""How long the build's processes get after SIGTERM before SIGKILL: gcc removes
its temp files and make its half-written targets in milliseconds; this bounds a stuck one."""
KILL_WAIT_S = 2.0
"""How long to wait for SIGKILLed processes to be gone (they go at once, unless
stuck in the kernel), so none outlives the script."""
POLL_S = 0.02
"""How often to look whether the build's process group is empty while stopping it."""
SIGNAL_EXIT_BASE = 128
"""Exit status 128 + the signal, as a shell reports a command a signal stopped."""
EXIT_NOT_BUILT = 1
EXIT_REFUSED = 2


class Source(NamedTuple):
    """The tarball to build and the cache folder its checksum names."""

    tarball: Path
    sha256: str

    @property
    def key(self) -> str:
        return f"astra-sim-{self.sha256[:KEY_HEX_CHARS]}"


class Refused(Exception):
    """A one-line reason to stop (exit 2)."""


class Stopped(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived (exit 128 + the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Signals:
    """Where a stop signal stands: ``deferring`` while a step must not be cut in
    half (starting the build, renaming it into place, cleaning up), when it waits
    in ``pending``; ``stopping`` once one was raised (later ones are ignored, so
    the clean-up runs to its end). A plain class: a dataclass needs its module
    in ``sys.modules``, which a script loaded by path is not."""

    __slots__ = ("deferring", "pending", "stopping")

    def __init__(self) -> None:
        self.deferring = False
        self.pending: int | None = None
        self.stopping = False


_SIGNALS = _Signals()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _SIGNALS.stopping:
        return
    if _SIGNALS.deferring:
        _SIGNALS.pending = _SIGNALS.pending or signum
        return
    _SIGNALS.stopping = True
    raise Stopped(signum)


@contextlib.contextmanager
def _deferred() -> Iterator[None]:
    """Hold a stop signal until the block ends, then raise it."""
    outer = _SIGNALS.deferring
    _SIGNALS.deferring = True
    try:
        yield
    finally:
        _SIGNALS.deferring = outer
        if not outer and _SIGNALS.pending is not None and not _SIGNALS.stopping:
            _SIGNALS.stopping = True
            raise Stopped(_SIGNALS.pending)


def _catch_signals(previous: dict[int, Any]) -> None:
    """Install the stop handler (a signal the caller ignores, as ``nohup`` does
    SIGHUP, stays ignored), keeping the previous handlers in ``previous``."""
    _SIGNALS.deferring, _SIGNALS.pending, _SIGNALS.stopping = False, None, False
    for signum in STOP_SIGNALS:
        with contextlib.suppress(ValueError):  # not the main thread: leave them be
            if signal.getsignal(signum) != signal.SIG_IGN:
                previous[signum] = signal.signal(signum, _on_signal)


def _restore_signals(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _where_from() -> str:
    return (f"ASTRA-sim is built from the source in {SOURCE_DIR} (not found: clone this "
            f"repository next to ../shared, or set {SHARED_ENV}; see docs/GETTING_ASTRA_SIM.md)")


def cache_root() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/pt2chakra``; a relative or unknown base is
    refused (it would move with the working directory)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        if not os.path.isabs(xdg):
            raise Refused(f"XDG_CACHE_HOME={xdg}: not an absolute path; set one, or unset it")
        return Path(xdg) / "pt2chakra"
    home = os.environ.get("HOME")
    if home is None:  # the password entry's, as a login shell would set
        with contextlib.suppress(RuntimeError):  # Python 3.12+ raises where it has none
            home = str(Path.home())
    # an empty HOME would make the cache /.cache (expanduser turns "" into "/")
    if not home or not os.path.isabs(home):
        raise Refused(f"HOME={home or ''}: empty or relative, and XDG_CACHE_HOME is unset: "
                      "set either to an absolute path to say where the cache goes")
    return Path(home) / ".cache" / "pt2chakra"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_sums(path: Path) -> dict[str, str]:
    """``name -> sha256`` from a ``sha256sum`` list (text or ``-b`` form); other
    lines are ignored. A non-UTF-8 byte or a name listed with two hashes is refused."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                      f"{exc.start}); expected sha256sum's lines") from None
    hashes: dict[str, set[str]] = {}
    for line in text.splitlines():
        if match := SUMS_LINE.fullmatch(line):
            hashes.setdefault(match[2], set()).add(match[1].lower())
    for name, found in hashes.items():
        if len(found) > 1:
            raise Refused(f"{path}: {name} listed with {len(found)} different sha256")
    return {name: found.pop() for name, found in hashes.items()}


def find_source() -> Source:
    """The one ASTRA-sim tarball ``SHA256SUMS`` lists, checked against it."""
    if not SOURCE_DIR.is_dir():
        raise Refused(_where_from())
    for needed in (SUMS_FILE, BUILD_SCRIPT):
        if not needed.is_file():
            raise Refused(f"{needed}: missing or not a file (see docs/GETTING_ASTRA_SIM.md)")
    listed = {name: digest for name, digest in read_sums(SUMS_FILE).items()
              if name.startswith(TARBALL_PREFIX) and name.endswith(TARBALL_SUFFIX)}
    if len(listed) != 1:
        raise Refused(f"{SUMS_FILE}: expected one {TARBALL_PREFIX}*{TARBALL_SUFFIX} line, "
                      f"found {len(listed)}")
    name, want = next(iter(listed.items()))
    tarball = SOURCE_DIR / name
    if not tarball.is_file():
        raise Refused(f"{tarball}: listed in {SUMS_FILE.name} but missing (or not a file)")
    have = _sha256(tarball)
    if have != want:
        raise Refused(f"{tarball}: sha256 {have[:KEY_HEX_CHARS]}... differs from "
                      f"{SUMS_FILE.name} ({want[:KEY_HEX_CHARS]}...)")
    return Source(tarball, have)


def _nearest_existing(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def check_location(target: Path) -> None:
    """Refuse, before any build, a cache folder that could never hold one: under
    /proc or /sys, below a file, a file or a symlink itself (a finished build is
    renamed into place, which a link or a file would make fail at the end)."""
    root = target.parent
    # as written and as resolved: /proc/self/cwd/... resolves to a folder on disk
    for seen in (Path(os.path.abspath(root)), Path(os.path.realpath(root))):
        for pseudo in PSEUDO_FILESYSTEMS:
            if seen == pseudo or pseudo in seen.parents:
                raise Refused(f"{root}: under {pseudo}, a view of the kernel, not storage; "
                              "set XDG_CACHE_HOME to a folder on disk")
    existing = _nearest_existing(root)
    if not existing.is_dir():
        raise Refused(f"{existing}: not a folder, so the cache {root} cannot be made there")
    if os.path.islink(target):
        raise Refused(f"{target}: a symlink where the cache folder goes (a build is renamed "
                      "into place, never through a link); remove it")
    if os.path.lexists(target) and not target.is_dir():
        raise Refused(f"{target}: a file where the cache folder goes; remove it")


def check_writable(target: Path) -> None:
    """Before a build: its staging folder and the finished build go beside ``target``."""
    existing = _nearest_existing(target.parent)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise Refused(f"{existing}: not writable, so no build can be cached in {target.parent}; "
                      "set XDG_CACHE_HOME to a folder you can write")


def _not_executable_file(path: Path) -> str | None:
    """Why ``path`` is not a binary the cache may report (None: it may)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return f"{path}: missing"
    if stat.S_ISLNK(mode):
        return f"{path}: a symlink, not a built binary"
    if not stat.S_ISREG(mode):
        return f"{path}: not a regular file"
    if not os.access(path, os.X_OK):
        return f"{path}: not executable"
    return None


def _not_adoptable(folder: Path, source: Source) -> str | None:
    """Why ``folder`` is not a finished build of an earlier version of this script
    (None: it is). That version wrote ``BUILD_INFO.json`` with the tarball's sha256
    only after the build succeeded, then renamed the folder into place; what the
    build makes are regular ELF executables."""
    info = folder / BUILD_INFO
    if not info.is_file() or os.path.islink(info):
        return f"{folder}: no {MANIFEST} and no {BUILD_INFO}, so not a finished build"
    try:
        recorded = json.loads(info.read_bytes())
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return f"{info}: not JSON, so not a finished build"
    if not isinstance(recorded, dict) or recorded.get("sha256") != source.sha256:
        return f"{info}: records another tarball than {source.tarball.name}"
    for name in BINARIES:
        path = folder / name
        if why := _not_executable_file(path):
            return why
        with open(path, "rb") as f:
            if f.read(len(ELF_MAGIC)) != ELF_MAGIC:
                return f"{path}: not an ELF binary, so not what the build makes"
    return None


def _manifest_text(folder: Path) -> str:
    return "".join(f"{_sha256(folder / name)}  {name}\n" for name in BINARIES)


def _record(folder: Path) -> None:
    """Write ``folder``'s manifest whole or not at all (a temp file renamed)."""
    with _deferred():
        fd, temp = tempfile.mkstemp(prefix=f".{MANIFEST}.", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(_manifest_text(folder))
                f.flush()
                os.fsync(f.fileno())
            os.chmod(temp, 0o644)
            os.replace(temp, folder / MANIFEST)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)


def _adopt(folder: Path) -> None:
    """Record an earlier version's build; a folder that cannot be written is
    still reported (it passed the same checks), with a note."""
    try:
        _record(folder)
    except OSError as exc:
        _say(f"note: {folder}: built by an earlier version; its sha256 could not be "
             f"recorded ({_describe(exc)}), so it is checked as such on every call")
    else:
        _say(f"note: {folder}: built by an earlier version; recorded its binaries' "
             f"sha256 in {MANIFEST}")


def why_not_built(folder: Path, source: Source) -> str | None:
    """Why ``folder`` holds no build to report (None: it does). A build is both
    binaries as regular executable files whose sha256 match ``BINARIES.sha256``;
    a build of an earlier version of this script (no manifest) is adopted once
    (``_not_adoptable``), its sha256 recorded then."""
    if not os.path.lexists(folder):
        return f"{folder}: not built yet"
    manifest = folder / MANIFEST
    if not os.path.lexists(manifest):
        if why := _not_adoptable(folder, source):
            return why
        _adopt(folder)
        return None
    if not manifest.is_file() or os.path.islink(manifest):
        return f"{manifest}: not a regular file"
    try:
        recorded = read_sums(manifest)
    except Refused as exc:
        return str(exc)
    for name in BINARIES:
        path = folder / name
        if name not in recorded:
            return f"{manifest}: no sha256 recorded for {name}"
        if why := _not_executable_file(path):
            return why
        if _sha256(path) != recorded[name]:
            return f"{path}: sha256 differs from the one {MANIFEST} recorded at its build"
    return None


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies, dead but not yet
    reaped, do not count: /proc tells them apart, ``kill(0)`` does not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True  # no /proc: assume it runs
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _wait_group(pgid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop every process of the build's group (the build script is its leader,
    so the group's id is its pid, not reused while it is unreaped): SIGTERM,
    ``GRACE_S`` to finish, SIGKILL for the rest; then reap the leader."""
    pgid = proc.pid
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGTERM)
        _wait_group(pgid, GRACE_S)
    _signal_group(pgid, signal.SIGKILL)
    _wait_group(pgid, KILL_WAIT_S)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_WAIT_S)


def _wait_exited(proc: subprocess.Popen[bytes]) -> None:
    """Block until the build script exits, leaving it unreaped where the system
    allows (so its group's id stays its own until ``_end_group``)."""
    if hasattr(os, "waitid"):
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    else:
        proc.wait()


def _remove(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def _finish(returncode: int | None, staging: Path, target: Path, source: Source,
            started: float) -> None:
    """Check what the build wrote, record it, and rename it into place."""
    if returncode != 0:
        raise Refused(f"{BUILD_SCRIPT} failed (exit {returncode}); nothing cached")
    for name in BINARIES:
        if why := _not_executable_file(staging / name):
            raise Refused(f"{BUILD_SCRIPT} exited 0 but {why}; nothing cached")
    info = {"tarball": source.tarball.name, "sha256": source.sha256,
            "build_seconds": round(time.monotonic() - started),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (staging / BUILD_INFO).write_text(json.dumps(info, indent=1) + "\n")
    (staging / MANIFEST).write_text(_manifest_text(staging))
    staging.rename(target)


def build(source: Source, target: Path) -> None:
    """Run the shared build script, in its own process group, into a temporary
    folder beside ``target``, then rename it into place. On any exit the group is
    stopped and the temporary folders removed."""
    staging: Path | None = None
    scratch: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    try:
        with _deferred():
            staging = Path(tempfile.mkdtemp(prefix=f".{source.key}.building-", dir=target.parent))
            scratch = Path(tempfile.mkdtemp(prefix="astra-build-"))
            _say(f"building {source.tarball.name} (6-17 minutes on 2 cores) ...", prefix="astra-sim")
            proc = subprocess.Popen(["bash", str(BUILD_SCRIPT), "--tarball", str(source.tarball),
                                     str(scratch / "tree")],
                                    env={**os.environ, "ASTRA_OUT": str(staging)},
                                    stdin=subprocess.DEVNULL, stdout=STDERR_FD,
                                    start_new_session=True)
        _wait_exited(proc)
        with _deferred():
            _end_group(proc)  # whatever it left running
            returncode, proc = proc.returncode, None
            _finish(returncode, staging, target, source, started)
    finally:
        with _deferred():
            if proc is not None:
                _end_group(proc)
            _remove(scratch)
            _remove(staging)
    _say(f"built in {time.monotonic() - started:.0f} s", prefix="astra-sim")


def _clear(target: Path, source: Source) -> None:
    """Remove what a build would replace: ``target`` when it holds no build, and
    staging folders of runs killed outright (the lock says none is running).
    Errors here come before the build, not after it."""
    if os.path.lexists(target):
        shutil.rmtree(target)
    for stale in target.parent.glob(f".{source.key}.building-*"):
        shutil.rmtree(stale)


def ensure(source: Source) -> Path:
    """The cached folder, built first when absent (one build at a time per key)."""
    target = cache_root() / source.key
    check_location(target)
    if why_not_built(target, source) is None:
        return target
    check_writable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{source.key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run waits, then finds it built
        check_location(target)
        why = why_not_built(target, source)
        if why is None:
            return target
        _say(why, prefix="astra-sim")
        _clear(target, source)
        build(source, target)
    return target


def _shown(text: str) -> str:
    """``text`` on one line: control characters (a newline in a path) and
    undecodable bytes escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _say(message: str, prefix: str = "astra_sim_cache") -> None:
    print(f"{prefix}: {_shown(message)}", file=sys.stderr, flush=True)


def _describe(exc: OSError) -> str:
    """An OSError as ``<file>: <reason>``."""
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return f"{' -> '.join(names) or 'error'}: {exc.strerror or exc}"


def _print_path(path: Path) -> None:
    """The path alone on stdout, as bytes (a path need not be UTF-8)."""
    if sys.stdout is None:
        raise Refused("stdout is closed: nowhere to print the binary's path")
    try:
        sys.stdout.flush()
        if (buffer := getattr(sys.stdout, "buffer", None)) is None:  # a test's StringIO
            print(path)
            return
        buffer.write(os.fsencode(path) + b"\n")
        buffer.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        raise Refused("stdout: closed before the binary's path was written") from None


class _Parser(argparse.ArgumentParser):
    """argparse with its errors in one line (its usage is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_REFUSED, f"astra_sim_cache: {message} (see --help)\n")


def _run(find: bool) -> int:
    source = find_source()
    if find:
        target = cache_root() / source.key
        check_location(target)
        if why := why_not_built(target, source):
            _say(f"{why} (make astra-sim builds it)")
            return EXIT_NOT_BUILT
    else:
        target = ensure(source)
    _print_path(target / BINARIES[0])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--find", action="store_true",
                        help="only print the cached binary's path (exit 1 when not built)")
    args = parser.parse_args(argv)
    previous: dict[int, Any] = {}
    try:
        _catch_signals(previous)
        return _run(args.find)
    except Refused as exc:
        _say(str(exc))
    except OSError as exc:
        _say(_describe(exc))
    except Stopped as exc:
        _say(f"stopped by {exc}: any build under way was stopped, its processes ended "
             "and its temporary folders removed")
        return SIGNAL_EXIT_BASE + exc.signum
    except KeyboardInterrupt:  # SIGINT before the handler was installed
        _say("interrupted; nothing cached")
        return SIGNAL_EXIT_BASE + signal.SIGINT
    finally:
        _restore_signals(previous)
    return EXIT_REFUSED


if __name__ == "__main__":
    raise SystemExit(main())

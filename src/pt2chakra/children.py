"""Running another program, bounded: its time, its output, its end.

``run_bounded`` is the one way this package runs a child (the ASTRA-sim
binary of ``astra-sim --check --bin``): the child gets its own process
group, its output is read as it comes and only the last ``max_output``
bytes of each stream are kept (a child that floods stdout costs no more
memory than that), and a timeout, Ctrl-C or SIGTERM kills the whole group,
so nothing is left running. A failure is one line (``ChildFailed``).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import NamedTuple

# Bytes kept of each of a child's streams (its tail: where errors and
# results are printed); a run of ASTRA-sim on a 64-NPU job prints ~10 kB.
DEFAULT_MAX_OUTPUT = 4 << 20
# Read size of each stream.
_CHUNK = 1 << 16
# After SIGTERM to a group, how long it may take to exit before SIGKILL.
KILL_GRACE_S = 0.5


class ChildFailed(Exception):
    """The child could not start, ran past its time or was killed; one line."""


class ChildRun(NamedTuple):
    returncode: int
    stdout: str  # the last ``max_output`` bytes, decoded
    stderr: str
    truncated: bool  # some output was dropped (more than ``max_output`` bytes)


class _Tail:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = False

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]
            self.dropped = True


def run_bounded(cmd: Sequence[str], timeout: float, max_output: int = DEFAULT_MAX_OUTPUT,
                cwd: str | os.PathLike[str] | None = None) -> ChildRun:
    """Run ``cmd``; ``ChildFailed`` when it cannot start or runs past
    ``timeout`` seconds (its process group killed first)."""
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
    except OSError as exc:
        raise ChildFailed(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
    tails = {"stdout": _Tail(max_output), "stderr": _Tail(max_output)}
    deadline = time.monotonic() + timeout
    try:
        _drain(proc, tails, deadline)
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ChildFailed(f"{os.path.basename(cmd[0])} ran past its time limit of "
                          f"{timeout:g} s and was stopped") from None
    except BaseException:  # Ctrl-C, SIGTERM: the child goes too
        _kill_group(proc)
        raise
    return ChildRun(proc.returncode, tails["stdout"].data.decode(errors="replace"),
                    tails["stderr"].data.decode(errors="replace"),
                    tails["stdout"].dropped or tails["stderr"].dropped)


def _drain(proc: subprocess.Popen[bytes], tails: dict[str, _Tail], deadline: float) -> None:
    """Read both streams until they close, keeping each one's tail."""
    with selectors.DefaultSelector() as sel:
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, tails["stdout"])
        sel.register(proc.stderr, selectors.EVENT_READ, tails["stderr"])
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, 0)
            for key, _ in sel.select(timeout=left):
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fileobj)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's group, SIGKILL after a grace period; reaped."""
    for signum, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()

"""Run many ``pt2chakra`` command lines as separate processes, cheaply.

A single driver process (``python cli_batch.py SPEC``) imports pt2chakra once,
then forks one child per command line: each child gets its own stdin,
stdout, stderr, exit status and signal handlers, and runs the real entry
point (``pt2chakra.cli.run``, what ``python -m pt2chakra`` runs), so every
case is a process of its own, as a user would start it, without paying the
interpreter's start-up and imports a hundred times on a 2-core machine. A
child that outlives its time limit is killed and reported as timed out (a
hang is a failure too). POSIX only (fork).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
TIMED_OUT = -signal.SIGKILL
POLL_S = 0.005


class Call(NamedTuple):
    argv: list[str]
    stdin: str | None = None  # a file fed to standard input (default: empty)
    timeout: float = 30.0


def run_batch(calls: list[Call], work: Path) -> list[subprocess.CompletedProcess[str]]:
    """Run every call (see the module docstring); results in the same order.
    ``returncode`` is ``TIMED_OUT`` for a child killed after its time limit."""
    spec = work / "batch_spec.json"
    spec.write_text(json.dumps([c._asdict() for c in calls]))
    limit = sum(c.timeout for c in calls) + 60
    subprocess.run([sys.executable, __file__, str(spec)], check=True, timeout=limit,
                   cwd=work, stdin=subprocess.DEVNULL)
    done = json.loads((work / "batch_spec.json.out").read_text())
    return [subprocess.CompletedProcess(c.argv, d["rc"], d["out"], d["err"])
            for c, d in zip(calls, done)]


def _child(call: dict, out: str, err: str) -> None:  # pragma: no cover - runs in the child
    try:
        stdin = os.open(call["stdin"] or os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        sys.argv = ["pt2chakra", *call["argv"]]
        from pt2chakra.cli import run

        run()  # ends with os._exit
    except SystemExit as exc:  # argparse
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exc.code if isinstance(exc.code, int) else 1)
    except BaseException:  # what the interpreter would do: a traceback, status 1
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return TIMED_OUT
        time.sleep(POLL_S)


def main(spec: str) -> None:  # pragma: no cover - the driver process
    # Import what the commands use once, before forking.
    import pt2chakra.astra.export  # noqa: F401
    import pt2chakra.chakra.decode  # noqa: F401
    import pt2chakra.chakra.json_form  # noqa: F401
    import pt2chakra.cli  # noqa: F401
    import pt2chakra.conversion.api  # noqa: F401
    import pt2chakra.simulation.api  # noqa: F401
    import pt2chakra.tools.text_workload  # noqa: F401
    import pt2chakra.tools.validate  # noqa: F401

    calls = json.loads(Path(spec).read_text())
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        for call in calls:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(call, out, err)
            rc = _wait(pid, call["timeout"])
            results.append({"rc": rc,
                            "out": Path(out).read_text(errors="replace"),
                            "err": Path(err).read_text(errors="replace")})
    Path(spec + ".out").write_text(json.dumps(results))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main(sys.argv[1])

"""Signals, closed pipes, FIFOs and a missing matplotlib, through real
``python -m pt2chakra`` processes: SIGTERM and SIGHUP end like Ctrl-C (no
temp file left, 128 + signal), a reader that goes away (``| head``) ends the
command quietly, a FIFO is refused instead of blocking, ``--plot`` without
matplotlib fails before the replay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builders import comm_node, comp_node, sound_et, write_rank
from helpers import assert_one_line_failure, run_cli

# A microbench that writes for long enough to be interrupted mid-way.
LONG_MICROBENCH = ["microbench", "--size", "1024", "--npus", "64", "--steps", "20000"]
START_TIMEOUT_S = 60


def _default_signals() -> None:
    """A shell runs background jobs with SIGINT ignored, and the child would
    inherit that (Python then never raises KeyboardInterrupt): start it with
    the default dispositions, as a terminal would."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _temps(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_mid_write_leaves_nothing(tmp_path: Path, signum: int) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pt2chakra", *LONG_MICROBENCH,
                             "-o", str(tmp_path / "mb")], stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _temps(tmp_path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "finished before it could be interrupted"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no temp file, no partial output


def test_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    et = sound_et(tmp_path / "s.et")
    done = subprocess.run(f"{sys.executable} -m pt2chakra simulate {et} --json | head -c 1",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert done.stderr == ""
    assert done.stdout == "{"


def test_fifo_input_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    proc = run_cli("convert", "--host-trace", tmp_path / "fifo", "-o", tmp_path / "out.et",
                   timeout=60)
    assert_one_line_failure(proc, "fifo", "FIFO", "-")
    assert proc.returncode == 2


def test_stdin_is_read_with_dash(tmp_path: Path) -> None:
    et = sound_et(tmp_path / "s.et")
    done = subprocess.run([sys.executable, "-m", "pt2chakra", "inspect", "-", "--json"],
                          stdin=et.open("rb"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)


def test_plot_without_matplotlib_fails_up_front(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    et = sound_et(tmp_path / "s.et")
    env = {**os.environ, "PYTHONPATH": str(fake)}
    proc = subprocess.run([sys.executable, "-m", "pt2chakra", "simulate", str(et), "--plot",
                           str(tmp_path / "p.png")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert_one_line_failure(proc, "--plot", "matplotlib")
    assert proc.returncode == 2
    assert proc.stdout == ""  # failed before the replay printed its report
    assert not (tmp_path / "p.png").exists()


def test_force_lets_an_unsound_trace_through_with_one_warning(tmp_path: Path) -> None:
    et = write_rank(tmp_path / "u.et", [comp_node(1, [9]), comm_node(2, [1])])
    peer = sound_et(tmp_path / "s.et", rank=1)  # ASTRA-sim needs 2 NPUs
    proc = run_cli("astra-sim", et, peer, "-o", tmp_path / "out", "--force", "-q")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "--force" in lines[0] and "dangling" in lines[0]
    assert (tmp_path / "out.0.et").exists()


def test_force_converts_a_mismatched_pair_with_one_warning(tmp_path: Path) -> None:
    from helpers import TRACES

    if not TRACES.is_dir():
        pytest.skip("real traces absent")
    proc = run_cli("convert", "--host-trace", TRACES / "dlrm_8gpu" / "rank0.host_et.json.gz",
                   "--device-trace", TRACES / "dlrm_8gpu" / "rank1.kineto.json.gz",
                   "-o", tmp_path / "out.et", "--force", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "--force" in proc.stderr and "pid" in proc.stderr
    assert (tmp_path / "out.et").exists()


# The console script (``pt2chakra = pt2chakra.cli:run``), with Ctrl-C sent
# while the command's module is being imported (the longest part of start-up).
_CONSOLE_SCRIPT_INTERRUPTED = """
import importlib, os, signal, sys
import pt2chakra.cli as cli
real_import = importlib.import_module
def import_module(name, *args):
    if name.startswith("pt2chakra.cli."):
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args)
cli.importlib.import_module = import_module
sys.argv = ["pt2chakra", "validate", sys.argv[1]]
cli.run()
"""


def test_ctrl_c_while_the_console_script_imports_is_quiet(tmp_path: Path) -> None:
    et = sound_et(tmp_path / "s.et")
    proc = subprocess.run([sys.executable, "-c", _CONSOLE_SCRIPT_INTERRUPTED, str(et)],
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=_default_signals)
    assert proc.returncode == 128 + signal.SIGINT, proc.stderr
    assert proc.stderr == "" and proc.stdout == ""

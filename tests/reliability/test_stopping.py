"""Class 5 of issue 25: a signal stops a command within a second or two
(queued ranks cancelled, workers and children terminated), leaving no temp
file, no partial set of outputs and the previous outputs as they were; every
child's time and output is bounded (``children.run_bounded``) and every
backend failure is one line.

The kill tests send SIGINT or SIGTERM at a random moment of the run (seeded,
so a failure can be replayed)."""

from __future__ import annotations

import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, assert_one_line_failure, run_cli
from rel_setup import make_inputs, snapshot, temps

from pt2chakra.children import ChildFailed, run_bounded

GLOO = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"
# The promise: the command is gone this soon after the signal.
EXIT_WITHIN_S = 2.0
START_TIMEOUT_S = 120


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _ranks_folder(d: Path, n: int) -> Path:
    """``n`` ranks' pairs (the gloo sample's two ranks, by turns, as links;
    converted with ``--force``, as their traces record rank 0 or 1)."""
    src = d / "src"
    src.mkdir()
    for r in range(n):
        for kind in ("host_et", "kineto"):
            (src / f"r{r}.{kind}.json.gz").symlink_to(f"{GLOO}.rank{r % 2}.{kind}.json.gz")
    return src


def _kill_at_random(argv: list[str], out: Path, seed: int, signum: int,
                    window: tuple[float, float]) -> tuple[int, float | None, str]:
    """Run pt2chakra ARGV, send ``signum`` at a random moment of ``window``
    (seconds after start); (exit status, seconds from signal to exit or None
    when it ended first, stderr)."""
    delay = random.Random(seed).uniform(*window)
    proc = subprocess.Popen([sys.executable, "-m", "pt2chakra", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals)
    time.sleep(delay)
    if proc.poll() is not None:
        _out, err = proc.communicate()
        return proc.returncode, None, err
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running 30 s after signal {signum}") from None
    return proc.returncode, time.monotonic() - sent, err


def _check_stopped(rc: int, took: float | None, err: str, signum: int, folder: Path,
                   before: dict[str, bytes], outputs: list[str]) -> None:
    assert "Traceback" not in err, err
    assert temps(folder) == []
    after = snapshot(folder)
    if took is None or rc in (0, 2):  # it finished first (the signal found it
        assert rc in (0, 2), err       # exiting): then every output is the new one
        return
    # 128 + signal from the command's own handler; -signal (killed by it) when it
    # came before the command started: a shell reports both as 128 + signal
    assert rc in (128 + signum, -signum), err
    assert took < EXIT_WITHIN_S, f"exited {took:.2f} s after the signal"
    if _all_new(after, before, outputs):
        return  # the signal came after the outputs were committed, together
    assert {k: after.get(k) for k in outputs} == {k: before.get(k) for k in outputs}
    assert after == before


def _all_new(after: dict[str, bytes], before: dict[str, bytes], outputs: list[str]) -> bool:
    """Every output written by this run (none left as it was, none missing):
    the all-or-nothing commit had finished when the signal came."""
    return all(after.get(k) is not None and after.get(k) != before.get(k) for k in outputs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_convert_ranks_pool_stops_at_once(tmp_path: Path, seed: int, signum: int) -> None:
    n = 24
    src = _ranks_folder(tmp_path, n)
    out = tmp_path / "out"
    out.mkdir()
    for r in range(0, n, 3):
        (out / f"k.{r}.et").write_bytes(b"previous run %d" % r)
    before = snapshot(out)
    argv = ["convert", "--ranks", f"0-{n - 1}", "--host-trace", f"{src}/r{{rank}}.host_et.json.gz",
            "--device-trace", f"{src}/r{{rank}}.kineto.json.gz", "-o", f"{out}/k.{{rank}}.et",
            "--jobs", "2", "--force", "-q"]
    rc, took, err = _kill_at_random(argv, out, seed, signum, (1.0, 6.0))
    _check_stopped(rc, took, err, signum, out, before, [f"k.{r}.et" for r in range(n)])


# Seconds after start in which the Ray kill test signals: Ray's start takes
# from ~5 s (idle machine) to ~30 s (loaded), the ranks and Ray's shutdown a
# few more, so the moments fall in its start, its tasks or its shutdown.
RAY_KILL_WINDOW_S = (0.5, 14.0)


@pytest.mark.slow
@pytest.mark.usefixtures("one_ray_at_a_time")
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_convert_ranks_on_ray_stops_at_once(tmp_path: Path, signum: int, seed: int) -> None:
    """Ray's start and shutdown run in a thread of their own (the main one
    stays free for the signal), and Ray's own SIGTERM handling (its exit
    hook, its stack dump, the default action it sets back) is kept out."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'pt2chakra[ray]')")
    n = 8
    src = _ranks_folder(tmp_path, n)
    out = tmp_path / "out"
    out.mkdir()
    (out / "k.0.et").write_bytes(b"previous run")
    before = snapshot(out)
    argv = ["convert", "--ranks", f"0-{n - 1}", "--host-trace", f"{src}/r{{rank}}.host_et.json.gz",
            "--device-trace", f"{src}/r{{rank}}.kineto.json.gz", "-o", f"{out}/k.{{rank}}.et",
            "--ray", "--jobs", "2", "--force", "-q"]
    rc, took, err = _kill_at_random(argv, out, seed, signum, RAY_KILL_WINDOW_S)
    _check_stopped(rc, took, err, signum, out, before, [f"k.{r}.et" for r in range(n)])


def _gloo_ets(d: Path) -> list[Path]:
    """The gloo sample's two ranks as .et (converted once per test)."""
    outs = [d / f"g.{r}.et" for r in (0, 1)]
    for r, out in enumerate(outs):
        done = run_cli("convert", "--host-trace", f"{GLOO}.rank{r}.host_et.json.gz",
                       "--device-trace", f"{GLOO}.rank{r}.kineto.json.gz", "-o", out, "-q")
        assert done.returncode == 0, done.stderr
    return outs


@pytest.mark.slow
@pytest.mark.parametrize("command", ["astra-sim", "simulate --write-et", "report"])
@pytest.mark.parametrize("seed", range(2))
def test_signal_during_a_multi_file_command(tmp_path: Path, command: str, seed: int) -> None:
    ets = _gloo_ets(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    argv, outputs = {
        "astra-sim": (["astra-sim", *map(str, ets), "-o", f"{out}/job"],
                      ["job.0.et", "job.1.et", "job.comm_groups.json", "network.yml", "run.sh",
                       "system.json", "memory.json"]),
        "simulate --write-et": (["simulate", *map(str, ets), "--write-et", f"{out}/w",
                                 "--timeline", f"{out}/t.json"], ["w.0.et", "w.1.et", "t.json"]),
        "report": (["report", *map(str, ets), "-o", f"{out}/p.html"], ["p.html"]),
    }[command]
    for name in outputs[::2]:
        (out / name).write_bytes(b"previous " + name.encode())
    before = snapshot(out)
    signum = (signal.SIGINT, signal.SIGTERM)[seed % 2]
    rc, took, err = _kill_at_random(argv, out, seed, signum, (0.3, 1.5))
    _check_stopped(rc, took, err, signum, out, before, outputs)


# --------------------------------------------------------------------------
# Children: bounded time and output, one line
# --------------------------------------------------------------------------


def _script(d: Path, name: str, body: str) -> Path:
    path = d / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _job(d: Path) -> Path:
    i = make_inputs(d / "in")
    done = run_cli("astra-sim", i["r0"], i["r1"], "-o", d / "j" / "job", "-q")
    assert done.returncode == 0, done.stderr
    return d / "j" / "job"


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_binary_past_its_time_is_stopped_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    binary = _script(tmp_path, "slow", f'sleep 300 &\necho $! > {pids}\nwait\n')
    job = _job(tmp_path)
    t0 = time.monotonic()
    done = run_cli("astra-sim", "--check", job, "--bin", binary, "--timeout", "1")
    assert time.monotonic() - t0 < 60
    assert_one_line_failure(done, "time limit")
    time.sleep(0.2)
    assert not _running(int(pids.read_text()))  # its whole process group went


def test_a_flooding_binary_costs_bounded_memory(tmp_path: Path) -> None:
    flood = _script(tmp_path, "flood", "head -c 50000000 /dev/zero | tr '\\0' x\n")
    run = run_bounded([str(flood)], timeout=60, max_output=1 << 16)
    assert run.returncode == 0 and run.truncated
    assert len(run.stdout) == 1 << 16


def test_wrong_npu_ids_are_one_line(tmp_path: Path) -> None:
    binary = _script(tmp_path, "liar", 'echo "sys[5] finished, 10 cycles, exposed communication 0"\n'
                     'echo "sys[0] finished, 10 cycles, exposed communication 0"\n')
    done = run_cli("astra-sim", "--check", _job(tmp_path), "--bin", binary)
    assert_one_line_failure(done, "NPUs 0, 5")


def test_a_missing_binary_is_one_line() -> None:
    with pytest.raises(ChildFailed, match="cannot run"):
        run_bounded(["/nonexistent/astra"], timeout=5)


def test_an_unreachable_ray_address_is_one_line_and_quick(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'pt2chakra[ray]')")
    i = make_inputs(tmp_path)
    t0 = time.monotonic()
    done = run_cli("convert", "--ranks", "0-1", "--device-trace", i["kineto"], "-o",
                   tmp_path / "k{rank}.et", "--ray", "127.0.0.1:1")
    assert time.monotonic() - t0 < 30
    assert_one_line_failure(done, "--ray", "127.0.0.1:1")


def test_signal_to_sleeping_child_kills_it(tmp_path: Path) -> None:
    """Ctrl-C while waiting for a child: the child's group is killed too."""
    pids = tmp_path / "pids"
    binary = _script(tmp_path, "slow", f"echo $$ > {pids}\nexec sleep 300\n")
    job = _job(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "pt2chakra", "astra-sim", "--check", str(job),
                             "--bin", str(binary)], stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < EXIT_WITHIN_S
    assert proc.returncode == 143 and "Traceback" not in err
    assert not _running(int(pids.read_text()))


class _RayThatFails:
    """Stands in for the ``ray`` module: its start fails with Ray's kind of
    message (several lines, the reason last)."""

    @staticmethod
    def init(**_kwargs: object) -> None:
        raise ConnectionError("Ray could not connect\n  (retried 10 times)\nGCS is not reachable")

    @staticmethod
    def shutdown() -> None:
        raise AssertionError("a Ray that did not start is not shut down")


def test_a_ray_start_failure_is_one_line_from_the_main_thread() -> None:
    from pt2chakra.conversion.many_ranks import _RayHost
    from pt2chakra.errors import InputError

    host = _RayHost(_RayThatFails(), "10.0.0.1:6379", 2)
    with pytest.raises(InputError) as caught:
        host.start()
    assert str(caught.value).count("\n") == 0
    assert "--ray" in str(caught.value) and "GCS is not reachable" in str(caught.value)
    assert "10.0.0.1:6379" in str(caught.value)



def test_a_sigterm_a_library_re_raises_as_ctrl_c_still_exits_143(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's ray.wait / ray.get catch our Terminated and raise a plain
    KeyboardInterrupt in its place (seen: exit 130 after a SIGTERM)."""
    from pt2chakra.cli import options

    monkeypatch.setattr(options, "_terminated_by", [])
    assert options.exit_status_of(KeyboardInterrupt()) == 130  # Ctrl-C
    with pytest.raises(KeyboardInterrupt) as caught:
        try:
            options._raise_terminated(signal.SIGTERM, None)
        except KeyboardInterrupt:
            raise KeyboardInterrupt() from None  # what Ray raises instead
    assert not hasattr(caught.value, "signum")
    assert options.exit_status_of(caught.value) == 143

"""Issue 44, items 6-8, and the cache's rules: ``scripts/astra_sim_cache.py`` (``make astra-sim``) run as
a subprocess on a stand-in ``../shared`` (``PT2CHAKRA_SHARED``) whose build script
is a tiny bash stand-in, with HOME, XDG_CACHE_HOME and TMPDIR in ``tmp_path``.

- 6: every refusal is one line, exit 2, no traceback, and comes before a build
  starts (the stand-in counts its runs);
- 7: SIGINT, SIGTERM or SIGHUP stop the build's whole process group (the
  stand-in writes its children's pids; each is checked dead), remove its staging
  and scratch folders, exit 128 + the signal in one line;
- 8: only regular executable files whose sha256 ``BINARIES.sha256`` recorded count
  as built; a build of the earlier script (no record) is adopted once, only if it
  looks like what the build makes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers import ROOT, assert_one_line_failure, load_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCRIPT = ROOT / "scripts" / "astra_sim_cache.py"
BINARIES = ("AstraSim_Analytical_Congestion_Unaware", "AstraSim_Analytical_Congestion_Aware")
TARBALL = "astra-sim-0123abcd.tar.gz"
TARBALL_BYTES = b"not really a tarball"
DIGEST = hashlib.sha256(TARBALL_BYTES).hexdigest()
KEY = f"astra-sim-{DIGEST[:12]}"
ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 57  # what the real build's binaries start with
RUN_TIMEOUT_S = 30  # a run takes a tenth of a second; this only bounds a hang
PIDS_WITHIN_S = 10.0  # the stand-in spawns its children in milliseconds
STOPPED_WITHIN_S = 4.0  # the grace given to the build (cut to 0.3 s where it matters) and then some
SHORT_GRACE_S = 0.3

FAKE_BUILD = r"""#!/usr/bin/env bash
# stand-in for build_astra_sim.sh --tarball FILE SCRATCH: binaries to $ASTRA_OUT
set -e
echo run >> "$FAKE_LOG"
mkdir -p "$3"; echo partial > "$3/object.o"; echo partial > "$ASTRA_OUT/half-written"
spawn() { "$@" >/dev/null 2>&1 & echo $! >> "$FAKE_PIDS"; }
case "$FAKE_MODE" in
  fail) exit 3 ;;
  empty) rm "$ASTRA_OUT/half-written"; exit 0 ;;
  hang|stubborn)
    spawn sleep 60
    spawn bash -c 'sleep 60 >/dev/null 2>&1 & echo $! >> "$FAKE_PIDS"; wait'
    [ "$FAKE_MODE" = stubborn ] && spawn bash -c 'trap "" TERM; exec sleep 60'
    wait ;;
  leave-child) spawn sleep 60 ;;
esac
rm "$ASTRA_OUT/half-written"
for b in AstraSim_Analytical_Congestion_Unaware AstraSim_Analytical_Congestion_Aware; do
  printf '#!/bin/sh\necho %s\n' "$b" > "$ASTRA_OUT/$b"; chmod +x "$ASTRA_OUT/$b"
done
"""
# The script loaded by path with a shorter grace, for the child that ignores SIGTERM.
WITH_GRACE = ("import importlib.util, sys\n"
              "spec = importlib.util.spec_from_file_location('astra_sim_cache', sys.argv[1])\n"
              "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
              "m.GRACE_S = float(sys.argv[2]); sys.exit(m.main(sys.argv[3:]))\n")


class Stage(NamedTuple):
    """A stand-in ``../shared``, a cache and a TMPDIR, all in ``tmp_path``."""

    shared: Path
    root: Path  # ${XDG_CACHE_HOME}/pt2chakra
    tmp: Path  # the build's scratch goes here
    log: Path  # one line per build run
    pids: Path  # the build's children, one pid a line
    env: dict[str, str]

    @property
    def folder(self) -> Path:
        return self.root / KEY

    @property
    def sums(self) -> Path:
        return self.shared / "astra-sim-src" / "SHA256SUMS"

    def builds(self) -> int:
        return self.log.read_text().count("run") if self.log.exists() else 0


@pytest.fixture
def stage(tmp_path: Path) -> Stage:
    shared = tmp_path / "shared"
    (shared / "astra-sim-src").mkdir(parents=True)
    (shared / "scripts").mkdir()
    (shared / "astra-sim-src" / TARBALL).write_bytes(TARBALL_BYTES)
    (shared / "astra-sim-src" / "SHA256SUMS").write_text(f"{DIGEST}  {TARBALL}\n")
    (shared / "scripts" / "build_astra_sim.sh").write_text(FAKE_BUILD)
    for name in ("home", "xdg", "tmp"):
        (tmp_path / name).mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "TMPDIR": str(tmp_path / "tmp"), "PT2CHAKRA_SHARED": str(shared),
           "FAKE_LOG": str(tmp_path / "builds"), "FAKE_PIDS": str(tmp_path / "pids"),
           "FAKE_MODE": "ok"}
    return Stage(shared, tmp_path / "xdg" / "pt2chakra", tmp_path / "tmp", tmp_path / "builds",
                 tmp_path / "pids", env)


def _run(s: Stage, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], env={**s.env, **env},
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def _refused(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, one line naming what is wrong, nothing on stdout."""
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert_one_line_failure(proc, *needles)


def _built(s: Stage, proc: subprocess.CompletedProcess[str]) -> None:
    """Exit 0, stdout the path of a regular executable file alone."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{s.folder / BINARIES[0]}\n"
    mode = os.lstat(s.folder / BINARIES[0]).st_mode
    assert stat.S_ISREG(mode) and mode & stat.S_IXUSR


def _not_built(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """``--find``: exit 1, one line saying why, stdout empty (the Makefile's ``$(...)``)."""
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert_one_line_failure(proc, *needles)


def _left_behind(s: Stage) -> list[str]:
    """What a run may not leave: staging folders, manifest temp files, scratch."""
    found = [p.name for p in s.root.iterdir() if p.name != f".{KEY}.lock"] \
        if s.root.is_dir() else []
    if s.folder.is_dir():
        found.remove(KEY)
        found += [p.name for p in s.folder.iterdir() if p.name.startswith(".")]
    return found + [p.name for p in s.tmp.iterdir()]


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed child of a reaper that does not reap)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


# -- 6: refusals, in one line, before any build ------------------------------

def _xdg_file(s: Stage) -> dict[str, str]:
    (s.root.parent / "file").write_text("")
    return {"XDG_CACHE_HOME": str(s.root.parent / "file")}


def _root_file(s: Stage) -> dict[str, str]:
    s.root.write_text("")
    return {}


def _folder_file(s: Stage) -> dict[str, str]:
    s.root.mkdir()
    s.folder.write_text("")
    return {}


def _folder_link(s: Stage) -> dict[str, str]:
    s.root.mkdir()
    (s.root / "elsewhere").mkdir()
    s.folder.symlink_to(s.root / "elsewhere")
    return {}


def _folder_dangling_link(s: Stage) -> dict[str, str]:
    s.root.mkdir()
    s.folder.symlink_to(s.root / "nowhere")
    return {}


# layout -> (the env it needs, a word the one line must hold)
BAD_LOCATIONS = {
    "XDG_CACHE_HOME is a file": (_xdg_file, "not a folder"),
    "pt2chakra is a file": (_root_file, "not a folder"),
    "the tarball's folder is a file": (_folder_file, "a file where"),
    "the tarball's folder is a symlink": (_folder_link, "a symlink"),
    "the tarball's folder is a dangling symlink": (_folder_dangling_link, "a symlink"),
    "under /proc": (lambda s: {"XDG_CACHE_HOME": "/proc"}, "/proc"),
    "under /proc, resolving elsewhere": (lambda s: {"XDG_CACHE_HOME": "/proc/self/cwd"}, "/proc"),
    "under /sys": (lambda s: {"XDG_CACHE_HOME": "/sys/kernel"}, "/sys"),
    "below a device": (lambda s: {"XDG_CACHE_HOME": "/dev/null/cache"}, "/dev/null"),
    "relative XDG_CACHE_HOME": (lambda s: {"XDG_CACHE_HOME": "rel/cache"}, "XDG_CACHE_HOME"),
    "no HOME, no XDG_CACHE_HOME": (lambda s: {"XDG_CACHE_HOME": "", "HOME": ""}, "HOME"),
}


@pytest.mark.parametrize("mode", [[], ["--find"]], ids=["build", "find"])
@pytest.mark.parametrize("layout", list(BAD_LOCATIONS))
def test_a_bad_cache_location_is_refused_before_the_build(stage, layout, mode):
    make, word = BAD_LOCATIONS[layout]
    proc = _run(stage, *mode, **make(stage))
    _refused(proc, word)
    assert stage.builds() == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to any folder")
def test_an_unwritable_cache_is_refused_before_the_build(stage):
    stage.root.mkdir()
    stage.root.chmod(0o500)
    try:
        _refused(_run(stage), str(stage.root), "not writable")
    finally:
        stage.root.chmod(0o700)
    assert stage.builds() == 0


def _sums_not_utf8(s: Stage) -> None:
    s.sums.write_bytes(f"{DIGEST}  {TARBALL}\n# caf\xe9\n".encode("latin-1"))


def _sums_folder(s: Stage) -> None:
    s.sums.unlink()
    s.sums.mkdir()


def _tarball_folder(s: Stage) -> None:
    (s.shared / "astra-sim-src" / TARBALL).unlink()
    (s.shared / "astra-sim-src" / TARBALL).mkdir()


def _two_tarballs(s: Stage) -> None:
    s.sums.write_text(f"{DIGEST}  {TARBALL}\n{DIGEST}  astra-sim-other.tar.gz\n")


def _one_tarball_two_hashes(s: Stage) -> None:
    s.sums.write_text(f"{DIGEST}  {TARBALL}\n{'0' * 64} *{TARBALL}\n")


def _tarball_changed(s: Stage) -> None:
    (s.shared / "astra-sim-src" / TARBALL).write_bytes(b"changed")


def _no_build_script(s: Stage) -> None:
    (s.shared / "scripts" / "build_astra_sim.sh").unlink()


BAD_SOURCES = {
    "SHA256SUMS not UTF-8": (_sums_not_utf8, "0xe9"),
    "SHA256SUMS a folder": (_sums_folder, "SHA256SUMS"),
    "the tarball a folder": (_tarball_folder, TARBALL),
    "two tarballs listed": (_two_tarballs, "expected one"),
    "one tarball, two hashes": (_one_tarball_two_hashes, "different sha256"),
    "no build script": (_no_build_script, "build_astra_sim.sh"),
    "the tarball differs from SHA256SUMS": (_tarball_changed, "differs from SHA256SUMS"),
}


@pytest.mark.parametrize("layout", list(BAD_SOURCES))
def test_a_bad_source_is_refused_in_one_line(stage, layout):
    make, word = BAD_SOURCES[layout]
    make(stage)
    _refused(_run(stage), word)
    _refused(_run(stage, "--find"), word)
    assert stage.builds() == 0


def test_without_shared_one_line_and_exit_2(tmp_path):
    """A copy of the script whose ``../shared`` does not exist."""
    lone = tmp_path / "clone" / "scripts" / "astra_sim_cache.py"
    lone.parent.mkdir(parents=True)
    lone.write_text(SCRIPT.read_text())
    env = {k: v for k, v in os.environ.items() if k != "PT2CHAKRA_SHARED"}
    proc = subprocess.run([sys.executable, str(lone)], env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)
    _refused(proc, "shared")


def test_builds_once_into_the_key_folder_then_reuses(stage):
    _not_built(_run(stage, "--find"), "not built yet")
    _built(stage, _run(stage))
    assert (stage.folder / "BUILD_INFO.json").is_file()
    assert (stage.folder / "BINARIES.sha256").is_file()
    _built(stage, _run(stage))
    _built(stage, _run(stage, "--find"))
    assert stage.builds() == 1 and _left_behind(stage) == []


def test_sha256sum_b_form_is_accepted(stage):
    """``sha256sum -b`` writes ``<hash> *<name>``: the same hash, so the same tarball."""
    stage.sums.write_text(f"{DIGEST.upper()} *{TARBALL}\r\n")
    _built(stage, _run(stage))
    _built(stage, _run(stage, "--find"))
    assert stage.builds() == 1


def test_an_unknown_option_is_one_line():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--fnd"], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, check=False)
    _refused(proc, "--fnd")


def test_a_closed_stdout_is_one_line(stage):
    _built(stage, _run(stage))
    proc = subprocess.run(["bash", "-c", f'"{sys.executable}" "{SCRIPT}" --find >&-'],
                          env=stage.env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)
    _refused(proc, "stdout")


def test_a_build_without_binaries_is_one_line_and_caches_nothing(stage):
    proc = _run(stage, FAKE_MODE="empty")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("astra_sim_cache:")]
    assert len(errors) == 1 and "exited 0 but" in errors[0], proc.stderr
    assert not stage.folder.exists() and _left_behind(stage) == []


SUMS_PIECES = [f"{DIGEST}  {TARBALL}", f"{DIGEST} *{TARBALL}", f"{DIGEST} {TARBALL}",
               f"{'f' * 64}  {TARBALL}", f"{DIGEST}  astra-sim-x.tar.gz", DIGEST[:40], "*", " ",
               "\r", "\n", "\t", "\x00", "# comment", "astra-sim-", ".tar.gz"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(SUMS_PIECES) | st.text(max_size=4), max_size=8),
       raw=st.binary(max_size=4))
def test_any_sha256sums_is_a_path_or_one_line(stage, monkeypatch, capsys, pieces, raw):
    """``--find`` in this process, on SHA256SUMS made of pieces of valid lines and
    arbitrary bytes: exit 1 (valid, not built) or 2 with one line, never an exception."""
    script = load_script("astra_sim_cache")
    monkeypatch.setattr(script, "SOURCE_DIR", stage.shared / "astra-sim-src")
    monkeypatch.setattr(script, "SUMS_FILE", stage.sums)
    monkeypatch.setattr(script, "BUILD_SCRIPT", stage.shared / "scripts" / "build_astra_sim.sh")
    monkeypatch.setenv("XDG_CACHE_HOME", str(stage.root.parent))
    stage.sums.write_bytes("".join(pieces).encode("utf-8", "surrogatepass") + raw)
    rc = script.main(["--find"])
    captured = capsys.readouterr()
    assert rc in (1, 2) and captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err


# -- 7: a signal stops the build, its children and its folders ----------------

def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _start(s: Stage, mode: str, argv: list[str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(argv or [sys.executable, str(SCRIPT)], env={**s.env, "FAKE_MODE": mode},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)


def _children(s: Stage, count: int) -> list[int]:
    """The build's children's pids, once it has spawned ``count`` of them."""
    deadline = time.monotonic() + PIDS_WITHIN_S
    while time.monotonic() < deadline:
        pids = s.pids.read_text().split() if s.pids.exists() else []
        if len(pids) >= count:
            return [int(p) for p in pids]
        time.sleep(0.02)
    raise AssertionError(f"the stand-in build spawned {len(pids)} of {count} children")


def _stop(proc: subprocess.Popen[str], signum: int) -> tuple[str, str, float]:
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running {RUN_TIMEOUT_S} s after signal {signum}") from None
    return out, err, time.monotonic() - sent


def _check_stopped(s: Stage, proc: subprocess.Popen[str], signum: int, out: str, err: str,
                   pids: list[int]) -> None:
    assert proc.returncode == 128 + signum, err
    assert out == "" and "Traceback" not in err and "KeyboardInterrupt" not in err
    errors = [line for line in err.splitlines() if line.startswith("astra_sim_cache:")]
    assert len(errors) == 1 and signal.Signals(signum).name in errors[0], err
    assert [pid for pid in pids if _running(pid)] == []
    assert not s.folder.exists()
    assert _left_behind(s) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda n: signal.Signals(n).name)
def test_a_signal_stops_the_build_and_its_children(stage, signum):
    proc = _start(stage, "hang")
    pids = _children(stage, 3)
    out, err, took = _stop(proc, signum)
    _check_stopped(stage, proc, signum, out, err, pids)
    assert took < STOPPED_WITHIN_S
    _built(stage, _run(stage))  # the lock was let go: the next run builds


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(stage):
    argv = [sys.executable, "-c", WITH_GRACE, str(SCRIPT), str(SHORT_GRACE_S)]
    proc = _start(stage, "stubborn", argv)
    pids = _children(stage, 4)
    out, err, took = _stop(proc, signal.SIGTERM)
    _check_stopped(stage, proc, signal.SIGTERM, out, err, pids)
    assert SHORT_GRACE_S <= took < STOPPED_WITHIN_S


def test_a_successful_build_leaves_no_process_behind(stage):
    _built(stage, _run(stage, FAKE_MODE="leave-child"))
    assert [pid for pid in _children(stage, 1) if _running(pid)] == []
    assert _left_behind(stage) == []


def test_a_failed_build_leaves_nothing(stage):
    proc = _run(stage, FAKE_MODE="fail")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "exit 3" in proc.stderr
    assert not stage.folder.exists() and _left_behind(stage) == []


def test_a_killed_runs_staging_is_removed_by_the_next_build(stage):
    stale = stage.root / f".{KEY}.building-abc123"
    stale.mkdir(parents=True)
    (stale / "half-written").write_text("")
    _built(stage, _run(stage))
    assert _left_behind(stage) == []


# -- 8: only a recorded build counts -------------------------------------------

def _executables(folder: Path, head: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in BINARIES:
        (folder / name).write_bytes(head + name.encode())
        (folder / name).chmod(0o755)


def _build_info(folder: Path, sha256: str = DIGEST) -> None:
    """What the earlier script wrote after a successful build."""
    (folder / "BUILD_INFO.json").write_text(json.dumps({"tarball": TARBALL, "sha256": sha256}))


def _old_build(s: Stage) -> None:
    _executables(s.folder, ELF)
    _build_info(s.folder)
    s.folder.chmod(0o700)  # mkdtemp's mode, renamed into place


def _two_folders(s: Stage) -> None:
    for name in BINARIES:
        (s.folder / name).mkdir(parents=True)


def _two_scripts(s: Stage) -> None:
    _executables(s.folder, b"#!/bin/sh\n")


def _old_info_scripts(s: Stage) -> None:
    _executables(s.folder, b"#!/bin/sh\n")
    _build_info(s.folder)


def _old_info_other_tarball(s: Stage) -> None:
    _old_build(s)
    _build_info(s.folder, "0" * 64)


def _old_info_not_json(s: Stage) -> None:
    _old_build(s)
    (s.folder / "BUILD_INFO.json").write_bytes(b"\xff{")


def _old_links(s: Stage) -> None:
    _executables(s.root / "real", ELF)
    s.folder.mkdir(parents=True)
    _build_info(s.folder)
    for name in BINARIES:
        (s.folder / name).symlink_to(s.root / "real" / name)


def _folders_recorded(s: Stage) -> None:
    _two_folders(s)
    (s.folder / "BINARIES.sha256").write_text("".join(f"{DIGEST}  {n}\n" for n in BINARIES))


def _half_copied(s: Stage) -> None:
    s.folder.mkdir(parents=True)
    (s.folder / BINARIES[0]).write_text("")  # the other one missing, this one not +x


NOT_BUILDS = {
    "half copied": _half_copied,
    "two folders": _two_folders,
    "two executables, no record": _two_scripts,
    "earlier script's record, not ELF": _old_info_scripts,
    "earlier script's record of another tarball": _old_info_other_tarball,
    "earlier script's record not JSON": _old_info_not_json,
    "earlier script's record, symlinks": _old_links,
    "two folders with a record": _folders_recorded,
}


@pytest.mark.parametrize("layout", list(NOT_BUILDS))
def test_what_is_not_a_recorded_build_is_not_reported(stage, layout):
    NOT_BUILDS[layout](stage)
    _not_built(_run(stage, "--find"), str(stage.folder))
    _built(stage, _run(stage))  # the build path rebuilds it
    assert stage.builds() == 1
    _built(stage, _run(stage, "--find"))


def _changed(folder: Path) -> None:
    with open(folder / BINARIES[1], "ab") as f:
        f.write(b"# changed\n")


def _swapped(folder: Path) -> None:
    (folder / BINARIES[0]).unlink()
    (folder / BINARIES[0]).symlink_to(folder / BINARIES[1])


def _not_executable(folder: Path) -> None:
    (folder / BINARIES[0]).chmod(0o644)


def _a_folder(folder: Path) -> None:
    (folder / BINARIES[1]).unlink()
    (folder / BINARIES[1]).mkdir()


def _record_short(folder: Path) -> None:
    record = folder / "BINARIES.sha256"
    record.write_text(record.read_text().splitlines()[0] + "\n")


def _record_garbled(folder: Path) -> None:
    (folder / "BINARIES.sha256").write_bytes(b"\xfe\xff")


TAMPERINGS = {"content changed": _changed, "replaced by a symlink": _swapped,
              "not executable": _not_executable, "replaced by a folder": _a_folder,
              "record lacks one": _record_short, "record not UTF-8": _record_garbled}


@pytest.mark.parametrize("tamper", list(TAMPERINGS))
def test_a_changed_build_is_not_reported_and_is_rebuilt(stage, tamper):
    _built(stage, _run(stage))
    TAMPERINGS[tamper](stage.folder)
    _not_built(_run(stage, "--find"), str(stage.folder))
    _built(stage, _run(stage))
    assert stage.builds() == 2
    _built(stage, _run(stage, "--find"))


def test_an_earlier_scripts_build_is_adopted_once(stage):
    """No 17-minute rebuild for a cache the earlier script made: its binaries'
    sha256 are recorded at the first call, and checked from then on."""
    _old_build(stage)
    proc = _run(stage, "--find")
    _built(stage, proc)
    assert "recorded" in proc.stderr and "Traceback" not in proc.stderr
    recorded = (stage.folder / "BINARIES.sha256").read_text()
    for name in BINARIES:
        digest = hashlib.sha256((stage.folder / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}\n" in recorded
    _built(stage, _run(stage))
    assert stage.builds() == 0 and _left_behind(stage) == []
    _changed(stage.folder)  # from now on it is held to the record
    _not_built(_run(stage, "--find"), "sha256 differs")

"""Classes 3 and 4 of issue 25: the outputs of one command are committed
together or not at all, and a failure leaves the folder exactly as it was
before the command (``atomic.StagedOutputs`` puts the replaced files back);
every error names the user's file, never a temp file."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_setup import make_inputs, run_quietly, snapshot, temps

from pt2chakra.atomic import StagedOutputs


class Boom(Exception):
    pass


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(old=st.lists(st.booleans(), min_size=1, max_size=6), data=st.data())
def test_staged_outputs_all_or_nothing(old: list[bool], data: st.DataObject) -> None:
    """Random targets (some with an old file, one maybe a folder in the way),
    a failure at a random point: before the commit, in it, or after it
    within the block. Success: every new file. Failure: the folder as before."""
    n = len(old)
    blocker = data.draw(st.none() | st.integers(0, n - 1), label="folder in the way")
    fail_at = data.draw(st.none() | st.integers(0, n), label="exception after k staged")
    fail_after_commit = data.draw(st.booleans(), label="fail after the commit")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        targets = [d / f"out{k}.et" for k in range(n)]
        for k, target in enumerate(targets):
            if k == blocker:
                target.mkdir()
                (target / "keep").write_text("x")
            elif old[k]:
                target.write_bytes(b"old %d" % k)
        before = snapshot(d)
        failed = True
        try:
            with StagedOutputs() as staged:
                for k, target in enumerate(targets):
                    if k == fail_at:
                        raise Boom
                    Path(staged.stage(target)).write_bytes(b"new %d" % k)
                staged.commit()
                if fail_after_commit:
                    raise Boom
            failed = False
        except (Boom, OSError):
            pass
        assert temps(d) == []
        if failed:
            assert snapshot(d) == before
        else:
            assert blocker is None and fail_at in (None, n)
            assert all(t.read_bytes() == b"new %d" % k for k, t in enumerate(targets))


def _blocked(path: Path) -> None:
    """A folder where an output file should go (a commit that cannot rename)."""
    if path.exists():
        path.unlink()
    path.mkdir()
    (path / "inside").write_text("mine")


def test_failed_job_keeps_the_previous_job(tmp_path: Path) -> None:
    i = make_inputs(tmp_path / "in")
    job = tmp_path / "j" / "job"
    assert run_quietly("astra-sim", i["r0"], i["r1"], "-o", job)[0] == 0
    _blocked(tmp_path / "j" / "memory.json")  # the last file the job writes
    before = snapshot(tmp_path)
    rc, _out, err = run_quietly("astra-sim", i["r0"], i["r1"], "-o", job, "--bandwidth", "3")
    assert rc == 2 and "memory.json" in err and ".tmp" not in err, err
    assert snapshot(tmp_path) == before  # job.*.et, network.yml, run.sh: the old ones


@pytest.mark.parametrize("command", ["microbench", "from-text"])
def test_generated_sets_keep_the_previous_set(tmp_path: Path, command: str) -> None:
    text = tmp_path / "w.txt"
    text.write_text("MICRO\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 1\n")
    argvs: dict[str, list[object]] = {"microbench": ["microbench", "--npus", "3", "--size", "64"],
                                      "from-text": ["from-text", text, "--npus", "3"]}
    argv = argvs[command]
    assert run_quietly(*argv, "-o", tmp_path / "g")[0] == 0
    _blocked(tmp_path / "g.2.et")
    before = snapshot(tmp_path)
    rc, _out, err = run_quietly(*argv, "-o", tmp_path / "g")
    assert rc == 2 and "g.2.et" in err, err
    assert snapshot(tmp_path) == before


def test_convert_with_a_bad_page_leaves_nothing(tmp_path: Path) -> None:
    """``convert --report R --html DIR.html``: the page cannot be written, so
    neither the .et nor the report is, nothing is printed, the old ones stay."""
    i = make_inputs(tmp_path / "in")
    (tmp_path / "o.et").write_bytes(b"old et")
    _blocked(tmp_path / "p.html")
    before = snapshot(tmp_path)
    rc, out, err = run_quietly("convert", "--host-trace", i["host"], "--device-trace",
                               i["kineto"], "-o", tmp_path / "o.et", "--report",
                               tmp_path / "r.json", "--html", tmp_path / "p.html")
    assert rc == 2 and "p.html" in err, err
    assert out == ""
    assert snapshot(tmp_path) == before


def test_convert_whose_page_fails_late_restores_the_old_outputs(tmp_path: Path,
                                                                monkeypatch) -> None:
    """The page fails after the .et and report were committed (over a limit):
    the old .et and report come back."""
    from pt2chakra.report import api

    i = make_inputs(tmp_path / "in")
    (tmp_path / "o.et").write_bytes(b"old et")
    (tmp_path / "r.json").write_bytes(b"old report")
    before = snapshot(tmp_path)
    monkeypatch.setattr(api, "MAX_PAGE_BYTES", 10)
    rc, out, err = run_quietly("convert", "--host-trace", i["host"], "--device-trace",
                               i["kineto"], "-o", tmp_path / "o.et", "--report",
                               tmp_path / "r.json", "--html", tmp_path / "p.html")
    assert rc == 2 and "p.html" in err, err
    assert out == "" and snapshot(tmp_path) == before


def test_simulate_outputs_together(tmp_path: Path) -> None:
    """``--timeline t.json --plot BAD`` leaves no t.json; ``--write-et`` with
    one rank's file blocked leaves no rank's file; the old ones stay."""
    i = make_inputs(tmp_path / "in")
    (tmp_path / "t.json").write_bytes(b"old timeline")
    (tmp_path / "w.0.et").write_bytes(b"old rank 0")
    _blocked(tmp_path / "w.1.et")
    before = snapshot(tmp_path)
    rc, _out, err = run_quietly("simulate", i["r0"], i["r1"], "--timeline", tmp_path / "t.json",
                                "--write-et", tmp_path / "w")
    assert rc == 2 and "w.1.et" in err, err
    assert snapshot(tmp_path) == before


def _fsize_limit(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over the limit fails instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_full_disk_names_the_file_and_keeps_the_old_set(tmp_path: Path) -> None:
    """A disk that fills up mid-set (a file size limit stands in for it): the
    error names the output file; the earlier set is intact, no temp file."""
    prefix = tmp_path / "mb"
    assert run_quietly("microbench", "--npus", "4", "--size", "64", "--steps", "2", "-o",
                       prefix)[0] == 0
    before = snapshot(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pt2chakra", "microbench", "--npus", "4", "--size", "64",
                           "--steps", "3000", "-o", str(prefix)], capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: _fsize_limit(40_000))
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert f"{prefix}.0.et: " in line and ".tmp" not in line, line
    assert snapshot(tmp_path) == before


def test_outputs_named_in_errors_never_temp_files(tmp_path: Path) -> None:
    """A missing folder deep in the output path: its name, before any work."""
    i = make_inputs(tmp_path / "in")
    for argv in (["timeline", i["r0"], "-o", tmp_path / "no" / "t.json"],
                 ["jsonize", i["r0"], "-o", tmp_path / "no" / "j.json"],
                 ["report", i["r0"], "-o", tmp_path / "no" / "p.html"]):
        rc, _out, err = run_quietly(*argv)
        assert rc == 2 and str(tmp_path / "no") in err and ".tmp" not in err, err
    assert not (tmp_path / "no").exists()
    assert os.listdir(tmp_path) == ["in"]

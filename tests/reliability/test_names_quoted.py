"""Class 2 of issue 25: a name from the user or a trace is quoted for every
target it reaches. Output names with control characters are refused (they
would end a line of run.sh, a YAML comment or a terminal line); other names
reach run.sh through ``shlex.quote`` (comments included); inline JSON in the
HTML report writes ``<`` as ``\\u003c``; control characters from traces are
printed escaped (``errors.printable``, the CLI's stdout and log lines)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from builders import comm_node, comp_node, gpu_attrs, node, write_rank
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_setup import make_inputs, run_quietly, snapshot

CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, 0x85, 0x9B)]
# Characters the shell gives a meaning to, but no control character.
SHELL_SPECIAL = "$`'\";&|()<>*?!#~{}[] \\=%^"

name_with_control = st.builds(
    lambda a, c, b: f"{a}{c}{b}", st.text("abc._-", max_size=6), st.sampled_from(CONTROLS),
    st.text("abc._-" + "".join(CONTROLS[:3]), max_size=6))


def _writers(i: dict[str, Path], out: str) -> list[list[object]]:
    """Every command that writes, with ``out`` as its output name or prefix."""
    return [
        ["convert", "--host-trace", i["host"], "-o", out],
        ["convert", "--host-trace", i["host"], "-o", i["host"].parent / "ok.et", "--report", out],
        ["link", "--host-trace", i["host"], "--device-trace", i["kineto"], "-o", out],
        ["simulate", i["r0"], i["r1"], "--timeline", out],
        ["simulate", i["r0"], i["r1"], "--write-et", out],
        ["report", i["r0"], i["r1"], "-o", out + ".html"],
        ["astra-sim", i["r0"], i["r1"], "-o", out],
        ["timeline", i["r0"], "-o", out],
        ["jsonize", i["r0"], "-o", out],
        ["microbench", "--npus", "2", "--size", "8", "-o", out],
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=name_with_control, which=st.integers(0, 9))
def test_output_names_with_control_characters_are_refused(name: str, which: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        i = make_inputs(d / "in")
        before = snapshot(d)
        argv = _writers(i, str(d / name))[which]
        rc, out, err = run_quietly(*argv)
        assert rc == 2, (argv, err)
        assert len(err.splitlines()) == 1 and "control character" in err, err
        assert not any(c in err.rstrip("\n") for c in CONTROLS), err  # printed escaped
        assert out == ""
        assert snapshot(d) == before


def _recording_binary(folder: Path) -> Path:
    """A stand-in for ASTRA-sim that writes its arguments, one per line."""
    script = folder / "fake_astra.sh"
    script.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$ARGS_OUT"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.text(SHELL_SPECIAL + "ab", min_size=1, max_size=12)
       .filter(lambda s: s not in (".", "..") and "/" not in s))
def test_run_sh_quotes_the_job_name(name: str) -> None:
    """Whatever the shell makes of the name's characters, run.sh passes it to
    the binary as written and runs nothing else."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        i = make_inputs(d / "in")
        rc, _out, err = run_quietly("astra-sim", i["r0"], i["r1"], "-o", d / "job" / name, "-q")
        assert rc == 0, err
        before = set(snapshot(d))
        env = {**os.environ, "ASTRA_SIM_BIN": str(_recording_binary(d)),
               "ARGS_OUT": str(d / "args.txt")}
        done = subprocess.run(["sh", str(d / "job" / "run.sh")], env=env, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        args = (d / "args.txt").read_text().splitlines()
        assert args[0] == f"--workload-configuration=./{name}"
        assert set(snapshot(d)) - before == {"args.txt", "fake_astra.sh"}  # nothing else ran


def test_newline_in_the_prefix_cannot_reach_run_sh(tmp_path: Path) -> None:
    """The issue's example: ``-o "x/j3/x"$'\\n'"touch PWNED"$'\\n'"#"``."""
    i = make_inputs(tmp_path / "in")
    os.chdir(tmp_path)
    rc, _out, err = run_quietly("astra-sim", i["r0"], i["r1"], "-o",
                                "j3/x\ntouch PWNED\n#")
    assert rc == 2 and "control character" in err
    assert not (tmp_path / "j3").exists() and not (tmp_path / "PWNED").exists()


HOSTILE = ["</script><script>alert(1)</script>", "<!--", "<script>x", "a\u2028b"]


def test_inline_json_in_the_report_cannot_end_its_script(tmp_path: Path) -> None:
    ranks = []
    for r in (0, 1):
        nodes = [node(1, name=HOSTILE[0], start=10, dur=5, attrs=gpu_attrs()),
                 node(2, [1], name=HOSTILE[1], start=20, dur=5, attrs=gpu_attrs()),
                 node(3, [2], name=HOSTILE[2], start=30, dur=5, attrs=gpu_attrs()),
                 comm_node(4, [3])]
        ranks.append(write_rank(tmp_path / f"h{r}.et", nodes, rank=r, world_size=2))
    rc, _out, err = run_quietly("report", *ranks, "-o", tmp_path / "p.html", "-q")
    assert rc == 0, err
    page = (tmp_path / "p.html").read_text()
    blocks = re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', page,
                        re.S)
    assert blocks
    for block in blocks:
        assert "<" not in block
        json.loads(block)  # still the same JSON
    assert page.count("<script") == len(blocks) + 1  # the data blocks and the page's own script
    assert HOSTILE[0] in json.dumps([json.loads(b) for b in blocks], ensure_ascii=False)


@pytest.mark.parametrize("command", ["simulate", "inspect", "validate"])
def test_control_characters_from_a_trace_are_printed_escaped(tmp_path: Path,
                                                             command: str) -> None:
    evil = "op\x1b[2J\x1b]0;owned\x07\rFAKE"
    nodes = [node(1, name=evil, start=10, dur=50, attrs=gpu_attrs()), comp_node(2, [1]),
             comm_node(3, [2])]
    et = write_rank(tmp_path / "e.et", nodes, rank=0)
    done = subprocess.run([sys.executable, "-m", "pt2chakra", command, str(et)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    for stream in (done.stdout, done.stderr):
        assert not any(c in stream for c in "\x1b\x07\r"), repr(stream)
    assert "op\\x1b[2J" in done.stdout or command == "validate"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(st.characters(max_codepoint=0x9f), min_size=1, max_size=8).map(
    lambda t: "op" + t + "\nFAKE LINE"))
def test_names_with_newlines_cannot_add_report_lines(tmp_path: Path, name: str) -> None:
    """A name's newline or control character in the text report (here the
    critical path's longest nodes) is escaped by ``errors.printable``: it
    cannot start a line of its own."""
    nodes = [node(1, name=name, start=10, dur=50, attrs=gpu_attrs()), comp_node(2, [1]),
             comm_node(3, [2])]
    et = write_rank(tmp_path / "n.et", nodes, rank=0)
    for command in ("simulate", "inspect"):
        done = subprocess.run([sys.executable, "-m", "pt2chakra", command, str(et)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 1), done.stderr
        assert not any(line.startswith("FAKE") for line in done.stdout.splitlines()), done.stdout
        assert "\\x0aFAKE LINE" in done.stdout, done.stdout

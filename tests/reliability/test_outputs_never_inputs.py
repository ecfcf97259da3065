"""Class 1 of issue 25: no command, for any of its outputs (per rank, the
ASTRA-sim job's fixed files, reports, HTML, timelines, --write-et), ever
writes to one of its inputs: the same path, a symbolic or hard link to it,
or another spelling of it. Refused in one line before any work, the input's
bytes untouched (``atomic.check_outputs`` / ``check_prefix_outputs``).

Property-based: hypothesis picks the command, which of its outputs lands on
which of its inputs, and how."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_setup import make_inputs, run_quietly, snapshot


@dataclass(frozen=True)
class Command:
    """A command: the inputs it reads (by name in ``make_inputs``), the files
    it writes (relative to the folder) and its argv given both."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    argv: Callable[[list[str], list[str]], list[str]]


COMMANDS: dict[str, Command] = {
    "convert": Command(("host", "kineto"), ("o.et", "r.json", "p.html"), lambda i, o: [
        "convert", "--host-trace", i[0], "--device-trace", i[1], "-o", o[0], "--report", o[1],
        "--html", o[2]]),
    "link": Command(("host", "kineto"), ("l.json",), lambda i, o: [
        "link", "--host-trace", i[0], "--device-trace", i[1], "-o", o[0]]),
    "simulate": Command(("r0", "r1"), ("t.json", "w/p.0.et", "w/p.1.et"), lambda i, o: [
        "simulate", *i, "--timeline", o[0], "--write-et", o[1][: -len(".0.et")]]),
    "report": Command(("r0", "r1"), ("p.html",), lambda i, o: ["report", *i, "-o", o[0]]),
    "timeline": Command(("r0",), ("t.json",), lambda i, o: ["timeline", i[0], "-o", o[0]]),
    "jsonize": Command(("r0",), ("j.json",), lambda i, o: ["jsonize", i[0], "-o", o[0]]),
    "graph": Command(("r0",), ("g.dot",), lambda i, o: ["graph", i[0], "-o", o[0]]),
    "astra-sim": Command(("r0", "r1"), ("j/job.0.et", "j/job.1.et", "j/network.yml", "j/run.sh",
                                        "j/system.json", "j/memory.json"),
                         lambda i, o: ["astra-sim", *i, "-o", o[0][: -len(".0.et")]]),
}
WAYS = ("same path", "symlink", "hard link", "other spelling")


def _collide(d: Path, inputs: dict[str, Path], name: str, output: Path, way: str) -> Path:
    """Make ``output`` be input ``name``; returns the path to pass as that input."""
    source = inputs[name]
    output.parent.mkdir(parents=True, exist_ok=True)
    if way == "same path":
        shutil.copy(source, output)
        return output
    if way == "symlink":
        output.symlink_to(source)
    elif way == "hard link":
        os.link(source, output)
    else:
        (d / "x").mkdir(exist_ok=True)
        shutil.copy(source, output)
        return Path(os.path.join(output.parent, "..", output.parent.name, ".", output.name)) \
            if output.parent != d else d / "x" / ".." / output.name
    return source


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data(), way=st.sampled_from(WAYS))
def test_no_output_is_an_input(command: str, data: st.DataObject, way: str) -> None:
    spec = COMMANDS[command]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        inputs = make_inputs(d / "in")
        victim = data.draw(st.sampled_from(spec.inputs), label="input")
        slot = data.draw(st.sampled_from(range(len(spec.outputs))), label="output")
        outputs = [d / o for o in spec.outputs]
        for out in outputs:
            out.parent.mkdir(parents=True, exist_ok=True)
        given_input = _collide(d, inputs, victim, outputs[slot], way)
        paths = [str(given_input) if n == victim else str(inputs[n]) for n in spec.inputs]
        before = snapshot(d)
        rc, printed, err = run_quietly(*spec.argv(paths, [str(o) for o in outputs]))
        assert rc == 2, (command, way, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "input" in err, err
        assert printed == ""
        assert snapshot(d) == before  # nothing written, the input untouched


@pytest.mark.parametrize("ranks, collide", [("1,11", True), ("1,2,3", False), ("0-1,11", True)])
def test_one_ranks_output_is_another_ranks_input(tmp_path: Path, ranks: str,
                                                 collide: bool) -> None:
    """``--ranks 1,11 --device-trace 'k{rank}.json' -o 'k{rank}1.json'`` would
    write rank 1's output over rank 11's input: refused before any rank runs."""
    from builders import kineto_doc, write_json

    for r in (0, 1, 2, 3, 11):
        write_json(tmp_path / f"k{r}.json", kineto_doc())
    before = snapshot(tmp_path)
    rc, _out, err = run_quietly("convert", "--ranks", ranks, "--jobs", "1", "--device-trace",
                                str(tmp_path / "k{rank}.json"), "-o",
                                str(tmp_path / "k{rank}1.json"), "-q")
    if collide:
        assert rc == 2 and "input" in err and len(err.strip().splitlines()) == 1, err
        assert snapshot(tmp_path) == before
    else:
        assert rc == 0, err


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(ranks=st.sets(st.integers(0, 40), min_size=1, max_size=6))
def test_rank_templates_checked_as_a_whole(ranks: set[int]) -> None:
    """Refused exactly when some rank's output name is another rank's input."""
    from builders import kineto_doc, write_json

    collide = any(f"{r}1" == str(q) for r in ranks for q in ranks)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for r in ranks:
            write_json(d / f"k{r}.json", kineto_doc())
        before = snapshot(d)
        rc, _out, err = run_quietly("convert", "--ranks", ",".join(map(str, sorted(ranks))),
                                    "--jobs", "1", "--device-trace", str(d / "k{rank}.json"),
                                    "-o", str(d / "k{rank}1.json"), "-q")
        if collide:
            assert rc == 2 and "input" in err, err
            assert snapshot(d) == before
        else:
            assert rc == 0, err
            assert {f"k{r}1.json" for r in ranks} <= set(snapshot(d))


def test_two_outputs_of_one_command_are_refused(tmp_path: Path) -> None:
    i = make_inputs(tmp_path)
    os.symlink(tmp_path / "o.et", tmp_path / "r.json")
    rc, _out, err = run_quietly("convert", "--host-trace", i["host"], "-o", tmp_path / "o.et",
                                "--report", tmp_path / "r.json")
    assert rc == 2 and "another output" in err, err
    assert not (tmp_path / "o.et").exists()

"""Issue 44, cause 1: an input can never become an output, by construction.

Two halves:

* The guard itself (``files`` notes every input it opens inside
  ``inputs_guarded``; every way out of ``atomic`` refuses such a file),
  shown to hold even when a command's own checks are switched off.
* Every command's parser is walked: each output option it has is tried
  against each input the command reads (same path, symbolic link, hard
  link; for a prefix, ``<prefix>.<rank>.et`` is the input). A new output
  option that this table does not cover fails the walk.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_setup import make_inputs, run_quietly, snapshot

from pt2chakra.atomic import StagedOutputs, atomic_output, check_outputs, write_atomic
from pt2chakra.errors import InputError
from pt2chakra.files import inputs_guarded, opened_input, read_input

WORKLOAD = "MICRO\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 100 5\n"

# -- the guard ---------------------------------------------------------------------------


def _input(tmp_path: Path) -> Path:
    victim = tmp_path / "in.et"
    victim.write_bytes(b"recorded trace")
    return victim


def test_outside_a_guard_nothing_is_noted(tmp_path: Path) -> None:
    """A library user may read a file and deliberately write it later."""
    victim = _input(tmp_path)
    read_input(victim)
    assert opened_input(victim) is None
    write_atomic(victim, b"new")
    assert victim.read_bytes() == b"new"


def test_every_way_out_refuses_an_opened_input(tmp_path: Path) -> None:
    victim = _input(tmp_path)
    with inputs_guarded():
        read_input(victim)
        with pytest.raises(InputError, match="refusing to overwrite an input"):
            write_atomic(victim, b"x")
        with pytest.raises(InputError, match="refusing to overwrite an input"):
            check_outputs([], [victim])
        with StagedOutputs() as staged, pytest.raises(InputError):
            staged.stage(victim)
    assert victim.read_bytes() == b"recorded trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.et"]


def test_an_input_opened_after_staging_is_refused_at_the_commit(tmp_path: Path) -> None:
    """The plan was made before the input was read: the commit still refuses,
    and commits none of the files (all are checked first)."""
    victim, other = _input(tmp_path), tmp_path / "other.json"
    with inputs_guarded():
        with pytest.raises(InputError), StagedOutputs() as staged:
            write_atomic(staged.stage(other), b"o")
            write_atomic(staged.stage(victim), b"x")
            read_input(victim)
            staged.commit()
        late = tmp_path / "late.et"
        late.write_bytes(b"old")
        with pytest.raises(InputError), atomic_output(late) as out:
            out.write(b"new")
            read_input(late)
    assert late.read_bytes() == b"old"
    assert victim.read_bytes() == b"recorded trace"
    assert not other.exists()


WAYS = ("same path", "symlink", "hard link", "other spelling")


def _alias(victim: Path, folder: Path, way: str) -> Path:
    """Another name of ``victim`` (``folder`` exists)."""
    if way == "same path":
        return victim
    if way == "other spelling":
        return folder / ".." / folder.name / "." / victim.name if victim.parent == folder \
            else victim
    alias = folder / f"alias-{way.replace(' ', '-')}"
    (alias.symlink_to if way == "symlink" else lambda v: os.link(v, alias))(victim)
    return alias


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(way=st.sampled_from(WAYS), staged=st.booleans())
def test_any_name_of_an_opened_input_is_refused(tmp_path_factory: pytest.TempPathFactory,
                                                way: str, staged: bool) -> None:
    folder = tmp_path_factory.mktemp("names")
    victim = _input(folder)
    alias = _alias(victim, folder, way)
    with inputs_guarded(), pytest.raises(InputError):
        read_input(alias if way != "same path" else victim)
        target = victim if way != "same path" else alias
        if staged:
            with StagedOutputs() as outputs:
                outputs.stage(target)
        else:
            write_atomic(target, b"x")
    assert victim.read_bytes() == b"recorded trace"


def test_a_command_without_its_own_check_still_cannot_replace_its_inputs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``astra-sim --world-size`` wrote the job from scratch copies, so its
    check never saw the user's files (issue 44's first case). With the
    command's own check switched off, the guard alone refuses."""
    import pt2chakra.astra.job as job

    monkeypatch.setattr(job, "check_job_outputs", lambda inputs, prefix: os.path.split(
        os.fspath(prefix)))
    inputs = make_inputs(tmp_path / "in")
    for r in (0, 1):
        shutil.copy(inputs[f"r{r}"], tmp_path / f"x.{r}.et")
    before = snapshot(tmp_path)
    rc, printed, err = run_quietly("astra-sim", tmp_path / "x.0.et", tmp_path / "x.1.et",
                                   "--world-size", "4", "-o", tmp_path / "x")
    assert rc == 2, err
    assert "refusing to overwrite an input" in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path) == before


# -- every command's output options, walked from the parser ------------------------------

# Options that name a file or prefix a command writes: found by destination,
# and by what their help or metavar says (so a new option is found too).
OUTPUT_DESTS = frozenset({"output", "report", "html", "timeline", "plot", "write_et",
                          "out_dir"})
_OUTPUT_WORDS = ("output", "write", "the page to write", "folder for")


def _is_output(action: argparse.Action) -> bool:
    if not action.option_strings or action.nargs == 0 or action.choices is not None:
        return False  # a flag, or a choice among names: not a path
    text = (action.help or "").lower()
    metavar = str(action.metavar or "")
    return (action.dest in OUTPUT_DESTS or text.startswith(_OUTPUT_WORDS)
            or metavar.startswith(("OUT", "DIR/", "PREFIX")))


def output_options() -> set[tuple[str, str]]:
    """(command, option dest) for every output option of every command."""
    from pt2chakra.cli import build_parser

    parser = build_parser("*")
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {(name, action.dest) for name, sub in commands.choices.items()
            for action in sub._actions if _is_output(action)}


Argv = Callable[[list[str], str], list[str]]


@dataclass(frozen=True)
class Case:
    """One output option of one command: the inputs it reads (names in
    ``_inputs``), its argv given (inputs, output), and whether the output is
    a prefix (its files ``<prefix>.<rank>.et``)."""

    command: str
    dest: str
    inputs: tuple[str, ...]
    argv: Argv
    prefix: bool = False
    suffix: str = ".out"  # of a single output (some commands go by it)


CASES: dict[str, Case] = {c.command + ":" + c.dest + (":" + n if n else ""): c for n, c in [
    ("", Case("convert", "output", ("host", "kineto"), lambda i, o: [
        "convert", "--host-trace", i[0], "--device-trace", i[1], "-o", o])),
    ("", Case("convert", "report", ("host", "kineto"), lambda i, o: [
        "convert", "--host-trace", i[0], "--device-trace", i[1], "-o", "OUT/c.et",
        "--report", o])),
    ("", Case("convert", "html", ("host", "kineto"), lambda i, o: [
        "convert", "--host-trace", i[0], "--device-trace", i[1], "-o", "OUT/c.et", "--html", o], suffix=".html")),
    ("", Case("link", "output", ("host", "kineto"), lambda i, o: [
        "link", "--host-trace", i[0], "--device-trace", i[1], "-o", o])),
    ("", Case("simulate", "timeline", ("r0", "r1"), lambda i, o: [
        "simulate", *i, "--timeline", o])),
    ("", Case("simulate", "plot", ("r0", "r1"), lambda i, o: ["simulate", *i, "--plot", o],
                     suffix=".png")),
    ("", Case("simulate", "write_et", ("r0", "r1"), lambda i, o: [
        "simulate", *i, "--write-et", o], prefix=True)),
    ("", Case("extrapolate", "output", ("r0", "r1"), lambda i, o: [
        "extrapolate", *i, "--world-size", "4", "-o", o], prefix=True)),
    ("", Case("jsonize", "output", ("r0",), lambda i, o: ["jsonize", i[0], "-o", o])),
    ("", Case("from-json", "output", ("json",), lambda i, o: ["from-json", i[0], "-o", o])),
    ("astra", Case("from-json", "output", ("json",), lambda i, o: [
        "from-json", i[0], "--consumer", "astra-sim", "--rank", "0", "-o", o], prefix=True)),
    ("", Case("timeline", "output", ("r0", "r1"), lambda i, o: ["timeline", *i, "-o", o])),
    ("", Case("graph", "output", ("r0",), lambda i, o: ["graph", i[0], "-o", o],
                  suffix=".dot")),
    ("", Case("from-text", "output", ("txt",), lambda i, o: [
        "from-text", i[0], "--npus", "2", "-o", o], prefix=True)),
    ("", Case("astra-sim", "output", ("r0", "r1"), lambda i, o: [
        "astra-sim", *i, "-o", o], prefix=True)),
    ("world", Case("astra-sim", "output", ("r0", "r1"), lambda i, o: [
        "astra-sim", *i, "--world-size", "4", "-o", o], prefix=True)),
    ("", Case("report", "output", ("r0", "r1"), lambda i, o: ["report", *i, "-o", o],
                   suffix=".html")),
]}
# Output options of commands that read no file: nothing they could overwrite.
NO_INPUTS = {("microbench", "output"), ("collect", "out_dir")}
# Found by the words of their help, yet they read: ``--check DIR/job`` runs a
# job written before (it writes nothing).
READ_ONLY = {("astra-sim", "check")}


def test_every_output_option_of_every_command_is_covered() -> None:
    """A new command, or a new output option, must join CASES (or NO_INPUTS)."""
    covered = {(c.command, c.dest) for c in CASES.values()} | NO_INPUTS
    assert output_options() - READ_ONLY == covered


def _inputs(folder: Path) -> dict[str, Path]:
    found = make_inputs(folder)
    rc, _, err = run_quietly("jsonize", found["r0"], "-o", folder / "r0.json")
    assert rc == 0, err
    found["json"] = folder / "r0.json"
    found["txt"] = folder / "w.txt"
    found["txt"].write_text(WORKLOAD)
    return found


def _place(case: Case, victim: str, way: str, d: Path,
           made: dict[str, Path]) -> tuple[list[str], str]:
    """Lay the files so that ``case``'s output is input ``victim`` by
    ``way``; returns (inputs to give, output to give)."""
    given = {name: str(made[name]) for name in case.inputs}
    if case.prefix:  # <prefix>.<rank>.et is the input
        rank = case.inputs.index(victim)
        target = d / f"p.{rank}.et"
        output = str(d / "p")
    else:
        target = d / f"o{case.suffix}"
        output = str(target)
    if way == "symlink":
        target.symlink_to(made[victim])
    elif way == "hard link":
        os.link(made[victim], target)
    else:
        shutil.copy(made[victim], target)
        given[victim] = str(target)
    if way == "other spelling":
        output = os.path.join(str(d), "..", d.name, ".", os.path.basename(output))
    return [given[n] for n in case.inputs], output


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("key", sorted(CASES))
def test_no_output_option_replaces_an_input(tmp_path: Path, key: str, way: str) -> None:
    case = CASES[key]
    made = _inputs(tmp_path / "in")
    for victim in case.inputs:
        d = tmp_path / f"{victim}-{way.replace(' ', '-')}"
        d.mkdir()
        (d / "OUT").mkdir()
        given, output = _place(case, victim, way, d, made)
        argv = [a.replace("OUT/", str(d / "OUT") + "/") for a in case.argv(given, output)]
        before, inputs_before = snapshot(d), snapshot(tmp_path / "in")
        rc, printed, err = run_quietly(*argv)
        assert rc == 2, (key, victim, way, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "input" in err, err
        assert snapshot(d) == before and snapshot(tmp_path / "in") == inputs_before

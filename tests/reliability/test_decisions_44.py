"""Issue 44's debatable cases, decided (docs/ERRORS.md, "Decided (issue
44)"): a ``--real-step`` the fit cannot reach is a warning line; numbers on
the command line are ASCII decimal; an output prefix must name files; the
``--profiler-overhead`` examples run on the traces they name."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from helpers import ROOT, SAMPLE
from rel_setup import make_inputs, run_quietly, snapshot

from pt2chakra.cli import build_parser


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pt2chakra import convert

    out = tmp_path_factory.mktemp("gpt") / "gpt.et"
    convert(f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz", out)
    return out


def test_an_unreachable_real_step_is_a_warning(gpt: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    rc, out, err = run_quietly("simulate", gpt, "--real-step", "1e-300", "--json")
    assert rc == 0, err
    assert json.loads(out)["profiler_overhead"]["reachable"] is False
    missed = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(missed) == 1 and "--real-step" in missed[0] and "missed" in missed[0], missed
    assert "\n" not in missed[0]
    caplog.clear()
    rc, _out, err = run_quietly("simulate", gpt, "--real-step", "40", "-q")
    assert rc == 0 and not caplog.records, err  # reachable: no warning


@pytest.mark.parametrize("argv", [
    ["simulate", "{gpt}", "--real-step", "\u0661\u0662"],  # Arabic-Indic 12
    ["simulate", "{gpt}", "--real-step", "0x10"],
    ["simulate", "{gpt}", "--compute-scale", "\uff12"],  # fullwidth 2
    ["simulate", "{gpt}", "--comm-streams", "1_0"],
    ["extrapolate", "{gpt}", "--world-size", "0x10", "-o", "{d}/x"],
    ["extrapolate", "{gpt}", "--world-size", "\u0664", "-o", "{d}/x"],
    ["microbench", "--size", "0b101", "--npus", "2", "-o", "{d}/m"],
    ["graph", "{gpt}", "-o", "{d}/g.dot", "--ids", "0:\u0664"],
    ["convert", "--device-trace", "k.json", "-o", "{d}/o.et", "--max-input-size", "\u0664G"],
])
def test_numbers_are_ascii_decimal(gpt: Path, tmp_path: Path, argv: list[str]) -> None:
    words = [w.format(gpt=gpt, d=tmp_path) for w in argv]
    if "--max-input-size" in words:  # a top-level option: before the command
        at = words.index("--max-input-size")
        words = words[at:at + 2] + words[:at] + words[at + 2:]
    before = snapshot(tmp_path)
    rc, out, err = run_quietly(*words)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1, (words, err)
    assert "Traceback" not in err and snapshot(tmp_path) == before


@pytest.mark.parametrize("text", ["12", "+12.5", "1e1", " 7 ", ".5"])
def test_ascii_numbers_are_read(gpt: Path, text: str) -> None:
    rc, _out, err = run_quietly("simulate", gpt, "--compute-scale", text, "-q")
    assert rc == 0, err


@pytest.mark.parametrize("prefix", ["out/", "out/.", "out/.."])
def test_a_prefix_must_name_files(tmp_path: Path, prefix: str) -> None:
    i = make_inputs(tmp_path / "in")
    out = f"{tmp_path}/{prefix}"  # a str: Path would drop the trailing slash
    (tmp_path / "out").mkdir()
    ranks = [i["r0"], i["r1"]]
    for argv in (["extrapolate", *ranks, "--world-size", "4", "-o", out],
                 ["astra-sim", *ranks, "-o", out],
                 ["simulate", *ranks, "--write-et", out],
                 ["microbench", "--size", "64", "--npus", "2", "-o", out],
                 ["from-text", i["host"], "--npus", "2", "-o", out]):
        before = snapshot(tmp_path)
        rc, _out, err = run_quietly(*argv)
        assert rc == 2 and len(err.splitlines()) == 1 and "DIR/PREFIX" in err, (argv, err)
        assert snapshot(tmp_path) == before, argv


def _help_of(option: str) -> str:
    parser = build_parser("simulate")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    simulate = sub.choices["simulate"]
    return next(a.help or "" for a in simulate._actions if option in a.option_strings)


def test_the_profiler_overhead_examples_run_on_the_sample(gpt: Path) -> None:
    """The figure ``simulate --help`` and docs/PROFILER_OVERHEAD.md give for
    the bundled sample is taken; a GPU host's (32.95us/op, larger than the
    sample's ops themselves) is refused in one line that says why."""
    example = re.search(r"e\.g\. (\S+us/op)", _help_of("--profiler-overhead"))
    doc = (ROOT / "docs" / "PROFILER_OVERHEAD.md").read_text()
    documented = re.search(r"out/gpt\.et --profiler-overhead (\S+)", doc)
    assert example and documented
    for figure in {example.group(1), documented.group(1)}:
        rc, _out, err = run_quietly("simulate", gpt, "--profiler-overhead", figure, "-q")
        assert rc == 0, (figure, err)
    rc, _out, err = run_quietly("simulate", gpt, "--profiler-overhead", "32.95us/op")
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "--profiler-overhead" in err and "larger than the recorded ops" in err, err

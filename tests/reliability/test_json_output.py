"""Issue 44, item 2: every command's ``--json`` goes through one encoder
(``cli/json_out.py``) that cannot fail, and each such command, found from the
parser itself, prints JSON and exits 0 on the bundled samples. A command
that gains ``--json`` fails ``test_every_json_command_is_run`` until its
invocation is added to ``RUNS``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest
from helpers import SAMPLE, convert_gloo_pair
from rel_setup import run_quietly

from pt2chakra.cli import build_parser
from pt2chakra.cli.json_out import json_text


def json_commands() -> set[str]:
    """The subcommands whose parser has a ``--json`` option."""
    parser = build_parser("*")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, p in sub.choices.items()
            if any("--json" in a.option_strings for a in p._actions)}


class Inputs(NamedTuple):
    gpt: Path  # the bundled one-rank sample, converted
    ranks: list[Path]  # the bundled gloo DDP pair, converted
    copies: list[Path]  # the same pair under other names (a second "run" for diff)
    job: list[Path]  # the pair as an ASTRA-sim job (pt2chakra astra-sim)
    work: Path  # a folder for outputs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    from pt2chakra import convert

    d = tmp_path_factory.mktemp("json")
    gpt = d / "gpt.et"
    convert(f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz", gpt)
    ranks = convert_gloo_pair(d)
    (d / "b").mkdir()
    copies = [Path(shutil.copy(p, d / "b" / p.name)) for p in ranks]
    rc, _out, err = run_quietly("astra-sim", *ranks, "-o", d / "job" / "gloo", "-q")
    assert rc == 0, err
    return Inputs(gpt, ranks, copies, [d / "job" / f"gloo.{r}.et" for r in (0, 1)], d)


def _fake_profiler_cost(calls: int, repeats: int) -> Any:
    """``microbench --profiler-overhead``'s measurement, made up (the real one
    times torch for ~15 s): the command's JSON is what is under test."""
    from pt2chakra.collect.profiler_cost import STEP_KIND, KindCost, ProfilerCost

    return ProfilerCost([KindCost("view", 1.0, 12.5, 1.0), KindCost(STEP_KIND, 900.0, 1800.0, 50.0)])


# Every command with --json, and how to run each of its JSON paths on the samples.
Run = Callable[[Inputs], list[object]]
RUNS: dict[str, list[Run]] = {
    "simulate": [
        lambda i: ["simulate", *i.ranks],
        lambda i: ["simulate", i.gpt, "--compute-scale", "0.5", "1"],
        lambda i: ["simulate", *i.ranks, "--world-size", "3"],
        lambda i: ["simulate", "--consumer", "astra-sim", *i.job],
    ],
    "extrapolate": [lambda i: ["extrapolate", *i.ranks, "--world-size", "4", "-o",
                               i.work / "x" / "job"]],
    "inspect": [lambda i: ["inspect", i.gpt]],
    "validate": [lambda i: ["validate", *i.ranks]],
    "diff": [lambda i: ["diff", *i.ranks, "vs", *i.copies]],
    "microbench": [lambda i: ["microbench", "--profiler-overhead", "--calls", "2",
                              "--repeats", "1"]],
}


def test_every_json_command_is_run() -> None:
    assert json_commands() == set(RUNS), "add the new --json command's invocation to RUNS"


CASES = [(name, k) for name, runs in RUNS.items() for k in range(len(runs))]


@pytest.mark.parametrize(("command", "index"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_json_is_json_and_exit_0(inputs: Inputs, command: str, index: int,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if command == "microbench":
        pytest.importorskip("torch")
        monkeypatch.setattr("pt2chakra.collect.profiler_cost.measure", _fake_profiler_cost)
    (inputs.work / "x").mkdir(exist_ok=True)
    argv = RUNS[command][index](inputs)
    rc, out, err = run_quietly(*argv, "--json")
    assert rc == 0, (argv, err)
    assert "Traceback" not in err
    doc = json.loads(out)
    assert isinstance(doc, dict) and doc, out[:200]


def test_extrapolate_json_has_string_keys(inputs: Inputs) -> None:
    """The failure of issue 44: ``nodes_per_rank`` is keyed by rank number."""
    rc, out, err = run_quietly("extrapolate", *inputs.ranks, "--world-size", "3", "-o",
                               inputs.work / "k", "--json")
    assert rc == 0, err
    assert set(json.loads(out)["nodes_per_rank"]) == {"0", "1"}


class _Pair(NamedTuple):
    a: int
    b: float


@dataclasses.dataclass
class _Dataclass:
    keyed: dict[Any, Any]


class _Struct(msgspec.Struct):
    by_rank: dict[int, float]
    pair: _Pair
    inner: _Dataclass


def test_the_encoder_cannot_fail() -> None:
    """Structs, dataclasses, named tuples, keys of any kind, non-finite
    numbers (null), sets, paths and objects of no JSON kind."""
    doc = {"s": _Struct({0: math.nan, 1: math.inf}, _Pair(1, -math.inf),
                        _Dataclass({(1, 2): 3, None: 4, True: {5}, 2.5: Path("p/q")})),
           7: object.__name__, "obj": object()}
    back = json.loads(json_text(doc))
    assert back["s"]["by_rank"] == {"0": None, "1": None}
    assert back["s"]["pair"] == [1, None]
    assert back["s"]["inner"]["keyed"] == {"(1, 2)": 3, "null": 4, "true": [5], "2.5": "p/q"}
    assert back["7"] == "object" and back["obj"].startswith("<object")
    assert json_text([1]) == "[\n  1\n]\n"

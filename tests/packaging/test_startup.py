"""Start-up stays cheap: a bare ``import pt2chakra`` and a command's
``--help`` load only the modules they need (each a share of every command's
cost; the issue-29 target is 0.1 CPU-s). Checked in a fresh interpreter,
where ``sys.modules`` says what was imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from pt2chakra.cli import COMMANDS, CommandParsers, build_parser, command_in

# What may be loaded: the facade, its lazy-name helper and version, the command line's
# frame and options with the integer ranges they check (chakra/wire.py: constants,
# no imports) and the one error type with the number ranges and reader they share
# with files (errors.py: math and re), and the command's own module with
# the choices it lists (the ASTRA-sim modes, not the export).
BARE = {"pt2chakra", "pt2chakra.lazy", "pt2chakra.version"}
HELP = BARE | {"pt2chakra.cli", "pt2chakra.cli.options", "pt2chakra.errors", "pt2chakra.chakra",
               "pt2chakra.chakra.wire"}
CONVERT_HELP = HELP | {"pt2chakra.cli.convert", "pt2chakra.astra", "pt2chakra.astra.choices"}
# What a plain convert (no --consumer, --report, --simulate, --html, no tar input)
# must not load: the ASTRA-sim export and what it brings (its serial chain,
# collective model, set checks), the replay, the report page, and the standard
# or third-party modules only those options need (orjson writes reports and
# linked JSON; secrets cost ~3 ms for a temp name's 8 hex digits; tarfile reads
# .tar.gz inputs).
PLAIN_CONVERT_NEVER = {"pt2chakra.astra.export", "pt2chakra.astra.serial_chain",
                       "pt2chakra.astra.collective_time", "pt2chakra.rules.checks",
                       "pt2chakra.simulation", "pt2chakra.report", "orjson", "secrets",
                       "tarfile"}
SAMPLE = ROOT / "samples" / "gpt_tiny_cpu" / "gpt_tiny_cpu"

_LOADED = """
import json, sys
{run}
print(json.dumps(sorted(sys.modules)))
"""
_CLI = """
import contextlib, io
from pt2chakra.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main({argv!r})
"""


def _loaded(run: str, everything: bool = False) -> set[str]:
    """The pt2chakra modules ``run`` loads (``everything``: all modules)."""
    out = subprocess.run([sys.executable, "-c", _LOADED.format(run=run)], check=True,
                         capture_output=True, text=True).stdout
    return {m for m in json.loads(out) if everything or m.split(".")[0] == "pt2chakra"}


def test_bare_import_loads_only_the_facade() -> None:
    assert _loaded("import pt2chakra") <= BARE


@pytest.mark.parametrize(("argv", "allowed"), [
    (["--help"], HELP),
    (["--version"], HELP),
    (["convert", "--help"], CONVERT_HELP),
])
def test_help_loads_only_its_command(argv: list[str], allowed: set[str]) -> None:
    loaded = _loaded(_CLI.format(argv=argv))
    assert "pt2chakra.cli" in loaded  # the command line did run
    assert loaded <= allowed, sorted(loaded - allowed)


def test_every_command_has_its_parser_in_its_module() -> None:
    """``COMMANDS`` names each command's module right: that module registers
    exactly its commands, each with the function that runs it."""
    for name in COMMANDS:
        sub = next(a for a in build_parser(name)._actions
                   if isinstance(a, CommandParsers))
        parser = sub.choices[name]
        assert parser.get_default("func") is not None, name
    full = build_parser("*")
    sub = next(a for a in full._actions if isinstance(a, CommandParsers))
    assert list(sub.choices) == list(COMMANDS)
    assert all(p.get_default("func") is not None for p in sub.choices.values())


@pytest.mark.parametrize(("argv", "command"), [
    (["convert", "-o", "x.et"], "convert"),
    (["--max-input-size", "1G", "inspect", "a.et"], "inspect"),
    (["--max-input-size=1G", "link"], "link"),
    (["--help"], None),
    (["nope", "convert"], None),
])
def test_the_command_is_found_past_the_top_level_options(argv: list[str],
                                                         command: str | None) -> None:
    assert command_in(argv) == command


@pytest.mark.parametrize("device", [False, True])
def test_plain_convert_loads_no_option_it_was_not_given(tmp_path: Path, device: bool) -> None:
    argv = ["convert", "-q", "--host-trace", f"{SAMPLE}.host_et.json.gz",
            "-o", str(tmp_path / "out.et")]
    if device:
        argv[2:2] = ["--device-trace", f"{SAMPLE}.kineto.json.gz"]
    loaded = _loaded(_CLI.format(argv=argv), everything=True)
    assert "pt2chakra.conversion.api" in loaded  # it did convert
    assert (tmp_path / "out.et").stat().st_size > 0
    assert not loaded & PLAIN_CONVERT_NEVER, sorted(loaded & PLAIN_CONVERT_NEVER)

"""Start-up stays cheap: a bare ``import pt2chakra`` and a command's
``--help`` load only the modules they need (each a share of every command's
cost; the issue-29 target is 0.1 CPU-s). Checked in a fresh interpreter,
where ``sys.modules`` says what was imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pt2chakra.cli import COMMANDS, CommandParsers, build_parser, command_in

# What may be loaded: the facade, its lazy-name helper and version, the command line's
# frame and options with the integer ranges they check (chakra/wire.py: constants,
# no imports), the one error type, and the command's own module with
# the choices it lists (the ASTRA-sim modes, not the export).
BARE = {"pt2chakra", "pt2chakra.lazy", "pt2chakra.version"}
HELP = BARE | {"pt2chakra.cli", "pt2chakra.cli.options", "pt2chakra.errors", "pt2chakra.chakra",
               "pt2chakra.chakra.wire"}
CONVERT_HELP = HELP | {"pt2chakra.cli.convert", "pt2chakra.astra", "pt2chakra.astra.choices"}

_LOADED = """
import json, sys
{run}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "pt2chakra")))
"""
_CLI = """
import contextlib, io
from pt2chakra.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main({argv!r})
"""


def _loaded(run: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _LOADED.format(run=run)], check=True,
                         capture_output=True, text=True).stdout
    return set(json.loads(out))


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

"""The README is a newcomer's first page: it stays short, every page of docs/
is reachable from it, every relative link (README and docs) resolves, every
command it names exists, and its examples run as shown on the bundled samples.
Every flag the docs (and the package's docstrings) give a command is one its
parser shows, and the docs describe the tool as it is: the history of its
development (issue numbers, rounds, the commits compared) is CHANGELOG.md's.

The examples are the README's ``sh`` blocks, run in order in one scratch
folder (``samples`` linked in, outputs under ``out/``), with ``pt2chakra``
this interpreter's ``python -m pt2chakra``. ``make`` lines (the two
commands themselves, which install) are left out: CI runs ``make test``, and
``make demo`` runs the same commands on the same sample as these examples.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from pt2chakra.cli import build_parser, main

README = ROOT / "README.md"
DOCS = ROOT / "docs"
# About 250 lines is what a newcomer reads; the rest lives in docs/.
README_MAX_LINES = 300
# [text](target): the target up to a space or the closing parenthesis.
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(?P<info>[\w-]*)\n(?P<body>.*?)^```", re.S | re.M)
# `pt2chakra <command>` at the start of a line of a code block.
COMMAND = re.compile(r"^\s*pt2chakra\s+([a-z][\w-]*)", re.M)
EXTERNAL = ("http://", "https://", "mailto:")
# The shell the examples need (pipefail, functions).
SHELL = "/bin/bash"
# One example block runs in seconds; the whole README in well under this.
EXAMPLES_TIMEOUT_S = 900


# What names the work's history rather than the tool: an issue or pull
# request by number, a development round, the session or a commit of ours
# (a hex word with a digit and a letter, as `git log --oneline` prints them).
HISTORY = re.compile(r"\b(?:issues?|PR|pull requests?)\s*#?\d+|\(#\d+\)|\brounds?\s+\d+"
                     r"|\bthis session\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b",
                     re.IGNORECASE)
# Commits that are not ours: the ASTRA-sim commit the project builds and pins.
NOT_OUR_HISTORY = {"518bd513"}
# Flags of other programs that the docs name on their own: pytest's.
OTHER_PROGRAMS_FLAGS = {"--durations"}
# A command-line flag: two dashes, a letter, letters, digits and dashes.
FLAG = re.compile(r"(?<![\w-])--[a-zA-Z][\w-]*")
# Inline code in prose (one or two backticks), and in docstrings (two).
INLINE = re.compile(r"(`+)(?P<code>[^`\n]+?)\1")
# Where one command line ends in a line or span: a comment, a table cell or
# a shell separator, an aside in parentheses, the next item of a list.
COMMAND_END = re.compile(r"\s#|\||;|&&|\s\(|,\s")


def pages() -> list[Path]:
    return [README, ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def relative_links(page: Path) -> list[str]:
    """The page's links that point inside the repository (code blocks left out)."""
    prose = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(prose) if not t.startswith(EXTERNAL)]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    prose = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#+\s+(.*)$", prose, re.M)}


def resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, fragment = target.partition("#")
    return ((page.parent / path).resolve() if path else page), fragment


def test_the_readme_stays_a_short_first_page() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in [*pages(), ROOT / "CHANGELOG.md"]:
        for target in relative_links(page):
            path, fragment = resolve(page, target)
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and path.suffix == ".md" and fragment not in anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    seen, todo = {README.resolve()}, [README]
    while todo:
        page = todo.pop()
        for target in relative_links(page):
            path, _ = resolve(page, target)
            if path.suffix == ".md" and path.is_file() and path not in seen:
                seen.add(path)
                todo.append(path)
    orphans = [p.name for p in DOCS.glob("*.md") if p.resolve() not in seen]
    assert not orphans, f"docs pages no link from the README leads to: {orphans}"


def test_the_link_checker_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Top\n[a](p.md#top) [b](missing.md) [c](p.md#nowhere) [d](https://x.org)\n"
                    "```\n[e](in-code.md)\n```\n")
    assert relative_links(page) == ["p.md#top", "missing.md", "p.md#nowhere"]
    assert resolve(page, "p.md#top") == (page.resolve(), "top")
    assert anchors(page) == {"top"}
    assert slug("Results on the real traces (`../shared/traces`)") == \
        "results-on-the-real-traces-sharedtraces"


def readme_commands() -> set[str]:
    return {m for block in FENCE.finditer(README.read_text())
            for m in COMMAND.findall(block["body"])}


def cli_commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_every_command_is_shown_and_every_shown_command_exists() -> None:
    shown, known = readme_commands(), cli_commands()
    assert not shown - known, f"the README shows commands that do not exist: {sorted(shown - known)}"
    assert not known - shown, f"commands with no example in the README: {sorted(known - shown)}"


@pytest.mark.parametrize("command", sorted(readme_commands()))
def test_each_shown_command_has_help(command: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert f"pt2chakra {command}" in out.getvalue()


def code_spans(text: str) -> list[str]:
    """Each line of a page's code blocks (continued lines joined) and each
    inline code span of its prose (a table's escaped ``\\|`` is text)."""
    lines = [line for block in FENCE.finditer(text)
             for line in block["body"].replace("\\\n", " ").splitlines()]
    return lines + [m["code"].replace("\\|", "/") for m in INLINE.finditer(FENCE.sub("", text))]


def named_flags(span: str, commands: set[str]) -> list[tuple[str, str]]:
    """(command, flag) for each flag a command line in ``span`` gives: after
    ``pt2chakra [top-level options] COMMAND`` anywhere, or a COMMAND that
    starts the span or an item of a list in it (``convert --consumer
    astra-sim`` in prose), up to where
    that command line ends (``COMMAND_END``)."""
    names = "|".join(sorted(map(re.escape, commands), key=len, reverse=True))
    start = re.compile(rf"(?:\bpt2chakra(?:\s+(?:-\S+|\d\S*))*\s+|^\s*|,\s+)"
                       rf"(?P<command>{names})(?![\w-])")
    found = []
    for match in start.finditer(span):
        line = span[match.end():]
        end = COMMAND_END.search(line)
        found += [(match["command"], flag) for flag in FLAG.findall(line[:end.start() if end else None])]
    return found


def shown_flags(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """The flags each command's ``--help`` shows (a hidden old spelling is
    still read but is no flag to document), with the top-level ones."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    top = set(parser._option_string_actions)
    return {name: top | {flag for action in command._actions if action.help != argparse.SUPPRESS
                         for flag in action.option_strings}
            for name, command in sub.choices.items()}


def documented_flags() -> list[tuple[str, str, str]]:
    """(where, command, flag) for every command line of the docs' pages and
    of the package's docstrings and help texts."""
    commands = cli_commands()
    sources = [(page, code_spans(page.read_text())) for page in pages()]
    for module in sorted((ROOT / "src" / "pt2chakra").rglob("*.py")):
        text = module.read_text()  # its docstrings' code and its help texts' examples
        sources.append((module, [m["code"] for m in INLINE.finditer(text)]
                        + [line for line in text.splitlines() if "pt2chakra " in line]))
    return [(str(where.relative_to(ROOT)), command, flag) for where, spans in sources
            for span in spans for command, flag in named_flags(span, commands)]


def test_every_flag_the_docs_give_a_command_exists() -> None:
    shown = shown_flags(build_parser("*"))
    named = documented_flags()
    assert len(named) > 200, "the docs' command lines were not found"
    unknown = sorted({f"{where}: pt2chakra {command} {flag}" for where, command, flag in named
                      if flag not in shown[command]})
    assert not unknown, "flags the docs name that the command does not show:\n" + "\n".join(unknown)


def script_flags() -> set[str]:
    """The flags the scripts under scripts/ define (each as a string literal)."""
    return {flag for script in (ROOT / "scripts").glob("*.py")
            for flag in re.findall(r"[\"'](--[a-zA-Z][\w-]*)[\"']", script.read_text())}


def flags_named_alone(spans: list[str]) -> set[str]:
    """The flags of code spans that start with one (``--cpu serial``): no
    command says whose, so they must be some command's or some script's."""
    return {flag for span in spans if span.lstrip().startswith("--") for flag in FLAG.findall(span)}


def test_every_flag_named_alone_is_one_of_ours() -> None:
    known = set().union(*shown_flags(build_parser("*")).values()) | script_flags()
    named = [(page, flag) for page in pages()
             for flag in flags_named_alone(code_spans(page.read_text()))]
    named += [(module, flag) for module in sorted((ROOT / "src" / "pt2chakra").rglob("*.py"))
              for flag in flags_named_alone([m["code"] for m in INLINE.finditer(module.read_text())])]
    assert len(named) > 50, "the docs' flags were not found"
    unknown = sorted({f"{where.relative_to(ROOT)}: {flag}" for where, flag in named
                      if flag not in known | OTHER_PROGRAMS_FLAGS})
    assert not unknown, "flags no command shows and no script defines:\n" + "\n".join(unknown)


def test_the_flag_reader_finds_command_lines_and_a_misspelt_flag() -> None:
    commands = {"convert", "simulate", "astra-sim"}
    assert named_flags("pt2chakra -v convert --host-trace h.json --consumr astra-sim  # --x",
                       commands) == [("convert", "--host-trace"), ("convert", "--consumr")]
    assert named_flags("simulate --consumer astra-sim (unlike convert --cpu)", commands) == \
        [("simulate", "--consumer")]
    assert named_flags("pt2chakra astra-sim a.et, simulate --json | head --lines 3", commands) == \
        [("simulate", "--json")]
    assert named_flags("git diff --stat; the report --html", commands) == []
    text = "```sh\npt2chakra convert \\\n  --host-trace h\n```\n| `convert [--cpu a\\|b]` |\n"
    assert code_spans(text) == ["pt2chakra convert    --host-trace h", "convert [--cpu a/b]"]
    assert flags_named_alone(["--profile astra-sim", "the --cpu mode", " --rank R"]) == \
        {"--profile", "--rank"}
    assert "--reuse" in script_flags() and "--profile" not in script_flags()
    shown = shown_flags(build_parser("*"))
    assert "--for" not in shown["validate"] and "--consumer" in shown["validate"]
    assert "--consumr" not in shown["convert"] and "--max-input-size" in shown["convert"]


def history_in(text: str) -> list[str]:
    return [m[0] for m in HISTORY.finditer(text) if m[0].lower() not in NOT_OUR_HISTORY]


def test_the_docs_describe_the_tool_not_its_history() -> None:
    found = {f"{page.relative_to(ROOT)}: {word!r}" for page in pages()
             for word in history_in(page.read_text())}
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(sorted(found))
    assert (ROOT / "CHANGELOG.md").is_file()


def test_the_history_reader_can_fail() -> None:
    assert history_in("Round 2 (issue 28): main at d94d661, this session; #12 (#34) "
                      "issues 27 and 32, ASTRA-sim 518bd513, collective #0, 0x1f, 2026-12-06") == \
        ["Round 2", "issue 28", "d94d661", "this session", "(#34)", "issues 27"]


def example_blocks() -> list[str]:
    """The README's ``sh`` blocks, ``make`` lines left out, continuations joined."""
    blocks = []
    for block in FENCE.finditer(README.read_text()):
        if block["info"] != "sh":
            continue
        lines = [ln for ln in block["body"].replace("\\\n", " ").splitlines()
                 if ln.strip() and not ln.lstrip().startswith("make ")]
        if lines:
            blocks.append("\n".join(lines))
    return blocks


def run_examples(blocks: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    (where / "samples").symlink_to(ROOT / "samples")
    (where / "out").mkdir()
    script = "\n".join([
        "set -euo pipefail",
        f'pt2chakra() {{ "{sys.executable}" -m pt2chakra "$@"; }}',
        *(f"echo '>>> block {i}'\n{b}" for i, b in enumerate(blocks))])
    return subprocess.run([SHELL, "-c", script], cwd=where, capture_output=True, text=True,
                          timeout=EXAMPLES_TIMEOUT_S)


def test_the_readme_has_examples_to_run() -> None:
    blocks = example_blocks()
    assert len(blocks) >= 8
    assert blocks[0].startswith("pt2chakra convert"), "the first example converts the sample"


def test_the_first_example_runs(tmp_path: Path) -> None:
    """The fast tier's share: the conversion every later example starts from."""
    proc = run_examples(example_blocks()[:1], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (tmp_path / "out" / "gpt.et").stat().st_size > 0
    assert "host ops:" in proc.stdout


@pytest.mark.slow  # every example in turn: a minute or two of CPU
def test_every_example_runs_as_shown(tmp_path: Path) -> None:
    blocks = example_blocks()
    if importlib.util.find_spec("torch") is None:  # only `collect` records with torch
        blocks = [b for b in blocks if "pt2chakra collect" not in b]
    proc = run_examples(blocks, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path / "out"
    for made in ["gpt.et", "gpt_kineto.et", "gloo.0.et", "gloo.1.et", "gloo.html",
                 "gloo_bw025.1.et", "job/gloo.1.et", "job/run.sh",
                 "gloo64.63.et"]:
        assert (out / made).is_file(), made
    assert (out / "gpt.json").is_file() and (out / "gpt.again.et").read_bytes() == \
        (out / "gpt.et").read_bytes()

"""The README is a newcomer's first page: it stays short, every page of docs/
is reachable from it, every relative link (README and docs) resolves, every
command it names exists, and its examples run as shown on the bundled samples.

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
    for page in pages():
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

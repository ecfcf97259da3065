"""The "Layout" block of docs/LAYOUT.md lists exactly the files of
``src/pt2chakra``: a module added, moved or removed without its line fails here."""

from __future__ import annotations

import re

from helpers import ROOT

PACKAGE = ROOT / "src" / "pt2chakra"
# Where the block lives (moved out of the README, which stays short).
LAYOUT_PAGE = ROOT / "docs" / "LAYOUT.md"
# One entry of the block: indentation, then a file or folder name, then
# (after two spaces or more) what it is for.
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z_][\w.]*/?)(?: {2,}\S.*)?$")
INDENT = 2  # spaces per level
# Built or generated here, never listed: compiled objects and caches.
NOT_SOURCE = re.compile(r"(\.so|\.pyc)$|__pycache__")


def _layout_block() -> list[str]:
    section = LAYOUT_PAGE.read_text()
    start = section.index("```\n") + 4
    return section[start:section.index("```", start)].splitlines()


def listed_paths(lines: list[str]) -> set[str]:
    """Paths under src/pt2chakra/ named by the block (folders end in /);
    a subpackage's own __init__.py goes without saying."""
    paths: set[str] = set()
    parents: list[str] = []
    inside = False
    for line in lines:
        if line == "src/pt2chakra/":
            inside = True
            continue
        match = ENTRY.match(line)
        if not inside or match is None:
            continue
        level = len(match["indent"]) // INDENT
        if level == 0:  # tests/, scripts/: past the package
            inside = False
            continue
        del parents[level - 1:]
        path = "".join(parents) + match["name"]
        paths.add(path)
        if path.endswith("/"):
            parents.append(match["name"])
    return paths


def tree_paths() -> set[str]:
    paths: set[str] = set()
    for path in PACKAGE.rglob("*"):
        rel = path.relative_to(PACKAGE).as_posix()
        if NOT_SOURCE.search(rel):
            continue
        if path.is_dir():
            paths.add(rel + "/")
        elif not (path.name == "__init__.py" and path.parent != PACKAGE):
            paths.add(rel)
    return paths


def test_the_layout_block_lists_exactly_the_tree() -> None:
    listed, tree = listed_paths(_layout_block()), tree_paths()
    assert not tree - listed, f"in the tree, not in docs/LAYOUT.md: {sorted(tree - listed)}"
    assert not listed - tree, f"in docs/LAYOUT.md, not in the tree: {sorted(listed - tree)}"


def test_the_parser_sees_nesting() -> None:
    lines = ["src/pt2chakra/", "  a.py  x", "  sub/  y", "    b.py  z",
             "                 a continuation, not an entry", "  c.py", "tests/  t"]
    assert listed_paths(lines) == {"a.py", "sub/", "sub/b.py", "c.py"}

"""The package's layering holds: a subpackage imports only from its own tier
or lower ones, another stage's modules only through its entry point (its
package: ``from pt2chakra.simulation import simulate``), no module imports
from another module's private names, and no import cycle exists, between
modules or between subpackages (imports inside functions count: a cycle
dodged by a late import is still a cycle).

The tiers, lowest first: what every stage shares; the two formats; the
rules every stage shares about a trace (``rules``: lanes, step window, cycles,
rendezvous, checks); the first stages (conversion, simulation); the stages over the simulator (astra, diff,
scaleout, collect); the pages and tools over those (report > diff >
simulation; tools > astra > simulation); the command line on top."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "pt2chakra"
# Tier of each top-level subpackage or module of pt2chakra ("" = the facade,
# pt2chakra/__init__.py: on top, as its typed names come from every stage).
TIERS: dict[str, int] = {
    "errors": 0, "files": 0, "atomic": 0, "children": 0, "lazy": 0, "version": 0, "names": 0,
    "pytorch": 1, "chakra": 1,
    "rules": 2,
    "conversion": 3, "simulation": 3,
    "astra": 4, "diff": 4, "scaleout": 4, "collect": 4,
    "report": 5, "tools": 5,
    "cli": 6, "__main__": 6, "": 6,  # "": the facade, pt2chakra/__init__.py
}
# Stages entered only through their package (its ``__init__`` lists the names
# others may use). Not here: the formats (``chakra``, ``pytorch``), libraries
# whose every module other stages read (the allowlist), and ``tools`` and
# ``collect``, sets of independent commands (each module its own entry).
ENTRY_POINTS = ("simulation", "diff", "report", "conversion", "astra", "scaleout")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(module: str, is_package: bool, node: ast.AST) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it) of one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, []
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        yield target, [alias.name for alias in node.names]


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the pt2chakra modules it imports; and every private name
    taken from another module."""
    modules = {_module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    private: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            for target, names in _imported(module, path.name == "__init__.py", node):
                if target != PACKAGE and not target.startswith(PACKAGE + "."):
                    continue
                for name in names:  # ``from pkg import module`` imports that module
                    sub = f"{target}.{name}"
                    if sub in modules:
                        edges[module].add(sub)
                    else:
                        edges[module].add(target)
                        if name.startswith("_") and not name.startswith("__"):
                            private.append(f"{module} imports {target}.{name}")
                if not names:
                    edges[module].add(target)
        edges.setdefault(module, set())
    return edges, private


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` (a list of nodes, first repeated last), or []."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


EDGES, PRIVATE = _graph()


def test_every_subpackage_has_a_tier() -> None:
    assert {_top(m) for m in EDGES} <= set(TIERS), "give the new subpackage a tier in TIERS"


def test_no_upward_import() -> None:
    upward = [f"{a} (tier {TIERS[_top(a)]}) imports {b} (tier {TIERS[_top(b)]})"
              for a, targets in EDGES.items() for b in targets
              if TIERS[_top(b)] > TIERS[_top(a)]]
    assert not upward, "\n".join(upward)


def _entry_point_breaches(graph: dict[str, set[str]]) -> list[str]:
    return [f"{a} imports {b}: import from {PACKAGE}.{_top(b)} (its entry point) instead"
            for a, targets in graph.items() for b in targets
            if _top(b) in ENTRY_POINTS and _top(a) != _top(b) and b != f"{PACKAGE}.{_top(b)}"]


def test_other_stages_import_only_the_entry_point() -> None:
    breaches = _entry_point_breaches(EDGES)
    assert not breaches, "\n".join(breaches)


def test_no_private_name_across_modules() -> None:
    assert not PRIVATE, "\n".join(PRIVATE)


def test_no_import_cycle_between_modules() -> None:
    assert not _cycle(EDGES), " -> ".join(_cycle(EDGES))


def test_no_import_cycle_between_subpackages() -> None:
    packages: dict[str, set[str]] = defaultdict(set)
    for a, targets in EDGES.items():
        for b in targets:
            if _top(a) != _top(b):
                packages[_top(a)].add(_top(b))
    assert not _cycle(packages), " -> ".join(_cycle(packages))


@pytest.mark.parametrize("planted", ["upward", "cycle", "entry"])
def test_the_checks_can_fail(planted: str) -> None:
    """The checks above see what they look for (on a planted graph)."""
    graph = {"pt2chakra.chakra.a": {"pt2chakra.cli.b"}, "pt2chakra.cli.b": set()}
    if planted == "entry":
        graph = {"pt2chakra.report.a": {"pt2chakra.simulation.prepare", "pt2chakra.simulation",
                                        "pt2chakra.chakra.io"}}
        assert _entry_point_breaches(graph) == [
            "pt2chakra.report.a imports pt2chakra.simulation.prepare: import from "
            "pt2chakra.simulation (its entry point) instead"]
    elif planted == "cycle":
        graph["pt2chakra.cli.b"] = {"pt2chakra.chakra.a"}
        assert _cycle(graph)
    else:
        assert any(TIERS[_top(b)] > TIERS[_top(a)] for a, ts in graph.items() for b in ts)

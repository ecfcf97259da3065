"""The package's layering holds: a subpackage imports only from its own tier
or lower ones, another stage's modules only through its entry point (its
package: ``from pt2chakra.simulation import simulate``) or the few modules
it makes public a tier below (``PUBLIC_MODULES``), an entry point stays
within its size (``MAX_ENTRY_NAMES``), no module imports
from another module's private names, and no import cycle exists, between
modules or between subpackages (imports inside functions count: a cycle
dodged by a late import is still a cycle).

The tiers, lowest first: what every stage shares; the two formats; the
rules every stage shares about a trace (``rules``: lanes, step window, cycles,
rendezvous, checks); the first stages (conversion, simulation); the stages over the simulator (astra, diff,
scaleout, collect); the pages and tools over those (report > diff >
simulation; tools > astra > simulation); the command line on top.

The C units count too: each compiled module is built from the C file in
its own package (setup.py's ``C_UNITS``), named (imported, or its name given
to ``load_compiled``) only from that package, and a C file's quoted
``#include`` names a file of its own tier or a lower one (the simulator's
``_fast.c`` may include ``chakra/_fast.h``, never the reverse)."""

from __future__ import annotations

import ast
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = "pt2chakra"
# The C units: sources and headers; a quoted #include (a system one, in
# angle brackets, is not the package's).
C_SUFFIXES = (".c", ".h")
QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)
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
# A tier below an entry point: modules that other stages may import on their
# own, each one contract that few stages build on (why each, beside it; the
# package's docstring says the same to its readers). Kept short: a name
# that many stages or users need belongs in the entry point.
PUBLIC_MODULES: dict[str, str] = {
    "pt2chakra.simulation.network": "the collective cost model (scale-out's breakdown)",
    "pt2chakra.simulation.calibration": "the fitted network model (the ASTRA-sim job)",
    "pt2chakra.simulation.waits": "the wake-up rule (the ASTRA-sim serial chain, diff)",
    "pt2chakra.simulation.results": "the types of a result and its schedule (the HTML report)",
    "pt2chakra.simulation.views": "the timeline's lanes and colours (the HTML report)",
    "pt2chakra.simulation.text_report": "the text report's parts (the HTML report)",
    "pt2chakra.simulation.profiler_overhead": "the profiler's figure and meta.json (collect)",
    "pt2chakra.simulation.compute_model": "each op kind's time on its work (inspect)",
}
# The most names an entry point's ``__all__`` may list: a door that serves
# users and the other stages, not every name one stage happens to use
# (issue 47: simulation's had 54, 45 of them for a single package).
MAX_ENTRY_NAMES: dict[str, int] = {"simulation": 20}


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


def compiled_units() -> dict[str, str]:
    """setup.py's ``C_UNITS``: each compiled module -> its C source (from the
    repository's root), read from the file (running it would build)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "C_UNITS" for t in node.targets):
            return dict(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no C_UNITS table")


COMPILED = compiled_units()


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the pt2chakra modules it imports (a compiled module counts
    where its name is given as a string, as to ``load_compiled``); and every
    private name taken from another module."""
    modules = {_module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    private: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in COMPILED:
                edges[module].add(node.value)
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


def _c_includes() -> dict[str, list[str]]:
    """Each C unit of the package -> the files its quoted #includes name,
    resolved from its folder; both as paths under src/."""
    includes: dict[str, list[str]] = {}
    for path in sorted((SRC / PACKAGE).rglob("*")):
        if path.suffix in C_SUFFIXES:
            unit = path.relative_to(SRC).as_posix()
            includes[unit] = [os.path.normpath(os.path.join(os.path.dirname(unit), name))
                              for name in QUOTED_INCLUDE.findall(path.read_text())]
    return includes


def _unit_top(unit: str) -> str:
    """The subpackage (tier key) of a C unit given as a path under src/."""
    return _top(".".join(Path(unit).with_suffix("").parts))


def _include_breaches(includes: dict[str, list[str]], exists: set[str]) -> list[str]:
    """Quoted includes of a file outside the package (``exists``: its C
    units) or of a higher tier."""
    breaches = []
    for unit, targets in includes.items():
        for target in targets:
            if target not in exists:
                breaches.append(f"{unit} includes {target}: not a C unit of {PACKAGE}")
            elif TIERS[_unit_top(target)] > TIERS[_unit_top(unit)]:
                breaches.append(f"{unit} (tier {TIERS[_unit_top(unit)]}) includes {target} "
                                f"(tier {TIERS[_unit_top(target)]})")
    return breaches


def _compiled_breaches(graph: dict[str, set[str]]) -> list[str]:
    """Modules naming another package's compiled module (each package's own
    ``compiled.py`` is its switch and contract)."""
    return [f"{a} names {b}: use {b.rsplit('.', 1)[0]}.compiled (its switch) instead"
            for a, targets in graph.items() for b in targets
            if b in COMPILED and _top(a) != _top(b)]


EDGES, PRIVATE = _graph()
C_INCLUDES = _c_includes()


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
            if _top(b) in ENTRY_POINTS and _top(a) != _top(b) and b != f"{PACKAGE}.{_top(b)}"
            and b not in PUBLIC_MODULES]


def _entry_names(package: str) -> list[str]:
    """The ``__all__`` an entry point's ``__init__`` lists (read, not imported)."""
    tree = ast.parse((SRC / PACKAGE / package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    return []


def _oversized(names: dict[str, list[str]]) -> list[str]:
    return [f"{PACKAGE}.{package} exports {len(names[package])} names, at most {limit}: "
            "leave a name one stage uses in a public module a tier below (PUBLIC_MODULES)"
            for package, limit in MAX_ENTRY_NAMES.items() if len(names[package]) > limit]


def test_other_stages_import_only_the_entry_point() -> None:
    breaches = _entry_point_breaches(EDGES)
    assert not breaches, "\n".join(breaches)


def test_entry_points_within_their_size() -> None:
    names = {package: _entry_names(package) for package in MAX_ENTRY_NAMES}
    assert not _oversized(names), "\n".join(_oversized(names))


def test_public_modules_exist_and_are_told() -> None:
    """Each module public a tier below exists, under an entry point, and its
    package's docstring names it (what readers see of the list)."""
    for module in PUBLIC_MODULES:
        assert module in EDGES, f"{module}: no such module"
        package = _top(module)
        assert package in ENTRY_POINTS, f"{module}: not under an entry point"
        doc = ast.get_docstring(ast.parse((SRC / PACKAGE / package / "__init__.py").read_text()))
        assert doc and f"\n    {module.rsplit('.', 1)[1]} " in doc, \
            f"{PACKAGE}.{package}'s docstring does not name {module} among its public modules"


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


def test_every_c_unit_has_a_tier() -> None:
    assert C_INCLUDES, "no C unit found: the layout changed, update this test"
    assert {_unit_top(u) for u in C_INCLUDES} <= set(TIERS)


def test_each_compiled_module_is_built_from_its_own_package() -> None:
    """setup.py builds every C source of the package, each as the module
    beside it (``chakra/_fast.c`` -> ``pt2chakra.chakra._fast``)."""
    sources = {unit for unit in C_INCLUDES if unit.endswith(".c")}
    assert {Path(source).relative_to("src").as_posix() for source in COMPILED.values()} == sources
    for module, source in COMPILED.items():
        assert _module_name(ROOT / source) == module, f"{source} does not build {module}"


def test_no_upward_include() -> None:
    breaches = _include_breaches(C_INCLUDES, set(C_INCLUDES))
    assert not breaches, "\n".join(breaches)


def test_a_compiled_module_is_named_only_in_its_package() -> None:
    assert set(COMPILED) <= {b for targets in EDGES.values() for b in targets}, \
        "a compiled module no Python module loads"
    breaches = _compiled_breaches(EDGES)
    assert not breaches, "\n".join(breaches)


@pytest.mark.parametrize("planted", ["upward", "cycle", "entry", "size", "include", "compiled"])
def test_the_checks_can_fail(planted: str) -> None:
    """The checks above see what they look for (on a planted graph, or a
    planted entry point)."""
    graph = {"pt2chakra.chakra.a": {"pt2chakra.cli.b"}, "pt2chakra.cli.b": set()}
    if planted == "size":
        limit = MAX_ENTRY_NAMES["simulation"]
        assert not _oversized({"simulation": [f"n{i}" for i in range(limit)]})
        assert _oversized({"simulation": [f"n{i}" for i in range(limit + 1)]})
    elif planted == "include":
        units = {"pt2chakra/chakra/_fast.h": ["pt2chakra/simulation/_fast.h"],
                 "pt2chakra/simulation/_fast.h": [], "pt2chakra/simulation/_fast.c": ["x.h"]}
        assert _include_breaches(units, set(units)) == [
            "pt2chakra/chakra/_fast.h (tier 1) includes pt2chakra/simulation/_fast.h (tier 3)",
            "pt2chakra/simulation/_fast.c includes x.h: not a C unit of pt2chakra"]
    elif planted == "compiled":
        assert _compiled_breaches({"pt2chakra.conversion.deps": {"pt2chakra.simulation._fast"},
                                   "pt2chakra.simulation.compiled": {"pt2chakra.simulation._fast"}}
                                  ) == ["pt2chakra.conversion.deps names pt2chakra.simulation._fast: "
                                        "use pt2chakra.simulation.compiled (its switch) instead"]
    elif planted == "entry":
        graph = {"pt2chakra.report.a": {"pt2chakra.simulation.prepare", "pt2chakra.simulation",
                                        "pt2chakra.simulation.views", "pt2chakra.chakra.io"}}
        assert _entry_point_breaches(graph) == [
            "pt2chakra.report.a imports pt2chakra.simulation.prepare: import from "
            "pt2chakra.simulation (its entry point) instead"]
    elif planted == "cycle":
        graph["pt2chakra.cli.b"] = {"pt2chakra.chakra.a"}
        assert _cycle(graph)
    else:
        assert any(TIERS[_top(b)] > TIERS[_top(a)] for a, ts in graph.items() for b in ts)

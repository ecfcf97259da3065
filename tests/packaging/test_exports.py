"""Every package's entry point is honest, by construction and at run time.

Each ``__init__`` has one export list, ``__all__``; where a lazy name comes
from is its ``if TYPE_CHECKING:`` import (``pt2chakra/lazy.py``), and the
``__getattr__`` that loads it is hidden from type checkers. No exported name
is also a submodule's name: importing ``pt2chakra.diff`` binds that module
to ``pt2chakra.diff`` over whatever was there, so a facade function of that
name became a module (``TypeError: 'module' object is not callable``) as
soon as anything imported the subpackage, while mypy still called it a
function. In a fresh interpreter, in either order (facade first, or every
module first), every facade name is the object its import names, and the
renamed calls work."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, SAMPLE

from pt2chakra.lazy import submodule_names, type_checking_imports

PACKAGE_DIR = ROOT / "src" / "pt2chakra"
INITS = sorted(PACKAGE_DIR.rglob("__init__.py"))


def _hidden_blocks(tree: ast.Module) -> list[ast.If]:
    """The top-level ``if not TYPE_CHECKING:`` blocks (what type checkers skip)."""
    return [node for node in tree.body if isinstance(node, ast.If)
            and isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
            and isinstance(node.test.operand, ast.Name) and node.test.operand.id == "TYPE_CHECKING"]


def _bound_at_run_time(tree: ast.Module) -> set[str]:
    """Names the module binds at its top level, which type checkers see too
    (not those of its ``if`` blocks)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def export_problems(source: str, submodules: set[str]) -> list[str]:
    """What is wrong with one ``__init__``'s exports (empty when nothing)."""
    tree = ast.parse(source)
    lists = [node for node in tree.body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
    if not lists:
        return []  # no public list: a library whose modules are imported directly
    if len(lists) > 1 or not isinstance(lists[0].value, ast.List):
        return ["__all__ must be one list literal"]
    exported = {ast.literal_eval(e) for e in lists[0].value.elts}
    problems = [f"{name!r} is exported and is also a submodule: importing the submodule "
                "replaces it" for name in sorted(exported & submodules)]
    lazy = set(type_checking_imports(source))
    problems += [f"{name!r} is imported for type checkers but not in __all__"
                 for name in sorted(lazy - exported)]
    problems += [f"{name!r} is in __all__ but neither defined nor a TYPE_CHECKING import"
                 for name in sorted(exported - lazy - _bound_at_run_time(tree))]
    hidden = [node for block in _hidden_blocks(tree) for node in block.body
              if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__getattr__"]
    if "__getattr__" in _bound_at_run_time(tree):
        problems.append("__getattr__ is visible to type checkers: bind it under "
                        "`if not TYPE_CHECKING:`")
    if lazy and [ast.unparse(n.value) for n in hidden] != ["lazy_exports(__name__, __all__)"]:
        problems.append("lazy names need `__getattr__ = lazy_exports(__name__, __all__)` "
                        "under `if not TYPE_CHECKING:`")
    return problems


@pytest.mark.parametrize("init", INITS, ids=lambda p: str(p.parent.relative_to(PACKAGE_DIR)))
def test_one_honest_export_list(init: Path) -> None:
    problems = export_problems(init.read_text(), submodule_names(init.parent))
    assert not problems, f"{init}: " + "; ".join(problems)


def test_the_facade_and_the_stages_export_lazily() -> None:
    """The check above looks at the packages it should (the lazy ones)."""
    lazy = {p.parent.name for p in INITS if "lazy_exports(__name__, __all__)" in p.read_text()}
    assert {"pt2chakra", "simulation", "diff", "report", "conversion", "astra"} <= lazy


PLANTED = '''
from typing import TYPE_CHECKING
from pt2chakra.lazy import lazy_exports
if TYPE_CHECKING:
    from pt2chakra.diff import diff
    from pt2chakra.report import write_report
    from pt2chakra.simulation import SimulationResult
__all__ = ["diff", "write_report", "convert"]
__getattr__ = lazy_exports(__name__, {"diff": "pt2chakra.diff"})
'''
HONEST = '''
from typing import TYPE_CHECKING
from pt2chakra.lazy import lazy_exports
if TYPE_CHECKING:
    from pt2chakra.diff import diff as diff_runs
    from pt2chakra.report import write_report
__all__ = ["diff_runs", "write_report", "lazy_exports"]
if not TYPE_CHECKING:
    __getattr__ = lazy_exports(__name__, __all__)
'''


def test_the_check_can_fail() -> None:
    """A planted ``__init__`` with each fault: a name that is a subpackage,
    a type-only import left out of ``__all__``, a listed name from nowhere,
    a second export list and a ``__getattr__`` mypy can see."""
    problems = export_problems(PLANTED, {"diff", "report"})
    assert problems == [
        "'diff' is exported and is also a submodule: importing the submodule replaces it",
        "'SimulationResult' is imported for type checkers but not in __all__",
        "'convert' is in __all__ but neither defined nor a TYPE_CHECKING import",
        "__getattr__ is visible to type checkers: bind it under `if not TYPE_CHECKING:`",
        "lazy names need `__getattr__ = lazy_exports(__name__, __all__)` under "
        "`if not TYPE_CHECKING:`",
    ]
    assert export_problems(HONEST, {"diff", "report"}) == []


def test_a_clashing_package_is_refused_on_first_use(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the static check, ``lazy_exports`` itself refuses a package that
    exports a submodule's name, before the import system can rebind it."""
    package = tmp_path / "planted_facade"
    (package / "diff").mkdir(parents=True)
    (package / "diff" / "__init__.py").write_text("def diff() -> None: ...\n")
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nfrom pt2chakra.lazy import lazy_exports\n"
        "if TYPE_CHECKING:\n    from planted_facade.diff import diff\n"
        '__all__ = ["diff"]\nif not TYPE_CHECKING:\n'
        "    __getattr__ = lazy_exports(__name__, __all__)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    planted = importlib.import_module("planted_facade")
    try:
        with pytest.raises(ImportError, match="exports diff, also its submodules"):
            planted.diff  # noqa: B018  (the lookup is the test)
    finally:
        sys.modules.pop("planted_facade", None)


# Run in a fresh interpreter: reads the facade (ORDER "facade-first") or
# imports every module of the package (ORDER "modules-first") first, then
# the other; then checks every facade name and calls the renamed ones.
_SCRIPT = """
import importlib, json, pkgutil, sys, types
import pt2chakra
from pt2chakra.lazy import type_checking_imports

def read_facade():
    for name in pt2chakra.__all__:
        getattr(pt2chakra, name)

def import_everything():
    for info in pkgutil.walk_packages(pt2chakra.__path__, "pt2chakra."):
        if not info.name.endswith("__main__"):  # __main__ runs the command line
            importlib.import_module(info.name)

steps = [read_facade, import_everything]
for step in steps if {order!r} == "facade-first" else steps[::-1]:
    step()
wrong = []
for name, (module, attribute) in type_checking_imports(
        open(pt2chakra.__file__, encoding="utf-8").read()).items():
    value = getattr(pt2chakra, name)
    if isinstance(value, types.ModuleType) or value is not getattr(
            importlib.import_module(module), attribute):
        wrong.append(f"pt2chakra.{{name}} is {{value!r}}")
for package in ("diff", "report"):
    if not isinstance(getattr(pt2chakra, package), types.ModuleType):
        wrong.append(f"pt2chakra.{{package}} is not the subpackage")
pt2chakra.convert({host!r}, {kineto!r}, {et!r})
changed = pt2chakra.diff_runs([{et!r}], [{et!r}])
page = pt2chakra.write_report([{et!r}], {html!r})
print(json.dumps({{"wrong": wrong, "difference_us": changed.difference_us,
                  "page_ranks": page.ranks}}))
"""


@pytest.mark.parametrize("order", ["facade-first", "modules-first"])
def test_facade_calls_work_after_every_subpackage_is_imported(order: str,
                                                              tmp_path: Path) -> None:
    script = _SCRIPT.format(order=order, host=f"{SAMPLE}.host_et.json.gz",
                            kineto=f"{SAMPLE}.kineto.json.gz", et=str(tmp_path / "gpt.et"),
                            html=str(tmp_path / "gpt.html"))
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True).stdout
    result = json.loads(out.splitlines()[-1])
    assert result == {"wrong": [], "difference_us": 0.0, "page_ranks": 1}
    assert (tmp_path / "gpt.html").stat().st_size > 0

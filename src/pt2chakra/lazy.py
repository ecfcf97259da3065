"""Lazy public names: a package's entry point (its ``__init__``) lists the
names other packages may import from it in ``__all__``, its one export list,
and the module defining each one is imported on first use, so that importing
a package (or starting the CLI) stays cheap.

Where each name comes from is said once, by the ``if TYPE_CHECKING:`` imports
beside ``__all__``: type checkers read them as they are, and on the first
lazy lookup ``lazy_exports`` reads the same statements from the package's
source (as scientific-python's ``lazy_loader`` reads a stub). The
``__getattr__`` it returns is bound under ``if not TYPE_CHECKING:`` so that
type checkers never see it: a misspelt name is an error, not ``Any``.

No exported name may be a submodule's: importing ``package.name`` binds that
module to ``package.name`` over whatever was there (the facade's ``diff``
function became the ``diff`` module, uncallable, once anything imported the
subpackage). The first lazy lookup refuses such a package, and
``tests/packaging/test_exports.py`` holds every ``__init__`` to all this."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection
from pathlib import Path


def lazy_exports(package: str, names: Collection[str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: each name of ``names`` (its
    ``__all__``) is taken, on first use, from the module its
    ``TYPE_CHECKING`` import names."""
    sources: dict[str, tuple[str, str]] = {}  # read on the first lookup

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if not sources:
            init = Path(sys.modules[package].__file__ or "")
            clashes = sorted(set(names) & submodule_names(init.parent))
            if clashes:
                raise ImportError(f"{package} exports {', '.join(clashes)}, also its submodules: "
                                  "importing one would rebind the name to the module")
            sources.update(type_checking_imports(init.read_text(encoding="utf-8")))
        if name not in sources:
            raise AttributeError(f"{package}.{name} is in __all__ but no TYPE_CHECKING "
                                 "import of its __init__ names it")
        module, attribute = sources[name]
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    return __getattr__


def type_checking_imports(source: str) -> dict[str, tuple[str, str]]:
    """Name bound -> (module, attribute) of each ``from M import A [as N]``
    (absolute) in the top-level ``if TYPE_CHECKING:`` blocks of ``source``."""
    import ast  # only on a lazy lookup: a bare ``import pt2chakra`` stays cheap

    found: dict[str, tuple[str, str]] = {}
    for block in ast.parse(source).body:
        if not (isinstance(block, ast.If) and isinstance(block.test, ast.Name)
                and block.test.id == "TYPE_CHECKING"):
            continue
        for statement in block.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


def submodule_names(package_dir: Path) -> set[str]:
    """The names the import system may bind on the package in ``package_dir``:
    its modules (source or compiled) and its folders (packages, namespace or not)."""
    names = set()
    for entry in package_dir.iterdir():
        name = entry.name.split(".")[0]
        if entry.is_dir() and entry.name.isidentifier() and entry.name != "__pycache__":
            names.add(entry.name)
        elif entry.suffix in (".py", ".so", ".pyd") and name != "__init__":
            names.add(name)
    return names

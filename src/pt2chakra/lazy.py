"""Lazy public names: a package's entry point (its ``__init__``) lists the
names other packages may import from it, and the module defining each one is
imported on first use, so that importing a package (or starting the CLI)
stays cheap. Type checkers read the same names from ``TYPE_CHECKING``
imports beside the list (see ``simulation/__init__.py``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

# An export given as "module:attribute" is another name for that attribute.
ALIAS_SEPARATOR = ":"


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``exports`` maps each public name
    to the module that defines it (``"module:attribute"`` for another name)."""

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _sep, attribute = target.partition(ALIAS_SEPARATOR)
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    return __getattr__

"""Each tier's contract table (``chakra/compiled.py``, the formats' module;
``simulation/compiled.py``, the simulator's) is complete and every name in it
is real: each C function of that tier's ``_fast``, its Python twin and the
parity test that compares them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from helpers import compiled_tiers

ROOT = Path(__file__).resolve().parents[2]
TIERS = compiled_tiers()
ENTRIES = [(tier, entry) for tier in TIERS for entry in tier.CONTRACT]


def _entry_id(item: object) -> str:
    """A row's C function; its tier's module for the tier."""
    return str(getattr(item, "c_function", None) or getattr(item, "COMPILED_MODULE", "?"))


@pytest.mark.parametrize("tier", TIERS, ids=lambda t: t.COMPILED_MODULE)
def test_every_compiled_function_is_in_the_table(tier) -> None:
    fast = tier.fast_path()
    if fast is None:
        pytest.skip(f"{tier.COMPILED_MODULE} is not built here")
    assert fast.__name__ == tier.COMPILED_MODULE
    exported = {name for name in dir(fast) if callable(getattr(fast, name))
                and not name.startswith("_")}
    assert exported == {entry.c_function for entry in tier.CONTRACT}


def test_each_function_has_one_tier() -> None:
    names = [entry.c_function for _, entry in ENTRIES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("tier, entry", ENTRIES, ids=_entry_id)
def test_the_python_twin_exists(tier, entry) -> None:
    module, _, qualname = entry.python_twin.partition(":")
    target: object = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    assert callable(target)


@pytest.mark.parametrize("tier, entry", ENTRIES, ids=_entry_id)
def test_the_parity_test_exists(tier, entry) -> None:
    path, _, name = entry.parity_test.partition("::")
    tree = ast.parse((ROOT / path).read_text())
    tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert name in tests, f"{entry.parity_test} not found"

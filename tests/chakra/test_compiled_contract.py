"""The compiled path's contract table (``chakra/compiled.py``) is complete and
every name in it is real: each C function of ``_fast``, its Python twin and
the parity test that compares them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from pt2chakra.chakra.compiled import CONTRACT, fast_path

ROOT = Path(__file__).resolve().parents[2]


def test_every_compiled_function_is_in_the_table() -> None:
    fast = fast_path()
    if fast is None:
        pytest.skip("the compiled extension is not built here")
    exported = {name for name in dir(fast) if callable(getattr(fast, name))
                and not name.startswith("_")}
    assert exported == {entry.c_function for entry in CONTRACT}


@pytest.mark.parametrize("entry", CONTRACT, ids=lambda e: e.c_function)
def test_the_python_twin_exists(entry) -> None:
    module, _, qualname = entry.python_twin.partition(":")
    target: object = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    assert callable(target)


@pytest.mark.parametrize("entry", CONTRACT, ids=lambda e: e.c_function)
def test_the_parity_test_exists(entry) -> None:
    path, _, name = entry.parity_test.partition("::")
    tree = ast.parse((ROOT / path).read_text())
    tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert name in tests, f"{entry.parity_test} not found"

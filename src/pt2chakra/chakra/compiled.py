"""The compiled fast path of the formats' tier (``_fast.c``) and its contract;
the switch every tier's compiled module goes through (``load_compiled``).

The C is split by tier, each module beside the Python it speeds up: this
package's ``_fast`` (the .et and host ET readers and writers, the converter's
passes) and ``pt2chakra.simulation._fast`` (the simulator's kernels; its
table: ``simulation/compiled.py``). Every compiled function has a
pure-Python twin with the same results; the compiled one only takes the
common case and hands anything else to the twin (or returns None for the
caller to take it). ``CONTRACT`` names, for each C function of this
package's module, its twin and the test that compares the two on arbitrary
input (``tests/chakra/test_compiled_contract.py`` checks that each table
covers its module and that each name in it exists). Without a C compiler at
install time, or with ``PT2CHAKRA_PURE_PYTHON`` set (to anything but "" or
"0"), the pure-Python path runs alone.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NamedTuple

PURE_PYTHON_ENV = "PT2CHAKRA_PURE_PYTHON"
COMPILED_MODULE = "pt2chakra.chakra._fast"


class CompiledFunction(NamedTuple):
    """One function of a compiled module: where its pure-Python twin lives
    (``module:qualified.name``; where the twin is the caller's own fallback
    branch, that caller) and the test comparing them (``path::test``)."""

    c_function: str
    python_twin: str
    parity_test: str


CONTRACT: tuple[CompiledFunction, ...] = (
    CompiledFunction("scan_frames", "pt2chakra.chakra.decode:_scan_frames",
                     "tests/chakra/test_lean_fast.py::test_frame_scan"),
    CompiledFunction("lean_nodes", "pt2chakra.chakra.lean_read:_Lean.nodes",
                     "tests/chakra/test_lean_fast.py::test_any_node_bytes"),
    CompiledFunction("encode_node", "pt2chakra.chakra.encode:NodeWriter.encode_python",
                     "tests/chakra/test_encode_fast.py::test_any_node_tuple"),
    CompiledFunction("frame_nodes", "pt2chakra.chakra.encode:NodeWriter.frame_python",
                     "tests/chakra/test_encode_fast.py::test_any_rows_framed"),
    CompiledFunction("deps_in_order", "pt2chakra.conversion.dep_table:DepTable._in_order_chunk",
                     "tests/conversion/test_dep_table.py::test_same_deps_in_order"),
    CompiledFunction("shared_io", "pt2chakra.pytorch.host_decode:_nested_to_op",
                     "tests/pytorch/test_shared_io_fast.py::test_same_io_values"),
    CompiledFunction("host_ops", "pt2chakra.pytorch.host_decode:_nested_to_op",
                     "tests/pytorch/test_host_ops_fast.py::test_any_attrs"),
    CompiledFunction("nested_ops", "pt2chakra.pytorch.host_decode:slice_ops",
                     "tests/pytorch/test_host_ops_fast.py::test_any_slice_text"),
    CompiledFunction("thread_order", "pt2chakra.conversion.deps:_thread_order_python",
                     "tests/conversion/test_thread_order_fast.py::test_same_columns"),
    CompiledFunction("check_ops", "pt2chakra.pytorch.host_decode:_check_ops_python",
                     "tests/pytorch/test_check_ops_fast.py::test_same_checks"),
    CompiledFunction("op_field", "pt2chakra.pytorch.records:_op_field_python",
                     "tests/pytorch/test_op_field_fast.py::test_same_fields"),
)


def load_compiled(name: str) -> ModuleType | None:
    """A tier's compiled module (``name``), or None where the pure-Python
    path runs alone: switched off, or built without a C compiler."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # built without a C compiler
        return None


FAST: ModuleType | None = load_compiled(COMPILED_MODULE)


def fast_path() -> ModuleType | None:
    """The compiled module, or None (read at call time: tests switch it off)."""
    return FAST

"""The compiled fast path (``_fast.c``: the ``.et`` frame scan, the
simulator's lean node decode, the converter's CPU-node encoder), where
``setup.py`` could build it.

Every use has a pure-Python path with the same results (tested against each
other); the compiled one only takes the common case and hands anything else
to it. Without a C compiler at install time, or with ``PT2CHAKRA_PURE_PYTHON``
set (to anything but "" or "0"), the pure-Python path runs alone.
"""

from __future__ import annotations

import os
from types import ModuleType

PURE_PYTHON_ENV = "PT2CHAKRA_PURE_PYTHON"

FAST: ModuleType | None
try:
    from pt2chakra.chakra import _fast as FAST
except ImportError:  # built without a C compiler
    FAST = None
if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
    FAST = None


def fast_path() -> ModuleType | None:
    """The compiled module, or None (read at call time: tests switch it off)."""
    return FAST

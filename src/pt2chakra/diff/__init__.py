"""Compare two runs of one training step (or a replay with its measurement):
``diff(a_paths, b_paths) -> DiffResult``. See ``diff/api.py``. The package's
entry point: other packages import these names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.diff.api import DEFAULT_TOP, diff, format_diff
    from pt2chakra.diff.model import (
        CATEGORIES,
        CATEGORY_TITLES,
        Attribution,
        CategoryTotal,
        CollectiveArrival,
        DiffResult,
        RunStep,
    )

__all__ = [
    "Attribution", "CATEGORIES", "CATEGORY_TITLES", "CategoryTotal", "CollectiveArrival",
    "DEFAULT_TOP", "DiffResult", "RunStep", "diff", "format_diff",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

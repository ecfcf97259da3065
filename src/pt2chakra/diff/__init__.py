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

_EXPORTS = {
    "DEFAULT_TOP": "pt2chakra.diff.api",
    "diff": "pt2chakra.diff.api",
    "format_diff": "pt2chakra.diff.api",
    "Attribution": "pt2chakra.diff.model",
    "CATEGORIES": "pt2chakra.diff.model",
    "CATEGORY_TITLES": "pt2chakra.diff.model",
    "CategoryTotal": "pt2chakra.diff.model",
    "CollectiveArrival": "pt2chakra.diff.model",
    "DiffResult": "pt2chakra.diff.model",
    "RunStep": "pt2chakra.diff.model",
}
__all__ = [
    "Attribution", "CATEGORIES", "CATEGORY_TITLES", "CategoryTotal", "CollectiveArrival",
    "DEFAULT_TOP", "DiffResult", "RunStep", "diff", "format_diff",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

"""Compare two runs of one training step (or a replay with its measurement):
``diff(a_paths, b_paths) -> DiffResult``. See ``diff/api.py``."""

from pt2chakra.diff.api import diff, format_diff
from pt2chakra.diff.model import (
    Attribution,
    CategoryTotal,
    CollectiveArrival,
    DiffResult,
    RunStep,
)

__all__ = ["Attribution", "CategoryTotal", "CollectiveArrival", "DiffResult", "RunStep", "diff",
           "format_diff"]

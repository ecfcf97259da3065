"""Scale-out: a data-parallel job recorded on N ranks as the job on M ranks.
The package's entry point: other packages import these names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.scaleout.api import extrapolate, extrapolated_job, scaled_graphs
    from pt2chakra.scaleout.breakdown import breakdown as step_breakdown
    from pt2chakra.scaleout.hosts import HostSharing

__all__ = [
    "HostSharing", "extrapolate", "extrapolated_job", "scaled_graphs", "step_breakdown",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

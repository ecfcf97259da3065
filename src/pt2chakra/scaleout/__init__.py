"""Scale-out: a data-parallel job recorded on N ranks as the job on M ranks.
The package's entry point: other packages import these names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.scaleout.api import (
        WorldSizeRun,
        extrapolate,
        extrapolated_job,
        scaled_graphs,
        simulate_world_size,
    )
    from pt2chakra.scaleout.hosts import HostSharing

__all__ = [
    "HostSharing", "WorldSizeRun", "extrapolate", "extrapolated_job", "scaled_graphs",
    "simulate_world_size",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

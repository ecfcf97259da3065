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

_EXPORTS = {
    "extrapolate": "pt2chakra.scaleout.api",
    "extrapolated_job": "pt2chakra.scaleout.api",
    "scaled_graphs": "pt2chakra.scaleout.api",
    "simulate_world_size": "pt2chakra.scaleout.api",
    "WorldSizeRun": "pt2chakra.scaleout.api",
    "HostSharing": "pt2chakra.scaleout.hosts",
}
__all__ = [
    "HostSharing", "WorldSizeRun", "extrapolate", "extrapolated_job", "scaled_graphs",
    "simulate_world_size",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

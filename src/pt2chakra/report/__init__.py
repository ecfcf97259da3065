"""One self-contained HTML page of a simulated step: predicted vs measured,
lane timelines, the critical path, top ops, collectives, what-ifs and the
conversion accounting (``pt2chakra report``, ``convert --html``). The
package's entry point: other packages import these names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.report.api import check_output, write_report
    from pt2chakra.report.gather import ReportOptions

__all__ = [
    "ReportOptions", "check_output", "write_report",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

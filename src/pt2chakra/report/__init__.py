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

_EXPORTS = {
    "check_output": "pt2chakra.report.api",
    "write_report": "pt2chakra.report.api",
    "ReportOptions": "pt2chakra.report.gather",
}
__all__ = [
    "ReportOptions", "check_output", "write_report",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

"""PyTorch -> Chakra: link a host ET with its Kineto trace (or either alone)
and write the ``.et``; many ranks in one call. The package's entry point:
other packages import these names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.conversion.api import (
        ConversionReport,
        ConversionRun,
        OutputProfile,
        convert,
        convert_run,
        link_traces,
        write_linked,
    )
    from pt2chakra.conversion.many_ranks import (
        RankOptions,
        RankTemplates,
        convert_ranks,
        parse_ranks,
    )
    from pt2chakra.conversion.step import StepChoice, parse_step_choice

_EXPORTS = {
    "ConversionReport": "pt2chakra.conversion.api",
    "ConversionRun": "pt2chakra.conversion.api",
    "OutputProfile": "pt2chakra.conversion.api",
    "convert": "pt2chakra.conversion.api",
    "convert_run": "pt2chakra.conversion.api",
    "link_traces": "pt2chakra.conversion.api",
    "write_linked": "pt2chakra.conversion.api",
    "RankOptions": "pt2chakra.conversion.many_ranks",
    "RankTemplates": "pt2chakra.conversion.many_ranks",
    "convert_ranks": "pt2chakra.conversion.many_ranks",
    "parse_ranks": "pt2chakra.conversion.many_ranks",
    "StepChoice": "pt2chakra.conversion.step",
    "parse_step_choice": "pt2chakra.conversion.step",
}
__all__ = [
    "ConversionReport", "ConversionRun", "OutputProfile", "RankOptions", "RankTemplates",
    "StepChoice", "convert", "convert_ranks", "convert_run", "link_traces", "parse_ranks",
    "parse_step_choice", "write_linked",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

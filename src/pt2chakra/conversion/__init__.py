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

__all__ = [
    "ConversionReport", "ConversionRun", "OutputProfile", "RankOptions", "RankTemplates",
    "StepChoice", "convert", "convert_ranks", "convert_run", "link_traces", "parse_ranks",
    "parse_step_choice", "write_linked",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

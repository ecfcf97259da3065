"""The HTML report's API: one call writes the page.

    from pt2chakra.report.api import write_report
    summary = write_report(["rank0.et", "rank1.et"], "report.html")
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from pt2chakra.atomic import StagedOutputs, check_outputs, write_atomic
from pt2chakra.conversion import ConversionReport
from pt2chakra.errors import InputError
from pt2chakra.files import read_side_json
from pt2chakra.simulation import timing_notes

from .gather import ReportData, ReportOptions, build_report
from .render import render

# The page must stay small enough to mail and to open quickly; the
# timeline is fitted to well under this (gather.TIMELINE_BYTES), so going
# over means a table cap is wrong: refuse rather than write a page that
# fails its promise.
MAX_PAGE_BYTES = 15_000_000


class ReportSummary(msgspec.Struct):
    """What ``write_report`` wrote."""

    output: str
    bytes: int
    ranks: int
    nodes: int
    bars: int  # timeline bars drawn
    merged_below_us: float  # coarsest lane resolution (0: every node drawn)
    predicted_step_us: float
    measured_step_us: float
    notes: list[str] = []  # simulation.text_report.timing_notes: why a step is 0 us
    # With a baseline: this run's measured step minus the baseline's (diff's B - A).
    baseline_difference_us: float | None = None

    def summary(self) -> str:
        merged = (f", bars closer than {self.merged_below_us:g} us merged"
                  if self.merged_below_us else "")
        compared = ([f"compared with the baseline: measured step {self.baseline_difference_us:+.0f}"
                     " us"] if self.baseline_difference_us is not None else [])
        return "\n".join([
            f"{self.output}: {self.bytes / 1e6:.2f} MB, {self.ranks} rank"
            f"{'s' if self.ranks != 1 else ''}, {self.nodes} nodes, {self.bars} timeline "
            f"bars{merged}; predicted step {self.predicted_step_us:.0f} us, measured "
            f"{self.measured_step_us:.0f} us", *compared, *self.notes])


def check_output(output: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str] | None],
                 others: Sequence[str | os.PathLike[str] | None] = ()) -> None:
    """Refuse, before any work, a page that would replace an input or land
    in a folder that does not exist, or that is not named ``.html``/``.htm``.
    ``others``: the command's other outputs (``convert --html``)."""
    name = os.fspath(output)
    if os.path.splitext(name)[1].lower() not in (".html", ".htm"):
        raise InputError(name, "the report is an HTML page: name it .html")
    check_outputs(inputs, [*others, name])


def read_conversion_report(path: str | os.PathLike[str]) -> ConversionReport:
    """A ``convert --report`` JSON file; ``InputError`` naming it otherwise."""
    return read_side_json(path, ConversionReport,
                          "a conversion report (pt2chakra convert --report)")


def write_page(data: ReportData, output: str | os.PathLike[str],
               staged: StagedOutputs | None = None) -> int:
    """Render and write the page atomically (into ``staged`` when given, and
    committed there); returns its size in bytes."""
    page = render(data).encode("utf-8")
    if len(page) > MAX_PAGE_BYTES:
        raise InputError(os.fspath(output), f"the page would be {len(page):,} bytes, over "
                         f"{MAX_PAGE_BYTES:,}; not written")
    if staged is None:
        write_atomic(output, page)
    else:
        write_atomic(staged.stage(output), page)
        staged.commit()
    return len(page)


def write_report(paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
                 options: ReportOptions | None = None,
                 conversion: Sequence[ConversionReport | str | os.PathLike[str]] = (),
                 baseline: Sequence[str | os.PathLike[str]] = (),
                 staged: StagedOutputs | None = None) -> ReportSummary:
    """Replay the ranks' ``.et`` files and write the self-contained HTML page.
    ``conversion``: conversion reports (or their JSON files) to account for;
    ``baseline``: another run of the job (one ``.et`` per rank) to compare with
    (``pt2chakra.diff``); ``staged``: the caller's outputs, the page
    committed with them (``convert --html``)."""
    inputs: list[str | os.PathLike[str] | None] = [*paths, *baseline]
    inputs += [c for c in conversion if not isinstance(c, ConversionReport)]
    if staged is None:  # else the caller checked the page with its other outputs
        check_output(output, inputs)
    reports = [c if isinstance(c, ConversionReport) else read_conversion_report(c)
               for c in conversion]
    data = build_report(paths, options, reports, baseline)
    size = write_page(data, output, staged)
    return ReportSummary(output=os.fspath(output), bytes=size, ranks=len(data.result.ranks),
                         nodes=data.nodes, bars=data.timeline.bars,
                         merged_below_us=data.timeline.merged_below_us,
                         predicted_step_us=data.result.predicted_step_us,
                         measured_step_us=data.result.measured_step_us,
                         notes=timing_notes(data.result),
                         baseline_difference_us=(data.comparison.result.difference_us
                                                 if data.comparison else None))

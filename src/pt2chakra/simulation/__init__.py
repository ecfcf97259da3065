"""Replay and what-ifs: a set of ranks replayed under one setting or many,
its text report, timeline and predicted ``.et``. This is the package's entry point:
code outside ``simulation/`` imports these names from here, never from its
modules (``tests/packaging/test_layers.py``)::

    from pt2chakra.simulation import SimulationOptions, simulate
    result = simulate(["x.0.et", "x.1.et"], SimulationOptions(compute_scale=[0.5]))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.simulation.api import (
        RecordedCalibration,
        SimulationOptions,
        SimulationRun,
        base_config,
        calibrate_recorded,
        check_network_and_scales,
        recorded_figure,
        refuse_unsound_set,
        scaled_out_options,
        simulate,
        simulate_baseline,
        simulate_graphs_run,
        simulate_run,
        with_recorded_source,
    )
    from pt2chakra.simulation.arrivals import Arrival, arrivals_of
    from pt2chakra.simulation.calibration import Calibration
    from pt2chakra.simulation.collective_table import CollectiveRow, collective_rows
    from pt2chakra.simulation.durations import SCALED_BACKENDS, link_streams
    from pt2chakra.simulation.engine import Simulator, measured_offset, what_if
    from pt2chakra.simulation.network import GLOO, cost_factors, gloo_segments_per_rank
    from pt2chakra.simulation.predicted_et import (
        check_prefix,
        predicted_et_config,
        write_predicted_et,
    )
    from pt2chakra.simulation.prepared import CATEGORY_NAMES
    from pt2chakra.simulation.profiler_overhead import META_NAME, format_figure, write_meta
    from pt2chakra.simulation.results import (
        CriticalPath,
        Schedule,
        SimConfig,
        SimulationResult,
        WhatIf,
    )
    from pt2chakra.simulation.text_report import (
        format_text_report,
        measured_collectives,
        profiler_lines,
        result_json,
        step_notes,
        timing_notes,
    )
    from pt2chakra.simulation.views import CATEGORY_COLORS, lane_tids, measured_span
    from pt2chakra.simulation.waits import (
        CPU_WAKE_TOL_US,
        INFER_MIN_US,
        CollectiveEnds,
        HostWait,
        TimedHostOp,
        host_comm_waits,
        release_point,
    )

__all__ = [
    "Arrival", "CATEGORY_COLORS", "CATEGORY_NAMES", "CPU_WAKE_TOL_US", "Calibration", "CollectiveEnds",
    "CollectiveRow", "CriticalPath", "GLOO", "TimedHostOp", "HostWait", "INFER_MIN_US", "META_NAME",
    "RecordedCalibration", "SCALED_BACKENDS", "Schedule", "SimConfig", "SimulationOptions",
    "SimulationResult", "SimulationRun", "Simulator", "WhatIf", "arrivals_of", "base_config",
    "calibrate_recorded", "check_network_and_scales", "check_prefix", "collective_rows",
    "cost_factors", "format_figure", "format_text_report", "gloo_segments_per_rank",
    "host_comm_waits", "lane_tids", "link_streams", "measured_collectives", "measured_offset",
    "measured_span", "predicted_et_config", "profiler_lines", "recorded_figure",
    "refuse_unsound_set", "release_point", "result_json", "scaled_out_options", "simulate", "simulate_baseline",
    "simulate_graphs_run", "simulate_run", "step_notes", "timing_notes", "what_if",
    "with_recorded_source", "write_meta", "write_predicted_et",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

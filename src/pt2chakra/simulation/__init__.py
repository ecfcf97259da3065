"""Replay and what-ifs: a set of ranks replayed under one setting or many,
its text report, timeline and predicted ``.et``. This is the package's entry
point: what users and the other stages call, imported from here::

    from pt2chakra.simulation import SimulationOptions, simulate
    result = simulate(["x.0.et", "x.1.et"], SimulationOptions(compute_scale=[0.5]))
    simulate(["x.0.et", "x.1.et"], SimulationOptions(write_et="out/pred"))  # --write-et

(``simulate --world-size`` is ``pt2chakra.scaleout.simulate_world_size``: the
scale-out stage sits above this one.)

A tier below, a few modules are public on their own, each one contract
that one or two other stages build on; other stages may import from them,
and from no other module here (``tests/packaging/test_layers.py`` lists them and
holds this door to its size)::

    network            the collective cost model (scale-out's breakdown)
    calibration        the network model fitted to a recording (the ASTRA-sim job)
    waits              the wake-up rule: which host gaps waited for a collective (ASTRA-sim, diff)
    results            the types of a result and its schedule (the HTML report)
    views              the timeline's lanes and colours (the HTML report)
    text_report        the text report's parts (the HTML report)
    profiler_overhead  the profiler's per-op figure and meta.json (collect writes it)
    compute_model      each kind of op's time fitted on the work of its shapes (inspect)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.simulation.api import (
        base_config,
        calibrate_recorded,
        recorded_figure,
        refuse_unsound_set,
        simulate,
        simulate_baseline,
        simulate_graphs_run,
        simulate_run,
        slow_rank_collectives,
    )
    from pt2chakra.simulation.collective_table import CollectiveRow, collective_rows
    from pt2chakra.simulation.engine import SimulationRun, Simulator, what_if
    from pt2chakra.simulation.options import ReplaySettings, SimulationOptions
    from pt2chakra.simulation.results import SimulationResult
    from pt2chakra.simulation.text_report import format_text_report, result_json, timing_notes

__all__ = [
    "CollectiveRow", "ReplaySettings", "SimulationOptions", "SimulationResult", "SimulationRun",
    "Simulator", "base_config", "calibrate_recorded", "collective_rows", "format_text_report",
    "recorded_figure", "refuse_unsound_set", "result_json", "simulate", "simulate_baseline",
    "simulate_graphs_run", "simulate_run", "slow_rank_collectives", "timing_notes", "what_if",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

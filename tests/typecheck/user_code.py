"""Code as a user writes it against the facade and the stages' entry points.
Not run: ``test_typecheck.py`` runs mypy on it and compares each
``reveal_type`` with the type in its comment (``# R: <type>``), and each
error with the one its line expects (``# E: <message>``): a misspelt name
is an error, not ``Any``, and a subpackage's name is its module."""

from __future__ import annotations

import pt2chakra
import pt2chakra.diff  # binds the subpackage to pt2chakra.diff (and pt2chakra.report)
import pt2chakra.report
from pt2chakra.diff import diff
from pt2chakra.simulation import SimulationOptions, simulate

result = pt2chakra.simulate(["x.0.et", "x.1.et"])
reveal_type(result)  # R: pt2chakra.simulation.results.SimulationResult
reveal_type(result.predicted_step_us)  # R: float
reveal_type(simulate(["x.0.et"], SimulationOptions(compute_scale=[0.5])))  # R: pt2chakra.simulation.results.SimulationResult
reveal_type(pt2chakra.convert(None, "k.json", "k.et"))  # R: pt2chakra.conversion.api.ConversionReport
reveal_type(pt2chakra.validate(["x.0.et"]))  # R: pt2chakra.rules.checks.ValidationReport
reveal_type(pt2chakra.validate(["x.0.et"]).sound)  # R: bool
reveal_type(pt2chakra.read("x.0.et"))  # R: tuple[pt2chakra.chakra.records.GlobalMetadata, typing.Iterator[pt2chakra.chakra.records.ChakraNode]]
reveal_type(pt2chakra.diff_runs(["a.et"], ["b.et"]))  # R: pt2chakra.diff.model.DiffResult
reveal_type(diff(["a.et"], ["b.et"]).difference_us)  # R: float
reveal_type(pt2chakra.simulate_astra_sim(["x.0.et", "x.1.et"]))  # R: pt2chakra.astra.consumer.ConsumerReport
reveal_type(pt2chakra.astra_sim_job(["x.0.et", "x.1.et"], "job/x"))  # R: pt2chakra.astra.job.AstraJob
reveal_type(pt2chakra.open_rank_set(["x.10.et", "x.2.et"]).ranks)  # R: list[int]
reveal_type(pt2chakra.inspect("x.0.et"))  # R: pt2chakra.tools.inspect.InspectReport
reveal_type(pt2chakra.write_report(["x.0.et"], "r.html"))  # R: pt2chakra.report.api.ReportSummary
reveal_type(pt2chakra.__version__)  # R: str
reveal_type(pt2chakra.diff)  # R: types.ModuleType
pt2chakra.convret(None, "k.json", "k.et")  # E: Module has no attribute "convret"; maybe "convert"?
pt2chakra.diff(["a.et"], ["b.et"])  # E: Module not callable
pt2chakra.report(["x.0.et"], "r.html")  # E: Module not callable
pt2chakra.simulation.simulat(["x.0.et"])  # E: Module has no attribute "simulat"; maybe "simulate"?

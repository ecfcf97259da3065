"""pt2chakra: PyTorch host + Kineto traces -> Chakra execution traces.

The facade: one call per job, each a typed result::

    import pt2chakra
    report = pt2chakra.convert("rank0.host_et.json.gz", "rank0.kineto.json.gz", "rank0.et")
    report = pt2chakra.convert(None, "rank0.kineto.json.gz", "rank0.et")  # Kineto alone
    metadata, nodes = pt2chakra.read("rank0.et")        # any .et, ours or another tool's
    pt2chakra.write("copy.et", metadata, nodes)
    linked = pt2chakra.link("rank0.host_et.json.gz", "rank0.kineto.json.gz")
    result = pt2chakra.simulate(["rank0.et", "rank1.et"])
    report = pt2chakra.validate(["rank0.et", "rank1.et"])
    summary = pt2chakra.inspect("rank0.et")
    page = pt2chakra.write_report(["rank0.et", "rank1.et"], "report.html")  # HTML report
    changed = pt2chakra.diff_runs(["a.0.et", "a.1.et"], ["b.0.et", "b.1.et"])
    consumer = pt2chakra.simulate_astra_sim(["x.0.et", "x.1.et"])      # as ASTRA-sim would
    job = pt2chakra.astra_sim_job(["x.0.et", "x.1.et"], "job/x")        # a job ASTRA-sim runs

Each area has its subpackage (``pytorch``, ``chakra``, ``conversion``,
``simulation``, ``astra``, ``report``, ``tools``, ``diff``, ``collect``, ``cli``).
No facade name is a subpackage's or module's name: importing
``pt2chakra.diff`` binds that module to ``pt2chakra.diff``, whatever was
there, so a facade function of that name would turn into a module
(``tests/packaging/test_exports.py`` checks it). The names above are loaded
lazily so that importing the package stays cheap, and typed: mypy reads them
from the ``TYPE_CHECKING`` imports, which also say where each is loaded from
(``lazy.py``; ``tests/typecheck`` checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports
from pt2chakra.version import __version__

if TYPE_CHECKING:  # what mypy reads, and where each lazy name is loaded from
    from pt2chakra.astra import AstraSimOptions, simulate_astra_sim
    from pt2chakra.astra import write_job as astra_sim_job
    from pt2chakra.chakra.io import read_et as read
    from pt2chakra.chakra.io import write_et as write
    from pt2chakra.chakra.ranks import RankSet, open_rank_set
    from pt2chakra.conversion import ConversionReport, convert
    from pt2chakra.conversion import link_traces as link
    from pt2chakra.diff import DiffResult
    from pt2chakra.diff import diff as diff_runs
    from pt2chakra.errors import InputError
    from pt2chakra.report import write_report
    from pt2chakra.rules.checks import ValidationReport
    from pt2chakra.rules.checks import check_files as validate
    from pt2chakra.simulation import SimulationOptions, SimulationResult, simulate
    from pt2chakra.tools.inspect import InspectReport, inspect

__all__ = [
    "AstraSimOptions", "ConversionReport", "DiffResult", "InputError", "InspectReport",
    "RankSet", "SimulationOptions", "SimulationResult", "ValidationReport", "__version__",
    "astra_sim_job", "convert", "diff_runs", "inspect", "link", "open_rank_set", "read",
    "simulate", "simulate_astra_sim", "validate", "write", "write_report",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

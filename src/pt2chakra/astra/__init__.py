"""ASTRA-sim in one place: the export (export.py, serial_chain.py), the consumer
model (consumer.py, collective_time.py), its rules for validate (rules.py), the
runner of a real binary (binary.py), the job writer (job.py) and the API of
both commands (api.py). The package's entry point: other packages import
these names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2chakra.lazy import lazy_exports

if TYPE_CHECKING:
    from pt2chakra.astra.api import AstraSimOptions, simulate_astra_sim
    from pt2chakra.astra.choices import CHECK_TIMEOUT_S, CPU_MODES, DEFAULT_CPU_MODE, TOPOLOGIES
    from pt2chakra.astra.consumer import ConsumerReport, format_consumer_report
    from pt2chakra.astra.export import AstraSimProfile, convert_json
    from pt2chakra.astra.job import (
        BINARY_ENV,
        NetworkChoice,
        check_job,
        check_job_outputs,
        format_job_check,
        write_job,
    )
    from pt2chakra.astra.rules import AstraSimRules

__all__ = [
    "AstraSimOptions", "AstraSimProfile", "AstraSimRules", "BINARY_ENV", "CHECK_TIMEOUT_S",
    "CPU_MODES", "ConsumerReport", "DEFAULT_CPU_MODE", "NetworkChoice", "TOPOLOGIES", "check_job",
    "check_job_outputs", "convert_json", "format_consumer_report", "format_job_check", "simulate_astra_sim",
    "write_job",
]

if not TYPE_CHECKING:  # hidden from mypy: a misspelt name is an error there, not Any
    __getattr__ = lazy_exports(__name__, __all__)

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

_EXPORTS = {
    "AstraSimOptions": "pt2chakra.astra.api",
    "simulate_astra_sim": "pt2chakra.astra.api",
    "CHECK_TIMEOUT_S": "pt2chakra.astra.choices",
    "TOPOLOGIES": "pt2chakra.astra.choices",
    "ConsumerReport": "pt2chakra.astra.consumer",
    "format_consumer_report": "pt2chakra.astra.consumer",
    "AstraSimProfile": "pt2chakra.astra.export",
    "CPU_MODES": "pt2chakra.astra.choices",
    "DEFAULT_CPU_MODE": "pt2chakra.astra.choices",
    "convert_json": "pt2chakra.astra.export",
    "BINARY_ENV": "pt2chakra.astra.job",
    "NetworkChoice": "pt2chakra.astra.job",
    "check_job_outputs": "pt2chakra.astra.job",
    "check_job": "pt2chakra.astra.job",
    "format_job_check": "pt2chakra.astra.job",
    "write_job": "pt2chakra.astra.job",
    "AstraSimRules": "pt2chakra.astra.rules",
}
__all__ = [
    "AstraSimOptions", "AstraSimProfile", "AstraSimRules", "BINARY_ENV", "CHECK_TIMEOUT_S",
    "CPU_MODES", "ConsumerReport", "DEFAULT_CPU_MODE", "NetworkChoice", "TOPOLOGIES", "check_job",
    "check_job_outputs", "convert_json", "format_consumer_report", "format_job_check", "simulate_astra_sim",
    "write_job",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

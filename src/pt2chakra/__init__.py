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
    page = pt2chakra.report(["rank0.et", "rank1.et"], "report.html")   # HTML report

Each area has its subpackage (``pytorch``, ``chakra``, ``conversion``,
``simulation``, ``astra``, ``report``, ``tools``, ``diff``, ``collect``, ``cli``); the names above
are loaded lazily so that importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# facade name -> (module, attribute)
_FACADE = {
    "read": ("pt2chakra.chakra.io", "read_et"),
    "write": ("pt2chakra.chakra.io", "write_et"),
    "convert": ("pt2chakra.conversion.api", "convert"),
    "link": ("pt2chakra.conversion.api", "link_traces"),
    "simulate": ("pt2chakra.simulation.api", "simulate"),
    "validate": ("pt2chakra.tools.validate", "validate"),
    "inspect": ("pt2chakra.tools.inspect", "inspect"),
    "report": ("pt2chakra.report.api", "write_report"),
    "InputError": ("pt2chakra.errors", "InputError"),
}
__all__ = [*_FACADE, "__version__"]


def __getattr__(name: str) -> Any:
    target = _FACADE.get(name)
    if target is None:
        raise AttributeError(f"module 'pt2chakra' has no attribute {name!r}")
    return getattr(importlib.import_module(target[0]), target[1])

"""``pt2chakra microbench``: a synthetic workload of one collective repeated
(optionally after a compute node), the same on every NPU: a known input for
checking ASTRA-sim and our consumer model against each other."""

from __future__ import annotations

import os

from pt2chakra.chakra.records import CHAKRA_VERSION, GlobalMetadata, NodeType
from pt2chakra.errors import InputError
from pt2chakra.tools.text_workload import WorkloadBuilder, collective_type, write_npus


def microbench(collective: str, size: int, npus: int, prefix: str | os.PathLike[str],
               steps: int = 1, compute_micros: int = 0) -> list[str]:
    """``steps`` x (optional compute of ``compute_micros``, then one collective of
    ``size`` bytes) in a chain, the same on every NPU."""
    ctype = collective_type(collective)
    if size < 0 or steps < 1 or compute_micros < 0:
        raise InputError(os.fspath(prefix), "size and compute must be >= 0, steps >= 1")
    b = WorkloadBuilder()
    prev: int | None = None
    for step in range(steps):
        if compute_micros:
            prev = b.comp(f"step{step}", "COMPUTE", compute_micros, [prev])
        prev = b.add(f"{ctype.name}_{size}B_step{step}", NodeType.COMM_COLL_NODE, [prev], 0,
                      [("comm_type", "int64_val", int(ctype)), ("comm_size", "int64_val", size)])
    metadata = GlobalMetadata(version=CHAKRA_VERSION, attrs=[
        ("generator", "string_val", "pt2chakra microbench"),
        ("collective", "string_val", ctype.name), ("comm_size", "int64_val", size)])
    return write_npus(metadata, b.nodes, npus, os.fspath(prefix))

"""Every collective backend's ops become communication nodes in host-only
traces: the prefixes have one home (names.py) that the graph builder
and the collective rules both read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pt2chakra import convert, read
from pt2chakra.chakra.records import CollectiveType, NodeType, attr_dict
from pt2chakra.conversion.collective import collective_from_name
from pt2chakra.names import COMM_BACKEND_PREFIXES


@pytest.mark.parametrize("prefix", COMM_BACKEND_PREFIXES)
def test_every_backend_prefix_names_its_collective(prefix):
    assert collective_from_name(f"{prefix}all_reduce") == CollectiveType.ALL_REDUCE
    assert collective_from_name(f"{prefix}all_to_all") == CollectiveType.ALL_TO_ALL


def _collectives(path: Path) -> list[tuple[str, int]]:
    _, nodes = read(path)
    return [(n.name.split(":", 1)[1], attr_dict(n.attrs)["comm_type"])
            for n in nodes if n.type == NodeType.COMM_COLL_NODE]


@pytest.mark.parametrize("backend", ["ucc", "gloo", "mpi"])
def test_host_only_collectives_of_any_backend_become_comm_nodes(traces, tmp_path, backend):
    source = traces / "chakra_pg_host" / "host_et.json.gz"
    doc = json.loads(gzip.decompress(source.read_bytes()))
    renamed = 0
    for node in doc["nodes"]:
        if node["name"].startswith("nccl:"):
            node["name"] = backend + ":" + node["name"][len("nccl:"):]
            renamed += 1
    assert renamed
    host = tmp_path / f"{backend}.json"
    host.write_text(json.dumps(doc))
    convert(source, None, tmp_path / "nccl.et")
    convert(host, None, tmp_path / f"{backend}.et")
    nccl = _collectives(tmp_path / "nccl.et")
    assert len(nccl) == 10
    assert _collectives(tmp_path / f"{backend}.et") == nccl

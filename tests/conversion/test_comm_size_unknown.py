"""Sizes the trace does not hold (issue 28: hundreds of all-reduces without a
recorded size became comm_size 0, and validate said "a zero-byte collective
replays as free"): such a node is flagged comm_size_unknown, counted in the
accounting, and every consumer says what it does with it."""

from __future__ import annotations

import gzip
import json
import logging
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders import metadata, trace_event

from pt2chakra.astra.export import convert_files
from pt2chakra.chakra.io import read_et, write_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.conversion.api import convert
from pt2chakra.rules.conventions import COMM_SIZE_UNKNOWN_ATTR
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.tools.validate import validate

_x = partial(trace_event, pid=1, tid=1)
NELEMS = 1 << 20  # float: 4 MiB


def _rank(tmp_path: Path, rank: int, sized: bool) -> Path:
    """One all-reduce, launched under record_param_comms; its group and
    sequence number in the collective args, its size only when ``sized``."""
    args: dict[str, Any] = {"Collective name": "allreduce", "Group size": 2,
                            "Process Group Name": "0", "Seq": 1}
    if sized:
        args.update({"dtype": "Float", "In msg nelems": NELEMS, "Out msg nelems": NELEMS})
    events = [
        _x("cpu_op", "aten::mm", 0, 10),
        _x("cpu_op", "record_param_comms", 10, 20, **args),
        _x("cuda_runtime", "cudaLaunchKernel", 12, 5, correlation=1),
        _x("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 20, 200, tid=14, correlation=1,
           stream=14, device=0),
        _x("cuda_runtime", "cudaStreamSynchronize", 35, 190, correlation=2, stream=14),
    ]
    path = tmp_path / f"k{rank}.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events,
                   "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"}}, f)
    out = tmp_path / f"r.{rank}.et"
    convert(None, path, out)
    return out


def _comm(path: Path) -> dict[str, Any]:
    _md, nodes = read_et(path)
    return next(attr_dict(n.attrs) for n in nodes if "comm_type" in attr_dict(n.attrs))


def test_the_node_is_flagged_and_counted(tmp_path: Path) -> None:
    out = _rank(tmp_path, 0, sized=False)
    a = _comm(out)
    assert a["comm_size"] == 0 and a[COMM_SIZE_UNKNOWN_ATTR] is True
    sized = _comm(_rank(tmp_path, 1, sized=True))
    assert sized["comm_size"] == 4 * NELEMS and COMM_SIZE_UNKNOWN_ATTR not in sized
    report = convert(None, tmp_path / "k0.json.gz", tmp_path / "again.et")
    assert report.comm_size_unknown == 1
    assert "sizes not in the trace: 1 communication node" in report.summary()


def test_validate_says_what_the_consumers_do_once_per_file(tmp_path: Path) -> None:
    out = _rank(tmp_path, 0, sized=False)
    problems = validate([out]).problems
    unknown = [p for p in problems if p.check == "comm-size-unknown"]
    assert len(unknown) == 1 and unknown[0].message.startswith("1 communication node without")
    assert "measured time" in unknown[0].hint and "ASTRA-sim" in unknown[0].hint
    assert not [p for p in problems if "replays as free" in p.hint]


def test_another_rank_that_records_the_size_gives_it(tmp_path: Path) -> None:
    a, b = _rank(tmp_path, 0, sized=False), _rank(tmp_path, 1, sized=True)
    report = validate([a, b])
    assert report.sound, [p.line() for p in report.errors]
    measured = simulate([a, b]).predicted_step_us
    slow = simulate([a, b], SimulationOptions(bandwidth_gbps=0.1, latency_us=1.0))
    assert slow.predicted_step_us > measured * 10  # 4 MiB at 0.1 GB/s: tens of ms
    assert slow.lone_note == ""


def test_a_network_model_keeps_an_unsized_collective_measured_and_says_so(tmp_path: Path) -> None:
    a = _rank(tmp_path, 0, sized=False)
    b = tmp_path / "r.1.et"
    _md, nodes = read_et(a)
    write_et(b, metadata(1, 2, (0, 300)), nodes)
    base = simulate([a, b]).predicted_step_us
    result = simulate([a, b], SimulationOptions(bandwidth_gbps=0.1, latency_us=1.0))
    assert result.predicted_step_us == pytest.approx(base)
    assert "1 collective without a size on any given rank" in result.lone_note


def test_the_astra_sim_export_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a, b = _rank(tmp_path, 0, sized=False), _rank(tmp_path, 1, sized=True)
    with caplog.at_level(logging.WARNING):
        convert_files([a, b], tmp_path / "job")
    assert any("comm_size_unknown" in r.getMessage() and "latency alone" in r.getMessage()
               for r in caplog.records)

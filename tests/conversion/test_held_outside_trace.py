"""GPU work the trace does not hold (issue 28: a graph replay whose first
kernel starts 149 ms after its launch on an idle GPU, replayed at -48 %): the
stretch becomes a stand-in that holds the stream, unless recorded work
explains the wait."""

from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path

from builders import trace_event

from pt2chakra.conversion.api import convert
from pt2chakra.conversion.step import QUEUED_LAG_US, QUEUED_NAME
from pt2chakra.simulation import simulate

_x = partial(trace_event, pid=1, tid=1)
LAG = 3 * QUEUED_LAG_US


def _trace(tmp_path: Path, busy_other_stream: bool) -> Path:
    events = [
        _x("cpu_op", "aten::mm", 0, 20),
        _x("cuda_runtime", "cudaLaunchKernel", 5, 5, correlation=1),
        _x("kernel", "gemm", 5 + LAG, 100, tid=7, correlation=1, stream=7, device=0),
        _x("cpu_op", "aten::item", 30, LAG + 100),
        _x("cuda_runtime", "cudaStreamSynchronize", 31, LAG + 90, correlation=2, stream=7),
    ]
    if busy_other_stream:  # recorded work on the device explains the wait
        events += [_x("cuda_runtime", "cudaLaunchKernel", 1, 2, correlation=3),
                   _x("kernel", "other", 2, LAG, tid=9, correlation=3, stream=9, device=0)]
    path = tmp_path / f"k{int(busy_other_stream)}.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    return path


def test_an_unexplained_wait_is_a_stand_in_and_the_replay_keeps_it(tmp_path: Path) -> None:
    out = tmp_path / "k.et"
    report = convert(None, _trace(tmp_path, False), out)
    assert report.stand_in_nodes == {QUEUED_NAME: 1} and report.accounted()
    result = simulate([out])
    assert abs(result.error_pct or 0) < 5.0, result.error_pct


def test_recorded_work_on_the_device_needs_no_stand_in(tmp_path: Path) -> None:
    report = convert(None, _trace(tmp_path, True), tmp_path / "k.et")
    assert QUEUED_NAME not in report.stand_in_nodes

"""The step the user ran (conversion/step.py): a steady-state period when the
trace holds consecutive ProfilerSteps, GPU work of the previous step carried
in as a busy stream, and GPU-only traces replayed with their streams' gaps."""

from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path
from typing import Any

from builders import trace_event
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.conversion.api import convert
from pt2chakra.conversion.step import (
    MIN_GAP_US,
    PENDING_CATEGORY,
    kineto_step,
    pending_gpu_work,
    stream_gaps,
)
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.pytorch.records import GpuActivity
from pt2chakra.rules.conventions import CPU_GAP_CATEGORY
from pt2chakra.simulation import simulate
from pt2chakra.tools.validate import validate

MAX_ERROR_PCT = 5.0
PERIOD = 100.0


_x = partial(trace_event, pid=1, tid=1)


def _gpu_lagging_loop(steps: int = 3) -> dict[str, Any]:
    """A GPU-bound loop: step k syncs on the stream first (waiting for the
    kernel step k-1 launched, which runs past step k's start), then
    launches its own kernel, then does CPU work until the next step."""
    events = []
    for k in range(steps):
        s = PERIOD * k
        events += [
            _x("user_annotation", f"ProfilerStep#{k}", s, 99),
            _x("cpu_op", "aten::item", s + 1, 49),
            _x("cuda_runtime", "cudaStreamSynchronize", s + 2, 48, correlation=1000 + k,
               stream=7),
            _x("cpu_op", "aten::mm", s + 51, 3),
            _x("cuda_runtime", "cudaLaunchKernel", s + 51, 2, correlation=k),
            _x("kernel", "gemm", s + 53, 97, tid=7, correlation=k, stream=7, device=0),
            _x("cpu_op", "Optimizer.step", s + 55, 43),
        ]
    return {"traceEvents": events}


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "k.json.gz") -> Path:
    path = tmp_path / name
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def _by_category(path: Path, category: str) -> list[Any]:
    _md, nodes = read_et(path)
    return [n for n in nodes if attr_dict(n.attrs).get("category") == category]


def test_consecutive_steps_give_the_period_of_the_last_step_with_a_successor(tmp_path) -> None:
    kineto = load_kineto_trace(_write(tmp_path, _gpu_lagging_loop()))
    window = kineto_step(kineto)
    assert (window.label, window.start, window.end, window.definition) == \
        ("ProfilerStep#1", PERIOD, 2 * PERIOD, "period")
    assert "steady-state period" in window.describe()


def test_gpu_work_of_the_previous_step_is_a_busy_stream(tmp_path) -> None:
    kineto = load_kineto_trace(_write(tmp_path, _gpu_lagging_loop()))
    pending = pending_gpu_work(kineto, PERIOD)
    # the kernel step 0 launched runs until 150: the stream is busy 100..150
    assert [(a.stream, a.ts, a.dur) for a in pending] == [(7, PERIOD, 50.0)]


def test_a_gpu_bound_step_replays_within_5_percent_of_its_period(tmp_path) -> None:
    out = tmp_path / "k.et"
    report = convert(None, _write(tmp_path, _gpu_lagging_loop()), out)
    assert report.stand_in_nodes == {"[GPU work pending from before the step]": 1}
    assert report.accounted()
    assert validate([str(out)]).sound
    assert len(_by_category(out, PENDING_CATEGORY)) == 1
    result = simulate([str(out)])
    assert result.measured_step_us == PERIOD
    # without the pending work the sync would return at once (about -48 %)
    assert result.error_pct is not None and abs(result.error_pct) < MAX_ERROR_PCT
    # the critical path ends where the step does: the CPU reaching the next step
    assert result.critical_path is not None
    assert result.critical_path.length_us <= result.predicted_step_us + 1e-6


def _gpu_only(tmp_path: Path) -> Path:
    events = []
    for stream, starts in ((7, (0.0, 30.0, 35.0, 90.0)), (8, (10.0, 70.0))):
        for k, ts in enumerate(starts):
            events.append(_x("kernel", f"k{stream}_{k}", ts, 5.0, tid=stream,
                             correlation=stream * 10 + k, stream=stream, device=0))
    return _write(tmp_path, {"traceEvents": events}, "gpu_only.json.gz")


def test_a_gpu_only_trace_converts_with_its_gaps_and_replays_its_span(tmp_path) -> None:
    out = tmp_path / "g.et"
    report = convert(None, _gpu_only(tmp_path), out)
    assert report.host_ops_in == 0 and report.gpu_activities_kept == 6
    # stream 7: gaps 5..30, 40..90; stream 8: 0..10, 15..70
    assert report.stand_in_nodes == {"[idle: host time not in the trace]": 4}
    assert validate([str(out)]).sound
    result = simulate([str(out)])
    assert result.measured_step_us == 95.0
    assert result.error_pct is not None and abs(result.error_pct) < 1.0


# Gaps keep clear of MIN_GAP_US by a margin: at the threshold itself, float
# rounding of ``cursor + gap - cursor`` decides, not the rule under test.
_gap = st.one_of(st.floats(0, MIN_GAP_US * 0.8), st.floats(MIN_GAP_US * 1.2, 1000))
_spans = st.lists(st.tuples(_gap, st.floats(0, 50)), min_size=1, max_size=30)


@given(_spans)
def test_gaps_and_activities_tile_each_stream(spans: list[tuple[float, float]]) -> None:
    """Back to back on a stream (as a stream runs them), the activities and
    the gaps between them cover the stream from the start to its last end."""
    acts, cursor = [], 0.0
    for k, (gap, dur) in enumerate(spans):
        acts.append(GpuActivity(f"k{k}", "kernel", cursor + gap, dur, 0, 7, k))
        cursor += gap + dur
    gaps = stream_gaps(acts, 0.0)
    assert all(g.cat == CPU_GAP_CATEGORY and g.dur > 0 for g in gaps)
    covered = sum(a.dur for a in acts) + sum(g.dur for g in gaps)
    small = sum(gap for gap, _ in spans if gap < MIN_GAP_US)  # rounding, not idle time
    assert abs(covered + small - cursor) < 1e-6 * max(1.0, cursor)


def test_the_astra_sim_consumer_compares_its_makespan_with_the_span(tmp_path) -> None:
    """ASTRA-sim finishes with its last node: a period step is compared as
    its span there (the GPU work past the next step's start included)."""
    from pt2chakra.astra.collective_time import AstraNetwork
    from pt2chakra.astra.consumer import ConsumerOptions, run_as_astra_sim

    out = tmp_path / "k.et"
    convert(None, _write(tmp_path, _gpu_lagging_loop()), out)
    md, nodes = read_et(out)
    graphs = [(md, list(nodes))] * 2  # ASTRA-sim needs two NPUs
    result = run_as_astra_sim(graphs, ["a", "b"], ConsumerOptions(
        network=AstraNetwork("Ring", 2, 50.0, 500.0)))
    # step 1 runs from 100 to its kernel's end at 250, not to the next start (200)
    assert [r.measured_step_us for r in result.ranks] == [150.0, 150.0]

"""``microbench --profiler-overhead`` on CPU torch: a figure that
``simulate --profiler-overhead`` reads back as it is, within the suite's
time budget (a few calls per kind)."""

from __future__ import annotations

import json
import statistics

import pytest
from helpers import assert_one_line_failure, run_cli

from pt2chakra.simulation.profiler_overhead import parse_figure

pytestmark = pytest.mark.slow  # torch, in a process of its own

torch = pytest.importorskip("torch")


def test_microbench_measures_a_figure_simulate_reads(tmp_path) -> None:
    out = tmp_path / "cost.json"
    proc = run_cli("microbench", "--profiler-overhead", "--calls", "20", "--repeats", "2",
                   "-o", out, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    figure = parse_figure(doc["profiler_overhead"])
    assert figure > 0  # the profiler is never free
    kinds = {k["kind"]: k for k in doc["kinds"]}
    assert set(kinds) >= {"view", "elementwise", "many_inputs", "composite", "in_place",
                          "training_step"}
    # the figure is the training step's (a step records hundreds of ops); where
    # load made the profiled step no slower (0 us/op), the kinds' median instead
    assert kinds["training_step"]["ops_per_call"] > 100
    step = kinds["training_step"]["per_op_us"]
    loops = [k["per_op_us"] for name, k in kinds.items() if name != "training_step"]
    assert doc["per_op_us"] == (step if step > 0 else statistics.median(loops))
    # every kind recorded at least its own op, and ran slower under the profiler
    assert all(k["ops_per_call"] >= 1 for k in kinds.values())
    assert sum(k["profiled_us"] > k["plain_us"] for k in kinds.values()) >= 4
    assert doc["profiler_overhead"] in proc.stdout


def test_microbench_without_its_sizes_says_so_in_one_line(tmp_path) -> None:
    proc = run_cli("microbench", "--npus", "2", "-o", tmp_path / "x")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "--size")

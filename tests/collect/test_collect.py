"""Recording a training step with the collection API, then converting it.

Needs torch (CI installs the CPU build); without it the test is skipped.
"""

from __future__ import annotations

import pytest

from pt2chakra.conversion.api import convert

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch

torch = pytest.importorskip("torch")


def test_record_tiny_step_then_convert(tmp_path):
    from pt2chakra.collect.record import record_training_step, summarize_recording
    from pt2chakra.collect.sample_model import GPTConfig, make_training_step

    step = make_training_step(GPTConfig(layers=1, d_model=16, heads=2, seq_len=8, batch=2), "cpu")
    host, kineto = record_training_step(step, tmp_path, name="tiny")
    assert host.name == "tiny.host_et.json.gz" and kineto.exists()
    summary = summarize_recording(host, kineto)
    assert summary is not None
    report = convert(host, kineto, tmp_path / "tiny.et")
    assert report.link_method == "rf_id"
    assert report.host_ops_linked >= 0.95 * report.host_ops_kept
    assert report.accounted()


def test_collect_cli_records_the_builtin_model(tmp_path):
    from pt2chakra.cli import main

    rc = main(["collect", "--out-dir", str(tmp_path), "--layers", "1", "--d-model", "16",
               "--heads", "2", "--seq-len", "8", "--batch", "2", "--name", "cli"])
    assert rc == 0
    assert (tmp_path / "cli.host_et.json.gz").exists()
    assert (tmp_path / "cli.kineto.json.gz").exists()


def test_collect_stores_the_real_step_that_simulate_finds(tmp_path):
    import json

    from pt2chakra.cli import main
    from pt2chakra.simulation import SimulationOptions, simulate
    from pt2chakra.simulation.profiler_overhead import META_NAME, META_STEP_FIELD

    rc = main(["collect", "--out-dir", str(tmp_path), "--layers", "1", "--d-model", "16",
               "--heads", "2", "--seq-len", "8", "--batch", "2", "--name", "m",
               "--timed-steps", "3"])
    assert rc == 0
    meta = json.loads((tmp_path / META_NAME).read_text())
    assert len(meta["step_s"]) == 3 and meta[META_STEP_FIELD] in meta["step_s"]
    convert(tmp_path / "m.host_et.json.gz", tmp_path / "m.kineto.json.gz", tmp_path / "m.et")
    result = simulate([tmp_path / "m.et"], SimulationOptions(without_profiler=True))
    o = result.profiler_overhead
    assert o is not None and o.source == "fit" and o.source_detail.endswith(META_NAME)
    assert o.real_step_us == pytest.approx(meta[META_STEP_FIELD] * 1e6)
    assert result.predicted_step_us <= o.profiled_step_us
    # --timed-steps 0: no real step, nothing written
    other = tmp_path / "none"
    assert main(["collect", "--out-dir", str(other), "--layers", "1", "--d-model", "16",
                 "--heads", "2", "--seq-len", "8", "--batch", "2", "--timed-steps", "0"]) == 0
    assert not (other / META_NAME).exists()


def test_of_several_profiled_steps_the_median_one_is_kept(tmp_path):
    """Each call does one more add than the last and sleeps a set time: the kept
    trace must be the call of median wall time (the second-fastest of three),
    whichever call that was (a session's own start-up varies under load)."""
    import gzip
    import json
    import time

    from pt2chakra.collect.record import record_training_step

    sleeps = [0.5, 0.0, 0.25]
    calls: list[int] = []
    x = torch.ones(4)

    def step() -> None:
        k = len(calls)
        calls.append(k)
        time.sleep(sleeps[k])
        for _ in range(k + 1):
            torch.add(x, 1)

    walls: list[float] = []
    host, _ = record_training_step(step, tmp_path, warmup=0, name="k", profiled=3,
                                   profiled_s=walls)
    assert len(walls) == 3
    median_call = walls.index(sorted(walls)[1])
    nodes = json.loads(gzip.decompress(host.read_bytes()))["nodes"]
    assert sum(n["name"] == "aten::add" for n in nodes) == median_call + 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

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

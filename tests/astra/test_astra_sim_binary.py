"""The export in real ASTRA-sim: runs where the ``astra_bin`` fixture has the
congestion-unaware analytical binary (the aware one next to it; ``make astra-sim``
builds both), skipped otherwise."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import run_cli

from pt2chakra.astra.binary import aware_binary, run_workload
from pt2chakra.astra.choices import CPU_MODES
from pt2chakra.astra.collective_time import AstraNetwork, AstraSystem
from pt2chakra.astra.consumer import consume
from pt2chakra.astra.export import convert_files

RING = AstraNetwork("Ring", 8, 50.0, 500.0)  # ../shared/ASTRA_SIM.md
RING2 = AstraNetwork("Ring", 2, 50.0, 500.0)
MEASURED_DLRM_US = 20733.0
# The bound for the default export, and the consumer model's.
PREDICTION_TOLERANCE_PCT = 5.0
MODEL_TOLERANCE_PCT = 1.0


def _check_model(binary: str, files: list[str], network: AstraNetwork) -> float:
    """The consumer model against the binary, rank by rank; the binary's step."""
    prefix = files[0].rsplit(".", 2)[0]
    run = run_workload(binary, prefix, network, AstraSystem())
    model = consume(files, network).result
    assert len(run.finished) == network.npus  # every rank finished
    for rank in model.ranks:
        real = run.finished[rank.rank]
        assert abs(rank.finished_ns - real) <= real * MODEL_TOLERANCE_PCT / 100, (rank, real)
    return max(run.finished.values()) / 1000


@pytest.fixture(scope="module")
def dlrm_exports(converted, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("astra")
    files = [converted[f"dlrm_rank{r}"] for r in range(8)]
    exports = {}
    for mode in CPU_MODES:
        (out / mode).mkdir()
        written = convert_files(files, out / mode / "dlrm", cpu=mode)
        exports[mode] = [p for p in written if p.endswith(".et")]
    return exports


@pytest.mark.parametrize("aware", [False, True])
def test_default_export_predicts_the_measured_step(astra_bin, dlrm_exports, aware):
    network = dataclasses.replace(RING, congestion_aware=aware)
    files = dlrm_exports["serial"]
    run = run_workload(astra_bin, files[0].rsplit(".", 2)[0], network, AstraSystem())
    assert sorted(run.finished) == list(range(8))
    predicted = max(run.finished.values()) / 1000
    assert abs(predicted - MEASURED_DLRM_US) / MEASURED_DLRM_US * 100 < PREDICTION_TOLERANCE_PCT
    assert run.warnings == []  # nothing beyond its usual "Exiting" line


@pytest.mark.parametrize("mode", CPU_MODES)
@pytest.mark.parametrize("bandwidth", [50.0, 0.5])
def test_consumer_model_reproduces_the_binary(astra_bin, dlrm_exports, mode, bandwidth):
    _check_model(astra_bin, dlrm_exports[mode], dataclasses.replace(RING, bandwidth_gbps=bandwidth))


def test_keep_mode_is_what_astra_sim_warns_about(astra_bin, dlrm_exports):
    run = run_workload(astra_bin, dlrm_exports["keep"][0].rsplit(".", 2)[0], RING, AstraSystem())
    assert any("Only GPU and COMM types" in w for w in run.warnings)


@pytest.mark.parametrize("collective", ["ALL_REDUCE", "ALL_GATHER", "ALL_TO_ALL"])
def test_microbench_in_the_binary_and_the_model(astra_bin, tmp_path, collective):
    prefix = tmp_path / "mb"
    proc = run_cli("microbench", "--collective", collective, "--size", "1048576", "--npus", "8",
                   "--steps", "3", "--compute", "20", "-o", prefix)
    assert proc.returncode == 0, proc.stderr
    _check_model(astra_bin, [f"{prefix}.{r}.et" for r in range(8)], RING)


def test_from_text_in_the_binary_and_the_model(astra_bin, tmp_path):
    text = tmp_path / "w.txt"
    text.write_text("HYBRID_DATA_MODEL\n2\n"
                    "conv1 -1 10 ALLTOALL 100 11 REDUCESCATTER 200 12 ALLREDUCE 300 5\n"
                    "fc1 -1 30 ALLREDUCE 700 31 ALLTOALL 800 32 ALLGATHER 900 5\n")
    proc = run_cli("from-text", text, "--npus", "8", "-o", tmp_path / "w")
    assert proc.returncode == 0, proc.stderr
    _check_model(astra_bin, [f"{tmp_path}/w.{r}.et" for r in range(8)], RING)


def test_aware_binary_is_next_to_the_unaware_one(astra_bin):
    assert aware_binary(astra_bin).exists()


def test_gloo_sample_in_the_binary_and_the_model(astra_bin, tmp_path):
    """Two ranks whose collectives name process group "0" (the whole machine,
    which ASTRA-sim's comm-groups file cannot hold)."""
    from helpers import ROOT

    sample = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"
    full = []
    for rank in range(2):
        out = tmp_path / f"g.{rank}.et"
        proc = run_cli("convert", "-q", "--host-trace", f"{sample}.rank{rank}.host_et.json.gz",
                       "--device-trace", f"{sample}.rank{rank}.kineto.json.gz", "-o", out)
        assert proc.returncode == 0, proc.stderr
        full.append(out)
    (tmp_path / "x").mkdir()
    written = convert_files(full, tmp_path / "x" / "g")
    files = [p for p in written if p.endswith(".et")]
    run = run_workload(astra_bin, tmp_path / "x" / "g", RING2, AstraSystem())
    assert run.warnings == []
    _check_model(astra_bin, files, RING2)

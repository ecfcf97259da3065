"""End to end in the real ASTRA-sim, one row per kind of job the project writes:
``pt2chakra astra-sim -o DIR/job`` writes it, its own ``run.sh`` runs it in the
binary, every rank finishes, and ``pt2chakra astra-sim --check`` finds the
consumer model (what CI checks without the binary) within its bound of the
binary. A new kind of job is one more row of ``JOB_KINDS``.

(The single-rank sample ``gpt_tiny_cpu`` makes no job: ASTRA-sim needs 2 NPUs,
and the refusal is tested in test_serial_chain.)"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers import ROOT, run_cli

from pt2chakra import convert

MODEL_BOUND_PCT = 1.0
"""The consumer model's bound against the binary, per rank (as in
test_astra_sim_binary); it has been exact on every job so far."""
RUN_TIMEOUT_S = 300
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")
WORST_RANK = re.compile(r"consumer model vs ASTRA-sim, worst rank: ([\d.]+) %")
NS_PER_US = 1000


class JobKind(NamedTuple):
    """How to get one kind of job's per-rank .et files, and the options of the
    ``astra-sim`` command that writes it."""

    inputs: Callable[[pytest.FixtureRequest, Path], list[Path]]
    ranks: int
    options: tuple[str, ...] = ()


def _bundled(sample: str, ranks: int) -> Callable[[pytest.FixtureRequest, Path], list[Path]]:
    """A recorded multi-rank sample under samples/, converted rank by rank."""
    def inputs(request: pytest.FixtureRequest, folder: Path) -> list[Path]:
        base = ROOT / "samples" / sample
        files = []
        for rank in range(ranks):
            target = folder / f"in.{rank}.et"
            convert(f"{base}.rank{rank}.host_et.json.gz", f"{base}.rank{rank}.kineto.json.gz",
                    target)
            files.append(target)
        return files
    return inputs


def _extrapolated(sample: str, recorded: int, world_size: int,
                  ) -> Callable[[pytest.FixtureRequest, Path], list[Path]]:
    """A bundled recording scaled out with pt2chakra extrapolate."""
    def inputs(request: pytest.FixtureRequest, folder: Path) -> list[Path]:
        from pt2chakra.scaleout.api import extrapolate

        recorded_files = _bundled(sample, recorded)(request, folder)
        extrapolate(recorded_files, world_size, folder / "scaled")
        return [folder / f"scaled.{r}.et" for r in range(world_size)]
    return inputs


def _dlrm(request: pytest.FixtureRequest, folder: Path) -> list[Path]:
    """DLRM on 8 GPUs (NCCL) from ../shared/traces; skips without them."""
    converted: dict[str, Path] = request.getfixturevalue("converted")
    return [converted[f"dlrm_rank{r}"] for r in range(8)]


JOB_KINDS = {
    "gloo_ddp_cpu": JobKind(_bundled("gloo_ddp_cpu/gloo_ddp_cpu", 2), 2),
    "gloo_ddp_cpu-cpu_keep": JobKind(_bundled("gloo_ddp_cpu/gloo_ddp_cpu", 2), 2,
                                     ("--cpu", "keep")),
    "gloo_fully_connected": JobKind(_bundled("gloo_ddp_cpu/gloo_ddp_cpu", 2), 2,
                                    ("--topology", "FullyConnected")),
    "gloo_1gbit": JobKind(_bundled("gloo_ddp_pairs/bw1", 2), 2),
    "gloo_two_micro_batches": JobKind(_bundled("gloo_ddp_pairs/mb2", 2), 2),
    "dlrm_8gpu_nccl": JobKind(_dlrm, 8),
    "gloo_ddp_extrapolated_8": JobKind(_extrapolated("gloo_ddp_cpu/gloo_ddp_cpu", 2, 8), 8),
}
SLOW_KINDS = {"dlrm_8gpu_nccl"}  # real traces: converted once per session


def _finished(stdout: str) -> dict[int, int]:
    return {int(m[1]): int(m[2]) for m in FINISHED.finditer(stdout)}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW_KINDS
                                  else k for k in JOB_KINDS])
def test_job_runs_in_astra_sim_and_check_agrees(astra_bin, request, tmp_path, kind):
    spec = JOB_KINDS[kind]
    (tmp_path / "in").mkdir()
    inputs = spec.inputs(request, tmp_path / "in")
    prefix = tmp_path / "job" / "job"
    written = run_cli("astra-sim", "-q", *inputs, "-o", prefix, *spec.options)
    assert written.returncode == 0, written.stderr

    done = subprocess.run(["sh", str(prefix.parent / "run.sh")], capture_output=True, text=True,
                          cwd=tmp_path, timeout=RUN_TIMEOUT_S, check=False,
                          env={**os.environ, "ASTRA_SIM_BIN": astra_bin})
    assert done.returncode == 0, done.stderr[-2000:]
    finished = _finished(done.stdout)
    assert sorted(finished) == list(range(spec.ranks))  # every rank finished
    assert all(cycles > 0 for cycles in finished.values())

    check = run_cli("astra-sim", "--check", prefix, "--bin", astra_bin, timeout=RUN_TIMEOUT_S)
    assert check.returncode == 0, check.stderr
    worst = WORST_RANK.search(check.stdout)
    assert worst is not None, check.stdout
    assert float(worst[1]) <= MODEL_BOUND_PCT, check.stdout
    # --check ran the same job: its ASTRA-sim column is run.sh's finish per rank.
    rows = {int(r[0]): r[1] for r in (line.split() for line in check.stdout.splitlines()
                                      if re.match(r"\s+\d+ ", line))}
    assert rows == {rank: f"{cycles / NS_PER_US:,.0f}" for rank, cycles in finished.items()}

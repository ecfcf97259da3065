"""``diff`` on real pairs of our own what-if benchmark's recordings
(``samples/gloo_ddp_pairs``: gloo DDP x2 on CPU; loopback shaped to 4 and
1 Gbit/s, and 1 and 2 micro-batches per step), and on a prediction against
the measurement of its setting: the attributions add up to the measured
difference, and the category that the setting changed carries it."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from pt2chakra.conversion.api import convert
from pt2chakra.diff import DiffResult, diff
from pt2chakra.simulation import SimulationOptions, simulate_run
from pt2chakra.simulation.predicted_et import write_predicted_et

pytestmark = pytest.mark.slow  # eight real ranks converted, one replay

PAIRS = ROOT / "samples" / "gloo_ddp_pairs"
MAX_RESIDUAL_PCT = 1.0  # the bound on what the attributions leave out
RATE_RATIO = 0.25  # the 1 Gbit/s recording's link rate over the 4 Gbit/s one's


def _converted(tmp_path: Path, name: str) -> list[str]:
    out = []
    for rank in (0, 1):
        et = tmp_path / f"{name}.{rank}.et"
        convert(PAIRS / f"{name}.rank{rank}.host_et.json.gz",
                PAIRS / f"{name}.rank{rank}.kineto.json.gz", et)
        out.append(str(et))
    return out


def _by_category(result: DiffResult) -> dict[str, float]:
    return {c.category: c.delta_us for c in result.categories}


def _adds_up(result: DiffResult) -> None:
    assert result.difference_us != 0
    assert abs(result.residual_us) <= MAX_RESIDUAL_PCT / 100 * abs(result.difference_us)
    total = sum(c.delta_us for c in result.categories)
    assert total == pytest.approx(result.attributed_us, abs=1e-6)


def test_a_slower_link_is_collective_transfer(tmp_path: Path) -> None:
    result = diff(_converted(tmp_path, "bw4"), _converted(tmp_path, "bw1"))
    _adds_up(result)
    deltas = _by_category(result)
    assert result.difference_us > 0
    assert max(deltas, key=lambda c: deltas[c]) == "collective_transfer"
    assert deltas["collective_transfer"] > 0.5 * result.difference_us


def test_a_second_micro_batch_is_compute_and_ops_only_in_b(tmp_path: Path) -> None:
    result = diff(_converted(tmp_path, "mb1"), _converted(tmp_path, "mb2"))
    _adds_up(result)
    deltas = _by_category(result)
    assert result.difference_us > 0 and result.only_in_b_nodes > 0
    grown = deltas["compute"] + deltas["only_in_b"]  # the second pass: matched or new ops
    assert grown > result.difference_us


def test_a_prediction_against_the_measurement_of_its_setting(tmp_path: Path) -> None:
    """The 4 Gbit/s recording replayed at a quarter of the bandwidth
    (calibrated), written back as .et, against the 1 Gbit/s recording."""
    fast = _converted(tmp_path, "bw4")
    options = SimulationOptions(calibrate=True, bandwidth_scale=[RATE_RATIO])
    predicted = write_predicted_et(simulate_run(fast, options), options, str(tmp_path / "pred"))
    result = diff(predicted, _converted(tmp_path, "bw1"))
    _adds_up(result)
    assert result.matched_nodes > 0

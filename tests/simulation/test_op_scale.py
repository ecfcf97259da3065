"""``--cpu-scale X --cpu-scale-ops REGEX``: only a thread's time inside the
matching ops moves (their callees and the gaps between them included); the
optimizer's time, say, stays."""

from __future__ import annotations

import pytest
from builders import MD, cpu
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.errors import InputError
from pt2chakra.simulation import SimulationOptions
from pt2chakra.simulation.api import check_options
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.op_scale import CoveredTime, compile_ops
from pt2chakra.simulation.results import SimConfig

LANE = 0


def _named(node, name):
    node.name = name
    return node


def _step() -> list:
    """forward (0-100 us, with a callee 10-60), a 20 us gap, optimizer (120-170)."""
    return [_named(cpu(1, 0, 50, incl=100), "forward"),
            _named(cpu(2, 10, 50, deps=[1], kinds=["caller"]), "aten::mm"),
            _named(cpu(3, 120, 50, deps=[2]), "optimizer")]


def _predicted(scale: float, ops: str | None) -> float:
    sim = Simulator([(MD, _step())])
    return sim.run(SimConfig(cpu_scale=scale, cpu_scale_ops=ops))[0].predicted_step_us


def test_only_the_matching_ops_time_scales() -> None:
    assert _predicted(1.0, None) == pytest.approx(170)
    assert _predicted(2.0, None) == pytest.approx(340)  # everything, gap included
    # forward's 100 us (its callee and its own time after it included) doubles;
    # the 20 us gap and the optimizer's 50 us do not
    assert _predicted(2.0, "^forward$") == pytest.approx(170 + 100)
    assert _predicted(2.0, "optimizer") == pytest.approx(170 + 50)
    assert _predicted(0.5, "forward|optimizer") == pytest.approx(170 - 75)
    assert _predicted(2.0, "no such op") == pytest.approx(170)


def test_a_callee_alone_scales_only_its_own_span() -> None:
    assert _predicted(3.0, r"aten::mm") == pytest.approx(170 + 2 * 50)


def test_bad_pattern_and_pattern_without_scale_are_refused() -> None:
    with pytest.raises(InputError, match="--cpu-scale-ops: not a regular expression"):
        compile_ops("(")
    with pytest.raises(InputError, match="give --cpu-scale too"):
        check_options(SimulationOptions(cpu_scale_ops="forward"), ["x.et"])


spans = st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 100)), max_size=8)


@given(spans, st.floats(-50, 1100), st.floats(0, 300))
def test_covered_time_is_the_union_measure(raw, a, width) -> None:
    """Covered time in [a, b] equals the measure of the union of the spans
    there, counted on a fine grid; it never exceeds the interval."""
    intervals = [(s, s + w) for s, w in raw]
    covered = CoveredTime({LANE: intervals})
    b = a + width
    got = covered.within(LANE, a, b)
    assert -1e-6 <= got <= width + 1e-6
    step = 0.25
    grid = [a + (k + 0.5) * step for k in range(int(width / step))]
    counted = sum(step for t in grid if any(s <= t < e for s, e in intervals))
    assert got == pytest.approx(counted, abs=2 * step * (2 * len(intervals) + 1))
    assert covered.within(LANE + 1, a, b) == 0.0


def test_gpu_sync_ops_follow_the_pattern_too(converted) -> None:
    """DLRM rank 0 holds GPU-sync ops, whose CPU parts the replay times
    apart: a pattern matching no op leaves the step exactly as recorded, and
    one matching every op moves it almost as far as scaling everything (the
    idle gaps between top-level ops stay)."""
    from pt2chakra.simulation.engine import load

    sim = Simulator(load([str(converted["dlrm_rank0"])]))
    assert sim.prepared(0).sync  # the premise: sync ops are there
    base = sim.predict(SimConfig())
    assert sim.predict(SimConfig(cpu_scale=2.0, cpu_scale_ops="^no such op$")) == base
    every_op = sim.predict(SimConfig(cpu_scale=2.0, cpu_scale_ops="."))
    everything = sim.predict(SimConfig(cpu_scale=2.0))
    assert base < every_op <= everything
    assert every_op > 0.9 * everything

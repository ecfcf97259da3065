"""Which kind's cost is ``microbench --profiler-overhead``'s figure (no torch:
the timings are built)."""

from __future__ import annotations

from pt2chakra.collect.profiler_cost import STEP_KIND, KindCost, ProfilerCost
from pt2chakra.simulation.profiler_overhead import parse_figure

LOOPS = [KindCost("view", 1.0, 12.0, 1.0), KindCost("elementwise", 2.0, 14.0, 1.0),
         KindCost("many_inputs", 3.0, 22.0, 1.0)]


def test_the_figure_is_the_training_steps_cost_per_op() -> None:
    step = KindCost(STEP_KIND, 2000.0, 20000.0, 1000.0)  # 18 us over each of 1000 ops
    cost = ProfilerCost(LOOPS + [step])
    assert cost.per_op_us == 18.0
    assert parse_figure(cost.figure) == 18.0
    assert cost.to_json()["per_op_us"] == 18.0


def test_without_a_step_the_figure_is_the_median_of_the_kinds() -> None:
    assert ProfilerCost(LOOPS).per_op_us == 12.0  # 11, 12, 19 us/op
    # a step that ran no faster under the profiler gives no figure: the loops do
    assert ProfilerCost(LOOPS + [KindCost(STEP_KIND, 2000.0, 1900.0, 1000.0)]).per_op_us == 12.0

"""A lane's busy time is the union of its nodes' spans within the rank's
predicted step: never more than the step (issue 28: a stream "busy 141398 us
(100.0 %)" in a 97,949 us step, its GPU work running past a period step's end)."""

from __future__ import annotations

from pathlib import Path

from builders import cpu, gpu, metadata, write_nodes

from pt2chakra.chakra.records import GlobalMetadata
from pt2chakra.rules.conventions import STEP_DEFINITION_ATTR, STEP_PERIOD
from pt2chakra.simulation import simulate


def test_busy_time_is_clipped_to_the_step(tmp_path: Path) -> None:
    # a period step ends on the CPU (150 us); the kernel it launched runs 400 us
    # into the next step: only its 50 us inside the step are busy time
    md = metadata(0, step=(0, 150))
    md = GlobalMetadata(version=md.version,
                        attrs=[*md.attrs, (STEP_DEFINITION_ATTR, "string_val", STEP_PERIOD)])
    nodes = [cpu(1, 0, 100), cpu(2, 100, 50, deps=[1]),
             gpu(3, 100, 400, deps=[1], kinds=["launch"])]
    result = simulate([write_nodes(tmp_path / "r.et", nodes, md)])
    rank = result.ranks[0]
    assert rank.predicted_step_us == 150.0
    for lane in rank.lanes:
        assert lane.busy_us <= rank.predicted_step_us, lane
        assert abs(lane.busy_us + lane.idle_us - rank.predicted_step_us) < 1e-6, lane
    stream = next(lane for lane in rank.lanes if lane.lane.startswith("gpu"))
    assert stream.busy_us == 50.0

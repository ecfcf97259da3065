"""validate's alignment message names this file and the other one once each
(issue 28: "rank 1 runs 404 collectives of collectives without pg_name, rank 1
(...) runs 10")."""

from __future__ import annotations

from pathlib import Path

from builders import coll, write_rank

from pt2chakra.tools.validate import validate


def test_a_count_mismatch_names_this_file_and_the_other_one(tmp_path: Path) -> None:
    a = write_rank(tmp_path / "a.et", [coll(k, k, pg="") for k in range(1, 5)], rank=0,
                   world_size=2)
    b = write_rank(tmp_path / "b.et", [coll(k, k, pg="") for k in range(1, 3)], rank=1,
                   world_size=2)
    report = validate([a, b])
    lines = [p.message for p in report.errors if "runs" in p.message]
    assert lines, report.problems
    line = lines[0]
    assert "collectives of collectives" not in line
    assert line.startswith("this file runs 2 collectives without pg_name")
    assert f"rank 0 ({a}) runs 4" in line

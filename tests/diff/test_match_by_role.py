"""diff across recordings (issue 28): a step annotation is matched by role
(``ProfilerStep#9`` with ``ProfilerStep#20``) and Python frames with their
object addresses normalised, and the output says how many nodes matched by
which rule."""

from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path

from builders import trace_event

from pt2chakra.conversion.api import convert
from pt2chakra.diff import diff
from pt2chakra.diff.align import ADDRESS, EXACT, STEP_ROLE, normalised
from pt2chakra.diff.api import format_diff

_x = partial(trace_event, pid=1, tid=1)


def _run(tmp_path: Path, name: str, first_step: int, address: str, slow: float) -> Path:
    frame = f"<built-in method apply of type object at {address}>"
    events = []
    for k in range(2):
        s = 1000.0 * k
        events += [_x("user_annotation", f"ProfilerStep#{first_step + k}", s, 999),
                   _x("python_function", frame, s + 10, 500 * slow),
                   _x("cpu_op", "aten::mm", s + 20, 400 * slow),
                   _x("cpu_op", "aten::add", s + 600, 100)]
    path = tmp_path / f"{name}.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    out = tmp_path / f"{name}.et"
    convert(None, path, out)
    return out


def test_names_taken_by_role() -> None:
    assert normalised("ProfilerStep#9") == normalised("ProfilerStep#20") != ("ProfilerStep#9", EXACT)
    assert normalised("ProfilerStep#9")[1] == STEP_ROLE
    a, how = normalised("<built-in method apply of type object at 0x7bcd86e1df60>")
    assert how == ADDRESS and a == normalised("<built-in method apply of type object at 0x55d0aa>")[0]
    assert normalised("aten::mm") == ("aten::mm", EXACT)
    assert normalised("flag 0x1") == ("flag 0x1", EXACT)  # a short hex is a value


def test_two_recordings_match_by_role_and_say_so(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", 9, "0x7bcd86e1df60", 1.0)
    b = _run(tmp_path, "b", 20, "0x7f3e2a01c2b0", 1.5)
    result = diff([a], [b])
    assert result.only_in_a_nodes == result.only_in_b_nodes == 0
    by_rule = result.matched_by_rule
    # a node's own name decides, else its outermost caller taken by role: the
    # step and aten::mm (under the step and the frame) by role, the frame by
    # address, aten::add (no caller recorded) as recorded
    assert by_rule == {EXACT: 1, STEP_ROLE: 2, ADDRESS: 1}
    assert sum(by_rule.values()) == result.matched_nodes
    only = [c for c in result.categories if c.category.startswith("only_in")]
    assert all(c.a_us == c.b_us == 0 for c in only)
    text = format_diff(result)
    assert f"{by_rule[STEP_ROLE]} {STEP_ROLE}" in text and f"{by_rule[ADDRESS]} {ADDRESS}" in text

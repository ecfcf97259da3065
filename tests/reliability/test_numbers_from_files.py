"""Issue 44, items 4 and 5: numbers read from a trace's metadata and from
the files beside it go through the bounded reader of the command line
(``errors.read_number``: finite, in range, one line naming the file and the
field), and JSON beside the traces through one reader with a nesting limit
(``files.read_side_json``). A scaled-out file's ``scaleout_cpu_stretch`` of 1e308 made
``astra-sim`` overflow and ``simulate`` print inf us; a deeply nested
``meta.json`` was a RecursionError."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from builders import comm_node, comp_node, write_nodes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_setup import make_inputs, run_quietly, snapshot

from pt2chakra.chakra.records import GlobalMetadata
from pt2chakra.errors import LATENCY_US, SCALE, STEP_S, Range, read_number
from pt2chakra.files import MAX_DEPTH
from pt2chakra.rules.conventions import (
    SCALEOUT_CPU_STRETCH_ATTR,
    SCALEOUT_HOP_DELAY_ATTR,
    SCALEOUT_RECORDED_WORLD_ATTR,
)

RANGES = {SCALEOUT_CPU_STRETCH_ATTR: SCALE, SCALEOUT_HOP_DELAY_ATTR: LATENCY_US}
MEMBERS = {float: "double_val", int: "int64_val", str: "string_val", bool: "bool_val"}


def outside(allowed: Range) -> st.SearchStrategy[Any]:
    """Values a field of range ``allowed`` must refuse: beyond either end,
    not finite, not a number at all."""
    numbers = st.one_of(st.floats(max_value=allowed.low), st.floats(min_value=allowed.high),
                        st.sampled_from([math.nan, math.inf, -math.inf, 1e308]),
                        st.integers(min_value=int(allowed.high) + 1, max_value=2**63 - 1))
    return st.one_of(numbers.filter(lambda v: not allowed.holds(float(v))),
                     st.text(st.characters(codec="utf-8"), max_size=5), st.booleans())


def _scaled_out_job(folder: Path, field: str, value: Any) -> list[Path]:
    """Two ranks of a job scaled out from 1 recorded rank, ``field`` = ``value``."""
    files = []
    for rank in (0, 1):
        md = GlobalMetadata(version="0.0.4", attrs=[
            ("rank", "int64_val", rank), ("world_size", "int64_val", 2),
            (SCALEOUT_RECORDED_WORLD_ATTR, "int64_val", 1),
            (field, MEMBERS[type(value)], value)])
        files.append(write_nodes(folder / f"s.{rank}.et", [comp_node(1), comm_node(2, [1])], md))
    return files


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), field=st.sampled_from(sorted(RANGES)))
def test_metadata_numbers_out_of_range_are_one_line(data: st.DataObject, field: str) -> None:
    value = data.draw(outside(RANGES[field]))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files = _scaled_out_job(d, field, value)
        before = snapshot(d)
        for argv in (["simulate", *files], ["astra-sim", *files, "-o", d / "j" / "job"]):
            rc, out, err = run_quietly(*argv)
            assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1, (argv, err)
            assert field in err and "s.0.et" in err, (argv, err)
            assert out == "" and snapshot(d) == before
        rc, out, _err = run_quietly("validate", *files)
        assert rc == 1 and "[metadata-number]" in out and field in out, out


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), field=st.sampled_from(sorted(RANGES)))
def test_metadata_numbers_in_range_are_read(data: st.DataObject, field: str) -> None:
    allowed = RANGES[field]
    value = data.draw(st.floats(allowed.low, allowed.high))
    with tempfile.TemporaryDirectory() as tmp:
        files = _scaled_out_job(Path(tmp), field, value)
        rc, out, _err = run_quietly("validate", *files)
        assert "metadata-number" not in out, out


@given(value=st.one_of(st.floats(), st.integers(), st.text(max_size=3), st.none(),
                       st.booleans()))
def test_the_bounded_reader_takes_only_numbers_in_range(value: Any) -> None:
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    try:
        got = read_number(value, SCALE, "f.json", "field x")
    except Exception as exc:  # noqa: BLE001 - which exception is the point
        assert type(exc).__name__ == "InputError" and "f.json: field x" in str(exc)
        assert number is None or not SCALE.holds(float(number))
    else:
        assert number is not None and SCALE.holds(got) and got == number


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers import SAMPLE

    from pt2chakra import convert

    out = tmp_path_factory.mktemp("gpt") / "gpt.et"
    convert(f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz", out)
    return out


@pytest.mark.parametrize("meta", [_nested(100_000), '{"a":' * 5000 + "1" + "}" * 5000,
                                  '{"step_median_s": 1e400}', '{"step_median_s": 1e300}',
                                  '{"step_median_s": 0}', '{"step_median_s": -1}',
                                  '{"step_median_s": "0.1"}', '{"step_median_s": true}',
                                  "[1, 2]", "{"])
def test_meta_json_is_read_bounded(gpt: Path, tmp_path: Path, meta: str) -> None:
    """``simulate --without-profiler`` reads the real step of a meta.json
    beside the trace: nested too deep, not JSON, or a step out of
    ``errors.STEP_S``: one line naming it."""
    trace = tmp_path / "gpt.et"
    trace.write_bytes(gpt.read_bytes())
    (tmp_path / "meta.json").write_text(meta)
    rc, out, err = run_quietly("simulate", trace, "--without-profiler")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "meta.json" in err, err


def test_meta_json_in_range_is_used(gpt: Path, tmp_path: Path) -> None:
    trace = tmp_path / "gpt.et"
    trace.write_bytes(gpt.read_bytes())
    (tmp_path / "meta.json").write_text(json.dumps({"step_median_s": 0.02}))
    rc, out, err = run_quietly("simulate", trace, "--without-profiler", "--json")
    assert rc == 0, err
    assert json.loads(out)["profiler_overhead"]["real_step_us"] == pytest.approx(20_000)
    assert STEP_S.holds(0.02)


def test_side_files_nested_too_deep_are_one_line(gpt: Path, tmp_path: Path) -> None:
    """A conversion report (``report --conversion-report``) and the
    metadata's process groups, nested past ``files.MAX_DEPTH``."""
    deep = tmp_path / "deep.json"
    deep.write_text(_nested(MAX_DEPTH + 1))
    rc, _out, err = run_quietly("report", gpt, "-o", tmp_path / "r.html",
                                "--conversion-report", deep)
    assert rc == 2 and str(deep) in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r.html").exists()
    md = GlobalMetadata(version="0.0.4", attrs=[("process_groups", "string_val",
                                                 _nested(100_000))])
    et = write_nodes(tmp_path / "pg.et", [comp_node(1)], md)
    rc, _out, err = run_quietly("simulate", et)
    assert rc == 2 and "process_groups" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(("field", "value"), [("local-mem-bw", 1e308), ("local-mem-bw", 0),
                                              ("endpoint-delay", 1e300),
                                              ("preferred-dataset-splits", 1e9), (None, None)])
def test_system_json_numbers_are_read_bounded(tmp_path: Path, field: str | None,
                                              value: float | None) -> None:
    """``astra-sim --check`` reads the job's system.json: its numbers within
    range, its nesting limited, one line naming it."""
    i = make_inputs(tmp_path)
    rc, _out, err = run_quietly("astra-sim", i["r0"], i["r1"], "-o", tmp_path / "j" / "job", "-q")
    assert rc == 0, err
    system = tmp_path / "j" / "system.json"
    if field is None:
        system.write_text(_nested(MAX_DEPTH + 1))
    else:
        system.write_text(json.dumps({**json.loads(system.read_text()), field: value}))
    rc, _out, err = run_quietly("astra-sim", "--check", tmp_path / "j" / "job")
    assert rc == 2 and str(system) in err and len(err.splitlines()) == 1, err
    assert field is None or field in err

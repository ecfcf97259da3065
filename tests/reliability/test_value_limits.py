"""Class 6 of issue 25: values are checked once, where each kind of input
enters, against named limits, and refused in one line: integer text in
Kineto fields (``kineto_decode.MAX_INT_DIGITS``, before Python's own
4300-digit limit), option ranges (``cli.options``), the number of ranks
(``many_ranks.MAX_RANKS``), process groups (``chakra.process_groups``, one
parser for validate, simulate and astra-sim), ``--cpu-scale-ops`` patterns
(``op_scale``) and standard input given twice (``files``)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from builders import (
    PID,
    comm_node,
    comp_node,
    host_doc,
    kineto_doc,
    kineto_event,
    metadata,
    trace_event,
    write_json,
    write_nodes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_setup import make_inputs, run_quietly

from pt2chakra.chakra.records import GlobalMetadata
from pt2chakra.conversion.many_ranks import MAX_RANKS
from pt2chakra.errors import MAX_INT_DIGITS
from pt2chakra.simulation.op_scale import MAX_MATCHED_NAME_CHARS

BIG = st.integers(MAX_INT_DIGITS + 1, 6000).map(lambda n: "9" * n)


def _kineto(field: str, value: str) -> dict[str, Any]:
    kernel = dict(stream=7, correlation=5, device=0)
    coll = {"Collective name": "allreduce", "Group size": 2, "In msg nelems": 4}
    if field in kernel:
        return kineto_doc(trace_event("kernel", "k", 1001.0, **{**kernel, field: value}))
    if field in ("pid", "tid"):
        return kineto_doc(trace_event("cpu_op", "aten::y", 1030.0, **{field: value}))
    if field == "External id":
        return kineto_doc(kineto_event("aten::x", 1020.0, 12, **{"External id": value}))
    if field == "Process Group Ranks":
        return kineto_doc(kineto_event("record_param_comms", 1020.0, 12,
                                       **{**coll, field: f"[{value}, 1]"}))
    return kineto_doc(kineto_event("record_param_comms", 1020.0, 12, **{**coll, field: value}))


FIELDS = ["stream", "correlation", "device", "pid", "tid", "External id", "In msg nelems",
          "Group size", "Process Group Ranks"]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(FIELDS), value=BIG, prefix=st.sampled_from(["", "0x", "-"]))
def test_long_integer_text_is_one_line(field: str, value: str, prefix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        k = write_json(d / "k.json", _kineto(field, prefix + value))
        t0 = time.perf_counter()
        rc, _out, err = run_quietly("convert", "--device-trace", k, "-o", d / "o.et")
        assert time.perf_counter() - t0 < 5
        assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert str(k) in err and len(err) < 400, err
        assert not (d / "o.et").exists()


def test_long_integers_in_a_host_trace_are_one_line(tmp_path: Path) -> None:
    doc = host_doc()
    raw = json.dumps(doc).replace(f'"pid": {PID}', '"pid": ' + "9" * 5000, 1)
    (tmp_path / "h.json").write_text(raw)
    rc, _out, err = run_quietly("convert", "--host-trace", tmp_path / "h.json", "-o",
                                tmp_path / "o.et")
    assert rc == 2 and "pid" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("argv, needle", [
    (["--bandwidth", "1e-160"], "--bandwidth"),
    (["--bandwidth", "1e300"], "--bandwidth"),
    (["--bandwidth", "nan"], "--bandwidth"),
    (["--latency", "1e300"], "--latency"),
])
def test_network_options_within_their_range(tmp_path: Path, argv: list[str], needle: str) -> None:
    i = make_inputs(tmp_path)
    rc, _out, err = run_quietly("astra-sim", i["r0"], i["r1"], "-o", tmp_path / "j" / "job", *argv)
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "j").exists()


@pytest.mark.parametrize("bandwidth", ["1e-6", "1e6"])
def test_network_extremes_that_are_accepted_work(tmp_path: Path, bandwidth: str) -> None:
    i = make_inputs(tmp_path)
    rc, _out, err = run_quietly("astra-sim", i["r0"], i["r1"], "-o", tmp_path / "j" / "job",
                                "--bandwidth", bandwidth, "-q")
    assert rc == 0, err


@pytest.mark.parametrize("spec", [f"0-{MAX_RANKS}", "0-1000000", "5-" + "9" * 5000])
def test_rank_specs_beyond_the_limit_are_refused_at_once(tmp_path: Path, spec: str) -> None:
    t0 = time.perf_counter()
    rc, _out, err = run_quietly("convert", "--ranks", spec, "--device-trace",
                                tmp_path / "k{rank}.json", "-o", tmp_path / "o{rank}.et")
    assert time.perf_counter() - t0 < 2
    assert rc == 2 and "--ranks" in err and len(err.splitlines()) == 1, err


BAD_RANK = st.one_of(st.text(max_size=3), st.none(), st.floats(allow_nan=False),
                     st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                     st.integers(max_value=-1), st.integers(min_value=2**31), st.booleans())


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(bad=BAD_RANK, where=st.integers(0, 1))
def test_malformed_process_groups_refused_alike(bad: Any, where: int) -> None:
    """simulate, validate and astra-sim read process groups with one parser,
    so they refuse the same files, in one line (validate: as an error)."""
    ranks: list[Any] = [0, 1]
    ranks[where] = bad
    groups = json.dumps([{"pg_name": "0", "ranks": ranks, "group_size": 2}])
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files = []
        for r in (0, 1):
            md = metadata(rank=r, world_size=2)
            md = GlobalMetadata(version=md.version,
                                attrs=[*md.attrs, ("process_groups", "string_val", groups)])
            files.append(write_nodes(d / f"p{r}.et", [comp_node(1), comm_node(2, [1])], md))
        for argv, status in ((["simulate", *files], 2), (["validate", *files], 1),
                             (["astra-sim", *files, "-o", d / "j" / "job"], 2)):
            rc, out, err = run_quietly(*argv)
            assert rc == status, (argv[0], out, err)
            text = err if status == 2 else out
            assert "process_groups" in text and "Traceback" not in err, text
            if status == 2:
                assert len(err.splitlines()) == 1, err
        assert not (d / "j").exists()


def test_nested_or_long_patterns_are_one_line(tmp_path: Path) -> None:
    i = make_inputs(tmp_path)
    for pattern in ("(" * 3000 + ")" * 3000, "a" * 5000, "(("):
        rc, _out, err = run_quietly("simulate", i["r0"], "--cpu-scale", "2",
                                    "--cpu-scale-ops", pattern)
        assert rc == 2 and "--cpu-scale-ops" in err and len(err.splitlines()) == 1, err


# pattern -> how many of the names below it matches (their first
# MAX_MATCHED_NAME_CHARS characters: 1024, 1024, 1023 a's then "b", 1024 a's)
BACKTRACKING_PATTERNS = {".*forward": 1, "(a+)+$": 3, "(a|aa)*c$": 0, "(.*)*x": 0}


@pytest.mark.parametrize(("pattern", "matched"), BACKTRACKING_PATTERNS.items())
def test_backtracking_pattern_on_long_names_is_bounded(pattern: str, matched: int) -> None:
    """'.*forward' over a 100 kB name took 23 s, '(a+)+$' over 1024 a's never
    ends with Python's re: names are searched in linear time
    (``linear_regex``) on their first MAX_MATCHED_NAME_CHARS characters."""
    from pt2chakra.simulation.op_scale import compile_ops, covered_time

    names = ["a" * n + "b" + str(k) for k, n in enumerate((1024, 100_000, 1023, 5000))]
    names.append("a.forward")
    t0 = time.perf_counter()
    covered = covered_time(names, [0] * 5, [float(k) for k in range(5)], [0.5] * 5, [True] * 5,
                           compile_ops(pattern))
    assert time.perf_counter() - t0 < 20  # generous: the backtracking search would not end
    assert covered.within(0, 0, 10) == 0.5 * matched
    assert MAX_MATCHED_NAME_CHARS < 100_000


@pytest.mark.parametrize("argv", [["diff", "-", "vs", "-"], ["report", "-", "--baseline", "-",
                                                             "-o", "r.html"],
                                  ["astra-sim", "-", "-", "-o", "j/job"], ["simulate", "-", "-"]])
def test_standard_input_given_twice_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    import subprocess
    import sys

    i = make_inputs(tmp_path)
    with open(i["r0"], "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "pt2chakra", *argv], stdin=stdin,
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert any(w in done.stderr for w in ("standard input", "twice")), done.stderr

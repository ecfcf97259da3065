"""The tools never destroy their input, leave no partial multi-file output
behind, and validate catches collectives that cannot rendezvous and
ctrl_deps cycles. Through the CLI (subprocess) where it is about the CLI."""

from __future__ import annotations

import json

import pytest
from builders import IS_CPU, coll, node, write_nodes, write_rank
from helpers import assert_one_line_failure, run_cli

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch

WORKLOAD = "MICRO\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 100 5\n"


def _small(tmp_path, name="s.et", rank=0):
    return write_rank(tmp_path / name, [coll(1, 0, start=5), coll(2, 1, [1], start=20)], rank)


def _listing(folder):
    return sorted(p.name for p in folder.iterdir())


# -- 1. an output equal to an input is refused, before any work -------------------------


@pytest.mark.parametrize("case", ["jsonize", "timeline", "from-json", "graph", "astra-sim",
                                  "astra-sim-other-rank", "from-json-astra-sim", "from-text"])
def test_output_equal_to_an_input_is_refused(tmp_path, case):
    et = _small(tmp_path, "s.0.et")
    js = tmp_path / "s.json"
    assert run_cli("jsonize", et, "-o", js).returncode == 0
    txt = tmp_path / "w.0.et"
    txt.write_text(WORKLOAD)
    args, victim = {
        "jsonize": (["jsonize", et, "-o", et], et),
        "timeline": (["timeline", et, "-o", et], et),
        "from-json": (["from-json", js, "-o", js], js),
        "graph": (["graph", et, "-o", et], et),
        "astra-sim": (["astra-sim", et, "-o", tmp_path / "s"], et),
        "astra-sim-other-rank": (["astra-sim", _small(tmp_path, "x.et", rank=1), et,
                                  "-o", tmp_path / "s"], et),
        "from-json-astra-sim": (["from-json", js, "--consumer", "astra-sim", "-o",
                                 tmp_path / "s.json", "--rank", "0"], None),
        "from-text": (["from-text", txt, "--npus", "2", "-o", tmp_path / "w"], txt),
    }[case]
    if victim is None:  # <prefix>.<rank>.et == the input
        victim = tmp_path / "s.json.0.et"
        victim.write_bytes(js.read_bytes())
        args[1] = victim
    before = victim.read_bytes()
    listing = _listing(tmp_path)
    proc = run_cli(*args)
    assert_one_line_failure(proc, str(victim), "refusing to overwrite an input")
    assert proc.returncode == 2
    assert victim.read_bytes() == before
    assert _listing(tmp_path) == listing  # nothing else written either


def test_graph_refuses_the_same_file_by_another_name(tmp_path):
    et = _small(tmp_path, "s.dot")  # odd name, but it is the input
    proc = run_cli("graph", et, "-o", tmp_path / "." / "s.dot")
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr


# -- 2. multi-file outputs: all or nothing ---------------------------------------------


def _truncated(tmp_path, name="t.1.et"):
    good = _small(tmp_path, "full.tmp.et", rank=1)
    data = good.read_bytes()
    bad = tmp_path / name
    bad.write_bytes(data[:-7])  # metadata intact, last node cut short
    good.unlink()
    return bad


def test_astra_sim_unreadable_later_input_writes_nothing(tmp_path):
    first = _small(tmp_path, "in.0.et")
    bad = _truncated(tmp_path)
    old = tmp_path / "ap.0.et"
    old.write_bytes(b"from an earlier run")
    listing = _listing(tmp_path)
    proc = run_cli("astra-sim", first, bad, "-o", tmp_path / "ap")
    assert_one_line_failure(proc, str(bad))
    assert proc.returncode == 2
    assert _listing(tmp_path) == listing  # no new output, no temp file
    assert old.read_bytes() == b"from an earlier run"  # the earlier output survives


@pytest.mark.parametrize(("second_name", "needle"), [
    (None, "given twice"),  # the same file twice
    ("copy.0.et", "rank 0 again"),  # two files that are both rank 0
])
def test_astra_sim_repeated_rank_writes_nothing(tmp_path, second_name, needle):
    first = _small(tmp_path, "in.0.et")
    second = first
    if second_name is not None:
        second = tmp_path / second_name
        second.write_bytes(first.read_bytes())
    listing = _listing(tmp_path)
    proc = run_cli("astra-sim", first, second, "-o", tmp_path / "ap")
    assert_one_line_failure(proc, needle)
    assert proc.returncode == 2
    assert _listing(tmp_path) == listing


def test_astra_sim_failure_while_moving_outputs_removes_this_runs_files(tmp_path):
    a, b = _small(tmp_path, "in.0.et"), _small(tmp_path, "in.1.et", rank=1)
    (tmp_path / "ap.1.et").mkdir()  # the second output cannot replace a folder
    listing = _listing(tmp_path)
    proc = run_cli("astra-sim", a, b, "-o", tmp_path / "ap")
    assert_one_line_failure(proc)
    assert proc.returncode == 2
    assert _listing(tmp_path) == listing  # ap.0.et, written first, is gone again
    ok = run_cli("astra-sim", a, b, "-o", tmp_path / "ok")
    assert ok.returncode == 0, ok.stderr
    job_files = [str(tmp_path / name) for name in
                 ("network.yml", "system.json", "memory.json", "run.sh")]  # the job beside them
    assert ok.stdout.split() == [str(tmp_path / "ok.0.et"), str(tmp_path / "ok.1.et"), *job_files]


@pytest.mark.parametrize("command", ["from-text", "microbench"])
def test_text_outputs_are_all_or_nothing(tmp_path, command):
    txt = tmp_path / "w.txt"
    txt.write_text(WORKLOAD)
    (tmp_path / "o.2.et").mkdir()
    listing = _listing(tmp_path)
    args = (["from-text", txt] if command == "from-text"
            else ["microbench", "--size", "1024"]) + ["--npus", "4", "-o", tmp_path / "o"]
    proc = run_cli(*args)
    assert_one_line_failure(proc)
    assert proc.returncode == 2
    assert _listing(tmp_path) == listing


# -- 3. collectives matched as the simulator matches them -------------------------------


def test_validate_crossed_comm_seq_is_a_deadlock(tmp_path):
    # rank 0: seq 0 then seq 1; rank 1: seq 1 then seq 0 (data dependencies)
    r0 = write_rank(tmp_path / "x.0.et", [coll(1, 0), coll(2, 1, [1])], 0)
    r1 = write_rank(tmp_path / "x.1.et", [coll(1, 1), coll(2, 0, [1])], 1)
    proc = run_cli("validate", r0, r1)
    assert proc.returncode == 1, proc.stdout
    assert "[collective-order]" in proc.stdout and "NOT sound" in proc.stdout
    report = json.loads(run_cli("validate", r0, r1, "--json").stdout)
    assert report["sound"] is False
    assert [p["check"] for p in report["problems"]] == ["collective-order"]


def test_validate_crossed_comm_seq_on_one_stream_is_a_deadlock(tmp_path):
    # no data dependencies: the stream runs them in recorded order
    r0 = write_rank(tmp_path / "x.0.et", [coll(1, 0, start=10, stream=7),
                                          coll(2, 1, start=20, stream=7)], 0)
    r1 = write_rank(tmp_path / "x.1.et", [coll(1, 1, start=10, stream=7),
                                          coll(2, 0, start=20, stream=7)], 1)
    proc = run_cli("validate", r0, r1)
    assert proc.returncode == 1 and "[collective-order]" in proc.stdout


def test_validate_matches_by_comm_seq_not_recorded_order(tmp_path):
    # Two independent streams: recorded order differs per rank, but comm_seq
    # matches them, the types agree and nothing waits on anything: sound.
    r0 = write_rank(tmp_path / "y.0.et", [coll(1, 0, start=10, stream=7, comm_type=0),
                                          coll(2, 1, start=20, stream=8, comm_type=2)], 0)
    r1 = write_rank(tmp_path / "y.1.et", [coll(1, 1, start=10, stream=8, comm_type=2),
                                          coll(2, 0, start=20, stream=7, comm_type=0)], 1)
    proc = run_cli("validate", r0, r1)
    assert proc.returncode == 0, proc.stdout
    assert "0 error(s)" in proc.stdout


def test_validate_comm_seq_without_a_match(tmp_path):
    r0 = write_rank(tmp_path / "z.0.et", [coll(1, 0), coll(2, 1, [1])], 0)
    r1 = write_rank(tmp_path / "z.1.et", [coll(1, 0), coll(2, 2, [1])], 1)
    proc = run_cli("validate", r0, r1)
    assert proc.returncode == 1
    assert "seq 1 of process group '0'" in proc.stdout and "no match" in proc.stdout
    twice = write_rank(tmp_path / "d.0.et", [coll(1, 0), coll(2, 0, [1])], 0)
    proc = run_cli("validate", twice, write_rank(tmp_path / "d.1.et", [coll(1, 0)], 1))
    assert proc.returncode == 1 and "appears twice here" in proc.stdout


# -- 4. ctrl_deps cycles -----------------------------------------------------------------


def test_validate_warns_on_a_ctrl_deps_cycle(tmp_path):
    nodes = [node(nid, name=name, ctrl=[ctrl], dur=1, attrs=[IS_CPU])
             for nid, name, ctrl in ((1, "a", 3), (2, "b", 1), (3, "c", 2))]
    path = write_nodes(tmp_path / "c.et", nodes)
    proc = run_cli("validate", path)
    assert proc.returncode == 0, proc.stdout  # a warning: data_deps replay fine
    assert "warning: [ctrl-cycle]" in proc.stdout and "1 warning(s)" in proc.stdout
    assert all(f"{i} ({n})" in proc.stdout for i, n in ((1, "a"), (2, "b"), (3, "c")))


def test_validate_repeated_comm_seq_against_distinct_ones(tmp_path):
    r0 = write_rank(tmp_path / "e.0.et", [coll(1, 0), coll(2, 1, [1])], 0)
    r1 = write_rank(tmp_path / "e.1.et", [coll(1, 0), coll(2, 0, [1])], 1)
    for files in ((r0, r1), (r1, r0)):
        proc = run_cli("validate", *files)
        assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr
        assert "appears twice here" in proc.stdout and "no match" in proc.stdout

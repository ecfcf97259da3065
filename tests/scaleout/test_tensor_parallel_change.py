"""A tensor-parallel job at another degree (``--tensor-parallel T``,
scaleout/retime.py): the ops on a shard re-timed by the compute model on
each thread's own clock, the job's ranks and groups at T, and one-line
refusals of what the rule does not cover."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import cpu_attrs, layout_rank, node, write_layout_job
from helpers import assert_one_line_failure, run_cli
from hypothesis import given
from hypothesis import strategies as st

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.layout import sharded_op_degrees
from pt2chakra.scaleout import simulate_world_size
from pt2chakra.scaleout.api import extrapolate
from pt2chakra.scaleout.retime import (
    TensorParallelChange,
    ThreadClock,
    _Span,
    retime_rank,
    time_factor,
)
from pt2chakra.simulation.compute_model import KindFit


def _rank(world: int, r: int = 0) -> tuple[GlobalMetadata, list[ChakraNode]]:
    return layout_rank("tp", r, world)


def _local_addmm(nodes: list[ChakraNode]) -> ChakraNode:
    degrees = sharded_op_degrees(nodes)
    (nid,) = [n for n in degrees if degrees[n] > 1]
    return next(n for n in nodes if n.id == nid)


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 100), st.floats(0.1, 4.0)),
                max_size=8), st.lists(st.integers(0, 2000), min_size=2, max_size=20))
def test_a_thread_clock_keeps_order_and_moves_time_only_inside_the_spans(
        raw: list[tuple[int, int, float]], moments: list[int]) -> None:
    spans, end = [], 0
    for gap, length, factor in raw:  # disjoint, in order
        spans.append(_Span(end + gap, end + gap + length, factor))
        end += gap + length
    clock = ThreadClock(spans)
    moved = [clock.at(t) for t in sorted(moments)]
    assert moved == sorted(moved)  # order kept
    assert clock.at(end + 5) - (end + 5) == pytest.approx(-clock.taken())
    if all(s.factor == 1.0 for s in spans):
        assert moved == sorted(moments)
    for s in spans:  # a moment's move is the time taken out before it
        assert clock.at(s.end) - clock.at(s.start) == pytest.approx(s.factor * (s.end - s.start))


@given(st.sampled_from([2, 4, 8]))
def test_the_recorded_degree_gives_the_recordings_nodes_back(world: int) -> None:
    md, nodes = _rank(world)
    new_md, out, counts = retime_rank(md, nodes, TensorParallelChange(world, world), "tp.et")
    assert out == nodes and new_md == md
    assert counts.ops == 1 and counts.retimed_us == counts.recorded_us


def test_a_shard_twice_as_large_takes_twice_as_long_and_the_thread_moves_on() -> None:
    md, nodes = _rank(4)
    local = _local_addmm(nodes)
    _md, out, counts = retime_rank(md, nodes, TensorParallelChange(4, 2), "tp.et")
    by_id = {n.id: n for n in out}
    grown = by_id[local.id]
    assert grown.start_time_micros == local.start_time_micros
    assert grown.duration_micros == 2 * local.duration_micros  # one size: by its work
    assert counts.proportional == 1
    for before, after in zip(nodes, out, strict=True):
        if before.start_time_micros >= local.start_time_micros + local.duration_micros:
            assert after.start_time_micros == before.start_time_micros + local.duration_micros


def test_a_kind_with_a_rate_keeps_its_fixed_cost() -> None:
    fit = KindFit("matmul", "GFLOP", 10, fixed_us=10.0, us_per_unit=2.0, rms_error_pct=1.0,
                  smallest=1.0, largest=8.0)
    factor, assumed = time_factor(fit, 5.0, 0.5)  # 20 us of 5 GFLOP -> 2.5 GFLOP: 15 us
    assert factor == pytest.approx(15.0 / 20.0) and not assumed
    assert time_factor(None, 5.0, 0.5) == (0.5, True)


def test_extrapolate_writes_the_job_at_the_new_degree(tmp_path: Path) -> None:
    ranks = write_layout_job(tmp_path / "rec", "tp", 2)
    summary = extrapolate(ranks, 4, tmp_path / "tp4", tensor_parallel=True)
    text = summary.describe()
    assert "tensor parallel 2 -> 4" in text and "ops on a shard re-timed" in text
    files = sorted(tmp_path.glob("tp4.*.et"))
    assert len(files) == 4
    md, nodes = read_et(files[3])
    assert attr_dict(md.attrs)["world_size"] == 4
    local = _local_addmm(list(layout_rank("tp", 1, 2)[1]))
    moved = next(n for n in nodes if n.id == local.id)
    assert moved.duration_micros < local.duration_micros  # half the shard: shorter


def test_simulate_predicts_the_new_degree_and_says_what_it_re_timed(tmp_path: Path) -> None:
    ranks = write_layout_job(tmp_path / "rec", "tp", 2)
    run = simulate_world_size(ranks, 4, tensor_parallel=True)
    text = run.breakdown().describe()
    assert "tensor parallel 2 -> 4" in text and "rank 0: 1 ops on a shard re-timed" in text
    proc = run_cli("simulate", *ranks, "--tensor-parallel", "4")
    assert proc.returncode == 0, proc.stderr
    assert "tensor parallel 2 -> 4" in proc.stdout


@pytest.mark.parametrize("kind", ["ddp", "fsdp2", "tp_dp", "pp"])
def test_a_job_that_is_not_one_tensor_parallel_group_is_refused(kind: str,
                                                                tmp_path: Path) -> None:
    world = 4 if kind in ("tp_dp",) else 2
    ranks = write_layout_job(tmp_path / "rec", kind, world)
    proc = run_cli("extrapolate", *ranks, "--tensor-parallel", "4", "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "--tensor-parallel changes a job of one tensor-parallel group")
    assert not list(tmp_path.glob("out*"))


def test_a_world_size_other_than_the_degree_is_refused(tmp_path: Path) -> None:
    ranks = write_layout_job(tmp_path / "rec", "tp", 2)
    proc = run_cli("extrapolate", *ranks, "--tensor-parallel", "4", "--world-size", "8",
                   "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "--world-size")
    assert not list(tmp_path.glob("out*"))
    proc = run_cli("extrapolate", *ranks, "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert_one_line_failure(proc, "unless --tensor-parallel gives the degree")


def test_device_kernels_are_refused(tmp_path: Path) -> None:
    from builders import write_job_ranks

    def with_kernel(kind: str, r: int, world: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
        md, nodes = layout_rank(kind, r, world)
        return md, [*nodes, node(len(nodes) + 1, name="sm90_gemm", start=5, dur=3)]  # a device op

    paths = write_job_ranks(tmp_path / "rec", "tp", 2, with_kernel)
    with pytest.raises(InputError, match="re-timing device kernels by their shard is not built"):
        extrapolate(paths, 4, tmp_path / "out", tensor_parallel=True)
    assert not list(tmp_path.glob("out*"))


def test_ops_on_other_threads_keep_their_time() -> None:
    md, nodes = _rank(2)
    other = node(len(nodes) + 1, name="aten::add_", start=nodes[-1].start_time_micros + 50,
                 dur=7, attrs=cpu_attrs(tid=9))
    _md, out, _c = retime_rank(md, [*nodes, other], TensorParallelChange(2, 4), "tp.et")
    assert out[-1] == other


def test_astra_sim_writes_the_job_at_the_new_degree(tmp_path: Path) -> None:
    ranks = write_layout_job(tmp_path / "rec", "tp", 2)
    proc = run_cli("astra-sim", *ranks, "--tensor-parallel", "4", "-o", tmp_path / "astra" / "job")
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "astra").glob("job.*.et"))) == 4

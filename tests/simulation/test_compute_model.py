"""The compute model (issue 48): each kind of op's time against the work of
its input shapes, fitted on a recording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import convert_gloo_pair, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.rules.layout import SUBCLASS_DISPATCH
from pt2chakra.simulation.compute_model import (
    ELEMENTWISE,
    MATMUL,
    fit_compute_model,
    op_work,
    own_times,
)


def _op(i: int, name: str, start: int, dur: int, shapes: list[list[int]] | None = None,
        tid: int = 1, caller: int | None = None) -> ChakraNode:
    inputs = None if shapes is None else ("[]", json.dumps(shapes), "[]")
    return ChakraNode(i, name, NodeType.COMP_NODE, start_time_micros=start,
                      duration_micros=dur, inputs=inputs,
                      ctrl_deps=[] if caller is None else [caller],
                      attrs=[("is_cpu_op", "bool_val", True), ("tid", "int64_val", tid)])


@pytest.mark.parametrize(("name", "shapes", "kind", "units"), [
    ("aten::mm", [[16, 512], [512, 256]], MATMUL, 2 * 16 * 512 * 256 / 1e9),
    ("aten::addmm", [[256], [16, 512], [512, 256], [], []], MATMUL, 2 * 16 * 512 * 256 / 1e9),
    ("aten::bmm", [[8, 16, 64], [8, 64, 32]], MATMUL, 2 * 8 * 16 * 64 * 32 / 1e9),
    ("aten::relu", [[16, 512]], "aten::relu", 16 * 512 / 1e6),
    ("aten::add", [[4, 4], [16, 512], []], "aten::add", 16 * 512 / 1e6),
])
def test_the_work_of_an_op_comes_from_its_shapes(name: str, shapes: list[list[int]], kind: str,
                                                 units: float) -> None:
    work = op_work(name, json.dumps(shapes))
    assert work is not None and work.kind == kind and work.units == pytest.approx(units)


@pytest.mark.parametrize(("name", "shapes"), [
    ("aten::view", "[[16,512],[]]"), ("aten::t", "[[512,512]]"),  # views touch no element
    ("AddmmBackward0", "[[16,512]]"), (SUBCLASS_DISPATCH, "[[16,512]]"),  # records outside ATen
    ("aten::relu", "[[],[]]"), ("aten::relu", "not json"), ("aten::relu", None),
])
def test_no_work_where_the_op_touches_no_tensor(name: str, shapes: str | None) -> None:
    assert op_work(name, shapes) is None


def test_an_op_owns_its_span_less_its_callees() -> None:
    own = own_times([_op(1, "aten::relu", 100, 100, [[4]]),
                     _op(2, "aten::clamp_min", 110, 30, [[4]], caller=1),
                     _op(3, "aten::mm", 100, 50, [[2, 2], [2, 2]], tid=2, caller=1)])
    # 3 is filed under 1 but ran on another thread: not its callee
    assert own.us == {1: 70.0, 2: 30.0, 3: 50.0}
    assert [c.id for c in own.callees[1]] == [2]


def test_wrappers_and_subclass_ops_are_left_out_of_the_fit() -> None:
    shard = [[16, 512], [512, 256]]
    nodes = [_op(1, "aten::mm", 1, 500, [[16, 512], [512, 512]]),  # calls its shard's mm
             _op(2, "aten::mm", 10, 480, shard, caller=1),
             _op(3, "aten::mm", 1000, 12, [[16, 512], [512, 512]]),  # the DTensor's record
             _op(4, SUBCLASS_DISPATCH, 1005, 60, shard, caller=3),
             _op(5, "aten::mm", 1020, 480, shard, caller=4)]  # outlasts its callers' spans
    model = fit_compute_model(nodes)
    matmul = next(k for k in model.cpu.kinds if k.kind == MATMUL)
    assert matmul.ops == 2 and matmul.fixed_us == 480.0  # the shards' only


def test_one_size_leaves_the_rate_unknown() -> None:
    nodes = [_op(i, "aten::mm", 1000 * i, 200 + i, [[16, 512], [512, 512]]) for i in range(5)]
    matmul = fit_compute_model(nodes).cpu.kinds[0]
    assert matmul.us_per_unit is None and "rate unknown" in "".join(fit_compute_model(nodes).lines())
    assert matmul.time_us(matmul.smallest) == matmul.fixed_us
    assert matmul.time_us(2 * matmul.smallest) is None


def test_an_op_name_with_few_instances_joins_the_pooled_kind() -> None:
    nodes = [_op(i, "aten::gelu", 1000 * i, 10 + i, [[16, 64 * (i + 1)]]) for i in range(2)]
    assert [k.kind for k in fit_compute_model(nodes).cpu.kinds] == [ELEMENTWISE]


@settings(max_examples=50, deadline=None)
@given(fixed=st.floats(0, 500), rate=st.floats(1, 1e4),
       rows=st.lists(st.integers(1, 64), min_size=2, max_size=12, unique=True))
def test_the_fit_recovers_a_linear_kind(fixed: float, rate: float, rows: list[int]) -> None:
    """Times exactly linear in the FLOPs: the fit gives back both terms."""
    nodes = []
    for i, m in enumerate(rows):
        work = op_work("aten::mm", json.dumps([[m, 256], [256, 256]]))
        assert work is not None
        nodes.append(_op(i, "aten::mm", 1 + 10_000_000 * i, round(fixed + rate * work.units * 1e3),
                         [[m, 256], [256, 256]]))
    fit = fit_compute_model(nodes).cpu.kinds[0]
    assert fit.us_per_unit is not None
    model = [fit.fixed_us + fit.us_per_unit * op_work("aten::mm", n.inputs[1]).units  # type: ignore[index,union-attr]
             for n in nodes]
    assert all(abs(m - n.duration_micros) <= 1.0 for m, n in zip(model, nodes, strict=True))


def test_inspect_prints_the_compute_model(tmp_path) -> None:
    sample = convert_gloo_pair(tmp_path)[0]
    proc = run_cli("inspect", str(sample), "--compute-model")
    assert proc.returncode == 0, proc.stderr
    assert "compute model (" in proc.stdout and "matmul" in proc.stdout
    doc = json.loads(run_cli("inspect", str(sample), "--compute-model", "--json").stdout)
    assert MATMUL in [k["kind"] for k in doc["compute_model"]["cpu"]["kinds"]]
    assert doc["compute_model"]["device"] is None  # a CPU job: no kernels
    assert "compute_model" not in json.loads(run_cli("inspect", str(sample), "--json").stdout)


def test_the_device_side_fits_the_kernels_each_op_launched() -> None:
    """Two kernels of one op count as its device time; ops of three sizes
    give the kernels' rate, the CPU side its own."""
    nodes: list[ChakraNode] = []
    for i, m in enumerate((16, 32, 64, 128)):
        op = _op(10 * i + 1, "aten::mm", 1000 * i + 1, 20, [[m, 1024], [1024, 1024]])
        work = op_work("aten::mm", op.inputs[1])  # type: ignore[index]
        assert work is not None
        half = 3.0 + 500.0 * work.units  # two kernels: 6 us fixed, 1000 us per GFLOP
        nodes.append(op)
        nodes += [ChakraNode(10 * i + k, "gemm", NodeType.COMP_NODE, 1000 * i + 5, round(half),
                             data_deps=[op.id], attrs=[("data_dep_kinds", "string_list",
                                                        ["launch"])])
                  for k in (2, 3)]
    model = fit_compute_model(nodes)
    assert model.device is not None
    matmul = model.device.kinds[0]
    assert matmul.kind == MATMUL and matmul.ops == 4
    assert matmul.us_per_unit == pytest.approx(1000.0, rel=0.05)
    assert matmul.fixed_us == pytest.approx(6.0, abs=1.5)


H200_GPT = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "h200" / "gpt"
# An H200's dense bf16 peak is about 1 PFLOP/s: its matrix multiplies cost at
# least ~1 us per GFLOP, and a GPT step's large ones run within a few times that.
H200_US_PER_GFLOP = (0.9, 5.0)


@pytest.mark.skipif(not H200_GPT.is_dir(), reason="../shared/traces/h200/gpt not present")
def test_the_h200_step_gives_its_matrix_multiplies_a_rate(tmp_path: Path) -> None:
    from pt2chakra import convert
    from pt2chakra.chakra.io import read_et

    et = tmp_path / "gpt.et"
    convert(H200_GPT / "rank0.host_et.json.gz", H200_GPT / "rank0.kineto.json.gz", et)
    device = fit_compute_model(list(read_et(et)[1])).device
    assert device is not None
    matmul = next(k for k in device.kinds if k.kind == MATMUL)
    assert matmul.us_per_unit is not None and matmul.largest > matmul.smallest
    assert H200_US_PER_GFLOP[0] <= matmul.us_per_unit <= H200_US_PER_GFLOP[1]
    assert matmul.rms_error_pct < 20

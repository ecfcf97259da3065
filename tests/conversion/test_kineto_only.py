"""Kineto-only conversion (no host ET) of the shared traces and the gloo
sample: sound, every GPU activity of the step a node, every event accounted
for, and a replay within 5 % of the measured step (the acceptance target)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, assert_one_line_failure, run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.conversion.api import ConversionReport, convert
from pt2chakra.conversion.kineto_only import (
    KINETO_ONLY,
    OUTSIDE_STEP,
    _callers,
    _ordered,
    link_kineto_only,
)
from pt2chakra.conversion.step import STAND_IN_CATEGORIES
from pt2chakra.conversion.step import kineto_step as step_window
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.pytorch.records import CpuEvent, KinetoTrace
from pt2chakra.rules.conventions import COMM_NODE_TYPES, is_gpu
from pt2chakra.simulation import simulate
from pt2chakra.tools.validate import validate

pytestmark = pytest.mark.slow  # real traces, converted and replayed

# The acceptance target of the issue: replay within 5 % of the measured step.
MAX_ERROR_PCT = 5.0
GLOO = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"

KINETO_ONLY_TRACES = {
    "alexnet": "hta_kineto/alexnet.kineto.json.gz",
    "cuda_event_sync": "hta_kineto/cuda_event_sync.kineto.json.gz",
    "resnet_kineto_only": "resnet_kineto_only/kineto.json.gz",
    **{f"dlrm_rank{r}": f"dlrm_8gpu/rank{r}.kineto.json.gz" for r in range(8)},
}


def _nodes(path: Path) -> list:
    _meta, nodes = read_et(str(path))
    return list(nodes)


def _gpu_nodes(nodes: list) -> list:
    return [n for n in nodes if is_gpu(attr_dict(n.attrs)) and "stream" in attr_dict(n.attrs)]


def _comm(nodes: list) -> Counter[tuple[int, Any, Any]]:
    return Counter((int(n.type), attr_dict(n.attrs).get("comm_type"),
                    attr_dict(n.attrs).get("comm_size")) for n in nodes
                   if n.type in COMM_NODE_TYPES)


@pytest.fixture(scope="module")
def kineto_only(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, ConversionReport]]:
    out = tmp_path_factory.mktemp("kineto_only")
    result = {}
    for name, rel in KINETO_ONLY_TRACES.items():
        path = out / f"{name}.et"
        result[name] = (path, convert(None, traces / rel, path))
    return result


@pytest.mark.parametrize("name", sorted(KINETO_ONLY_TRACES))
def test_converts_sound_and_accounted(traces, kineto_only, name: str) -> None:
    path, report = kineto_only[name]
    assert report.accounted() and report.link_method == KINETO_ONLY
    assert report.host_trace is None and report.step
    # every event of the file has a line in the report
    kineto = load_kineto_trace(traces / KINETO_ONLY_TRACES[name])
    assert report.kineto_events["GPU activities"] == len(kineto.gpu_activities)
    assert report.host_ops_in == len(kineto.cpu_events) + len(kineto.python_events)
    assert validate([str(path)]).sound


@pytest.mark.parametrize("name", sorted(KINETO_ONLY_TRACES))
def test_a_gpu_node_for_every_kernel_memcpy_memset_of_the_step(traces, kineto_only, name: str) -> None:
    path, report = kineto_only[name]
    kineto = load_kineto_trace(traces / KINETO_ONLY_TRACES[name])
    window = step_window(kineto)
    launches = {rt.correlation: rt.ts for rt in kineto.runtime_events if rt.correlation >= 0}
    in_step = [a for a in kineto.gpu_activities
               if window.start <= launches.get(a.correlation, a.ts) <= window.end]
    gpu = [n for n in _gpu_nodes(_nodes(path))
           if attr_dict(n.attrs).get("category") not in STAND_IN_CATEGORIES]
    assert len(gpu) == len(in_step) == report.gpu_activities_kept
    assert Counter(attr_dict(n.attrs)["correlation"] for n in gpu) == \
        Counter(a.correlation for a in in_step)


@pytest.mark.parametrize("name", ["alexnet", "cuda_event_sync", "resnet_kineto_only",
                                  "dlrm_rank0", "dlrm_rank3"])
def test_replay_within_5_percent(kineto_only, name: str) -> None:
    path, _report = kineto_only[name]
    result = simulate([str(path)])
    assert result.error_pct is not None and abs(result.error_pct) < MAX_ERROR_PCT


def test_dlrm_eight_ranks_replay_within_5_percent(kineto_only) -> None:
    result = simulate([str(kineto_only[f"dlrm_rank{r}"][0]) for r in range(8)])
    assert result.error_pct is not None and abs(result.error_pct) < MAX_ERROR_PCT


@pytest.mark.parametrize("rank", range(8))
def test_dlrm_same_gpu_nodes_and_collectives_as_host_plus_kineto(traces, kineto_only, tmp_path,
                                                                 rank: int) -> None:
    both = tmp_path / "both.et"
    convert(traces / f"dlrm_8gpu/rank{rank}.host_et.json.gz",
            traces / f"dlrm_8gpu/rank{rank}.kineto.json.gz", both)
    alone, with_host = _nodes(kineto_only[f"dlrm_rank{rank}"][0]), _nodes(both)
    assert len(_gpu_nodes(alone)) == len(_gpu_nodes(with_host))
    comm = _comm(alone)
    assert comm == _comm(with_host) and sum(comm.values()) == 8
    assert all(size and size > 0 for (_t, _c, size) in comm)


def test_step_is_the_last_profiler_step_else_the_whole_trace(traces) -> None:
    dlrm = load_kineto_trace(traces / "dlrm_8gpu/rank0.kineto.json.gz")
    assert step_window(dlrm).label == "ProfilerStep#10"
    alexnet = load_kineto_trace(traces / "hta_kineto/alexnet.kineto.json.gz")
    window = step_window(alexnet)
    assert window.label == "whole trace"
    assert window.start == min(min(e.ts for e in alexnet.cpu_events),
                               min(e.ts for e in alexnet.gpu_activities))


def test_events_outside_the_step_are_dropped_with_a_reason() -> None:
    def ev(name: str, ts: float, dur: float) -> CpuEvent:
        return CpuEvent(name, "cpu_op", ts, dur, 1, 1)

    kineto = KinetoTrace("k.json", [ev("before", 0, 5), ev("ProfilerStep#2", 30, 10),
                                    ev("in", 31, 2)], [], [], [])
    found = link_kineto_only(kineto)  # a lone step: its own span
    assert [op.name for op in found.linked.ops] == ["ProfilerStep#2", "in"]
    assert found.linked.ops[1].parent == found.linked.ops[0].id
    assert found.dropped == {OUTSIDE_STEP: 1}
    assert found.window.definition == "span"
    # a step followed by another is a steady-state period up to the next
    # start: the last such one (the very last is often cut short)
    kineto.cpu_events = [ev("ProfilerStep#1", 10, 10), *kineto.cpu_events,
                         ev("ProfilerStep#3", 50, 10)]
    found = link_kineto_only(kineto)
    assert [op.name for op in found.linked.ops] == ["ProfilerStep#2", "in"]
    assert (found.window.start, found.window.end, found.window.definition) == (30, 50, "period")
    assert found.dropped == {OUTSIDE_STEP: 3}


def test_callers_nest_by_time_per_thread() -> None:
    events = _ordered([CpuEvent("a", "cpu_op", 0, 10, 1, 1), CpuEvent("b", "cpu_op", 1, 3, 1, 1),
                       CpuEvent("c", "cpu_op", 5, 2, 1, 1), CpuEvent("x", "cpu_op", 2, 1, 1, 2),
                       CpuEvent("d", "cpu_op", 12, 1, 1, 1)])
    names = [e.name for e in events]
    parents = {e.name: (names[p] if p >= 0 else None) for e, p in zip(events, _callers(events))}
    assert parents == {"a": None, "b": "a", "x": None, "c": "a", "d": None}


def test_collectives_carry_size_and_pg_from_gloo_kineto(tmp_path) -> None:
    path = tmp_path / "gloo.et"
    report = convert(None, f"{GLOO}.rank0.kineto.json.gz", path)
    assert report.accounted()
    comm = [n for n in _nodes(path) if n.type in COMM_NODE_TYPES]
    assert len(comm) == 5
    for node in comm:
        a = attr_dict(node.attrs)
        assert a["comm_size"] > 0 and a["pg_name"] == "0", node.name


def test_gloo_kineto_only_two_ranks_within_5_percent(tmp_path) -> None:
    paths = []
    for r in (0, 1):
        paths.append(str(tmp_path / f"gloo.{r}.et"))
        convert(None, f"{GLOO}.rank{r}.kineto.json.gz", paths[-1])
    assert validate(paths).sound
    result = simulate(paths)
    assert result.error_pct is not None and abs(result.error_pct) < MAX_ERROR_PCT


def test_cli_converts_without_host_trace(traces, tmp_path) -> None:
    out = tmp_path / "k.et"
    proc = run_cli("convert", "--device-trace", traces / "hta_kineto/cuda_event_sync.kineto.json.gz",
                   "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "step: ProfilerStep#100" in proc.stdout and out.exists()


def test_cli_needs_a_trace(tmp_path) -> None:
    proc = run_cli("convert", "-o", tmp_path / "x.et")
    assert_one_line_failure(proc, "--host-trace", "--device-trace")
    assert proc.returncode == 2 and not (tmp_path / "x.et").exists()

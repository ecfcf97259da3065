"""Pages to test: the bundled sample and the 8 DLRM ranks, converted once."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from helpers import PAIRS, ROOT, SAMPLE

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType
from pt2chakra.conversion.api import convert, write_conversion_report


@pytest.fixture(scope="session")
def sample_et(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(.et, conversion report JSON) of the bundled sample."""
    work = tmp_path_factory.mktemp("sample")
    out, rep = work / "gpt_tiny_cpu.et", work / "gpt_tiny_cpu.report.json"
    write_conversion_report(convert(f"{SAMPLE}.host_et.json.gz", f"{SAMPLE}.kineto.json.gz", out), rep)
    return out, rep


@pytest.fixture(scope="session")
def dlrm_ets(traces: Path, tmp_path_factory: pytest.TempPathFactory,
             ) -> tuple[list[Path], list[Path]]:
    """The 8 DLRM ranks' .et files and conversion reports."""
    work = tmp_path_factory.mktemp("dlrm")
    ets, reports = [], []
    for r in range(8):
        host, kineto = PAIRS[f"dlrm_rank{r}"]
        et, rep = work / f"dlrm.{r}.et", work / f"dlrm.{r}.report.json"
        write_conversion_report(convert(traces / host, traces / kineto, et), rep)
        ets.append(et)
        reports.append(rep)
    return ets, reports


@pytest.fixture(scope="session")
def page_check() -> ModuleType:
    """scripts/check_html_report.py (headless Chromium checks)."""
    spec = importlib.util.spec_from_file_location(
        "check_html_report", ROOT / "scripts" / "check_html_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _synthetic_rank(rank: int, steps: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """One rank of a data-parallel step: per layer a CPU launch, a kernel
    and an all-reduce matched across ranks by ``comm_seq``."""
    md = GlobalMetadata(version="0.0.4", attrs=[("rank", "int64_val", rank)])
    cpu_attrs = [("is_cpu_op", "bool_val", True), ("tid", "int64_val", 1)]
    kernel = [("is_cpu_op", "bool_val", False), ("device", "int64_val", rank),
              ("stream", "int64_val", 7)]
    nodes: list[ChakraNode] = []
    t = 1000 + 3 * rank
    for k in range(steps):
        base = 3 * k + 1
        nodes.append(ChakraNode(id=base, name="aten::mm", type=NodeType.COMP_NODE,
                                start_time_micros=t, duration_micros=5,
                                data_deps=[base - 3] if k else [], attrs=cpu_attrs))
        nodes.append(ChakraNode(id=base + 1, name="gemm_kernel", type=NodeType.COMP_NODE,
                                start_time_micros=t + 6, duration_micros=20 + rank % 5,
                                data_deps=[base], attrs=kernel))
        comm = [*kernel[:2], ("stream", "int64_val", 20),
                ("comm_type", "int64_val", int(CollectiveType.ALL_REDUCE)),
                ("comm_size", "int64_val", 1 << 22), ("pg_name", "string_val", "0"),
                ("comm_seq", "int64_val", k)]
        nodes.append(ChakraNode(id=base + 2, name="nccl:all_reduce", type=NodeType.COMM_COLL_NODE,
                                start_time_micros=t + 30, duration_micros=40,
                                data_deps=[base + 1], attrs=comm))
        t += 80
    return md, nodes


@pytest.fixture(scope="session")
def many_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """64 ranks of a synthetic data-parallel step (the most a page is made for)."""
    work = tmp_path_factory.mktemp("ranks64")
    paths = []
    for r in range(64):
        md, nodes = _synthetic_rank(r, 40)
        path = work / f"dp.{r}.et"
        write_et(path, md, nodes)
        paths.append(path)
    return paths

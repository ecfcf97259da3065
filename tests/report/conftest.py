"""Pages to test: the bundled sample and the 8 DLRM ranks, converted once."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from builders import dp_layer, metadata
from helpers import PAIRS, SAMPLE, load_script

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
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
    return load_script("check_html_report")


def _synthetic_rank(rank: int, steps: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """One rank of a data-parallel step: per layer a CPU launch, a kernel
    and a 4 MiB all-reduce matched across ranks by ``comm_seq``."""
    nodes: list[ChakraNode] = []
    t = 1000 + 3 * rank
    for k in range(steps):
        nodes += dp_layer(k, rank, t, 5, 20 + rank % 5, comm_bytes=1 << 22, launch_us=1,
                          comm_start=t + 30)
        t += 80
    return metadata(rank), nodes


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

"""Helpers shared by the tests (``tests`` is on ``sys.path``, see pyproject).

Fixtures live in ``conftest.py``, builders of test data (nodes, traces) in
``builders.py``; other plain functions and constants live here.
The real traces live outside the repository (``../shared/traces`` relative
to the project root, read-only, same place in CI); tests read them in place
and never copy them into the repo.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (the scripts are no package),
    registered under ``name``: its dataclasses look their module up there,
    and a script that imports another by name gets this one."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
TRACES = (ROOT / ".." / "shared" / "traces").resolve()


def layout_recording(job: str) -> list[Path]:
    """The converted ranks (``<job>.<rank>.et``) of a parallel-layout
    recording (``collect --tp/--pp``) under ``$PT2CHAKRA_LAYOUT_RECORDINGS``,
    else ``../shared/traces/layouts``; the test skips, naming the folder,
    when there is none."""
    import os

    folder = Path(os.environ.get("PT2CHAKRA_LAYOUT_RECORDINGS", TRACES / "layouts"))
    files = sorted((folder / job).glob(f"{job}.*.et"))
    if not files:
        pytest.skip(f"no recording of {job} under {folder}")
    return files
SAMPLE = ROOT / "samples" / "gpt_tiny_cpu" / "gpt_tiny_cpu"
GLOO_SAMPLE = ROOT / "samples" / "gloo_ddp_cpu" / "gloo_ddp_cpu"


def convert_gloo_pair(work: Path) -> list[Path]:
    """The bundled 2-rank gloo DDP step converted into ``work`` (one .et per
    rank, ``gloo.<rank>.et``): the pair several test folders start from."""
    from pt2chakra import convert

    out = []
    for rank in (0, 1):
        target = work / f"gloo.{rank}.et"
        convert(f"{GLOO_SAMPLE}.rank{rank}.host_et.json.gz",
                f"{GLOO_SAMPLE}.rank{rank}.kineto.json.gz", target)
        out.append(target)
    return out

# name -> (host ET, Kineto) under TRACES; host-only traces have no Kineto.
PAIRS = {"linear_1gpu": ("linear_1gpu/host_et.json.gz", "linear_1gpu/kineto.json.gz"),
         "hta_simple_add": ("hta_simple_add/host_et.json.gz", "hta_simple_add/kineto.json.gz")}
PAIRS.update({f"dlrm_rank{r}": (f"dlrm_8gpu/rank{r}.host_et.json.gz",
                                f"dlrm_8gpu/rank{r}.kineto.json.gz") for r in range(8)})
HOST_ONLY: dict[str, tuple[str, str | None]] = {
    name: (f"{name}/host_et.json.gz", None)
    for name in ("resnet_2gpu_host", "resnet_1gpu_host", "gpt2_host", "chakra_pg_host")}
ALL: dict[str, tuple[str, str | None]] = {**PAIRS, **HOST_ONLY}
REFERENCE_SOURCES = ("chakra_pg_host", "resnet_1gpu_host")


def read_with_reference(path: Path | str):  # type: ignore[no-untyped-def]
    """(GlobalMetadata, [Node]) of an ``.et`` decoded by mlc-chakra's own
    reader (protolib + its generated classes); skips when it is not installed."""
    protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
    et_def = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
    handle = protolib.openFileRd(str(path))
    try:
        meta = et_def.GlobalMetadata()
        assert protolib.decodeMessage(handle, meta)
        nodes = []
        while True:
            node = et_def.Node()
            if not protolib.decodeMessage(handle, node):
                break
            nodes.append(node)
    finally:
        handle.close()
    return meta, nodes


def run_cli(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m pt2chakra ARGS`` in a process of its own (each argument str()-ed)."""
    return subprocess.run([sys.executable, "-m", "pt2chakra", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_failure(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def on_both_paths(run: Callable[[], Any]) -> tuple[Any, Any]:
    """``run()`` with the compiled fast path, then with the pure-Python one
    (every tier's ``compiled.FAST`` switched off, and back even on error)."""
    fast = run()
    tiers = compiled_tiers()
    originals = [tier.FAST for tier in tiers]
    try:
        for tier in tiers:
            tier.FAST = None
        return fast, run()
    finally:
        for tier, original in zip(tiers, originals):
            tier.FAST = original


def compiled_tiers() -> tuple[Any, ...]:
    """Each tier's switch of its compiled module (its ``compiled.py``: FAST,
    CONTRACT, COMPILED_MODULE), the formats' first."""
    from pt2chakra.chakra import compiled as formats
    from pt2chakra.simulation import compiled as simulator

    return formats, simulator


def framed_bytes(graph: Any) -> bytes:
    """What a graph's ``framed_nodes()`` write: every node framed, joined."""
    from pt2chakra.chakra.encode import FramedNodes, _framed

    return b"".join(item.data if isinstance(item, FramedNodes) else _framed([item])
                    for item in graph.framed_nodes())


def compiled_module() -> Any:
    """The compiled module, for tests skipped without it."""
    from pt2chakra.chakra import compiled

    fast = compiled.fast_path()
    assert fast is not None
    return fast


def gzip_bomb(path: Path, inflated: int) -> Path:
    """Zeros that inflate about 1000x (deflate's ceiling): ``inflated`` bytes."""
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    with path.open("wb") as out:
        for _ in range(inflated >> 20):
            out.write(compressor.compress(block))
        out.write(compressor.flush())
    return path

"""The reference side of the benchmarks: mlc-chakra's converter and linker.

Shared by ``bench_matrix.py`` and ``bench_convert.py``. Nothing here is
timed; it finds the reference tools, prepares the inputs both sides read, and
makes sure pt2chakra is measured as installed (its bytecode compiled).

The reference venv (``make bench-ref-setup``; never part of ``make test``):
mlc-chakra 1.0.0 from PyPI with its dependencies (HolisticTraceAnalysis and
the rest), plus PARAM's ``et_replay``, which is not on PyPI. et_replay is
installed from a checkout of PARAM (facebookresearch/param on GitHub), whose
``et_replay/`` folder is laid out for a repository of its own: the Makefile
stages that folder with its pyproject.toml one level up and pip-installs the
stage. By hand::

    python3 -m venv .venv-ref
    .venv-ref/bin/pip install mlc-chakra==1.0.0 intervaltree
    stage=$(mktemp -d); cp -r PARAM/et_replay "$stage/"; cp PARAM/et_replay/pyproject.toml "$stage/"
    .venv-ref/bin/pip install "$stage"
    .venv-ref/bin/chakra_trace_link --help   # imports: the linker can run

Two things the reference linker needs that our samples lack or that its
pinned dependencies break, both handled here or noted where measured:

* HTA's critical-path analysis, which the linker calls first, looks for a
  ``ProfilerStep`` annotation and stops the linker without one. The samples
  record a bare step (no profiler schedule), so ``kineto_with_step`` adds one
  ``ProfilerStep#0`` user annotation over all CPU ops to a plain copy of the
  Kineto trace; BOTH tools then read that copy. pt2chakra's ``.et`` is
  byte-identical with or without it (one step either way).
* With pandas 3 (what ``pip install mlc-chakra`` resolves today) that analysis
  then fails inside HTA ("Cannot specify both 'axis' and 'index'/'columns'");
  the linker logs it and links without sync dependencies, which a CPU-only
  trace has none of. Its measured cost therefore leaves that analysis out: a
  lower bound on the reference's work. (With pandas 2 the analysis gets
  further and crashes on a trace without GPU kernels.)
"""

from __future__ import annotations

import compileall
import gzip
import importlib.util
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF_VENVS = (ROOT / ".venv-ref", ROOT / ".venv")
# The Kineto events a step annotation spans (the host-side ops).
CPU_CATEGORIES = ("cpu_op", "user_annotation")
# The name HTA's critical path looks for (``annotation="ProfilerStep"``), as
# ``torch.profiler``'s schedule writes it.
STEP_ANNOTATION = "ProfilerStep#0"
LINK_RANK = "0"  # the samples are single-rank recordings
PROBE_TIMEOUT_S = 120  # importing HTA (pandas, plotly) on a loaded 2-core machine


@dataclass(frozen=True, slots=True)
class Reference:
    """mlc-chakra's tools in one venv; ``linker`` is None when it cannot run (``why``)."""

    converter: Path
    linker: Path | None
    why: str = ""

    def convert_cmd(self, trace: Path, output: Path) -> list[str]:
        return [str(self.converter), "PyTorch", "--input", str(trace), "--output", str(output)]

    def link_cmd(self, host: Path, kineto: Path, output: Path) -> list[str]:
        assert self.linker is not None
        return [str(self.linker), "--rank", LINK_RANK, "--chakra-host-trace", str(host),
                "--chakra-device-trace", str(kineto), "--output-file", str(output)]


def find_reference(venvs: list[Path] | tuple[Path, ...] = DEFAULT_REF_VENVS) -> Reference | None:
    """The first venv whose linker runs, else the first with a converter (host-only ratios)."""
    found = [v / "bin" for v in venvs if (v / "bin" / "chakra_converter").exists()]
    why = ""
    for bin_dir in found:
        why = linker_error(bin_dir / "chakra_trace_link")
        if not why:
            return Reference(bin_dir / "chakra_converter", bin_dir / "chakra_trace_link")
    return Reference(found[0] / "chakra_converter", None, why) if found else None


def linker_error(linker: Path) -> str:
    """'' when ``chakra_trace_link --help`` runs; else why not, in one line."""
    if not linker.exists():
        return f"{linker} missing"
    try:
        proc = subprocess.run([str(linker), "--help"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"{linker} --help took over {PROBE_TIMEOUT_S} s"
    if proc.returncode == 0:
        return ""
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    return (lines or [f"exit {proc.returncode}"])[-1][:200]


def plain_copy(path: Path, work: Path) -> Path:
    """Uncompressed copy of a (gzipped) JSON in ``work``: the reference reads plain JSON only."""
    dst = work / path.name.removesuffix(".gz")
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as fin, dst.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return dst


def kineto_with_step(kineto: Path, work: Path) -> Path:
    """A plain copy of ``kineto`` with one ``ProfilerStep#0`` annotation over its CPU ops
    on their busiest thread (see the module's docstring); the input as given when it has one."""
    with (gzip.open if kineto.read_bytes()[:2] == b"\x1f\x8b" else open)(kineto, "rb") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    if any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events):
        return plain_copy(kineto, work)
    cpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in CPU_CATEGORIES]
    threads: dict[tuple[object, object], int] = {}
    for e in cpu:
        threads[(e["pid"], e["tid"])] = threads.get((e["pid"], e["tid"]), 0) + 1
    pid, tid = max(threads, key=threads.__getitem__)
    start = min(e["ts"] for e in cpu)
    end = max(e["ts"] + e["dur"] for e in cpu)
    external = max((e.get("args", {}).get("External id", 0) for e in cpu), default=0) + 1
    events.append({"ph": "X", "cat": "user_annotation", "name": STEP_ANNOTATION, "pid": pid,
                   "tid": tid, "ts": start, "dur": end - start,
                   "args": {"External id": external}})
    dst = work / f"step_{kineto.name.removesuffix('.gz')}"
    dst.write_text(json.dumps(doc))
    return dst


def compile_ours() -> Path | None:
    """Byte-compile the pt2chakra package this Python imports, as ``pip install`` does.

    An editable install under ``PYTHONDONTWRITEBYTECODE`` (or a fresh checkout)
    would otherwise compile every module from source in every timed run (a
    25k-op host-only convert: 0.23-0.27 CPU-s so, 0.18-0.19 compiled), a cost
    no installed copy pays; the reference's site-packages were compiled by pip.
    """
    spec = importlib.util.find_spec("pt2chakra")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    compileall.compile_dir(str(package), quiet=1)
    return package

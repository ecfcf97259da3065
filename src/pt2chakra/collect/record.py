"""Record one training step as a host execution trace plus a Kineto trace.

Both traces come from ONE ``torch.profiler.profile`` session that owns the
``ExecutionTraceObserver``: only then does the ET ``rf_id`` of an op equal the
``Record function id`` of its Kineto ``cpu_op`` event, which is what the
linker matches on. torch is imported lazily so that pt2chakra imports without it.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pt2chakra.atomic import atomic_output
from pt2chakra.files import open_input
from pt2chakra.names import is_observer_node

HOST_ET_SUFFIX = ".host_et.json.gz"
KINETO_SUFFIX = ".kineto.json.gz"
DEFAULT_NAME = "trace"
DEFAULT_WARMUP = 1
# Steps timed without the profiler before the recorded one, for the real
# step stored beside the traces (meta.json; simulate --without-profiler).
DEFAULT_TIMED = 3
# Profiled steps recorded, of which the one of median wall time is kept. One
# profiled step is one sample: on a shared CPU the same job's profiled step
# varied by 5-10 % between sessions and now and then doubled (a thread held
# off the core), which every prediction built on the trace inherits.
DEFAULT_PROFILED = 1
# Held inside the profiler session after the step, before the observers
# stop. A collective's backend op on a worker thread (gloo's) completes its
# work's future before the op's record function closes, so the step can end
# and the observer stop while that thread waits for a core; the ET then
# lacks the op (once in CI, 2 loaded cores: a step converted without its
# all-reduce). 0.2 s is many scheduler slices on a loaded host; the step's
# wall time is taken before it.
BACKEND_DRAIN_S = 0.2
COPY_CHUNK = 1 << 20


def record_training_step(
    step_fn: Callable[[], None],
    out_dir: Path | str,
    *,
    warmup: int = DEFAULT_WARMUP,
    name: str = DEFAULT_NAME,
    profiled: int = DEFAULT_PROFILED,
    profiled_s: list[float] | None = None,
) -> tuple[Path, Path]:
    """Run ``step_fn`` ``warmup`` times, then record ``profiled`` calls of it,
    each in a profiler session of its own, and keep the one whose wall time is
    the median (the lower one of an even count); the wall times go to
    ``profiled_s`` when given.

    Returns ``(host_et_path, kineto_path)``, both gzip-compressed JSON. Outputs
    appear atomically (temp file, then rename), so a crash never leaves a
    truncated trace under the final name.
    """
    import torch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    host_path, kineto_path = out / f"{name}{HOST_ET_SUFFIX}", out / f"{name}{KINETO_SUFFIX}"
    for _ in range(warmup):
        step_fn()
    _synchronize(torch)
    with tempfile.TemporaryDirectory(dir=out, prefix=f".{name}.") as tmp:
        walls = []
        for k in range(max(1, profiled)):
            walls.append(profile_one_step(torch, step_fn, Path(tmp) / f"host_et{k}.json",
                                       Path(tmp) / f"kineto{k}.json"))
        kept = median_index(walls)
        _gzip_atomic(Path(tmp) / f"host_et{kept}.json", host_path)
        _gzip_atomic(Path(tmp) / f"kineto{kept}.json", kineto_path)
    if profiled_s is not None:
        profiled_s.extend(walls)
    return host_path, kineto_path


def median_index(values: list[float]) -> int:
    """Index of the median value (the lower median of an even count)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    return order[(len(order) - 1) // 2]


def time_steps(step_fn: Callable[[], None], warmup: int, timed: int) -> list[float]:
    """Run ``warmup`` steps, then time ``timed`` more without the profiler
    (seconds each, queued GPU work waited for around each)."""
    import torch

    for _ in range(warmup):
        step_fn()
    out = []
    for _ in range(timed):
        _synchronize(torch)
        t = time.perf_counter()
        step_fn()
        _synchronize(torch)
        out.append(time.perf_counter() - t)
    return out


def write_real_step(out_dir: Path | str, step_s: list[float], extra: dict[str, object]) -> None:
    """The timed steps and their median beside the traces, where
    ``simulate --without-profiler`` finds them."""
    from pt2chakra.simulation.profiler_overhead import META_NAME, write_meta

    write_meta(str(Path(out_dir) / META_NAME), step_s, extra)


def _synchronize(torch: object) -> None:
    """Wait for queued GPU work so warm-up kernels do not leak into the recording."""
    cuda = torch.cuda  # type: ignore[attr-defined]
    if cuda.is_available() and cuda.is_initialized():
        cuda.synchronize()


def profile_one_step(torch: object, step_fn: Callable[[], None], et: Path, kineto: Path) -> float:
    """Record one step; the profiler starts and stops the ET observer with itself.
    Returns the step's wall time inside the session (s)."""
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    on_gpu = torch.cuda.is_available()  # type: ignore[attr-defined]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    config = None
    if on_gpu:
        config = torch._C._profiler._ExperimentalConfig(  # type: ignore[attr-defined]
            enable_cuda_sync_events=True
        )
    observer = ExecutionTraceObserver().register_callback(str(et))
    try:
        with profile(
            activities=activities,
            record_shapes=True,
            experimental_config=config,
            execution_trace_observer=observer,
        ) as prof:
            start = time.perf_counter()
            step_fn()
            _synchronize(torch)
            wall = time.perf_counter() - start
            time.sleep(BACKEND_DRAIN_S)
    finally:
        observer.unregister_callback()  # idempotent; finalises the ET file
    prof.export_chrome_trace(str(kineto))
    return wall


def _gzip_atomic(src: Path, dst: Path) -> None:
    """Compress ``src`` into ``dst``, all or nothing."""
    with atomic_output(dst) as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        with src.open("rb") as fin:
            shutil.copyfileobj(fin, gz, COPY_CHUNK)


KINETO_HOST_CATEGORIES = ("cpu_op", "user_annotation")
RF_ID_ARG = "Record function id"


@dataclass(frozen=True)
class RecordingSummary:
    """What a recorded pair holds, and how well its ids pair up (both directions)."""

    schema: str
    host_nodes: int
    host_ops: int  # nodes less the observer's own process/thread nodes
    host_ops_in_kineto: int
    kineto_host_events: int
    kineto_with_rf_id: int
    kineto_rf_id_in_et: int

    @property
    def match_fraction(self) -> float:
        """Share of Kineto host events whose ``Record function id`` is an ET ``rf_id``."""
        return _ratio(self.kineto_rf_id_in_et, self.kineto_host_events)

    @property
    def host_coverage(self) -> float:
        """Share of ET ops that have a Kineto event with their ``rf_id``."""
        return _ratio(self.host_ops_in_kineto, self.host_ops)

    def lines(self) -> list[str]:
        return [
            f"host ET schema: {self.schema}",
            f"host ET nodes: {self.host_nodes} ({self.host_ops} ops)",
            f"Kineto cpu_op/user_annotation events: {self.kineto_host_events}, "
            f"with '{RF_ID_ARG}': {self.kineto_with_rf_id}",
            f"Kineto events whose id is an ET rf_id: {self.kineto_rf_id_in_et} "
            f"({self.match_fraction:.2%})",
            f"ET ops whose rf_id is in Kineto: {self.host_ops_in_kineto} "
            f"({self.host_coverage:.2%})",
        ]


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def summarize_recording(host_path: Path | str, kineto_path: Path | str) -> RecordingSummary:
    """Check a recorded pair the way the linker will use it (ids, not timestamps)."""
    nodes = (host := _load_json(Path(host_path)))["nodes"]
    ops = [n for n in nodes if not is_observer_node(n["name"])]
    op_rf_ids = [_host_rf_id(n) for n in ops]
    events = [
        e
        for e in _load_json(Path(kineto_path)).get("traceEvents", [])
        if e.get("cat") in KINETO_HOST_CATEGORIES
    ]
    kineto_ids = [i for e in events if (i := e.get("args", {}).get(RF_ID_ARG)) is not None]
    et_ids, kineto_id_set = set(op_rf_ids), set(kineto_ids)
    return RecordingSummary(
        schema=str(host.get("schema")),
        host_nodes=len(nodes),
        host_ops=len(ops),
        host_ops_in_kineto=sum(rf in kineto_id_set for rf in op_rf_ids),
        kineto_host_events=len(events),
        kineto_with_rf_id=len(kineto_ids),
        kineto_rf_id_in_et=sum(i in et_ids for i in kineto_ids),
    )


def _load_json(path: Path) -> Any:
    stream, _gzipped = open_input(path)
    with stream:
        return json.load(stream)


def _host_rf_id(node: dict[str, Any]) -> int | None:
    """``rf_id`` sits at top level in schema 1.0.1 and in ``attrs`` later."""
    if "rf_id" in node:
        return node["rf_id"]
    return next((a["value"] for a in node.get("attrs", []) if a.get("name") == "rf_id"), None)

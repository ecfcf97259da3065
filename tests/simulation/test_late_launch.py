"""Issue 28 item 1: a kernel launched after a long stretch of its caller's own
CPU time (the first ``cudnn_convolution`` of a run: 1.4 s of cuDNN set-up
between its first callee and its launch) was released when the caller's first
slice ended, so a later callee that synchronised on it started early. The
converter now writes the launch's recorded time on such a kernel
(``LAUNCH_TIME_ATTR``, only past ``LATE_LAUNCH_MIN_US``), and the replay
releases it after the thread's time before the launch."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from builders import MD, cpu, gpu, late_launch_kineto
from helpers import run_cli

from pt2chakra.chakra.io import read_et
from pt2chakra.chakra.records import attr_dict
from pt2chakra.conversion.api import convert
from pt2chakra.rules.conventions import LATE_LAUNCH_MIN_US, LAUNCH_TIME_ATTR
from pt2chakra.simulation import SimulationOptions, simulate
from pt2chakra.simulation.engine import Simulator
from pt2chakra.simulation.results import SimConfig

LAUNCH = 1395  # the kernel's launch, 1385 us after callee 2 returned


def _late_launch(launch: int | None = LAUNCH) -> list:
    """Caller 1 (0-1500 us): callee 2 at once (0-10), then 1385 us of its own
    time, then kernel 3's launch (kernel 1400-1450), then callee 4, which
    waited for the kernel (1450-1500)."""
    kernel = gpu(3, 1400, 50, deps=[1], kinds=["launch"])
    if launch is not None:
        kernel = msgspec.structs.replace(
            kernel, attrs=[*kernel.attrs, (LAUNCH_TIME_ATTR, "int64_val", launch)])
    return [cpu(1, 0, 1440, incl=1500), cpu(2, 0, 10, deps=[1], kinds=["caller"]), kernel,
            cpu(4, 1450, 50, deps=[2, 3], kinds=["thread_order", "gpu_sync"])]


def _run(nodes: list, cpu_scale: float = 1.0, compute_scale: float = 1.0):
    config = SimConfig(cpu_scale=cpu_scale, compute_scale=compute_scale)
    return Simulator([(MD, nodes)]).run(config)[0]


def test_a_late_launch_keeps_the_callers_time_before_it() -> None:
    res = _run(_late_launch())
    assert res.measured_step_us == 1500
    assert res.predicted_step_us == pytest.approx(1500, rel=0.05)


def test_without_its_launch_time_the_kernel_is_released_at_the_first_slice() -> None:
    # the old reading, kept for files written without the attribute
    assert _run(_late_launch(None)).predicted_step_us < 200


def test_the_callers_time_before_the_launch_is_cpu_time() -> None:
    # callee 2, the caller's 1385 us before the launch and callee 4 halve
    # with the CPU; the kernel does not
    fast = _run(_late_launch(), cpu_scale=0.5).predicted_step_us
    assert fast == pytest.approx((10 + 1385 + 50) / 2 + 50)
    # and the GPU what-if leaves the caller's time alone
    assert _run(_late_launch(), compute_scale=0.5).predicted_step_us == \
        pytest.approx(10 + 1385 + 50 / 2 + 50)


def test_a_busy_stream_does_not_add_to_the_launch_delay() -> None:
    # kernel 5 (launched by callee 2) holds the stream until 1200: the late
    # kernel still starts at its launch, not 1200 + the delay
    nodes = _late_launch()
    nodes.insert(2, gpu(5, 5, 1195, deps=[2], kinds=["launch"]))
    nodes[3] = msgspec.structs.replace(nodes[3], data_deps=[1, 5],
                                       attrs=[a for a in nodes[3].attrs if a[0] != "data_dep_kinds"]
                                       + [("data_dep_kinds", "string_list",
                                           ["launch", "stream_order"])])
    assert _run(nodes).predicted_step_us == pytest.approx(1500, rel=0.05)


def _launch_times(path: Path) -> list:
    return [attr_dict(n.attrs).get(LAUNCH_TIME_ATTR) for n in read_et(path)[1]
            if n.name == "conv"]


def test_the_converter_marks_only_a_late_launch_and_the_replay_keeps_its_wait(
        tmp_path: Path) -> None:
    setup = int(20 * LATE_LAUNCH_MIN_US)
    out = tmp_path / "late.et"
    convert(None, late_launch_kineto(tmp_path, setup), out)
    assert _launch_times(out) == [20 + setup]
    result = simulate([out])
    assert abs(result.error_pct or 0) < 5.0, result.error_pct
    # a launch after a short callee is written as before: no attribute
    convert(None, late_launch_kineto(tmp_path, int(LATE_LAUNCH_MIN_US / 2)), tmp_path / "soon.et")
    assert _launch_times(tmp_path / "soon.et") == [None]


def test_a_replay_written_back_keeps_the_launch_with_its_kernel(tmp_path: Path) -> None:
    # --write-et at half the CPU time: the launch moves with its kernel, so a
    # replay of the written file gives the what-if's step, not the old release
    # (the trace starts at 100 us: a node at 0 is untimed and written as recorded)
    out = tmp_path / "late.et"
    convert(None, late_launch_kineto(tmp_path, int(20 * LATE_LAUNCH_MIN_US), t0=100), out)
    done = run_cli("simulate", out, "--cpu-scale", "0.5", "--write-et", tmp_path / "half", "-q")
    assert done.returncode == 0, done.stderr
    written = tmp_path / "half.0.et"
    kernel = next(n for n in read_et(written)[1] if n.name == "conv")
    launch = attr_dict(kernel.attrs)[LAUNCH_TIME_ATTR]
    assert 0 <= kernel.start_time_micros - launch <= 5  # recorded: 5 us from launch to start
    half = next(w.predicted_step_us for w in
                simulate([out], SimulationOptions(cpu_scale=[0.5])).what_if if w.cpu_scale == 0.5)
    assert simulate([written]).predicted_step_us == pytest.approx(half, rel=0.01)

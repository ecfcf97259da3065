"""``pt2chakra microbench --profiler-overhead``: what the profiler costs per
recorded op on this machine, for ``simulate --profiler-overhead``.

Ops of several kinds (a view, a small elementwise op, an op of many inputs, a
composite op with callees, an in-place op) and a whole training step of the
built-in tiny GPT run in a loop, timed without the profiler and then inside
one session with the execution-trace observer and Kineto (``record_shapes``,
as ``collect`` records); the extra time over the ops the host ET recorded is
each kind's cost per op. The figure is the training step's: one op repeated
in a hot loop keeps the profiler's bookkeeping in cache and reads 11-19 us/op
on our CPU, where the op mix of a step reads 17.2-17.5 us/op, as fits on
recorded steps of several sizes do (docs/PROFILER_OVERHEAD.md). The one-op
kinds time only the loop, not the session's start and end. The training step
is timed the way ``collect`` records one: single steps without the profiler
(their median), and single steps each in a session of its own (their median),
so that the figure carries what a recording pays. torch is imported lazily.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pt2chakra.errors import InputError
from pt2chakra.names import is_observer_node

# Calls per kind and timed repeats: 200 x 5 x 5 kinds, with and without the
# profiler, runs in a few seconds on one CPU core.
DEFAULT_CALLS = 200
DEFAULT_REPEATS = 5
# Tiny tensors: the op's own work stays a microsecond or two, so the timing
# is of the dispatcher and the profiler, as for most ops of a step (and a
# neighbour's load moves it little).
SIZE = 16
CAT_INPUTS = 8
# The step kind: the built-in tiny GPT at its smallest useful size (one layer,
# width 16): ~1065 recorded ops a step, ~2 ms plain and ~20 ms profiled on one
# CPU core, the op mix (forward, backward, AdamW) of the steps users record.
STEP_KIND = "training_step"
STEP_LAYERS, STEP_D_MODEL, STEP_HEADS, STEP_SEQ_LEN, STEP_BATCH = 1, 16, 2, 8, 1
# Plain steps timed for the step kind's median, as collect's --timed-steps
# default of the h200 recordings (10 timed steps).
STEP_PLAIN_TIMED = 10


@dataclass(frozen=True)
class KindCost:
    """One kind of op: its time per call without and with the profiler, and
    the ops the host ET recorded per call."""

    kind: str
    plain_us: float
    profiled_us: float
    ops_per_call: float

    @property
    def per_op_us(self) -> float:
        return max(0.0, self.profiled_us - self.plain_us) / self.ops_per_call \
            if self.ops_per_call else 0.0


@dataclass(frozen=True)
class ProfilerCost:
    """The figure (extra time over every kind's recorded ops) and each kind's."""

    kinds: list[KindCost]

    @property
    def per_op_us(self) -> float:
        """The training step's cost per op (the op mix of a recorded step);
        without it, the median over the kinds (one kind slowed by a
        neighbour's load does not move it)."""
        step = [k.per_op_us for k in self.kinds if k.kind == STEP_KIND]
        if step and step[0] > 0:
            return step[0]
        loops = [k.per_op_us for k in self.kinds if k.kind != STEP_KIND]
        return statistics.median(loops) if loops else 0.0

    @property
    def figure(self) -> str:
        from pt2chakra.simulation.profiler_overhead import format_figure  # the CLI starts light

        return format_figure(self.per_op_us)

    def lines(self) -> list[str]:
        out = [f"profiler overhead: {self.figure} (ExecutionTraceObserver + Kineto with "
               "record_shapes, per recorded CPU op of a training step; give it to simulate "
               "--profiler-overhead)"]
        for k in self.kinds:
            out.append(f"  {k.kind:<12} {k.plain_us:8.2f} us/call plain, {k.profiled_us:8.2f} "
                       f"profiled, {k.ops_per_call:4.1f} ops recorded: {k.per_op_us:6.2f} us/op")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"profiler_overhead": self.figure, "per_op_us": self.per_op_us,
                "kinds": [{"kind": k.kind, "plain_us": k.plain_us, "profiled_us": k.profiled_us,
                           "ops_per_call": k.ops_per_call, "per_op_us": k.per_op_us}
                          for k in self.kinds]}


def measure(calls: int = DEFAULT_CALLS, repeats: int = DEFAULT_REPEATS) -> ProfilerCost:
    """Time every kind of op without and with the profiler."""
    try:
        import torch
    except ImportError:
        raise InputError("microbench --profiler-overhead", "needs torch: pip install "
                         "'pt2chakra[collect]'") from None
    if calls < 1 or repeats < 1:
        raise InputError("microbench --profiler-overhead", "calls and repeats must be >= 1")
    kinds = _kinds(torch)
    out = []
    for name, fn in kinds.items():
        plain = _per_call(fn, calls, repeats)
        profiled, ops = _profiled(torch, fn, calls, repeats)
        out.append(KindCost(name, plain, profiled, ops))
    out.append(_step_cost(torch, _training_step(), repeats))
    return ProfilerCost(out)


def _step_cost(torch: Any, step: Callable[[], None], sessions: int) -> KindCost:
    """The training step as ``collect`` records it: the median of single steps
    without the profiler against the median of single steps each in a
    profiler session of its own (a session's first ops pay for it too)."""
    from pt2chakra.collect.record import median_index, profile_one_step, time_steps

    plain = statistics.median(time_steps(step, 0, STEP_PLAIN_TIMED)) * 1e6
    walls, ops = [], []
    with tempfile.TemporaryDirectory(prefix="pt2chakra-profcost.") as tmp:
        for k in range(sessions):
            et = Path(tmp) / f"et{k}.json"
            walls.append(profile_one_step(torch, step, et, Path(tmp) / f"kineto{k}.json"))
            ops.append(_recorded_ops(et))
    kept = median_index(walls)
    return KindCost(STEP_KIND, plain, walls[kept] * 1e6, float(ops[kept]))


def _recorded_ops(et: Path) -> int:
    """Ops the host ET recorded (less the observer's own nodes)."""
    with et.open() as f:
        nodes = json.load(f).get("nodes", [])
    return sum(1 for n in nodes if not is_observer_node(n.get("name", "")))


def _training_step() -> Callable[[], None]:
    """One training step of the built-in tiny GPT (``STEP_*``), warmed up."""
    from pt2chakra.collect.sample_model import GPTConfig, make_training_step

    step = make_training_step(GPTConfig(STEP_LAYERS, STEP_D_MODEL, STEP_HEADS, STEP_SEQ_LEN,
                                        STEP_BATCH))
    step()  # AdamW makes its state on the first step: not an op of later steps
    return step


def _kinds(torch: Any) -> dict[str, Callable[[], object]]:
    """One call of each kind of op (inputs made once, outside the timing)."""
    a, b = torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)
    parts = [torch.randn(SIZE) for _ in range(CAT_INPUTS)]
    w = torch.randn(SIZE, SIZE)
    c = torch.zeros(SIZE)
    return {
        "view": lambda: a.view(-1),
        "elementwise": lambda: torch.add(a, b),
        "many_inputs": lambda: torch.cat(parts),
        "composite": lambda: torch.nn.functional.linear(a, w, c),
        "in_place": lambda: c.add_(1.0),
    }


def _per_call(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """The loop's time per call, in us: the fastest of ``repeats`` (on a
    shared machine the others carry the neighbours' load), after one call
    untimed (the first profiled call allocates the recorder's buffers)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return min(times)


def _profiled(torch: Any, fn: Callable[[], object], calls: int, repeats: int,
              ) -> tuple[float, float]:
    """Time per call inside one profiler session, and the ops its host ET
    recorded per call."""
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    with tempfile.TemporaryDirectory(prefix="pt2chakra-profcost.") as tmp:
        et = Path(tmp) / "et.json"
        observer = ExecutionTraceObserver().register_callback(str(et))
        try:
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                         execution_trace_observer=observer):
                per_call = _per_call(fn, calls, repeats)
        finally:
            observer.unregister_callback()
        ops = _recorded_ops(et)
    return per_call, ops / (calls * repeats + 1)

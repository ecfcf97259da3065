"""How long an op takes for the work its input shapes give, fitted on a recording.

A layout or batch change changes the shapes an op works on: a
matrix multiply of a tensor-parallel layer at degree 4 multiplies half the
columns it did at degree 2; at twice the batch every activation has twice
the rows. The recording holds each op's input shapes and its time, so the
time per unit of work can be read from it: per kind of op, a fixed cost (the
dispatch, the framework around the kernel) and a cost per unit, by least
squares over the op's instances.

* **Work.** A matrix multiply (``aten::mm``, ``addmm``, ``bmm``,
  ``baddbmm``) does 2·m·n·k floating-point operations (times the batch of a
  ``bmm``); every other ATen operator with tensor inputs touches the
  elements of its largest input, except views (``VIEW_OPS``: new metadata
  over the same storage, no element touched). Records outside ATen
  (autograd nodes, ``PythonSubclass``, DTensor's ``Redistribute``) only
  dispatch operators; their own time is overhead.
* **Time.** An op's own time: its span less its callees' on the same
  thread (callees by ``ctrl_deps``, the caller). An op that calls an op of
  its own kind only dispatches it (``aten::matmul`` calls ``aten::mm``,
  which does the work): such a wrapper is left out of its kind's fit. So
  is an op on a tensor subclass (a DTensor's ``aten::mm`` with the layer's
  whole shapes, 10-30 us where its shard's takes 3 ms): it calls
  ``SUBCLASS_DISPATCH`` (``rules/layout.py``'s rule of a sharded op), under
  which the shard's op runs (its recorded span outlasts the caller's).
* **Device time.** On a GPU the work is the kernels': each op's kernels
  (its ``launch`` edges) summed, against the op's work, fitted per kind as
  the CPU side is.
* **Kinds.** All matrix multiplies are one kind (one kernel family, one
  rate); every other op name is a kind of its own where the recording has
  ``MIN_FIT_OPS`` instances of at least two sizes, else its instances join
  the pooled ``ELEMENTWISE`` kind.

A kind whose instances all have one size cannot tell the fixed cost from the
rate: its line says so and its cost per unit is taken as none (the time is
fixed), which a caller re-timing such an op to another size must treat as
unknown, not as free.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES, EdgeKind, dep_kinds_of
from pt2chakra.chakra.records import ChakraNode, attr_dict
from pt2chakra.rules.conventions import CPU_LANE, lane_of
from pt2chakra.rules.layout import SUBCLASS_DISPATCH, decode_shapes, is_flat_shape

MATMUL = "matmul"
ELEMENTWISE = "elementwise (pooled)"
# Matrix multiplies by the position of their two factors among the inputs.
MATMUL_FACTORS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1),
                  "aten::baddbmm": (1, 2), "aten::matmul": (0, 1)}
ATEN = "aten::"
VIEW_OPS = frozenset(f"{ATEN}{op}" for op in (
    "view", "view_as", "_unsafe_view", "reshape", "_reshape_alias", "expand", "expand_as",
    "t", "transpose", "permute", "as_strided", "squeeze", "unsqueeze", "slice", "select",
    "narrow", "alias", "detach", "resolve_conj", "resolve_neg", "unflatten", "flatten",
    "split", "chunk", "unbind", "numpy_T", "lift_fresh"))
"""ATen operators that return a view: their time does not grow with the
tensor (``reshape`` and ``flatten`` copy only a tensor that is not
contiguous, which the recorded shapes cannot tell)."""
LAUNCH_KIND = EDGE_KIND_NAMES[EdgeKind.LAUNCH]
MIN_FIT_OPS = 4
"""Instances an op name needs for a fit of its own: two parameters and at
least two more points to judge them by."""
FLOPS_PER_MULTIPLY_ADD = 2


class OpWork(msgspec.Struct, frozen=True):
    """One op's work: FLOPs for a matrix multiply, elements otherwise."""

    kind: str
    units: float


class KindFit(msgspec.Struct, frozen=True):
    """One kind's fit: time = fixed_us + units x us_per_unit."""

    kind: str
    unit: str  # "GFLOP" or "M elements": what us_per_unit is per
    ops: int
    fixed_us: float
    us_per_unit: float | None  # None: one size only, the rate is unknown
    rms_error_pct: float
    smallest: float
    largest: float

    def time_us(self, units: float) -> float | None:
        """This kind's time for ``units`` of work (None: the rate is unknown
        and ``units`` is not the one size recorded)."""
        if self.us_per_unit is None:
            return self.fixed_us if math.isclose(units, self.smallest) else None
        return self.fixed_us + units * self.us_per_unit


class TimeFits(msgspec.Struct, frozen=True):
    """One side's fits: the CPU ops' own time, or the device time of the
    kernels each op launched; the kind with the most time first."""

    side: str  # "CPU ops' own time" or "device time of the kernels each op launched"
    kinds: list[KindFit]
    modelled_us: float  # the time of the ops with work
    total_us: float  # the side's whole time

    def lines(self) -> list[str]:
        share = 100.0 * self.modelled_us / self.total_us if self.total_us else 0.0
        out = [f"{self.side}: {share:.0f} % in ops with work ({len(self.kinds)} kinds)"]
        for k in self.kinds:
            rate = (f"{k.us_per_unit:.4g} us per {k.unit}" if k.us_per_unit is not None
                    else f"rate unknown (one size: {k.smallest:.4g} {k.unit})")
            out.append(f"  {k.kind[:40]:40s} {k.ops:6d} ops  fixed {k.fixed_us:8.2f} us  {rate}"
                       f"  rms {k.rms_error_pct:.0f} %")
        return out


class ComputeModel(msgspec.Struct, frozen=True):
    """The fits of the CPU side and, where ops launched kernels, the device's."""

    cpu: TimeFits
    device: TimeFits | None  # None: no kernel launched by an op with work

    def lines(self) -> list[str]:
        out = ["compute model (time = fixed + work x rate, least squares per kind):"]
        for fits in (self.device, self.cpu):
            if fits is not None:
                out += [f"  {line}" for line in fits.lines()]
        return out


def op_work(name: str, shapes: str | None) -> OpWork | None:
    """The work of op ``name`` whose inputs have ``shapes`` (the node's
    ``inputs`` shapes, JSON: a list per input, ``[]`` for a scalar); None
    for a view, a record outside ATen, an op with no tensor input or
    unreadable shapes."""
    if not name.startswith(ATEN) or name in VIEW_OPS:
        return None
    dims = _shapes(shapes)
    if dims is None:
        return None
    factors = MATMUL_FACTORS.get(name)
    if factors is not None:
        flops = _matmul_flops(dims, factors)
        if flops is not None:
            return OpWork(MATMUL, flops / 1e9)
    sizes = [math.prod(d) for d in dims if d]
    return OpWork(name, max(sizes) / 1e6) if sizes else None


def _shapes(text: str | None) -> list[list[int]] | None:
    """Each input's dims ([] for a value that is not a tensor); None when
    the shapes are unreadable."""
    value = decode_shapes(text) if text else []
    if not value:
        return None
    return [d if is_flat_shape(d) else [] for d in value]


def _matmul_flops(dims: list[list[int]], factors: tuple[int, int]) -> float | None:
    """2·m·n·k (times the batch dimensions) of ``a @ b``."""
    i, j = factors
    if max(i, j) >= len(dims):
        return None
    a, b = dims[i], dims[j]
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    batch = math.prod(a[:-2])
    return FLOPS_PER_MULTIPLY_ADD * batch * a[-2] * a[-1] * b[-1]


class OwnTimes(msgspec.Struct, frozen=True):
    """Each timed CPU op's own time (us) and the ops it calls directly."""

    us: dict[int, float]
    callees: dict[int, list[ChakraNode]]
    on_subclass: frozenset[int]  # ops that called a SUBCLASS_DISPATCH


def own_times(nodes: Iterable[ChakraNode]) -> OwnTimes:
    """Each timed CPU op's own time (us): its span less the spans of the ops
    it called on its own thread (its children by ``ctrl_deps``, the caller;
    an op of a backend's worker thread filed under the op its caller had
    open is not that op's callee)."""
    listed = list(nodes)
    return _own_times(listed, [attr_dict(n.attrs) for n in listed])


def _own_times(nodes: Sequence[ChakraNode], attrs: Sequence[dict[str, Any]]) -> OwnTimes:
    timed: dict[int, tuple[ChakraNode, tuple[object, ...]]] = {}
    for n, a in zip(nodes, attrs, strict=True):
        if n.start_time_micros and n.duration_micros >= 0:
            where = lane_of(n.type, a)
            if where.kind == CPU_LANE:
                timed[n.id] = (n, where.key)
    own = {i: float(n.duration_micros) for i, (n, _thread) in timed.items()}
    callees: dict[int, list[ChakraNode]] = defaultdict(list)
    on_subclass: set[int] = set()
    for n, thread in timed.values():
        caller = timed.get(n.ctrl_deps[0]) if n.ctrl_deps else None
        if caller is None or caller[1] != thread:
            continue
        own[caller[0].id] -= n.duration_micros
        callees[caller[0].id].append(n)
        if n.name == SUBCLASS_DISPATCH:
            on_subclass.add(caller[0].id)
    return OwnTimes({k: max(0.0, v) for k, v in own.items()}, dict(callees),
                    frozenset(on_subclass))


CPU_SIDE = "CPU ops' own time"
DEVICE_SIDE = "device time of the kernels each op launched"


def fit_compute_model(nodes: Sequence[ChakraNode]) -> ComputeModel:
    """Every kind's fit over ``nodes`` (one rank's): the CPU ops' own time,
    and the device time of the kernels each op launched."""
    attrs = [attr_dict(n.attrs) for n in nodes]  # each node's attributes and work read once
    works = {n.id: w for n in nodes if (w := _work_of(n)) is not None}
    own = _own_times(nodes, attrs)
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    modelled = 0.0
    for op_id, work in works.items():
        if op_id not in own.us or op_id in own.on_subclass or \
                _dispatches(work, own.callees.get(op_id, []), works):
            continue
        points[work.kind].append((work.units, own.us[op_id]))
        modelled += own.us[op_id]
    return ComputeModel(_fits(CPU_SIDE, points, modelled, sum(own.us.values())),
                        _device_fits(nodes, attrs, works))


def _device_fits(nodes: Sequence[ChakraNode], attrs: Sequence[dict[str, Any]],
                 works: dict[int, OpWork]) -> TimeFits | None:
    """Per launching op with work: the summed time of the kernels it
    launched (its ``launch`` edges) against that work."""
    launched: dict[int, float] = defaultdict(float)
    total = 0.0
    for n, a in zip(nodes, attrs, strict=True):
        if a.get("is_cpu_op", False):
            continue
        total += n.duration_micros
        for dep, kind in zip(n.data_deps, dep_kinds_of(n.data_deps, a), strict=True):
            if kind == LAUNCH_KIND:
                launched[dep] += n.duration_micros
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    modelled = 0.0
    for op_id, time_us in launched.items():
        work = works.get(op_id)
        if work is not None:
            points[work.kind].append((work.units, time_us))
            modelled += time_us
    return _fits(DEVICE_SIDE, points, modelled, total) if points else None


def _fits(side: str, points: dict[str, list[tuple[float, float]]], modelled: float,
          total: float) -> TimeFits:
    pooled = _pooled(points)
    kinds = sorted((_fit(kind, pts) for kind, pts in pooled.items()),
                   key=lambda k: -sum(t for _w, t in pooled[k.kind]))
    return TimeFits(side, kinds, modelled, total)


def _work_of(n: ChakraNode) -> OpWork | None:
    return op_work(n.name, n.inputs[1]) if n.inputs is not None else None


def _dispatches(work: OpWork, callees: list[ChakraNode], works: dict[int, OpWork]) -> bool:
    """Does an op of ``work``'s kind call one of its own kind (a wrapper)?"""
    return any((w := works.get(c.id)) is not None and w.kind == work.kind for c in callees)


def _pooled(points: dict[str, list[tuple[float, float]]]) -> dict[str, list[tuple[float, float]]]:
    """Op names with too few instances, or one size only, join one pooled kind."""
    out: dict[str, list[tuple[float, float]]] = {}
    pool: list[tuple[float, float]] = []
    for kind, pts in sorted(points.items()):
        if kind == MATMUL or (len(pts) >= MIN_FIT_OPS and len({w for w, _ in pts}) > 1):
            out[kind] = pts
        else:
            pool += pts
    if pool:
        out[ELEMENTWISE] = pool
    return out


def _fit(kind: str, pts: list[tuple[float, float]]) -> KindFit:
    """Least squares of time on work, both coefficients at least zero (a
    negative fixed cost or rate is no op's)."""
    unit = "GFLOP" if kind == MATMUL else "M elements"
    works = [w for w, _ in pts]
    times = [t for _, t in pts]
    rate: float | None
    if len(set(works)) < 2:  # one size: a fixed cost and a rate are one unknown
        fixed, rate = sum(times) / len(times), None
    else:
        fixed, rate = _nonnegative_line(works, times)
    model = [fixed + (rate or 0.0) * w for w in works]
    return KindFit(kind, unit, len(pts), fixed, rate, _rms_pct(model, times), min(works),
                   max(works))


def _nonnegative_line(x: list[float], y: list[float]) -> tuple[float, float]:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    if sxx == 0:
        return my, 0.0
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx
    intercept = my - slope * mx
    if slope < 0:
        return my, 0.0
    if intercept < 0:  # through the origin
        return 0.0, sum(a * b for a, b in zip(x, y, strict=True)) / sum(a * a for a in x)
    return intercept, slope


def _rms_pct(model: list[float], times: list[float]) -> float:
    """The fit's rms error relative to the kind's mean time."""
    mean = sum(times) / len(times)
    if mean <= 0:
        return 0.0
    return 100.0 * math.sqrt(sum((m - t) ** 2 for m, t in zip(model, times, strict=True))
                             / len(times)) / mean

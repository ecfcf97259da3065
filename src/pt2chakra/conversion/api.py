"""The Python API: one call per job, used by the CLI and importable by users.

    from pt2chakra.conversion.api import convert
    report = convert("rank0.host_et.json.gz", "rank0.kineto.json.gz", "rank0.et")
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import msgspec

from pt2chakra.atomic import StagedOutputs, check_outputs, check_prefix_outputs, write_atomic
from pt2chakra.chakra.encode import node_count
from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata
from pt2chakra.conversion.graph_builder import ChakraGraph, build_graph
from pt2chakra.conversion.linker import (
    RANKS_OPTION,
    LinkedTrace,
    check_rank_flag,
    check_same_recording,
    link,
    release_linked_inputs,
    thread_map,
)
from pt2chakra.conversion.progress import Stages
from pt2chakra.conversion.step import STEP_LAST, StepChoice
from pt2chakra.errors import InputError, renamed_keyword
from pt2chakra.files import gc_paused
from pt2chakra.pytorch.host_trace import load_host_trace
from pt2chakra.pytorch.kineto_trace import load_kineto_trace
from pt2chakra.rules.cycles import break_cycles_in, describe_cycle, find_cycle_in

log = logging.getLogger(__name__)

# Kineto categories of accelerators that are not GPUs, by prefix (a vendor
# writes several: MTIA mtia_runtime, mtia_ccp_events, mtia_insight,
# mtia_counters, ...; Habana Gaudi hpu_op). pt2chakra converts CUDA/ROCm-style
# device activity only, so such a trace's device side is not in the .et: the
# summary says so instead of listing the categories as "not used". Not xpu:
# Intel XPU writes "kernel"/"gpu_memcpy" and xpu_runtime, which are converted
# like CUDA (pytorch/kineto_trace.py CATEGORY_KINDS).
UNCONVERTED_ACCELERATOR_PREFIXES = ("mtia_", "hpu_")


def unconverted_accelerator_events(ignored: Mapping[str, int]) -> dict[str, int]:
    """Of the Kineto events left out by category (``load_kineto_trace``'s
    ``ignored``: "cat" or "cat:ph=..."), those of an accelerator pt2chakra
    does not convert, by prefix ("mtia_*" -> count)."""
    out: dict[str, int] = {}
    for key, n in ignored.items():
        cat = key.split(":", 1)[0].lower()
        for prefix in UNCONVERTED_ACCELERATOR_PREFIXES:
            if cat.startswith(prefix):
                out[f"{prefix}*"] = out.get(f"{prefix}*", 0) + n
    return dict(sorted(out.items()))


class ConversionReport(msgspec.Struct, omit_defaults=True):
    """What ``convert`` did, op by op accounted for. In a Kineto-only
    conversion (``host_trace`` None) the "host ops" are Kineto's CPU events."""

    host_trace: str | None
    device_trace: str | None
    output: str
    link_method: str
    host_ops_in: int
    host_ops_linked: int
    host_ops_kept: int
    host_ops_dropped: dict[str, int]
    gpu_activities_in: int
    gpu_activities_kept: int
    gpu_activities_dropped: dict[str, int]
    nodes: int
    nodes_by_type: dict[str, int]
    edges_by_kind: dict[str, int]
    cycles_broken: list[str]
    seconds: float
    # Kineto-only: the step converted, and every event of the file by kind.
    step: str = ""
    kineto_events: dict[str, int] = {}
    # --repair: what was recovered from a truncated host ET.
    repair: dict[str, int] = {}
    # Kineto events of accelerators not converted, by category prefix
    # (unconverted_accelerator_events): the device side missing from the .et.
    unconverted_accelerator: dict[str, int] = {}
    # Nodes that stand for GPU work without an activity in the step
    # (conversion/step.py), by name: counted apart from the activities.
    stand_in_nodes: dict[str, int] = {}
    # Communication nodes whose size the trace does not hold, flagged
    # comm_size_unknown (rules.conventions.COMM_SIZE_UNKNOWN_ATTR).
    comm_size_unknown: int = 0

    def accounted(self) -> bool:
        """Every input op is kept or dropped with a reason."""
        host_ok = self.host_ops_in == self.host_ops_kept + sum(self.host_ops_dropped.values())
        gpu_ok = self.gpu_activities_in == (self.gpu_activities_kept
                                            + sum(self.gpu_activities_dropped.values()))
        return host_ok and gpu_ok

    def accelerator_note(self) -> str:
        """One line: the trace's device side is an accelerator's that is not converted."""
        n = sum(self.unconverted_accelerator.values())
        return (f"  note: {n} event{'s' if n != 1 else ''} of an accelerator pt2chakra does "
                "not convert (" + ", ".join(self.unconverted_accelerator)
                + "): the device side is not in the .et")

    def summary(self) -> str:
        lines = [
            f"{self.output}: {self.nodes} nodes "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.nodes_by_type.items())),
            f"  host ops: {self.host_ops_in} in, {self.host_ops_linked} linked ({self.link_method}),"
            f" {self.host_ops_kept} kept"
            + "".join(f"; {v} dropped: {k}" for k, v in self.host_ops_dropped.items()),
        ]
        if self.step:
            lines.append(f"  step: {self.step}; Kineto events: "
                         + ", ".join(f"{k} {v}" for k, v in self.kineto_events.items()))
        if self.repair:
            lines.append("  repair: " + ", ".join(f"{k} {v}" for k, v in self.repair.items()))
        if self.unconverted_accelerator:
            lines.append(self.accelerator_note())
        if self.device_trace is not None:
            lines.append(
                f"  GPU activities: {self.gpu_activities_in} in, {self.gpu_activities_kept} kept"
                + "".join(f"; {v} dropped: {k}" for k, v in self.gpu_activities_dropped.items()))
        if self.stand_in_nodes:
            lines.append("  stand-in nodes: " + ", ".join(
                f"{v} {k}" for k, v in self.stand_in_nodes.items()))
        if self.comm_size_unknown:
            lines.append(f"  sizes not in the trace: {self.comm_size_unknown} communication "
                         "nodes (comm_size 0, flagged comm_size_unknown: the replay keeps their "
                         "measured time; see validate)")
        lines.append("  edges: " + ", ".join(f"{k} {v}" for k, v in sorted(self.edges_by_kind.items())))
        for text in self.cycles_broken:
            lines.append(f"  broke cycle: {text}")
        lines.append(f"  {self.seconds:.2f} s")
        return "\n".join(lines)


class CycleError(InputError):
    """The linked graph has a cycle and the user did not ask to break it."""


def link_traces(host_trace: str | os.PathLike[str], device_trace: str | os.PathLike[str] | None,
                stages: Stages | None = None, repair: bool = False, *, rank: int | None = None,
                force: bool = False, ignored: Counter[str] | None = None) -> LinkedTrace:
    """Load both traces and link them (host only when ``device_trace`` is None).
    A pair that looks like two ranks or runs is refused unless ``force``.
    ``ignored``: counts the Kineto events left out, by category."""
    if device_trace is not None and os.fspath(host_trace) == os.fspath(device_trace) == "-":
        raise InputError("--device-trace", "standard input (-) can feed only one of the traces")
    stages = stages or Stages(0, enabled=False)
    with gc_paused():
        host = load_host_trace(str(host_trace), repair=repair)
        stages.step("host trace loaded")
        kineto = None
        if device_trace is not None:
            # The host ET's inputs are the ones written: Kineto's are not read.
            kineto = load_kineto_trace(str(device_trace), ignored, inputs=False)
            stages.step("device trace loaded")
            check_same_recording(host, kineto, rank=rank, force=force)
        linked = link(host, kineto)
        stages.step("linked")
        return linked


class ConversionRun(NamedTuple):
    """``convert``'s report with what it was built from: the linked traces
    and the graph (a caller about to exit may keep them from being freed
    one object at a time; see ``cli.options.keep_until_exit``)."""

    report: ConversionReport
    linked: LinkedTrace
    graph: ChakraGraph


class OutputProfile(Protocol):
    """A consumer's own form of a conversion, written instead of the one
    ``.et`` (``convert --consumer astra-sim``: ``astra.export.AstraSimProfile``).
    A protocol, so that conversion needs no consumer: the consumer's package
    sits above this one and hands its form in."""

    @property
    def output_files(self) -> str:
        """What follows ``<output>.`` in its files' names (a regular expression)."""
        ...

    def write(self, metadata: GlobalMetadata, nodes: Iterable[ChakraNode],
              output: str | os.PathLike[str], *, rank: int | None,
              inputs: Sequence[str | os.PathLike[str] | None],
              staged: StagedOutputs) -> None: ...


def convert(host_trace: str | os.PathLike[str] | None, device_trace: str | os.PathLike[str] | None,
            output: str | os.PathLike[str], *, rank: int | None = None,
            break_cycles: bool = False, progress: bool | None = None,
            consumer: OutputProfile | None = None,
            report_path: str | os.PathLike[str] | None = None,
            repair: bool = False, force: bool = False,
            step: StepChoice = STEP_LAST,
            profile: OutputProfile | None = None) -> ConversionReport:
    """``convert_run``'s report."""
    return convert_run(host_trace, device_trace, output, rank=rank, break_cycles=break_cycles,
                       progress=progress, report_path=report_path, repair=repair, force=force,
                       step=step,
                       consumer=renamed_keyword(consumer, profile, "convert", "consumer",
                                                "profile")).report


def convert_run(host_trace: str | os.PathLike[str] | None,
                device_trace: str | os.PathLike[str] | None,
                output: str | os.PathLike[str], *, rank: int | None = None,
                break_cycles: bool = False, progress: bool | None = None,
                consumer: OutputProfile | None = None,
                report_path: str | os.PathLike[str] | None = None,
                repair: bool = False, force: bool = False,
                step: StepChoice = STEP_LAST,
                staged: StagedOutputs | None = None,
                named_rank: int | None = None,
                profile: OutputProfile | None = None) -> ConversionRun:
    """Link (when a Kineto trace is given) and convert to a Chakra ``.et``.

    ``consumer``: a consumer's form of the output instead of one ``.et`` (e.g.
    ``astra.export.AstraSimProfile()``: ``output`` is then a prefix for
    ``<prefix>.<rank>.et``, see ``OutputProfile``; ``profile``: its old name,
    still read). Raises ``InputError``
    for bad input and ``CycleError`` when the graph has a cycle (unless
    ``break_cycles``); no output file is left behind then. ``report_path``:
    also write the report there as JSON (checked before the work starts; the
    outputs are committed together, so a report that cannot be written leaves
    no ``.et`` either). ``force``: convert a pair that looks like two ranks or
    runs (see ``linker.check_same_recording``).

    ``host_trace=None`` converts the Kineto trace alone (see ``kineto_only``);
    ``repair=True`` reads a host ET cut off mid-array (see ``repair``);
    ``step`` picks a Kineto-only conversion's measured step (``step.kineto_step``:
    last, median, all or a step number; a host ET records its own step).
    ``staged``: the caller's outputs, to commit with its own (e.g. the HTML
    report of ``convert --html``): the files are committed into it, and put
    back as they were if the caller's ``with`` block fails later.

    ``rank`` (``--rank``) is written as the output's rank; ``named_rank``
    (``--ranks``: the number in the file names) is only checked. Either one
    that disagrees with the rank the Kineto trace records is refused unless
    ``force`` (``linker.check_rank_flag``)."""
    if host_trace is None and device_trace is None:
        raise InputError("convert", "give a host trace, a device (Kineto) trace, or both")
    if host_trace is not None and step != STEP_LAST:
        raise InputError("--step", "chooses among a Kineto trace's steps when it is converted "
                         "alone; a host ET records one step, the one converted")
    consumer = renamed_keyword(consumer, profile, "convert_run", "consumer", "profile")
    _check_outputs(host_trace, device_trace, output, report_path, consumer)
    args = (host_trace, device_trace, output, rank, break_cycles, progress, consumer,
            report_path, repair, force, step, named_rank)
    if staged is not None:
        return _convert_staged(*args, staged)
    with StagedOutputs() as own:
        return _convert_staged(*args, own)


def _convert_staged(host_trace: str | os.PathLike[str] | None,
                    device_trace: str | os.PathLike[str] | None,
                    output: str | os.PathLike[str], rank: int | None, break_cycles: bool,
                    progress: bool | None, consumer: OutputProfile | None,
                    report_path: str | os.PathLike[str] | None, repair: bool, force: bool,
                    step: StepChoice, named_rank: int | None,
                    staged: StagedOutputs) -> ConversionRun:
    t0 = time.perf_counter()
    stages = Stages(5 if device_trace is not None and host_trace is not None else 4, progress)
    extra: dict[str, Any] = {}
    ignored: Counter[str] = Counter()  # Kineto events left out, by category
    with gc_paused():
        if host_trace is None:
            assert device_trace is not None
            linked, extra = _kineto_only(device_trace, stages, ignored, step)
        else:
            linked = link_traces(host_trace, device_trace, stages, repair=repair, rank=rank,
                                 force=force, ignored=ignored)
        if linked.kineto is not None:
            if host_trace is None:  # a pair's --rank is checked with its pid, when linked
                check_rank_flag(rank, linked.kineto, force)
            check_rank_flag(named_rank, linked.kineto, force, RANKS_OPTION, written=False)
        release_linked_inputs(linked)
        graph = build_graph(linked, rank=rank)
        _account_outside(graph, extra)
        broken = _ensure_acyclic(graph, str(output), break_cycles)
        stages.step("graph built and checked")
        if consumer is not None:
            consumer.write(graph.metadata, graph.nodes(), output, rank=rank,
                          inputs=[host_trace, device_trace], staged=staged)
        else:
            total = graph.host_ops_kept + graph.gpu_kept + sum(graph.stand_ins.values())
            _write_staged_et(str(output), graph, staged,
                             stages.counting(graph.framed_nodes(), total, "writing nodes",
                                             node_count))
        report = _conversion_report(graph, None if host_trace is None else str(host_trace),
                                    device_trace, str(output), broken, time.perf_counter() - t0)
        report.step = extra.get("step", "")
        report.comm_size_unknown = graph.comm_size_unknown()
        report.kineto_events = extra.get("kineto_events", {})
        report.unconverted_accelerator = unconverted_accelerator_events(ignored)
        if linked.host.repair is not None:
            report.repair = msgspec.structs.asdict(linked.host.repair)
        if not report.accounted():
            raise AssertionError(f"accounting mismatch: {report}")
        if report_path is not None:
            write_conversion_report(report, staged.stage(report_path))
        staged.commit()
        stages.step(f"wrote {output}")
    return ConversionRun(report, linked, graph)


def _kineto_only(device_trace: str | os.PathLike[str], stages: Stages, ignored: Counter[str],
                 step: StepChoice = STEP_LAST) -> tuple[LinkedTrace, dict[str, Any]]:
    """Link a Kineto trace alone (counting the events left out in ``ignored``);
    the extras the report needs beside it."""
    from pt2chakra.conversion.kineto_only import kineto_event_counts, link_kineto_only

    kineto = load_kineto_trace(str(device_trace), ignored)
    stages.step("device trace loaded")
    found = link_kineto_only(kineto, step)
    stages.step("linked")
    return found.linked, {"step": found.window.describe(), "dropped": found.dropped,
                          "kineto_events": kineto_event_counts(kineto, ignored)}


def _account_outside(graph: ChakraGraph, extra: dict[str, Any]) -> None:
    """Kineto-only: CPU events not made nodes count as input, dropped."""
    for reason, count in extra.get("dropped", {}).items():
        graph.host_ops_in += count
        graph.host_ops_dropped[reason] = count


def _write_staged_et(output: str, graph: ChakraGraph, staged: StagedOutputs,
                     nodes: Any) -> None:
    """``write_et`` into a staged temp file; errors name ``output``."""
    try:
        write_et(staged.stage(output), graph.metadata, nodes)
    except InputError as exc:
        raise InputError(output, exc.problem) from exc
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, output) from exc


def _check_outputs(host_trace: str | os.PathLike[str] | None,
                   device_trace: str | os.PathLike[str] | None,
                   output: str | os.PathLike[str],
                   report_path: str | os.PathLike[str] | None,
                   consumer: OutputProfile | None = None,
                   ) -> None:
    """Refuse, before any work, outputs that would replace an input or land
    in a folder that does not exist (``atomic.check_outputs``)."""
    inputs = [host_trace, device_trace]
    if consumer is None:
        check_outputs(inputs, [output, report_path])
    else:  # a prefix: the consumer's files are named after the rank
        check_prefix_outputs(inputs, output, consumer.output_files)
        check_outputs(inputs, [report_path])


def _ensure_acyclic(graph: ChakraGraph, output: str, fix: bool) -> list[str]:
    if graph.deps.ascending():  # the usual case, answered without a pass per node
        return []
    ids = graph.node_ids()  # unique by construction (host ids, then fresh GPU ids)
    cycle = find_cycle_in(ids, graph.deps)
    if not cycle:
        return []
    if not fix:
        raise CycleError(output, "not written: dependency cycle "
                         + describe_cycle(cycle, graph.node_names())
                         + " (use --break-cycles to drop the least reliable edge kind)")
    return [f"dropped {e.kind} edge {e.src} -> {e.dst}" for e in break_cycles_in(ids, graph.deps)]


def _conversion_report(graph: ChakraGraph, host_trace: str | None, device_trace: object,
                       output: str, broken: list[str], seconds: float) -> ConversionReport:
    by_kind = graph.deps.kind_counts()
    return ConversionReport(
        host_trace=host_trace, device_trace=str(device_trace) if device_trace is not None else None,
        output=output, link_method=graph.link_method, host_ops_in=graph.host_ops_in,
        host_ops_linked=graph.linked_ops, host_ops_kept=graph.host_ops_kept,
        host_ops_dropped=graph.host_ops_dropped, gpu_activities_in=graph.gpu_in,
        gpu_activities_kept=graph.gpu_kept, gpu_activities_dropped=graph.gpu_dropped,
        nodes=graph.host_ops_kept + graph.gpu_kept + sum(graph.stand_ins.values()),
        nodes_by_type=graph.node_type_counts(), stand_in_nodes=graph.stand_ins,
        edges_by_kind={k.name.lower(): v for k, v in by_kind.items()},
        cycles_broken=broken, seconds=round(seconds, 3))


def write_conversion_report(report: ConversionReport, path: str | os.PathLike[str]) -> None:
    """Write the report as JSON, atomically."""
    import orjson  # here: a convert without --report does not load it

    write_atomic(path, orjson.dumps(msgspec.to_builtins(report), option=orjson.OPT_INDENT_2))


class LinkSummary(msgspec.Struct):
    """What ``write_linked`` wrote."""

    output: str
    method: str
    host_ops_linked: int
    gpu_activities_attached: int


def linked_json(linked: LinkedTrace, host_trace: str, device_trace: str | None) -> dict[str, Any]:
    """The linked intermediate form: every linked host op with its Kineto
    times and thread, the ET-thread -> Kineto-thread map, and the GPU
    activities with their launching op."""
    return {
        "host_trace": host_trace,
        "device_trace": device_trace,
        "method": linked.method,
        "thread_map": {str(k): v for k, v in thread_map(linked).items()},
        "ops": [
            {"id": op.id, "name": op.name, "tid": op.tid, "parent": op.parent,
             "ts": ev.ts, "dur": ev.dur, "kineto_tid": ev.tid}
            for op in linked.host.ops
            if (ev := linked.cpu_event.get(op.id)) is not None
        ],
        "gpu_ops": [msgspec.to_builtins(g) for g in linked.gpu_ops],
        "gpu_dropped": linked.gpu_dropped,
    }


def write_linked(host_trace: str | os.PathLike[str], device_trace: str | os.PathLike[str] | None,
                 output: str | os.PathLike[str], force: bool = False) -> LinkSummary:
    """Link the two traces and write the linked intermediate JSON atomically."""
    check_outputs([host_trace, device_trace], [output])
    linked = link_traces(host_trace, device_trace, force=force)
    import orjson  # here, as in write_conversion_report

    doc = linked_json(linked, os.fspath(host_trace),
                      os.fspath(device_trace) if device_trace is not None else None)
    write_atomic(output, orjson.dumps(doc))
    return LinkSummary(output=os.fspath(output), method=linked.method,
                       host_ops_linked=len(doc["ops"]), gpu_activities_attached=len(linked.gpu_ops))

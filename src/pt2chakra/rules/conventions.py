"""Conventions every reader of a Chakra trace shares: device or host node,
the lane a node runs on, the measured step window and how ranks' windows
align, error % (attributes by name and the schema version we write are the
format's: ``chakra/records.py``; the rank of a file: ``chakra/ranks.py``).

Each rule lives here once; the simulator, ``validate``, ``timeline``,
``inspect`` and the exports call it instead of re-deriving it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any, NamedTuple, TypeGuard

from pt2chakra.chakra.records import ChakraNode, NodeType
from pt2chakra.errors import BANDWIDTH_GBPS, LATENCY_US, SCALE, read_number


def is_gpu(attrs: Mapping[str, Any]) -> bool:
    """A node is a GPU/device op when ``is_cpu_op`` is false or absent (the
    simulator's reading: absent means false)."""
    return not attrs.get("is_cpu_op", False)


COMM_NODE_TYPES = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)

# Lane kinds: a CPU thread, a GPU stream, a communication channel (a comm
# node of another tool's trace without a stream: one per process group), or
# the one lane of device nodes that name no stream.
CPU_LANE, STREAM_LANE, COMM_LANE, DEVICE_LANE = "cpu", "stream", "comm", "device"


# A communication node's channel within its process group: a CPU backend
# (gloo) runs a group's transfers on several worker threads at once, each
# one in order; the converter names the worker thread here.
COMM_CHANNEL = "comm_channel"


def own_transfer_channel(op_id: int) -> int:
    """The channel of a send or receive that is posted and left in flight
    (the converter gives each one its own): negative, as no thread id is."""
    return -1 - op_id


def is_own_transfer_channel(channel: Any) -> bool:
    """Whether a channel is one transfer's own (``own_transfer_channel``):
    a lane of its own for the replay, one line with its group's others
    where lanes are shown (a pipeline posts hundreds)."""
    return is_int(channel) and channel < 0


class Lane(NamedTuple):
    """Where a node runs within its rank; a replay runs one node at a time
    per lane, and a communication node holds its lane while it waits for its
    peers. ``key`` is unique within a rank."""

    kind: str
    key: tuple[Any, ...]
    label: str


def lane_of(node_type: int, attrs: Mapping[str, Any]) -> Lane:
    """The lane of a node from its type and attributes (``tid`` for CPU ops,
    ``device``/``stream`` for device ops)."""
    if not is_gpu(attrs):
        tid = attrs.get("tid", 0)
        return Lane(CPU_LANE, ("cpu", tid), f"thread {tid}")
    if "stream" in attrs:
        device, stream = attrs.get("device", 0), attrs["stream"]
        return Lane(STREAM_LANE, ("gpu", device, stream), f"stream {stream}")
    if node_type in COMM_NODE_TYPES:
        pg = str(attrs.get("pg_name", ""))
        channel = attrs.get(COMM_CHANNEL)
        if is_own_transfer_channel(channel):  # one transfer in flight
            return Lane(COMM_LANE, ("comm", pg, channel), f"comm {pg} transfers".replace("  ", " "))
        if channel is not None:  # transfers of one group that run side by side
            return Lane(COMM_LANE, ("comm", pg, channel), f"comm {pg} channel {channel}")
        return Lane(COMM_LANE, ("comm", pg), f"comm {pg}".strip())
    return Lane(DEVICE_LANE, ("device",), "device")


# What the recorded step (``step_start_micros``..``step_end_micros``) means,
# in the metadata's ``step_definition`` (conversion/step.py says why):
# ``period``: one step's start to the next's, what the replay's CPU side
# must reach; ``span`` (also when absent): first start to last end.
STEP_DEFINITION_ATTR = "step_definition"
STEP_PERIOD = "period"
STEP_SPAN = "span"


def is_period_step(metadata_attrs: Mapping[str, Any]) -> bool:
    return metadata_attrs.get(STEP_DEFINITION_ATTR) == STEP_PERIOD


def error_pct(predicted: float, measured: float | None) -> float | None:
    """The prediction's error against the measured step, in percent of it;
    None where nothing was measured (a step of real work is never 0 us).
    The one formula every report (simulate, the ASTRA-sim consumer) shows."""
    if measured is None or measured <= 0:
        return None
    return (predicted - measured) / measured * 100


class StepWindow(NamedTuple):
    """The measured step, in the trace's microseconds."""

    start: float
    end: float


def is_int(value: Any) -> TypeGuard[int]:
    """An integer attribute value (a bool is not one, though Python says so)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: Any) -> TypeGuard[float]:
    """A usable numeric attribute value: int or float, not bool, not NaN/inf."""
    if type(value) is int:  # the common case, first (millions of nodes)
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# A CPU node's inclusive time: the converter's ``duration_micros`` is its
# exclusive time (callees taken out), this attribute the whole span.
INCLUSIVE_ATTR = "inclusive_duration_micros"
# A communication node whose size the trace does not hold (no input shapes, no
# record_param_comms sizes, no size in the kernel's args): written with
# ``comm_size`` 0 and this flag (bool_val true), so that every consumer can tell
# "0 bytes" from "not known" and say what it does with it (validate, the
# what-ifs, the ASTRA-sim export; the replay keeps its measured time). A node
# that just lacks comm_size is refused (validate: error; simulate, astra-sim:
# refused unless --force), since a missing size usually means a broken trace,
# not a free transfer.
COMM_SIZE_UNKNOWN_ATTR = "comm_size_unknown"

# Metadata of a predicted .et (simulate --write-et): the setting its times
# come from; diff prints it beside the run's step. The attribute keeps its
# name ("replay_setting"): files written before read the same.
PREDICTED_SETTING_ATTR = "replay_setting"


def inclusive_micros(node: ChakraNode, attrs: Mapping[str, Any]) -> float:
    """A CPU node's inclusive time (``INCLUSIVE_ATTR``), else its duration."""
    value = attrs.get(INCLUSIVE_ATTR)
    return float(value) if is_finite_number(value) else float(node.duration_micros)


def thread_holds(starts: Sequence[float], inclusive: Iterable[float]) -> Iterator[float]:
    """How long each op of one thread (in order) holds it: from its start
    until the next op (its first callee) starts, at most its inclusive time,
    never negative. A caller's time between and after its callees is not
    held: a wait inside a caller (``work.wait()``) shows as a gap. The replay
    releases the GPU work an op launched when its hold ends."""
    nexts = [*starts[1:], math.inf]
    for start, callee, incl in zip(starts, nexts, inclusive):
        stop = start + incl
        if callee < stop:
            stop = callee
        held = stop - start
        yield held if held > 0.0 else 0.0


# A kernel launched well after its launcher's hold ended (``thread_holds``:
# the op's start until its first callee starts) carries its recorded launch
# time (int64 us, the trace's clock) under this attribute: released at the
# hold's end, it would start before the caller's own time that preceded its
# launch (the first ``cudnn_convolution`` of a run: 1.4 s of cuDNN set-up
# between its first callee and its launch). The replay releases it that long
# after the last op its thread ran before the launch. A standard
# AttributeProto: other readers ignore it.
LAUNCH_TIME_ATTR = "launch_time_micros"
# Only launches later than this after the hold's end carry it (every other
# output stays as it was): a launch after a short callee (an ``aten::empty``
# 10-50 us before its kernel) is late by less than a kernel's launch latency
# on a busy stream, and the replay's error from it is within noise.
LATE_LAUNCH_MIN_US = 1000.0


def is_late_launch(launch_us: float, hold_end_us: float) -> bool:
    """A launch at ``launch_us`` by an op whose hold ends at ``hold_end_us``
    is late: it carries ``LAUNCH_TIME_ATTR``."""
    return launch_us - hold_end_us > LATE_LAUNCH_MIN_US


# CPU time no op of the trace holds, under one name: the ``category`` of the
# ASTRA-sim export's GPU-side stand-ins for dropped CPU time and of a GPU-only
# trace's idle stretches (CPU time, so the CPU what-if scales it, not the GPU
# one), and the critical path's share for replayed CPU idle gaps.
CPU_GAP_CATEGORY = "cpu_gap"

# The ``category`` of a GPU-side stand-in for work queued outside the trace
# (conversion/step.py writes it): it starts at the launch of the work it held
# the stream for, a CPU moment the trace records but no edge carries, so a
# replay without the CPU nodes must give it the recorded wait before it.
QUEUED_WORK_CATEGORY = "held_outside_trace"

# Rank start offsets: ``recorded`` (the ranks share one clock), ``together``
# (all start at 0), or ``auto`` (recorded when the ranks' steps overlap).
ALIGNMENTS = ("auto", "recorded", "together")


def rank_origins(windows: Sequence[StepWindow], align: str) -> tuple[list[float], str]:
    """Each rank's start, relative to the earliest one, and the alignment
    used: the recorded offsets when the traces share a clock (``auto``: their
    steps overlap, i.e. the starts spread less than the longest step), else
    all at 0. The simulator and the ASTRA-sim export both place ranks so."""
    if not windows:
        return [], "together"
    starts = [w.start for w in windows]
    low = min(starts)
    if align == "auto":
        spread = max(starts) - low
        longest = max(w.end - w.start for w in windows)
        align = "recorded" if len(starts) > 1 and spread < longest else "together"
    if align == "recorded":
        return [s - low for s in starts], align
    return [0.0] * len(starts), "together"


def run_measured_step(windows: Sequence[StepWindow], align: str) -> float:
    """The whole run's measured step from its ranks' windows, placed as
    ``rank_origins`` places them (``align`` already resolved, ``recorded`` or
    ``together``): on the shared clock from the first rank's start to the last
    rank's end, else the longest rank's step. The one home of the rule: the
    simulator and the ASTRA-sim consumer model both report it."""
    if not windows:
        return 0.0
    if align == "recorded":
        return max(w.end for w in windows) - min(w.start for w in windows)
    return max(w.end - w.start for w in windows)


def step_window(metadata_attrs: Mapping[str, Any], nodes: Sequence[ChakraNode],
                attrs_of: Sequence[Mapping[str, Any]]) -> StepWindow | None:
    """``step_window_from`` (the rule) over nodes and their attribute dicts:
    it only gathers the columns the rule reads."""
    return step_window_from(metadata_attrs, list(map(operator.attrgetter("start_time_micros"), nodes)),
                            list(map(float, map(operator.attrgetter("duration_micros"), nodes))),
                            [inclusive_micros(n, a) for n, a in zip(nodes, attrs_of)])


def step_window_from(metadata_attrs: Mapping[str, Any], starts: Sequence[int],
                     durations: Sequence[float], inclusive: Sequence[float]) -> StepWindow | None:
    """The measured step of one rank, the one home of the rule at read time:
    the converter's recorded step (``step_start_micros`` /
    ``step_end_micros``), widened to every timed node, since GPU work launched
    at the end of the step finishes after it; a ``period`` step is taken as
    recorded (its GPU tail is the next step's). None for a trace without any
    start time and without a recorded step (other tools' graphs,
    ``microbench``): it has no measured step. Takes the nodes' columns (start
    times, durations as floats, ``inclusive_micros``): the simulator holds
    them as lists, and a million attribute lookups cost seconds."""
    window: StepWindow | None = None
    s0, s1 = metadata_attrs.get("step_start_micros"), metadata_attrs.get("step_end_micros")
    if is_period_step(metadata_attrs) and is_finite_number(s0) and is_finite_number(s1):
        return StepWindow(float(s0), float(s1))  # GPU work past it is the next step's
    if any(starts):
        # the last node end: start + max(duration, inclusive), taken as the
        # larger of the last start + duration and the last start + inclusive
        # (the same number: rounded addition keeps order), as C-level maps (a
        # million nodes); a node with neither start nor duration is untimed
        ends = map(operator.add, starts, durations)
        ends_incl = map(operator.add, starts, inclusive)
        if all(starts):
            window = StepWindow(float(min(starts)), max(max(ends), max(ends_incl)))
        else:
            timed = list(map(operator.or_, map(bool, starts), map(bool, durations)))
            window = StepWindow(float(min(compress(starts, timed))),
                                max(max(compress(ends, timed)), max(compress(ends_incl, timed))))
    if is_finite_number(s0) and is_finite_number(s1):
        if window is None:
            return StepWindow(float(s0), float(s1))
        return StepWindow(min(window.start, float(s0)), max(window.end, float(s1)))
    return window


# The ``consumer_profile`` metadata attribute: which consumer rewrite (today
# only ASTRA-sim's export, ``astra.export``) produced a file. Readers below that
# export (validate's checks) need to recognise it, so the tag lives here.
CONSUMER_PROFILE_ATTR = "consumer_profile"


def profile_tag(cpu: str) -> str:
    """The ``consumer_profile`` value of a file the ASTRA-sim export wrote
    with CPU mode ``cpu``."""
    return f"astra-sim (cpu={cpu})"


def is_serial_profile(metadata_attrs: dict[str, Any]) -> bool:
    """A file of the ``serial`` profile: its compute runs as one chain, so
    stream order is implied by the chain rather than stated per stream."""
    return metadata_attrs.get(CONSUMER_PROFILE_ATTR) == profile_tag("serial")


# Metadata a scaled-out file carries (``pt2chakra extrapolate``,
# docs/SCALE_OUT.md): the recorded rank whose work it holds, and the world
# size its durations were recorded at. Readers that time collectives (the
# simulator, the ASTRA-sim job) need the second: a collective of such a file
# is timed at the file's ``world_size`` from a model fitted at the recorded one.
SCALEOUT_SOURCE_RANK_ATTR = "scaleout_source_rank"
SCALEOUT_RECORDED_WORLD_ATTR = "scaleout_recorded_world_size"
# The factor on the recorded CPU time (ops and the gaps between them) when the
# M ranks share their hosts' cores more than the recorded N did (scaleout/
# hosts.py, ``--ranks-per-host/--cores-per-host``); absent: 1.
SCALEOUT_CPU_STRETCH_ATTR = "scaleout_cpu_stretch"
# The wake-up delay of each hand-off of a collective's chain at the M ranks'
# hosts, in us (scaleout/hosts.py, ``hop_delay_us``); absent: 0.
SCALEOUT_HOP_DELAY_ATTR = "scaleout_hop_delay_us"
# Written (True) with it where the recorded N ranks crowded their hosts too:
# the recording then shows the wake-ups itself, and the replay measures them.
SCALEOUT_RECORDED_CROWDED_ATTR = "scaleout_recorded_crowded"
# The target's hosts joined by uplinks (``--inter-host-bandwidth/-latency``
# with ``--ranks-per-host``): consecutive ranks per host, each uplink's GB/s
# and us (simulation/network.py, ``HostLinks``); absent: every link as recorded.
SCALEOUT_RANKS_PER_HOST_ATTR = "scaleout_ranks_per_host"
SCALEOUT_UPLINK_GBPS_ATTR = "scaleout_uplink_gbps"
SCALEOUT_UPLINK_LATENCY_ATTR = "scaleout_uplink_latency_us"
# The most each rank's link moves on its crowded host, GB/s: the host's cores
# over its ranks' CPU cost per byte (scaleout/hosts.py, ``host_link_gbps``);
# absent: no limit beyond the link.
SCALEOUT_HOST_LINK_GBPS_ATTR = "scaleout_host_link_gbps"
# Written on every scaled file, and every attribute a scaled file may carry
# (an extrapolation of a scaled file drops the old ones and writes its own).
SCALEOUT_ALWAYS_ATTRS = (SCALEOUT_SOURCE_RANK_ATTR, SCALEOUT_RECORDED_WORLD_ATTR)
SCALEOUT_ATTRS = (*SCALEOUT_ALWAYS_ATTRS, SCALEOUT_CPU_STRETCH_ATTR, SCALEOUT_HOP_DELAY_ATTR,
                  SCALEOUT_RECORDED_CROWDED_ATTR, SCALEOUT_RANKS_PER_HOST_ATTR,
                  SCALEOUT_UPLINK_GBPS_ATTR, SCALEOUT_UPLINK_LATENCY_ATTR,
                  SCALEOUT_HOST_LINK_GBPS_ATTR)


class ScaledWorld(NamedTuple):
    """A scaled-out file's world: the ranks it stands for, and those its
    durations were recorded on."""

    world_size: int
    recorded: int
    cpu_stretch: float = 1.0
    hop_delay_us: float = 0.0
    recorded_crowded: bool = False
    ranks_per_host: int = 0  # 0: hosts not described
    uplink_gbps: float | None = None
    uplink_latency_us: float = 0.0
    host_link_gbps: float | None = None  # each rank's share of its host's CPU for its link

    @property
    def rescaled(self) -> bool:
        return self.world_size != self.recorded


# The ranges of a scaled-out file's numbers (``errors.read_number``): the CPU
# stretch is a factor on recorded time like a what-if scale (hosts.py gives at
# most ranks per host over cores, 65536); the hand-off delay is a latency.
SCALEOUT_NUMBERS = {SCALEOUT_CPU_STRETCH_ATTR: SCALE, SCALEOUT_HOP_DELAY_ATTR: LATENCY_US}
SCALEOUT_UPLINK_NUMBERS = {SCALEOUT_UPLINK_GBPS_ATTR: BANDWIDTH_GBPS,
                           SCALEOUT_UPLINK_LATENCY_ATTR: LATENCY_US}


def scaled_world(metadata_attrs: Mapping[str, Any], where: str = "metadata",
                 ) -> ScaledWorld | None:
    """The world of a scaled-out file (None: a recorded file). Its stretch and
    hop delay, when present, are read within ``SCALEOUT_NUMBERS``' ranges:
    ``InputError`` naming ``where`` (the file) and the attribute otherwise
    (``rules.checks`` reports it, naming the file, before any replay)."""
    recorded = metadata_attrs.get(SCALEOUT_RECORDED_WORLD_ATTR)
    world = metadata_attrs.get("world_size")
    if not (is_int(recorded) and is_int(world) and recorded > 0 and world > 0):
        return None
    stretch, hop = (read_number(metadata_attrs[name], allowed, where, f"metadata {name}")
                    if name in metadata_attrs else default
                    for (name, allowed), default in zip(SCALEOUT_NUMBERS.items(), (1.0, 0.0)))
    crowded = metadata_attrs.get(SCALEOUT_RECORDED_CROWDED_ATTR) is True
    host_link = read_number(metadata_attrs[SCALEOUT_HOST_LINK_GBPS_ATTR], BANDWIDTH_GBPS, where,
                            f"metadata {SCALEOUT_HOST_LINK_GBPS_ATTR}") \
        if SCALEOUT_HOST_LINK_GBPS_ATTR in metadata_attrs else None
    per_host = metadata_attrs.get(SCALEOUT_RANKS_PER_HOST_ATTR)
    if not (is_int(per_host) and per_host > 0 and SCALEOUT_UPLINK_GBPS_ATTR in metadata_attrs):
        return ScaledWorld(world, recorded, stretch, hop, crowded, host_link_gbps=host_link)
    gbps, latency = (read_number(metadata_attrs.get(name, 0.0), allowed, where,
                                 f"metadata {name}")
                     for name, allowed in SCALEOUT_UPLINK_NUMBERS.items())
    return ScaledWorld(world, recorded, stretch, hop, crowded, per_host, gbps, latency,
                       host_link)


def size_unknown(attrs: Mapping[str, Any]) -> bool:
    """The node is flagged ``COMM_SIZE_UNKNOWN_ATTR``."""
    return attrs.get(COMM_SIZE_UNKNOWN_ATTR) is True

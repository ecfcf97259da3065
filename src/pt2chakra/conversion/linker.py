"""Link host-ET ops to Kineto events, and GPU activities to the host op that
launched them.

Two ways to pair host ops with Kineto CPU events:

* ``rf_id``: the ET's ``rf_id`` equals Kineto's ``Record function id`` when both
  were recorded in one profiler session (torch >= 2.2).
* ``order``: older traces lack that id. The ET holds one iteration while Kineto
  may hold many, so for each ET thread we look for the Kineto thread and the
  offset where the ET's op names line up best, then align by execution order,
  tolerating a few missing or extra ops on either side.

GPU activities attach via ``correlation`` to their launch call, and the launch
to the innermost enclosing Kineto CPU event on its thread that is linked.
"""

from __future__ import annotations

import bisect
import logging
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import compress, filterfalse
from math import isnan
from operator import add, attrgetter, eq, not_
from typing import Any, NamedTuple, TypeVar

import msgspec

from pt2chakra.conversion.step import RecordedStep, pending_gpu_work, queued_gpu_work, stream_gaps
from pt2chakra.errors import InputError
from pt2chakra.names import LAUNCH_PREFIXES, SYNC_CALLS, is_observer_node
from pt2chakra.pytorch.records import (
    CpuColumns,
    CpuEvent,
    GpuActivity,
    HostOp,
    HostTrace,
    KinetoTrace,
    RuntimeEvent,
    SyncEvent,
    op_field,
)
from pt2chakra.rules.conventions import STEP_SPAN

log = logging.getLogger(__name__)

# The flags that name a conversion's rank: written (one conversion), or only
# in the file names (many, ``many_ranks``).
RANK_FLAG, RANKS_OPTION = "--rank", "--ranks"

# Below this share of host ops matched, the two files are not one recording
# (a correct pair links well over 90 %; a mismatched pair shares only common
# op names by chance).
MIN_LINKED_FRACTION = 0.5

# With rf_id linking, matched pairs must also agree on the op name; in a pair
# from two different runs the ids coincide but the names do not.
MIN_NAME_AGREEMENT = 0.8

# Order alignment: how far ahead to look for the next common name when the two
# sequences disagree. Profilers drop or add a handful of ops at a time (e.g.
# record_function annotations); 16 covers that without quadratic cost.
ALIGN_LOOKAHEAD = 16

# How many leading ET ops may serve as the anchor when searching the Kineto
# thread for the iteration the ET recorded (the first op may be missing).
ANCHOR_CANDIDATES = 8

# Candidate offsets are first scored by how many distinct names of the first
# PREFIX_OPS ET ops appear right after them (enough to tell an iteration
# start from unrelated code, cheap at thousands of offsets). Those within PREFIX_KEEP of the best prefix score are aligned in
# full, abandoning a candidate once fewer than MIN_RUNNING_MATCH of the ops
# walked so far matched (a correct offset matches well over 90 %).
PREFIX_OPS = 64
PREFIX_KEEP = 0.9
MIN_RUNNING_MATCH = 0.5

# Alignments of one thread within this share of its best match count are
# "the same iteration shape"; among them, time decides (see link_by_order).
ITERATION_TIE = 0.95
# At most this many iterations of the reference thread are tried (a trace
# rarely holds more; each try costs one pass over the other threads).
MAX_ITERATION_CANDIDATES = 256
# An alignment spanning more than this times the events of the tightest one
# has wandered into another iteration.
COMPACT_SLACK = 1.25

class LaunchedGpuOp(msgspec.Struct, gc=False):
    """A GPU activity of the recorded step and the host op that launched it."""

    activity: GpuActivity
    launch: RuntimeEvent | None
    host_op_id: int  # -1 when the launch is not inside any linked host op


class CpuSync(msgspec.Struct, gc=False):
    """A point where a CPU thread waited for GPU work."""

    kind: str  # "Context Sync", "Stream Sync", "Event Sync"
    ts: float  # when the wait call started
    end: float  # when it returned
    tid: int  # Kineto thread id of the waiting call
    device: int = -1
    stream: int = -1  # stream waited on (-1: all streams / unknown)
    before_ts: float = -1.0  # only GPU work launched before this counts


class StreamWait(msgspec.Struct, gc=False):
    """``cudaStreamWaitEvent``: work on ``stream`` launched after ``ts`` waits
    for work on ``wait_on_stream`` launched before ``record_ts``."""

    ts: float
    device: int
    stream: int
    wait_on_stream: int
    record_ts: float


class LinkedEvent(msgspec.Struct, gc=False):
    """What a conversion reads of a linked host op's Kineto CPU event: its
    start and duration (us) and its Kineto thread. A linked trace holds these
    rather than the events (``CpuEvent``: 14 fields), so that the trace's
    events can be released once linked (``release_linked_inputs``): about
    120 MB less at a million ops."""

    ts: float
    dur: float
    tid: int


NAN = math.nan

# The linked events are held in columns indexed by host op id when the ids
# are dense (the observer numbers ops 0, 1, 2, ...): no more slots than
# DENSE_SLACK per linked op plus DENSE_MIN (1.5 MB of columns for a small
# trace whatever its ids). Sparser ids (hand-made traces) take a dict per
# column instead.
DENSE_SLACK = 4
DENSE_MIN = 1 << 16


def dense_ids(top: int, count: int) -> bool:
    """Whether ``count`` items with ids in ``0 <= id < top`` are held in
    arrays by id (``DENSE_SLACK``, ``DENSE_MIN``)."""
    return top <= DENSE_SLACK * count + DENSE_MIN


class _SparseColumn(dict[int, float]):
    """A column of ``LinkedEvents`` whose op ids are too sparse for an array:
    ``missing`` (NaN: not linked) for an id it lacks, as the array holds."""

    __slots__ = ("missing",)

    def __init__(self, missing: float = NAN) -> None:
        super().__init__()
        self.missing = missing

    def __missing__(self, key: int) -> float:
        return self.missing


class Columns(NamedTuple):
    """``LinkedEvents``' columns for a loop over ops: ``ts[op_id]`` is NaN
    for an op not linked; only ids with ``lo <= op_id < hi`` may be read."""

    ts: Any  # array("d") by id, or a _SparseColumn
    dur: Any  # the same
    tid: Any  # array("q") by id, or a _SparseColumn
    lo: int
    hi: int


def empty_columns(top: int, count: int, lowest: int = 0) -> Columns:
    """Columns with no event linked, for ``count`` ops with ids from
    ``lowest`` up to ``top`` (excluded): arrays by id when dense
    (``dense_ids``), else dicts."""
    if lowest >= 0 and dense_ids(top, count):
        return Columns(array("d", [NAN]) * top, array("d", [NAN]) * top, array("q", [0]) * top,
                       0, top)
    return Columns(_SparseColumn(), _SparseColumn(), _SparseColumn(), -(2**63), 2**63)


_V = TypeVar("_V")


class ReadByGet(Mapping[int, _V]):
    """A mapping by op id whose one lookup is its ``get`` (a bounds check and
    a read of a column or list): item access and membership derive from it."""

    __slots__ = ()

    def __getitem__(self, op_id: int) -> _V:
        found = self.get(op_id)
        if found is None:
            raise KeyError(op_id)
        return found

    def __contains__(self, op_id: object) -> bool:
        return isinstance(op_id, int) and self.get(op_id) is not None


class LinkedEvents(ReadByGet[LinkedEvent]):
    """Host op id -> what the conversion reads of its Kineto event
    (``LinkedEvent``), held as three columns (start, duration, thread)
    indexed by op id: 24 bytes a host op, where a dict of ``LinkedEvent``s
    with their floats was about 150 bytes a linked op (the largest structure
    of a million-op conversion after the host ops). A ``LinkedEvent`` is made
    when one is asked for; the conversion's loops read the columns
    (``columns``)."""

    __slots__ = ("_cols", "_count")

    def __init__(self, ids: Sequence[int], ts: Sequence[float], dur: Sequence[float],
                 tid: Sequence[int], bound: int | None = None) -> None:
        """The events of ops ``ids`` (distinct), given column by column;
        ``bound``: above every id that will be looked up (default: the ids')."""
        top = max(ids, default=-1) + 1 if bound is None else max(bound, max(ids, default=-1) + 1)
        self._cols = empty_columns(top, len(ids), min(ids, default=0))
        t, d, k, _lo, _hi = self._cols
        for op_id, ts_, dur_, tid_ in zip(ids, ts, dur, tid):
            t[op_id] = ts_
            d[op_id] = dur_
            k[op_id] = tid_
        self._count = len(ids)

    @classmethod
    def of_columns(cls, columns: Columns, count: int) -> LinkedEvents:
        """The events already written into ``columns`` (``empty_columns``),
        ``count`` of them."""
        events = cls.__new__(cls)
        events._cols = columns
        events._count = count
        return events

    def columns(self) -> Columns:
        return self._cols

    def zeros(self) -> Any:
        """A new column of the same form (``columns``), 0.0 at every id."""
        ts = self._cols.ts
        return _SparseColumn(0.0) if isinstance(ts, _SparseColumn) else array("d", bytes(8 * len(ts)))

    def int_column(self) -> Any:
        """A new column of the same form, 0 at every id, for ints."""
        ts = self._cols.ts
        return _SparseColumn(0) if isinstance(ts, _SparseColumn) else array("q", bytes(8 * len(ts)))

    def ends(self) -> Any:
        """A new column of the same form: each linked event's end (start +
        duration; NaN where not linked)."""
        ts, dur = self._cols.ts, self._cols.dur
        if isinstance(ts, _SparseColumn):
            ends = _SparseColumn()
            ends.update((i, ts[i] + dur[i]) for i in ts)
            return ends
        return array("d", map(add, ts, dur))

    def get(self, op_id: int, default: Any = None) -> Any:
        ts, dur, tid, lo, hi = self._cols
        if lo <= op_id < hi:
            start = ts[op_id]
            if start == start:  # not NaN: linked
                return LinkedEvent(start, dur[op_id], tid[op_id])
        return default

    def __iter__(self) -> Iterator[int]:
        """The linked ops' ids, ascending."""
        ts = self._cols.ts
        if isinstance(ts, _SparseColumn):
            return iter(sorted(ts))
        return compress(range(len(ts)), map(eq, ts, ts))  # NaN != NaN

    def __len__(self) -> int:
        return self._count

    def span(self) -> tuple[float, float]:
        """(earliest start, latest end) of the linked events; needs one."""
        ts, dur = self._cols.ts, self._cols.dur
        if isinstance(ts, _SparseColumn):
            starts: Iterable[float] = ts.values()
            ends: Iterable[float] = [ts[i] + dur[i] for i in ts]
        else:
            starts, ends = filterfalse(isnan, ts), filterfalse(isnan, map(add, ts, dur))
        return min(starts), max(ends)


_ev_ts, _ev_dur, _ev_tid = attrgetter("ts"), attrgetter("dur"), attrgetter("tid")


def linked_events(events: dict[int, CpuEvent], bound: int | None = None) -> LinkedEvents:
    """Each host op's event (op id -> ``CpuEvent``) as ``LinkedEvents``;
    ``bound`` as there."""
    evs = list(events.values())
    return LinkedEvents(list(events), list(map(_ev_ts, evs)), list(map(_ev_dur, evs)),
                        list(map(_ev_tid, evs)), bound)


class LinkedTrace(msgspec.Struct):
    host: HostTrace
    kineto: KinetoTrace | None
    method: str  # "rf_id", "order" or "none" (host only)
    # the host ops that are operators (observer containers left out), id order
    ops: list[HostOp]
    # host op id -> the times and thread of its Kineto CPU event
    cpu_event: LinkedEvents
    gpu_ops: list[LaunchedGpuOp]
    cpu_syncs: list[CpuSync]
    stream_waits: list[StreamWait]
    # reason -> count of GPU activities not kept
    gpu_dropped: dict[str, int]
    step_start: float = 0.0
    step_end: float = 0.0
    step_definition: str = STEP_SPAN  # see conversion/step.py


_op_id = attrgetter("id")
_op_rf_id = attrgetter("rf_id")


def names_passing(ops: Sequence[HostOp], test: Callable[[str], bool]) -> list[bool] | None:
    """Per op, whether ``test`` passes its name; None when it passes none.
    ``test`` is asked once per distinct name, not once per op: ops share few
    names (hundreds on a million-op trace), and a call per op cost about
    0.2 us each time a rule picked ops out of the trace."""
    names = op_field(ops, "name")
    passing = {name for name in set(names) if test(name)}
    if not passing:
        return None
    return list(map(passing.__contains__, names))


def containers(ops: Sequence[HostOp]) -> list[HostOp]:
    """The observer's process/thread nodes among ``ops``: containers of
    the ops, no work of their own (``link`` leaves them out)."""
    mask = names_passing(ops, is_observer_node)
    return [] if mask is None else list(compress(ops, mask))


def link(host: HostTrace, kineto: KinetoTrace | None) -> LinkedTrace:
    """Link a host trace with its Kineto trace (or none, for host-only)."""
    observer = names_passing(host.ops, is_observer_node)
    ops = sorted(host.ops if observer is None else compress(host.ops, map(not_, observer)),
                 key=_op_id)
    bound = max(op_field(host.ops, "id"), default=-1) + 1
    if kineto is None:
        return LinkedTrace(host=host, kineto=None, method="none", ops=ops,
                           cpu_event=LinkedEvents([], [], [], []), gpu_ops=[], cpu_syncs=[],
                           stream_waits=[], gpu_dropped={})
    if not ops:
        raise InputError(host.path, "no operators, only the observer's process/thread nodes: "
                         "nothing to link (convert it without --device-trace)")
    if _has_rf_ids(kineto.cpu_events):
        method = "rf_id"
        cpu_event = link_by_rf_id(ops, kineto.cpu_events, host.path, kineto.path, bound)
    else:
        method = "order"
        cpu_event = linked_events(link_by_order(ops, kineto.cpu_events), bound)
    _check_linked_enough(len(cpu_event), len(ops), host.path, kineto.path)
    step_start, step_end, _label, _definition, _why = linked_step(cpu_event)
    gpu_ops, gpu_dropped = link_gpu_activities(kineto, cpu_event, step_start, step_end)
    gpu_ops = with_stand_ins(kineto, gpu_ops, step_start, gpu_only=False, step_end=step_end)
    cpu_syncs = collect_cpu_syncs(kineto, step_start, step_end)
    stream_waits = collect_stream_waits(kineto, step_start, step_end)
    log.info("linked %d of %d host ops by %s; %d GPU activities in the step",
             len(cpu_event), len(ops), method, len(gpu_ops))
    return LinkedTrace(host=host, kineto=kineto, method=method, ops=ops, cpu_event=cpu_event,
                       gpu_ops=gpu_ops, cpu_syncs=cpu_syncs,
                       stream_waits=stream_waits, gpu_dropped=gpu_dropped,
                       step_start=step_start, step_end=step_end)


def release_linked_inputs(linked: LinkedTrace) -> None:
    """Let go of what linking has consumed: the Kineto trace's CPU events,
    Python events, runtime calls, syncs and flows (``linked.kineto`` keeps
    its GPU activities, counted in the report, its rank, world size and
    process groups). Converting reads only what ``link`` made of them; at a
    million ops the CPU events alone were about 200 MB of the conversion's
    peak. ``linked.kineto`` is replaced (a caller's own trace is left whole)."""
    kineto = linked.kineto
    if kineto is not None:
        linked.kineto = msgspec.structs.replace(kineto, cpu_events=[], runtime_events=[],
                                                sync_events=[], flow_starts={}, python_events=[])


def _check_linked_enough(linked: int, total: int, host_path: str, kineto_path: str) -> None:
    if total and linked / total < MIN_LINKED_FRACTION:
        raise InputError(
            kineto_path,
            f"only {linked} of {total} host ops of {host_path} match this Kineto trace "
            f"(need {MIN_LINKED_FRACTION:.0%}); are they from the same run?")


# How many Kineto pids a refusal quotes.
MAX_QUOTED_PIDS = 3


def check_same_recording(host: HostTrace, kineto: KinetoTrace, rank: int | None = None,
                         force: bool = False) -> None:
    """Refuse (``InputError`` naming the Kineto trace) a pair that comes from
    two processes: the host ET's ``pid`` is not the pid of the Kineto trace's
    CPU ops (one observer and one profiler in one process record the same
    pid; every rank is its own process), or ``rank`` (``--rank``) is not the
    Kineto trace's ``distributedInfo.rank``. With ``force``, one warning.

    Time ranges are not compared: the host ET's ``start_ts``/``finish_ts``
    are not on Kineto's clock (ms since start vs us since the epoch in the
    real traces). How well op order and names agree is checked while linking
    (``MIN_LINKED_FRACTION``, ``MIN_NAME_AGREEMENT``)."""
    problems = []
    events = kineto.cpu_events
    pids = set(events.pid) if isinstance(events, CpuColumns) else {ev.pid for ev in events}
    if host.pid and pids and host.pid not in pids:
        quoted = ", ".join(map(str, sorted(pids)[:MAX_QUOTED_PIDS]))
        problems.append(f"its CPU ops ran in pid {quoted}, the host trace {host.path} in pid "
                        f"{host.pid}")
    flag = rank_flag_problem(rank, kineto)
    if flag is not None:
        problems.append(flag)
    if not problems:
        return
    text = "; ".join(problems) + ": are they from the same run and rank?"
    if not force:
        raise InputError(kineto.path, text + " (pass --force to convert the pair anyway)")
    log.warning("%s: %s (converting anyway: --force)", kineto.path, text)


def rank_flag_problem(rank: int | None, kineto: KinetoTrace, flag: str = RANK_FLAG) -> str | None:
    """What is wrong with a rank given on the command line for this trace:
    another rank than its ``distributedInfo`` records, or one beyond its
    world size. None when nothing is given or it agrees."""
    if rank is None:
        return None
    if kineto.rank >= 0 and rank != kineto.rank:
        return f"{flag} is {rank} but its distributedInfo.rank is {kineto.rank}"
    if kineto.world_size > 0 and rank >= kineto.world_size:
        return f"{flag} is {rank} but its distributedInfo.world_size is {kineto.world_size}"
    return None


def check_rank_flag(rank: int | None, kineto: KinetoTrace, force: bool,
                    flag: str = RANK_FLAG, written: bool = True) -> None:
    """Refuse (``InputError`` naming the trace) a rank given for a trace that
    records another (``rank_flag_problem``); with ``force``, one warning, and
    the given rank is written (``written``) or the trace's kept."""
    problem = rank_flag_problem(rank, kineto, flag)
    if problem is None:
        return
    if not force:
        raise InputError(kineto.path, f"{problem} (pass --force to convert it anyway)")
    outcome = f"writing rank {rank}" if written else "keeping the trace's rank"
    log.warning("%s: %s (%s: --force)", kineto.path, problem, outcome)


# --------------------------------------------------------------------------
# Host op <-> Kineto CPU event
# --------------------------------------------------------------------------


def link_by_rf_id(ops: Sequence[HostOp], events: Sequence[CpuEvent],
                  host_path: str = "", kineto_path: str = "",
                  bound: int | None = None) -> LinkedEvents:
    """Host op id -> its event's times and thread, by the shared rf_id. Each
    op's event is looked up first and the rf_id table dropped before the
    columns are filled: at a million ops the table, the result and the
    events at once were the conversion's peak. ``bound`` as for
    ``LinkedEvents``."""
    if isinstance(events, CpuColumns):
        return _link_columns_by_rf_id(ops, events, host_path, kineto_path, bound)
    by_rf = {ev.record_function_id: ev for ev in events if ev.record_function_id >= 0}
    # The events looked up by a C-level map (an op without rf_id finds None).
    found = list(map(by_rf.get, map(_op_rf_id, ops)))
    del by_rf
    ids: list[int] = []
    ts: list[float] = []
    dur: list[float] = []
    tid: list[int] = []
    agree = 0
    for op, ev in zip(ops, found):
        if ev is not None:
            ids.append(op.id)
            ts.append(ev.ts)
            dur.append(ev.dur)
            tid.append(ev.tid)
            agree += ev.name == op.name
    del found
    _check_names_agree(agree, len(ids), host_path, kineto_path)
    return LinkedEvents(ids, ts, dur, tid, bound)


def _has_rf_ids(events: Sequence[CpuEvent]) -> bool:
    """Whether any event records its ``Record function id`` (torch >= 2.2)."""
    if isinstance(events, CpuColumns):
        return any(map((-1).__lt__, events.rf_id))
    return any(ev.record_function_id >= 0 for ev in events)


def _check_names_agree(agree: int, linked: int, host_path: str, kineto_path: str) -> None:
    if linked and agree / linked < MIN_NAME_AGREEMENT:
        raise InputError(
            kineto_path,
            f"Record function ids match {linked} host ops of {host_path} but only "
            f"{agree} names agree; the two traces are from different runs")


_INT32_LIMIT = 2**31


class _SparseIndex(dict[int, int]):
    """rf_id -> event index when the ids are too sparse for an array: -1
    (no event) for an id it lacks, as the array holds."""

    def __missing__(self, key: int) -> int:
        return -1


def _link_columns_by_rf_id(ops: Sequence[HostOp], events: CpuColumns, host_path: str,
                           kineto_path: str, bound: int | None) -> LinkedEvents:
    """``link_by_rf_id`` of events held as columns: the rf_id -> event index
    table is an array by rf_id when the ids are dense (as the profiler
    numbers them), so that no int object is made per event; a duplicated
    rf_id keeps its last event, as the dict does."""
    rfs = events.rf_id
    top = max(rfs, default=-1) + 1
    index: Any
    if dense_ids(top, len(rfs)):
        # event indexes fit 4 bytes below 2**31 events: half the table (4 MB
        # at a million), held at the conversion's peak
        index = array("i" if len(rfs) < _INT32_LIMIT else "q", [-1]) * top
    else:
        index, top = _SparseIndex(), 2**63
    for j, rf in enumerate(rfs):
        if rf >= 0:
            index[rf] = j
    names, ev_ts, ev_dur, ev_tid = events.name, events.ts, events.dur, events.tid
    op_top = max(map(_op_id, ops), default=-1) + 1
    columns = empty_columns(op_top if bound is None else max(bound, op_top), len(ops),
                            min(map(_op_id, ops), default=0))
    ts, dur, tid, _lo, _hi = columns  # written straight in: no list of floats on the way
    count = agree = 0
    for op in ops:
        op_rf = op.rf_id
        if op_rf is None or not 0 <= op_rf < top:
            continue
        j = index[op_rf]
        if j >= 0:
            op_id = op.id
            ts[op_id] = ev_ts[j]
            dur[op_id] = ev_dur[j]
            tid[op_id] = ev_tid[j]
            count += 1
            agree += names[j] == op.name
    del index
    _check_names_agree(agree, count, host_path, kineto_path)
    return LinkedEvents.of_columns(columns, count)


def linked_step(events: LinkedEvents) -> RecordedStep:
    """The step of a host ET linked to its Kineto trace: the span of the
    Kineto events of the host's ops (the host ET records one step)."""
    start, end = events.span()
    return RecordedStep(start, end, "the host trace's ops")


# An alignment: (index in the ET thread, index in the Kineto thread) pairs.
_Alignment = list[tuple[int, int]]
# A paired (ET thread, Kineto thread) and its near-best alignments, best first.
_ThreadPair = tuple[int, int, list[_Alignment]]


def link_by_order(ops: Sequence[HostOp], events: Sequence[CpuEvent]) -> dict[int, CpuEvent]:
    """Align each ET thread with the Kineto thread and offset where its op
    names match best (the ET may hold one of many Kineto iterations)."""
    et_threads: dict[int, list[HostOp]] = defaultdict(list)
    for op in sorted(ops, key=lambda o: o.id):  # ids grow in start order
        et_threads[op.tid].append(op)
    k_threads: dict[int, list[CpuEvent]] = defaultdict(list)
    for ev in events:
        k_threads[ev.tid].append(ev)
    for evs in k_threads.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
    chosen = _pair_threads(et_threads, k_threads)
    linked: dict[int, CpuEvent] = {}
    if not chosen:
        return linked
    ref_et, ref_k, _ = chosen[0]
    best_ref = _one_iteration(chosen, k_threads)
    window = _span(best_ref, k_threads[ref_k])
    for et_tid, k_tid, found in chosen:
        pairs = best_ref if et_tid == ref_et else _closest_in_time(found, k_threads[k_tid], window)
        et_ops, k_evs = et_threads[et_tid], k_threads[k_tid]
        for i, j in pairs:
            linked[et_ops[i].id] = k_evs[j]
    return linked


def _pair_threads(et_threads: dict[int, list[HostOp]], k_threads: dict[int, list[CpuEvent]],
                  ) -> list[_ThreadPair]:
    """Aligns every (ET thread, Kineto thread) pair by op names and pairs the
    threads up greedily, the most matches first; each pair keeps its
    near-best alignments, as iterations can be identical."""
    names: dict[str, int] = {}

    def code(name: str) -> int:
        return names.setdefault(name, len(names))

    k_codes = {tid: [code(e.name) for e in evs] for tid, evs in k_threads.items()}
    options: list[tuple[int, int, int, list[_Alignment]]] = []
    for et_tid, et_ops in et_threads.items():
        et_codes = [code(op.name) for op in et_ops]
        for k_tid, kc in k_codes.items():
            found = alignments(et_codes, kc)
            if found:
                options.append((len(found[0]), et_tid, k_tid, found))
    options.sort(key=lambda o: -o[0])
    chosen: list[_ThreadPair] = []
    used_et: set[int] = set()
    used_k: set[int] = set()
    for _score, et_tid, k_tid, found in options:
        if et_tid not in used_et and k_tid not in used_k:
            used_et.add(et_tid)
            used_k.add(k_tid)
            chosen.append((et_tid, k_tid, _near_best(found)))
    return chosen


def _one_iteration(chosen: list[_ThreadPair], k_threads: dict[int, list[CpuEvent]],
                   ) -> _Alignment:
    """The first pair's alignment for the iteration where all threads' spans
    lie closest together in time: a thread's best alone may be another
    iteration than the rest's."""
    _ref_et, ref_k, ref_found = chosen[0]
    others = chosen[1:]

    def spread(window: tuple[float, float]) -> float:
        return sum(_distance(_closest_in_time(found, k_threads[k], window), k_threads[k], window)
                   for _et, k, found in others)

    return min(ref_found[:MAX_ITERATION_CANDIDATES],
               key=lambda p: spread(_span(p, k_threads[ref_k])))


def _near_best(found: list[list[tuple[int, int]]]) -> list[list[tuple[int, int]]]:
    """Alignments within ITERATION_TIE of the best match count and about as
    compact as the most compact of those (one that skipped ahead into the
    next iteration spans far more events), best first."""
    near = [p for p in found if len(p) >= ITERATION_TIE * len(found[0])]
    tightest = min(p[-1][1] - p[0][1] for p in near)
    return [p for p in near if p[-1][1] - p[0][1] <= COMPACT_SLACK * tightest + 1]


def _distance(pairs: list[tuple[int, int]], evs: Sequence[CpuEvent],
              window: tuple[float, float]) -> float:
    lo, hi = _span(pairs, evs)
    return max(0.0, window[0] - hi, lo - window[1])


def _span(pairs: list[tuple[int, int]], evs: Sequence[CpuEvent]) -> tuple[float, float]:
    return (min(evs[j].ts for _, j in pairs), max(evs[j].ts + evs[j].dur for _, j in pairs))


def _closest_in_time(found: list[list[tuple[int, int]]], evs: Sequence[CpuEvent],
                     window: tuple[float, float]) -> list[tuple[int, int]]:
    """The alignment whose time span is nearest the window (overlapping =
    distance 0); ties: more matches, then the earlier."""
    return min(found, key=lambda p: (_distance(p, evs, window), -len(p)))


def best_alignment(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Matched index pairs of the best alignment of ``a`` inside ``b``."""
    found = alignments(a, b)
    return found[0] if found else []


def alignments(a: Sequence[int], b: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Alignments of ``a`` inside ``b`` (matched index pairs), best first
    (most matches, then most compact, then earliest).

    Candidate offsets come from the rarest of the first few names of ``a``.
    Each is first scored on a short prefix; only the promising ones are aligned
    in full, and offsets inside an alignment already found are skipped."""
    if not a or not b:
        return []
    b = list(b)
    positions: dict[int, list[int]] = defaultdict(list)
    for j, c in enumerate(b):
        positions[c].append(j)
    anchors = [(len(positions.get(a[i], ())), i) for i in range(min(ANCHOR_CANDIDATES, len(a)))]
    anchors = [x for x in anchors if x[0] > 0]
    if not anchors:
        return []
    starts: set[int] = set()
    for _count, i in sorted(anchors)[:2]:
        starts.update(max(0, j - i) for j in positions[a[i]])
    prefix = set(a[:PREFIX_OPS])
    window = PREFIX_OPS + ALIGN_LOOKAHEAD
    scores = {start: len(prefix.intersection(b[start:start + window])) for start in starts}
    top = max(scores.values())
    found: list[list[tuple[int, int]]] = []
    covered_until = -1  # offsets inside an alignment already found repeat it
    for start in sorted(s for s, score in scores.items() if score >= PREFIX_KEEP * top):
        if start <= covered_until:
            continue
        pairs = align_greedy(a, b, start, abort_ratio=MIN_RUNNING_MATCH)
        if len(pairs) >= MIN_RUNNING_MATCH * len(a):
            # Offsets in the first half of this alignment would only repeat
            # it; later ones may be the next iteration (the greedy walk can
            # skip ahead into it), so they stay candidates.
            covered_until = pairs[len(pairs) // 2][1]
        if pairs:
            found.append(pairs)
    # Most matches first; among equals the most compact (an alignment that
    # skipped ahead into the next iteration spans more events), then earliest.
    found.sort(key=lambda p: (-len(p), p[-1][1] - p[0][1], p[0][1]))
    return found


def align_greedy(a: Sequence[int], b: list[int], start: int,
                 abort_ratio: float = 0.0) -> list[tuple[int, int]]:
    """Walk both sequences together from ``b[start]``; on a mismatch, skip to
    the nearest common name within ``ALIGN_LOOKAHEAD`` on either side. Gives
    up once fewer than ``abort_ratio`` of the ops walked so far matched."""
    n, m = len(a), len(b)
    i, j = 0, start
    pairs: list[tuple[int, int]] = []
    while i < n and j < m:
        if a[i] == b[j]:
            pairs.append((i, j))
            i += 1
            j += 1
            continue
        skip = _nearest_common(a, b, i, j)
        if skip is None:
            i += 1
            j += 1
        else:
            i += skip[0]
            j += skip[1]
        if i > PREFIX_OPS and len(pairs) < abort_ratio * i:
            break
    return pairs


def _nearest_common(a: Sequence[int], b: list[int], i: int, j: int) -> tuple[int, int] | None:
    """Smallest (da, db) by da + db with ``a[i + da] == b[j + db]``, both
    within the lookahead; ``list.index`` keeps the inner scan in C."""
    n, m = len(a), len(b)
    best: tuple[int, int] | None = None
    best_sum = 2 * ALIGN_LOOKAHEAD + 1
    stop = min(m, j + ALIGN_LOOKAHEAD + 1)
    for da in range(0, ALIGN_LOOKAHEAD + 1):
        if i + da >= n or da >= best_sum:
            break
        try:
            jb = b.index(a[i + da], j, stop)
        except ValueError:
            continue
        if da + jb - j < best_sum:
            best, best_sum = (da, jb - j), da + jb - j
    return best


def thread_map(linked: LinkedTrace) -> dict[int, int]:
    """ET thread id -> the Kineto thread id most of its linked ops ran on."""
    votes: dict[int, Counter[int]] = defaultdict(Counter)
    for op in linked.host.ops:
        ev = linked.cpu_event.get(op.id)
        if ev is not None:
            votes[op.tid][ev.tid] += 1
    return {et_tid: c.most_common(1)[0][0] for et_tid, c in votes.items()}


# --------------------------------------------------------------------------
# GPU activity -> launch -> host op
# --------------------------------------------------------------------------


def is_launch(name: str) -> bool:
    return name.startswith(LAUNCH_PREFIXES)


def link_gpu_activities(kineto: KinetoTrace, cpu_event: LinkedEvents,
                        step_start: float, step_end: float,
                        ) -> tuple[list[LaunchedGpuOp], dict[str, int]]:
    """Attach each GPU activity to the host op whose span holds its launch."""
    if not kineto.gpu_activities:
        return [], {}
    launches = {ev.correlation: ev for ev in kineto.runtime_events if ev.correlation >= 0}
    # A launch recorded without ``correlation`` is found through its ``ac2g``
    # flow: the flow's start sits at the launch's time on the launch's thread.
    uncorrelated = {(ev.tid, ev.ts): ev for ev in kineto.runtime_events if ev.correlation < 0}
    owner = enclosing_host_ops(kineto.runtime_events, cpu_event)
    kept: list[LaunchedGpuOp] = []
    dropped: Counter[str] = Counter()
    for act in kineto.gpu_activities:
        launch = launches.get(act.correlation)
        if launch is None and uncorrelated:
            flow = kineto.flow_starts.get(act.correlation)
            if flow is not None:
                launch = uncorrelated.get((flow[1], flow[0]))
        if launch is None:
            if step_start <= act.ts <= step_end:
                kept.append(LaunchedGpuOp(activity=act, launch=None, host_op_id=-1))
            else:
                dropped["outside the recorded step (no launch found)"] += 1
            continue
        if not (step_start <= launch.ts <= step_end):
            dropped["outside the recorded step"] += 1
            continue
        kept.append(LaunchedGpuOp(activity=act, launch=launch,
                                  host_op_id=owner.get(id(launch), -1)))
    kept.sort(key=lambda g: (g.activity.ts, g.activity.correlation))
    return kept, dict(dropped)


def with_stand_ins(kineto: KinetoTrace, gpu_ops: list[LaunchedGpuOp], step_start: float,
                   gpu_only: bool, step_end: float = math.inf) -> list[LaunchedGpuOp]:
    """``gpu_ops`` with the nodes that stand for what the trace holds no op
    for: the previous step's GPU work still running at ``step_start``, and,
    in a trace without CPU ops, each stream's idle gaps; GPU work queued
    before the trace that held a stream in the window (conversion/step.py)."""
    if gpu_only:  # nothing before the first activity: the window starts there
        extra = stream_gaps((g.activity for g in gpu_ops), step_start)
    else:
        extra = pending_gpu_work(kineto, step_start) + queued_gpu_work(kineto, step_start, step_end)
    if not extra:
        return gpu_ops
    merged = gpu_ops + [LaunchedGpuOp(activity=act, launch=None, host_op_id=-1) for act in extra]
    merged.sort(key=lambda g: (g.activity.ts, g.activity.correlation))
    return merged


def enclosing_host_ops(runtime_events: Sequence[RuntimeEvent],
                       cpu_event: LinkedEvents) -> dict[int, int]:
    """``id(runtime event)`` -> id of the innermost linked host op whose
    Kineto span, on the same thread, holds it. One sweep per thread."""
    ts, dur, tid, _lo, _hi = cpu_event.columns()
    spans: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for host_id in cpu_event:  # ascending ids
        spans[tid[host_id]].append((ts[host_id], dur[host_id], host_id))
    calls: dict[int, list[RuntimeEvent]] = defaultdict(list)
    for rt in runtime_events:
        calls[rt.tid].append(rt)
    result: dict[int, int] = {}
    for thread, rts in calls.items():
        evs = sorted(spans.get(thread, ()), key=lambda e: (e[0], -e[1]))
        rts.sort(key=lambda r: r.ts)
        stack: list[tuple[float, float, int]] = []
        k = 0
        for rt in rts:
            while k < len(evs) and evs[k][0] <= rt.ts:
                ev = evs[k]
                while stack and stack[-1][0] + stack[-1][1] < ev[0]:
                    stack.pop()
                stack.append(ev)
                k += 1
            while stack and stack[-1][0] + stack[-1][1] < rt.ts:
                stack.pop()
            if stack:
                result[id(rt)] = stack[-1][2]
    return result


# --------------------------------------------------------------------------
# Synchronisation
# --------------------------------------------------------------------------


def collect_cpu_syncs(kineto: KinetoTrace, step_start: float, step_end: float) -> list[CpuSync]:
    """CPU waits on the GPU: from ``cuda_sync`` events where recorded, and
    from the synchronising runtime calls that no such event describes."""
    calls = _runtime_by_correlation(kineto)
    record_ts = {corr: rt.ts for corr, rt in calls.items()}
    syncs: list[CpuSync] = []
    described: set[int] = set()
    for s in kineto.sync_events:
        if s.kind == "Stream Wait Event" or not (step_start <= s.ts <= step_end):
            continue
        call = calls.get(s.correlation) if s.correlation >= 0 else None
        if call is not None:
            described.add(id(call))
        syncs.append(_sync_from_event(s, call, record_ts))
    last_stream = _last_launched_stream(kineto)
    for rt in kineto.runtime_events:
        kind = SYNC_CALLS.get(rt.name)
        if kind is None or id(rt) in described or not (step_start <= rt.ts <= step_end):
            continue
        stream = rt.stream
        if kind != "Context Sync" and stream < 0:
            # Old traces do not record the stream: the call waits on the
            # stream this thread last launched work to (the .item() pattern).
            stream = last_stream(rt.tid, rt.ts)
        syncs.append(CpuSync(kind="Context Sync" if stream < 0 else kind, ts=rt.ts,
                             end=rt.ts + rt.dur, tid=rt.tid, stream=stream))
    return syncs


def _runtime_by_correlation(kineto: KinetoTrace) -> dict[int, RuntimeEvent]:
    return {rt.correlation: rt for rt in kineto.runtime_events if rt.correlation >= 0}


def _sync_from_event(s: SyncEvent, call: RuntimeEvent | None,
                     record_ts: dict[int, float]) -> CpuSync:
    """Kineto writes ``cuda_sync`` events on the GPU's rows (CUPTI's sync
    records carry no thread): the waiting CPU thread and its timing come from
    the runtime call with the same correlation."""
    tid, ts, end = (call.tid, call.ts, call.ts + call.dur) if call is not None \
        else (s.tid, s.ts, s.ts + s.dur)
    if s.kind == "Event Sync":
        return CpuSync(kind=s.kind, ts=ts, end=end, tid=tid, device=s.device,
                       stream=s.wait_on_stream,
                       before_ts=record_ts.get(s.wait_on_event_record_corr_id, ts))
    stream = s.stream if s.kind == "Stream Sync" else -1
    return CpuSync(kind=s.kind, ts=ts, end=end, tid=tid, device=s.device, stream=stream)


def _last_launched_stream(kineto: KinetoTrace) -> Callable[[int, float], int]:
    """A lookup (tid, ts) -> stream of the last GPU work launched from that
    thread before ts, or -1."""
    stream_of = {a.correlation: a.stream for a in kineto.gpu_activities}
    per_tid: dict[int, tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
    for rt in sorted(kineto.runtime_events, key=lambda r: r.ts):
        stream = stream_of.get(rt.correlation)
        if stream is not None:
            times, streams = per_tid[rt.tid]
            times.append(rt.ts)
            streams.append(stream)

    def lookup(tid: int, ts: float) -> int:
        times, streams = per_tid.get(tid, ([], []))
        k = bisect.bisect_left(times, ts)
        return streams[k - 1] if k else -1

    return lookup


def collect_stream_waits(kineto: KinetoTrace, step_start: float, step_end: float,
                         ) -> list[StreamWait]:
    calls = _runtime_by_correlation(kineto)
    waits = []
    for s in kineto.sync_events:
        if s.kind != "Stream Wait Event" or not (step_start <= s.ts <= step_end):
            continue
        call = calls.get(s.correlation) if s.correlation >= 0 else None
        ts = call.ts if call is not None else s.ts  # when the CPU enqueued the wait
        record = calls.get(s.wait_on_event_record_corr_id)
        waits.append(StreamWait(ts=ts, device=s.device, stream=s.stream,
                                wait_on_stream=s.wait_on_stream,
                                record_ts=record.ts if record is not None else ts))
    return waits

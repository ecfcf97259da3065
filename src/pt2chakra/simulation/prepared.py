"""What preparing hands the replay: ``PreparedGraph``, every rank's nodes as
flat arrays, with the codes its columns hold (node categories, edge kinds).
``prepare.py`` fills it (with ``thread_timing.py`` and ``inferred_waits.py``);
``event_loop.py`` replays it, once per setting.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from operator import le
from typing import Any, NamedTuple

from pt2chakra.chakra.dep_kinds import EDGE_KIND_NAMES as EDGE_KIND_NAMES_BY_KIND
from pt2chakra.chakra.dep_kinds import UNRECORDED_KIND, EdgeKind
from pt2chakra.chakra.records import ChakraNode
from pt2chakra.rules.conventions import ScaledWorld
from pt2chakra.rules.rendezvous import RankComms, RendezvousKey
from pt2chakra.simulation.compiled import fast_path
from pt2chakra.simulation.network import host_links_of
from pt2chakra.simulation.op_scale import CoveredTime

# Node categories (critical path "by node type").
CPU_OP, GPU_COMPUTE, GPU_MEMCPY, COMM, GPU_CPU_GAP = 0, 1, 2, 3, 4
# GPU_CPU_GAP: a GPU-side stand-in for dropped CPU time (``cpu_gap`` nodes of
# the ASTRA-sim profile): CPU time, so --cpu-scale scales it, not --compute-scale.
# Their names: results.CATEGORY_NAMES (``Schedule.category`` holds these codes).
# Extra critical-path categories for time that no node's duration holds.
WAIT = "wait"  # waiting for a peer rank, or a sync's post-return lag

# Edge kinds, as the converter names them, plus the simulator's own reasons.
EDGE_KIND_NAMES = (*(EDGE_KIND_NAMES_BY_KIND[kind] for kind in EdgeKind),
                   "lane_order", "rank_start", UNRECORDED_KIND)
KIND_CODE = {name: i for i, name in enumerate(EDGE_KIND_NAMES)}
K_GPU_SYNC = KIND_CODE["gpu_sync"]
K_LAUNCH = KIND_CODE["launch"]
K_STREAM_ORDER = KIND_CODE["stream_order"]
K_STREAM_WAIT = KIND_CODE["stream_wait"]
K_THREAD_ORDER = KIND_CODE["thread_order"]
K_LANE = KIND_CODE["lane_order"]
K_START = KIND_CODE["rank_start"]
K_DATA = KIND_CODE[UNRECORDED_KIND]  # a data_dep without a recorded kind (other tools' .et)


# Attributes by name.
Attrs = dict[str, Any]
# One node's dependencies: (global index, kind code) pairs.
ParentList = tuple[tuple[int, int], ...]
# Where a flat parents array holds a source index and a kind code.
SOURCE_TYPECODE, KIND_TYPECODE = "q", "b"


class Parents:
    """A rank's dependency lists: ``parents[k]`` is node ``base + k``'s tuple
    of (global index, kind code) pairs, read and replaced like a list's
    entries. Held flat, as the children are: node k's recorded pairs are
    ``src[first[k]:first[k + 1]]`` with ``kind`` beside them (17 bytes an
    edge instead of two tuples a node: a million nodes), and the few lists
    later steps replace (an edge added, one moved to an issue release) in
    ``changed``, by k, which wins over the flat arrays."""

    __slots__ = ("first", "src", "kind", "changed")

    def __init__(self, first: array[int], src: array[int], kind: array[int]) -> None:
        self.first = first  # len(self) + 1 offsets into src and kind
        self.src = src
        self.kind = kind
        self.changed: dict[int, ParentList] = {}

    @classmethod
    def of_lists(cls, lists: Iterable[ParentList]) -> Parents:
        """The flat form of per-node tuples (those that are not tuples of
        (int, int) pairs that fit the arrays stay as given, in ``changed``)."""
        first, src, kind = array("q", [0]), array(SOURCE_TYPECODE), array(KIND_TYPECODE)
        changed: dict[int, ParentList] = {}
        add_first, add_src, add_kind = first.append, src.append, kind.append
        for k, plist in enumerate(lists):
            if plist == () and type(plist) is tuple:
                pass
            elif len(plist) == 1 and _flat_fits(plist):  # most nodes: one dependency
                s, code = plist[0]
                add_src(s)
                add_kind(code)
            elif not _flat_fits(plist):
                changed[k] = plist
            else:
                for s, code in plist:
                    add_src(s)
                    add_kind(code)
            add_first(len(src))
        out = cls(first, src, kind)
        out.changed = changed
        return out

    def __len__(self) -> int:
        return len(self.first) - 1

    def __getitem__(self, k: int) -> ParentList:
        got = self.changed.get(k)
        if got is not None:
            return got
        first = self.first
        if not 0 <= k < len(first) - 1:
            k = self._at(k)
            got = self.changed.get(k)  # a negative k, as a list reads it
            if got is not None:
                return got
        a, b = first[k], first[k + 1]
        if a == b:
            return ()
        if b == a + 1:
            return ((self.src[a], self.kind[a]),)
        return tuple(zip(self.src[a:b], self.kind[a:b]))

    def __setitem__(self, k: int, plist: ParentList) -> None:
        self.changed[self._at(k)] = plist

    def _at(self, k: int) -> int:
        """``k`` as a list index reads it (from the end when negative)."""
        n = len(self.first) - 1
        at = k + n if k < 0 else k
        if not 0 <= at < n:
            raise IndexError("parents index out of range")
        return at

    def __iter__(self) -> Iterator[ParentList]:
        """Each node's list in turn, read when reached (a list replaced while
        iterating is seen, as a list's iterator sees it)."""
        changed, first, src, kind = self.changed, self.first, self.src, self.kind
        a = first[0]
        for k, b in enumerate(islice(first, 1, None)):
            got = changed.get(k)
            if got is not None:
                yield got
            elif a == b:
                yield ()
            elif b == a + 1:
                yield ((src[a], kind[a]),)
            else:
                yield tuple(zip(src[a:b], kind[a:b]))
            a = b


def _flat_fits(plist: object) -> bool:
    """``plist`` is a tuple of (int, int) pairs whose values the flat arrays hold."""
    return type(plist) is tuple and all(
        type(pair) is tuple and len(pair) == 2 and type(pair[0]) is int and
        type(pair[1]) is int and -(1 << 63) <= pair[0] < (1 << 63) and -128 <= pair[1] <= 127
        for pair in plist)


class PreparedGraph:
    """All ranks' nodes as flat arrays indexed by a global node index: the
    documented seam between preparing (``prepare_graphs``, once per trace set
    and comm-stream setting) and replaying (``event_loop.run_replay``, once per
    what-if). Columns are plain lists and arrays, not nodes, because the
    replay reads them a million times; a node's rank, lane, recorded start
    and duration, CPU delay, children (``child_start``/``child``) and wait
    count (``nwait``) are all found at its index."""

    def __init__(self) -> None:
        self.nodes: list[ChakraNode] = []
        self.ids: list[int] = []  # columns of the nodes' fields that the loops read
        self.start: list[int] = []
        self.rank: list[int] = []
        self.lane: list[int] = []
        self.lane_names: list[tuple[int, str, str]] = []
        self.lane_index: dict[tuple[Any, ...], int] = {}
        self.order: list[int] = []  # recorded start order within the rank
        self.dur: list[float] = []
        self.incl: list[float] = []  # recorded inclusive time (CPU ops: callees included)
        self.cat: list[int] = []
        self.delay: list[float] = []
        # Children of node i: child[child_start[i]:child_start[i + 1]], with the
        # kinds of the edges in child_kind; flat arrays, not a list per node.
        self.child_start = array("q")
        self.child = array("q")
        self.child_kind = array("b")
        self.nwait: list[int] = []
        self.comm_key: dict[int, RendezvousKey] = {}
        self.comm_bytes: dict[int, int] = {}
        self.comm_type: dict[int, int] = {}
        self.size_unknown: set[int] = set()  # comm nodes flagged comm_size_unknown
        # Sync ops: index -> (own CPU work, post-return time, pre-issue time)
        self.sync: dict[int, tuple[float, float, float]] = {}
        self.sync_producers: dict[int, list[int]] = {}  # producer -> sync ops it gates
        self.sync_gates: dict[int, int] = {}  # sync op -> number of producers
        self.issue_children: dict[int, list[int]] = {}  # sync op -> GPU ops released at issue
        self.step_start: list[float] = []
        self.step_end: list[float] = []
        # per rank: the step is a period (conversion/step.py), so the replay's
        # CPU side reaching the next step is its prediction, not the last GPU end
        self.step_period: list[bool] = []
        self.sources: list[str] = []
        self.rank_label: list[int] = []  # each rank's number (chakra.ranks)
        # per rank: the world a scaled-out file stands for (None: as recorded)
        self.scaled: list[ScaledWorld | None] = []
        # per rank: its process groups' sizes by name and the world size, as
        # recorded (0: unknown): what times a collective with no peer given (lone.py)
        self.pg_sizes: list[dict[str, int]] = []
        self.world: list[int] = []
        self.inferred_edges = 0  # cross-stream waits inferred from timing
        # late launches (``LAUNCH_TIME_ATTR``): GPU node -> (its launcher's
        # lane, recorded launch time, the op that thread ran last before it);
        # its delay is that thread's CPU time from that op's end
        self.late_launch: dict[int, tuple[int, float, int]] = {}
        self.lane_tail: dict[int, float] = {}  # CPU lane: recorded time after its last slice
        self.lane_tail_end: dict[int, float] = {}  # CPU lane: when that tail ends (recorded)
        # --cpu-scale-ops: per pattern, the time the matching ops cover (op_scale.py)
        self.covered: dict[str, CoveredTime] = {}
        # --without-profiler: per CPU thread, its ops in start order (profiler_overhead.py)
        self.overhead_lanes: list[list[int]] | None = None
        self.rank_nodes: list[range] = []
        self.rank_timed: list[bool] = []  # per rank: some node has a start time
        self.rank_comms: list[RankComms] = []  # per rank with communication: its keys and order

    def link_of(self, node: int, n: int, bandwidth_gbps: float, latency_us: float,
                ) -> tuple[float, float]:
        """(bandwidth, latency) a collective of ``n`` ranks that ``node``
        joins runs at: its links', or, where its scaled-out file describes
        its hosts' links, its slowest hop's (``network.HostLinks``)."""
        links = host_links_of(self.scaled[self.rank[node]])
        if links is None:
            return bandwidth_gbps, latency_us
        return links.slowest_hop(n, bandwidth_gbps, latency_us)

    def lane_id(self, key: tuple[Any, ...], rank: int, kind: str, label: str) -> int:
        idx = self.lane_index.get(key)
        if idx is None:
            idx = len(self.lane_names)
            self.lane_index[key] = idx
            self.lane_names.append((rank, kind, label))
        return idx


def only_cpu_ops(p: PreparedGraph, base: int, end: int) -> bool:
    """The rank has no device op (a C-level count: the per-node scans for
    device ops can be skipped)."""
    return p.cat[base:end].count(CPU_OP) == end - base


def non_decreasing(values: Sequence[float]) -> bool:
    """``values`` never decrease (then a stable sort keeps them in place)."""
    return all(map(le, values, islice(values, 1, None)))


def shared_floats(values: array[float], absent: list[float] | None = None) -> list[float]:
    """``values`` as a list in which equal values (bit for bit: -0.0 is not
    0.0) are one float object: a million nodes' durations take a few
    thousand values, and a float object each costs 24 bytes. With
    ``absent``, a NaN entry takes the entry of ``absent`` at its place
    instead (as long as the shorter of the two). The compiled path where
    built (its values mostly shared: a cache by bits), else
    ``_shared_floats_python``."""
    fast = fast_path()
    if fast is not None:
        return fast.shared_floats(values, absent)
    return _shared_floats_python(values, absent)


def _shared_floats_python(values: array[float], absent: list[float] | None) -> list[float]:
    """``shared_floats`` by C-level passes over the values' bits (NaNs, each
    read a new object, would each be a key of their own by value)."""
    bits = memoryview(values).cast("B").cast("Q")
    distinct = array("Q", set(bits))
    canon = dict(zip(distinct, array("d", distinct.tobytes())))
    if absent is None:
        return list(map(canon.__getitem__, bits))
    for key in [key for key, x in canon.items() if x != x]:
        del canon[key]
    return list(map(canon.get, bits, absent))


class AttrSets(NamedTuple):
    """The distinct attribute sets of a rank: each node's set, numbered in
    the order sets first show (small ints, shared: no object per node), and
    each set's checked attributes."""

    of_node: list[int]
    checked: list[Attrs]

"""What ASTRA-sim will do with a trace: a run under its rules, not our replay's.

Our own replay (``engine``) runs one node at a time per lane (CPU thread, GPU
stream) and so predicts the measured step from a full trace. ASTRA-sim
(analytical backend, HEAD of 2026-03; ``../shared/ASTRA_SIM.md``) runs the
same file differently, and this module applies its rules so that CI can check
an export without the binary:

- every rank starts at time 0;
- per NPU, one CPU node, one GPU compute node and one communication node at a
  time (a receive does not hold the communication resource);
- a node is ready when all its ``data_deps`` and ``ctrl_deps`` are done; at
  each event of a rank, its ready nodes are issued in ascending id while
  their resource is free;
- a compute node lasts ``duration_micros`` x 1000 ns (0 -> 1 ns);
- an all-reduce, all-gather, reduce-scatter or all-to-all goes to the
  network model (``collective_time.collective_finish_ns``): its ring
  messages wait for the members that issued it late; the n-th such collective
  a rank issues in a group meets the n-th of every other member; a broadcast
  is timed by its recorded duration; other collective types stop ASTRA-sim;
- a send transmits at once and ends when its bytes arrive; a receive ends
  when the bytes of the send with its source, destination and tag arrived.

Its result is what ASTRA-sim prints: per rank ``sys[N] finished, C cycles``.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

from pt2chakra.astra.collective_time import (
    AstraNetwork,
    AstraSystem,
    collective_finish_ns,
    send_ns,
)
from pt2chakra.chakra.io import read_et_whole
from pt2chakra.chakra.ranks import Inputs, RankSet, open_rank_set
from pt2chakra.chakra.records import ChakraNode, CollectiveType, GlobalMetadata, NodeType, attr_dict
from pt2chakra.errors import InputError
from pt2chakra.rules.conventions import (
    CPU_GAP_CATEGORY,
    STEP_DEFINITION_ATTR,
    StepWindow,
    error_pct,
    is_gpu,
    is_int,
    rank_origins,
    run_measured_step,
    step_window,
)

NS_PER_US = 1000
# ASTRA-sim runs a zero-length compute node for one cycle.
MIN_COMPUTE_NS = 1
# Collective types its network model runs; a broadcast it times by its
# recorded duration; any other type makes it throw "Unsupported collective comm type".
NETWORK_COLLECTIVES = frozenset(int(t) for t in (
    CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER, CollectiveType.REDUCE_SCATTER,
    CollectiveType.ALL_TO_ALL))
DURATION_COLLECTIVES = frozenset({int(CollectiveType.BROADCAST)})
# The communicator group ASTRA-sim reads as "every NPU".
DEFAULT_GROUPS = ("", "0")

# ``_Node.pending`` once a node left the dependency count behind.
ISSUED, DONE = -1, -2
# Resources of one NPU.
CPU, COMPUTE, COMM, FREE = 0, 1, 2, 3  # FREE: a receive holds nothing


class ConsumerOptions(msgspec.Struct, frozen=True):
    """The ASTRA-sim configuration run, and what-if scales."""

    network: AstraNetwork
    system: AstraSystem = AstraSystem()
    comm_groups: dict[str, list[int]] = {}
    compute_scale: float = 1.0  # GPU compute nodes (not cpu_gap ones)
    cpu_scale: float = 1.0  # CPU nodes and cpu_gap nodes
    bandwidth_scale: float = 1.0


class RankFinish(msgspec.Struct, frozen=True):
    rank: int
    source: str
    finished_ns: int  # ASTRA-sim's "finished, C cycles"
    exposed_comm_ns: int  # ... "exposed communication E cycles"
    measured_step_us: float | None


class ConsumerResult(msgspec.Struct, frozen=True):
    """What ASTRA-sim prints for these files, and the measured step."""

    ranks: list[RankFinish]
    predicted_step_us: float
    measured_step_us: float | None

    @property
    def error_pct(self) -> float | None:
        return error_pct(self.predicted_step_us, self.measured_step_us)


class _Node(msgspec.Struct):
    id: int
    resource: int
    kind: str  # "compute", "coll", "broadcast", "send", "recv", "skip"
    duration_ns: int
    children: list[int]
    pending: int
    comm_type: int = -1
    size: int = 0
    group: str = ""
    peer: tuple[int, int, int] = (0, 0, 0)  # (src, dst, tag) of a send/recv
    gpu_compute: bool = False


class _Rank:
    """One NPU: its nodes, ready sets per resource and what is in flight."""

    def __init__(self, rank: int, source: str, nodes: list[_Node]) -> None:
        self.rank = rank
        self.source = source
        self.nodes = nodes
        self.ready: list[list[tuple[int, int]]] = [[], [], [], []]  # (id, index) heaps
        self.busy = [False, False, False, False]
        self.left = len(nodes)
        self.finished_ns = 0
        self.gpu_ns = 0
        self.issued_in_group: dict[str, int] = defaultdict(int)
        for k, n in enumerate(nodes):
            if n.pending == 0:
                heapq.heappush(self.ready[n.resource], (n.id, k))


class _AstraSimRun:
    """The event loop over all ranks (ASTRA-sim's order of events)."""

    def __init__(self, ranks: list[_Rank], options: ConsumerOptions) -> None:
        self.ranks = ranks
        self.options = options
        self.npus = len(ranks)
        self.events: list[tuple[int, int, int, int]] = []  # (ns, seq, rank, node index)
        self.seq = 0
        self.meetings: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
        self.mail: dict[tuple[int, int, int], list[tuple[int, int, int]]] = defaultdict(list)

    def run(self) -> None:
        for r in self.ranks:
            self.issue_ready(r, 0)
        while self.events:
            t, _seq, rank, k = heapq.heappop(self.events)
            self.finish(self.ranks[rank], k, t)
        for r in self.ranks:
            if r.left:
                waiting = [n for n in r.nodes if n.pending == ISSUED]
                stuck = (waiting or [n for n in r.nodes if n.pending != DONE])[0]
                raise InputError(r.source, f"ASTRA-sim would hang: rank {r.rank} never runs "
                                 f"node {stuck.id} (a collective or send/recv that no peer "
                                 "meets, or a dependency cycle)")

    def at(self, t: int, rank: int, k: int) -> None:
        heapq.heappush(self.events, (t, self.seq, rank, k))
        self.seq += 1

    def issue_ready(self, r: _Rank, t: int) -> None:
        """ASTRA-sim's ``issue_dep_free_nodes``: lowest id first, while the
        node's resource is free (a receive needs none)."""
        for res in (CPU, COMPUTE, COMM):
            heap = r.ready[res]
            if heap and not r.busy[res]:
                _id, k = heapq.heappop(heap)
                self.issue(r, k, t)
        heap = r.ready[FREE]
        while heap:
            _id, k = heapq.heappop(heap)
            self.issue(r, k, t)

    def issue(self, r: _Rank, k: int, t: int) -> None:
        node = r.nodes[k]
        if node.resource != FREE:
            r.busy[node.resource] = True
        node.pending = ISSUED
        if node.kind in ("compute", "broadcast", "skip"):
            if node.gpu_compute:
                r.gpu_ns += node.duration_ns
            self.at(t + node.duration_ns, r.rank, k)
        elif node.kind == "coll":
            key = (node.group, r.issued_in_group[node.group])
            r.issued_in_group[node.group] += 1
            self.meet(key, (r.rank, k, t), node)
        else:
            self.post(r, k, t, node)

    def meet(self, key: tuple[str, int], arrival: tuple[int, int, int], node: _Node) -> None:
        """A collective ends for all its members at the last arrival plus its
        network time."""
        arrived = self.meetings[key]
        arrived.append(arrival)
        members = self.members(node.group)
        if len(arrived) < len(members):
            return
        try:
            done = collective_finish_ns(node.comm_type, node.size, self.network(),
                                        self.options.system, members,
                                        {rank: t for rank, _k, t in arrived})
        except ValueError as exc:
            raise InputError(self.ranks[arrival[0]].source, f"node {node.id}: {exc}") from exc
        for rank, k, _t in arrived:
            self.at(done[rank], rank, k)
        del self.meetings[key]

    def post(self, r: _Rank, k: int, t: int, node: _Node) -> None:
        """A send or a receive, as ASTRA-sim's analytical network runs them:
        a send transmits at once and ends when its bytes arrive (it waits
        for no receive); a receive ends when the bytes of the send of its
        source, destination and tag have arrived, at once if they already
        had. Each is met in the order issued."""
        src, dst, _tag = node.peer
        if node.kind == "send":
            try:
                arrival = t + send_ns(node.size, src, dst, self.network())
            except ValueError as exc:
                raise InputError(r.source, f"node {node.id}: {exc}") from exc
            self.at(arrival, r.rank, k)
            receive = self._first(node.peer, "recv")
            if receive is None:
                self.mail[node.peer].append((r.rank, k, arrival))
            else:
                self.at(max(arrival, receive[2]), receive[0], receive[1])
            return
        sent = self._first(node.peer, "send")
        if sent is None:
            self.mail[node.peer].append((r.rank, k, t))
        else:
            self.at(max(t, sent[2]), r.rank, k)

    def _first(self, peer: tuple[int, int, int], kind: str) -> tuple[int, int, int] | None:
        """The earliest waiting ``kind`` ("send": its bytes' arrival; "recv":
        its issue) of ``peer``, taken from the mailbox."""
        waiting = self.mail[peer]
        match = next((w for w in waiting if self.ranks[w[0]].nodes[w[1]].kind == kind), None)
        if match is not None:
            waiting.remove(match)
        return match

    def network(self) -> AstraNetwork:
        net = self.options.network
        if self.options.bandwidth_scale == 1.0:
            return net
        return dataclasses.replace(
            net, bandwidth_gbps=net.bandwidth_gbps * self.options.bandwidth_scale)

    def members(self, group: str) -> list[int]:
        if group in DEFAULT_GROUPS:
            return list(range(self.npus))
        return self.options.comm_groups[group]

    def finish(self, r: _Rank, k: int, t: int) -> None:
        node = r.nodes[k]
        if node.resource != FREE:
            r.busy[node.resource] = False
        node.pending = DONE
        r.left -= 1
        r.finished_ns = t
        for child in node.children:
            c = r.nodes[child]
            c.pending -= 1
            if c.pending == 0:
                heapq.heappush(r.ready[c.resource], (c.id, child))
        self.issue_ready(r, t)


def _scaled_ns(duration_us: int, scale: float) -> int:
    ns = round(duration_us * NS_PER_US * scale)
    return ns if ns > 0 else MIN_COMPUTE_NS


def _node(n: ChakraNode, source: str, rank: int, options: ConsumerOptions,
          groups: dict[str, list[int]], npus: int) -> _Node:
    """One node as ASTRA-sim reads it; what it cannot run is refused here,
    before the run, naming the node."""
    a = attr_dict(n.attrs)
    on_cpu = not is_gpu(a)
    where = f"node {n.id} ({n.name})"
    if n.type == NodeType.METADATA_NODE:
        raise InputError(source, f"{where}: ASTRA-sim stops on METADATA nodes; export the "
                         "trace first (pt2chakra astra-sim)")
    if n.type in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
        if on_cpu:
            raise InputError(source, f"{where}: ASTRA-sim refuses a communication node on the "
                             "CPU (is_cpu_op true)")
        return _comm_node(n, a, source, where, rank, groups, npus)
    if n.type == NodeType.INVALID_NODE:
        return _Node(id=n.id, resource=FREE, kind="skip", duration_ns=0, children=[], pending=0)
    if n.type not in (NodeType.COMP_NODE,):
        raise InputError(source, f"{where}: node type {int(n.type)} needs ASTRA-sim's remote "
                         "memory model, which this model of it does not cover")
    gap = a.get("category") == CPU_GAP_CATEGORY
    scale = options.cpu_scale if (on_cpu or gap) else options.compute_scale
    return _Node(id=n.id, resource=CPU if on_cpu else COMPUTE, kind="compute",
                 duration_ns=_scaled_ns(n.duration_micros, scale), children=[], pending=0,
                 gpu_compute=not on_cpu)


def _comm_node(n: ChakraNode, a: dict[str, object], source: str, where: str, rank: int,
               groups: dict[str, list[int]], npus: int) -> _Node:
    size = a.get("comm_size", 0)
    size = size if is_int(size) and size >= 0 else 0
    if n.type == NodeType.COMM_COLL_NODE:
        comm_type = a.get("comm_type")
        if not is_int(comm_type) or comm_type not in NETWORK_COLLECTIVES | DURATION_COLLECTIVES:
            raise InputError(source, f"{where}: ASTRA-sim does not support collective type "
                             f"{comm_type!r} (it runs all-reduce, all-gather, reduce-scatter, "
                             "all-to-all and broadcast)")
        if comm_type in DURATION_COLLECTIVES:
            return _Node(id=n.id, resource=COMM, kind="broadcast", children=[], pending=0,
                         duration_ns=_scaled_ns(n.duration_micros, 1.0), comm_type=comm_type)
        group = str(a.get("pg_name", "") or "")
        if group not in DEFAULT_GROUPS:
            if not group.isdigit():
                raise InputError(source, f"{where}: ASTRA-sim needs a numeric pg_name, got "
                                 f"{group!r}")
            if group not in groups:
                raise InputError(source, f"{where}: communicator group {group} is not in the "
                                 "comm-groups file")
            if rank not in groups[group]:
                raise InputError(source, f"{where}: rank {rank} is not a member of "
                                 f"communicator group {group}")
        return _Node(id=n.id, resource=COMM, kind="coll", duration_ns=0, children=[], pending=0,
                     comm_type=comm_type, size=size, group=group)
    src, dst, tag = a.get("comm_src"), a.get("comm_dst"), a.get("comm_tag", 0)
    send = n.type == NodeType.COMM_SEND_NODE
    src = rank if send and not is_int(src) else src
    dst = rank if not send and not is_int(dst) else dst
    if not (is_int(src) and is_int(dst) and is_int(tag)) or not (0 <= src < npus and
                                                                0 <= dst < npus):
        raise InputError(source, f"{where}: a send/recv needs comm_src and comm_dst among "
                         f"the {npus} NPUs")
    return _Node(id=n.id, resource=COMM if send else FREE, kind="send" if send else "recv",
                 duration_ns=0, children=[], pending=0, size=size, peer=(src, dst, tag))


def _rank(rank: int, source: str, nodes: Sequence[ChakraNode], options: ConsumerOptions,
          npus: int) -> _Rank:
    """One rank's nodes with their dependency counts (data and control
    deps, as ASTRA-sim's feeder resolves both)."""
    out = [_node(n, source, rank, options, options.comm_groups, npus) for n in nodes]
    index = {n.id: k for k, n in enumerate(out)}
    if len(index) != len(out):
        raise InputError(source, "duplicate node ids: ASTRA-sim's feeder keeps one of each")
    for k, n in enumerate(nodes):
        for d in dict.fromkeys([*n.data_deps, *n.ctrl_deps]):
            if d not in index:
                raise InputError(source, f"node {n.id} depends on node {d}, which is not in "
                                 "the file (ASTRA-sim would fail on it)")
            if d == n.id:
                raise InputError(source, f"node {n.id} depends on itself")
            out[index[d]].children.append(k)
            out[k].pending += 1
    return _Rank(rank, source, out)


def _as_span(metadata_attrs: dict[str, Any]) -> dict[str, Any]:
    metadata_attrs.pop(STEP_DEFINITION_ATTR, None)
    return metadata_attrs


def _measured(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
              ) -> tuple[list[float | None], float | None]:
    """Per rank and overall measured step, as the simulator reads it (ranks
    placed by ``rank_origins``). Always the span: ASTRA-sim finishes when
    its last node does and has no CPU side to reach the next step, so a
    ``period`` step (conversion/step.py) is compared as its span here."""
    windows: list[StepWindow | None] = [
        step_window(_as_span(attr_dict(md.attrs)), nodes, [attr_dict(n.attrs) for n in nodes])
        for md, nodes in graphs]
    per_rank = [w.end - w.start if w is not None else None for w in windows]
    timed = [w for w in windows if w is not None]
    if not timed or len(timed) != len(windows):
        return per_rank, None
    _origins, align = rank_origins(timed, "auto")
    return per_rank, run_measured_step(timed, align)


def run_as_astra_sim(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                     sources: Sequence[str], options: ConsumerOptions) -> ConsumerResult:
    """Run one ``.et`` per NPU (in rank order) under ASTRA-sim's rules."""
    graphs = [(md, list(nodes)) for md, nodes in graphs]
    npus = len(graphs)
    if npus != options.network.npus:
        raise InputError("--npus", f"the network has {options.network.npus} NPUs but "
                         f"{npus} trace(s) were given (ASTRA-sim reads one file per NPU)")
    ranks = [_rank(r, os.fspath(src), nodes, options, npus)
             for r, ((_md, nodes), src) in enumerate(zip(graphs, sources))]
    _AstraSimRun(ranks, options).run()
    per_rank, measured = _measured(graphs)
    finishes = [RankFinish(rank=r.rank, source=r.source, finished_ns=r.finished_ns,
                           exposed_comm_ns=r.finished_ns - r.gpu_ns,
                           measured_step_us=per_rank[r.rank]) for r in ranks]
    predicted = max((f.finished_ns for f in finishes), default=0) / NS_PER_US
    return ConsumerResult(ranks=finishes, predicted_step_us=predicted, measured_step_us=measured)


# The ASTRA-sim configuration of the project's figures (``../shared/ASTRA_SIM.md``):
# what ``simulate --consumer astra-sim`` assumes unless told otherwise.
DEFAULT_TOPOLOGY = "Ring"
DEFAULT_BANDWIDTH_GBPS = 50.0
DEFAULT_LATENCY_NS = 500.0


class ConsumerWhatIf(msgspec.Struct, frozen=True):
    compute_scale: float
    cpu_scale: float
    bandwidth_scale: float
    predicted_step_us: float
    change_pct: float  # against the baseline prediction


class ConsumerReport(msgspec.Struct, frozen=True):
    """``simulate --consumer astra-sim``: what ASTRA-sim will print, and
    how what-if settings move it."""

    network: AstraNetwork
    system: AstraSystem
    result: ConsumerResult
    what_if: list[ConsumerWhatIf] = []

    def to_json(self) -> dict[str, object]:
        return dict(msgspec.to_builtins(self))


def load_for_consumer(paths: Inputs | RankSet, force: bool = False,
                      ) -> tuple[list[str], list[tuple[GlobalMetadata, list[ChakraNode]]]]:
    """The files in rank order (``chakra.ranks``; ASTRA-sim's NPU n reads
    ``<prefix>.n.et``), whole: ASTRA-sim reads ``ctrl_deps`` and attributes
    (peers, groups) that the simulator's lean reader leaves out."""
    ranks = open_rank_set(paths, force)
    return ranks.paths, ranks.load(read_et_whole)


def comm_groups_of(graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                   ) -> dict[str, list[int]]:
    """The communicator groups the export writes to ``<prefix>.comm_groups.json``
    (from the metadata's ``process_groups``), merged over the ranks."""
    from pt2chakra.astra.export import comm_groups

    groups: dict[str, list[int]] = {}
    for md, _nodes in graphs:
        for name, ranks in comm_groups(md, len(graphs)).items():
            groups.setdefault(name, ranks)
    return groups


def consume(paths: Sequence[str | os.PathLike[str]], network: AstraNetwork,
            system: AstraSystem | None = None, *, compute_scale: Sequence[float] = (1.0,),
            cpu_scale: Sequence[float] = (1.0,), bandwidth_scale: Sequence[float] = (1.0,),
            ) -> ConsumerReport:
    """Replay ``.et`` files (one per NPU) as ASTRA-sim would, plus the
    what-if combinations other than all 1."""
    names, graphs = load_for_consumer(paths)
    return consume_loaded(names, graphs, network, system, compute_scale=compute_scale,
                          cpu_scale=cpu_scale, bandwidth_scale=bandwidth_scale)


def consume_loaded(names: Sequence[str],
                   graphs: Sequence[tuple[GlobalMetadata, Sequence[ChakraNode]]],
                   network: AstraNetwork, system: AstraSystem | None = None, *,
                   compute_scale: Sequence[float] = (1.0,), cpu_scale: Sequence[float] = (1.0,),
                   bandwidth_scale: Sequence[float] = (1.0,)) -> ConsumerReport:
    """``consume`` on files already loaded, in rank order."""
    system = system or AstraSystem()
    base = ConsumerOptions(network=network, system=system, comm_groups=comm_groups_of(graphs))
    result = run_as_astra_sim(graphs, names, base)
    rows: list[ConsumerWhatIf] = []
    for c in compute_scale:
        for u in cpu_scale:
            for b in bandwidth_scale:
                if (c, u, b) == (1.0, 1.0, 1.0):
                    continue
                options = msgspec.structs.replace(base, compute_scale=c, cpu_scale=u,
                                                  bandwidth_scale=b)
                step = run_as_astra_sim(graphs, names, options).predicted_step_us
                change = 100.0 * (step - result.predicted_step_us) / result.predicted_step_us \
                    if result.predicted_step_us else 0.0
                rows.append(ConsumerWhatIf(c, u, b, step, change))
    return ConsumerReport(network=network, system=system, result=result, what_if=rows)


def format_consumer_report(report: ConsumerReport) -> str:
    """The text ``simulate --consumer astra-sim`` prints."""
    net, sysc, res = report.network, report.system, report.result
    backend = "congestion-aware" if net.congestion_aware else "congestion-unaware"
    lines = [f"consumer: ASTRA-sim analytical, {backend} ({net.topology}, {net.npus} NPUs, "
             f"{net.bandwidth_gbps:g} GB/s, {net.latency_ns:g} ns; {sysc.implementation} "
             f"collectives, {sysc.splits} splits)", "",
             f"{'rank':>4} {'finished us':>12} {'measured end':>12} {'exposed comm us':>16}  source",
             ]
    for r in res.ranks:
        measured = f"{r.measured_step_us:12.0f}" if r.measured_step_us is not None else \
            f"{'-':>12}"
        lines.append(f"{r.rank:>4} {r.finished_ns / NS_PER_US:12.0f} {measured} "
                     f"{r.exposed_comm_ns / NS_PER_US:16.0f}  {os.path.basename(r.source)}")
    error = res.error_pct
    measured_step = f"{res.measured_step_us:12.0f}" if res.measured_step_us is not None else \
        f"{'-':>12}"
    lines.append(f"{'step':>4} {res.predicted_step_us:12.0f} {measured_step}"
                 + (f" {error:+15.2f} %" if error is not None else ""))
    if report.what_if:
        lines += ["", "what-if (compute x, cpu x, bandwidth x): predicted step"]
        lines += [f"  {w.compute_scale:g} {w.cpu_scale:g} {w.bandwidth_scale:g}: "
                  f"{w.predicted_step_us:.0f} us ({w.change_pct:+.2f} %)" for w in report.what_if]
    return "\n".join(lines)

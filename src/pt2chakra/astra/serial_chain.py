"""The ``serial`` ASTRA-sim profile: one rank's measured GPU schedule as the
one serial compute chain ASTRA-sim's resource model runs.

Why: ASTRA-sim runs one GPU compute node at a time per NPU (and one
communication node; see ``../shared/ASTRA_SIM.md``), so work recorded on
several streams, and gap nodes placed per stream, add up instead of
overlapping (the ``drop`` profile: +33 % on DLRM x8). Here, per rank:

- **The chain.** GPU compute nodes (kernels, memcpy, memset) of every stream,
  in measured start order, form one chain. A node overlapped by earlier ones
  keeps only the part that extends the busy time (the overlap between
  streams is folded in), so the chain is busy exactly when some stream was.
- **Gaps.** Idle time between chain nodes becomes ``cpu_gap`` nodes (GPU
  ``COMP_NODE`` s: CPU nodes make ASTRA-sim warn): the time the GPU waited
  for the CPU. Time it waited for communication is not a gap: the chain
  node depends on the communication node instead, so the network model
  decides it, and the gap that follows starts when both are done.
- **Communication** nodes hang off the chain: each depends on the chain node
  that ended where it was issued (gaps are cut at each one's measured start)
  and on the rank's previous communication node, so they are issued in the
  measured order, which is the order ASTRA-sim matches them by.
- **Rank start and end.** The rank's start offset (after the earliest rank,
  see ``conventions.rank_origins``) is a leading gap; the time after the last
  node until the step's recorded end a trailing one. So a replay finishes
  every rank at its measured step end unless the network is slower than
  measured.

What-ifs: chain nodes carry GPU time, gaps CPU time (category ``cpu_gap``),
and communication nodes their size. Scaling kernel durations moves the chain
as if each gap were a fixed CPU delay (right when the GPU is the bottleneck;
an over-estimate of the gain when the CPU is); a network what-if moves the
communication nodes and whatever waits on them.

Edges are written as ``data_deps`` only (ASTRA-sim resolves ``ctrl_deps``
too, and they would add orderings the schedule does not have).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from pt2chakra.chakra.conventions import (
    COMM_NODE_TYPES,
    CPU_GAP_CATEGORY,
    attr_dict,
    step_window,
)
from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR
from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata, NodeType

# Kinds of the edges this profile writes (``data_dep_kinds``).
SERIAL_ORDER = "serial_order"  # previous chain node -> next (one compute resource)
CPU_GAP_EDGE = "cpu_gap"  # gap -> the chain node it delays
COMM_DONE = "comm_done"  # communication node -> chain node that waited for it
ISSUE_POINT = "issue_point"  # chain node ending at a comm node's measured start -> it
COMM_ORDER = "comm_order"  # previous communication node of the rank -> next


class SerialChain:
    """Builds one rank's chain (see the module doc). ``removed``: the nodes
    ASTRA-sim cannot run (CPU, METADATA); ``inherited``: for each kept node,
    the kept nodes it depends on through removed ones."""

    def __init__(self, metadata: GlobalMetadata, nodes: Sequence[ChakraNode],
                 removed: set[int], inherited: dict[int, list[int]], origin_us: float) -> None:
        window = step_window(attr_dict(metadata.attrs), nodes,
                             [attr_dict(n.attrs) for n in nodes])
        if window is None:
            raise ValueError("the serial profile needs a timed trace")
        self.t1 = round(window.end)
        self.cursor = round(window.start - origin_us)  # ASTRA-sim's time 0, on this clock
        self.next_id = max((n.id for n in nodes), default=0) + 1
        kept = [n for n in nodes if n.id not in removed]
        self.comm = sorted((n for n in kept if n.type in COMM_NODE_TYPES),
                           key=lambda n: (n.start_time_micros, n.id))
        self.compute = sorted((n for n in kept if n.type not in COMM_NODE_TYPES),
                              key=lambda n: (n.start_time_micros, n.id))
        self.end = {n.id: n.start_time_micros + n.duration_micros for n in kept}
        self.preds = {n.id: _kept_preds(n, removed, inherited) for n in kept}
        self.chain: list[ChakraNode] = []
        self.index: dict[int, int] = {}  # chain node id -> its index in the chain
        # comm id -> index of the chain node it is issued after (-1: none),
        # raised to anything it waits for, so every edge goes forward.
        self.comm_position: dict[int, int] = {}
        self._issued = 0  # communication nodes issued so far, in measured order
        self._last_is_gap = False

    def build(self) -> list[ChakraNode]:
        """The chain, then the communication nodes, as written."""
        for node in self.compute:
            self._issue_comm_until(node.start_time_micros)
            self._append_compute(node)
        self._issue_comm_until(self.t1)
        self._append_tail()
        return self.chain + [self._comm_node(k, n) for k, n in enumerate(self.comm)]

    # -- the chain ------------------------------------------------------

    def _last(self) -> list[int]:
        return [self.chain[-1].id] if self.chain else []

    def _push(self, node: ChakraNode, is_gap: bool) -> None:
        self.index[node.id] = len(self.chain)
        self.chain.append(node)
        self._last_is_gap = is_gap

    def _gap(self, until: int, comm_deps: list[int]) -> bool:
        """A gap node from the cursor to ``until``, after the previous chain
        node and ``comm_deps``; False when there is no time to fill."""
        if until <= self.cursor:
            return False
        deps = self._last() + comm_deps
        kinds = [SERIAL_ORDER] * len(self._last()) + [COMM_DONE] * len(comm_deps)
        attrs: list[Attr] = [("is_cpu_op", "bool_val", False),
                             ("category", "string_val", CPU_GAP_CATEGORY)]
        if deps:
            attrs.append((DEP_KINDS_ATTR, "string_list", kinds))
        self._push(ChakraNode(id=self.next_id, name=CPU_GAP_CATEGORY, type=NodeType.COMP_NODE,
                              start_time_micros=self.cursor,
                              duration_micros=until - self.cursor, data_deps=deps, attrs=attrs),
                   is_gap=True)
        self.next_id += 1
        self.cursor = until
        return True

    def _issue_comm_until(self, t: int) -> None:
        """Cut the idle time before ``t`` at each communication node issued in
        it, so each is issued after the chain node ending at its start."""
        while self._issued < len(self.comm) and self.comm[self._issued].start_time_micros <= t:
            comm = self.comm[self._issued]
            self._gap(comm.start_time_micros, [])
            position = len(self.chain) - 1
            for d in self.preds[comm.id]:
                position = max(position, self.index.get(d, -1),
                               self.comm_position.get(d, -1))
            if self._issued > 0:
                position = max(position, self.comm_position[self.comm[self._issued - 1].id])
            self.comm_position[comm.id] = position
            self._issued += 1

    def _comm_deps(self, node_id: int) -> list[int]:
        """The communication nodes a chain node appended next waits for: those
        it depends on that were issued before it (so the graph stays acyclic)."""
        here = len(self.chain)
        return [d for d in self.preds[node_id] if self.comm_position.get(d, here) < here]

    def _append_compute(self, node: ChakraNode) -> None:
        """``node`` on the chain: first the CPU part of the idle time before
        it (after its communication finished), then its busy time beyond
        what the chain already covers."""
        comm_deps = self._comm_deps(node.id)
        start = node.start_time_micros
        if start > self.cursor:
            waited = max((self.end[d] for d in comm_deps), default=self.cursor)
            self.cursor = min(max(self.cursor, waited), start)  # the network decides that part
            if self._gap(start, comm_deps):
                comm_deps = []  # the gap waits for them
        deps = self._last() + comm_deps
        kinds = [CPU_GAP_EDGE if self._last_is_gap else SERIAL_ORDER] * len(self._last()) + \
            [COMM_DONE] * len(comm_deps)
        begin = max(start, self.cursor)
        end = max(self.end[node.id], begin)
        self._push(msgspec.structs.replace(
            node, start_time_micros=begin, duration_micros=end - begin, data_deps=deps,
            ctrl_deps=[], attrs=_with_kinds(node.attrs, kinds)), is_gap=False)
        self.cursor = end

    def _append_tail(self) -> None:
        """The step's recorded end: a gap after the last chain node and the
        last communication node (the time the CPU still ran)."""
        last_comm = [self.comm[-1].id] if self.comm else []
        waited = max((self.end[d] for d in last_comm), default=self.cursor)
        self.cursor = min(max(self.cursor, waited), max(self.t1, self.cursor))
        self._gap(self.t1, last_comm)

    # -- communication --------------------------------------------------

    def _comm_node(self, k: int, node: ChakraNode) -> ChakraNode:
        """A communication node after its issue point and the rank's previous
        communication node."""
        deps: list[int] = []
        kinds: list[str] = []
        position = self.comm_position.get(node.id, -1)
        if position >= 0:
            deps.append(self.chain[position].id)
            kinds.append(ISSUE_POINT)
        if k > 0:
            deps.append(self.comm[k - 1].id)
            kinds.append(COMM_ORDER)
        return msgspec.structs.replace(node, data_deps=deps, ctrl_deps=[],
                                       attrs=_with_kinds(node.attrs, kinds))


def _with_kinds(attrs: Sequence[Attr], kinds: list[str]) -> list[Attr]:
    out = [a for a in attrs if a[0] != DEP_KINDS_ATTR]
    if kinds:
        out.append((DEP_KINDS_ATTR, "string_list", kinds))
    return out


def _kept_preds(node: ChakraNode, removed: set[int], inherited: dict[int, list[int]],
                ) -> list[int]:
    preds = [d for d in node.data_deps if d not in removed]
    for d in inherited.get(node.id, []):
        if d not in preds:
            preds.append(d)
    return preds


def serial_chain(metadata: GlobalMetadata, nodes: Sequence[ChakraNode], removed: set[int],
                 inherited: dict[int, list[int]], origin_us: float = 0.0) -> list[ChakraNode]:
    """One rank's nodes for ASTRA-sim under the serial profile."""
    return SerialChain(metadata, nodes, removed, inherited, origin_us).build()

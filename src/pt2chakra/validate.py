"""Graph soundness: cycles (named, with their edge kinds) and dangling
dependencies. Iterative throughout: real traces have millions of nodes and
the reference's recursive check overflowed the stack."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec

from pt2chakra.model import DEP_KINDS_ATTR, ChakraNode, EdgeKind

log = logging.getLogger(__name__)


class CycleEdge(msgspec.Struct, frozen=True):
    src: int
    dst: int
    kind: str  # edge kind name, or "unknown" for traces without kinds


class GraphProblems(msgspec.Struct):
    cycle: list[CycleEdge]  # one cycle, in order; empty when acyclic
    dangling: list[tuple[int, int]]  # (node, missing dependency)
    duplicate_ids: list[int]


def dep_kinds(node: ChakraNode) -> list[str]:
    for name, _member, value in node.attrs:
        if name == DEP_KINDS_ATTR:
            return list(value)
    return ["unknown"] * len(node.data_deps)


def find_cycle(nodes: Sequence[ChakraNode]) -> list[CycleEdge]:
    """One dependency cycle over ``data_deps`` (empty list if none).

    Kahn's algorithm removes everything not on or behind a cycle; an
    iterative walk along remaining predecessors then closes a loop."""
    ids = {n.id for n in nodes}
    indegree = {n.id: 0 for n in nodes}
    children: dict[int, list[int]] = {n.id: [] for n in nodes}
    for n in nodes:
        for d in n.data_deps:
            if d in ids:
                indegree[n.id] += 1
                children[d].append(n.id)
    ready = [i for i, deg in indegree.items() if deg == 0]
    while ready:
        cur = ready.pop()
        for child in children[cur]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    remaining = {i for i, deg in indegree.items() if deg > 0}
    if not remaining:
        return []
    by_id = {n.id: n for n in nodes if n.id in remaining}
    # Every remaining node has a remaining predecessor: walk back until a
    # node repeats; the loop between the two visits is a cycle.
    start = next(iter(remaining))
    order: list[int] = []
    position: dict[int, int] = {}
    cur = start
    while cur not in position:
        position[cur] = len(order)
        order.append(cur)
        node = by_id[cur]
        cur = next(d for d in node.data_deps if d in remaining)
    loop = order[position[cur]:]  # each element depends on the next one
    loop.reverse()  # now each element is a dependency of the next one
    edges = []
    for i, src in enumerate(loop):
        dst = loop[(i + 1) % len(loop)]
        node = by_id[dst]
        kinds = dep_kinds(node)
        kind = kinds[node.data_deps.index(src)] if src in node.data_deps else "unknown"
        edges.append(CycleEdge(src=src, dst=dst, kind=kind))
    return edges


def check_graph(nodes: Sequence[ChakraNode]) -> GraphProblems:
    seen: set[int] = set()
    duplicates: list[int] = []
    for n in nodes:
        if n.id in seen:
            duplicates.append(n.id)
        seen.add(n.id)
    dangling = [(n.id, d) for n in nodes for d in n.data_deps if d not in seen]
    return GraphProblems(cycle=find_cycle(nodes), dangling=dangling, duplicate_ids=duplicates)


def describe_cycle(cycle: Sequence[CycleEdge], nodes_by_id: dict[int, ChakraNode] | None = None,
                   ) -> str:
    parts = []
    for e in cycle:
        name = f" ({nodes_by_id[e.src].name})" if nodes_by_id and e.src in nodes_by_id else ""
        parts.append(f"{e.src}{name} -[{e.kind}]->")
    if cycle:
        parts.append(str(cycle[0].src))
    return " ".join(parts)


def break_cycles(nodes: Sequence[ChakraNode]) -> list[CycleEdge]:
    """Remove edges until acyclic, each time dropping an edge of the least
    reliable kind on the cycle found (see ``EdgeKind``). Returns the removed
    edges so the caller can say what it did."""
    rank = {kind.name.lower(): int(kind) for kind in EdgeKind}
    by_id = {n.id: n for n in nodes}
    removed: list[CycleEdge] = []
    while True:
        cycle = find_cycle(nodes)
        if not cycle:
            return removed
        victim = min(cycle, key=lambda e: rank.get(e.kind, -1))
        node = by_id[victim.dst]
        kinds = dep_kinds(node)
        k = node.data_deps.index(victim.src)
        del node.data_deps[k]
        if len(kinds) > k and any(a[0] == DEP_KINDS_ATTR for a in node.attrs):
            del kinds[k]
            node.attrs = [a if a[0] != DEP_KINDS_ATTR else (a[0], a[1], kinds) for a in node.attrs]
        log.warning("broke cycle: dropped %s edge %d -> %d", victim.kind, victim.src, victim.dst)
        removed.append(victim)

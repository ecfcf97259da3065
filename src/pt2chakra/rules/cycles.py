"""Graph soundness: cycles (named, with their edge kinds) and dangling
dependencies. Iterative throughout: real traces have millions of nodes and
the reference's recursive check overflowed the stack."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from operator import lt

import msgspec

from pt2chakra.chakra.dep_kinds import DEP_KINDS_ATTR, EdgeKind, dep_kinds_of
from pt2chakra.chakra.records import ChakraNode, attr_dict

log = logging.getLogger(__name__)


class CycleEdge(msgspec.Struct, frozen=True):
    src: int
    dst: int
    kind: str  # edge kind name (UNRECORDED_KIND for traces without kinds)


class GraphProblems(msgspec.Struct):
    cycle: list[CycleEdge]  # one cycle, in order; empty when acyclic
    dangling: list[tuple[int, int]]  # (node, missing dependency)
    duplicate_ids: list[int]


def dep_kinds(node: ChakraNode) -> list[str]:
    """Kinds of the node's data deps (see :func:`dep_kinds_of`)."""
    return dep_kinds_of(node.data_deps, attr_dict(node.attrs))


def _kind_name(kind: object) -> str:
    return kind.name.lower() if isinstance(kind, EdgeKind) else str(kind)


def find_cycle_in(ids: Iterable[int], deps: Mapping[int, Sequence[tuple[int, object]]],
                  ) -> list[CycleEdge]:
    """One cycle over ``deps`` (destination -> ``[(source, kind)]``), or [].

    Kahn's algorithm removes everything not on or behind a cycle; a walk
    along remaining predecessors then closes a loop. No recursion. When every
    edge runs from a smaller id to a larger one (converted CPU traces: ids
    are handed out in start order) there is no cycle, and that one pass
    spares Kahn's tables (about 140 MB for a million nodes)."""
    if ids_ascend([src for srcs in deps.values() for src, _ in srcs],
                  [dst for dst, srcs in deps.items() for _ in srcs]):
        return []
    indegree = dict.fromkeys(ids, 0)
    children: dict[int, list[int]] = {i: [] for i in indegree}
    for dst, srcs in deps.items():
        if dst not in indegree:
            continue
        for src, _kind in srcs:
            if src in indegree:
                indegree[dst] += 1
                children[src].append(dst)
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
    # Every remaining node has a remaining predecessor: walk back until a
    # node repeats; the stretch between the two visits is a cycle.
    order: list[int] = []
    position: dict[int, int] = {}
    cur = next(iter(remaining))
    while cur not in position:
        position[cur] = len(order)
        order.append(cur)
        cur = next(src for src, _ in deps[cur] if src in remaining)
    loop = order[position[cur]:]  # each element depends on the next one
    loop.reverse()  # now each element is a dependency of the next one
    edges = []
    for i, src in enumerate(loop):
        dst = loop[(i + 1) % len(loop)]
        kind = next(k for s, k in deps[dst] if s == src)
        edges.append(CycleEdge(src=src, dst=dst, kind=_kind_name(kind)))
    return edges


def ids_ascend(srcs: Iterable[int], dsts: Iterable[int]) -> bool:
    """Every edge (``srcs[i]`` -> ``dsts[i]``) runs from a smaller id to a
    larger one, so no cycle can close: a cycle needs an edge to a larger or
    equal id. Converters hand ids out in start order, so this one C-level pass
    usually settles acyclicity. The one statement of the rule; each caller
    passes its edges as the arrays it keeps."""
    return all(map(lt, srcs, dsts))


def _dep_map(nodes: Sequence[ChakraNode]) -> dict[int, list[tuple[int, str]]]:
    return {n.id: list(zip(n.data_deps, dep_kinds(n))) for n in nodes if n.data_deps}


def find_cycle(nodes: Sequence[ChakraNode]) -> list[CycleEdge]:
    """One dependency cycle over the nodes' ``data_deps`` (empty if none)."""
    return find_cycle_in((n.id for n in nodes), _dep_map(nodes))


def check_graph(nodes: Sequence[ChakraNode]) -> GraphProblems:
    seen: set[int] = set()
    duplicates: list[int] = []
    for n in nodes:
        if n.id in seen:
            duplicates.append(n.id)
        seen.add(n.id)
    dangling = [(n.id, d) for n in nodes for d in n.data_deps if d not in seen]
    return GraphProblems(cycle=find_cycle(nodes), dangling=dangling, duplicate_ids=duplicates)


def describe_cycle(cycle: Sequence[CycleEdge], names: Mapping[int, str] | None = None) -> str:
    """``12 (aten::mm) -[launch]-> 40 (gemm) -[...]-> 12``: ids, names, kinds."""
    parts = []
    for e in cycle:
        name = f" ({names[e.src]})" if names and e.src in names else ""
        parts.append(f"{e.src}{name} -[{e.kind}]->")
    if cycle:
        parts.append(str(cycle[0].src))
    return " ".join(parts)


def break_cycles_in(ids: Sequence[int], deps: MutableMapping[int, list[tuple[int, EdgeKind]]],
                    ) -> list[CycleEdge]:
    """Remove edges from ``deps`` until acyclic, each time dropping the edge
    of the least reliable kind (see ``EdgeKind``) on the cycle found. Returns
    the removed edges so the caller can say what it did."""
    rank = {kind.name.lower(): int(kind) for kind in EdgeKind}
    removed: list[CycleEdge] = []
    while True:
        cycle = find_cycle_in(ids, deps)
        if not cycle:
            return removed
        victim = min(cycle, key=lambda e: rank.get(e.kind, -1))
        deps[victim.dst] = [(s, k) for s, k in deps[victim.dst] if s != victim.src]
        log.warning("broke cycle: dropped %s edge %d -> %d", victim.kind, victim.src, victim.dst)
        removed.append(victim)


def break_cycles(nodes: Sequence[ChakraNode]) -> list[CycleEdge]:
    """``break_cycles_in`` for decoded nodes: rewrites their ``data_deps``
    and ``data_dep_kinds`` in place."""
    deps = _dep_map(nodes)
    removed = break_cycles_in([n.id for n in nodes], deps)  # type: ignore[arg-type]
    for edge in removed:
        node = next(n for n in nodes if n.id == edge.dst)
        pairs = deps.get(node.id, [])
        node.data_deps = [s for s, _ in pairs]
        if any(a[0] == DEP_KINDS_ATTR for a in node.attrs):
            node.attrs = [a if a[0] != DEP_KINDS_ATTR else (a[0], a[1], [k for _, k in pairs])
                          for a in node.attrs]
    return removed

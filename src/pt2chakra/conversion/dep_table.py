"""The dependency table of a converted graph: destination -> its sources.

Per destination, its sources ``[(source id, kind)]`` in first-seen order, an
edge found by several rules keeping its most reliable kind
(``DepTable.merged``). Held as a dict of lists of tuples this cost about
200 bytes a node, 200 MB for a million-op trace: the largest structure a
conversion built. Yet nearly every node has one source (its predecessor on
its thread), found while destinations arrive in ascending id order. So a
destination's first edge, when it comes above every destination so far, is
kept in three arrays sorted by destination (17 bytes); only destinations
that get a second edge, or come out of order, take a list in a dict.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, MutableMapping
from itertools import islice
from typing import TypeVar

from pt2chakra.chakra.compiled import fast_path
from pt2chakra.chakra.dep_kinds import EdgeKind
from pt2chakra.conversion.deps import KINDS_BY_VALUE, Edge, EdgeColumns
from pt2chakra.rules.cycles import ids_ascend

# A node's dependencies: (source id, kind of edge), in first-seen order.
Deps = list[tuple[int, EdgeKind]]

_KINDS = KINDS_BY_VALUE
# An array entry whose destination moved to the dict or was deleted.
_MOVED = 255
# Destinations ``in_order`` looks up at a time: a list of entries this long
# is small beside the table, and a call per chunk costs nothing.
_IN_ORDER_CHUNK = 4096

_D = TypeVar("_D")


class DepTable(MutableMapping[int, Deps]):
    """``dict[int, Deps]`` in behaviour, compact in memory (see the module).

    Reading an array-held entry builds its one-item list anew, so changing
    the list changes nothing: change an entry with ``table[dst] = ...`` or
    through the list ``setdefault`` returns (it moves the entry to the dict
    first). Lookups in destination order, as the writer makes them, take no
    search."""

    def __init__(self) -> None:
        self._dsts = array("q")
        self._srcs = array("q")
        self._kinds = array("B")
        self._rest: dict[int, Deps] = {}
        self._cursor = 0  # where the next in-order lookup looks first

    @classmethod
    def merged(cls, groups: Iterable[Iterable[Edge]]) -> DepTable:
        """The edges of ``groups`` in order, each group dropped once merged
        (``groups`` may make them one at a time): per destination its sources
        in first-seen order, an edge found by several rules keeping its most
        reliable kind; self-edges are left out. A group of ascending
        ``EdgeColumns`` above every destination so far goes to the arrays
        whole (the thread order: an edge a loop step was most of the time)."""
        table = cls()
        dsts, srcs, kinds, rest = table._dsts, table._srcs, table._kinds, table._rest
        add_dst, add_src, add_kind = dsts.append, srcs.append, kinds.append
        crowded: list[int] = []  # destinations that got more than one edge
        last = -1  # the highest destination in the arrays (ids are not negative)
        for edges in groups:
            if isinstance(edges, EdgeColumns) and edges.ascending and (
                    not edges.dsts or edges.dsts[0] > last):
                if not dsts:  # the first: its columns become the table's (no copy)
                    table._dsts, table._srcs, table._kinds = dsts, srcs, kinds = (
                        edges.dsts, edges.srcs, edges.kinds)
                    add_dst, add_src, add_kind = dsts.append, srcs.append, kinds.append
                else:
                    dsts.extend(edges.dsts)
                    srcs.extend(edges.srcs)
                    kinds.extend(edges.kinds)
                if dsts:
                    last = dsts[-1]
                del edges
                continue
            for src, dst, kind in edges:
                if dst > last and src != dst:  # above every array entry: in none, nor in the dict
                    add_dst(dst)
                    add_src(src)
                    add_kind(kind)
                    last = dst
                    continue
                if src == dst:
                    continue
                found = rest.get(dst)
                if found is not None:
                    if len(found) == 1:
                        crowded.append(dst)
                    found.append((src, kind))
                    continue
                first = table._take(dst)
                if first is None:
                    rest[dst] = [(src, kind)]
                else:
                    rest[dst] = [first, (src, kind)]
                    crowded.append(dst)
            del edges
        for dst in crowded:  # most nodes have one source: dedupe only the rest
            best: dict[int, EdgeKind] = {}
            for src, kind in rest[dst]:
                old = best.get(src)
                if old is None or kind > old:
                    best[src] = kind
            rest[dst] = list(best.items())
        return table

    def _index(self, dst: int) -> int:
        """Where ``dst``'s array entry is, or -1."""
        dsts = self._dsts
        i = self._cursor
        if i >= len(dsts) or dsts[i] != dst:
            i = bisect_left(dsts, dst)
            if i >= len(dsts) or dsts[i] != dst:
                return -1
        if self._kinds[i] == _MOVED:
            return -1
        self._cursor = i + 1
        return i

    def _take(self, dst: int) -> tuple[int, EdgeKind] | None:
        """Remove ``dst``'s array entry and return its edge (None: it has none)."""
        i = self._index(dst)
        if i < 0:
            return None
        kind = self._kinds[i]
        self._kinds[i] = _MOVED
        return self._srcs[i], _KINDS[kind]

    def get(self, dst: int, default: _D | None = None) -> Deps | _D | None:  # type: ignore[override]
        rest = self._rest
        if rest:
            found = rest.get(dst)
            if found is not None:
                return found
        i = self._index(dst)
        return default if i < 0 else [(self._srcs[i], _KINDS[self._kinds[i]])]

    def in_order(self, dsts: Iterable[int]) -> Iterator[Deps | None]:
        """``get`` of each of ``dsts``, given in ascending order, in one walk
        over the arrays (as the writer asks: a lookup per node cost more),
        ``_IN_ORDER_CHUNK`` at a time (in C where built)."""
        fast = fast_path()
        at = 0  # where the walk is in the arrays
        items = iter(dsts)
        while chunk := list(islice(items, _IN_ORDER_CHUNK)):
            found = None if fast is None else fast.deps_in_order(
                chunk, self._dsts, self._srcs, self._kinds, self._rest, _KINDS, at)
            deps, at = found if found is not None else self._in_order_chunk(chunk, at)
            yield from deps

    def _in_order_chunk(self, dsts: list[int], at: int) -> tuple[list[Deps | None], int]:
        """``in_order``'s entries of a chunk of ``dsts``, the arrays walked
        from position ``at``; and the position to go on from."""
        rest = self._rest
        table_dsts, srcs, kinds = self._dsts, self._srcs, self._kinds
        i, end = at, len(table_dsts)
        found: list[Deps | None] = []
        for dst in dsts:
            if rest:
                deps = rest.get(dst)
                if deps is not None:
                    found.append(deps)
                    continue
            while i < end and table_dsts[i] < dst:
                i += 1
            if i < end and table_dsts[i] == dst and kinds[i] != _MOVED:
                found.append([(srcs[i], _KINDS[kinds[i]])])
            else:
                found.append(None)
        return found, i

    def ascending(self) -> bool:
        """Every edge's source id is below its destination's, so no cycle can
        close (``find_cycle_in``'s first question, answered on the arrays).
        An entry moved out of the arrays is still checked there: a False can
        be wrong, a True cannot."""
        return ids_ascend(self._srcs, self._dsts) and ids_ascend(
            [src for deps in self._rest.values() for src, _ in deps],
            [dst for dst, deps in self._rest.items() for _ in deps])

    def __getitem__(self, dst: int) -> Deps:
        found = self.get(dst)
        if found is None:
            raise KeyError(dst)
        return found

    def __contains__(self, dst: object) -> bool:
        return isinstance(dst, int) and (dst in self._rest or self._index(dst) >= 0)

    def __setitem__(self, dst: int, deps: Deps) -> None:
        self._take(dst)
        self._rest[dst] = deps

    def __delitem__(self, dst: int) -> None:
        if self._rest.pop(dst, None) is None and self._take(dst) is None:
            raise KeyError(dst)

    def setdefault(self, dst: int, default: Deps | None = None) -> Deps:
        """The entry of ``dst``, moved to the dict so that changing it sticks."""
        found = self._rest.get(dst)
        if found is None:
            first = self._take(dst)
            found = [first] if first is not None else default if default is not None else []
            self._rest[dst] = found
        return found

    def __iter__(self) -> Iterator[int]:
        for dst, _srcs in self._items():
            yield dst

    def __len__(self) -> int:
        return len(self._rest) + len(self._kinds) - self._kinds.count(_MOVED)

    def _items(self) -> Iterator[tuple[int, Deps]]:
        """Array entries in destination order, then the dict's."""
        for dst, src, kind in zip(self._dsts, self._srcs, self._kinds):
            if kind != _MOVED:
                yield dst, [(src, _KINDS[kind])]
        yield from self._rest.items()

    def items(self) -> _ItemsView:  # type: ignore[override]
        return _ItemsView(self)

    def values(self) -> _ValuesView:  # type: ignore[override]
        return _ValuesView(self)

    def kind_counts(self) -> Counter[EdgeKind]:
        """How many edges of each kind the table holds."""
        counts: Counter[EdgeKind] = Counter()
        for kind, count in Counter(self._kinds).items():
            if kind != _MOVED:
                counts[_KINDS[kind]] += count
        counts.update(kind for deps in self._rest.values() for _, kind in deps)
        return counts


class _ItemsView:
    """``items()`` in one pass over the arrays (a lookup per item is a search)."""

    def __init__(self, table: DepTable) -> None:
        self._table = table

    def __iter__(self) -> Iterator[tuple[int, Deps]]:
        return self._table._items()

    def __len__(self) -> int:
        return len(self._table)


class _ValuesView(_ItemsView):
    def __iter__(self) -> Iterator[Deps]:  # type: ignore[override]
        return (deps for _dst, deps in self._table._items())

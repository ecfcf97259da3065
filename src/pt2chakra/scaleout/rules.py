"""How one collective changes when the data-parallel job grows from N to M
ranks under weak scaling (per-rank batch fixed): which call issued it, which
size rule follows from that call, and the new ``comm_size``.

``comm_size`` is the collective's total payload as the converter writes it
(``conversion/collective.py``). What stays fixed under weak scaling is what
one rank holds:

* an all-reduce (a DDP gradient bucket, a loss) reduces a tensor every rank
  holds whole: its size is kept (KEEP);
* a sharded all-gather / reduce-scatter (FSDP's ``_allgather_base_``,
  ``all_gather_into_tensor``, ``_reduce_scatter_base_``,
  ``reduce_scatter_tensor``) moves one parameter block of fixed size whose
  per-rank shard is block / M: the size is kept, the shard shrinks (SHARDED);
* a list all-gather, gather or scatter of per-rank data (``allgather_`` of a
  metric, ``gather``) moves one fixed-size piece per rank: the total grows as
  M / N (PER_RANK);
* a broadcast or reduce moves one rank's tensor: kept (KEEP), its rounds grow
  with M (the network model's steps, not the size).

Over gloo, ``_reduce_scatter_base_`` runs as a full-size ``gloo:all_reduce``
(ProcessGroupGloo has no reduce-scatter of its own): the recorded backend op
is an all-reduce of the block, so it is timed as one (2(M-1)/M of the block
per link), while its size rule is the call's (block fixed).

What cannot be scaled from the trace alone is refused by the caller
(``plan.py``, by the layout ``rules/layout.py`` reads): tensor, pipeline
and expert parallel groups.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from pt2chakra.chakra.records import ChakraNode, CollectiveType, NodeType
from pt2chakra.names import C10D_FUNCTIONAL_PREFIXES, C10D_PREFIX, RECORD_PARAM_COMMS
from pt2chakra.rules.layout import SHARDED_CALLS  # the sharded calls' one home


class SizeRule(enum.Enum):
    """How a collective's ``comm_size`` follows the world size."""

    KEEP = "kept"  # every rank's tensor is the whole payload
    SHARDED = "block fixed, shard = block / M"  # FSDP parameter block
    PER_RANK = "grows as M / N"  # one fixed piece per rank


# List-form calls of per-rank data: one piece per rank.
PER_RANK_CALLS = frozenset({"allgather_", "allgather_coalesced_", "gather_", "scatter_",
                            "all_gather", "gather", "scatter"})
# Collective types whose payload is one piece per rank unless the call says sharded.
_GATHERING = frozenset({int(CollectiveType.ALL_GATHER), int(CollectiveType.GATHER),
                        int(CollectiveType.SCATTER)})
_REDUCE_SCATTER = frozenset({int(CollectiveType.REDUCE_SCATTER),
                             int(CollectiveType.REDUCE_SCATTER_BLOCK)})


def call_name(name: str) -> str:
    """``c10d::_allgather_base_`` -> ``_allgather_base_``; other names as they are."""
    for prefix in (C10D_PREFIX, *C10D_FUNCTIONAL_PREFIXES):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def is_c10d_call(name: str) -> bool:
    return name.startswith((C10D_PREFIX, *C10D_FUNCTIONAL_PREFIXES)) or name == RECORD_PARAM_COMMS


def size_rule(comm_type: int, call: str | None) -> SizeRule:
    """The size rule of a collective of ``comm_type`` issued by the c10d
    ``call`` (its name without prefix; None when the trace does not say)."""
    if call in SHARDED_CALLS:
        return SizeRule.SHARDED
    if comm_type in _REDUCE_SCATTER:
        return SizeRule.SHARDED  # a reduce-scatter's input is the whole block
    if comm_type in _GATHERING:
        return SizeRule.PER_RANK
    return SizeRule.KEEP


def scaled_size(size: int, rule: SizeRule, recorded: int, target: int) -> int:
    """``comm_size`` at ``target`` ranks of a collective of ``size`` bytes
    recorded at ``recorded`` ranks. PER_RANK: ``size`` holds ``recorded``
    equal pieces (floor division keeps a round trip N -> M -> N exact when
    the pieces divide evenly, as they do in c10d)."""
    if rule is SizeRule.PER_RANK and recorded != target:
        return size // recorded * target
    return size


def shard_bytes(size: int, rule: SizeRule, ranks: int) -> int:
    """What one rank contributes at ``ranks`` ranks: the shard of a sharded
    block, the piece of a per-rank gather, the whole tensor otherwise."""
    if rule is SizeRule.KEEP:
        return size
    return size // ranks


def tensor_ids(io: tuple[str, str, str] | None) -> set[tuple[int, int]]:
    """(tensor id, storage id) of every tensor in an IOInfo's values JSON."""
    if io is None or not io[0]:
        return set()
    import msgspec

    try:
        values = msgspec.json.decode(io[0])
    except msgspec.DecodeError:
        return set()
    out: set[tuple[int, int]] = set()
    stack: list[Any] = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            if len(v) == 6 and isinstance(v[5], str) and all(type(x) is int for x in v[:5]):
                out.add((v[0], v[1]))
            else:
                stack.extend(v)
    return out


def issuing_calls(nodes: Sequence[ChakraNode]) -> dict[int, str | None]:
    """Comm node id -> the c10d call that issued it (without prefix), or None.

    The parent by ``ctrl_deps`` when it is a c10d op. Some recordings parent a
    backend op elsewhere (a ``gloo:all_gather`` under another collective, a
    worker thread's op with no parent, FSDP2's ``gloo:all_reduce`` under its
    ``FSDP::post_backward_reduce`` annotation): then a c10d op it depends on
    (``data_deps``), else the c10d op whose inputs hold the backend op's
    input tensor (same tensor and storage id)."""
    by_id = {n.id: n for n in nodes}
    by_tensor: dict[tuple[int, int], str] = {}
    for n in nodes:
        if n.type != NodeType.COMM_COLL_NODE and is_c10d_call(n.name):
            for t in tensor_ids(n.inputs):
                by_tensor.setdefault(t, call_name(n.name))
    out: dict[int, str | None] = {}
    for n in nodes:
        if n.type not in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE,
                          NodeType.COMM_RECV_NODE):
            continue
        call = None
        for deps in (n.ctrl_deps, n.data_deps):
            parents = [by_id[d] for d in deps if d in by_id]
            call = next((call_name(p.name) for p in parents
                         if p.type != NodeType.COMM_COLL_NODE and is_c10d_call(p.name)), None)
            if call is not None:
                break
        if call is None:
            call = next((by_tensor[t] for t in sorted(tensor_ids(n.inputs)) if t in by_tensor),
                        None)
        out[n.id] = call
    return out


def comm_type_of(attrs: Mapping[str, Any]) -> int:
    value = attrs.get("comm_type")
    return value if type(value) is int else -1

"""One recorded rank's graph rewritten for an M-rank job: the process groups
(declared sizes and members), each collective's ``comm_size`` by its rule,
and the metadata saying where the file came from. Compute, CPU time and
dependencies are copied as recorded (weak scaling: per-rank work unchanged);
where the new ranks share their hosts' cores more than the recorded ones
did, the metadata says by how much their CPU time stretches (hosts.py).

Every clone of one recorded rank has the same nodes: only the metadata
names the rank. So the nodes are rewritten and encoded once per recorded
rank and the M files share those bytes (``api.py``, ``extrapolate``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from pt2chakra.chakra.records import Attr, ChakraNode, GlobalMetadata, NodeType, attr_dict
from pt2chakra.names import PROCESS_GROUP_INIT
from pt2chakra.rules.conventions import (
    SCALEOUT_ATTRS,
    SCALEOUT_CPU_STRETCH_ATTR,
    SCALEOUT_HOP_DELAY_ATTR,
    SCALEOUT_HOST_LINK_GBPS_ATTR,
    SCALEOUT_RANKS_PER_HOST_ATTR,
    SCALEOUT_RECORDED_CROWDED_ATTR,
    SCALEOUT_RECORDED_WORLD_ATTR,
    SCALEOUT_SOURCE_RANK_ATTR,
    SCALEOUT_UPLINK_GBPS_ATTR,
    SCALEOUT_UPLINK_LATENCY_ATTR,
)
from pt2chakra.scaleout.hosts import NO_SHARING, HostSharing
from pt2chakra.scaleout.rules import comm_type_of, issuing_calls, scaled_size, size_rule


class RewriteCounts(msgspec.Struct):
    """What the rewrite did to one rank's nodes."""

    copied: int = 0  # nodes as recorded
    rescaled: int = 0  # collectives whose comm_size changed
    groups: int = 0  # process-group records rewritten


def _dumps_like(value: Any, original: str) -> str:
    """JSON in the style of ``original``: compact (orjson, the metadata) or
    with spaces (Python's json, the ET's process_group:init node), so that
    N -> M -> N gives back the recorded text."""
    if '": ' in original or '", ' in original:
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def scaled_groups_json(text: str, recorded: int, target: int) -> str:
    """A process-group JSON list with every world group at ``target`` ranks
    (``group_size``; ``ranks`` when listed, empty meaning all stays empty)."""
    if recorded == target:
        return text
    try:
        groups = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    if not isinstance(groups, list):
        return text
    for g in groups:
        if not isinstance(g, dict):
            continue
        if g.get("group_size") == recorded:
            g["group_size"] = target
        ranks = g.get("ranks")
        if isinstance(ranks, list) and ranks == list(range(recorded)):
            g["ranks"] = list(range(target))
    return _dumps_like(groups, text)


def rewrite_nodes(nodes: Sequence[ChakraNode], recorded: int, target: int,
                  ) -> tuple[list[ChakraNode], RewriteCounts]:
    """The rank's nodes for a ``target``-rank job (see the module doc)."""
    counts = RewriteCounts()
    calls = issuing_calls(nodes) if recorded != target else {}
    out: list[ChakraNode] = []
    for n in nodes:
        if recorded == target:
            out.append(n)
            counts.copied += 1
        elif n.type == NodeType.COMM_COLL_NODE:
            out.append(_scaled_comm(n, calls.get(n.id), recorded, target, counts))
        elif n.type == NodeType.METADATA_NODE and n.name == PROCESS_GROUP_INIT and n.inputs:
            out.append(_scaled_pg_init(n, recorded, target, counts))
        else:
            out.append(n)
            counts.copied += 1
    return out, counts


def _scaled_comm(n: ChakraNode, call: str | None, recorded: int, target: int,
                 counts: RewriteCounts) -> ChakraNode:
    a = attr_dict(n.attrs)
    size = a.get("comm_size")
    if type(size) is not int:
        counts.copied += 1
        return n
    new = scaled_size(size, size_rule(comm_type_of(a), call), recorded, target)
    if new == size:
        counts.copied += 1
        return n
    counts.rescaled += 1
    attrs: list[Attr] = [(k, m, new) if k == "comm_size" else (k, m, v) for k, m, v in n.attrs]
    return msgspec.structs.replace(n, attrs=attrs)


def _scaled_pg_init(n: ChakraNode, recorded: int, target: int,
                    counts: RewriteCounts) -> ChakraNode:
    """The ``process_group:init`` node: its first input is the groups' JSON."""
    assert n.inputs is not None
    values_text, shapes, types = n.inputs
    try:
        values = msgspec.json.decode(values_text)
    except msgspec.DecodeError:
        return n
    if not (isinstance(values, list) and values and isinstance(values[0], str)):
        return n
    new_first = scaled_groups_json(values[0], recorded, target)
    if new_first == values[0]:
        return n
    counts.groups += 1
    values[0] = new_first
    return msgspec.structs.replace(n, inputs=(_dumps_like(values, values_text), shapes, types))


def rank_metadata(md: GlobalMetadata, rank: int, source: int, recorded: int,
                  target: int, hosts: HostSharing = NO_SHARING) -> GlobalMetadata:
    """The metadata of new rank ``rank`` cloned from recorded rank ``source``;
    the CPU stretch of ``hosts`` is from the world the durations were first
    recorded at (a chain of extrapolations does not compound it)."""
    have = attr_dict(md.attrs)
    first_recorded = have.get(SCALEOUT_RECORDED_WORLD_ATTR)
    first_source = have.get(SCALEOUT_SOURCE_RANK_ATTR)
    attrs: list[Attr] = []
    for name, member, value in md.attrs:
        if name in SCALEOUT_ATTRS:  # this extrapolation writes its own
            continue
        if name == "rank":
            value = rank
        elif name == "world_size" and value == recorded:
            value = target
        elif name == "process_groups" and isinstance(value, str):
            value = scaled_groups_json(value, recorded, target)
        attrs.append((name, member, value))
    attrs.append((SCALEOUT_SOURCE_RANK_ATTR, "int64_val",
                  first_source if type(first_source) is int else source))
    measured_at = first_recorded if type(first_recorded) is int else recorded
    attrs.append((SCALEOUT_RECORDED_WORLD_ATTR, "int64_val", measured_at))
    stretch = hosts.cpu_stretch(measured_at, target)
    if stretch != 1.0:
        attrs.append((SCALEOUT_CPU_STRETCH_ATTR, "double_val", stretch))
    hop_delay = hosts.hop_delay_us(target) if target != measured_at else 0.0
    if hop_delay > 0.0:
        attrs.append((SCALEOUT_HOP_DELAY_ATTR, "double_val", hop_delay))
        if hosts.hop_delay_us(measured_at) > 0.0:
            attrs.append((SCALEOUT_RECORDED_CROWDED_ATTR, "bool_val", True))
    host_link = hosts.host_link_gbps(target) if target != measured_at else None
    if host_link is not None:
        attrs.append((SCALEOUT_HOST_LINK_GBPS_ATTR, "double_val", host_link))
    if hosts.uplink_gbps is not None:
        attrs += [(SCALEOUT_RANKS_PER_HOST_ATTR, "int64_val", hosts.uplink_group()),
                  (SCALEOUT_UPLINK_GBPS_ATTR, "double_val", hosts.uplink_gbps),
                  (SCALEOUT_UPLINK_LATENCY_ATTR, "double_val", hosts.uplink_latency_us)]
    return GlobalMetadata(version=md.version, attrs=attrs)


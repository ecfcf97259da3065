"""The bundled gloo DDP pair converted once, and small built jobs of each
parallelism (DDP, FSDP1, FSDP2, hybrid, tensor / pipeline / expert parallel)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import IS_CPU, IS_GPU, node, write_job_ranks
from helpers import convert_gloo_pair

from pt2chakra.chakra.records import Attr, ChakraNode, CollectiveType, GlobalMetadata, NodeType


@pytest.fixture(scope="session")
def gloo_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The bundled 2-rank gloo DDP step, converted (one .et per rank)."""
    return convert_gloo_pair(tmp_path_factory.mktemp("gloo"))


def tensor(tid: int, numel: int) -> list[object]:
    return [tid, tid + 1000, 0, numel, 4, "cpu"]


def call(nid: int, name: str, tid: int, numel: int, start: int) -> ChakraNode:
    """A c10d call on thread 1 whose input is tensor ``tid``."""
    values = json.dumps([[tensor(tid, numel)], "<Object>"])
    n = node(nid, name=name, start=start, dur=5, attrs=[IS_CPU, ("tid", "int64_val", 1)])
    n.inputs = (values, f"[[[{numel}]],[]]", '["GenericList[Tensor(float)]","Object"]')
    return n


def backend(nid: int, name: str, ctype: CollectiveType, size: int, pg: str, tid: int,
            numel: int, start: int, parent: int | None) -> ChakraNode:
    """The backend op (the transfer) of a call; ``parent=None``: no ctrl
    parent (found by its input tensor)."""
    attrs: list[Attr] = [("comm_type", "int64_val", int(ctype)), ("comm_size", "int64_val", size),
                         ("pg_name", "string_val", pg), IS_GPU, ("tid", "int64_val", 1)]
    n = node(nid, name=name, node_type=NodeType.COMM_COLL_NODE, start=start, dur=50,
             ctrl=[] if parent is None else [parent], attrs=attrs)
    n.inputs = (json.dumps([tensor(tid, numel)]), f"[[{numel}]]", '["Tensor(float)"]')
    return n


BLOCK = 4096  # bytes of one FSDP parameter block


def _groups(world: int, extra: list[dict[str, object]]) -> str:
    return json.dumps([{"pg_name": "0", "pg_desc": "default_pg", "ranks": [],
                        "group_size": world}, *extra], separators=(",", ":"))


def rank_graph(kind: str, rank: int, world: int) -> tuple[GlobalMetadata, list[ChakraNode]]:
    """One rank of a small job of ``kind``: ddp, fsdp1, fsdp2, hybrid, tp,
    pp, a2a, orphan (a gather whose backend op has no c10d parent)."""
    nodes: list[ChakraNode] = [node(1, name="forward", start=0, dur=100,
                                    attrs=[IS_CPU, ("tid", "int64_val", 1)])]
    extra: list[dict[str, object]] = []
    t = 200
    if kind == "ddp" or kind == "orphan":
        nodes += [call(2, "c10d::allreduce_", 10, 1024, t),
                  backend(3, "gloo:all_reduce", CollectiveType.ALL_REDUCE, 4096, "0", 10, 1024,
                          t + 1, 2),
                  call(4, "c10d::allgather_", 20, 1, t + 100),
                  backend(5, "gloo:all_gather", CollectiveType.ALL_GATHER, 4 * world, "0", 20, 1,
                          t + 101, None if kind == "orphan" else 4)]
    elif kind in ("fsdp1", "fsdp2"):
        mark = "FSDP::all_gather" if kind == "fsdp2" else "FullyShardedDataParallel.forward"
        nodes.append(node(6, name=mark, start=t - 50, dur=5, attrs=[IS_CPU, ("tid", "int64_val", 1)]))
        nodes += [call(2, "c10d::_allgather_base_", 10, BLOCK // 4 // world, t),
                  backend(3, "gloo:all_gather", CollectiveType.ALL_GATHER, BLOCK, "0", 10,
                          BLOCK // 4 // world, t + 1, 2),
                  call(4, "c10d::_reduce_scatter_base_", 20, BLOCK // 4, t + 100),
                  backend(5, "gloo:all_reduce", CollectiveType.ALL_REDUCE, BLOCK, "0", 20,
                          BLOCK // 4, t + 101, 4)]
        if kind == "fsdp2":  # as FSDP2 records it: under its annotation, on a copied buffer
            nodes[-1] = backend(5, "gloo:all_reduce", CollectiveType.ALL_REDUCE, BLOCK, "0", 30,
                                BLOCK // 4, t + 101, 6)
            nodes[-1].data_deps = [4]
    elif kind == "hybrid":  # shard groups {0,1},{2,3}; replica groups {0,2},{1,3}
        shard, replica = f"s{rank // 2}", f"r{rank % 2}"
        extra = [{"pg_name": shard, "ranks": [rank // 2 * 2, rank // 2 * 2 + 1], "group_size": 2},
                 {"pg_name": replica, "ranks": [rank % 2, rank % 2 + 2], "group_size": 2}]
        nodes += [call(2, "c10d::_allgather_base_", 10, 256, t),
                  backend(3, "gloo:all_gather", CollectiveType.ALL_GATHER, BLOCK, shard, 10, 256,
                          t + 1, 2),
                  call(4, "c10d::allreduce_", 20, 512, t + 100),
                  backend(5, "gloo:all_reduce", CollectiveType.ALL_REDUCE, 2048, replica, 20, 512,
                          t + 101, 4)]
    elif kind == "tp":  # a subgroup of two of the ranks
        pg = f"tp{rank // 2}"
        extra = [{"pg_name": pg, "ranks": [rank // 2 * 2, rank // 2 * 2 + 1], "group_size": 2}]
        nodes += [call(2, "c10d::allreduce_", 10, 1024, t),
                  backend(3, "gloo:all_reduce", CollectiveType.ALL_REDUCE, 4096, pg, 10, 1024,
                          t + 1, 2)]
    elif kind == "pp":
        ntype = NodeType.COMM_SEND_NODE if rank == 0 else NodeType.COMM_RECV_NODE
        nodes.append(node(3, name="gloo:send" if rank == 0 else "gloo:recv", node_type=ntype,
                          start=t, dur=50, attrs=[IS_GPU, ("comm_size", "int64_val", 64),
                                                  ("pg_name", "string_val", "0")]))
    elif kind == "a2a":
        nodes += [call(2, "c10d::alltoall_base_", 10, 1024, t),
                  backend(3, "gloo:all_to_all", CollectiveType.ALL_TO_ALL, 4096, "0", 10, 1024,
                          t + 1, 2)]
    else:
        raise ValueError(kind)
    md = GlobalMetadata(version="0.0.4", attrs=[
        ("rank", "int64_val", rank), ("world_size", "int64_val", world),
        ("process_groups", "string_val", _groups(world, extra)),
        ("step_start_micros", "int64_val", 0), ("step_end_micros", "int64_val", 500 + 10 * rank)])
    return md, sorted(nodes, key=lambda n: n.id)


@pytest.fixture
def built_job(tmp_path: Path) -> Callable[[str, int], list[Path]]:
    """Write a small job of ``kind`` on ``world`` ranks; returns its files."""

    def write(kind: str, world: int) -> list[Path]:
        return write_job_ranks(tmp_path / kind, kind, world, rank_graph)

    return write

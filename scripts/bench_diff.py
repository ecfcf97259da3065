"""CPU time (user + sys) of ``pt2chakra diff`` on two ~100k-node traces.

Without ``--a``/``--b`` it writes two synthetic one-rank traces to a temp
folder: a CPU thread of nested ops (a module, its op, the launch call) that
launch a kernel each on one GPU stream, ~100k nodes; B is A with one op 10x
slower and everything after it pushed back. Prints the figure; the target
is under 5 CPU-s.

    python scripts/bench_diff.py [--nodes 100000] [--a A.et ... --b B.et ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import ChakraNode, GlobalMetadata, NodeType

TARGET_CPU_S = 5.0
NODES_PER_BLOCK = 4  # module, op, launch call, kernel
SLOW_BLOCK_FRACTION = 0.5  # the planted slow op sits halfway through the step


def synthetic_nodes(blocks: int, slow_block: int | None, slow_factor: int) -> list[ChakraNode]:
    nodes: list[ChakraNode] = []
    t = 1_000_000
    gpu_free = t
    last_cpu = last_kernel = None
    for b in range(blocks):
        base = 4 * b + 1
        op_us = 20 * (slow_factor if b == slow_block else 1)
        module, op, launch, kernel = base, base + 1, base + 2, base + 3
        kernel_start = max(gpu_free, t + 2 + op_us + 3)
        cpu = {"is_cpu_op": True, "tid": 1}
        deps_m = ([last_cpu], ["thread_order"]) if last_cpu else ([], [])
        nodes.append(_node(module, f"Layer{b % 48}.forward", t, 2, 2 + op_us + 5, deps_m, cpu))
        nodes.append(_node(op, "aten::linear" if b % 2 else "aten::relu", t + 2, op_us,
                           op_us + 5, ([module], ["caller"]), cpu))
        nodes.append(_node(launch, "cudaLaunchKernel", t + 2 + op_us, 5, 5,
                           ([op], ["caller"]), cpu))
        kdeps = ([launch, last_kernel], ["launch", "stream_order"]) if last_kernel \
            else ([launch], ["launch"])
        nodes.append(_node(kernel, f"gemm_kernel_{b % 7}", kernel_start, 15, None, kdeps,
                           {"is_cpu_op": False, "device": 0, "stream": 7}))
        gpu_free = kernel_start + 15
        last_cpu, last_kernel = launch, kernel
        t += 2 + op_us + 5 + 3
    return nodes


def _node(nid: int, name: str, start: int, dur: int, incl: int | None,
          deps: tuple[list[int], list[str]], attrs: dict[str, object]) -> ChakraNode:
    a = [(k, "bool_val" if isinstance(v, bool) else "int64_val", v) for k, v in attrs.items()]
    if incl is not None:
        a.append(("inclusive_duration_micros", "int64_val", incl))
    if deps[1]:
        a.append(("data_dep_kinds", "string_list", deps[1]))
    caller = [deps[0][0]] if deps[1][:1] == ["caller"] else []
    return ChakraNode(id=nid, name=name, type=NodeType.COMP_NODE, start_time_micros=start,
                      duration_micros=dur, ctrl_deps=caller, data_deps=deps[0], attrs=a)


def write_pair(folder: Path, nodes: int) -> tuple[Path, Path]:
    blocks = nodes // NODES_PER_BLOCK
    md = GlobalMetadata(version="0.0.4", attrs=[("rank", "int64_val", 0)])
    a, b = folder / "bench_a.et", folder / "bench_b.et"
    write_et(a, md, synthetic_nodes(blocks, None, 1))
    write_et(b, md, synthetic_nodes(blocks, int(blocks * SLOW_BLOCK_FRACTION), 10))
    return a, b


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--a", nargs="+", help="A's .et files (default: synthetic)")
    parser.add_argument("--b", nargs="+", help="B's .et files")
    args = parser.parse_args()
    from pt2chakra.diff import diff

    with tempfile.TemporaryDirectory() as tmp:
        if args.a and args.b:
            a_paths, b_paths = args.a, args.b
        else:
            a, b = write_pair(Path(tmp), args.nodes)
            a_paths, b_paths = [str(a)], [str(b)]
        before, wall = cpu_seconds(), time.perf_counter()
        result = diff(a_paths, b_paths)
        spent, wall = cpu_seconds() - before, time.perf_counter() - wall
    nodes = result.matched_nodes + result.only_in_a_nodes
    print(f"diff of two {nodes:,}-node traces: {spent:.2f} CPU-s (user+sys), {wall:.2f} s wall; "
          f"difference {result.difference_us:+.0f} us, first row: {result.rows[0].label} "
          f"({result.rows[0].delta_us:+.0f} us); target < {TARGET_CPU_S:g} CPU-s")
    return 0 if spent < TARGET_CPU_S else 1


if __name__ == "__main__":
    sys.exit(main())

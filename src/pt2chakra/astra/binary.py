"""Run ONE collective (or one send/recv) through a real ASTRA-sim binary.

The checking side of ``astra_collective``: it writes the workload and the exact
configuration that module models, runs the binary and reads each NPU's finish time.
Used by the tests (when ``ASTRA_SIM_BIN`` is set) and ``scripts/astra_collective_grid.py``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from pt2chakra.astra.collective_time import AstraNetwork, AstraSystem, write_astra_configs
from pt2chakra.chakra.io import write_et
from pt2chakra.chakra.records import CHAKRA_VERSION, Attr, ChakraNode, GlobalMetadata, NodeType
from pt2chakra.children import ChildFailed, run_bounded

RUN_TIMEOUT_S = 120
"""One collective runs in well under a second; a hang (e.g. a 0-byte chunk) must not."""
GROUP_ID = "1"
"""ASTRA-sim reserves communicator group 0 for the whole machine."""
NO_GROUPS = "empty"
"""ASTRA-sim's comm-group configuration for a job without communicator
groups (its keyword: every collective on the whole machine)."""
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+)")
_ALARM = re.compile(r"\[(warning|error|critical)\]|warning!", re.IGNORECASE)
USUAL_EXIT_LINE = "Exiting"  # "[system] [warning] Exiting": printed by every run


def aware_binary(unaware: str | os.PathLike[str]) -> Path:
    """The congestion-aware binary sits next to the unaware one (and is used when the
    network says ``congestion_aware``)."""
    path = Path(unaware)
    return path.with_name(path.name.replace("Unaware", "Aware"))


def _write_ranks(prefix: Path, npus: int, nodes_of: dict[int, list[ChakraNode]]) -> None:
    for rank in range(npus):
        md = GlobalMetadata(version=CHAKRA_VERSION, attrs=[
            ("rank", "int64_val", rank), ("world_size", "int64_val", npus)])
        # ASTRA-sim refuses an empty workload: idle ranks get one 0-duration compute
        # node (replayed as 1 ns)
        idle = [_node([], NodeType.COMP_NODE, "idle")]
        write_et(f"{prefix}.{rank}.et", md, nodes_of.get(rank, idle))


def _node(attrs: list[Attr], type_: NodeType, name: str) -> ChakraNode:
    return ChakraNode(id=0, name=name, type=type_, duration_micros=0, data_deps=[],
                      attrs=[("is_cpu_op", "bool_val", False)] + attrs)


class WorkloadRun(NamedTuple):
    """What the binary printed for one workload."""

    finished: dict[int, int]  # NPU -> "finished, C cycles" (1 cycle = 1 ns)
    exposed: dict[int, int]  # NPU -> "exposed communication E cycles"
    warnings: list[str]  # warning / error / critical lines other than its usual exit line


def _execute(binary: str | os.PathLike[str], folder: Path, prefix: Path, groups: str,
             network: AstraNetwork, system: AstraSystem) -> WorkloadRun:
    net, sys_, mem = write_astra_configs(folder, network, system)
    configs = AstraConfigs(net, sys_, mem)
    return run_configured(binary, prefix, groups, configs, network.npus,
                          network.congestion_aware, cwd=folder)


class AstraConfigs(NamedTuple):
    """The three configuration files one ASTRA-sim run reads."""

    network: Path
    system: Path
    memory: Path


def run_configured(binary: str | os.PathLike[str], prefix: str | os.PathLike[str], groups: str,
                   configs: AstraConfigs, npus: int, congestion_aware: bool = False,
                   cwd: str | os.PathLike[str] | None = None,
                   timeout_s: float = RUN_TIMEOUT_S) -> WorkloadRun:
    """Run the binary on configuration files as they are (a written job's);
    ``groups``: a comm-group file or ``empty``. ``cwd``: where ASTRA-sim
    writes its ``log/`` folder."""
    if congestion_aware:
        binary = aware_binary(binary)
    cmd = [os.path.abspath(binary), f"--workload-configuration={prefix}",
           f"--comm-group-configuration={groups}", f"--system-configuration={configs.system}",
           f"--remote-memory-configuration={configs.memory}",
           f"--network-configuration={configs.network}"]
    try:
        done = run_bounded(cmd, timeout_s, cwd=cwd)
    except ChildFailed as exc:
        raise RuntimeError(str(exc)) from None
    found = list(_FINISHED.finditer(done.stdout))
    finished = {int(m[1]): int(m[2]) for m in found}
    if done.returncode != 0 or set(finished) != set(range(npus)):
        what = (f"exited {done.returncode}" if done.returncode != 0 else
                f"reported NPUs {_ids(finished)}, expected 0..{npus - 1}")
        last = ((done.stdout + done.stderr).strip().splitlines() or ["no output"])[-1]
        # first line: what went wrong, with the binary's last line; then its output's tail
        raise RuntimeError(f"{what} (last output: {last.strip()[:200]})\n{' '.join(cmd)}\n"
                           f"{(done.stdout + done.stderr)[-2000:]}")
    exposed = {int(m[1]): int(m[3]) for m in found}
    warnings = [line for line in (done.stdout + done.stderr).splitlines()
                if _ALARM.search(line) and not line.rstrip().endswith(USUAL_EXIT_LINE)]
    return WorkloadRun(finished, exposed, warnings)


def _ids(finished: dict[int, int]) -> str:
    ids = sorted(finished)
    return ", ".join(map(str, ids[:8])) + (" ..." if len(ids) > 8 else "") if ids else "none"


def _run(binary: str | os.PathLike[str], folder: Path, prefix: Path, groups: str,
         network: AstraNetwork, system: AstraSystem) -> dict[int, int]:
    return _execute(binary, folder, prefix, groups, network, system).finished


def run_workload(binary: str | os.PathLike[str], prefix: str | os.PathLike[str],
                 network: AstraNetwork, system: AstraSystem,
                 comm_groups: str | os.PathLike[str] | None = None) -> WorkloadRun:
    """Run ``<prefix>.<npu>.et`` (one per NPU, e.g. an ``astra-sim`` export)
    under exactly the configuration the consumer model replays."""
    groups = os.path.abspath(comm_groups) if comm_groups is not None else NO_GROUPS
    with tempfile.TemporaryDirectory(prefix="astrarun") as tmp:
        return _execute(binary, Path(tmp), Path(os.path.abspath(prefix)), groups, network,
                        system)


def run_collective(binary: str | os.PathLike[str], comm_type: int, size_bytes: int,
                   network: AstraNetwork, system: AstraSystem,
                   ranks: Sequence[int] | None = None) -> dict[int, int]:
    """Cycles (= ns) at which each NPU finished; ``ranks`` makes it a group's collective
    (the other NPUs only run a 1 ns compute node)."""
    attrs: list[Attr] = [("comm_type", "int64_val", comm_type),
                         ("comm_size", "int64_val", size_bytes)]
    members = list(range(network.npus)) if ranks is None else list(ranks)
    if ranks is not None:
        attrs.append(("pg_name", "string_val", GROUP_ID))
    node = _node(attrs, NodeType.COMM_COLL_NODE, "collective")
    with tempfile.TemporaryDirectory(prefix="astracoll") as tmp:
        folder = Path(tmp)
        prefix = folder / "w"
        _write_ranks(prefix, network.npus, {r: [node] for r in members})
        groups = NO_GROUPS
        if ranks is not None:
            groups = os.fspath(folder / "groups.json")
            Path(groups).write_text(json.dumps({GROUP_ID: members}))
        return _run(binary, folder, prefix, groups, network, system)


def run_send(binary: str | os.PathLike[str], size_bytes: int, src: int, dst: int,
             network: AstraNetwork, system: AstraSystem) -> dict[int, int]:
    """Cycles at which each NPU finished one send ``src`` -> ``dst`` and its receive."""
    p2p: list[Attr] = [("comm_src", "int32_val", src), ("comm_dst", "int32_val", dst),
                       ("comm_size", "int64_val", size_bytes), ("comm_tag", "int32_val", 7)]
    with tempfile.TemporaryDirectory(prefix="astracoll") as tmp:
        folder = Path(tmp)
        prefix = folder / "w"
        _write_ranks(prefix, network.npus, {
            src: [_node(p2p, NodeType.COMM_SEND_NODE, "send")],
            dst: [_node(p2p, NodeType.COMM_RECV_NODE, "recv")]})
        return _run(binary, folder, prefix, NO_GROUPS, network, system)

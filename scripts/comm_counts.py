#!/usr/bin/env python3
"""Communication nodes per converted trace, to compare two versions of the
collective rules (issue 34: every collective-bearing trace keeps its counts
or gains the ones it was missing).

    PYTHONPATH=<old>/src python scripts/comm_counts.py before.json
    PYTHONPATH=src       python scripts/comm_counts.py after.json --compare before.json

Converts every shared trace (``../shared/traces``: pairs, host ETs alone,
Kineto traces alone, ``h200``) and every public one of the manifest (each
rank; its folder looked up in ``$PT2CHAKRA_WILD_TRACES``, a list of folders
separated by ``os.pathsep``, then ``../shared/traces/wild``; one found in none
is left out) in this process with whichever pt2chakra is imported, and
writes per conversion: communication nodes (collective, send, receive) and
the COMP nodes whose name is a collective's (a backend op or an NCCL kernel
replayed as compute). ``--compare`` prints the markdown table of
the conversions that carry a collective in either version, and exits 1 when
one lost communication nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces"
WILD = TRACES / "wild"
MANIFEST = ROOT / "tests" / "real_traces" / "wild_traces.json"
WILD_ENV = "PT2CHAKRA_WILD_TRACES"  # the public traces' folder, as scripts/wild_traces.py reads it
HOST, KINETO = "host_et", "kineto"
AS_COMPUTE_CHECK = "collective-as-compute"  # validate's warning: a collective replayed as compute


def _shared_units() -> dict[str, tuple[Path | None, Path | None]]:
    """Name -> (host ET, Kineto trace) of every conversion of the shared traces:
    each pair linked, and each of its files alone."""
    units: dict[str, tuple[Path | None, Path | None]] = {}
    for folder in sorted(p for p in [*TRACES.iterdir(), *(TRACES / "h200").iterdir()]
                         if p.is_dir() and p.name not in ("wild", "h200")):
        name = folder.relative_to(TRACES).as_posix()
        for host in sorted(folder.glob(f"*{HOST}.json*")):
            stem = host.name.split(HOST)[0]
            kineto = next(iter(sorted(folder.glob(f"{stem}{KINETO}.json*"))), None)
            units[f"{name}/{stem}host"] = (host, None)
            if kineto is not None:
                units[f"{name}/{stem}pair"] = (host, kineto)
        for kineto in sorted(folder.glob(f"*{KINETO}.json*")):
            stem = kineto.name.split(KINETO)[0]
            units[f"{name}/{stem}kineto"] = (None, kineto)
    return units


def _wild_roots() -> list[Path]:
    """Where the public traces' folders may be: the environment's, then the shared one."""
    given = [Path(p) for p in os.environ.get(WILD_ENV, "").split(os.pathsep) if p]
    return [*given, WILD]


def _wild_units() -> dict[str, tuple[Path | None, Path | None]]:
    units: dict[str, tuple[Path | None, Path | None]] = {}
    roots = _wild_roots()
    for entry in json.loads(MANIFEST.read_text()):
        folder = next((r / entry["folder"] for r in roots if (r / entry["folder"]).is_dir()), None)
        if folder is None:
            print(f"wild/{entry['name']}: not in {', '.join(map(str, roots))}", file=sys.stderr)
            continue
        for r in entry["ranks"]:
            kineto = folder / r["kineto"]
            units[f"wild/{entry['name']}/rank{r['rank']}/kineto"] = (None, kineto)
            if r.get("host_et"):
                units[f"wild/{entry['name']}/rank{r['rank']}/pair"] = (folder / r["host_et"], kineto)
    return units


def _counts(path: Path) -> dict[str, int]:
    """Communication nodes, COMP nodes named like a collective (a backend op
    that only enqueued its kernel counts too), and what ``validate`` warns
    about: collectives replayed as compute."""
    from pt2chakra.chakra.io import read_et
    from pt2chakra.chakra.records import NodeType
    from pt2chakra.names import is_backend_comm_op, is_nccl_kernel
    from pt2chakra.rules.checks import check_files

    comm = {NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE}
    found = {"comm": 0, "as_compute": 0}
    for node in read_et(path)[1]:
        if node.type in comm:
            found["comm"] += 1
        elif node.type == NodeType.COMP_NODE and (is_backend_comm_op(node.name)
                                                  or is_nccl_kernel(node.name)):
            found["as_compute"] += 1
    found["warned"] = sum(p.check == AS_COMPUTE_CHECK for p in check_files([path]).warnings)
    return found


def measure() -> dict[str, Any]:
    from pt2chakra.conversion.api import convert

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (host, kineto) in {**_shared_units(), **_wild_units()}.items():
            out = Path(tmp) / "out.et"
            try:
                convert(host, kineto, out, progress=False)
                results[name] = _counts(out)
            except Exception as exc:  # an outcome to compare (a refusal too), not a crash
                results[name] = {"error": str(exc).splitlines()[0][:120]}
            print(name, results[name], file=sys.stderr)
    return results


def table(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], bool]:
    lines = ["| conversion | comm nodes before | after | `[collective-as-compute]` before | after |",
             "|---|---|---|---|---|"]
    lost = False
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name, {}), after.get(name, {})
        if not any(d.get("comm") or d.get("as_compute") or d.get("warned") for d in (a, b)):
            continue
        cells = [str(d.get("comm", d.get("error", "-"))) for d in (b, a)]
        warned = [str(d.get("warned", "-")) for d in (b, a)]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {warned[0]} | {warned[1]} |")
        lost |= a.get("comm", 0) < b.get("comm", 0)
    return lines, lost


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("output", help="JSON of this version's counts")
    ap.add_argument("--compare", metavar="BEFORE.json", help="print the table against these")
    args = ap.parse_args()
    after = measure()
    Path(args.output).write_text(json.dumps(after, indent=1, sort_keys=True))
    if args.compare is None:
        return 0
    lines, lost = table(json.loads(Path(args.compare).read_text()), after)
    print("\n".join(lines))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
